//! The vocoder's typed errors.

use crate::nn::{LoadError, OpError, WeightError};

/// Why loading or streaming the vocoder failed. Every variant names what was wrong, what was
/// expected and what was found.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum VocoderError {
    /// The weights file could not be read (I/O, not a regular file, too large, not safetensors).
    #[error(transparent)]
    Weights(#[from] WeightError),
    /// A tensor the configuration needs is absent.
    #[error("{file}: missing vocoder tensor `{name}`")]
    Missing { file: String, name: String },
    /// A tensor has another shape than the configuration needs.
    #[error("{file}: vocoder tensor `{name}`: expected shape {expected:?}, found {found:?}")]
    Shape {
        file: String,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
    /// A tensor has another dtype than the vendor computes it in.
    #[error("{file}: vocoder tensor `{name}`: expected dtype {expected}, found {found}")]
    Dtype {
        file: String,
        name: String,
        expected: String,
        found: String,
    },
    /// The noise table is not `[1, rows, harmonics]` with at least one row.
    #[error(
        "{file}: vocoder tensor `noise_table`: expected shape [1, rows > 0, {harmonics}], found {found:?}"
    )]
    NoiseTable {
        file: String,
        harmonics: usize,
        found: Vec<usize>,
    },
    /// The file's metadata lacks a configuration value or holds a malformed one.
    #[error("{file}: vocoder configuration `{key}`: {detail}")]
    Config {
        file: String,
        key: String,
        detail: String,
    },
    /// The configuration is not the streaming causal HiFT the port implements (24 kHz, 480
    /// samples per frame, an 8-frame delay, ...).
    #[error("unsupported vocoder configuration: {what}: expected {expected}, found {found}")]
    Unsupported {
        what: String,
        expected: String,
        found: String,
    },
    /// A mel chunk with another number of mel bins than the model's input channels, or whose
    /// length is not a whole number of frames.
    #[error("mel chunk: expected {expected} mel bins per frame, found {found}")]
    MelWidth { expected: usize, found: String },
    /// `push` after the stream's final chunk.
    #[error("the stream was finalized by its last chunk; open a new stream (reset) to continue")]
    Finalized,
    /// A bounded history would exceed its fixed capacity (a bug of the port's bookkeeping: the
    /// vendor's bounds hold for every input).
    #[error("vocoder state `{what}`: {needed} frames needed, capacity {capacity}")]
    Capacity {
        what: &'static str,
        needed: usize,
        capacity: usize,
    },
    /// History extents that no stream of the vendor holds together between calls (a call's
    /// plan is rebuilt from them: see the stream's class).
    #[error(
        "vocoder state: a mel history of {mel} frames with a source history of {src} frames is not a state of the stream"
    )]
    State { mel: usize, src: usize },
    /// The contract the vocoder is served under lacks what the port needs, or declares it
    /// otherwise than the model holds it.
    #[error("vocoder contract: {what}: expected {expected}, found {found}")]
    Contract {
        what: String,
        expected: String,
        found: String,
    },
    /// The vocoder produced a non-finite sample (the vendor raises on it too).
    #[error("the vocoder returned non-finite audio: sample {index} of the chunk is {value}")]
    NonFinite { index: usize, value: f32 },
    /// An op refused its operands.
    #[error("vocoder op: {0}")]
    Op(#[from] OpError),
    /// The backend refused an allocation, copy or launch.
    #[error("vocoder device: {0}")]
    Device(#[from] dcc_runtime::Error),
    #[error("vocoder load: {0}")]
    Load(#[from] LoadError),
}
