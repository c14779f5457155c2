//! The command line of `dcc-bench` (clap derive), and the checks clap cannot express per flag.
//!
//! Every value is checked here, before the weights are loaded, so a typo never costs a run:
//! counts are range-checked, the tolerance must be a finite non-negative number, the arm list
//! must not repeat an arm, and `--json-out` may neither be a directory nor name the `--weights`
//! or `--io` file (it is replaced at the end of the run).

use std::path::{Path, PathBuf};

use clap::builder::RangedU64ValueParser;
use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use dcc_models::token2wav::serve::Arm;

use super::attention::AttentionArgs;
use super::audio::{VocoderArgs, VocoderFile, WavArgs, WavOut};
use super::kernels::KernelsArgs;
use super::sessions::SessionsArgs;

/// The most chunks one pass may stream (`--chunks`, `--warmup`). A chunk is one second of
/// audio, so this is over an hour per arm: far more samples than a stable p95 needs (a few
/// hundred), and still bounded in memory: the measured pass keeps every chunk's mel for its
/// SHA-256 (16 KiB per chunk of 50 frames × 80 bins, 64 MiB at the bound) and the JSON keeps
/// one wall time per chunk.
pub const MAX_CHUNKS: usize = 4096;

/// The most device-busy repetitions (`--busy-reps`). Each one first queues a spin kernel of
/// 2·10⁸ cycles (~0.1 s on an H100/H200) so the chunk's work is measured back to back; 100
/// repetitions are ~10 s of spinning per arm, and a median over more adds nothing.
pub const MAX_BUSY_REPS: usize = 100;

