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
/// f(LN(x))` (`LAYER_NORM_ACT_IM2COL`, one block of `LN_ACT_BLOCK` threads per context or input
/// row): `x` packed `[batch, frames, dim]`, `g`, `b` `[dim]`.
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
            operand("ctx", &ctx, false),
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
    let blocks = u32::try_from(b * (frames + k - 1))
        .map_err(|_| OpError::arg(op, "x", "more rows than a grid holds"))?;
    // LayerNorm and activation (≈ 10 flops per element); reads x, writes k copies of each row
    cx.work(Work::f32(
        10 * b * frames * dim,
        b * frames * dim + b * frames * k * dim,
    ));
    // SAFETY: the kernel reads x, g, b and the ctx view and writes col[0..batch·frames·k·dim]:
    // the checked views; col overlaps no input.
    unsafe {
        cx.launch(
            &k::norm::LAYER_NORM_ACT_IM2COL,
            LaunchDims::blocks(blocks, k::norm::LN_ACT_BLOCK),
            &args,
        )
    }
}
