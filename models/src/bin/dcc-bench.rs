//! `dcc-bench`: the Token2Wav factorial of the paper's Table 5, and the correctness check.
//!
//! ```text
//! dcc-bench token2wav --weights W.safetensors [--io IO.safetensors] [--arms B0,S,R,Rc,SR,SRc]
//!           [--chunks 24] [--warmup 4] [--busy-reps 3] [--backend cuda|host]
//!           [--contract auto|token2wav|token2wav_tiny|token2wav_tiny_vendor] [--format table|json]
//!           [--json-out PATH] [--profile]
//! dcc-bench check --weights W.safetensors --io IO.safetensors [--arms B0,SRc] [--chunks N]
//!           [--tol 1e-3] [--backend cuda|host] [--contract ...] [--format table|json]
//! ```
//!
//! `token2wav`: per arm, a warm-up pass (prime + `--warmup` chunks: every catalog class is
//! probed and captured here), then the measured pass (prime again, `--chunks` chunks): wall
//! p50/p95 ms per chunk (inputs uploaded, callables run, mel read back), launches per chunk (host
//! submissions: eager kernels + GEMMs + graph launches) and device kernels per chunk (eager +
//! graph nodes), steady-state eager fallbacks by reason, capture ms, peak device MiB of the phase
//! (runtime ledger, weights included; and `cuMemGetInfo` used), device-busy ms of one
//! steady-state chunk (its work queued behind a spin kernel, CUDA events around it, median of
//! `--busy-reps`), and the SHA-256 of the measured pass's mel. Inputs come from `--io` (the
//! peer's `io.safetensors`) or, without it, from a fixed pseudo-random sequence.
//!
//! `--profile` (token2wav): after the arms, one steady-state eager chunk (arm B0's code path)
//! queued behind a spin kernel with a CUDA event before every op; prints device µs per op
//! category (kernel, GEMM, GEMV, memset) and launches, on stderr (opt-in: the markers slow the
//! chunk down; the table attributes device time, it is not a latency).
//!
//! `check`: streams `--io`'s chunks and compares each chunk's mel with its `feat_i` (relative L2
//! error ≤ `--tol`). Retention comes from the contract.
//!
//! Progress on stderr; results on stdout (a table, or one JSON object with `--format json`).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{
    Arm, ContractView, Session, Token2Wav, Token2WavTiny, Token2WavTinyVendor,
};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, SolverParams, rel_l2};
use dcc_runtime::backend::{Backend, BackendKind};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::{Arg, LaunchDims};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};

const MIB: f64 = 1024.0 * 1024.0;
const PROMPT_TOKENS: usize = 151;
const CHUNK: usize = 25;
const LOOKAHEAD: usize = 3;

type Res<T> = Result<T, String>;

struct Opts {
    cmd: String,
    weights: String,
    io: Option<String>,
    arms: Vec<Arm>,
    chunks: usize,
    warmup: usize,
    busy_reps: usize,
    backend: String,
    contract: String,
    json: bool,
    json_out: Option<String>,
    tol: f64,
    profile: bool,
}

fn usage() -> String {
    "usage: dcc-bench token2wav|check --weights W.safetensors [--io IO.safetensors] \
     [--arms B0,S,R,Rc,SR,SRc] [--chunks N] [--warmup N] [--busy-reps N] [--backend cuda|host] \
     [--contract auto|token2wav|token2wav_tiny|token2wav_tiny_vendor] [--format table|json] \
     [--json-out PATH] [--tol X] [--profile]"
        .into()
}