#[derive(Parser, Debug)]
#[command(
    name = "dcc-bench",
    version,
    about = "Token2Wav flow decoder: the six-arm replay/state-rule factorial, and correctness",
    long_about = "Token2Wav flow decoder: the six-arm replay/state-rule factorial, and correctness.\n\n\
The arms cross two mechanisms of the native-clock runtime:\n  \
B0   eager, the vendor's stock state (a 16 x 1000-frame envelope, kept frames copied out)\n  \
S    eager, state rule (every state region at a fixed address in the contract's arena)\n  \
R    stock state, one CUDA graph per solver step (exact-shape replay, step clock)\n  \
Rc   stock state, one CUDA graph per chunk (chunk clock)\n  \
SR   state rule + step-clock replay\n  \
SRc  state rule + chunk-clock replay\n\
Every arm must emit B0's mel bit for bit, and with the vocoder B0's PCM.\n\n\
With the vocoder (the default; weights from vocoder.safetensors beside --weights, or\n\
--vocoder-weights; --no-vocoder runs the flow alone), every arm streams tokens to 24 kHz PCM\n\
through dcc_models::speech, the API an application calls.\n\n\
Progress goes to stderr; results to stdout (a table, or one JSON object with --format json).",
    after_help = "Examples:\n  \
dcc-bench token2wav --weights full/weights.safetensors --io full/io.safetensors --contract token2wav\n  \
dcc-bench token2wav --weights W --arms B0,SRc --chunks 48 --format json --json-out bench.json\n  \
dcc-bench token2wav --backend host --weights models/testdata/token2wav_tiny/weights.safetensors \\\n      \
--contract token2wav_tiny --chunks 2 --warmup 2 --wav out.wav\n  \
dcc-bench check --weights models/testdata/token2wav_tiny/weights.safetensors \\\n      \
--io models/testdata/token2wav_tiny/io.safetensors --contract token2wav_tiny --chunks 6 --tol 1e-4\n\n\
Exit codes: 0 success (check: every chunk within --tol, and, when a pcm.safetensors lies beside\n\
--io, the vocoder's PCM of the vendor's mel within --pcm-tol of the vendor's PCM (and each arm's\n\
end-to-end PCM within --e2e-pcm-tol when given); both commands: every arm's mel and PCM = B0's,\n\
every mel value finite), 1 a failed check or a run error, 2 usage or an unwritable stdout (a closed pipe)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Time the six arms (state rule × replay granularity).
    ///
    /// Per arm: a warm-up pass (prime with the prompt, then --warmup chunks: every shape class is
    /// probed and captured here), then the measured pass (prime again, --chunks chunks, then the
    /// vocoder's final flush). Reports wall p50/p95 ms per chunk of the flow (inputs uploaded,
    /// callables run, mel read back), launches and device kernels per chunk (with the vocoder:
    /// its launches too), steady-state eager fallbacks by reason, capture ms, peak device MiB
    /// (runtime ledger, weights included; and cuMemGetInfo), device-busy ms of one steady-state
    /// flow chunk, and the SHA-256 of the measured pass's mel. With the vocoder: vocoder and
    /// end-to-end (flow + vocoder, each with its read-back) p50/p95 ms per chunk, the time to
    /// first audio (from the first chunk call's start to the first non-empty PCM), and the
    /// SHA-256 of the whole stream's PCM (f32 little-endian, the flush included), which every
    /// arm must share with B0.
    Token2wav(Token2wavArgs),
    /// Compare every arm's mel with exported vendor outputs.
    ///
    /// Streams --io's chunks and compares each chunk's mel with the file's `feat_<i>` tensor:
    /// relative L2 error ‖mel − feat‖ / ‖feat‖ ≤ --tol. With the vocoder and a
    /// `pcm.safetensors` beside --io, two PCM figures: the vocoder port's fidelity (a fresh
    /// eager vocoder run on the vendor's own mel, the `feat_<i>`, then the final flush, each
    /// chunk against `pcm_<i>` and `pcm_flush`, ≤ --pcm-tol), and each arm's end-to-end PCM
    /// against the same chunks (first, median, max, whether it grows with the chunk index;
    /// gated only by --e2e-pcm-tol). Fails (exit 1) on any chunk over a tolerance, any NaN, any
    /// length mismatch, or any arm whose mel or PCM differs from B0's.
    Check(CheckArgs),
    /// Time the linear kernels (every tile variant) against cuBLAS at the model's shapes.
    ///
    /// Per shape and row count: device µs and TFLOP/s of each `gemm.linear_*` variant and of
    /// the cuBLAS path, whether each variant's output equals its host twin bit for bit, and its
    /// normwise relative error against cuBLAS. No weights needed (random operands).
    Kernels(KernelsArgs),
    /// Time the DiT's attention kernels, fp32 (`attention.sdpa`), 3xTF32 (`attention.sdpa_tf32x3`)
    /// and f16 (`attention.sdpa_f16`, the half point's) on tensor cores, at the estimator's shapes.
    ///
    /// Per batch: device µs and TFLOP/s of each, the speed-ups, and each checked against the fp32
    /// twin (sdpa bit for bit, sdpa_tf32x3 and sdpa_f16 within their bounds). With `--rel-pos`,
    /// the encoder's `attention.rel_pos` at its shapes instead. No weights needed.
    Attention(AttentionArgs),
    /// Run N sessions on one device, time-multiplexed: memory, latency, throughput, and each
    /// session's audio against the same session alone (the capacity harness).
    Sessions(SessionsArgs),
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// `token2wav` or `check`.
    Flow(Opts),
    /// `kernels`.
    Kernels(KernelsArgs),
    /// `attention`.
    Attention(AttentionArgs),
    /// `sessions`.
    Sessions(SessionsArgs),
}

