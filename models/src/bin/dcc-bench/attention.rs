//! `dcc-bench attention`: the DiT's attention kernels, `attention.sdpa` (fp32, one warp per query
//! row, what `ops::attention` launches on the fp32 GEMM paths), `attention.sdpa_tf32x3`
//! (3xTF32 on tensor cores, launched on `GemmPath::InvariantTf32x3`) and `attention.sdpa_f16`
//! (f16 on tensor cores over a binary16 cache, what the half point launches on `GemmPath::Half`;
//! [`super::attention_half`]), at the estimator's shapes:
//! CFG 2 × sessions batch entries (`--batch`, default one session and eight), 8 heads of 64, 56
//! queries over 458 keys (402 carried frames and the chunk's 56).
//!
//! Per batch and kernel: device µs per launch (median of `--samples` samples of `--reps` launches
//! queued behind a spin kernel, after one warm-up launch, as `dcc-bench kernels` times them) and
//! TFLOP/s (`4 · batch · heads · tq · tk · d` per launch: both products), the speed-ups of the
//! tensor-core kernels over `attention.sdpa`, and their checks against the fp32 twin
//! (`dcc_kernels::attention::attention` on the host): `attention.sdpa` bit for bit,
//! `attention.sdpa_tf32x3` every output within `attention::tf32::bound`, `attention.sdpa_f16`
//! within `attention::f16::bound` of the twin over the same binary16 values, each with its
//! largest distance from the twin relative to the largest output. `--cold-mib 0` (the default) reuses one operand set: in the model the cache
//! was written by the launches just before, so the attention reads it from L2. `--tiling`
//! launches the tensor-core kernels in one of their query tilings (`attention::tf32::Tiling`,
//! `attention::f16::Tiling`: 16 or 64 rows per CTA, the same bits) instead of the ones the ops
//! pick, to compare them.
//!
//! `--rel-pos` times the encoder's `attention.rel_pos` instead ([`rel_pos`]).

mod rel_pos;

use std::io::Write;
use std::sync::Arc;

use clap::Args;
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::attention::tf32::Tiling;
use dcc_runtime::kernels::attention::{self, AttnLayout, f16 as fa, tf32};
use dcc_runtime::kernels::synthetic::SPIN;
use dcc_runtime::ops::{self, Ctx, GemmPath, Tensor};
use dcc_runtime::{Arg, LaunchDims};
use serde_json::{Value, json};

use super::Res;
use super::attention_half as half;
use super::cli::{BackendChoice, Format};
use super::error::BenchError;
use super::kernels::{Timing, time};

#[derive(Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
dcc-bench attention                          # batch 2 and 16, the DiT's shapes\n  \
dcc-bench attention --batch 2,4,8,16,32 --samples 21 --format json\n  \
dcc-bench attention --batch 2,32 --tiling rows16     # the 16-row tiling at any batch\n  \
dcc-bench attention --rel-pos                # the encoder's rel-pos, 1 and 16 sessions\n  \
dcc-bench attention --rel-pos --batch 1,16 --warps 2,4,8  # each rows-per-block choice\n\n\
Exit codes: 0 every kernel passes against the fp32 twin (sdpa bit for bit, sdpa_tf32x3 and\n\
sdpa_f16 within their bounds; --rel-pos: both launches bit for bit), 1 otherwise or on a run\n\
error, 2 usage.")]
pub struct AttentionArgs {
    /// Where to run. On `host` the timings are the CPU twins'.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cuda)]
    pub backend: BackendChoice,

