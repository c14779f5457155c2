//! `dcc-bench sessions`: many Token2Wav sessions on one device — the capacity harness.
//!
//! For each arm and each session count N (`--sessions 1,2,4,…`), N sessions are created on one
//! [`DeviceFlow`](dcc_models::token2wav::DeviceFlow) (shared weights, activation workspace and, under the state rule, the arena's
//! per-process part: the solver workspace) and run time-multiplexed, round robin, on its one
//! device stream: every session primes, runs `--warmup` chunks (every class captured in its own
//! engines), primes again and runs `--chunks` measured chunks. Each session has its own prompt,
//! speaker and token stream, derived from the inputs by [`StreamInputs::variant`] (session `k`
//! is variant `k`: prompt tokens rotated and every token id shifted, prompt mel and speaker
//! perturbed; session 0 is the inputs themselves).
//!
//! `--cadence max` runs every chunk as soon as the previous one returns: the per-chunk latency
//! is the call's wall time (inputs uploaded, callables run, mel read back). `--cadence realtime`
//! lets session `k`'s chunk `i` arrive at `start_k + i·D` (D = the audio one chunk carries,
//! `F_CHUNK · HOP / 24 kHz` of the contract: 1 s in the bundled ones; session starts staggered by
//! `D / N`) and waits for it; its latency is finish − arrival and it misses its deadline when
//! it finishes after `arrival + D`, when the audio of the chunk before it has played out.
//!
//! Per arm and N: peak MiB (the runtime's ledger, weights included; `cuMemGetInfo`'s used
//! memory on CUDA, sessions alive), device bytes per session (the ledger's, beside the
//! contract's per-session arena part), p50 / p95 / p99 chunk latency, aggregate chunks per
//! second, deadline misses (realtime), and per session whether its mel SHA-256 equals the same
//! session run alone (the same calls, on the same flow, with no other session alive).
//! **Sessions per GPU at real time** is the largest N whose aggregate rate keeps every session
//! real time (≥ N / D chunks a second; at `realtime` cadence: no deadline missed) with p95 ≤
//! 200 ms. An out-of-memory error at N = k ends that arm with the line "out of memory at N = k";
//! what the smaller counts measured is kept and reported.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use dcc_models::token2wav::serve::{Arm, GroupPhases, Session, StreamInputs};
use dcc_models::token2wav::{FlowConfig, FlowError, SolverParams};
use serde_json::json;

use super::cli::{Common, Opts};
use super::error::BenchError;
use super::{MIB, Res, Setup, mel_bytes, non_finite, plot, setup};

/// The most sessions one count may ask for (`--sessions`).
pub const MAX_SESSIONS: usize = 4096;
/// The p95 chunk latency a real-time session may have (ms).
pub const REALTIME_P95_MS: f64 = 200.0;
/// PCM samples per second of the Token2Wav vocoder (minicpmo-utils 1.0.7, 24 kHz): with the
/// contract's `HOP` samples per frame and `F_CHUNK` frames per chunk, the audio one chunk holds.
const SAMPLE_RATE: usize = 24_000;

/// `dcc-bench sessions`.
#[derive(Args, Debug, Clone)]
pub struct SessionsArgs {
    #[command(flatten)]
    pub common: Common,

    /// Inputs (safetensors, as for `token2wav`): session 0 streams them as they are, session k
    /// a variant of them (prompt tokens rotated, token ids shifted, prompt mel and speaker
    /// perturbed). Without it, the fixed pseudo-random inputs of `token2wav`.
    #[arg(long, value_name = "FILE")]
    pub io: Option<PathBuf>,

