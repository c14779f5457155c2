//! Row normalisations (`kernels/cuda/norm.cu`): LayerNorm, modulated LayerNorm, L2, and the
//! fused launches built on them (q/k norm + cache pack, gated residual + modulated norm,
//! LayerNorm + activation + im2col), and the vendor's fp16-mode variants of the modulated ones
//! (`*_f16`: the modulate's `1 + scale` rounded to f16, the gated residual rounded as
//! `elementwise.gated_add_f16` rounds it). Each kernel's host twin's body is the slice function
//! below.
//! Launch: one warp per row ([`row_threads`]); the row statistics are reduced in the kernels'
//! warp order ([`warp_sum`]: 32 lane-strided partial sums, then a fixed tree), no atomics.

#![allow(clippy::too_many_arguments)]

use crate::CudaSource;
use crate::abi::{Arg, Args, DevPtr, KernelError, LaunchDims, Param};
use crate::act::act_inplace;
use crate::copy::conv_im2col;
use crate::elementwise as ew;
use crate::math::{WARP, warp_sum};
use crate::twin::{check_warp_block, invalid, kdef, rd, span, wr};

use Param::{F32, I32, I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "norm",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/rows.cuh"),
        include_str!("../cuda/norm.cu")
    ),
};

kdef!(
    LAYER_NORM,
    "norm",
    "layer_norm",
    [Ptr, I64, Ptr, I64, Ptr, Ptr, I64, I64, F32],
    host_layer_norm,
    "`(y, ldy, x, ldx, gamma|null, beta|null, rows, dim, eps)`: LayerNorm per row ([`layer_norm`]; one warp per row: launch [`row_threads`]`(rows)` threads, blocks of a multiple of 32)."
);
kdef!(
    LAYER_NORM_MODULATE,
    "norm",
    "layer_norm_modulate",
    [Ptr, Ptr, Ptr, Ptr, I64, I64, F32],
    host_layer_norm_modulate,
    "`(y, x, shift, scale, rows, dim, eps)`: non-affine LayerNorm then `· (1 + scale) + shift` ([`layer_norm_modulate`]; one warp per row, as [`LAYER_NORM`])."
);
kdef!(
    LAYER_NORM_MODULATE_F16,
    "norm",
    "layer_norm_modulate_f16",
    [Ptr, Ptr, Ptr, Ptr, I64, I64, F32],
    host_layer_norm_modulate_f16,
    "`(y, x, shift, scale, rows, dim, eps)`: [`LAYER_NORM_MODULATE`] in the vendor's fp16 mode, `· rn16(1 + scale) + shift` ([`layer_norm_modulate_f16`]; one warp per row)."
);
kdef!(
    L2_NORMALIZE,
    "norm",
    "l2_normalize",
    [Ptr, Ptr, I64, I64, F32],
    host_l2_normalize,
    "`(y, x, rows, dim, eps)`: `x / max(‖x‖₂, eps)` per row ([`l2_normalize`]; one warp per row, as [`LAYER_NORM`])."
);
kdef!(
    QK_PACK,
    "norm",
    "qk_pack",
    [
        Ptr, Ptr, I64, I64, Ptr, I64, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, F32
    ],
    host_qk_pack,
    "`(qn, cache, cap, t0, qkv, ld, gamma_q, beta_q, gamma_k, beta_k, batch, heads, t, d, eps)`: q/k LayerNorm per head of a fused `[batch·t, ld]` q‖k‖v projection, `qn` `[batch·t, heads·d]`, `LN(k) ‖ v` into frames `t0..t0+t` of a `[batch, heads, cap, 2d]` cache ([`qk_norm_pack`]; one warp per (row, head) of q then of k, as [`LAYER_NORM`])."
);
kdef!(
    GATED_ADD_MODULATE,
    "norm",
    "gated_add_modulate",
    [Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, F32],
    host_gated_add_modulate,
    "`(x, gate, y, xn, shift, scale, rows, dim, eps)`: `elementwise.gated_add` in place then [`LAYER_NORM_MODULATE`] of the result into `xn` ([`gated_norm_modulate`]; one warp per row)."
);
kdef!(
    GATED_ADD_MODULATE_F16,
    "norm",
    "gated_add_modulate_f16",
    [Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, F32],
    host_gated_add_modulate_f16,
    "`(x, gate, y, xn, shift, scale, rows, dim, eps)`: `elementwise.gated_add_f16` in place then [`LAYER_NORM_MODULATE_F16`] of the result into `xn` ([`gated_norm_modulate_f16`]; one warp per row, the arithmetic of those two kernels, so their bits)."
);
kdef!(
    LAYER_NORM_ACT_IM2COL,
    "norm",
    "layer_norm_act_im2col",
    [
        Ptr, Ptr, Ptr, Ptr, F32, I32, F32, Ptr, I64, I64, I64, I64, I64
    ],
    host_layer_norm_act_im2col,
    "`(col, x, gamma, beta, eps, op, alpha, ctx, ctx_b, batch, frames, k, dim)`: affine LayerNorm and activation `op` (as `act.apply`) of `batch·frames` rows, written as `copy.im2col` rows ([`layer_norm_act_im2col`]; one block per context or input row, blocks of a multiple of 32 threads: every warp reduces the row, the block's warps share its columns; launch [`LN_ACT_BLOCK`]-thread blocks, one per row)."
);

