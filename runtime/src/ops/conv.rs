//! im2col rows of batched causal convolutions that read their context in place.

use dcc_kernels as k;
use dcc_kernels::{Arg, LaunchDims};

use super::{Act, Ctx, OpError, Tensor, Work, dims, disjoint, int, operand, packed, ptr};

/// `(batch, rows, dim, batch stride)` of a `[batch, rows, dim]` view whose rows are packed
/// (`strides = [batch stride, dim, 1]`).
fn batched_rows(
    op: &'static str,
    view: &'static str,
    t: &Tensor<'_>,
) -> Result<(usize, usize, usize, usize), OpError> {
    match (t.dims(), t.strides()) {
        (&[b, r, d], &[bs, s, 1]) if s == d || r <= 1 => Ok((b, r, d, bs)),
        (&[_, _, d], s) => Err(OpError::layout(
            op,
            view,
            format!("[batch stride, {d}, 1]"),
            s,
        )),
        (x, _) => Err(OpError::shape(op, view, "[batch, rows, dim]", x)),
    }
}

/// Checks `col` packed `[batch, frames, k·dim]` and `ctx` `[batch, k − 1, dim]`; returns the
/// context's batch stride.
fn im2col_operands(
    op: &'static str,
    col: &Tensor<'_>,
    ctx: &Tensor<'_>,
    (b, frames, dim): (usize, usize, usize),
    k: usize,
) -> Result<usize, OpError> {
    if k == 0 {
        return Err(OpError::arg(op, "k", "0"));
    }
    dims(op, "col", col, &[b, frames, k * dim])?;
    packed(op, "col", col)?;
    let (cb, cr, cd, ctx_b) = batched_rows(op, "ctx", ctx)?;
    if (cb, cr, cd) != (b, k - 1, dim) {
        return Err(OpError::shape(
            op,
            "ctx",
            format!("[{b}, {}, {dim}]", k - 1),
            ctx.dims(),
        ));
    }
    Ok(ctx_b)
}

/// The im2col rows of a causal conv of kernel `k` over `ctx ‖ src` per batch (`CONV_IM2COL`,
/// one grid row per row of `col`, `dcc_kernels::copy::im2col_dims`): `col` packed `[batch, frames, k·dim]`, `src` `[batch, frames, dim]`
/// and `ctx` `[batch, k − 1, dim]` with packed rows and any batch stride.
pub fn conv_im2col(
    cx: &Ctx<'_>,
    col: Tensor<'_>,
    src: Tensor<'_>,
    ctx: Tensor<'_>,
    k: usize,
) -> Result<(), OpError> {
    let op = "conv_im2col";
    let (b, frames, dim, src_b) = batched_rows(op, "src", &src)?;
    let ctx_b = im2col_operands(op, &col, &ctx, (b, frames, dim), k)?;
    disjoint(
        op,
        &[
            operand("col", &col, true),
            operand("src", &src, false),
            operand("ctx", &ctx, false),
        ],
    )?;
    let args = [
        ptr(&col),
        ptr(&src),
        int(src_b),
        ptr(&ctx),
        int(ctx_b),
        int(b),
        int(frames),
        int(k),
        int(dim),
    ];
    cx.work(Work::f32(0, b * frames * dim + b * frames * k * dim));
    let dims = k::copy::im2col_dims(b, frames, k, dim, super::THREADS);
    // SAFETY: the kernel reads the checked src and ctx views and writes col[0..batch·frames·k·
    // dim] (at any geometry), the checked packed view, which overlaps neither.
    unsafe { cx.launch(&k::copy::IM2COL, dims, &args) }
}

