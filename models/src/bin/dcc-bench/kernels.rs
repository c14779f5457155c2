//! `dcc-bench kernels`: the linear kernels (`gemm.linear_*`, `dcc_kernels::gemm`, and the 3xTF32
//! `gemm.linear_tf32x3` and its tile variants, `gemm::tf32_tiles`, whose pick table it prints)
//! against the cuBLAS path (`Backend::gemm_bias`, what `ops::linear` launches on
//! `GemmPath::Backend`) at the full model's linear shapes, for tuning the tile variants on the GPU.
//!
//! Per shape (`in → out`), row count and implementation: device µs per launch and TFLOP/s
//! (`2 · rows · in · out` per launch). A timing is the median over `--samples` samples; a sample
//! is `--reps` launches queued back to back behind a short spin kernel, CUDA events around them,
//! divided by `--reps`; one untimed launch warms up first. Successive launches rotate over
//! enough operand sets that they span `--cold-mib` MiB (more than the L2 cache: in the model every
//! layer's weights come from device memory), so the timings are not the cache's. Per launch
//! also: whether the kernel's output equals its host twin bit for bit (the Host backend's run of
//! the same launch, up to `--twin-rows` rows; for `tf32x3`: whether every output is within
//! `gemm::tf32::bound` of the fp32 twin; for a 3xTF32 tile variant also whether it equals
//! `gemm.linear_tf32x3` bit for bit, `base`, as a half variant `gemm.linear_f16_64x64`:
//! [`check`]), and the normwise relative error against cuBLAS,
//! `max |y − y_cublas| / max |y_cublas|`. Then every kernel, whatever `--variants` names, is
//! checked against the twin (bit for bit; `tf32x3` within the bound) on small shapes with tails
//! ([`TWIN_SHAPES`]), and with the
//! DiT's shapes at 112 rows measured, the DiT's linears per chunk are summed per implementation
//! ([`DIT_LAYER`]). The table comes last on stdout. The half-precision variants (`f16_*`,
//! binary16 weights: [`super::kernels_f16`]) are checked against their own twin within its
//! bound and against cuBLAS at `--half-tol`.

use std::io::Write;
use std::sync::Arc;

use clap::Args;
use dcc_runtime::backend::{AllocKind, Backend, BackendKind, DeviceBuffer, Gemm};
use dcc_runtime::kernels::gemm::f16::{self as h16, F16Variant};
use dcc_runtime::kernels::gemm::tf32_tiles::{self, Tf32Variant};
use dcc_runtime::kernels::gemm::{self, Variant};
use dcc_runtime::ops::{self, Ctx, Tensor};
use serde_json::{Value, json};

use super::cli::{BackendChoice, Format};
use super::error::BenchError;
use super::kernels_f16 as kf16;
use super::kernels_table::{per_chunk, table, tf32_pick};
use super::{Res, spin};
use check::{base_outputs, equals_base, rel_err, twin_check, twin_ok};

/// The full model's linear shapes `(in, out)`: DiT qkv (512 → 1536), attention out and the
/// conformer's projections (512 → 512), MLP up (512 → 2048) and down (2048 → 512), the causal
/// conv's im2col GEMM (3 taps × 512 → 512), the DiT's input projection (320 → 512), its final
/// projection (512 → 80), the encoder's output projection (512 → 80, the same shape).
pub const FULL_SHAPES: &str = "512x1536,512x512,512x2048,2048x512,1536x512,320x512,512x80";

/// One DiT layer's linears at one session's rows `(in, out, count)`: qkv, attention out, the
/// two causal convs (im2col GEMMs), MLP up and down.
pub const DIT_LAYER: [(usize, usize, usize); 5] = [
    (512, 1536, 1),
    (512, 512, 1),
    (1536, 512, 2),
    (512, 2048, 1),
    (2048, 512, 1),
];

/// DiT layers × solver steps per chunk of the full model (16 × 10).
pub const DIT_LAYERS_PER_CHUNK: usize = 160;