fn parse() -> Res<Opts> {
    let mut a = std::env::args().skip(1);
    let cmd = a.next().ok_or_else(usage)?;
    if cmd == "--help" || cmd == "-h" {
        return Err(usage());
    }
    if cmd != "token2wav" && cmd != "check" {
        return Err(format!("unknown command `{cmd}`\n{}", usage()));
    }
    let mut o = Opts {
        arms: if cmd == "check" {
            vec![Arm::B0, Arm::SRc]
        } else {
            Arm::ALL.to_vec()
        },
        cmd,
        weights: String::new(),
        io: None,
        chunks: 24,
        warmup: 4,
        busy_reps: 3,
        backend: "cuda".into(),
        contract: "auto".into(),
        json: false,
        json_out: None,
        tol: 1e-3,
        profile: false,
    };
    while let Some(k) = a.next() {
        let mut v = || a.next().ok_or_else(|| format!("{k} needs a value"));
        let num = |s: String| s.parse::<usize>().map_err(|e| format!("{k}: {e}"));
        match k.as_str() {
            "--weights" => o.weights = v()?,
            "--io" => o.io = Some(v()?),
            "--arms" => {
                o.arms = v()?
                    .split(',')
                    .map(|s| Arm::parse(s.trim()).ok_or_else(|| format!("unknown arm `{s}`")))
                    .collect::<Res<_>>()?
            }
            "--chunks" => o.chunks = num(v()?)?,
            "--warmup" => o.warmup = num(v()?)?,
            "--busy-reps" => o.busy_reps = num(v()?)?,
            "--backend" => o.backend = v()?,
            "--contract" => o.contract = v()?,
            "--json-out" => o.json_out = Some(v()?),
            "--profile" => o.profile = true,
            "--tol" => o.tol = v()?.parse().map_err(|e| format!("--tol: {e}"))?,
            "--format" => {
                o.json = match v()?.as_str() {
                    "json" => true,
                    "table" => false,
                    f => return Err(format!("unknown format `{f}`")),
                }
            }
            _ => return Err(format!("unknown option `{k}`\n{}", usage())),
        }
    }
    if o.weights.is_empty() {
        return Err(format!("--weights is required\n{}", usage()));
    }
    if o.chunks == 0 {
        return Err("--chunks must be positive".into());
    }
    Ok(o)
}

struct Inputs {
    prompt: Vec<u32>,
    mel: Vec<f32>,
    spk: Vec<f32>,
    stream: Vec<u32>,
    feats: Vec<Vec<f32>>,
}

fn read_io(path: &str, chunks: usize) -> Res<Inputs> {
    let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let raw = |n: &str| -> Res<Vec<[u8; 4]>> {
        let t = st.tensor(n).map_err(|e| format!("{path}: {n}: {e}"))?;
        Ok(t.data()
            .chunks_exact(4)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect())
    };
    let f =
        |n: &str| -> Res<Vec<f32>> { Ok(raw(n)?.into_iter().map(f32::from_le_bytes).collect()) };
    let t = |n: &str| -> Res<Vec<u32>> {
        Ok(raw(n)?
            .into_iter()
            .map(|b| i32::from_le_bytes(b) as u32)
            .collect())
    };
    let mut feats = Vec::new();
    for i in 0..chunks {
        match f(&format!("feat_{i}")) {
            Ok(v) => feats.push(v),
            Err(_) => break,
        }
    }
    Ok(Inputs {
        prompt: t("prompt_tokens")?,
        mel: f("prompt_mel")?,
        spk: f("spk")?,
        stream: t("stream_tokens")?,
        feats,
    })
}