    /// Batch entries, comma-separated: 2 is one session's CFG pair, 16 eight sessions batched
    /// (default 2,16); with `--rel-pos` one entry per session (default 1,16).
    #[arg(long, value_delimiter = ',',
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=256))]
    pub batch: Option<Vec<usize>>,

    /// Heads.
    #[arg(long, default_value_t = 8,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64))]
    pub heads: usize,

    /// Head dimension (at most 128).
    #[arg(long, default_value_t = 64,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=128))]
    pub head_dim: usize,

    /// Query frames.
    #[arg(long, default_value_t = 56,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub tq: usize,

    /// Key frames.
    #[arg(long, default_value_t = 458,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=2048))]
    pub tk: usize,

    /// Launches per sample (queued back to back; a sample is their mean).
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub reps: usize,

    /// Samples per timing (the reported µs is their median).
    #[arg(long, value_name = "N", default_value_t = 11,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000))]
    pub samples: usize,

    /// MiB of operands the launches of one timing rotate over (0: one operand set).
    #[arg(long, value_name = "MIB", default_value_t = 0,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=16_384))]
    pub cold_mib: usize,

    /// The query tiling of the tensor-core kernels: as the ops pick it by shape, or 16 (64) rows
    /// per CTA at every batch (an error where a kernel cannot take it).
    #[arg(long, value_enum, default_value_t = TilingChoice::Auto)]
    pub tiling: TilingChoice,

    /// Time the encoder's relative-position attention (`attention.rel_pos`) instead: its
    /// staged launch (`rel_pos_dims`, what the model runs) against the global-memory one
    /// (`attention_dims`), at `--rel-pos-shapes` (`--heads`, `--head-dim` apply; `--tq`, `--tk`,
    /// `--tiling` do not).
    #[arg(long)]
    pub rel_pos: bool,

    /// `--rel-pos` shapes, comma-separated `TQxTK`: the encoder's steady chunk, its token-clock
    /// blocks (25 tokens over 201 kept + 25) and frame-clock up-blocks (50 over 402 + 50).
    #[arg(long, value_delimiter = ',', default_value = "25x226,50x452",
          value_parser = rel_pos::shape)]
    pub rel_pos_shapes: Vec<(usize, usize)>,

    /// `--rel-pos` query rows per block (1..=8), comma-separated, each timed: as
    /// `rel_pos_dims` picks them by shape, unless given.
    #[arg(long, value_delimiter = ',',
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=8))]
    pub warps: Vec<usize>,

    /// Output on stdout: the table, or one JSON object on one line.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

impl AttentionArgs {
    /// `--batch`, or its default for the kernel timed.
    fn batches(&self) -> Vec<usize> {
        match (&self.batch, self.rel_pos) {
            (Some(b), _) => b.clone(),
            (None, false) => vec![2, 16],
            (None, true) => vec![1, 16],
        }
    }
}

/// `--tiling`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TilingChoice {
    /// `attention::tf32::dims`, `attention::f16::dims`: 64 rows from 96 such CTAs where they
    /// apply, else 16.
    Auto,
    /// `Tiling::Rows16`.
    Rows16,
    /// `Tiling::Rows64`.
    Rows64,
}

impl TilingChoice {
    fn tiling(self) -> Option<Tiling> {
        match self {
            TilingChoice::Auto => None,
            TilingChoice::Rows16 => Some(Tiling::Rows16),
            TilingChoice::Rows64 => Some(Tiling::Rows64),
        }
    }

    fn half(self) -> Option<fa::Tiling> {
        match self {
            TilingChoice::Auto => None,
            TilingChoice::Rows16 => Some(fa::Tiling::Rows16),
            TilingChoice::Rows64 => Some(fa::Tiling::Rows64),
        }
    }
}

/// The launch of `attention.sdpa_tf32x3` at shape `s` under `tiling` (`None`: `dims`'s pick).
fn tc_dims((b, h, tq, tk, d): Shape, tiling: Option<Tiling>) -> Res<LaunchDims> {
    match tiling {
        None => tf32::dims(b * h, tq, tk, d),
        Some(t) => tf32::dims_with(t, b * h, tq, tk, d),
    }
    .map_err(|e| dcc_runtime::Error::from(e).into())
}

/// One operand set: `q`, `out` `[batch, tq, heads·d]`, the cache `[batch, heads, tk, 2d]` in f32
/// and rounded to binary16.
struct Operands {
    q: DeviceBuffer,
    kv: DeviceBuffer,
    kv16: DeviceBuffer,
    out: DeviceBuffer,
}

/// The kernel a timing launches: `ops::attention` on a GEMM path (with a forced tiling of the
/// 3xTF32 kernel), or the half point's `attention.sdpa_f16`.
#[derive(Clone, Copy, Debug)]
enum Kernel {
    Path(GemmPath, Option<Tiling>),
    Half(Option<fa::Tiling>),
}

