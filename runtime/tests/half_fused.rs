//! The fused half-precision modulated norms against the launches they replace on the half path,
//! bit for bit, on the same backend: `ops::gated_norm_modulate_f16` (one launch of
//! `norm.gated_add_modulate_f16`) against `ops::gated_add_f16`, `ops::round_f16_shifted` over the
//! scale and `ops::layer_norm_modulate`; `ops::layer_norm_modulate_f16` against the last two. On
//! Host always, on CUDA where a GPU exists (`SKIP (cuda): ...` otherwise; `DCC_REQUIRE_GPU=1`
//! makes that a failure). Shapes are odd on purpose: one row, rows that fill no block, widths
//! under a warp, past a warp, at the register path's limit (512) and past it (513, 700: the
//! kernels' in-memory path), values that round to f16 subnormals and overflow to infinity.

mod common;

use std::sync::Arc;

use common::data;
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::elementwise::rn16;
use dcc_runtime::ops::{self, Ctx, Tensor};

const EPS: f32 = 1e-6;

/// `(rows, dim)`.
const SHAPES: [(usize, usize); 7] = [
    (1, 64),
    (37, 100),
    (112, 512),
    (5, 513),
    (3, 700),
    (7, 33),
    (2, 17),
];

/// The inputs of one shape: `x`, `y` `[rows, dim]`; `gate`, `shift`, `scale` `[dim]`. `x` holds
/// f16 values (the residual stream of the half path); row 0 is scaled so that some residuals
/// overflow f16, the last row so small that the products round to f16 subnormals.
fn inputs(seed: u64, rows: usize, dim: usize) -> [Vec<f32>; 5] {
    let mut x: Vec<f32> = data(seed, rows * dim)
        .iter()
        .map(|v| rn16(v * 3.0))
        .collect();
    let mut y: Vec<f32> = data(seed + 1, rows * dim).iter().map(|v| v * 2.0).collect();
    let gate = data(seed + 2, dim);
    if rows > 1 {
        for j in 0..dim {
            x[j] = rn16(x[j] * 2e4);
            y[j] *= 7e4;
            let last = (rows - 1) * dim + j;
            x[last] = rn16(x[last] * 1e-5);
            y[last] *= 1e-4;
        }
    }
    let (shift, scale) = (data(seed + 3, dim), data(seed + 4, dim));
    [x, y, gate, shift, scale]
}

fn up(be: &dyn Backend, v: &[f32]) -> DeviceBuffer {
    be.alloc_from(v, AllocKind::Other).unwrap()
}

fn view<'a>(b: &'a DeviceBuffer, dims: &[usize]) -> Tensor<'a> {
    Tensor::of(b).unwrap().view(dims).unwrap()
}

/// How [`run`] computes the residual and the norm.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// `ops::gated_norm_modulate_f16`: one launch.
    Fused,
    /// `ops::gated_add_f16`, `ops::round_f16_shifted` over the scale, `ops::layer_norm_modulate`:
    /// the launches it replaces.
    Steps,
    /// `ops::gated_norm_modulate`: the f32 path, no rounding.
    F32,
    /// `ops::layer_norm_modulate_f16` of `x` as it is (no residual; `x` is returned unchanged).
    NormF16,
    /// `ops::round_f16_shifted` over the scale then `ops::layer_norm_modulate`.
    NormSteps,
    /// `ops::layer_norm_modulate`: the f32 path.
    Norm,
}

/// Runs `x ← residual, xn ← modulated norm` on fresh copies of `input` as `mode` says; returns
/// `(x, xn)`'s bits after the stream drains.
fn run(be: &dyn Backend, input: &[Vec<f32>; 5], rows: usize, mode: Mode) -> [Vec<u32>; 2] {
    let cx = Ctx::new(be, None);
    let [x, y, gate, shift, scale] = input;
    let dim = gate.len();
    let (xb, yb, nb) = (up(be, x), up(be, y), up(be, &vec![f32::NAN; rows * dim]));
    let (gb, sb, cb) = (up(be, gate), up(be, shift), up(be, scale));
    let (xt, yt, nt) = (
        view(&xb, &[rows, dim]),
        view(&yb, &[rows, dim]),
        view(&nb, &[rows, dim]),
    );
    let (g, sh, sc) = (view(&gb, &[dim]), view(&sb, &[dim]), view(&cb, &[dim]));
    match mode {
        Mode::Fused => ops::gated_norm_modulate_f16(&cx, xt, g, yt, nt, sh, sc, EPS).unwrap(),
        Mode::Steps => {
            ops::gated_add_f16(&cx, xt, g, yt).unwrap();
            ops::round_f16_shifted(&cx, sc, 1.0).unwrap();
            ops::layer_norm_modulate(&cx, nt, xt, sh, sc, EPS).unwrap();
        }
        Mode::F32 => ops::gated_norm_modulate(&cx, xt, g, yt, nt, sh, sc, EPS).unwrap(),
        Mode::NormF16 => ops::layer_norm_modulate_f16(&cx, nt, xt, sh, sc, EPS).unwrap(),
        Mode::NormSteps => {
            ops::round_f16_shifted(&cx, sc, 1.0).unwrap();
            ops::layer_norm_modulate(&cx, nt, xt, sh, sc, EPS).unwrap();
        }
        Mode::Norm => ops::layer_norm_modulate(&cx, nt, xt, sh, sc, EPS).unwrap(),
    }
    be.synchronize().unwrap();
    [
        be.download(xb.ptr(), rows * dim).unwrap(),
        be.download(nb.ptr(), rows * dim).unwrap(),
    ]
}

