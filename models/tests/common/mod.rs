//! What the Token2Wav integration tests share: the tiny golden model's folder and readers of
//! its tensors (the test data is known-good, so a missing tensor panics the test).

use std::path::PathBuf;
use std::sync::Arc;

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{Arm, ContractView, Session, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, SolverParams};
use dcc_runtime::backend::Backend;
use dcc_runtime::ops::GemmPath;
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

/// A tiny golden session's inputs from one of its io files (`io.safetensors`,
/// `io_half.safetensors`): the prompt's tokens followed by their first 3 again (the lookahead the
/// vendor's setup presents), its mel, the speaker embedding and the stream's tokens.
#[allow(
    dead_code,
    reason = "each test crate that includes this module uses part of it"
)]
pub struct Inputs {
    pub prompt: Vec<u32>,
    pub mel: Vec<f32>,
    pub spk: Vec<f32>,
    pub stream: Vec<u32>,
}

#[allow(
    dead_code,
    reason = "each test crate that includes this module uses part of it"
)]
impl Inputs {
    pub fn load(file: &str) -> Inputs {
        let bytes = std::fs::read(dir().join(file)).unwrap();
        Inputs::of(&SafeTensors::deserialize(&bytes).unwrap())
    }

    /// The inputs held by an io file already read (a test that also reads its other tensors).
    pub fn of(io: &SafeTensors<'_>) -> Inputs {
        let mut prompt = tokens(io, "prompt_tokens");
        prompt.extend_from_within(..3);
        Inputs {
            prompt,
            mel: floats(io, "prompt_mel"),
            spk: floats(io, "spk"),
            stream: tokens(io, "stream_tokens"),
        }
    }
}

/// SHA-256 of a mel stream: its chunks' f32 values, little-endian, one after another.
#[allow(
    dead_code,
    reason = "each test crate that includes this module uses part of it"
)]
pub fn mel_sha<M: AsRef<[f32]>>(mels: &[M]) -> String {
    let bytes: Vec<u8> = mels
        .iter()
        .flat_map(|m| m.as_ref().iter().flat_map(|x| x.to_le_bytes()))
        .collect();
    dcc_runtime::sha256_hex(&bytes)
}

/// The tiny golden model's weights and the config they describe.
#[allow(
    dead_code,
    reason = "each test crate that includes this module uses part of it"
)]
pub fn weights() -> (WeightStore, FlowConfig) {
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    (ws, cfg)
}

/// `(launches of chunk 1, mel of chunks 0 and 1, the config)` of one tiny B0 session on `path`
/// (Host backend, `io.safetensors`'s inputs): chunk 1 is a steady-state chunk. `then` runs on
/// the session's flow once the session exists, before its prompt.
#[allow(
    dead_code,
    reason = "each test crate that includes this module uses part of it"
)]
pub fn b0_chunks(path: GemmPath, then: impl FnOnce(&DeviceFlow)) -> (u64, Vec<f32>, FlowConfig) {
    let Inputs {
        prompt,
        mel,
        spk,
        stream,
    } = Inputs::load("io.safetensors");
    let (ws, cfg) = weights();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let limits = DeviceLimits {
        max_call_tokens: prompt.len(),
        carry_frames: contract.keeps.carry.bound(),
    };
    let be: Arc<dyn Backend> = dcc_runtime::backend::host();
    let dev = Arc::new(DeviceFlow::new_on_path(be.clone(), &ws, &cfg, limits, path).unwrap());
    let mut s = Session::new(dev.clone(), contract, Arm::B0, SolverParams::default()).unwrap();
    then(&dev);
    s.prime(&prompt, &mel, &spk).unwrap();
    let mut mels = s.chunk(&stream[..28], &spk, false).unwrap();
    let before = be.eager_launches();
    mels.extend(s.chunk(&stream[25..53], &spk, false).unwrap());
    (be.eager_launches() - before, mels, cfg)
}
