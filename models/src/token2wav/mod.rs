//! Rust port of the Token2Wav flow decoder (Step-Audio2 / MiniCPM-o 4.5; vendor module
//! `stepaudio2.cosyvoice2` of minicpmo-utils 1.0.7) on a runtime backend, over the [`crate::nn`]
//! layers: token embedding → `UpsampleConformerEncoderV2` (streaming caches) →
//! `encoder_proj` (`mu`) → `CausalConditionalCFM` (Euler, cosine schedule, CFG as a batch of 2,
//! noise from the fixed table at the cache offset) over the DiT estimator → mel.
//!
//! [`DeviceFlow`] holds the weights and workspace; a session's streaming state is a
//! [`DeviceState`] whose shapes and retention come from the contract ([`state`]). The contract's
//! callables `encoder` and `flow` are [`DeviceFlow::encoder_call`] and
//! [`DeviceFlow::flow_call`] over explicit I/O ([`EncoderIo`], [`FlowIo`]); [`serve`] wraps
//! them in the replay engine. The Host backend is the CPU reference; the vendor's golden outputs
//! (`testdata/token2wav_tiny`) are the truth.
//!
//! ```no_run
//! use dcc_models::nn::WeightStore;
//! use dcc_models::token2wav::serve::{ContractView, Token2WavTiny};
//! use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, SolverParams};
//! let ws = WeightStore::load("weights.safetensors").unwrap();
//! let cfg = FlowConfig::from_weights(&ws).unwrap();
//! let contract = ContractView::of::<Token2WavTiny>().unwrap();
//! let limits = DeviceLimits { max_call_tokens: 154, carry_frames: 402 };
//! let dev = DeviceFlow::new(dcc_runtime::backend::host(), &ws, &cfg, limits).unwrap();
//! let mut st = dev.new_state_in_arena(SolverParams::default(), &contract.arena).unwrap();
//! # let (prompt, mel, spk, chunk) = (vec![0u32; 154], vec![0f32; 302 * 80], vec![0f32; 192], vec![0u32; 28]);
//! dev.setup_cache(&mut st, &prompt, &mel, &spk).unwrap();
//! let feat = dev.inference_chunk(&mut st, &chunk, &spk, false).unwrap(); // [80, 50]
//! ```

mod batch;
mod batch_encoder;
mod config;
mod dit;
mod encoder;
mod flow;
pub mod half;
mod io;
pub mod serve;
mod solver;
pub mod state;
mod store;
mod work;

pub use batch::{BatchIo, BatchSizes, BatchedFlow, Member};
pub use batch_encoder::{BatchEncoderIo, EncoderMember};
pub use config::{DitConfig, EncoderConfig, FlowConfig};
pub use flow::{DeviceFlow, SolverParams};
pub use io::{EncoderIo, FlowIo};
pub use solver::cosine_t_span;
pub use state::{
    Contexts, DeviceState, Keeps, KvRaw, STOCK_FRAMES, STOCK_STEPS, StateStore, StateTensors,
    StockBuffers, region_shape,
};
pub use work::DeviceLimits;

use crate::nn::{LoadError, OpError, WeightError};

/// Relative L2 error `‖got − want‖ / ‖want‖`, summed in f64 in element order (the metric the
/// golden test, the arms test and `dcc-bench check` report). Slices of different lengths are
/// an error, not a number: no error value could honestly stand for "not comparable".
pub fn rel_l2(got: &[f32], want: &[f32]) -> Result<f64, LengthMismatch> {
    if got.len() != want.len() {
        return Err(LengthMismatch {
            got: got.len(),
            want: want.len(),
        });
    }
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
        .sum();
    let den: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
    Ok((num / den).sqrt())
}

/// [`rel_l2`] of slices of different lengths.
#[derive(Copy, Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot compare {got} values with {want} reference values")]
pub struct LengthMismatch {
    pub got: usize,
    pub want: usize,
}

/// Everything that can go wrong loading or running the flow. Lower layers' errors are kept as
/// typed sources (`Device`, `Op`), never formatted into strings.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FlowError {
    /// The weights file could not be read, or lacks a tensor of the dtype and shape the
    /// configuration needs (the message names the file and the tensor).
    #[error("weights: {0}")]
    Weight(#[from] WeightError),
    /// The weights do not describe a supported configuration.
    #[error("unsupported weights: {0}")]
    Config(String),
    /// An input has the wrong length or an out-of-range value.
    #[error("bad input: {0}")]
    Input(String),
    /// A session call before the session was primed (`prime` first); nothing was run.
    #[error("session not primed: call `prime` first")]
    NotPrimed,
    /// A session call after an earlier call failed once device work had begun: the session's
    /// state is half-written, so it refuses every call until `prime` succeeds again.
    /// Holds the error that failed it.
    #[error("session failed ({0}); `prime` it again")]
    SessionFailed(Box<FlowError>),
    /// The contract the adapter's attribute expanded and the generated module it reads are
    /// from different specs.
    #[error(
        "the adapter was expanded from {spec} with sha256 {embedded}, `dcc_generated::{module}` \
         is from sha256 {generated}; regenerate it (`cargo run -p dcc-compiler --bin dcc -- \
         compile {spec} -o generated/src/{module}.rs`) and rebuild"
    )]
    Fingerprint {
        module: &'static str,
        spec: &'static str,
        embedded: &'static str,
        generated: &'static str,
    },
    /// A session asked for an operating point its contract does not declare.
    #[error("contract `{family}` has no operating point `{point}` (its points: {known})")]
    UnknownPoint {
        family: &'static str,
        point: String,
        /// The points it has, `base` first, comma-separated.
        known: String,
    },
    /// The runtime backend refused an operation.
    #[error("device: {0}")]
    Device(#[from] dcc_runtime::Error),
    /// An op refused its operands.
    #[error("op: {0}")]
    Op(#[from] OpError),
}

impl From<LoadError> for FlowError {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Weight(e) => e.into(),
            LoadError::Device(e) => e.into(),
        }
    }
}