    /// Session counts to run, comma-separated (e.g. 1,2,4,8), each ≥ 1.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = session_count,
          default_value = "1,2,4")]
    pub sessions: Vec<usize>,

    /// Arms, comma-separated (B0, S, R, Rc, SR, SRc; `dcc-bench --help` says what each is).
    #[arg(long, value_name = "ARMS", value_delimiter = ',', value_parser = super::cli::arm,
          default_value = "B0,SRc")]
    pub arms: Vec<Arm>,

    /// `max`: each chunk as soon as the one before returns (throughput); `realtime`: each
    /// session's chunk i arrives i chunk-durations after the session's start and must finish
    /// within one chunk-duration of arriving.
    #[arg(long, value_enum, default_value_t = Cadence::Max)]
    pub cadence: Cadence,

    /// Also write an SVG of peak memory and p95 latency against N, one line per arm (and per
    /// batched arm).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

    /// Also run every state-rule arm (S, SR, SRc) batched: each round, the sessions of one
    /// catalog class run their flow as batched calls of the contract's batch sizes (the flow's
    /// `batch:`), largest first, the rest alone, counted by reason. Exact only on the
    /// batch-invariant GEMMs: needs `--gemm invariant`, `tf32x3` or `f16`.
    #[arg(long)]
    pub batch: bool,

    /// With --batch: batch at most B sessions per call (the contract's batch sizes up to B).
    /// A batched call's latency grows with its size, its throughput per session falls: this is
    /// the knob between the two (one H100, full config: 16 sessions per call take ~255 ms).
    #[arg(long, value_name = "B", requires = "batch")]
    pub max_batch: Option<usize>,

    /// With --batch: run the state-rule arms batched only, not also time-multiplexed. A
    /// capacity run at N ≈ 100 then takes minutes, not tens of minutes: the time-multiplexed
    /// arm's N sessions each capture their own graphs and run every chunk alone. Each session's
    /// alone run (what `identical_to_alone` compares with) still runs once.
    #[arg(long, requires = "batch")]
    pub batched_only: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Cadence {
    Max,
    Realtime,
}

/// `--sessions` entries: counts from 1 to [`MAX_SESSIONS`], with a message for 0.
fn session_count(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|e| format!("`{s}` is not a session count: {e}"))?;
    if n == 0 {
        return Err("0 sessions: every count must be at least 1".into());
    }
    if n > MAX_SESSIONS {
        return Err(format!("{n} sessions: at most {MAX_SESSIONS}"));
    }
    Ok(n)
}

/// The flags a `token2wav` run would take, for [`setup`].
fn opts(a: &SessionsArgs) -> Opts {
    let c = &a.common;
    Opts {
        // the harness measures the flow (each session's mel); `check` refuses the vocoder flags
        vocoder: None,
        wav: None,
        pcm_tol: None,
        e2e_pcm_tol: None,
        check_tol: None,
        weights: c.weights.clone(),
        io: a.io.clone(),
        arms: a.arms.clone(),
        chunks: c.chunks,
        warmup: c.warmup,
        busy_reps: 0,
        backend: c.backend,
        contract: c.contract,
        json: c.format == super::cli::Format::Json,
        json_out: c.json_out.clone(),
        profile: false,
        profiler_window: c.profiler_window,
        gemm: c.gemm,
        point: c.point.clone(),
    }
}

/// Checks the values clap cannot: no count or arm twice, `--plot` not a directory nor an input.
pub fn check(a: &SessionsArgs) -> Result<(), String> {
    if let Some(f) = &a.common.vocoder.vocoder_weights {
        return Err(format!(
            "--vocoder-weights {}: `sessions` measures the flow (each session's mel), not audio",
            f.display()
        ));
    }
    for (i, n) in a.sessions.iter().enumerate() {
        if a.sessions[..i].contains(n) {
            return Err(format!("{n} is listed twice in --sessions"));
        }
    }
    for (i, arm) in a.arms.iter().enumerate() {
        if a.arms[..i].contains(arm) {
            return Err(format!("arm `{}` is listed twice in --arms", arm.name()));
        }
    }
    if a.batch && !a.common.gemm.path().batch_invariant() {
        return Err(
            "--batch needs --gemm invariant, tf32x3 or f16: batched sessions equal alone only on \
             the batch-invariant GEMMs (cuBLAS picks its kernels by the row count)"
                .into(),
        );
    }
    if a.max_batch == Some(0) {
        return Err("--max-batch 0: a batch holds at least one session".into());
    }
    if a.batch && !a.arms.iter().any(|x| x.state_rule()) {
        return Err("--batch: no arm of the state rule (S, SR, SRc) to batch".into());
    }
    if let Some(p) = &a.plot {
        if p.is_dir() {
            return Err(format!("--plot {} is a directory", p.display()));
        }
        if !super::cli::parent_dir(p).is_dir() {
            return Err(format!(
                "--plot {}: its directory does not exist",
                p.display()
            ));
        }
        if Some(p) == a.io.as_ref() || p == &a.common.weights {
            return Err(format!(
                "--plot {} is an input; refusing to overwrite it",
                p.display()
            ));
        }
    }
    Ok(())
}

/// Whether `e` says the device ran out of memory (through any wrapping).
fn out_of_memory(e: &FlowError) -> bool {
    match e {
        FlowError::Device(d) => d.is_out_of_memory(),
        FlowError::SessionFailed(inner) => out_of_memory(inner),
        FlowError::Op(dcc_runtime::ops::OpError::Backend { error, .. }) => error.is_out_of_memory(),
        _ => false,
    }
}

