//! Rust port of the Token2Wav flow decoder (Step-Audio2 / MiniCPM-o 4.5; vendor module
//! `stepaudio2.cosyvoice2` of minicpmo-utils 1.0.7): token embedding →
//! `UpsampleConformerEncoderV2` (streaming caches) → `encoder_proj` (`mu`) →
//! `CausalConditionalCFM` (Euler, cosine schedule, CFG as a batch of 2, noise from the fixed
//! table at the cache offset) over the DiT estimator → mel.
//!
//! The arithmetic runs through the slice functions of `dcc_kernels`' op families (the bodies of
//! the kernels' host twins); this module owns the orchestration and the streaming state.
//!
//! ```no_run
//! use dcc_models::token2wav::{Flow, Retention, SolverParams};
//! let flow = Flow::load("weights.safetensors").unwrap();
//! let solver = SolverParams::default();
//! # let (prompt, mel, spk, chunk) = (vec![0u32; 154], vec![0f32; 302 * 80], vec![0f32; 192], vec![0u32; 28]);
//! let mut cache = flow.setup_cache(&prompt, &mel, &spk, &solver).unwrap();
//! let feat = flow.inference_chunk(&chunk, &spk, &mut cache, false, &solver).unwrap(); // [80, 50]
//! cache.retain(flow.config(), &Retention::paper(302, 100));
//! ```

mod config;
mod device;
mod dit;
mod encoder;
mod flow;
mod layers;
mod retention;
pub mod serve;
mod weights;

pub use config::{DitConfig, EncoderConfig, FlowConfig};
pub use device::{
    Contexts, DeviceFlow, DeviceLimits, DeviceState, EncoderIo, FlowIo, ProfileRow, STOCK_FRAMES,
    STOCK_STEPS, StateStore,
};
pub use encoder::ConformerCache;
pub use flow::{EstimatorCache, Flow, FlowCache, SolverParams, cosine_t_span};
pub use retention::{Retention, RetentionOrder, Segments};
pub use weights::{Tensor, WeightStore};

use std::fmt;

/// Relative L2 error `‖got − want‖ / ‖want‖`, summed in f64 in element order (the metric the
/// golden test, the arms test and `dcc-bench check` report); `f64::INFINITY` when the lengths
/// differ.
pub fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let num: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| (*a as f64 - *b as f64).powi(2))
        .sum();
    let den: f64 = want.iter().map(|b| (*b as f64).powi(2)).sum();
    (num / den).sqrt()
}

/// Everything that can go wrong loading or running the flow.
#[derive(Clone, Debug, PartialEq)]
pub enum FlowError {
    Io(String),
    /// Not a readable safetensors image.
    Format(String),
    /// A state_dict entry is absent.
    Missing(String),
    Shape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    /// The weights do not describe a supported configuration.
    Config(String),
    /// An input has the wrong length or an out-of-range value.
    Input(String),
    /// The runtime backend refused an operation.
    Device(String),
}

impl From<dcc_runtime::Error> for FlowError {
    fn from(e: dcc_runtime::Error) -> Self {
        FlowError::Device(e.to_string())
    }
}

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FlowError::Io(s) => write!(f, "i/o: {s}"),
            FlowError::Format(s) => write!(f, "not a safetensors file: {s}"),
            FlowError::Missing(s) => write!(f, "missing tensor `{s}`"),
            FlowError::Shape {
                name,
                expected,
                found,
            } => {
                write!(
                    f,
                    "tensor `{name}`: expected shape {expected:?}, found {found:?}"
                )
            }
            FlowError::Config(s) => write!(f, "unsupported weights: {s}"),
            FlowError::Input(s) => write!(f, "bad input: {s}"),
            FlowError::Device(s) => write!(f, "device: {s}"),
        }
    }
}

impl std::error::Error for FlowError {}