/// Deterministic inputs when no `--io` is given (xorshift; not the peer's draws).
fn synthetic_io(chunks: usize, vocab: usize, mel_bins: usize, spk_dim: usize) -> Inputs {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut tok = |n: usize| (0..n).map(|_| (next() % vocab as u64) as u32).collect();
    let prompt: Vec<u32> = tok(PROMPT_TOKENS);
    let stream: Vec<u32> = tok(chunks * CHUNK + LOOKAHEAD);
    let mut s2 = 0x2545_f491_4f6c_dd1du64;
    let mut unif = move || {
        s2 ^= s2 << 13;
        s2 ^= s2 >> 7;
        s2 ^= s2 << 17;
        (s2 >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    Inputs {
        prompt,
        mel: (0..2 * PROMPT_TOKENS * mel_bins).map(|_| unif()).collect(),
        spk: (0..spk_dim).map(|_| 2.0 * unif()).collect(),
        stream,
        feats: Vec::new(),
    }
}

fn contract(name: &str, cfg: &FlowConfig) -> Res<ContractView> {
    let name = if name == "auto" {
        if *cfg == FlowConfig::tiny() {
            "token2wav_tiny"
        } else {
            "token2wav"
        }
    } else {
        name
    };
    match name {
        "token2wav" => ContractView::of::<Token2Wav>(),
        "token2wav_tiny" => ContractView::of::<Token2WavTiny>(),
        "token2wav_tiny_vendor" => ContractView::of::<Token2WavTinyVendor>(),
        _ => return Err(format!("unknown contract `{name}`")),
    }
    .map_err(|e| e.to_string())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        f64::NAN
    } else {
        v[v.len() / 2]
    }
}

fn mel_bytes(m: &[f32]) -> Vec<u8> {
    m.iter().flat_map(|x| x.to_le_bytes()).collect()
}

struct Setup {
    be: Arc<dyn Backend>,
    dev: Arc<DeviceFlow>,
    contract: ContractView,
    io: Inputs,
    prompt: Vec<u32>,
    cfg: FlowConfig,
}

fn setup(o: &Opts) -> Res<Setup> {
    let be: Arc<dyn Backend> = match o.backend.as_str() {
        "cuda" => dcc_runtime::backend::cuda(0).map_err(|e| format!("CUDA: {e}"))?,
        "host" => dcc_runtime::backend::host(),
        b => return Err(format!("unknown backend `{b}`")),
    };
    let ws = WeightStore::load(&o.weights).map_err(|e| e.to_string())?;
    let cfg = FlowConfig::from_weights(&ws).map_err(|e| e.to_string())?;
    let contract = contract(&o.contract, &cfg)?;
    let io = match &o.io {
        Some(p) => read_io(p, o.chunks)?,
        None => synthetic_io(
            o.chunks.max(o.warmup) + o.busy_reps + 1,
            cfg.vocab,
            cfg.mel,
            cfg.spk_dim,
        ),
    };
    let mut prompt = io.prompt.clone();
    prompt.extend_from_slice(&io.prompt[..LOOKAHEAD.min(io.prompt.len())]);
    let k = contract.keeps;
    let dev = DeviceFlow::new(
        be.clone(),
        &ws,
        &cfg,
        DeviceLimits {
            max_call_tokens: prompt.len().max(CHUNK + LOOKAHEAD),
            carry_frames: k.carry.bound().max(k.upsample.bound()),
        },
    )
    .map_err(|e| e.to_string())?;
    let mut all: Vec<&'static dcc_runtime::KernelDef> = Vec::new();
    for m in dcc_runtime::kernels::MODULES {
        all.extend_from_slice(m);
    }
    be.preload(&all).map_err(|e| e.to_string())?;
    Ok(Setup {
        be,
        dev: Arc::new(dev),
        contract,
        io,
        prompt,
        cfg,
    })
}

fn tokens_of(io: &Inputs, i: usize) -> Res<&[u32]> {
    io.stream
        .get(i * CHUNK..i * CHUNK + CHUNK + LOOKAHEAD)
        .ok_or_else(|| format!("the input stream has no chunk {i}"))
}

#[derive(Default)]
struct ArmResult {
    arm: &'static str,
    wall: Vec<f64>,
    p50: f64,
    p95: f64,
    busy: f64,
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
}

fn run_arm(s: &Setup, o: &Opts, arm: Arm, pb: &ProgressBar) -> Res<ArmResult> {
    let be = &s.be;
    let e = |x: dcc_models::token2wav::FlowError| format!("{}: {x}", arm.name());
    be.synchronize().map_err(|x| x.to_string())?;
    be.reset_peak();
    let mut ses =
        Session::new(s.dev.clone(), s.contract, arm, SolverParams::default()).map_err(e)?;
    let io = &s.io;
    // warm-up: every class probed and captured here
    pb.set_message(format!("{} warm-up", arm.name()));
    ses.prime(&s.prompt, &io.mel, &io.spk).map_err(e)?;
    for i in 0..o.warmup {
        ses.chunk(tokens_of(io, i)?, &io.spk, false).map_err(e)?;
        pb.inc(1);
    }
    // measured pass
    pb.set_message(format!("{} measured", arm.name()));
    ses.prime(&s.prompt, &io.mel, &io.spk).map_err(e)?;
    be.synchronize().map_err(|x| x.to_string())?;
    let fb0 = ses.fallbacks();
    let (l0, g0, n0) = (
        be.eager_launches(),
        ses.stats().graph_launches,
        ses.stats().graph_nodes,
    );
    let mut r = ArmResult {
        arm: arm.name(),
        ..Default::default()
    };
    let mut hash = Vec::new();
    for i in 0..o.chunks {
        let toks = tokens_of(io, i)?;
        let t = Instant::now();
        let m = ses.chunk(toks, &io.spk, false).map_err(e)?;
        r.wall.push(t.elapsed().as_secs_f64() * 1e3);
        if let Some(f) = io.feats.get(i) {
            r.rel_l2.push(rel_l2(&m, f));
        }
        hash.extend_from_slice(&mel_bytes(&m));
        pb.inc(1);
    }
    let n = o.chunks as f64;
    let (l1, g1, n1) = (
        be.eager_launches(),
        ses.stats().graph_launches,
        ses.stats().graph_nodes,
    );
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
    let mut w = r.wall.clone();
    w.sort_by(f64::total_cmp);
    r.p50 = percentile(&w, 0.5);
    r.p95 = percentile(&w, 0.95);
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
        let toks = tokens_of(io, (o.chunks + k) % (io.stream.len() / CHUNK).max(1))?;
        s.dev
            .set_inputs(toks, &io.spk, false)
            .map_err(|x| x.to_string())?;
        be.synchronize().map_err(|x| x.to_string())?;
        if be.kind() == BackendKind::Cuda {
            // SAFETY: SPIN takes no pointer argument; it only burns cycles.
            unsafe {
                be.launch(
                    &ks::SPIN,
                    LaunchDims::blocks(1, 32),
                    &[Arg::I64(200_000_000)],
                )
            }
            .map_err(|x| x.to_string())?;
        }
        let m0 = be.marker().map_err(|x| x.to_string())?;
        ses.enqueue_uploaded(toks.len(), false).map_err(e)?;
        let m1 = be.marker().map_err(|x| x.to_string())?;
        busy.push(be.elapsed_ms(&m0, &m1).map_err(|x| x.to_string())?);
        pb.inc(1);
    }
    r.busy = median(&mut busy);
    Ok(r)
}

