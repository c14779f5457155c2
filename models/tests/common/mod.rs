//! What the Token2Wav integration tests share: the tiny golden model's folder and readers of
//! its tensors (the test data is known-good, so a missing tensor panics the test).

use std::path::PathBuf;

use safetensors::SafeTensors;

/// The tiny golden model's folder (`weights.safetensors`, `io.safetensors`, ...).
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

/// An F32 tensor's values.
pub fn floats(st: &SafeTensors<'_>, name: &str) -> Vec<f32> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// An I32 tensor's values as token ids.
pub fn tokens(st: &SafeTensors<'_>, name: &str) -> Vec<u32> {
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as u32)
        .collect()
}
