//! `dcc-bench`: the six-arm Token2Wav factorial (state rule × replay granularity; `--help` lists
//! the arms), and the correctness check against the vendor's exported outputs.
//!
//! `dcc-bench --help` (and `dcc-bench token2wav --help`, `dcc-bench check --help`) documents every
//! flag; [`cli`] holds the parser and the checks on values.
//!
//! `token2wav`: per arm, a warm-up pass (prime + `--warmup` chunks: every catalog class is
//! probed and captured here), then the measured pass (prime again, `--chunks` chunks): wall
//! p50/p95 ms per chunk (inputs uploaded, callables run, mel read back), launches per chunk (host
//! submissions: eager kernels + GEMMs + graph launches) and device kernels per chunk (eager +
//! graph nodes), steady-state eager fallbacks by reason, capture ms, peak device MiB of the phase
//! (runtime ledger, weights included; and `cuMemGetInfo` used), device-busy ms of one
//! steady-state chunk (its work queued behind a spin kernel, CUDA events around it, median of
//! `--busy-reps`), and the SHA-256 of the measured pass's mel. Inputs come from `--io` (the
//! peer's `io.safetensors`) or, without it, from a fixed pseudo-random sequence. With the
//! vocoder (the default, [`audio`]) each pass streams tokens to PCM through
//! [`dcc_models::speech`] and ends with the vocoder's flush; the arm adds vocoder and
//! end-to-end p50/p95, time to first audio, the PCM's SHA-256 ([`pcm`]), which must equal
//! B0's, and the vocoder's replay catalog; `--wav` writes one arm's stream.
//!
//! `--profile` (token2wav): after the arms, one steady-state eager chunk (arm B0's code path)
//! queued behind a spin kernel with a CUDA event before every op; prints device µs per op
//! category (kernel, GEMM, GEMV, memset) and launches, on stderr (opt-in: the markers slow the
//! chunk down; the table attributes device time, it is not a latency).
//!
//! `kernels` ([`kernels`]): the `gemm.linear_*` tile variants against the cuBLAS path at the
//! model's linear shapes (device µs, TFLOP/s, bit-equality to the host twin, error against
//! cuBLAS), for tuning the tiles on the GPU.
//!
//! `attention` ([`attention`]): the DiT's attention, fp32 (`attention.sdpa`) against 3xTF32 on
//! tensor cores (`attention.sdpa_tf32x3`) and the half point's f16 on tensor cores
//! (`attention.sdpa_f16`), at the estimator's shapes (device µs, TFLOP/s, each checked against
//! the fp32 twin); with `--rel-pos`, the encoder's `attention.rel_pos`, its staged launch
//! against the global-memory one (device µs, each bit-equal to the twin).
//!
//! `check`: streams `--io`'s chunks and compares each chunk's mel with its `feat_i` (relative L2
//! error ≤ `--tol`). With a `pcm.safetensors` beside `--io`, the vocoder on the vendor's own mel
//! against the vendor's PCM (≤ `--pcm-tol`) and each arm's end-to-end PCM distance, reported and
//! gated only by `--e2e-pcm-tol` ([`pcm`] says why). Retention comes from the contract.
//!
//! Progress on stderr; results on stdout (a table, or one JSON object with `--format json`).

mod attention;
mod attention_half;
mod audio;
mod cli;
mod contract;
mod error;
mod inputs;
mod kernels;
mod kernels_f16;
mod kernels_table;
mod pcm;
mod plot;
mod profile;
mod report;
mod roofline;
mod sessions;
mod sessions_table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use dcc_models::nn::WeightStore;
use dcc_models::speech::{SpeechError, SpeechModel};
use dcc_models::token2wav::serve::{Arm, ContractView};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, rel_l2};
use dcc_runtime::backend::{Backend, BackendKind};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::{Arg, LaunchDims};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

use audio::{ArmAudio, Stream, ms};
use cli::{BackendChoice, Opts};
use contract::{Contract, Sizes};
use dcc_runtime::stats;
use error::BenchError;
use inputs::{Inputs, read_io, synthetic_io, tokens_of};

const MIB: f64 = 1024.0 * 1024.0;

