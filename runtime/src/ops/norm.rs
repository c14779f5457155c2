//! Row normalizations (one warp per row: `row_threads(rows)` threads in blocks of
//! [`super::THREADS`]).

use dcc_kernels as k;
use dcc_kernels::Arg;

use super::{Ctx, OpError, Tensor, Work, dims, disjoint, int, matrix, operand, packed, ptr};

/// Checks a packed `[dim]` parameter vector.
fn vector(op: &'static str, view: &'static str, t: &Tensor<'_>, dim: usize) -> Result<(), OpError> {
    dims(op, view, t, &[dim])?;
    packed(op, view, t)
}

/// Checks a packed `[rows, dim]` view; returns `(rows, dim)`.
fn rows(op: &'static str, view: &'static str, t: &Tensor<'_>) -> Result<(usize, usize), OpError> {
    packed(op, view, t)?;
    match t.dims() {
        &[r, d] => Ok((r, d)),
        d => Err(OpError::shape(op, view, "[rows, dim]", d)),
    }
}

/// Affine LayerNorm of every row: `y = LN(x) · g + b` (`LAYER_NORM`); `x`, `y` `[rows, dim]`
/// with unit column stride, `g`, `b` `[dim]`.
pub fn layer_norm(
    cx: &Ctx<'_>,
    y: Tensor<'_>,
    x: Tensor<'_>,
    g: Tensor<'_>,
    b: Tensor<'_>,
    eps: f32,
) -> Result<(), OpError> {
    let op = "layer_norm";
    let (r, dim, ldx) = matrix(op, "x", &x)?;
    let (_, _, ldy) = matrix(op, "y", &y)?;
    dims(op, "y", &y, x.dims())?;
    vector(op, "g", &g, dim)?;
    vector(op, "b", &b, dim)?;
    disjoint(
        op,
        &[
            operand("y", &y, true),
            operand("x", &x, false),
            operand("g", &g, false),
            operand("b", &b, false),
        ],
    )?;
    let args = [
        ptr(&y),
        int(ldy),
        ptr(&x),
        int(ldx),
        ptr(&g),
        ptr(&b),
        int(r),
        int(dim),
        Arg::F32(eps),
    ];
    // mean, variance, normalize, affine: ≈ 8 flops per element
    cx.work(Work::f32(8 * r * dim, 2 * r * dim + 2 * dim));
    // SAFETY: the kernel reads rows of `dim` at stride ldx of x, dim entries of g and b, and
    // writes rows of `dim` at stride ldy of y: the checked views; y overlaps no input.
    unsafe { cx.launch_linear(&k::norm::LAYER_NORM, k::norm::row_threads(r), &args) }
}

/// Non-affine LayerNorm then `· (1 + scale) + shift` (`LAYER_NORM_MODULATE`): `x`, `y` packed
/// `[rows, dim]`, `shift`, `scale` `[dim]`.
pub fn layer_norm_modulate(
    cx: &Ctx<'_>,
    y: Tensor<'_>,
    x: Tensor<'_>,
    shift: Tensor<'_>,
    scale: Tensor<'_>,
    eps: f32,
) -> Result<(), OpError> {
    let (op, kernel) = ("layer_norm_modulate", &k::norm::LAYER_NORM_MODULATE);
    modulate_by(cx, op, kernel, (y, x), (shift, scale), eps)
}

/// [`layer_norm_modulate`] as the vendor's fp16 mode computes it (`LAYER_NORM_MODULATE_F16`):
/// `y = LN(x) · rn16(1 + scale) + shift`, the LayerNorm, product and shift in f32. Views as
/// [`layer_norm_modulate`]'s; `scale` is read as it is (the kernel rounds `1 + scale`).
pub fn layer_norm_modulate_f16(
    cx: &Ctx<'_>,
    y: Tensor<'_>,
    x: Tensor<'_>,
    shift: Tensor<'_>,
    scale: Tensor<'_>,
    eps: f32,
) -> Result<(), OpError> {
    let kernel = &k::norm::LAYER_NORM_MODULATE_F16;
    let op = "layer_norm_modulate_f16";
    modulate_by(cx, op, kernel, (y, x), (shift, scale), eps)
}

/// Checks and launches a `(y, x, shift, scale, rows, dim, eps)` kernel.
fn modulate_by(
    cx: &Ctx<'_>,
    op: &'static str,
    kernel: &'static k::KernelDef,
    (y, x): (Tensor<'_>, Tensor<'_>),
    (shift, scale): (Tensor<'_>, Tensor<'_>),
    eps: f32,
) -> Result<(), OpError> {
    let (r, dim) = rows(op, "x", &x)?;
    rows(op, "y", &y)?;
    dims(op, "y", &y, x.dims())?;
    vector(op, "shift", &shift, dim)?;
    vector(op, "scale", &scale, dim)?;
    disjoint(
        op,
        &[
            operand("y", &y, true),
            operand("x", &x, false),
            operand("shift", &shift, false),
            operand("scale", &scale, false),
        ],
    )?;
    let args = [
        ptr(&y),
        ptr(&x),
        ptr(&shift),
        ptr(&scale),
        int(r),
        int(dim),
        Arg::F32(eps),
    ];
    cx.work(Work::f32(10 * r * dim, 2 * r * dim + 2 * dim));
    // SAFETY: both kernels read x[0..rows·dim], shift and scale [0..dim] and write
    // y[0..rows·dim]: the checked packed views; y overlaps no input.
    unsafe { cx.launch_linear(kernel, k::norm::row_threads(r), &args) }
}