/// Rows of the per-chunk sum: one session's CFG pair of 56 frames.
pub const SESSION_ROWS: usize = 112;

/// The small shapes of the twin check `(rows, in, out)`: tails in rows, k and outputs, a single
/// row, and K past one k tile.
pub const TWIN_SHAPES: [(usize, usize, usize); 4] =
    [(37, 100, 70), (5, 3, 7), (1, 130, 129), (19, 200, 33)];

#[derive(Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
dcc-bench kernels                                   # every variant, tf32x3, its tiles, f16 and cuBLAS, full shapes, 1 to 32 sessions' rows\n  \
dcc-bench kernels --variants tf32x3,tf32tiles,tf32auto --rows 112,896,1792,3584\n  \
dcc-bench kernels --variants tf32x3,tf32small --rows 112,224,896 --samples 21\n  \
dcc-bench kernels --variants auto --rows 112 --samples 21\n  \
dcc-bench kernels --shapes 512x2048 --variants 16x32,32x64 --cold-mib 0 --format json\n\n\
To tune a tile size: edit or add a `variant!` line in kernels/src/gemm.rs (name, BM, BN, TM, TN,\n\
GW, STAGES, CH, blocks per SM, threads: it writes the variant's entry into its own module) and\n\
its name in VARIANTS, rebuild, and compare the variants here; `gemm::pick` decides which one `ops::linear` launches. Every variant must stay\n\
bit-equal to the twin (the `twin` column and the twin check): the k order is fixed by K alone,\n\
whatever the tile.\n\n\
Exit codes: 0 every kernel passes against its twin (where checked: bits, tf32x3 and f16_* their bounds) and within --tol of cuBLAS (f16_*: --half-tol),\n\
1 otherwise or on a run error, 2 usage.")]
pub struct KernelsArgs {
    /// Where to run. On `host` the timings are the CPU twins' and the twin checks are skipped.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cuda)]
    pub backend: BackendChoice,

    /// Linear shapes `INxOUT`, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = shape, default_value = FULL_SHAPES)]
    pub shapes: Vec<(usize, usize)>,

    /// Row counts, comma-separated: 112 is one session's CFG pair of 56 frames, 896, 1792 and
    /// 3584 eight, sixteen and thirty-two sessions batched.
    #[arg(long, value_delimiter = ',', default_value = "112,896,1792,3584",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub rows: Vec<usize>,

    /// Kernels, comma-separated: `auto` (what `ops::linear` picks for the shape), `all` (every
    /// fp32 variant), tile names (`16x32`, `32x64`, ...: rows × outputs per CTA), `tf32x3`
    /// (the 3xTF32 tensor-core kernel), its tile variants by name (`tf32x3_t64x128w`) or all
    /// (`tf32tiles`), the small-row ones (`tf32small`: `tf32_tiles::SMALL`), `tf32auto` (what `ops::linear_tf32x3` picks for the shape), `f16` (every
    /// half-precision variant) and their names (`f16_16x32`, `f16_64x64`, `f16_64x128`).
    #[arg(long, value_delimiter = ',', value_parser = variant,
          default_value = "auto,all,tf32x3,tf32tiles,tf32auto,f16")]
    pub variants: Vec<Choice>,

    /// Launches per sample (queued back to back; a sample is their mean).
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub reps: usize,

    /// Samples per timing (the reported µs is their median).
    #[arg(long, value_name = "N", default_value_t = 11,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000))]
    pub samples: usize,

    /// MiB of operands the launches of one timing rotate over (0: one operand set, the L2
    /// cache's timings).
    #[arg(long, value_name = "MIB", default_value_t = 256,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=16_384))]
    pub cold_mib: usize,

    /// Largest row count whose full shapes are compared with the host twin (the twin runs
    /// once per shape on the CPU: seconds at a few thousand rows).
    #[arg(long, value_name = "ROWS", default_value_t = 256)]
    pub twin_rows: usize,

    /// Skip every host-twin comparison.
    #[arg(long)]
    pub skip_twin: bool,

    /// Largest normwise relative error against cuBLAS accepted (f32 reorderings give ~1e-7).
    #[arg(long, value_name = "X", default_value_t = 1e-5, value_parser = tolerance)]
    pub tol: f64,

    /// The --tol of the half-precision variants (binary16 weights and outputs: about 1e-3 from
    /// cuBLAS's fp32 result on these shapes).
    #[arg(long, value_name = "X", default_value_t = 1e-2, value_parser = tolerance)]
    pub half_tol: f64,

    /// Output on stdout: the table, or one JSON object on one line.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// A kernel to time: the variant `gemm::pick` chooses, every variant, a fixed one, a 3xTF32