/// `(batch, heads, tq, tk, d)`.
pub type Shape = (usize, usize, usize, usize, usize);

fn host_data(seed: u64, (b, h, tq, tk, d): Shape) -> (Vec<f32>, Vec<f32>) {
    (
        data(2 * seed + 1, b * tq * h * d),
        data(2 * seed + 2, b * h * tk * 2 * d),
    )
}

impl Operands {
    fn new(be: &Arc<dyn Backend>, seed: u64, s: Shape) -> Res<Operands> {
        let (q, kv) = host_data(seed, s);
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other);
        Ok(Operands {
            q: up(&q)?,
            kv: up(&kv)?,
            kv16: half::upload_kv16(be, &kv)?,
            out: up(&vec![f32::NAN; q.len()])?,
        })
    }

    /// Queues `kernel`: `ops::attention` on its path (the tensor-core kernel on
    /// `InvariantTf32x3`), with a tiling the 3xTF32 kernel itself in that tiling, or
    /// `attention.sdpa_f16` over the binary16 cache.
    fn launch(&self, be: &dyn Backend, kernel: Kernel, (b, h, tq, tk, d): Shape) -> Res<()> {
        let (path, tiling) = match kernel {
            Kernel::Path(p, t) => (p, t),
            Kernel::Half(t) => {
                let ops = (&self.out, &self.q, &self.kv16);
                return half::launch(be, ops, (b, h, tq, tk, d), t, scale(d));
            }
        };
        if let Some(t) = tiling {
            let dims = tc_dims((b, h, tq, tk, d), Some(t))?;
            let int = |v: usize| Arg::I64(v as i64);
            let args = [
                Arg::Ptr(self.out.ptr()),
                Arg::Ptr(self.q.ptr()),
                Arg::Ptr(self.kv.ptr()),
                int(b),
                int(h),
                int(tq),
                int(tk),
                int(d),
                int(tk),
                Arg::F32(scale(d)),
            ];
            // SAFETY: q and out hold b·tq rows of h·d floats, kv b·h caches of tk frames of 2d
            // (Operands::new): what the kernel reads and writes at these arguments (cap = tk);
            // the buffers live as long as the operand set, past the timing's synchronize.
            unsafe { be.launch(&tf32::SDPA_TF32X3, dims, &args) }?;
            return Ok(());
        }
        let cx = Ctx::new(be, None).with_gemm(path);
        let t = |x, dims: &[usize]| Tensor::of(x).and_then(|t| t.view(dims));
        let (q, out) = (t(&self.q, &[b, tq, h * d])?, t(&self.out, &[b, tq, h * d])?);
        let kv = t(&self.kv, &[b, h, tk, 2 * d])?;
        ops::attention(&cx, out, q, kv, tk, scale(d))?;
        Ok(())
    }
}

fn scale(d: usize) -> f32 {
    (1.0 / (d as f64).sqrt()) as f32
}

/// Deterministic pseudo-random floats in [-2, 2) (the DiT's normalized q and k are of that
/// order).
fn data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            2.0 * (((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0)
        })
        .collect()
}

/// Checks the outputs of operand set 0 against the fp32 twin: `(sdpa bit-equal, sdpa_tf32x3
/// within the bound, its largest |Δ| from sdpa over the largest |sdpa|)`.
fn check(s: Shape, fp32: &[f32], tc: &[f32]) -> (bool, bool, f64) {
    let (b, h, tq, tk, d) = s;
    let (q, kv) = host_data(0, s);
    let rows = AttnLayout::rows(tq, h, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(h, tk, d, false),
        AttnLayout::kv_cache(h, tk, d, true),
    );
    let mut want = vec![0.0f32; q.len()];
    attention::attention(
        b,
        h,
        tq,
        tk,
        d,
        scale(d),
        &q,
        rows,
        &kv,
        kl,
        &kv,
        vl,
        &mut want,
        rows,
    );
    let bits = fp32.len() == want.len()
        && fp32
            .iter()
            .zip(&want)
            .all(|(x, y)| x.is_finite() && x.to_bits() == y.to_bits());
    let (within, err) = within_bound(s, &q, &kv, tc, &want, |t, vmax, a, f| {
        tf32::bound(d, tk, scale(d), t, vmax, a, f)
    });
    (bits, within, err)
}