/// Flags both commands take.
#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Flow decoder weights (safetensors, the vendor's state_dict names). The configuration
    /// (full or tiny) is read from the tensor shapes.
    #[arg(long, value_name = "FILE")]
    pub weights: PathBuf,

    /// Chunks per measured pass. A chunk is the contract's chunk of tokens plus its lookahead
    /// (25 + 3 tokens, 50 mel frames, one second of audio in the bundled contracts).
    #[arg(long, value_name = "N", default_value_t = 24,
          value_parser = RangedU64ValueParser::<usize>::new().range(1..=MAX_CHUNKS as u64))]
    pub chunks: usize,

    /// Warm-up chunks per arm before the measured pass (not timed; shape classes are captured
    /// here). 0 is allowed: the first measured chunks then include capture.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_CHUNKS as u64))]
    pub warmup: usize,

    /// Where to run: the GPU (CUDA driver, NVRTC, cuBLAS), or the CPU twin with the same replay
    /// semantics (slow; for checking, not timing).
    #[arg(long, value_enum, default_value_t = BackendChoice::Cuda)]
    pub backend: BackendChoice,

    /// The native-clock contract the session is laid out by. It fixes the retention (paper or
    /// vendor slicing) and the prompt/chunk/lookahead sizes. `auto`: `token2wav_tiny` for the
    /// tiny configuration, `token2wav` otherwise.
    #[arg(long, value_enum, default_value_t = ContractChoice::Auto)]
    pub contract: ContractChoice,

    /// Output on stdout: an aligned table, or one JSON object on one line.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,

    /// Also write the JSON object to FILE (written to a temporary file beside it, then renamed,
    /// so FILE is never half-written). May not name the --weights or --io file.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,

    /// The GEMM every linear of the flow runs on: `backend` (cuBLAS / cuBLASLt, TF32 off; the
    /// faster one at a single session's 112 rows today), `invariant` (the `gemm.linear_*`
    /// kernels: batch-invariant, bit-identical to the Host twin), `tf32x3` (the 3xTF32
    /// tensor-core kernels, and the DiT's attention on tensor cores: batch-invariant on CUDA,
    /// within a derived bound of fp32) or `f16` (the half operating point: binary16 weights,
    /// fp16 tensor-core GEMMs and the vendor's fp16 cast points). Each gives different bits.
    #[arg(long, value_enum, default_value_t = GemmChoice::Backend)]
    pub gemm: GemmChoice,

    /// The contract's operating point the sessions are laid out at: `base` (the spec's own
    /// values) or a point its `operating_points:` declares (`half`: the carry and the solver
    /// workspace stored as f16, half their bytes; needs --gemm f16). Default: `half` with --gemm
    /// f16 where the contract declares it, else `base`; `--point base` with --gemm f16 keeps an
    /// f32 cache holding the same f16 values (the same mel, for comparison).
    #[arg(long, value_name = "POINT")]
    pub point: Option<String>,

    /// Bracket steady-state work for an external profiler started with collection off
    /// (`ncu --profile-from-start off --graph-profiling node ...`; `cuProfilerStart`/`Stop`):
    /// `token2wav`/`check`, each arm's last measured chunk; `sessions --batch`, each batched run's
    /// last round.
    /// Replayed graphs are recorded node by node, so the profile is the replayed chunk's, with
    /// no host gaps (`scripts/ncu_table.py` sums it per kernel). Does nothing on Host.
    #[arg(long)]
    pub profiler_window: bool,

    #[command(flatten)]
    pub vocoder: VocoderArgs,
}

/// `--gemm`: which [`dcc_runtime::ops::GemmPath`] the flow's linears run on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum GemmChoice {
    /// cuBLAS / cuBLASLt on CUDA, the ordered loop on the Host.
    Backend,
    /// The batch-invariant `gemm.linear_*` kernels.
    Invariant,
    /// The batch-invariant 3xTF32 tensor-core kernel `gemm.linear_tf32x3`.
    Tf32x3,
    /// Half precision: binary16 weights, the batch-invariant fp16 tensor-core kernels
    /// `gemm.linear_f16_*` (every linear's output a binary16 value). `check` gates it at
    /// --half-tol, not --tol.
    F16,
}

impl GemmChoice {
    pub fn path(self) -> dcc_runtime::ops::GemmPath {
        match self {
            GemmChoice::Backend => dcc_runtime::ops::GemmPath::Backend,
            GemmChoice::Invariant => dcc_runtime::ops::GemmPath::Invariant,
            GemmChoice::Tf32x3 => dcc_runtime::ops::GemmPath::InvariantTf32x3,
            GemmChoice::F16 => dcc_runtime::ops::GemmPath::Half,
        }
    }