/// variant, every 3xTF32 tile variant, or the one `tf32_tiles::pick` chooses.
#[derive(Copy, Clone, Debug)]
pub enum Choice {
    Auto,
    All,
    Fixed(&'static Variant),
    Tf32(&'static Tf32Variant),
    Tf32Tiles,
    /// Every small-row 3xTF32 tile variant (`tf32_tiles::SMALL`).
    Tf32Small,
    Tf32Auto,
    /// Every half-precision variant, or one.
    F16(Option<&'static F16Variant>),
}

#[path = "kernels_check.rs"]
mod check;

/// One linear implementation of the `gemm` family.
#[derive(Copy, Clone, Debug)]
enum Kernel {
    /// An fp32 variant: bit-equal to the twin.
    Fp32(&'static Variant),
    /// `gemm.linear_tf32x3` or a tile variant: within `gemm::tf32::bound` of the fp32 twin
    /// (a tile variant also bit-equal to `gemm.linear_tf32x3`).
    Tf32(&'static Tf32Variant),
    /// A `gemm.linear_f16_*` variant: within `gemm::f16::bound` of the half twin.
    F16(&'static F16Variant),
}

impl Kernel {
    /// The kernel's name (`gemm.linear_*`).
    fn name(self) -> &'static str {
        match self {
            Kernel::Fp32(v) => v.kernel.name,
            Kernel::Tf32(v) => v.kernel.name,
            Kernel::F16(v) => v.kernel.name,
        }
    }
}

fn shape(s: &str) -> Result<(usize, usize), String> {
    let (a, b) = s
        .trim()
        .split_once('x')
        .ok_or_else(|| format!("`{s}` is not INxOUT"))?;
    let p = |v: &str| match v.parse::<usize>() {
        Ok(n) if (1..=65_536).contains(&n) => Ok(n),
        _ => Err(format!("`{v}` in `{s}` is not a size in 1..=65536")),
    };
    Ok((p(a)?, p(b)?))
}

/// `--tol`: a finite number ≥ 0 (a NaN would accept every error).
fn tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a finite number >= 0")),
    }
}

fn variant(s: &str) -> Result<Choice, String> {
    match s.trim() {
        "auto" => return Ok(Choice::Auto),
        "all" => return Ok(Choice::All),
        "tf32tiles" => return Ok(Choice::Tf32Tiles),
        "tf32small" => return Ok(Choice::Tf32Small),
        "tf32auto" => return Ok(Choice::Tf32Auto),
        "f16" => return Ok(Choice::F16(None)),
        s => {
            if let Some(v) = kf16::by_label(s) {
                return Ok(Choice::F16(Some(v)));
            }
        }
    }
    if let Some(v) = tf32_tiles::variant(&format!("gemm.linear_{}", s.trim())) {
        return Ok(Choice::Tf32(v));
    }
    gemm::variant(&format!("gemm.linear_{}", s.trim()))
        .map(Choice::Fixed)
        .ok_or_else(|| {
            let names: Vec<&str> = gemm::VARIANTS.iter().map(|v| short(v)).collect();
            let tiles: Vec<&str> = tf32_tiles::TILES.iter().map(|v| tf32_short(v)).collect();
            format!(
                "unknown variant `{s}` (auto, all, tf32x3, tf32tiles, tf32small, tf32auto, f16, {}, {}, \
                 {})",
                h16::VARIANTS
                    .iter()
                    .map(|v| kf16::label(v))
                    .collect::<Vec<_>>()
                    .join(", "),
                names.join(", "),
                tiles.join(", ")
            )
        })
}

/// `16x32` for `gemm.linear_16x32`.
fn short(v: &Variant) -> &'static str {
    v.kernel.name.trim_start_matches("gemm.linear_")
}

/// `tf32x3_t64x64r` for `gemm.linear_tf32x3_t64x64r` (`tf32x3` for the base).
fn tf32_short(v: &Tf32Variant) -> &'static str {
    v.kernel.name.trim_start_matches("gemm.linear_")
}

/// The kernels `--variants` names, in order, without repeats: `(label, kernel)`.
fn expand(rows: usize, out: usize, choices: &[Choice]) -> Vec<(String, Kernel)> {
    let mut v: Vec<(String, Kernel)> = Vec::new();
    let mut push = |label: String, k: Kernel| {
        if !v.iter().any(|(l, _)| *l == label) {
            v.push((label, k));
        }
    };
    for c in choices {
        match *c {
            Choice::Auto => {
                let k = gemm::pick(rows, out);
                push(format!("auto ({})", short(k)), Kernel::Fp32(k));
            }
            Choice::All => gemm::VARIANTS
                .iter()
                .for_each(|k| push(short(k).into(), Kernel::Fp32(k))),
            Choice::Fixed(k) => push(short(k).into(), Kernel::Fp32(k)),
            Choice::Tf32(k) => push(tf32_short(k).into(), Kernel::Tf32(k)),
            Choice::Tf32Tiles => tf32_tiles::TILES
                .iter()
                .for_each(|k| push(tf32_short(k).into(), Kernel::Tf32(k))),
            Choice::Tf32Small => tf32_tiles::SMALL
                .iter()
                .for_each(|k| push(tf32_short(k).into(), Kernel::Tf32(k))),
            Choice::Tf32Auto => {
                let k = tf32_tiles::pick(rows, out);
                push(format!("tf32auto ({})", tf32_short(k)), Kernel::Tf32(k));
            }
            Choice::F16(Some(k)) => push(kf16::label(k).into(), Kernel::F16(k)),
            Choice::F16(None) => h16::VARIANTS
                .iter()
                .for_each(|k| push(kf16::label(k).into(), Kernel::F16(k))),
        }
    }
    v
}

/// The operands of one shape at one row count, on one backend (`w16`, `b16`: `w` and `b`
/// rounded to binary16, the half variants' weights).
struct Operands {
    x: DeviceBuffer,
    w: DeviceBuffer,
    b: DeviceBuffer,
    w16: DeviceBuffer,
    b16: DeviceBuffer,
    y: DeviceBuffer,
}

impl Operands {
    fn new(be: &Arc<dyn Backend>, seed: u64, rows: usize, i: usize, o: usize) -> Res<Operands> {
        let up = |v: Vec<f32>| be.alloc_from(&v, AllocKind::Other);
        let (w, b) = (data(4 * seed + 2, o * i), data(4 * seed + 3, o));
        Ok(Operands {
            x: up(data(4 * seed + 1, rows * i))?,
            w16: be.alloc_from(&kf16::halves(&w), AllocKind::Other)?,
            b16: be.alloc_from(&kf16::halves(&b), AllocKind::Other)?,
            w: up(w)?,
            b: up(b)?,
            y: up(vec![f32::NAN; rows * o])?,
        })
    }