pub static KERNELS: &[&crate::KernelDef] = &[
    &LAYER_NORM,
    &LAYER_NORM_MODULATE,
    &LAYER_NORM_MODULATE_F16,
    &L2_NORMALIZE,
    &QK_PACK,
    &GATED_ADD_MODULATE,
    &GATED_ADD_MODULATE_F16,
    &LAYER_NORM_ACT_IM2COL,
];

/// Threads to launch for the warp-per-row kernels over `rows` rows (any block size that is a
/// multiple of 32; rows beyond the grid's warps are grid-strided).
pub const fn row_threads(rows: usize) -> usize {
    rows * WARP
}

/// Threads per block of [`LAYER_NORM_ACT_IM2COL`] (8 warps share a row's activations).
pub const LN_ACT_BLOCK: u32 = 256;

/// Mean and `1 / sqrt(var + eps)` of one row (two passes: mean, then centred squares).
#[inline]
fn moments(row: &[f32], eps: f32) -> (f32, f32) {
    let n = row.len() as f32;
    let s = warp_sum(row.len(), |j| row[j]);
    let mean = s / n;
    let q = warp_sum(row.len(), |j| {
        let d = row[j] - mean;
        d * d
    });
    let var = q / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// `torch.nn.LayerNorm` over the last `dim` elements of each of `rows` rows:
/// `y = (x · rstd − mean · rstd) · gamma + beta` (torch's CPU kernel form); `gamma`/`beta`
/// absent = `elementwise_affine=False`. `x[r, :]` at `x[r·ldx..]`, `y[r, :]` at `y[r·ldy..]`.
pub fn layer_norm(
    rows: usize,
    dim: usize,
    x: &[f32],
    ldx: usize,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
    ldy: usize,
) {
    for r in 0..rows {
        let xr = &x[r * ldx..r * ldx + dim];
        let (mean, rstd) = moments(xr, eps);
        let bias = -mean * rstd;
        let yr = &mut y[r * ldy..r * ldy + dim];
        for j in 0..dim {
            let mut v = xr[j] * rstd + bias;
            if let Some(g) = gamma {
                v *= g[j];
            }
            if let Some(b) = beta {
                v += b[j];
            }
            yr[j] = v;
        }
    }
}

/// DiT's `modulate(norm(x), shift, scale)`: non-affine LayerNorm followed by
/// `y = n · (1 + scale) + shift`, `shift`/`scale` broadcast over rows (`[dim]` each).
pub fn layer_norm_modulate(
    rows: usize,
    dim: usize,
    x: &[f32],
    eps: f32,
    shift: &[f32],
    scale: &[f32],
    y: &mut [f32],
) {
    modulate_by(rows, dim, x, eps, shift, scale, y, |s| 1.0 + s);
}

/// [`layer_norm_modulate`] in the vendor's fp16 mode: `1 + scale` is an f16 sum (the scale an
/// f16 linear's output), rounded; the LayerNorm, the product and the shift stay f32 (autocast
/// runs `layer_norm` in f32 and the products promote): `y = n · rn16(1 + scale) + shift`.
/// The same bits as [`layer_norm_modulate`] over `scale' = rn16(1 + scale) − 1`
/// ([`ew::round_f16_shifted`]): `rn16(1 + scale) − 1` is exact in f32 (an f16 value has 11
/// significant bits and none below 2⁻²⁴), and so is `1 + scale'` (`norm_tests.rs` sweeps it).
pub fn layer_norm_modulate_f16(
    rows: usize,
    dim: usize,
    x: &[f32],
    eps: f32,
    shift: &[f32],
    scale: &[f32],
    y: &mut [f32],
) {
    modulate_by(rows, dim, x, eps, shift, scale, y, |s| ew::rn16(1.0 + s));
}

/// `y = LN(x) · factor(scale) + shift` per row: the body of both modulated LayerNorms.
#[inline]
fn modulate_by(
    rows: usize,
    dim: usize,
    x: &[f32],
    eps: f32,
    shift: &[f32],
    scale: &[f32],
    y: &mut [f32],
    factor: impl Fn(f32) -> f32,
) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let (mean, rstd) = moments(xr, eps);
        let bias = -mean * rstd;
        let yr = &mut y[r * dim..(r + 1) * dim];
        for j in 0..dim {
            let n = xr[j] * rstd + bias;
            yr[j] = n * factor(scale[j]) + shift[j];
        }
    }
}