type Res<T> = Result<T, BenchError>;

/// A percentile of a pass's samples ([`dcc_runtime::stats`]); `None` for no samples (e.g.
/// `--busy-reps 0`), an error for a NaN sample.
fn pct(arm: Arm, what: &'static str, v: &[f64], q: f64) -> Res<Option<f64>> {
    match stats::percentile(v, q) {
        Ok(p) => Ok(Some(p)),
        Err(stats::StatsError::Empty) => Ok(None),
        Err(error) => Err(BenchError::Stats {
            arm: arm.name(),
            what,
            error,
        }),
    }
}

/// A JSON number, or for NaN and ±∞ (which JSON cannot hold, and `serde_json` would turn into
/// `null`, indistinguishable from "not measured") the strings `"NaN"`, `"inf"`, `"-inf"`.
fn num(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        json!(x.to_string())
    }
}

/// Where chunk `i`'s `tensor` (its mel, or its reference `feat_i`) holds NaN or ±∞, if
/// anywhere: the first such index (and its value) and how many there are. No tolerance excuses
/// one, in `check` or `token2wav`.
fn non_finite(i: usize, tensor: &str, m: &[f32]) -> Option<String> {
    let first = m.iter().position(|x| !x.is_finite())?;
    let bad = m.iter().filter(|x| !x.is_finite()).count();
    Some(format!(
        "chunk {i}: tensor {tensor}: {bad} of {} values are not finite, the first at index {first} \
         ({})",
        m.len(),
        m[first]
    ))
}

fn mel_bytes(m: &[f32]) -> Vec<u8> {
    m.iter().flat_map(|x| x.to_le_bytes()).collect()
}

struct Setup {
    be: Arc<dyn Backend>,
    dev: Arc<DeviceFlow>,
    contract: ContractView,
    sizes: Sizes,
    io: Inputs,
    prompt: Vec<u32>,
    cfg: FlowConfig,
    /// The flow and the vocoder composed (`None` with `--no-vocoder`).
    speech: Option<SpeechModel>,
}

fn setup(o: &Opts) -> Res<Setup> {
    let be: Arc<dyn Backend> = match o.backend {
        BackendChoice::Cuda => dcc_runtime::backend::cuda(0).map_err(BenchError::Cuda)?,
        BackendChoice::Host => dcc_runtime::backend::host(),
    };
    if let Some(v) = &o.vocoder {
        v.check_exists()?;
    }
    let ws = WeightStore::load(&o.weights).map_err(dcc_models::token2wav::FlowError::from)?;
    let cfg = FlowConfig::from_weights(&ws)?;
    let Contract {
        view: contract,
        sizes,
    } = Contract::select(o.contract, &cfg, o.point.as_deref(), o.gemm)?;
    let io = match &o.io {
        Some(p) => read_io(p, o.chunks, &sizes)?,
        None => {
            let n = o
                .chunks
                .max(o.warmup)
                .checked_add(o.busy_reps)
                .and_then(|n| n.checked_add(1))
                .ok_or(BenchError::Overflow("--chunks + --busy-reps"))?;
            synthetic_io(n, cfg.vocab, &sizes)?
        }
    };
    // The prompt call reads the prompt and, as lookahead, its own first tokens (as the vendor's
    // `setup_cache` is called).
    let mut prompt = io.prompt.clone();
    prompt.extend_from_slice(&io.prompt[..sizes.lookahead_tokens.min(io.prompt.len())]);
    let k = contract.keeps;
    let dev = DeviceFlow::new_on_path(
        be.clone(),
        &ws,
        &cfg,
        DeviceLimits {
            max_call_tokens: prompt
                .len()
                .max(sizes.chunk_tokens + sizes.lookahead_tokens),
            carry_frames: k.carry.bound().max(k.upsample.bound()),
        },
        o.gemm.path(),
    )?;
    // What the flow launches, and the spin of the device-busy figure: nothing else compiles.
    let mut kernels = dev.kernels();
    kernels.push(&ks::SPIN);
    be.preload(&kernels)?;
    let dev = Arc::new(dev);
    let speech = match &o.vocoder {
        Some(v) => {
            let load = || -> Result<SpeechModel, SpeechError> {
                let w = dcc_models::vocoder::VocoderWeights::load(&v.path)?;
                let voc = dcc_models::vocoder::CausalHift::load(be.as_ref(), &w)?;
                be.preload(&voc.kernels())
                    .map_err(dcc_models::token2wav::FlowError::from)?;
                SpeechModel::from_parts(dev.clone(), Arc::new(voc), contract)
            };
            Some(load().map_err(|e| BenchError::Vocoder(Box::new(e)))?)
        }
        None => None,
    };
    Ok(Setup {
        be,
        dev,
        contract,
        sizes,
        io,
        prompt,
        cfg,
        speech,
    })
}

