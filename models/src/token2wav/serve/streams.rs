//! The inputs of one stream, and the distinct streams the multi-session harness and tests derive
//! from one set of inputs.
//!
//! Many sessions run side by side are only a test of isolation if each sees other data: a
//! session that read another's state by mistake would still emit the right bits if every
//! session had the same prompt, speaker and tokens. [`StreamInputs::variant`] derives stream
//! `k` from a base (the peer's `io.safetensors`, or the bench's synthetic inputs)
//! deterministically, changing all three and keeping every size, so every variant is a valid
//! stream of the same contract:
//!
//! * **prompt tokens** rotated left by `3·k` places (cyclically), then every id shifted like the
//!   stream's;
//! * **stream tokens**: every id `t` becomes `(t + 7919·k) mod vocab` (7919 is prime, so the
//!   shift is non-zero for every `k` below the vocabulary size when that does not divide it);
//! * **prompt mel**: `m + 0.01·k` (finite for finite `m`);
//! * **speaker embedding**: `s_j + 0.05·k·((j mod 7) − 3) / 3`.
//!
//! Stream 0 is the base itself.

use super::super::FlowError;

/// What one stream reads: its prompt (tokens and mel), its speaker, its token stream.
#[derive(Clone, Debug, PartialEq)]
pub struct StreamInputs {
    /// Prompt tokens (without the lookahead the prompt call appends).
    pub prompt_tokens: Vec<u32>,
    /// Prompt mel `[frames, mel]`.
    pub prompt_mel: Vec<f32>,
    /// Speaker embedding.
    pub spk: Vec<f32>,
    /// Token stream the chunks are cut from.
    pub stream: Vec<u32>,
}

/// Places the prompt tokens rotate by per stream index.
const PROMPT_ROTATION: usize = 3;
/// Token id shift per stream index (a prime).
const TOKEN_SHIFT: u64 = 7919;
/// Prompt mel offset per stream index.
const MEL_OFFSET: f32 = 0.01;
/// Speaker perturbation scale per stream index.
const SPK_SCALE: f32 = 0.05;

impl StreamInputs {
    /// Stream `k` derived from `self` (see the module docs); `vocab` is the flow's vocabulary.
    /// Refuses a token of `self` outside the vocabulary and a non-finite mel or speaker value
    /// (a variant of bad inputs would hide where they came from).
    pub fn variant(&self, k: usize, vocab: usize) -> Result<StreamInputs, FlowError> {
        if vocab == 0 {
            return Err(FlowError::Input("an empty vocabulary".into()));
        }
        if let Some(t) = self
            .prompt_tokens
            .iter()
            .chain(&self.stream)
            .find(|&&t| t as usize >= vocab)
        {
            return Err(FlowError::Input(format!(
                "token {t} outside the vocabulary of {vocab}"
            )));
        }
        if let Some(v) = self
            .prompt_mel
            .iter()
            .chain(&self.spk)
            .find(|v| !v.is_finite())
        {
            return Err(FlowError::Input(format!(
                "a prompt mel or speaker value is {v}"
            )));
        }
        let shift = ((k as u64 % vocab as u64) * (TOKEN_SHIFT % vocab as u64)) % vocab as u64;
        let tok = |t: u32| ((t as u64 + shift) % vocab as u64) as u32;
        let mut prompt_tokens = self.prompt_tokens.clone();
        if !prompt_tokens.is_empty() {
            let r = (k % prompt_tokens.len()) * PROMPT_ROTATION % prompt_tokens.len();
            prompt_tokens.rotate_left(r);
        }
        let kf = k as f32;
        Ok(StreamInputs {
            prompt_tokens: prompt_tokens.into_iter().map(tok).collect(),
            prompt_mel: self
                .prompt_mel
                .iter()
                .map(|m| m + MEL_OFFSET * kf)
                .collect(),
            spk: self
                .spk
                .iter()
                .enumerate()
                .map(|(j, s)| s + SPK_SCALE * kf * ((j % 7) as f32 - 3.0) / 3.0)
                .collect(),
            stream: self.stream.iter().map(|&t| tok(t)).collect(),
        })
    }

    /// The prompt call's tokens: the prompt, then its own first `lookahead` tokens as the
    /// lookahead (as the vendor's `setup_cache` is called).
    pub fn prompt_call(&self, lookahead: usize) -> Vec<u32> {
        let mut p = self.prompt_tokens.clone();
        p.extend_from_within(..lookahead.min(self.prompt_tokens.len()));
        p
    }

    /// Chunk `i`'s tokens: `chunk` tokens from `i · chunk` and the `lookahead` after them;
    /// `None` past the stream's end.
    pub fn chunk(&self, i: usize, chunk: usize, lookahead: usize) -> Option<&[u32]> {
        let start = i.checked_mul(chunk)?;
        let end = start.checked_add(chunk)?.checked_add(lookahead)?;
        self.stream.get(start..end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> StreamInputs {
        StreamInputs {
            prompt_tokens: (0..10).collect(),
            prompt_mel: vec![0.5; 8],
            spk: vec![1.0; 14],
            stream: (100..140).collect(),
        }
    }

    #[test]
    fn stream_zero_is_the_base_and_others_differ_in_every_input() {
        let b = base();
        assert_eq!(b.variant(0, 6561).unwrap(), b);
        let v = (1..8)
            .map(|k| b.variant(k, 6561).unwrap())
            .collect::<Vec<_>>();
        for (i, x) in v.iter().enumerate() {
            assert_eq!(x.prompt_tokens.len(), b.prompt_tokens.len());
            assert_eq!(x.stream.len(), b.stream.len());
            assert_eq!(x.prompt_mel.len(), b.prompt_mel.len());
            assert_eq!(x.spk.len(), b.spk.len());
            assert_ne!(x.prompt_tokens, b.prompt_tokens, "stream {}", i + 1);
            assert_ne!(x.stream, b.stream, "stream {}", i + 1);
            assert_ne!(x.prompt_mel, b.prompt_mel, "stream {}", i + 1);
            assert_ne!(x.spk, b.spk, "stream {}", i + 1);
            assert!(x.stream.iter().all(|&t| t < 6561));
            for y in &v[i + 1..] {
                assert_ne!(x.stream, y.stream);
            }
        }
        // deterministic
        assert_eq!(b.variant(3, 6561).unwrap(), b.variant(3, 6561).unwrap());
    }

    #[test]
    fn bad_bases_are_refused() {
        let mut b = base();
        b.stream[3] = 6561;
        assert!(b.variant(1, 6561).is_err());
        let mut b = base();
        b.spk[0] = f32::NAN;
        assert!(b.variant(1, 6561).is_err());
        assert!(base().variant(1, 0).is_err());
    }

    #[test]
    fn chunks_and_the_prompt_call() {
        let b = base();
        assert_eq!(b.chunk(1, 25, 3), None);
        assert_eq!(
            b.chunk(0, 10, 3).unwrap(),
            &(100..113).collect::<Vec<_>>()[..]
        );
        assert_eq!(b.chunk(usize::MAX, 25, 3), None);
        let p = b.prompt_call(3);
        assert_eq!(p.len(), 13);
        assert_eq!(&p[10..], &[0, 1, 2]);
    }
}