fn modulate_f16_ops_are_their_steps(be: Arc<dyn Backend>) {
    for (i, &(rows, dim)) in SHAPES.iter().enumerate() {
        let input = inputs(600 + 10 * i as u64, rows, dim);
        let fused = run(be.as_ref(), &input, rows, Mode::Fused);
        let steps = run(be.as_ref(), &input, rows, Mode::Steps);
        assert!(fused[0] == steps[0], "x differs at {rows} × {dim}");
        assert!(fused[1] == steps[1], "xn differs at {rows} × {dim}");
        let norm = run(be.as_ref(), &input, rows, Mode::NormF16);
        let norm_steps = run(be.as_ref(), &input, rows, Mode::NormSteps);
        assert!(
            norm[1] == norm_steps[1],
            "layer_norm_modulate_f16 at {rows} × {dim}"
        );
        // the residual stream holds f16 values, and the rounding is real: the f32 fused kernel
        // over the same inputs gives other bits
        let x: Vec<f32> = fused[0].iter().map(|b| f32::from_bits(*b)).collect();
        assert!(x.iter().all(|v| v.to_bits() == rn16(*v).to_bits()));
        let f32s = run(be.as_ref(), &input, rows, Mode::F32);
        assert!(f32s[0] != fused[0], "no rounding at {rows} × {dim}");
        let plain = run(be.as_ref(), &input, rows, Mode::Norm);
        assert!(
            plain[1] != norm[1],
            "no rounding of 1 + scale at {rows} × {dim}"
        );
        if rows > 1 {
            // row 0 overflowed somewhere, the last row reached f16 subnormals
            assert!(x[..dim].iter().any(|v| v.is_infinite()), "{rows} × {dim}");
            let last = &x[(rows - 1) * dim..];
            assert!(last.iter().any(|v| *v != 0.0 && v.abs() < 6.1e-5));
        }
    }
    println!(
        "{}: gated_norm_modulate_f16 and layer_norm_modulate_f16 = their steps, bit for bit, at {} shapes",
        be.device_name(),
        SHAPES.len()
    );
}

/// A malformed view is refused before anything is launched: `xn` of another shape, a gate of
/// the wrong width, `xn` overlapping `x`.
fn gated_norm_modulate_f16_refuses_bad_views(be: Arc<dyn Backend>) {
    let cx = Ctx::new(be.as_ref(), None);
    let (rows, dim) = (4, 32);
    let big = up(&*be, &data(1, 3 * rows * dim));
    let vecs = up(&*be, &data(2, 3 * dim + 1));
    let all = Tensor::of(&big).unwrap().view(&[3, rows, dim]).unwrap();
    let (x, y, xn) = (
        all.index(0, 0).unwrap(),
        all.index(0, 1).unwrap(),
        all.index(0, 2).unwrap(),
    );
    let p = Tensor::of(&vecs).unwrap();
    let v = |i: usize| p.narrow(0, i * dim, dim).unwrap();
    let ok = ops::gated_norm_modulate_f16(&cx, x, v(0), y, xn, v(1), v(2), EPS);
    assert!(ok.is_ok());
    let short = xn.narrow(0, 0, rows - 1).unwrap();
    assert!(ops::gated_norm_modulate_f16(&cx, x, v(0), y, short, v(1), v(2), EPS).is_err());
    let wide = p.narrow(0, 0, dim + 1).unwrap();
    assert!(ops::gated_norm_modulate_f16(&cx, x, wide, y, xn, v(1), v(2), EPS).is_err());
    assert!(ops::gated_norm_modulate_f16(&cx, x, v(0), y, x, v(1), v(2), EPS).is_err());
    be.synchronize().unwrap();
}

both!(
    modulate_f16_ops_are_their_steps,
    gated_norm_modulate_f16_refuses_bad_views
);
