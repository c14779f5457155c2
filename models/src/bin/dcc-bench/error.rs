//! Why a `dcc-bench` run failed (exit code 1). Every message includes the error it wraps, so the
//! binary prints `{e}` alone and `source()` does not repeat it.

use std::path::PathBuf;

use dcc_models::nn::WeightError;
use dcc_models::speech::SpeechError;
use dcc_models::token2wav::FlowError;
use dcc_runtime::stats::StatsError;
use safetensors::{Dtype, SafeTensorError};

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The CUDA backend could not be opened (no driver, no GPU, ...).
    #[error("CUDA: {0}")]
    Cuda(dcc_runtime::Error),
    /// A backend operation of the bench itself failed (synchronize, preload, spin, markers).
    #[error("{0}")]
    Runtime(dcc_runtime::Error),
    /// Loading the weights, selecting the adapter or running the flow failed; `arm` names the
    /// arm whose session failed.
    #[error("{}{error}", arm.map(|a| format!("{a}: ")).unwrap_or_default())]
    Flow {
        arm: Option<&'static str>,
        error: FlowError,
    },
    /// An arm's tokens-to-PCM stream failed (the flow, the vocoder, or their composition).
    #[error("{arm}: {error}")]
    Speech {
        arm: &'static str,
        error: Box<SpeechError>,
    },
    /// Loading the vocoder, or composing it with the flow, failed.
    #[error("{0}")]
    Vocoder(Box<SpeechError>),
    /// The vocoder weights the run needs are not there.
    #[error(
        "{}: no vocoder weights there{}; pass --vocoder-weights FILE, or --no-vocoder to run the \
         flow alone",
        path.display(),
        if *explicit { " (--vocoder-weights)" } else { " (looked for beside --weights)" }
    )]
    NoVocoder { path: PathBuf, explicit: bool },
    /// The vendor's PCM beside `--io` is not a regular file, is too large, or could not be
    /// read.
    #[error("PCM reference {0}")]
    PcmFile(WeightError),
    /// `--io` is not a regular file, is too large, or could not be read (the message names it).
    #[error("--io {0}")]
    IoFile(WeightError),
    /// An `--io` tensor has another dtype than the inputs need.
    #[error("{}: tensor `{tensor}` has dtype {got:?} (shape {shape:?}); expected {want:?}", path.display())]
    InputDtype {
        path: PathBuf,
        tensor: String,
        want: Dtype,
        got: Dtype,
        shape: Vec<usize>,
    },
    /// `--io` is not a safetensors file, or lacks a tensor.
    #[error("{}: {}{error}", path.display(), tensor.as_ref().map(|t| format!("{t}: ")).unwrap_or_default())]
    Safetensors {
        path: PathBuf,
        tensor: Option<String>,
        error: SafeTensorError,
    },
    /// An `--io` tensor's size differs from the contract's.
    #[error("{}: {tensor} has {got} values; the contract wants {want} ({what})", path.display())]
    InputSize {
        path: PathBuf,
        tensor: &'static str,
        got: usize,
        want: usize,
        what: &'static str,
    },
    /// The token stream ends before chunk `.0`.
    #[error("the input stream has no chunk {0}")]
    NoChunk(usize),
    /// `check` asks for more chunks than `--io` has references for.
    #[error("--io has {have} feat_i tensors, --chunks asks for {want}")]
    MissingReferences { have: usize, want: usize },
    /// A timing statistic has no value (a NaN sample).
    #[error("{arm}: {what}: {error}")]
    Stats {
        arm: &'static str,
        what: &'static str,
        error: StatsError,
    },
    /// The committed generated module and the adapter's expansion come from different specs.
    #[error(
        "contract `{family}`: the generated module is stale (spec SHA-256 {generated}, the \
         adapter's {adapter}); regenerate it with `dcc compile`"
    )]
    StaleContract {
        family: &'static str,
        generated: &'static str,
        adapter: &'static str,
    },
    /// The weights' dimensions (read from their shapes) differ from the contract's.
    #[error("contract `{family}` does not fit the weights: {mismatches}")]
    Dims {
        family: &'static str,
        mismatches: String,
    },
    /// A size computed from flags or a file does not fit in `usize`.
    #[error("{0} overflows")]
    Overflow(&'static str),
    /// The contract's carry keeps other frame counts than its quantities declare.
    #[error(
        "contract `{family}`: its carry keeps {kept_prompt} + {kept_retained} frames, its \
         quantities say F_PROMPT = {f_prompt}, F_RETAINED = {f_retained}"
    )]
    Retention {
        family: &'static str,
        kept_prompt: usize,
        kept_retained: usize,
        f_prompt: usize,
        f_retained: usize,
    },
    /// An op of `dcc-bench kernels` refused its operands.
    #[error("{0}")]
    Op(dcc_runtime::ops::OpError),
    /// The results could not be written to stdout (closed pipe, full disk): exit code 2.
    #[error("stdout: {0}")]
    Stdout(std::io::Error),
    /// The progress bar's template was refused.
    #[error("progress bar: {0}")]
    Progress(indicatif::style::TemplateError),
    /// The results could not be serialized.
    #[error("JSON: {0}")]
    Json(serde_json::Error),
    /// `--json-out` could not be written.
    #[error("{}: {error}", path.display())]
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
}

// `From` by hand, not `#[from]`: the message already includes the wrapped error (module docs).
impl From<dcc_runtime::Error> for BenchError {
    fn from(e: dcc_runtime::Error) -> Self {
        BenchError::Runtime(e)
    }
}

impl From<FlowError> for BenchError {
    fn from(error: FlowError) -> Self {
        BenchError::Flow { arm: None, error }
    }
}

impl From<dcc_runtime::ops::OpError> for BenchError {
    fn from(e: dcc_runtime::ops::OpError) -> Self {
        BenchError::Op(e)
    }
}