    /// The value's name on the command line (and in JSON reports).
    pub fn name(self) -> &'static str {
        match self {
            GemmChoice::Backend => "backend",
            GemmChoice::Invariant => "invariant",
            GemmChoice::Tf32x3 => "tf32x3",
            GemmChoice::F16 => "f16",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct Token2wavArgs {
    #[command(flatten)]
    pub common: Common,

    /// Inputs and reference outputs (safetensors: `prompt_tokens`, `prompt_mel`, `spk`,
    /// `stream_tokens`, optional `feat_<i>`), as the vendor peer exports them. Without it, a
    /// fixed pseudo-random token stream and prompt are used (same on every run).
    #[arg(long, value_name = "FILE")]
    pub io: Option<PathBuf>,

    /// Arms to run, comma-separated, in this order: B0, S, R, Rc, SR, SRc (`dcc-bench --help`
    /// says what each is). B0 gives the speedup and bit-identity columns.
    #[arg(long, value_name = "ARMS", value_delimiter = ',', value_parser = arm,
          default_value = "B0,S,R,Rc,SR,SRc")]
    pub arms: Vec<Arm>,

    /// Device-busy repetitions per arm: one steady-state chunk queued behind a spin kernel,
    /// CUDA events around its work; the median is reported. 0 skips the measurement.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_BUSY_REPS as u64))]
    pub busy_reps: usize,

    /// After the arms, time one eager steady-state chunk op by op (a CUDA event before every
    /// op) and print device µs per op category on stderr. The markers slow the chunk down: the
    /// table attributes device time, it is not a latency.
    #[arg(long)]
    pub profile: bool,

    #[command(flatten)]
    pub wav: WavArgs,
}

#[derive(Args, Debug, Clone)]
pub struct CheckArgs {
    #[command(flatten)]
    pub common: Common,

    /// Inputs and the vendor's outputs (safetensors: `prompt_tokens`, `prompt_mel`, `spk`,
    /// `stream_tokens` and `feat_0` … `feat_<chunks-1>`).
    #[arg(long, value_name = "FILE")]
    pub io: PathBuf,

    /// Arms to compare, comma-separated (B0, S, R, Rc, SR, SRc; `dcc-bench --help` says what
    /// each is). With B0 listed, every other arm must also equal B0 bit for bit.
    #[arg(long, value_name = "ARMS", value_delimiter = ',', value_parser = arm,
          default_value = "B0,SRc")]
    pub arms: Vec<Arm>,

    /// Largest relative L2 error allowed per chunk (finite, ≥ 0; 0 asks for bit-equal mels, a
    /// meaningful check against a reference made by this same binary). f32 reorderings give
    /// ~1e-7; the bundled scripts use 1e-4 (tiny) and 1e-3 (full model).
    #[arg(long, value_name = "X", default_value_t = 1e-3, value_parser = tolerance,
          allow_hyphen_values = true)]
    pub tol: f64,

    /// The --tol of `--gemm f16`: the largest relative L2 error allowed per chunk when every
    /// linear runs in half precision, against the same (fp32) reference. Half weights and
    /// binary16 linear outputs move the mel far more than fp32 reorderings do (the vendor's own
    /// half mode sits about 2e-3 from its fp32 output on the full model), so this path is judged
    /// apart; the relative L2 is printed either way.
    #[arg(long, value_name = "X", default_value_t = 1e-2, value_parser = tolerance,
          allow_hyphen_values = true)]
    pub half_tol: f64,

    /// Largest relative L2 error allowed per chunk of the vocoder's PCM of the vendor's mel
    /// (`feat_<i>`) against the vendor's PCM, when a `pcm.safetensors` lies beside --io
    /// (`pcm_<i>`: what chunk i returned, `pcm_flush`: the final flush; [1, n] f32): the
    /// vocoder port's fidelity, apart from the flow's. Finite, ≥ 0.
    #[arg(long, value_name = "X", default_value_t = 1e-3, value_parser = tolerance,
          allow_hyphen_values = true)]
    pub pcm_tol: f64,

    /// Largest relative L2 error allowed per chunk of each arm's end-to-end PCM (tokens through
    /// the flow and the vocoder) against `pcm.safetensors`. Not gated by default: the vocoder
    /// predicts F0 from the mel and integrates it into a float64 phase that carries from chunk
    /// to chunk, so a mel that matches the vendor's to float32 rounding (~1e-7) still yields a
    /// phase offset that grows with the stream (~1e-3 relative L2 after a few chunks on the
    /// full model); the end-to-end figure is reported, and --pcm-tol judges the vocoder on the
    /// vendor's own mel. Finite, ≥ 0.
    #[arg(long, value_name = "X", value_parser = tolerance, allow_hyphen_values = true)]
    pub e2e_pcm_tol: Option<f64>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// The GPU (device 0).
    Cuda,
    /// The CPU twin.
    Host,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Cuda => "cuda",
            BackendChoice::Host => "host",
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ContractChoice {
    /// By the weights' configuration.
    Auto,
    /// specs/token2wav.yaml: the full model, paper retention.
    #[value(name = "token2wav")]
    Token2wav,
    /// specs/token2wav_tiny.yaml: the tiny golden model, paper retention.
    #[value(name = "token2wav_tiny")]
    Token2wavTiny,
    /// specs/token2wav_tiny_vendor.yaml: the tiny golden model, the vendor's slicing.
    #[value(name = "token2wav_tiny_vendor")]
    Token2wavTinyVendor,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

pub fn arm(s: &str) -> Result<Arm, String> {
    let s = s.trim();
    Arm::parse(s).ok_or_else(|| {
        let names: Vec<&str> = Arm::ALL.iter().map(|a| a.name()).collect();
        format!("unknown arm `{s}` (arms: {})", names.join(", "))
    })
}

/// `--tol`: finite and ≥ 0. Zero is accepted on purpose: `rel_l2 ≤ 0` holds exactly when the
/// mel equals the reference bit for bit (up to the sign of zeros), which is the right demand
/// when the reference comes from the same code on the same backend; a NaN error still fails.
fn tolerance(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|e| format!("`{s}` is not a number: {e}"))?;
    if !v.is_finite() {
        return Err(format!(
            "`{s}` is not finite: a NaN tolerance would fail every chunk, an infinite one would \
             accept any finite error"
        ));
    }
    if v < 0.0 {
        return Err(format!(
            "`{s}` is negative: a relative L2 error is never below 0"
        ));
    }
    Ok(v)
}