#[derive(Default)]
struct ArmResult {
    arm: &'static str,
    wall: Vec<f64>,
    p50: f64,
    p95: f64,
    busy: Option<f64>,
    launches: f64,
    kernels: f64,
    peak_ledger: f64,
    used_device: Option<f64>,
    by_kind: BTreeMap<String, f64>,
    replays: u64,
    fallbacks_steady: BTreeMap<String, u64>,
    fallbacks_total: BTreeMap<String, u64>,
    classes: usize,
    capture_ms: f64,
    probe_ms: f64,
    staging_mib: f64,
    sha: String,
    rel_l2: Vec<f64>,
    /// The audio figures (`None` for the flow alone).
    audio: Option<ArmAudio>,
    /// Outputs no tolerance can excuse: non-finite mel values, a mel whose length differs from
    /// the reference's. Any entry fails the run.
    problems: Vec<String>,
}

fn run_arm(s: &Setup, o: &Opts, arm: Arm, pb: &ProgressBar) -> Res<ArmResult> {
    let be = &s.be;
    let e = |error| BenchError::Flow {
        arm: Some(arm.name()),
        error,
    };
    be.synchronize()?;
    be.reset_peak();
    let io = &s.io;
    // warm-up: every class probed and captured here (and the vocoder's first calls made)
    pb.set_message(format!("{} warm-up", arm.name()));
    let mut stream = Stream::open(&s.dev, s.speech.as_ref(), s.contract, arm, io, &s.prompt)?;
    for i in 0..o.warmup {
        stream.chunk(arm, tokens_of(io, &s.sizes, i)?)?;
        pb.inc(1);
    }
    stream.finish(arm)?;
    // measured pass
    pb.set_message(format!("{} measured", arm.name()));
    stream.restart(arm, io, &s.prompt)?;
    be.synchronize()?;
    let ses = stream.session();
    let fb0 = ses.fallbacks();
    let (l0, g0, n0) = (
        be.eager_launches(),
        ses.stats().graph_launches,
        ses.stats().graph_nodes,
    );
    let mut r = ArmResult {
        arm: arm.name(),
        audio: s.speech.as_ref().map(|_| ArmAudio::default()),
        ..Default::default()
    };
    let mut hash = Vec::new();
    let first = Instant::now();
    // the vocoder's engines after the pass's first chunk: its steady state starts there
    let mut voc_first = Vec::new();
    for i in 0..o.chunks {
        let toks = tokens_of(io, &s.sizes, i)?;
        let since_first = ms(first.elapsed());
        let window = o.profiler_window && i + 1 == o.chunks;
        if window {
            be.profiler_window(true)?;
        }
        let c = stream.chunk(arm, toks)?;
        if window {
            be.profiler_window(false)?;
        }
        let m = &c.mel;
        r.wall.push(ms(c.timing.flow));
        if let Some(a) = &mut r.audio {
            a.chunk(&c, since_first);
        }
        if let Some(p) = non_finite(i, "mel", m) {
            r.problems.push(p);
        }
        if let Some(f) = io.feats.get(i) {
            if let Some(p) = non_finite(i, &format!("feat_{i}"), f) {
                r.problems.push(p);
            }
            match rel_l2(m, f) {
                Ok(e) => r.rel_l2.push(e),
                Err(e) => r.problems.push(format!("chunk {i}: mel vs feat_{i}: {e}")),
            }
        }
        hash.extend_from_slice(&mel_bytes(m));
        if i == 0 {
            voc_first = stream.vocoder_reports();
        }
        pb.inc(1);
    }
    // launches of the chunks (with the vocoder: its eager launches too), the flush not counted
    let (l1, g1, n1) = (
        be.eager_launches(),
        stream.session().stats().graph_launches,
        stream.session().stats().graph_nodes,
    );
    if let Some(c) = stream.finish(arm)?
        && let Some(a) = &mut r.audio
    {
        a.flush(&c, ms(first.elapsed()));
    }
    if let Some(a) = &mut r.audio {
        a.catalog = audio::VocoderCatalog::between(&voc_first, &stream.vocoder_reports());
    }
    let mut ses = stream.into_session();
    let n = o.chunks as f64;
    r.launches = ((l1 - l0) + (g1 - g0)) as f64 / n;
    r.kernels = ((l1 - l0) + (n1 - n0)) as f64 / n;
    let fb1 = ses.fallbacks();
    for (k, v) in &fb1 {
        let d = v - fb0.get(k).copied().unwrap_or(0);
        if d > 0 {
            r.fallbacks_steady.insert(k.name().into(), d);
        }
        r.fallbacks_total.insert(k.name().into(), *v);
    }
    r.sha = dcc_runtime::sha256_hex(&hash);
    // `--chunks` ≥ 1, so the wall times are never empty.
    r.p50 = pct(arm, "wall", &r.wall, 0.5)?.unwrap_or(f64::NAN);
    r.p95 = pct(arm, "wall", &r.wall, 0.95)?.unwrap_or(f64::NAN);
    let mem = be.memory();
    r.peak_ledger = mem.peak_total as f64 / MIB;
    r.used_device = match (mem.device_free, mem.device_total) {
        (Some(f), Some(t)) => Some((t - f) as f64 / MIB),
        _ => None,
    };
    for (k, u) in &mem.by_kind {
        r.by_kind.insert(k.name().into(), u.peak as f64 / MIB);
    }
    for rep in ses.reports() {
        r.replays += rep.replays;
        r.classes += rep.classes_captured;
        r.capture_ms += rep.capture_ms;
        r.probe_ms += rep.probe_ms;
        r.staging_mib += rep.staging_bytes as f64 / MIB;
    }
    // device-busy of one steady-state chunk: its work queued behind a spin kernel
    pb.set_message(format!("{} device-busy", arm.name()));
    let mut busy = Vec::new();
    for k in 0..o.busy_reps {
        let chunks_in_stream = (io.stream.len() / s.sizes.chunk_tokens).max(1);
        let toks = tokens_of(io, &s.sizes, (o.chunks + k) % chunks_in_stream)?;
        s.dev.set_inputs(toks, &io.spk, false)?;
        be.synchronize()?;
        spin(be.as_ref(), 200_000_000)?;
        let m0 = be.marker()?;
        ses.enqueue_uploaded(toks.len(), false).map_err(e)?;
        let m1 = be.marker()?;
        busy.push(be.elapsed_ms(&m0, &m1)?);
        pb.inc(1);
    }
    r.busy = pct(arm, "device-busy", &busy, 0.5)?;
    Ok(r)
}