/// Compares `got` with `want` (the fp32 twin over `q` and `kv`, packed as the bench uploads them:
/// cap = tk) output by output: `(every |got − want| within bound(T, V, got, want), the largest
/// |Δ| over the largest |want|)`, where `T` is the output row's largest score mass `max_j Σ_c
/// |q_c·k_jc|` and `V` its column's largest |value| (the tensor-core kernels' bounds take both).
/// A non-finite output fails (its distance is not within any bound).
pub fn within_bound(
    s: Shape,
    q: &[f32],
    kv: &[f32],
    got: &[f32],
    want: &[f32],
    bound: impl Fn(f64, f64, f32, f32) -> f64,
) -> (bool, f64) {
    let (b, h, tq, tk, d) = s;
    let rows = AttnLayout::rows(tq, h, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(h, tk, d, false),
        AttnLayout::kv_cache(h, tk, d, true),
    );
    let mut within = got.len() == want.len();
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for bb in 0..b {
        for hh in 0..h {
            let vmax: Vec<f64> = (0..d)
                .map(|c| {
                    (0..tk)
                        .map(|j| f64::from(kv[vl.at(bb, hh, j) + c]).abs())
                        .fold(0.0, f64::max)
                })
                .collect();
            for i in 0..tq {
                let qi = &q[rows.at(bb, hh, i)..][..d];
                let t = (0..tk)
                    .map(|j| {
                        qi.iter()
                            .zip(&kv[kl.at(bb, hh, j)..][..d])
                            .map(|(x, y)| (f64::from(*x) * f64::from(*y)).abs())
                            .sum::<f64>()
                    })
                    .fold(0.0, f64::max);
                for (c, vm) in vmax.iter().enumerate() {
                    let e = rows.at(bb, hh, i) + c;
                    let (Some(&a), Some(&f)) = (got.get(e), want.get(e)) else {
                        continue;
                    };
                    let dist = (f64::from(a) - f64::from(f)).abs();
                    within &= dist <= bound(t, *vm, a, f);
                    num = num.max(dist);
                    den = den.max(f64::from(f).abs());
                }
            }
        }
    }
    (within, num / den.max(f64::MIN_POSITIVE))
}

