//! `dcc-bench kernels`: the linear kernels (`gemm.linear_*`, `dcc_kernels::gemm`) against the
//! cuBLAS path (`Backend::gemm_bias`, what `ops::linear` launched before) at the full model's
//! linear shapes, for tuning the tile variants on the GPU.
//!
//! Per shape (`in → out`), row count and implementation: device µs per launch (the launches
//! queued back to back behind a spin kernel, CUDA events around them, divided by `--reps`),
//! TFLOP/s (`2 · rows · in · out` per launch), whether the kernel's output equals its host twin
//! bit for bit (the Host backend's run of the same launch), and the normwise relative error
//! against cuBLAS, `max |y − y_cublas| / max |y_cublas|`. The table comes last on stdout.

use std::io::Write;
use std::sync::Arc;

use clap::Args;
use dcc_runtime::backend::{AllocKind, Backend, BackendKind, DeviceBuffer, Gemm};
use dcc_runtime::kernels::gemm::{self, Variant};
use dcc_runtime::ops::{self, Ctx, Tensor};
use serde_json::{Value, json};

use super::cli::{BackendChoice, Format};
use super::error::BenchError;
use super::{Res, spin};

/// The full model's linear shapes `(in, out)`: DiT qkv (512 → 1536), attention out and the
/// conformer's projections (512 → 512), MLP up (512 → 2048) and down (2048 → 512), the causal
/// conv's im2col GEMM (3 taps × 512 → 512), the input projection (80 → 512).
pub const FULL_SHAPES: &str = "512x1536,512x512,512x2048,2048x512,1536x512,80x512";

#[derive(Args, Debug, Clone)]
#[command(after_help = "Examples:\n  \
dcc-bench kernels                                   # every variant and cuBLAS, full shapes, 112 and 896 rows\n  \
dcc-bench kernels --variants auto --rows 112 --reps 200\n  \
dcc-bench kernels --shapes 512x2048 --variants 32x64,32x32 --format json\n\n\
To tune a tile size: edit or add an entry in kernels/cuda/gemm.cu (`gemm_linear_tile<BM, BN, TM,\n\
TN>`) and its `variant!` line in kernels/src/gemm.rs, rebuild, and compare the variants here;\n\
`gemm::pick` decides which one `ops::linear` launches. Every variant must stay bit-equal to the\n\
twin (the `twin` column): the k order is fixed by K alone, whatever the tile.\n\n\
Exit codes: 0 every variant bit-equal to its twin (where checked) and within --tol of cuBLAS,\n\
1 otherwise or on a run error, 2 usage.")]
pub struct KernelsArgs {
    /// Where to run. On `host` the timings are the CPU twins' and the `twin` column is skipped.
    #[arg(long, value_enum, default_value_t = BackendChoice::Cuda)]
    pub backend: BackendChoice,

    /// Linear shapes `INxOUT`, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = shape, default_value = FULL_SHAPES)]
    pub shapes: Vec<(usize, usize)>,

    /// Row counts, comma-separated: 112 is one session's CFG pair of 56 frames, 896 eight
    /// sessions batched.
    #[arg(long, value_delimiter = ',', default_value = "112,896",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub rows: Vec<usize>,

    /// Kernel variants, comma-separated: `auto` (what `ops::linear` picks for the shape) and
    /// tile names (`32x64`, `32x32`, `16x32`, `8x64`: rows × outputs per CTA).
    #[arg(long, value_delimiter = ',', value_parser = variant,
          default_value = "auto,32x64,32x32,16x32,8x64")]
    pub variants: Vec<Choice>,

    /// Launches per timing (queued back to back; µs is their mean).
    #[arg(long, value_name = "N", default_value_t = 50,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub reps: usize,

    /// Skip the host-twin comparison (it runs each shape once on the CPU, seconds at 896 rows).
    #[arg(long)]
    pub skip_twin: bool,

    /// Largest normwise relative error against cuBLAS accepted (f32 reorderings give ~1e-7).
    #[arg(long, value_name = "X", default_value_t = 1e-5, value_parser = tolerance)]
    pub tol: f64,

    /// Output on stdout: the table, or one JSON object on one line.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// A kernel to time: the variant `gemm::pick` chooses, or a fixed one.