/// What a run needs, whichever command asked for it.
#[derive(Clone, Debug)]
pub struct Opts {
    /// `Some(tol)` for `check`, `None` for `token2wav`.
    pub check_tol: Option<f64>,
    pub weights: PathBuf,
    pub io: Option<PathBuf>,
    pub arms: Vec<Arm>,
    pub chunks: usize,
    pub warmup: usize,
    /// 0 for `check` (no device-busy measurement).
    pub busy_reps: usize,
    pub backend: BackendChoice,
    pub contract: ContractChoice,
    pub json: bool,
    pub json_out: Option<PathBuf>,
    pub profile: bool,
    /// `--profiler-window`.
    pub profiler_window: bool,
    pub gemm: GemmChoice,
    /// `--point` (`None`: by the GEMM path, [`super::contract::point_of`]).
    pub point: Option<String>,
    /// The vocoder's weights; `None` with `--no-vocoder`.
    pub vocoder: Option<VocoderFile>,
    /// `--wav` (token2wav).
    pub wav: Option<WavOut>,
    /// `--pcm-tol` (check).
    pub pcm_tol: Option<f64>,
    /// `--e2e-pcm-tol` (check; `None`: the end-to-end PCM is reported, not gated).
    pub e2e_pcm_tol: Option<f64>,
}

impl Opts {
    pub fn is_check(&self) -> bool {
        self.check_tol.is_some()
    }
}

impl Command {
    fn from_cli(cli: Cli) -> Command {
        let (wav, pcm_tol, e2e_pcm_tol) = match &cli.cmd {
            Cmd::Token2wav(a) => (a.wav.resolve(&a.arms), None, None),
            Cmd::Check(a) => (None, Some(a.pcm_tol), a.e2e_pcm_tol),
            Cmd::Kernels(_) | Cmd::Attention(_) | Cmd::Sessions(_) => (None, None, None),
        };
        let (c, check_tol, io, arms, busy_reps, profile) = match cli.cmd {
            Cmd::Token2wav(a) => (a.common, None, a.io, a.arms, a.busy_reps, a.profile),
            Cmd::Check(a) => {
                let tol = match a.common.gemm {
                    GemmChoice::F16 => a.half_tol,
                    _ => a.tol,
                };
                (a.common, Some(tol), Some(a.io), a.arms, 0, false)
            }
            Cmd::Kernels(a) => return Command::Kernels(a),
            Cmd::Attention(a) => return Command::Attention(a),
            Cmd::Sessions(a) => return Command::Sessions(a),
        };
        Command::Flow(Opts {
            vocoder: c.vocoder.resolve(&c.weights),
            wav,
            pcm_tol,
            e2e_pcm_tol,
            check_tol,
            weights: c.weights,
            io,
            arms,
            chunks: c.chunks,
            warmup: c.warmup,
            busy_reps,
            backend: c.backend,
            contract: c.contract,
            json: c.format == Format::Json,
            json_out: c.json_out,
            profiler_window: c.profiler_window,
            profile,
            gemm: c.gemm,
            point: c.point,
        })
    }
}