/// When the harness started (set by [`run`]), for [`progress`].
static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

/// A progress line on stderr (a capacity run at N ≈ 100 takes minutes): the seconds since the
/// harness started, then what it just finished.
pub(super) fn progress(what: std::fmt::Arguments<'_>) {
    let t = START.get_or_init(Instant::now).elapsed().as_secs_f64();
    eprintln!("dcc-bench sessions: [{t:7.1} s] {what}");
}

/// The audio one chunk carries, in seconds: `F_CHUNK · HOP / SAMPLE_RATE` of the contract.
fn chunk_seconds(family: &str) -> f64 {
    use dcc_generated as g;
    let (f, hop) = match family {
        "token2wav_tiny" => (g::token2wav_tiny::F_CHUNK, g::token2wav_tiny::HOP),
        "token2wav_tiny_vendor" => (
            g::token2wav_tiny_vendor::F_CHUNK,
            g::token2wav_tiny_vendor::HOP,
        ),
        _ => (g::token2wav::F_CHUNK, g::token2wav::HOP),
    };
    (f * hop) as f64 / SAMPLE_RATE as f64
}

/// One (arm, N) run, time-multiplexed or batched.
struct RunResult {
    arm: Arm,
    n: usize,
    /// Batched rounds (`--batch`), else time-multiplexed.
    batched: bool,
    /// Batched calls of the measured chunks by member count, and chunks run alone by reason.
    batches: BTreeMap<usize, u64>,
    not_batchable: BTreeMap<&'static str, u64>,
    /// The batched calls so far and how many replayed a graph.
    batch_replays: Option<(u64, u64)>,
    /// The batched encoder calls so far and how many replayed a graph.
    encoder_replays: Option<(u64, u64)>,
    /// Device MiB of the batch's per-process buffers and graphs.
    batch_mib: f64,
    /// Where the measured rounds' batched groups spent their time.
    phases: Option<GroupPhases>,
    /// `None` when it completed; the error otherwise (out of memory or another).
    failure: Option<(bool, String)>,
    latency_ms: Vec<f64>,
    wall_s: f64,
    misses: Option<u64>,
    peak_mib: f64,
    used_mib: Option<f64>,
    per_session_mib: f64,
    /// Each session's mel SHA-256 over the measured chunks.
    shas: Vec<String>,
    problems: Vec<String>,
}

/// Runs N sessions of `arm` interleaved, or in batched rounds over the batch sizes `batch`.
/// Errors are kept in the result (failure), never lost.
fn run_n(
    s: &Setup,
    a: &SessionsArgs,
    streams: &[StreamInputs],
    (arm, n): (Arm, usize),
    batch: Option<&[usize]>,
) -> RunResult {
    let mut r = RunResult {
        arm,
        n,
        batched: batch.is_some(),
        batches: BTreeMap::new(),
        not_batchable: BTreeMap::new(),
        batch_replays: None,
        encoder_replays: None,
        batch_mib: 0.0,
        phases: None,
        failure: None,
        latency_ms: Vec::new(),
        wall_s: 0.0,
        misses: None,
        peak_mib: 0.0,
        used_mib: None,
        per_session_mib: 0.0,
        shas: Vec::new(),
        problems: Vec::new(),
    };
    let done = match batch {
        Some(sizes) => batch::rounds(s, a, streams, sizes, &mut r),
        None => interleave(s, a, streams, &mut r),
    };
    if let Err(e) = done {
        let oom = matches!(&e, BenchError::Flow { error, .. } if out_of_memory(error))
            || matches!(&e, BenchError::Runtime(d) if d.is_out_of_memory());
        r.failure = Some((oom, e.to_string()));
    }
    let mem = s.be.memory();
    r.peak_mib = mem.peak_total as f64 / MIB;
    r
}