    /// Queues `ops::linear` with kernel `k`.
    fn linear(&self, cx: &Ctx<'_>, k: Kernel, rows: usize, i: usize, o: usize) -> Res<()> {
        let t = |b, d: &[usize]| Tensor::of(b).and_then(|t| t.view(d));
        let (w, b) = (t(&self.w, &[o, i])?, Some(t(&self.b, &[o])?));
        let (x, y) = (t(&self.x, &[rows, i])?, t(&self.y, &[rows, o])?);
        match k {
            Kernel::Fp32(v) => ops::linear_with(cx, v, w, b, x, y, None)?,
            Kernel::Tf32(v) => ops::linear_tf32x3_with(cx, v, w, b, x, y, None)?,
            Kernel::F16(v) => {
                let t = |b, d: &[usize]| Tensor::of(b).and_then(|t| t.view(d));
                let (w, b) = (t(&self.w16, &[o, i])?, Some(t(&self.b16, &[o])?));
                ops::linear_f16_with(cx, v, w, b, x, y, None)?
            }
        }
        Ok(())
    }

    /// Queues the cuBLAS path (`Backend::gemm_bias`, column-major `C[out × rows] = Wᵀ · X + b`).
    fn cublas(&self, be: &dyn Backend, rows: usize, i: usize, o: usize) -> Res<()> {
        let g = Gemm {
            trans_a: true,
            trans_b: false,
            m: o,
            n: rows,
            k: i,
            alpha: 1.0,
            a: self.w.ptr(),
            lda: i,
            stride_a: 0,
            b: self.x.ptr(),
            ldb: i,
            stride_b: 0,
            beta: 0.0,
            c: self.y.ptr(),
            ldc: o,
            stride_c: 0,
            batch: 1,
        };
        Ok(be.gemm_bias(&g, self.b.ptr())?)
    }

