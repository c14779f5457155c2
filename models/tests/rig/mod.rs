//! The tiny-model sessions rig the many-sessions tests share: one `DeviceFlow` over the tiny
//! golden weights and `n` streams, each the golden stream's `variant(k)` (its own prompt,
//! speaker and tokens). A test crate that uses it also declares `mod common;`.

use std::sync::Arc;

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{ContractView, StreamInputs, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig};
use dcc_runtime::backend::Backend;
use dcc_runtime::ops::GemmPath;
use safetensors::SafeTensors;

use super::common::{dir, floats, tokens};

/// One flow, the tiny contract's view, and one input stream per session.
pub struct Rig {
    pub dev: Arc<DeviceFlow>,
    pub contract: ContractView,
    pub streams: Vec<StreamInputs>,
}

/// `sessions` streams over one tiny flow on `be`, its linears on `gemm`.
pub fn tiny(be: Arc<dyn Backend>, gemm: GemmPath, sessions: usize) -> Rig {
    let bytes = std::fs::read(dir().join("io.safetensors")).unwrap();
    let io = SafeTensors::deserialize(&bytes).unwrap();
    let base = StreamInputs {
        prompt_tokens: tokens(&io, "prompt_tokens"),
        prompt_mel: floats(&io, "prompt_mel"),
        spk: floats(&io, "spk"),
        stream: tokens(&io, "stream_tokens"),
    };
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let limits = DeviceLimits {
        max_call_tokens: base.prompt_tokens.len() + 3,
        carry_frames: contract.keeps.carry.bound(),
    };
    let dev = DeviceFlow::new(be, &ws, &cfg, limits)
        .unwrap()
        .with_gemm(gemm);
    let streams = (0..sessions)
        .map(|k| base.variant(k, cfg.vocab).unwrap())
        .collect();
    Rig {
        dev: Arc::new(dev),
        contract,
        streams,
    }
}