/// Runs the attention benchmark; returns whether every check passed.
pub fn run(a: &AttentionArgs) -> Res<bool> {
    let be: Arc<dyn Backend> = match a.backend {
        BackendChoice::Cuda => dcc_runtime::backend::cuda(0).map_err(BenchError::Cuda)?,
        BackendChoice::Host => dcc_runtime::backend::host(),
    };
    if a.rel_pos {
        return rel_pos::run(a, be);
    }
    be.preload(&[&attention::SDPA, &tf32::SDPA_TF32X3, &fa::SDPA_F16, &SPIN])?;
    let timing = Timing {
        reps: a.reps,
        samples: a.samples,
    };
    let mut rows = Vec::new();
    let mut ok = true;
    for b in a.batches() {
        let s = (b, a.heads, a.tq, a.tk, a.head_dim);
        let (h, tq, tk, d) = (a.heads, a.tq, a.tk, a.head_dim);
        let flop = 4.0 * (b * h * tq * tk * d) as f64;
        let set_bytes = 4 * (2 * b * tq * h * d + b * h * tk * 2 * d) + 2 * b * h * tk * 2 * d;
        let n_sets = (a.cold_mib << 20).div_ceil(set_bytes).clamp(1, 64);
        let sets = (0..n_sets)
            .map(|n| Operands::new(&be, n as u64, s))
            .collect::<Res<Vec<_>>>()?;
        let mut us = [0.0f64; 3];
        let mut outs: [Vec<f32>; 3] = Default::default();
        let tiling = a.tiling.tiling();
        let picked = tc_dims(s, tiling)?;
        let picked = tf32::tiling_of(tq, tk, d, picked.shared_bytes as usize);
        let picked16 = half::dims(s, a.tiling.half())?.1;
        let kernels = [
            Kernel::Path(GemmPath::Invariant, None),
            Kernel::Path(GemmPath::InvariantTf32x3, tiling),
            Kernel::Half(a.tiling.half()),
        ];
        for (k, kernel) in kernels.into_iter().enumerate() {
            let ms = time(be.as_ref(), timing, &|n| {
                sets[n % n_sets].launch(be.as_ref(), kernel, s)
            })?;
            us[k] = ms * 1e3;
            sets[0].launch(be.as_ref(), kernel, s)?;
            be.synchronize()?;
            outs[k] = be.download(sets[0].out.ptr(), b * tq * h * d)?;
        }
        let (bits, within, err) = check(s, &outs[0], &outs[1]);
        let (q0, kv0) = host_data(0, s);
        let (within16, err16) = half::check(s, &q0, &kv0, &outs[2], scale(d));
        ok &= bits && within && within16;
        let tilings = [
            String::new(),
            format!(" ({picked:?})"),
            format!(" ({picked16:?})"),
        ];
        for (k, name) in [
            "attention.sdpa",
            "attention.sdpa_tf32x3",
            "attention.sdpa_f16",
        ]
        .into_iter()
        .enumerate()
        {
            eprintln!(
                "batch {b:>3}  {name:<22} {:>9.2} µs {:>7.2} TFLOP/s{}",
                us[k],
                flop / (us[k] * 1e-6) / 1e12,
                tilings[k]
            );
        }
        rows.push(json!({
            "batch": b, "heads": h, "tq": tq, "tk": tk, "head_dim": d,
            "sdpa_us": us[0], "sdpa_tf32x3_us": us[1], "sdpa_f16_us": us[2],
            "sdpa_tf32x3_tiling": picked.map(|t| format!("{t:?}")),
            "sdpa_f16_tiling": format!("{picked16:?}"),
            "sdpa_tflops": flop / (us[0] * 1e-6) / 1e12,
            "sdpa_tf32x3_tflops": flop / (us[1] * 1e-6) / 1e12,
            "sdpa_f16_tflops": flop / (us[2] * 1e-6) / 1e12,
            "speedup": us[0] / us[1],
            "speedup_f16": us[0] / us[2],
            "sdpa_bit_equal_twin": bits, "sdpa_tf32x3_within_bound": within,
            "sdpa_tf32x3_rel_err_vs_sdpa": err,
            "sdpa_f16_within_bound": within16,
            "sdpa_f16_rel_err_vs_twin": err16,
        }));
    }
    let out = json!({
        "bench": "dcc-bench attention",
        "device": be.device_name(),
        "backend": a.backend.name(),
        "reps": a.reps,
        "samples": a.samples,
        "cold_mib": a.cold_mib,
        "tiling": format!("{:?}", a.tiling),
        "rows": rows,
        "ok": ok,
    });
    let mut stdout = std::io::stdout().lock();
    match a.format {
        Format::Json => writeln!(stdout, "{out}"),
        Format::Table => table(&mut stdout, &out),
    }
    .and_then(|()| stdout.flush())
    .map_err(BenchError::Stdout)?;
    Ok(ok)
}