/// One eager steady-state chunk with a marker before every op, behind a spin kernel.
fn profile(s: &Setup) -> Res<()> {
    let be = &s.be;
    let e = |x: dcc_models::token2wav::FlowError| x.to_string();
    let io = &s.io;
    let mut ses =
        Session::new(s.dev.clone(), s.contract, Arm::B0, SolverParams::default()).map_err(e)?;
    ses.prime(&s.prompt, &io.mel, &io.spk).map_err(e)?;
    for i in 0..2 {
        ses.chunk(tokens_of(io, i)?, &io.spk, false).map_err(e)?;
    }
    let toks = tokens_of(io, 2)?;
    s.dev.set_inputs(toks, &io.spk, false).map_err(e)?;
    be.synchronize().map_err(|x| x.to_string())?;
    if be.kind() == BackendKind::Cuda {
        // SAFETY: SPIN takes no pointer argument; it only burns cycles.
        unsafe {
            be.launch(
                &ks::SPIN,
                LaunchDims::blocks(1, 32),
                &[Arg::I64(1_000_000_000)],
            )
        }
        .map_err(|x| x.to_string())?;
    }
    s.dev.profile_begin();
    let t = Instant::now();
    let r = ses.enqueue_uploaded(toks.len(), false);
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    let rows = s.dev.profile_end().map_err(e)?;
    r.map_err(e)?;
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    let launches: usize = rows.iter().map(|r| r.launches).sum();
    eprintln!(
        "profile: one eager chunk on {} ({} ops, {total:.3} ms device between markers, host enqueue {host_ms:.1} ms; where the host enqueued slower than the device ran, the gaps count too)",
        be.device_name(),
        launches,
    );
    eprintln!(
        "{:<36} {:>8} {:>10} {:>9} {:>7}",
        "category", "launches", "total µs", "µs/launch", "share"
    );
    for r in &rows {
        eprintln!(
            "{:<36} {:>8} {:>10.1} {:>9.2} {:>6.1}%",
            r.category,
            r.launches,
            r.ms * 1e3,
            r.ms * 1e3 / r.launches as f64,
            100.0 * r.ms / total
        );
    }
    Ok(())
}