/// Affine LayerNorm and activation `f` of `x`'s rows written as [`conv_im2col`] rows over `ctx ‖
/// f(LN(x))`, then the context advanced in place to the last `k − 1` rows of `ctx ‖ f(LN(x))`
/// (`LAYER_NORM_ACT_IM2COL`: blocks of `LN_ACT_BLOCK` threads, one per input row and one per
/// batch for its context and its last `k − 1` rows, which reads the old context before it
/// writes the new one): `x` packed `[batch, frames, dim]`, `g`, `b` `[dim]`.
#[allow(clippy::too_many_arguments)]
pub fn layer_norm_act_im2col(
    cx: &Ctx<'_>,
    col: Tensor<'_>,
    x: Tensor<'_>,
    (g, bias): (Tensor<'_>, Tensor<'_>),
    eps: f32,
    f: Act,
    ctx: Tensor<'_>,
    k: usize,
) -> Result<(), OpError> {
    let op = "layer_norm_act_im2col";
    packed(op, "x", &x)?;
    let (b, frames, dim) = match x.dims() {
        &[b, f, d] => (b, f, d),
        d => return Err(OpError::shape(op, "x", "[batch, frames, dim]", d)),
    };
    let ctx_b = im2col_operands(op, &col, &ctx, (b, frames, dim), k)?;
    for (view, p) in [("g", &g), ("b", &bias)] {
        dims(op, view, p, &[dim])?;
        packed(op, view, p)?;
    }
    disjoint(
        op,
        &[
            operand("col", &col, true),
            operand("x", &x, false),
            operand("g", &g, false),
            operand("b", &bias, false),
            operand("ctx", &ctx, true),
        ],
    )?;
    let (code, alpha) = f.code();
    let args = [
        ptr(&col),
        ptr(&x),
        ptr(&g),
        ptr(&bias),
        Arg::F32(eps),
        Arg::I32(code),
        Arg::F32(alpha),
        ptr(&ctx),
        int(ctx_b),
        int(b),
        int(frames),
        int(k),
        int(dim),
    ];
    let blocks = u32::try_from(k::norm::ln_act_blocks(b, frames, k))
        .map_err(|_| OpError::arg(op, "x", "more rows than a grid holds"))?;
    // LayerNorm and activation (≈ 10 flops per element); reads x, writes k copies of each row
    cx.work(Work::f32(
        10 * b * frames * dim,
        b * frames * dim + b * frames * k * dim,
    ));
    // SAFETY: the kernel reads x, g and b, reads and writes the ctx view in place, and writes
    // col[0..batch·frames·k·dim]: the checked views; col and ctx overlap no other operand.
    unsafe {
        cx.launch(
            &k::norm::LAYER_NORM_ACT_IM2COL,
            LaunchDims::blocks(blocks, k::norm::LN_ACT_BLOCK),
            &args,
        )
    }
}

/// The DiT's gated residual and next modulated norm written as the im2col rows of the causal
/// conv that reads it (`GATED_ADD_MODULATE_IM2COL`): `x += gate · y` in place, then the rows
/// `n = LN(x) · (1 + scale) + shift` written as [`conv_im2col`] rows over `ctx ‖ n`, and the
/// context advanced in place to the last `k − 1` rows of `ctx ‖ n` (the bits of
/// [`super::gated_norm_modulate`], [`conv_im2col`] and a copy of those rows: one launch for three).
/// `x`, `y` packed `[batch, frames, dim]`, `gate`, `shift`, `scale` `[dim]`, `col` packed
/// `[batch, frames, k·dim]`, `ctx` `[batch, k − 1, dim]` with packed rows and any batch stride.
#[allow(clippy::too_many_arguments)]
pub fn gated_norm_modulate_im2col(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    (gate, y): (Tensor<'_>, Tensor<'_>),
    (shift, scale): (Tensor<'_>, Tensor<'_>),
    col: Tensor<'_>,
    ctx: Tensor<'_>,
    k: usize,
    eps: f32,
) -> Result<(), OpError> {
    let (op, kernel) = (
        "gated_norm_modulate_im2col",
        &k::norm::GATED_ADD_MODULATE_IM2COL,
    );
    gated_im2col_by(
        cx,
        op,
        kernel,
        x,
        (gate, y),
        (shift, scale),
        (col, ctx),
        k,
        eps,
    )
}