fn table(w: &mut dyn Write, out: &Value) -> std::io::Result<()> {
    writeln!(
        w,
        "dcc-bench attention on {} (median of {} samples of {} launches; twin: sdpa bit-equal to \
         the fp32 twin, bound: tf32x3 and f16 within theirs; err: max |Δ| from the fp32 twin / \
         max |output|, f16's over the same binary16 values)",
        out["device"].as_str().unwrap_or("?"),
        out["samples"],
        out["reps"]
    )?;
    writeln!(
        w,
        "{:>5} {:>5} {:>5} {:>4}  {:>9} {:>8}  {:>9} {:>8} {:>7}  {:>7}  {:>9} {:>8} {:>7}  {:>7}  {:>5} {:>5} {:>9} {:>5} {:>9}",
        "batch",
        "tq",
        "tk",
        "d",
        "sdpa µs",
        "TFLOP/s",
        "tf32x3 µs",
        "TFLOP/s",
        "tiling",
        "speedup",
        "f16 µs",
        "TFLOP/s",
        "tiling",
        "speedup",
        "twin",
        "bound",
        "err",
        "bound",
        "f16 err"
    )?;
    let yes = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "NO"
        }
    };
    for r in out["rows"].as_array().map_or(&[][..], |v| v.as_slice()) {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let n = |k: &str| r[k].as_u64().unwrap_or(0);
        writeln!(
            w,
            "{:>5} {:>5} {:>5} {:>4}  {:>9.2} {:>8.2}  {:>9.2} {:>8.2} {:>7}  {:>6.2}×  {:>9.2} {:>8.2} {:>7}  {:>6.2}×  {:>5} {:>5} {:>9.1e} {:>5} {:>9.1e}",
            n("batch"),
            n("tq"),
            n("tk"),
            n("head_dim"),
            f("sdpa_us"),
            f("sdpa_tflops"),
            f("sdpa_tf32x3_us"),
            f("sdpa_tf32x3_tflops"),
            r["sdpa_tf32x3_tiling"].as_str().unwrap_or("?"),
            f("speedup"),
            f("sdpa_f16_us"),
            f("sdpa_f16_tflops"),
            r["sdpa_f16_tiling"].as_str().unwrap_or("?"),
            f("speedup_f16"),
            yes(&r["sdpa_bit_equal_twin"]),
            yes(&r["sdpa_tf32x3_within_bound"]),
            f("sdpa_tf32x3_rel_err_vs_sdpa"),
            yes(&r["sdpa_f16_within_bound"]),
            f("sdpa_f16_rel_err_vs_twin")
        )?;
    }
    writeln!(
        w,
        "{}",
        if out["ok"] == Value::Bool(true) {
            "ok: sdpa equals its twin, sdpa_tf32x3 and sdpa_f16 within their bounds"
        } else {
            "FAILED: a kernel is off its twin"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::super::cli::{Command, parse_from};
    use super::*;

    fn parse(extra: &[&str]) -> Result<AttentionArgs, clap::Error> {
        let base = ["dcc-bench", "attention", "--backend", "host"];
        match parse_from(base.iter().chain(extra))? {
            Command::Attention(a) => Ok(a),
            other => panic!("parsed as {other:?}"),
        }
    }

    /// On the Host the kernels are their twins: sdpa equals the fp32 twin, the 3xTF32 and f16
    /// models are within their bounds, and the run passes; the flags are range-checked.
    #[test]
    fn host_run_passes_and_flags_are_checked() {
        let a = parse(&[
            "--batch",
            "1,2",
            "--tq",
            "5",
            "--tk",
            "37",
            "--head-dim",
            "13",
            "--heads",
            "2",
            "--reps",
            "1",
            "--samples",
            "1",
        ])
        .unwrap();
        assert_eq!(a.batch, Some(vec![1, 2]));
        assert!(run(&a).unwrap());
        // Each tiling forced where it applies (64 rows: more shared memory than 16), and an
        // error where it does not.
        let shape = [
            "--tq",
            "40",
            "--tk",
            "200",
            "--head-dim",
            "30",
            "--heads",
            "1",
            "--reps",
            "1",
            "--samples",
            "1",
        ];
        for t in ["rows16", "rows64"] {
            let f = parse(&[&shape[..], &["--tiling", t, "--batch", "1"]].concat()).unwrap();
            assert!(run(&f).unwrap(), "--tiling {t}");
        }
        let narrow = parse(&[
            "--tiling",
            "rows64",
            "--tq",
            "8",
            "--reps",
            "1",
            "--samples",
            "1",
        ]);
        assert!(run(&narrow.unwrap()).is_err());
        let d = parse(&[]).unwrap();
        assert_eq!(
            (d.batches(), d.heads, d.head_dim, d.tq, d.tk, d.tiling),
            (vec![2, 16], 8, 64, 56, 458, TilingChoice::Auto)
        );
        for bad in [
            &["--batch", "0"][..],
            &["--head-dim", "129"],
            &["--tk", "0"],
            &["--reps", "0"],
            &["--tiling", "rows32"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