/// Queues a spin kernel of `iters` iterations on CUDA (nothing on Host), so that the work queued
/// after it starts on an idle device and its markers time device work, not host launches.
fn spin(be: &dyn Backend, iters: i64) -> Res<()> {
    if be.kind() == BackendKind::Cuda {
        // SAFETY: SPIN takes no pointer argument; it only burns cycles.
        unsafe { be.launch(&ks::SPIN, LaunchDims::blocks(1, 32), &[Arg::I64(iters)]) }?;
    }
    Ok(())
}

/// The exit code of a command that returns whether it passed: 0, 1 (failed or a run error), 2
/// (stdout unwritable).
fn exit(r: Res<bool>) -> ExitCode {
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e @ BenchError::Stdout(_)) => {
            let _ = writeln!(std::io::stderr(), "dcc-bench: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("dcc-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let o = match cli::parse_from(std::env::args_os()) {
        Ok(cli::Command::Flow(o)) => o,
        Ok(cli::Command::Sessions(a)) => return exit(sessions::run(&a)),
        Ok(cli::Command::Kernels(k)) => return exit(kernels::run(&k)),
        Ok(cli::Command::Attention(a)) => return exit(attention::run(&a)),
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    exit(run(&o).map(|out| out["ok"] == Value::Bool(true)))
}

/// Runs the arms, prints the results (and writes `--json-out`); returns the JSON object, whose
/// `ok` says whether the run passed.
fn run(o: &Opts) -> Res<Value> {
    let t0 = Instant::now();
    let s = setup(o)?;
    if o.is_check() && s.io.feats.len() < o.chunks {
        return Err(BenchError::MissingReferences {
            have: s.io.feats.len(),
            want: o.chunks,
        });
    }
    let steps = o
        .warmup
        .checked_add(o.chunks)
        .and_then(|n| n.checked_add(o.busy_reps))
        .and_then(|n| n.checked_mul(o.arms.len()))
        .ok_or(BenchError::Overflow("the progress bar's length"))?;
    let pb = ProgressBar::new(steps as u64);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .map_err(BenchError::Progress)?
            .progress_chars("=> "),
    );
    let mut res = Vec::new();
    for &arm in &o.arms {
        res.push(run_arm(&s, o, arm, &pb)?);
    }
    pb.finish_and_clear();
    if o.profile {
        profile::profile(&s)?;
    }
    let device = s.be.device_name().to_string();
    let b0 = res
        .iter()
        .find(|r| r.arm == "B0")
        .map(|r| (r.p50, r.peak_ledger, r.sha.clone()));
    let b0_pcm = res
        .iter()
        .find(|r| r.arm == "B0")
        .and_then(|r| r.audio.as_ref().map(ArmAudio::sha256));
    // the vendor's PCM (check, with the vocoder): `pcm.safetensors` beside --io
    let pcm_ref = match (&o.io, o.pcm_tol, &s.speech) {
        (Some(io), Some(_), Some(_)) => pcm::read_reference(io, o.chunks)?,
        _ => None,
    };
    let k = &s.contract.keeps.carry;
    let head = json!({
        "bench": if o.is_check() { "dcc-bench check" } else { "dcc-bench token2wav" },
        "device": device,
        "backend": o.backend.name(),
        "contract": s.contract.family,
        "point": s.contract.point,
        "gemm": o.gemm.name(),
        "retention": format!("keep head {} ‖ tail {}", k.head, k.tail),
        "prompt_frames": k.prompt,
        "retained_frames": k.retained,
        "config": if s.cfg == FlowConfig::tiny() { "tiny" } else if s.cfg == FlowConfig::full() { "full" } else { "other" },
        "inputs": o.io.as_ref().map_or_else(|| "synthetic".into(), |p| p.display().to_string()),
        "chunks": o.chunks,
        "warmup": o.warmup,
        "wall_s": t0.elapsed().as_secs_f64(),
        "vocoder_weights": o.vocoder.as_ref().map(|v| v.path.display().to_string()),
        "vocoder_noise_sha256": s.speech.as_ref().map(|m| m.vocoder().noise_sha256().to_string()),
        "pcm_reference": pcm_ref.as_ref().map(|r| r.path.display().to_string()),
        "pcm_tol": pcm_ref.as_ref().and(o.pcm_tol),
        "e2e_pcm_tol": pcm_ref.as_ref().and(o.e2e_pcm_tol),
        "wav": o.wav.as_ref().map(|w| w.path.display().to_string()),
    });
    let mut ok = true;
    // the mel's own verdict against --io's feat_i (check): every arm's chunks within --tol, no
    // mel problem; the PCM's verdicts are reported on their own lines
    let mut mel_ok = true;
    let mut arms_json = Vec::new();
    for x in &res {
        let identical = b0.as_ref().map(|b| b.2 == x.sha);
        if identical == Some(false) {
            ok = false;
        }
        // NaN propagates (a NaN error is reported as NaN, never as the largest finite one).
        let max_l2 = stats::max(x.rel_l2.iter().copied());
        for p in &x.problems {
            eprintln!("dcc-bench: arm {}: {p}", x.arm);
            mel_ok = false;
        }
        if let Some(tol) = o.check_tol {
            // `e <= tol` is false for NaN: a NaN error fails whatever the tolerance.
            let within = x.rel_l2.iter().all(|e| *e <= tol);
            if !within || x.rel_l2.len() < o.chunks {
                mel_ok = false;
            }
        }
        let mut problems = x.problems.clone();
        let audio = match &x.audio {
            Some(a) => {
                let arm = Arm::parse(x.arm).unwrap_or(Arm::B0);
                let reference = pcm_ref.as_ref().map(|r| (r, o.e2e_pcm_tol));
                let (fields, within) =
                    pcm::arm_fields(arm, a, b0_pcm.as_deref(), reference, &mut problems)?;
                ok &= within;
                fields
            }
            None => BTreeMap::new(),
        };
        for p in &problems[x.problems.len()..] {
            eprintln!("dcc-bench: arm {}: {p}", x.arm);
            ok = false;
        }
        let mut arm_json = json!({
            "arm": x.arm,
            "p50_ms": x.p50, "p95_ms": x.p95,
            "device_busy_ms": x.busy,
            "launches_per_chunk": x.launches,
            "kernels_per_chunk": x.kernels,
            "peak_mib": x.peak_ledger,
            "peak_by_kind_mib": x.by_kind,
            "cumemgetinfo_used_mib": x.used_device,
            "speedup_vs_b0": b0.as_ref().map(|b| b.0 / x.p50),
            "dpeak_vs_b0_mib": b0.as_ref().map(|b| x.peak_ledger - b.1),
            "replays": x.replays,
            "classes_captured": x.classes,
            "capture_ms": x.capture_ms,
            "probe_ms": x.probe_ms,
            "staging_mib": x.staging_mib,
            "fallbacks_steady": x.fallbacks_steady,
            "fallbacks_total": x.fallbacks_total,
            "mel_sha256": x.sha,
            "identical_to_b0": identical,
            "rel_l2_per_chunk": x.rel_l2.iter().map(|e| num(*e)).collect::<Vec<_>>(),
            "rel_l2_max": max_l2.map_or(Value::Null, num),
            "problems": problems,
            "wall_ms": x.wall,
        });
        if let Value::Object(m) = &mut arm_json {
            m.extend(audio.into_iter().map(|(k, v)| (k.to_string(), v)));
        }
        arms_json.push(arm_json);
    }
    // every arm's audio must equal B0's, as its mel must
    if let Some(Err(_)) = pcm::verdict(&arms_json) {
        ok = false;
    }
    if let (Some(w), Some(m)) = (&o.wav, &s.speech) {
        let a = res.iter().find(|r| r.arm == w.arm.name());
        audio::write_wav(w, a.and_then(|r| r.audio.as_ref()), m.sample_rate())?;
    }
    ok &= mel_ok;
    // the vocoder port on the vendor's own mel, against the vendor's PCM
    let vocoder_check = match (&pcm_ref, o.pcm_tol, &s.speech) {
        (Some(r), Some(tol), Some(m)) => pcm::vocoder_check(m, &s.io.feats, r, tol)?,
        _ => Value::Null,
    };
    for p in vocoder_check["problems"].as_array().into_iter().flatten() {
        eprintln!(
            "dcc-bench: the vocoder on --io's feat_i: {}",
            p.as_str().unwrap_or("")
        );
    }
    if vocoder_check["ok"] == Value::Bool(false) {
        ok = false;
    }
    let out = json!({
        "run": head,
        "arms": arms_json,
        "vocoder_check": vocoder_check,
        "mel_ok": mel_ok,
        "ok": ok,
    });
    let text = serde_json::to_string(&out).map_err(BenchError::Json)?;
    if let Some(p) = &o.json_out {
        report::write_atomic(p, &format!("{text}\n"))?;
    }
    // A closed pipe (`dcc-bench … | head -1`) or a full disk is an error (exit 2), not a panic.
    let mut stdout = std::io::stdout().lock();
    if o.json {
        writeln!(stdout, "{text}")
    } else {
        report::write_table(&mut stdout, &out, o)
    }
    .and_then(|()| stdout.flush())
    .map_err(BenchError::Stdout)?;
    Ok(out)
}