fn interleave(s: &Setup, a: &SessionsArgs, streams: &[StreamInputs], r: &mut RunResult) -> Res<()> {
    let (arm, n) = (r.arm, r.n);
    let e = |error| BenchError::Flow {
        arm: Some(arm.name()),
        error,
    };
    s.be.synchronize()?;
    s.be.reset_peak();
    let mut ses = Vec::with_capacity(n);
    for _ in 0..n {
        ses.push(Session::new(s.dev.clone(), s.contract, arm, SolverParams::default()).map_err(e)?);
    }
    r.per_session_mib =
        ses.iter().map(|x| x.bytes().total()).sum::<usize>() as f64 / n as f64 / MIB;
    progress(format_args!("{} × {n}: sessions created", arm.name()));
    let la = s.sizes.lookahead_tokens;
    fn chunk<'x>(s: &Setup, x: &'x StreamInputs, i: usize) -> Res<&'x [u32]> {
        x.chunk(i, s.sizes.chunk_tokens, s.sizes.lookahead_tokens)
            .ok_or(BenchError::NoChunk(i))
    }
    for (x, st) in ses.iter_mut().zip(streams) {
        x.prime(&st.prompt_call(la), &st.prompt_mel, &st.spk)
            .map_err(e)?;
    }
    for i in 0..a.common.warmup {
        for (x, st) in ses.iter_mut().zip(streams) {
            x.chunk(chunk(s, st, i)?, &st.spk, false).map_err(e)?;
        }
        progress(format_args!("{} × {n}: warm-up chunk {i}", arm.name()));
    }
    for (x, st) in ses.iter_mut().zip(streams) {
        x.prime(&st.prompt_call(la), &st.prompt_mel, &st.spk)
            .map_err(e)?;
    }
    s.be.synchronize()?;
    let d = chunk_seconds(s.contract.family);
    let realtime = a.cadence == Cadence::Realtime;
    let mut misses = 0u64;
    let mut hashes = vec![Vec::new(); n];
    let t0 = Instant::now();
    for i in 0..a.common.chunks {
        for (k, (x, st)) in ses.iter_mut().zip(streams).enumerate() {
            let toks = chunk(s, st, i)?;
            let arrival = Duration::from_secs_f64(d * (i as f64 + k as f64 / n as f64));
            if realtime && let Some(wait) = arrival.checked_sub(t0.elapsed()) {
                std::thread::sleep(wait);
            }
            let start = Instant::now();
            let m = x.chunk(toks, &st.spk, false).map_err(e)?;
            let done = t0.elapsed();
            r.latency_ms.push(if realtime {
                done.saturating_sub(arrival).as_secs_f64() * 1e3
            } else {
                start.elapsed().as_secs_f64() * 1e3
            });
            if realtime && done > arrival + Duration::from_secs_f64(d) {
                misses += 1;
            }
            if let Some(p) = non_finite(i, "mel", &m) {
                r.problems.push(format!("session {k}: {p}"));
            }
            hashes[k].extend_from_slice(&mel_bytes(&m));
        }
        progress(format_args!("{} × {n}: chunk {i}", arm.name()));
    }
    r.wall_s = t0.elapsed().as_secs_f64();
    r.misses = realtime.then_some(misses);
    let mem = s.be.memory();
    r.used_mib = match (mem.device_free, mem.device_total) {
        (Some(f), Some(t)) => Some((t - f) as f64 / MIB),
        _ => None,
    };
    r.shas = hashes.iter().map(|h| dcc_runtime::sha256_hex(h)).collect();
    Ok(())
}

/// Session `k` of `arm` alone: the same calls as interleaved, no other session alive. Its
/// measured mel's SHA-256.
fn alone(s: &Setup, a: &SessionsArgs, st: &StreamInputs, arm: Arm) -> Res<String> {
    let e = |error| BenchError::Flow {
        arm: Some(arm.name()),
        error,
    };
    let la = s.sizes.lookahead_tokens;
    let mut x = Session::new(s.dev.clone(), s.contract, arm, SolverParams::default()).map_err(e)?;
    let mut hash = Vec::new();
    for (pass, chunks) in [a.common.warmup, a.common.chunks].into_iter().enumerate() {
        x.prime(&st.prompt_call(la), &st.prompt_mel, &st.spk)
            .map_err(e)?;
        for i in 0..chunks {
            let toks = st
                .chunk(i, s.sizes.chunk_tokens, la)
                .ok_or(BenchError::NoChunk(i))?;
            let m = x.chunk(toks, &st.spk, false).map_err(e)?;
            if pass == 1 {
                hash.extend_from_slice(&mel_bytes(&m));
            }
        }
    }
    Ok(dcc_runtime::sha256_hex(&hash))
}