    fn read(&self, be: &dyn Backend, n: usize) -> Res<Vec<f32>> {
        Ok(be.download(self.y.ptr(), n)?)
    }
}

/// Deterministic pseudo-random floats in [-1, 1).
fn data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// How a timing is taken (`--reps`, `--samples`).
#[derive(Clone, Copy)]
pub(super) struct Timing {
    pub(super) reps: usize,
    pub(super) samples: usize,
}

/// Median device ms per launch: `samples` samples of `reps` launches queued by `f(n)` (`n` the
/// launch's index), each behind a spin kernel long enough to cover their queueing, after one
/// warm-up launch.
pub(super) fn time(be: &dyn Backend, t: Timing, f: &dyn Fn(usize) -> Res<()>) -> Res<f64> {
    f(0)?;
    be.synchronize()?;
    let mut ms = Vec::with_capacity(t.samples);
    for s in 0..t.samples {
        // About 1 ms plus 40 µs per launch at 2 GHz: the host queues a launch in a few µs.
        spin(be, 2_000_000 + 80_000 * t.reps as i64)?;
        let m0 = be.marker()?;
        for r in 0..t.reps {
            f(s * t.reps + r + 1)?;
        }
        let m1 = be.marker()?;
        ms.push(be.elapsed_ms(&m0, &m1)? / t.reps as f64);
    }
    be.synchronize()?;
    Ok(median(&mut ms))
}

/// The median (the mean of the two middle values for an even count); NaN for none.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Runs the kernel benchmark; returns whether every check passed.
pub fn run(a: &KernelsArgs) -> Res<bool> {
    let be: Arc<dyn Backend> = match a.backend {
        BackendChoice::Cuda => dcc_runtime::backend::cuda(0).map_err(BenchError::Cuda)?,
        BackendChoice::Host => dcc_runtime::backend::host(),
    };
    let host = (be.kind() == BackendKind::Cuda && !a.skip_twin).then(dcc_runtime::backend::host);
    let mut preload: Vec<&'static dcc_runtime::KernelDef> = gemm::KERNELS.to_vec();
    preload.extend(h16::KERNELS);
    preload.push(&dcc_runtime::kernels::synthetic::SPIN);
    be.preload(&preload)?;
    let cx = Ctx::new(be.as_ref(), None);
    let timing = Timing {
        reps: a.reps,
        samples: a.samples,
    };
    let mut rows_json = Vec::new();
    let mut ok = true;
    for &(i, o) in &a.shapes {
        for &rows in &a.rows {
            let flop = 2.0 * rows as f64 * i as f64 * o as f64;
            let set_bytes = 4 * (rows * i + o * i + o + rows * o) + 2 * (o * i + o);
            let n_sets = (a.cold_mib << 20).div_ceil(set_bytes).clamp(1, 256);
            let sets = (0..n_sets)
                .map(|s| Operands::new(&be, s as u64, rows, i, o))
                .collect::<Res<Vec<_>>>()?;
            let set = |n: usize| &sets[n % n_sets];
            let mut line = |name: String,
                            ms: f64,
                            twin: Option<bool>,
                            err: Option<f64>,
                            base: Option<bool>| {
                eprintln!(
                    "{i:>5} → {o:<5} rows {rows:>5}  {name:<24} {:>9.2} µs {:>7.2} TFLOP/s",
                    ms * 1e3,
                    flop / (ms * 1e-3) / 1e12
                );
                rows_json.push(json!({
                    "in": i, "out": o, "rows": rows, "kernel": name,
                    "us": ms * 1e3, "tflops": flop / (ms * 1e-3) / 1e12,
                    "twin_ok": twin, "rel_err_vs_cublas": err, "eq_base": base,
                }));
            };
            let ms = time(be.as_ref(), timing, &|n| {
                set(n).cublas(be.as_ref(), rows, i, o)
            })?;
            sets[0].cublas(be.as_ref(), rows, i, o)?;
            let reference = sets[0].read(be.as_ref(), rows * o)?;
            line("cublas".into(), ms, None, None, None);
            let want = match &host {
                Some(h) if rows <= a.twin_rows => {
                    let t = Operands::new(h, 0, rows, i, o)?;
                    let fp32 = Kernel::Fp32(gemm::pick(rows, o));
                    t.linear(&Ctx::new(h.as_ref(), None), fp32, rows, i, o)?;
                    Some(t.read(h.as_ref(), rows * o)?)
                }
                _ => None,
            };
            let kernels = expand(rows, o, &a.variants);
            // The bits every tile variant must give: its path's base kernel's.
            let ks = kernels.iter().map(|(_, k)| *k);
            let bases = base_outputs(&sets[0], &cx, be.as_ref(), ks, (rows, i, o))?;
            for (name, k) in kernels {
                let ms = time(be.as_ref(), timing, &|n| set(n).linear(&cx, k, rows, i, o))?;
                sets[0].linear(&cx, k, rows, i, o)?;
                let got = sets[0].read(be.as_ref(), rows * o)?;
                let twin = want.as_ref().map(|w| twin_ok(k, 0, (rows, i, o), w, &got));
                let err = rel_err(&got, &reference);
                let tol = match k {
                    Kernel::F16(_) => a.half_tol,
                    _ => a.tol,
                };
                let base = equals_base(k, &bases, &got);
                if twin == Some(false) || base == Some(false) || err.is_nan() || err > tol {
                    ok = false;
                }
                line(name, ms, twin, Some(err), base);
            }
        }
    }
    let twin_check = match &host {
        Some(h) => Some(twin_check(&be, h, &cx)?),
        None => None,
    };
    if let Some(t) = &twin_check {
        ok &= t.iter().all(|r| r["ok"] == Value::Bool(true));
    }
    let out = json!({
        "bench": "dcc-bench kernels",
        "device": be.device_name(),
        "backend": a.backend.name(),
        "reps": a.reps,
        "samples": a.samples,
        "cold_mib": a.cold_mib,
        "tol": a.tol,
        "rows": rows_json,
        "twin_check": twin_check,
        "dit_per_chunk_ms": per_chunk(&rows_json),
        "tf32_pick": tf32_pick(),
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