fn fmt_map(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "0".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(ok) => {
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("dcc-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(o: &Opts) -> Res<bool> {
    let t0 = Instant::now();
    let s = setup(o)?;
    if o.cmd == "check" && s.io.feats.len() < o.chunks {
        return Err(format!(
            "--io has {} feat_i tensors, --chunks asks for {}",
            s.io.feats.len(),
            o.chunks
        ));
    }
    let per_arm = if o.cmd == "check" {
        o.warmup + o.chunks
    } else {
        o.warmup + o.chunks + o.busy_reps
    };
    let pb = ProgressBar::new((per_arm * o.arms.len()) as u64);
    pb.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} {msg}")
            .map_err(|e| e.to_string())?
            .progress_chars("=> "),
    );
    let mut res = Vec::new();
    for &arm in &o.arms {
        let mut oo = Opts { ..clone_opts(o) };
        if o.cmd == "check" {
            oo.busy_reps = 0;
        }
        res.push(run_arm(&s, &oo, arm, &pb)?);
    }
    pb.finish_and_clear();
    if o.profile && o.cmd == "token2wav" {
        profile(&s)?;
    }
    let device = s.be.device_name().to_string();
    let b0 = res
        .iter()
        .find(|r| r.arm == "B0")
        .map(|r| (r.p50, r.peak_ledger, r.sha.clone()));
    let k = &s.contract.keeps.carry;
    let head = json!({
        "bench": if o.cmd == "check" { "dcc-bench check" } else { "dcc-bench token2wav" },
        "device": device,
        "backend": o.backend,
        "contract": s.contract.family,
        "retention": format!("keep head {} ‖ tail {}", k.head, k.tail),
        "prompt_frames": k.prompt,
        "retained_frames": k.retained,
        "config": if s.cfg == FlowConfig::tiny() { "tiny" } else if s.cfg == FlowConfig::full() { "full" } else { "other" },
        "inputs": o.io.clone().unwrap_or_else(|| "synthetic".into()),
        "chunks": o.chunks,
        "warmup": o.warmup,
        "wall_s": t0.elapsed().as_secs_f64(),
    });
    let mut ok = true;
    let mut arms_json = Vec::new();
    for x in &res {
        let identical = b0.as_ref().map(|b| b.2 == x.sha);
        if identical == Some(false) {
            ok = false;
        }
        let max_l2 = x.rel_l2.iter().cloned().fold(0.0f64, f64::max);
        // NaN fails too
        let within = x.rel_l2.iter().all(|e| *e <= o.tol);
        if o.cmd == "check" && (!within || x.rel_l2.len() < o.chunks) {
            ok = false;
        }
        arms_json.push(json!({
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
            "rel_l2_per_chunk": x.rel_l2,
            "rel_l2_max": if x.rel_l2.is_empty() { Value::Null } else { json!(max_l2) },
            "wall_ms": x.wall,
        }));
    }
    let out = json!({ "run": head, "arms": arms_json, "ok": ok });
    let text = serde_json::to_string(&out).map_err(|e| e.to_string())?;
    if let Some(p) = &o.json_out {
        std::fs::write(p, format!("{text}\n")).map_err(|e| format!("{p}: {e}"))?;
    }
    if o.json {
        println!("{text}");
    } else {
        print_table(&out, o);
    }
    Ok(ok)
}