/// [`gated_norm_modulate_im2col`] as the vendor's fp16 mode computes its rows
/// (`GATED_ADD_MODULATE_IM2COL_F16`: the bits of [`super::gated_norm_modulate_f16`]). Views as
/// [`gated_norm_modulate_im2col`]'s.
#[allow(clippy::too_many_arguments)]
pub fn gated_norm_modulate_im2col_f16(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    (gate, y): (Tensor<'_>, Tensor<'_>),
    (shift, scale): (Tensor<'_>, Tensor<'_>),
    col: Tensor<'_>,
    ctx: Tensor<'_>,
    k: usize,
    eps: f32,
) -> Result<(), OpError> {
    let (op, kernel) = (
        "gated_norm_modulate_im2col_f16",
        &k::norm::GATED_ADD_MODULATE_IM2COL_F16,
    );
    gated_im2col_by(
        cx,
        op,
        kernel,
        x,
        (gate, y),
        (shift, scale),
        (col, ctx),
        k,
        eps,
    )
}

/// Checks and launches a `(x, gate, y, shift, scale, col, ctx, ctx_b, batch, frames, k, dim,
/// eps)` kernel.
#[allow(clippy::too_many_arguments)]
fn gated_im2col_by(
    cx: &Ctx<'_>,
    op: &'static str,
    kernel: &'static k::KernelDef,
    x: Tensor<'_>,
    (gate, y): (Tensor<'_>, Tensor<'_>),
    (shift, scale): (Tensor<'_>, Tensor<'_>),
    (col, ctx): (Tensor<'_>, Tensor<'_>),
    k: usize,
    eps: f32,
) -> Result<(), OpError> {
    packed(op, "x", &x)?;
    let (b, frames, dim) = match x.dims() {
        &[b, f, d] => (b, f, d),
        d => return Err(OpError::shape(op, "x", "[batch, frames, dim]", d)),
    };
    packed(op, "y", &y)?;
    dims(op, "y", &y, x.dims())?;
    for (view, t) in [("gate", &gate), ("shift", &shift), ("scale", &scale)] {
        dims(op, view, t, &[dim])?;
        packed(op, view, t)?;
    }
    let ctx_b = im2col_operands(op, &col, &ctx, (b, frames, dim), k)?;
    disjoint(
        op,
        &[
            operand("x", &x, true),
            operand("gate", &gate, false),
            operand("y", &y, false),
            operand("shift", &shift, false),
            operand("scale", &scale, false),
            operand("col", &col, true),
            operand("ctx", &ctx, true),
        ],
    )?;
    let args = [
        ptr(&x),
        ptr(&gate),
        ptr(&y),
        ptr(&shift),
        ptr(&scale),
        ptr(&col),
        ptr(&ctx),
        int(ctx_b),
        int(b),
        int(frames),
        int(k),
        int(dim),
        Arg::F32(eps),
    ];
    let blocks = u32::try_from(k::norm::gated_im2col_blocks(b, frames, k))
        .map_err(|_| OpError::arg(op, "x", "more rows than a grid holds"))?;
    // the gated residual and modulated norm (≈ 12 flops per element); reads x, y, writes x and
    // k copies of each normalized row
    let r = b * frames;
    cx.work(Work::f32(12 * r * dim, 3 * r * dim + 3 * dim + r * k * dim));
    // SAFETY: the kernel reads and writes x[0..batch·frames·dim] in place, reads y (same extent)
    // and the three [dim] vectors, reads and writes the ctx view in place, and writes
    // col[0..batch·frames·k·dim]: the checked views; x, col and ctx overlap no other operand.
    unsafe {
        cx.launch(
            kernel,
            LaunchDims::blocks(blocks, k::norm::GATED_IM2COL_BLOCK),
            &args,
        )
    }
}