/// Parses `args` (the program name first) and applies the cross-flag checks.
pub fn parse_from<I, T>(args: I) -> Result<Command, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let opts = match Command::from_cli(Cli::try_parse_from(args)?) {
        Command::Flow(o) => o,
        k @ (Command::Kernels(_) | Command::Attention(_)) => return Ok(k),
        Command::Sessions(a) => {
            let c = &a.common;
            let point = super::contract::check_point(c.contract, c.point.as_deref(), c.gemm);
            return match point.and_then(|()| super::sessions::check(&a)) {
                Ok(()) => Ok(Command::Sessions(a)),
                Err(m) => Err(Cli::command().error(ErrorKind::ValueValidation, m)),
            };
        }
    };
    let fail = |kind, msg: String| Err(Cli::command().error(kind, msg));
    if let Err(m) = super::contract::check_point(opts.contract, opts.point.as_deref(), opts.gemm) {
        return fail(ErrorKind::ValueValidation, m);
    }
    for (i, a) in opts.arms.iter().enumerate() {
        if opts.arms[..i].contains(a) {
            return fail(
                ErrorKind::ValueValidation,
                format!("arm `{}` is listed twice in --arms", a.name()),
            );
        }
    }
    if let Some(w) = &opts.wav
        && !opts.arms.contains(&w.arm)
    {
        return fail(
            ErrorKind::ValueValidation,
            format!("--wav-arm {} is not one of --arms", w.arm.name()),
        );
    }
    let outputs = [
        ("--json-out", opts.json_out.as_ref()),
        ("--wav", opts.wav.as_ref().map(|w| &w.path)),
    ];
    if let (Some(j), Some(w)) = (outputs[0].1, outputs[1].1)
        && same_file(j, w)
    {
        return fail(
            ErrorKind::ArgumentConflict,
            format!("--wav {} is the --json-out file", w.display()),
        );
    }
    for (out_flag, out) in outputs {
        let Some(out) = out else { continue };
        if out.is_dir() {
            return fail(
                ErrorKind::ValueValidation,
                format!("{out_flag} {} is a directory", out.display()),
            );
        }
        let dir = parent_dir(out);
        if !dir.is_dir() {
            return fail(
                ErrorKind::ValueValidation,
                format!(
                    "{out_flag} {}: the directory {} does not exist",
                    out.display(),
                    dir.display()
                ),
            );
        }
        let inputs = [
            ("--weights", Some(&opts.weights)),
            ("--io", opts.io.as_ref()),
            ("--vocoder-weights", opts.vocoder.as_ref().map(|v| &v.path)),
        ];
        for (flag, input) in inputs {
            if let Some(input) = input
                && same_file(out, input)
            {
                return fail(
                    ErrorKind::ArgumentConflict,
                    format!(
                        "{out_flag} {} is the {flag} file; refusing to overwrite an input",
                        out.display()
                    ),
                );
            }
        }
    }
    Ok(Command::Flow(opts))
}

pub use dcc_models::fsio::parent_dir;

/// Whether `a` and `b` name the same file: the same path as written, or (both existing) the
/// same file after links (device and inode on Unix; canonical paths elsewhere).
fn same_file(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        match (std::fs::metadata(a), std::fs::metadata(b)) {
            (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (a.canonicalize(), b.canonicalize()) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

#[cfg(test)]
#[path = "cli_tests.rs"]
mod tests;