/// `F.normalize(x, dim=1)` of each row: `x / max(‖x‖₂, eps)`.
pub fn l2_normalize(rows: usize, dim: usize, x: &[f32], eps: f32, y: &mut [f32]) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let s = warp_sum(dim, |j| xr[j] * xr[j]);
        let norm = s.sqrt().max(eps);
        for (o, v) in y[r * dim..(r + 1) * dim].iter_mut().zip(xr) {
            *o = v / norm;
        }
    }
}

// ---- fused ---------------------------------------------------------------------------------
//
// Each is one launch doing what a sequence of the plain ops does, with the same per-element
// arithmetic in the same order (so code running the plain ops and the Host backend running these
// twins agree bit for bit).

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
                layer_norm(
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
                layer_norm(
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
    layer_norm_modulate(rows, dim, x, eps, shift, scale, xn);
}

/// [`gated_norm_modulate`] in the vendor's fp16 mode: the residual rounded as
/// [`ew::gated_add_f16`] rounds it (`x = rn16(x + rn16(gate · y))`, the residual stream holds
/// f16 values), then [`layer_norm_modulate_f16`] of that `x`. Launch: one warp per row.
pub fn gated_norm_modulate_f16(
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
    ew::gated_add_f16(rows, dim, x, gate, y);
    layer_norm_modulate_f16(rows, dim, x, eps, shift, scale, xn);
}

/// LayerNorm (affine) then an activation (`op`, as `act.apply`) of `batch · frames` rows of `x`
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
    layer_norm(
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

unsafe fn host_layer_norm(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("norm.layer_norm", dims)?;
    let (ldy, ldx, rows, dim, eps) = (
        a.usize(1)?,
        a.usize(3)?,
        a.usize(6)?,
        a.usize(7)?,
        a.f32(8)?,
    );
    let opt = |p: DevPtr| -> Result<Option<&[f32]>, KernelError> {
        // SAFETY: HostFn contract.
        if p.is_null() {
            Ok(None)
        } else {
            unsafe { rd(p, dim).map(Some) }
        }
    };
    let (g, b) = (opt(a.ptr(4)?)?, opt(a.ptr(5)?)?);
    // SAFETY: HostFn contract.
    let (y, x) = unsafe {
        (
            wr(a.ptr(0)?, span(rows, dim, ldy))?,
            rd(a.ptr(2)?, span(rows, dim, ldx))?,
        )
    };
    layer_norm(rows, dim, x, ldx, g, b, eps, y, ldy);
    Ok(())
}

/// The slice function of a modulated LayerNorm kernel: [`layer_norm_modulate`] or
/// [`layer_norm_modulate_f16`].
type ModulateFn = fn(usize, usize, &[f32], f32, &[f32], &[f32], &mut [f32]);

/// The twin of a `(y, x, shift, scale, rows, dim, eps)` launch running `body`.
///
/// # Safety
/// HostFn contract: the arguments address the extents below.
unsafe fn host_modulate(
    name: &str,
    dims: &LaunchDims,
    a: &[Arg],
    body: ModulateFn,
) -> Result<(), KernelError> {
    check_warp_block(name, dims)?;
    let (rows, dim, eps) = (a.usize(4)?, a.usize(5)?, a.f32(6)?);
    // SAFETY: HostFn contract (the caller's).
    let (y, x, shift, scale) = unsafe {
        (
            wr(a.ptr(0)?, rows * dim)?,
            rd(a.ptr(1)?, rows * dim)?,
            rd(a.ptr(2)?, dim)?,
            rd(a.ptr(3)?, dim)?,
        )
    };
    body(rows, dim, x, eps, shift, scale, y);
    Ok(())
}

unsafe fn host_layer_norm_modulate(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract.
    unsafe { host_modulate("norm.layer_norm_modulate", dims, a, layer_norm_modulate) }
}

unsafe fn host_layer_norm_modulate_f16(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let name = "norm.layer_norm_modulate_f16";
    // SAFETY: HostFn contract.
    unsafe { host_modulate(name, dims, a, layer_norm_modulate_f16) }
}

unsafe fn host_l2_normalize(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("norm.l2_normalize", dims)?;
    let (rows, dim, eps) = (a.usize(2)?, a.usize(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let (y, x) = unsafe { (wr(a.ptr(0)?, rows * dim)?, rd(a.ptr(1)?, rows * dim)?) };
    l2_normalize(rows, dim, x, eps, y);
    Ok(())
}

/// The slices of a `qk_pack` launch, `(qn, cache, cap, t0, qkv, ld, gamma_q, beta_q, gamma_k,
/// beta_k, batch, heads, t, d, eps)`, with the cache's element `C` (`f32` for `norm.qk_pack`,
/// binary16 for `half.qk_pack`).
pub(crate) struct QkPackArgs<'a, C> {
    pub qn: &'a mut [f32],
    pub cache: &'a mut [C],
    pub cap: usize,
    pub t0: usize,
    pub qkv: &'a [f32],
    pub ld: usize,
    pub q: (&'a [f32], &'a [f32]),
    pub k: (&'a [f32], &'a [f32]),
    pub batch: usize,
    pub heads: usize,
    pub t: usize,
    pub d: usize,
    pub eps: f32,
}

/// Checks and rebuilds the slices of a `qk_pack` launch named `name`; `cache` rebuilds the
/// cache's `[batch, heads, cap, 2d]` elements from its address.
///
/// # Safety
/// HostFn contract: the arguments address the extents above, and `cache` is the reconstruction
/// of the cache's element type (`wr` or `wr16`).
pub(crate) unsafe fn qk_pack_args<'a, C>(
    name: &str,
    dims: &LaunchDims,
    a: &[Arg],
    cache: unsafe fn(DevPtr, usize) -> Result<&'a mut [C], KernelError>,
) -> Result<QkPackArgs<'a, C>, KernelError> {
    check_warp_block(name, dims)?;
    let (cap, t0, ld) = (a.usize(2)?, a.usize(3)?, a.usize(5)?);
    let (batch, heads, t, d, eps) = (
        a.usize(10)?,
        a.usize(11)?,
        a.usize(12)?,
        a.usize(13)?,
        a.f32(14)?,
    );
    let inner = heads * d;
    if t0 + t > cap || 3 * inner > ld {
        return Err(invalid(format!(
            "{name}: frames past the cache capacity or q/k/v columns past ld"
        )));
    }
    // SAFETY: HostFn contract (qn, cache and qkv do not overlap).
    unsafe {
        Ok(QkPackArgs {
            qn: wr(a.ptr(0)?, batch * t * inner)?,
            cache: cache(a.ptr(1)?, batch * heads * cap * 2 * d)?,
            cap,
            t0,
            qkv: rd(a.ptr(4)?, span(batch * t, 3 * inner, ld))?,
            ld,
            q: (rd(a.ptr(6)?, d)?, rd(a.ptr(7)?, d)?),
            k: (rd(a.ptr(8)?, d)?, rd(a.ptr(9)?, d)?),
            batch,
            heads,
            t,
            d,
            eps,
        })
    }
}

unsafe fn host_qk_pack(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract; the cache is f32.
    let l = unsafe { qk_pack_args("norm.qk_pack", dims, a, wr)? };
    qk_norm_pack(
        l.qn, l.cache, l.cap, l.t0, l.qkv, l.ld, l.q, l.k, l.batch, l.heads, l.t, l.d, l.eps,
    );
    Ok(())
}

/// The slice function of a gated residual + modulated norm kernel: [`gated_norm_modulate`] or
/// [`gated_norm_modulate_f16`].
type GatedFn = fn(usize, usize, &mut [f32], &[f32], &[f32], &mut [f32], &[f32], &[f32], f32);

/// The twin of a `(x, gate, y, xn, shift, scale, rows, dim, eps)` launch running `body`.
///
/// # Safety
/// HostFn contract: the arguments address the extents below.
unsafe fn host_gated(
    name: &str,
    dims: &LaunchDims,
    a: &[Arg],
    body: GatedFn,
) -> Result<(), KernelError> {
    check_warp_block(name, dims)?;
    let (rows, dim, eps) = (a.usize(6)?, a.usize(7)?, a.f32(8)?);
    // SAFETY: HostFn contract (the caller's; x, y and xn do not overlap).
    let (x, gate, y, xn, shift, scale) = unsafe {
        (
            wr(a.ptr(0)?, rows * dim)?,
            rd(a.ptr(1)?, dim)?,
            rd(a.ptr(2)?, rows * dim)?,
            wr(a.ptr(3)?, rows * dim)?,
            rd(a.ptr(4)?, dim)?,
            rd(a.ptr(5)?, dim)?,
        )
    };
    body(rows, dim, x, gate, y, xn, shift, scale, eps);
    Ok(())
}

unsafe fn host_gated_add_modulate(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract.
    unsafe { host_gated("norm.gated_add_modulate", dims, a, gated_norm_modulate) }
}

unsafe fn host_gated_add_modulate_f16(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract.
    unsafe {
        host_gated(
            "norm.gated_add_modulate_f16",
            dims,
            a,
            gated_norm_modulate_f16,
        )
    }
}

unsafe fn host_layer_norm_act_im2col(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("norm.layer_norm_act_im2col", dims)?;
    let (eps, op, alpha) = (a.f32(4)?, a.i32(5)?, a.f32(6)?);
    let ctx_b = a.usize(8)?;
    let (batch, frames, k, dim) = (a.usize(9)?, a.usize(10)?, a.usize(11)?, a.usize(12)?);
    if k == 0 {
        return Err(invalid("norm.layer_norm_act_im2col: k = 0"));
    }
    // SAFETY: HostFn contract.
    let (col, x, g, b, ctx) = unsafe {
        (
            wr(a.ptr(0)?, batch * frames * k * dim)?,
            rd(a.ptr(1)?, batch * frames * dim)?,
            rd(a.ptr(2)?, dim)?,
            rd(a.ptr(3)?, dim)?,
            rd(a.ptr(7)?, span(batch, (k - 1) * dim, ctx_b))?,
        )
    };
    layer_norm_act_im2col(
        col,
        x,
        (g, b),
        eps,
        op,
        alpha,
        ctx,
        ctx_b,
        batch,
        frames,
        k,
        dim,
    )
    .map_err(invalid)
}

#[cfg(test)]
#[path = "norm_tests.rs"]
mod tests;
