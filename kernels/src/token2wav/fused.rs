//! Fused DiT ops: each is one launch doing what a sequence of the plain ops does, with the same
//! per-element arithmetic in the same order (so the CPU port, which runs the plain ops, and the
//! Host backend, which runs these twins, agree bit for bit).

use super::elementwise as ew;
use super::norm;

/// Row activations of the fused kernels (the `ACT` op codes, `defs::act`).
pub fn act_inplace(x: &mut [f32], op: i32, alpha: f32) -> Result<(), String> {
    match op {
        0 => ew::silu_inplace(x),
        1 => ew::mish_inplace(x),
        2 => ew::gelu_tanh_inplace(x),
        3 => ew::leaky_relu_inplace(x, alpha),
        4 => ew::scale_inplace(x, alpha),
        _ => return Err(format!("unknown activation op {op}")),
    }
    Ok(())
}

/// q/k LayerNorm of the DiT attention and the key/value packing, in one launch: `qkv` is
/// `[batch·t, ld]` with `q ‖ k ‖ v` at columns `0`, `heads·d`, `2·heads·d` (head `h` at `h·d`
/// within each). Writes `qn[(b·t + i), h·d + c] = LN_q(q)` (`[batch·t, heads·d]`) and, at frame
/// `t0 + i` of the `[batch, heads, cap, 2d]` cache, `LN_k(k) ‖ v`.
/// Launch: one warp per (row, head) of q, then of k (`2·batch·t·heads` warps).
pub fn qk_norm_pack(
    qn: &mut [f32],
    cache: &mut [f32],
    cap: usize,
    t0: usize,
    qkv: &[f32],
    ld: usize,
    (gq, bq): (&[f32], &[f32]),
    (gk, bk): (&[f32], &[f32]),
    batch: usize,
    heads: usize,
    t: usize,
    d: usize,
    eps: f32,
) {
    let inner = heads * d;
    for b in 0..batch {
        for i in 0..t {
            let row = b * t + i;
            let src = &qkv[row * ld..];
            for h in 0..heads {
                let qo = row * inner + h * d;
                norm::layer_norm(
                    1,
                    d,
                    &src[h * d..h * d + d],
                    d,
                    Some(gq),
                    Some(bq),
                    eps,
                    &mut qn[qo..qo + d],
                    d,
                );
                let co = ((b * heads + h) * cap + t0 + i) * 2 * d;
                let ks = inner + h * d;
                norm::layer_norm(
                    1,
                    d,
                    &src[ks..ks + d],
                    d,
                    Some(gk),
                    Some(bk),
                    eps,
                    &mut cache[co..co + d],
                    d,
                );
                let vs = 2 * inner + h * d;
                cache[co + d..co + 2 * d].copy_from_slice(&src[vs..vs + d]);
            }
        }
    }
}

/// The adaLN residual then the next modulated LayerNorm: `x[r, j] += gate[j] · y[r, j]` in
/// place, then `xn = LN(x) · (1 + scale) + shift` (`rows × dim`, contiguous).
/// Launch: one warp per row.
pub fn gated_norm_modulate(
    rows: usize,
    dim: usize,
    x: &mut [f32],
    gate: &[f32],
    y: &[f32],
    xn: &mut [f32],
    shift: &[f32],
    scale: &[f32],
    eps: f32,
) {
    ew::gated_add(rows, dim, x, gate, y);
    norm::layer_norm_modulate(rows, dim, x, eps, shift, scale, xn);
}

/// im2col of a causal convolution of kernel `k` over `batch` sequences with a `k − 1`-row
/// context: with `cat_b = ctx_b ‖ src_b` (`ctx_b` at `ctx[b·ctx_b..]`, `k − 1` rows; `src_b` at
/// `src[b·src_b..]`, `frames` rows; rows of `dim`), writes
/// `col[((b·frames + f)·k + s)·dim + c] = cat_b[f + s, c]`.
/// Launch: one thread per element of `col`.
pub fn conv_im2col(
    col: &mut [f32],
    src: &[f32],
    src_b: usize,
    ctx: &[f32],
    ctx_b: usize,
    batch: usize,
    frames: usize,
    k: usize,
    dim: usize,
) {
    let c0 = k - 1;
    for b in 0..batch {
        for f in 0..frames {
            for s in 0..k {
                let r = f + s;
                let dst = ((b * frames + f) * k + s) * dim;
                let from = if r < c0 {
                    &ctx[b * ctx_b + r * dim..b * ctx_b + (r + 1) * dim]
                } else {
                    let o = b * src_b + (r - c0) * dim;
                    &src[o..o + dim]
                };
                col[dst..dst + dim].copy_from_slice(from);
            }
        }
    }
}

/// LayerNorm (affine) then an activation (`op`, as `ACT`) of `batch · frames` rows of `x`
/// (`[batch·frames, dim]`), written straight into the im2col rows of the next causal
/// convolution: as [`conv_im2col`] with `src` = the activated rows.
/// Launch: one warp per row of `cat_b` (`batch · (frames + k − 1)` warps).
pub fn layer_norm_act_im2col(
    col: &mut [f32],
    x: &[f32],
    (gamma, beta): (&[f32], &[f32]),
    eps: f32,
    op: i32,
    alpha: f32,
    ctx: &[f32],
    ctx_b: usize,
    batch: usize,
    frames: usize,
    k: usize,
    dim: usize,
) -> Result<(), String> {
    let mut y = vec![0.0f32; batch * frames * dim];
    norm::layer_norm(
        batch * frames,
        dim,
        x,
        dim,
        Some(gamma),
        Some(beta),
        eps,
        &mut y,
        dim,
    );
    act_inplace(&mut y, op, alpha)?;
    conv_im2col(col, &y, frames * dim, ctx, ctx_b, batch, frames, k, dim);
    Ok(())
}

/// Batched 2-D copy: `dst[b·dst_b + r·ldd + j] = src[b·src_b + r·lds + j]`.
/// Launch: one thread per element.
pub fn copy_batched(
    dst: &mut [f32],
    dst_b: usize,
    ldd: usize,
    src: &[f32],
    src_b: usize,
    lds: usize,
    batch: usize,
    rows: usize,
    cols: usize,
) {
    for b in 0..batch {
        for r in 0..rows {
            let (d, s) = (b * dst_b + r * ldd, b * src_b + r * lds);
            dst[d..d + cols].copy_from_slice(&src[s..s + cols]);
        }
    }
}