/// Runs the harness; returns whether it passed (every completed session equal to alone and to
/// the other arms, every mel finite, no failure but running out of memory).
pub fn run(a: &SessionsArgs) -> Res<bool> {
    let t0 = Instant::now();
    // the progress lines count from the first run of the process (the CLI runs one)
    START.get_or_init(|| t0);
    let o = opts(a);
    let n_max = a.sessions.iter().copied().max().unwrap_or(1);
    let s = setup(&o)?;
    let base = StreamInputs {
        prompt_tokens: s.io.prompt.clone(),
        prompt_mel: s.io.mel.clone(),
        spk: s.io.spk.clone(),
        stream: s.io.stream.clone(),
    };
    let streams = (0..n_max)
        .map(|k| base.variant(k, s.cfg.vocab))
        .collect::<Result<Vec<_>, _>>()?;
    let mut sessions_sorted = a.sessions.clone();
    sessions_sorted.sort_unstable();
    let mut runs: Vec<RunResult> = Vec::new();
    let mut alone_sha: BTreeMap<(&'static str, usize), String> = BTreeMap::new();
    let mut ok = true;
    // the contract's batch sizes, up to --max-batch (1 is always one of them)
    let batch: Vec<usize> = s
        .contract
        .flow_batch
        .iter()
        .copied()
        .filter(|&b| a.max_batch.is_none_or(|m| b <= m))
        .collect();
    let batch = &batch[..];
    for &arm in &a.arms {
        let modes: &[bool] = if a.batch && arm.state_rule() {
            if a.batched_only {
                &[true]
            } else {
                &[false, true]
            }
        } else {
            &[false]
        };
        for &batched in modes {
            for &n in &sessions_sorted {
                let mode = if batched { " batched" } else { "" };
                eprintln!("dcc-bench sessions: {}{mode} × {n}", arm.name());
                let r = run_n(&s, a, &streams, (arm, n), batched.then_some(batch));
                let stop = r.failure.is_some();
                if let Some((oom, msg)) = &r.failure {
                    eprintln!("dcc-bench sessions: {}{mode} at N = {n}: {msg}", arm.name());
                    ok &= *oom;
                }
                runs.push(r);
                if stop {
                    break;
                }
                for (k, st) in streams.iter().enumerate().take(n) {
                    if let std::collections::btree_map::Entry::Vacant(v) =
                        alone_sha.entry((arm.name(), k))
                    {
                        if k % 16 == 0 {
                            progress(format_args!("{} alone: session {k} of {n}", arm.name()));
                        }
                        // a failure here (out of memory included) is reported, and the results
                        // so far are kept: this session just has no alone run to equal
                        match alone(&s, a, st, arm) {
                            Ok(sha) => {
                                v.insert(sha);
                            }
                            Err(e) => {
                                eprintln!(
                                    "dcc-bench sessions: {} session {k} alone: {e}",
                                    arm.name()
                                );
                                ok = false;
                            }
                        }
                    }
                }
            }
        }
    }
    let split = dcc_runtime::arena::session_bytes(&s.contract.arena).ok();
    let head = json!({
        "bench": "dcc-bench sessions",
        "device": s.be.device_name(),
        "backend": a.common.backend.name(),
        "contract": s.contract.family,
        "config": if s.cfg == FlowConfig::tiny() { "tiny" } else if s.cfg == FlowConfig::full() { "full" } else { "other" },
        "inputs": a.io.as_ref().map_or_else(|| "synthetic".into(), |p| p.display().to_string()),
        "gemm": a.common.gemm.name(),
        "point": s.contract.point,
        "cadence": match a.cadence { Cadence::Max => "max", Cadence::Realtime => "realtime" },
        "chunk_s": chunk_seconds(s.contract.family),
        "chunks": a.common.chunks,
        "warmup": a.common.warmup,
        "sessions": a.sessions,
        "arms": a.arms.iter().map(|x| x.name()).collect::<Vec<_>>(),
        "batched": a.batch,
        "batched_only": a.batched_only,
        "batch_sizes": a.batch.then_some(batch),
        "contract_session_bytes": split,
        "contract_process_bytes": split.map(|b| s.contract.arena.total_bytes - b),
        "realtime_p95_ms": REALTIME_P95_MS,
        "wall_s": t0.elapsed().as_secs_f64(),
    });
    let out = report(head, &a.arms, &runs, &alone_sha, ok)?;
    let ok = out["ok"] == true;
    let text = serde_json::to_string(&out).map_err(BenchError::Json)?;
    if let Some(p) = &a.common.json_out {
        super::report::write_atomic(p, &format!("{text}\n"))?;
    }
    if let Some(p) = &a.plot {
        super::report::write_atomic(p, &plot::svg(&out))?;
    }
    let mut stdout = std::io::stdout().lock();
    if o.json {
        writeln!(stdout, "{text}")
    } else {
        super::sessions_table::table(&mut stdout, &out)
    }
    .and_then(|()| stdout.flush())
    .map_err(BenchError::Stdout)?;
    Ok(ok)
}

#[path = "sessions_batch.rs"]
mod batch;
#[path = "sessions_report.rs"]
mod report_json;
use report_json::report;

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
