//! The streamed inputs of a run: read from the vendor peer's export (`--io`), or a fixed
//! pseudo-random sequence.

use std::path::Path;

use super::{CHUNK, LOOKAHEAD, PROMPT_TOKENS, Res};

pub struct Inputs {
    pub prompt: Vec<u32>,
    pub mel: Vec<f32>,
    pub spk: Vec<f32>,
    pub stream: Vec<u32>,
    /// The vendor's mel of chunk `i` (`feat_<i>`), as many as the file has (up to `chunks`).
    pub feats: Vec<Vec<f32>>,
}

/// Reads the peer's `io.safetensors`: `prompt_tokens` and `stream_tokens` (i32), `prompt_mel`,
/// `spk` and `feat_0`, `feat_1`, … (f32), little-endian.
pub fn read_io(path: &Path, chunks: usize) -> Res<Inputs> {
    let p = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("{p}: {e}"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format!("{p}: {e}"))?;
    let raw = |n: &str| -> Res<Vec<[u8; 4]>> {
        let t = st.tensor(n).map_err(|e| format!("{p}: {n}: {e}"))?;
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
    Ok(Inputs {
        prompt: t("prompt_tokens")?,
        mel: f("prompt_mel")?,
        spk: f("spk")?,
        stream: t("stream_tokens")?,
        feats,
    })
}

/// Deterministic inputs when no `--io` is given (xorshift; not the peer's draws).
pub fn synthetic_io(chunks: usize, vocab: usize, mel_bins: usize, spk_dim: usize) -> Inputs {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut tok = |n: usize| (0..n).map(|_| (next() % vocab as u64) as u32).collect();
    let prompt: Vec<u32> = tok(PROMPT_TOKENS);
    let stream: Vec<u32> = tok(chunks * CHUNK + LOOKAHEAD);
    let mut s2 = 0x2545_f491_4f6c_dd1du64;
    let mut unif = move || {
        s2 ^= s2 << 13;
        s2 ^= s2 >> 7;
        s2 ^= s2 << 17;
        (s2 >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    Inputs {
        prompt,
        mel: (0..2 * PROMPT_TOKENS * mel_bins).map(|_| unif()).collect(),
        spk: (0..spk_dim).map(|_| 2.0 * unif()).collect(),
        stream,
        feats: Vec::new(),
    }
}

/// The tokens of chunk `i`: its `CHUNK` tokens and the `LOOKAHEAD` after them.
pub fn tokens_of(io: &Inputs, i: usize) -> Res<&[u32]> {
    io.stream
        .get(i * CHUNK..i * CHUNK + CHUNK + LOOKAHEAD)
        .ok_or_else(|| format!("the input stream has no chunk {i}"))
}