/// The DiT's residual and next modulated norm in one launch (`GATED_ADD_MODULATE`): `x += gate
/// · y` in place, then `xn = LN(x) · (1 + scale) + shift`; `x`, `y`, `xn` packed `[rows, dim]`,
/// `gate`, `shift`, `scale` `[dim]`.
#[allow(clippy::too_many_arguments)]
pub fn gated_norm_modulate(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    gate: Tensor<'_>,
    y: Tensor<'_>,
    xn: Tensor<'_>,
    shift: Tensor<'_>,
    scale: Tensor<'_>,
    eps: f32,
) -> Result<(), OpError> {
    let (op, kernel) = ("gated_norm_modulate", &k::norm::GATED_ADD_MODULATE);
    gated_by(cx, op, kernel, (x, gate, y, xn), (shift, scale), eps)
}

/// [`gated_norm_modulate`] as the vendor's fp16 mode computes it, in one launch
/// (`GATED_ADD_MODULATE_F16`): `x = rn16(x + rn16(gate · y))` in place (the bits of
/// [`super::gated_add_f16`]), then `xn = LN(x) · rn16(1 + scale) + shift` (the bits of
/// [`layer_norm_modulate_f16`] over that `x`). Views as [`gated_norm_modulate`]'s.
#[allow(clippy::too_many_arguments)]
pub fn gated_norm_modulate_f16(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    gate: Tensor<'_>,
    y: Tensor<'_>,
    xn: Tensor<'_>,
    shift: Tensor<'_>,
    scale: Tensor<'_>,
    eps: f32,
) -> Result<(), OpError> {
    let kernel = &k::norm::GATED_ADD_MODULATE_F16;
    let op = "gated_norm_modulate_f16";
    gated_by(cx, op, kernel, (x, gate, y, xn), (shift, scale), eps)
}

/// Checks and launches a `(x, gate, y, xn, shift, scale, rows, dim, eps)` kernel: the gated
/// residual in place, then the modulated norm of the result.
fn gated_by(
    cx: &Ctx<'_>,
    op: &'static str,
    kernel: &'static k::KernelDef,
    (x, gate, y, xn): (Tensor<'_>, Tensor<'_>, Tensor<'_>, Tensor<'_>),
    (shift, scale): (Tensor<'_>, Tensor<'_>),
    eps: f32,
) -> Result<(), OpError> {
    let (r, dim) = rows(op, "x", &x)?;
    for (view, t) in [("y", &y), ("xn", &xn)] {
        rows(op, view, t)?;
        dims(op, view, t, x.dims())?;
    }
    for (view, t) in [("gate", &gate), ("shift", &shift), ("scale", &scale)] {
        vector(op, view, t, dim)?;
    }
    disjoint(
        op,
        &[
            operand("x", &x, true),
            operand("gate", &gate, false),
            operand("y", &y, false),
            operand("xn", &xn, true),
            operand("shift", &shift, false),
            operand("scale", &scale, false),
        ],
    )?;
    let args = [
        ptr(&x),
        ptr(&gate),
        ptr(&y),
        ptr(&xn),
        ptr(&shift),
        ptr(&scale),
        int(r),
        int(dim),
        Arg::F32(eps),
    ];
    // x += gate · y, then a modulated LayerNorm of x (≈ 12 flops per element); reads x, y,
    // writes x and xn
    cx.work(Work::f32(12 * r * dim, 4 * r * dim + 3 * dim));
    // SAFETY: both kernels read and write x[0..rows·dim] in place, read y (same extent) and the
    // three [dim] vectors, and write xn[0..rows·dim]: the checked packed views; x and xn overlap
    // no other operand.
    unsafe { cx.launch_linear(kernel, k::norm::row_threads(r), &args) }
}

/// `y = x / max(‖x‖₂, eps)` per row (`L2_NORMALIZE`): `x`, `y` packed `[rows, dim]`.
pub fn l2_normalize(cx: &Ctx<'_>, y: Tensor<'_>, x: Tensor<'_>, eps: f32) -> Result<(), OpError> {
    let op = "l2_normalize";
    let (r, dim) = rows(op, "x", &x)?;
    rows(op, "y", &y)?;
    dims(op, "y", &y, x.dims())?;
    disjoint(op, &[operand("y", &y, true), operand("x", &x, false)])?;
    let args = [ptr(&y), ptr(&x), int(r), int(dim), Arg::F32(eps)];
    cx.work(Work::f32(3 * r * dim, 2 * r * dim));
    // SAFETY: the kernel reads x[0..rows·dim] and writes y[0..rows·dim]: the checked packed
    // views, which do not overlap.
    unsafe { cx.launch_linear(&k::norm::L2_NORMALIZE, k::norm::row_threads(r), &args) }
}
