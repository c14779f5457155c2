//! The streamed inputs of a run: read from the vendor peer's export (`--io`), or a fixed
//! pseudo-random sequence.

use std::path::Path;

use dcc_models::nn::weights::read_regular_file;
use safetensors::Dtype;

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

/// The largest `--io` file read (the tiny export is a few MiB; the full model's a few tens);
/// checked before reading.
pub const MAX_IO_BYTES: u64 = 1 << 30;

/// Reads the peer's `io.safetensors`: `prompt_tokens` and `stream_tokens` (I32), `prompt_mel`,
/// `spk` and `feat_0`, `feat_1`, … (F32), little-endian; a regular file of at most
/// [`MAX_IO_BYTES`]. Every tensor's dtype is checked. The prompt must have the contract's sizes
/// (the state-rule arena is laid out for exactly that prompt).
pub fn read_io(path: &Path, chunks: usize, sizes: &Sizes) -> Res<Inputs> {
    let bytes = read_regular_file(path, MAX_IO_BYTES).map_err(BenchError::IoFile)?;
    let st =
        safetensors::SafeTensors::deserialize(&bytes).map_err(|error| BenchError::Safetensors {
            path: path.into(),
            tensor: None,
            error,
        })?;
    let raw = |n: &str, want: Dtype| -> Res<Vec<[u8; 4]>> {
        let t = st.tensor(n).map_err(|error| BenchError::Safetensors {
            path: path.into(),
            tensor: Some(n.into()),
            error,
        })?;
        if t.dtype() != want {
            return Err(BenchError::InputDtype {
                path: path.into(),
                tensor: n.into(),
                want,
                got: t.dtype(),
                shape: t.shape().to_vec(),
            });
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect())
    };
    let f = |n: &str| -> Res<Vec<f32>> {
        Ok(raw(n, Dtype::F32)?
            .into_iter()
            .map(f32::from_le_bytes)
            .collect())
    };
    let t = |n: &str| -> Res<Vec<u32>> {
        Ok(raw(n, Dtype::I32)?
            .into_iter()
            .map(|b| i32::from_le_bytes(b) as u32)
            .collect())
    };
    let mut feats = Vec::new();
    // The references end at the first absent `feat_i`; one of another dtype is an error.
    for i in 0..chunks {
        let name = format!("feat_{i}");
        if st.tensor(&name).is_err() {
            break;
        }
        feats.push(f(&name)?);
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
            sizes
                .prompt_frames
                .checked_mul(sizes.mel_bins)
                .ok_or(BenchError::Overflow("F_PROMPT × MEL_BINS"))?,
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
pub fn synthetic_io(chunks: usize, vocab: usize, sizes: &Sizes) -> Res<Inputs> {
    let stream_len = chunks
        .checked_mul(sizes.chunk_tokens)
        .and_then(|n| n.checked_add(sizes.lookahead_tokens))
        .ok_or(BenchError::Overflow("the synthetic token stream's length"))?;
    let mel_len = sizes
        .prompt_frames
        .checked_mul(sizes.mel_bins)
        .ok_or(BenchError::Overflow("the synthetic prompt mel's length"))?;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut tok = |n: usize| (0..n).map(|_| (next() % vocab as u64) as u32).collect();
    let prompt: Vec<u32> = tok(sizes.prompt_tokens);
    let stream: Vec<u32> = tok(stream_len);
    let mut s2 = 0x2545_f491_4f6c_dd1du64;
    let mut unif = move || {
        s2 ^= s2 << 13;
        s2 ^= s2 >> 7;
        s2 ^= s2 << 17;
        (s2 >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    Ok(Inputs {
        prompt,
        mel: (0..mel_len).map(|_| unif()).collect(),
        spk: (0..sizes.spk_dim).map(|_| 2.0 * unif()).collect(),
        stream,
        feats: Vec::new(),
    })
}

/// The tokens of chunk `i`: its `chunk_tokens` tokens and the `lookahead_tokens` after them.
pub fn tokens_of<'a>(io: &'a Inputs, sizes: &Sizes, i: usize) -> Res<&'a [u32]> {
    let start = i.checked_mul(sizes.chunk_tokens);
    let end = start.and_then(|s| {
        s.checked_add(sizes.chunk_tokens)?
            .checked_add(sizes.lookahead_tokens)
    });
    match (start, end) {
        (Some(s), Some(e)) => io.stream.get(s..e).ok_or(BenchError::NoChunk(i)),
        _ => Err(BenchError::NoChunk(i)),
    }
}