#[derive(Copy, Clone, Debug)]
pub enum Choice {
    Auto,
    Fixed(&'static Variant),
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
    let s = s.trim();
    if s == "auto" {
        return Ok(Choice::Auto);
    }
    gemm::variant(&format!("gemm.linear_{s}"))
        .map(Choice::Fixed)
        .ok_or_else(|| {
            let names: Vec<&str> = gemm::VARIANTS
                .iter()
                .map(|v| v.kernel.name.trim_start_matches("gemm.linear_"))
                .collect();
            format!("unknown variant `{s}` (auto, {})", names.join(", "))
        })
}

/// The operands of one shape at one row count, on one backend.
struct Operands {
    x: DeviceBuffer,
    w: DeviceBuffer,
    b: DeviceBuffer,
    y: DeviceBuffer,
}

impl Operands {
    fn new(be: &Arc<dyn Backend>, rows: usize, i: usize, o: usize) -> Res<Operands> {
        let up = |v: Vec<f32>| be.alloc_from(&v, AllocKind::Other);
        Ok(Operands {
            x: up(data(1, rows * i))?,
            w: up(data(2, o * i))?,
            b: up(data(3, o))?,
            y: up(vec![0.0; rows * o])?,
        })
    }

    /// Queues `ops::linear` with variant `v`.
    fn linear(
        &self,
        cx: &Ctx<'_>,
        v: &'static Variant,
        rows: usize,
        i: usize,
        o: usize,
    ) -> Res<()> {
        let t = |b, d: &[usize]| Tensor::of(b).and_then(|t| t.view(d));
        ops::linear_with(
            cx,
            v,
            t(&self.w, &[o, i])?,
            Some(t(&self.b, &[o])?),
            t(&self.x, &[rows, i])?,
            t(&self.y, &[rows, o])?,
            None,
        )?;
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

/// Mean device ms of `reps` launches queued by `f`, behind a spin kernel (one warm-up first).
fn time(be: &dyn Backend, reps: usize, f: &dyn Fn() -> Res<()>) -> Res<f64> {
    f()?;
    be.synchronize()?;
    spin(be, 200_000_000)?;
    let m0 = be.marker()?;
    for _ in 0..reps {
        f()?;
    }
    let m1 = be.marker()?;
    Ok(be.elapsed_ms(&m0, &m1)? / reps as f64)
}

/// `max |a − b| / max |b|` (NaN when either holds a NaN).
fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        let d = (*x as f64 - *y as f64).abs();
        if d.is_nan() {
            return f64::NAN;
        }
        num = num.max(d);
        den = den.max((*y as f64).abs());
    }
    num / den.max(f64::MIN_POSITIVE)
}

/// Runs the kernel benchmark; returns whether every check passed.
pub fn run(a: &KernelsArgs) -> Res<bool> {
    let be: Arc<dyn Backend> = match a.backend {
        BackendChoice::Cuda => dcc_runtime::backend::cuda(0).map_err(BenchError::Cuda)?,
        BackendChoice::Host => dcc_runtime::backend::host(),
    };
    let twin_be = (be.kind() == BackendKind::Cuda && !a.skip_twin).then(dcc_runtime::backend::host);
    let mut preload: Vec<&'static dcc_runtime::KernelDef> = gemm::KERNELS.to_vec();
    preload.push(&dcc_runtime::kernels::synthetic::SPIN);
    be.preload(&preload)?;
    let cx = Ctx::new(be.as_ref(), None);
    let mut rows_json = Vec::new();
    let mut ok = true;
    for &(i, o) in &a.shapes {
        for &rows in &a.rows {
            let flop = 2.0 * rows as f64 * i as f64 * o as f64;
            let ops_ = Operands::new(&be, rows, i, o)?;
            let ms = time(be.as_ref(), a.reps, &|| {
                ops_.cublas(be.as_ref(), rows, i, o)
            })?;
            let reference = ops_.read(be.as_ref(), rows * o)?;
            let mut line = |name: String, ms: f64, twin: Option<bool>, err: Option<f64>| {
                eprintln!(
                    "{i:>5} → {o:<5} rows {rows:>5}  {name:<26} {:>9.2} µs {:>7.2} TFLOP/s",
                    ms * 1e3,
                    flop / (ms * 1e-3) / 1e12
                );
                rows_json.push(json!({
                    "in": i, "out": o, "rows": rows, "kernel": name,
                    "us": ms * 1e3, "tflops": flop / (ms * 1e-3) / 1e12,
                    "twin_bit_equal": twin, "rel_err_vs_cublas": err,
                }));
            };
            line("cublas".into(), ms, None, None);
            let want = match &twin_be {
                Some(h) => {
                    let t = Operands::new(h, rows, i, o)?;
                    t.linear(&Ctx::new(h.as_ref(), None), gemm::pick(rows, o), rows, i, o)?;
                    Some(t.read(h.as_ref(), rows * o)?)
                }
                None => None,
            };
            for c in &a.variants {
                let (v, name) = match *c {
                    Choice::Auto => {
                        let v = gemm::pick(rows, o);
                        (v, format!("auto ({})", v.kernel.name))
                    }
                    Choice::Fixed(v) => (v, v.kernel.name.to_string()),
                };
                let ms = time(be.as_ref(), a.reps, &|| ops_.linear(&cx, v, rows, i, o))?;
                let got = ops_.read(be.as_ref(), rows * o)?;
                let twin = want
                    .as_ref()
                    .map(|w| w.iter().zip(&got).all(|(p, q)| p.to_bits() == q.to_bits()));
                let err = rel_err(&got, &reference);
                if twin == Some(false) || err.is_nan() || err > a.tol {
                    ok = false;
                }
                line(name, ms, twin, Some(err));
            }
        }
    }
    let out = json!({
        "bench": "dcc-bench kernels",
        "device": be.device_name(),
        "backend": a.backend.name(),
        "reps": a.reps,
        "tol": a.tol,
        "rows": rows_json,
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
        "dcc-bench kernels on {} ({} launches per timing; twin: bit-equal to the host twin; err: max |y − cuBLAS| / max |cuBLAS|)",
        out["device"].as_str().unwrap_or("?"),
        out["reps"]
    )?;
    writeln!(
        w,
        "{:>11} {:>5}  {:<32} {:>9} {:>8} {:>5} {:>9}",
        "in → out", "rows", "kernel", "µs", "TFLOP/s", "twin", "err"
    )?;
    for r in out["rows"].as_array().into_iter().flatten() {
        let twin = match r["twin_bit_equal"].as_bool() {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        let err = r["rel_err_vs_cublas"]
            .as_f64()
            .map_or_else(|| "-".into(), |e| format!("{e:.1e}"));
        writeln!(
            w,
            "{:>11} {:>5}  {:<32} {:>9.2} {:>8.2} {:>5} {:>9}",
            format!("{} → {}", r["in"], r["out"]),
            r["rows"].as_u64().unwrap_or(0),
            r["kernel"].as_str().unwrap_or("?"),
            r["us"].as_f64().unwrap_or(f64::NAN),
            r["tflops"].as_f64().unwrap_or(f64::NAN),
            twin,
            err
        )?;
    }
    writeln!(
        w,
        "{}",
        if out["ok"] == Value::Bool(true) {
            "ok: every kernel bit-equal to its twin (where checked) and within --tol of cuBLAS"
        } else {
            "FAILED: a kernel differs from its twin or from cuBLAS beyond --tol"
        }
    )
}