fn clone_opts(o: &Opts) -> Opts {
    Opts {
        cmd: o.cmd.clone(),
        weights: o.weights.clone(),
        io: o.io.clone(),
        arms: o.arms.clone(),
        chunks: o.chunks,
        warmup: o.warmup,
        busy_reps: o.busy_reps,
        backend: o.backend.clone(),
        contract: o.contract.clone(),
        json: o.json,
        json_out: o.json_out.clone(),
        tol: o.tol,
        profile: o.profile,
    }
}

fn print_table(out: &Value, o: &Opts) {
    let h = &out["run"];
    println!(
        "{} on {} ({}), contract {} ({} retention, {} + {} frames), {} config, {} measured chunks after {} warm-up, inputs {}",
        h["bench"].as_str().unwrap_or(""),
        h["device"].as_str().unwrap_or(""),
        h["backend"].as_str().unwrap_or(""),
        h["contract"].as_str().unwrap_or(""),
        h["retention"].as_str().unwrap_or(""),
        h["prompt_frames"],
        h["retained_frames"],
        h["config"].as_str().unwrap_or(""),
        h["chunks"],
        h["warmup"],
        h["inputs"].as_str().unwrap_or(""),
    );
    let f = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
    println!(
        "{:<4} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>9} {:>9} {:<20} {:<17} {:>10} {:<6}",
        "arm",
        "p50 ms",
        "p95 ms",
        "busy ms",
        "speedup",
        "peak MiB",
        "dPeak",
        "cuMem MiB",
        "launch/c",
        "kern/c",
        "replays",
        "classes",
        "capt ms",
        "fallbacks (steady)",
        "mel sha256",
        "rel-L2 max",
        "=B0"
    );
    for a in out["arms"].as_array().into_iter().flatten() {
        let fb: BTreeMap<String, u64> =
            serde_json::from_value(a["fallbacks_steady"].clone()).unwrap_or_default();
        println!(
            "{:<4} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>9} {:>9} {:<20} {:<17} {:>10} {:<6}",
            a["arm"].as_str().unwrap_or(""),
            f(&a["p50_ms"], 2),
            f(&a["p95_ms"], 2),
            f(&a["device_busy_ms"], 2),
            a["speedup_vs_b0"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.2}x")),
            f(&a["peak_mib"], 1),
            f(&a["dpeak_vs_b0_mib"], 1),
            f(&a["cumemgetinfo_used_mib"], 0),
            f(&a["launches_per_chunk"], 1),
            f(&a["kernels_per_chunk"], 0),
            a["replays"].as_u64().unwrap_or(0),
            a["classes_captured"].as_u64().unwrap_or(0),
            f(&a["capture_ms"], 1),
            fmt_map(&fb),
            &a["mel_sha256"].as_str().unwrap_or("")[..16],
            a["rel_l2_max"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.2e}")),
            match a["identical_to_b0"].as_bool() {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            }
        );
    }
    if o.cmd == "check" {
        println!(
            "check: every chunk within rel-L2 {:e} of --io's feat_i: {}",
            o.tol,
            if out["ok"].as_bool() == Some(true) {
                "yes"
            } else {
                "NO"
            }
        );
    }
}
