//! The streamed inputs of a run: read from the vendor peer's export (`--io`), or a fixed
//! pseudo-random sequence.

use std::path::Path;

use super::Res;
use super::contract::Sizes;
use super::error::BenchError;

pub struct Inputs {
    pub prompt: Vec<u32>,
    pub mel: Vec<f32>,
    pub spk: Vec<f32>,
    pub stream: Vec<u32>,
    /// The vendor's mel of chunk `i` (`feat_<i>`), as many as the file has (up to `chunks`).
    pub feats: Vec<Vec<f32>>,
}

/// Reads the peer's `io.safetensors`: `prompt_tokens` and `stream_tokens` (i32), `prompt_mel`,
/// `spk` and `feat_0`, `feat_1`, … (f32), little-endian. The prompt must have the contract's
/// sizes (the state-rule arena is laid out for exactly that prompt).
pub fn read_io(path: &Path, chunks: usize, sizes: &Sizes) -> Res<Inputs> {
    let bytes = std::fs::read(path).map_err(|error| BenchError::Read {
        path: path.into(),
        error,
    })?;
    let st =
        safetensors::SafeTensors::deserialize(&bytes).map_err(|error| BenchError::Safetensors {
            path: path.into(),
            tensor: None,
            error,
        })?;
    let raw = |n: &str| -> Res<Vec<[u8; 4]>> {
        let t = st.tensor(n).map_err(|error| BenchError::Safetensors {
            path: path.into(),
            tensor: Some(n.into()),
            error,
        })?;
        Ok(t.data()
            .chunks_exact(4)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect())
    };
    let f =
        |n: &str| -> Res<Vec<f32>> { Ok(raw(n)?.into_iter().map(f32::from_le_bytes).collect()) };
    let t = |n: &str| -> Res<Vec<u32>> {
        Ok(raw(n)?
            .into_iter()
            .map(|b| i32::from_le_bytes(b) as u32)
            .collect())
    };
    let mut feats = Vec::new();
    for i in 0..chunks {
        match f(&format!("feat_{i}")) {
            Ok(v) => feats.push(v),
            Err(_) => break,
        }
    }
    let io = Inputs {
        prompt: t("prompt_tokens")?,
        mel: f("prompt_mel")?,
        spk: f("spk")?,
        stream: t("stream_tokens")?,
        feats,
    };
    let want = [
        (
            "prompt_tokens",
            io.prompt.len(),
            sizes.prompt_tokens,
            "PROMPT_TOKENS",
        ),
        (
            "prompt_mel",
            io.mel.len(),
            sizes.prompt_frames * sizes.mel_bins,
            "F_PROMPT × MEL_BINS",
        ),
        ("spk", io.spk.len(), sizes.spk_dim, "SPK_DIM"),
    ];
    for (tensor, got, want, what) in want {
        if got != want {
            return Err(BenchError::InputSize {
                path: path.into(),
                tensor,
                got,
                want,
                what,
            });
        }
    }
    Ok(io)
}

/// Deterministic inputs when no `--io` is given (xorshift; not the peer's draws).
pub fn synthetic_io(chunks: usize, vocab: usize, sizes: &Sizes) -> Inputs {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut tok = |n: usize| (0..n).map(|_| (next() % vocab as u64) as u32).collect();
    let prompt: Vec<u32> = tok(sizes.prompt_tokens);
    let stream: Vec<u32> = tok(chunks * sizes.chunk_tokens + sizes.lookahead_tokens);
    let mut s2 = 0x2545_f491_4f6c_dd1du64;
    let mut unif = move || {
        s2 ^= s2 << 13;
        s2 ^= s2 >> 7;
        s2 ^= s2 << 17;
        (s2 >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    Inputs {
        prompt,
        mel: (0..sizes.prompt_frames * sizes.mel_bins)
            .map(|_| unif())
            .collect(),
        spk: (0..sizes.spk_dim).map(|_| 2.0 * unif()).collect(),
        stream,
        feats: Vec::new(),
    }
}

/// The tokens of chunk `i`: its `chunk_tokens` tokens and the `lookahead_tokens` after them.
pub fn tokens_of<'a>(io: &'a Inputs, sizes: &Sizes, i: usize) -> Res<&'a [u32]> {
    let start = i * sizes.chunk_tokens;
    io.stream
        .get(start..start + sizes.chunk_tokens + sizes.lookahead_tokens)
        .ok_or(BenchError::NoChunk(i))
}
