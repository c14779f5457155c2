//! The registry side of the Token2Wav kernels: one [`KernelDef`] per `extern "C"` entry of
//! `kernels/cuda/token2wav.cu`, each with a host twin that rebuilds the slices from the raw
//! addresses and calls the slice function of this module that performs the same arithmetic.
//!
//! Sizes are `i64` (`long long` in CUDA), scalars `f32`, addresses [`Param::Ptr`]. A null
//! address is allowed only where stated (optional LayerNorm affine parameters). Buffers a kernel
//! reads and writes must not overlap unless the entry says "in place".
//!
//! GEMMs (every `Linear`, and every convolution after [`COPY_BLOCK`] builds its im2col rows) go
//! through the runtime's `Backend::gemm` (cuBLAS on CUDA, ordered loops on Host), not through
//! this registry.

use crate::abi::{Arg, Args, DevPtr, KernelError, LaunchDims, Param};
use crate::{CudaSource, KernelDef};

use super::{attn, elementwise as ew, fused, norm, pos};

pub static SOURCE: CudaSource = CudaSource {
    name: "token2wav",
    code: include_str!("../../cuda/token2wav.cu"),
};

use Param::{F32, I32, I64, Ptr};

macro_rules! kdef {
    ($id:ident, $name:literal, [$($p:expr),*], $host:ident, $doc:literal) => {
        #[doc = $doc]
        pub static $id: KernelDef = KernelDef {
            name: concat!("token2wav.", $name),
            source: &SOURCE,
            entry: concat!("t2w_", $name),
            params: &[$($p),*],
            host: $host,
        };
    };
}

kdef!(
    EMBEDDING,
    "embedding",
    [Ptr, Ptr, Ptr, I64, I64, I64],
    host_embedding,
    "`(out, ids: u32*, table, n, dim, vocab)`: `out[t, :] = table[ids[t], :]`; an id ≥ vocab gives a zero row (callers validate ids first)."
);
kdef!(
    COPY_BLOCK,
    "copy_block",
    [Ptr, I64, Ptr, I64, I64, I64, I64],
    host_copy_block,
    "`(dst, ldd, src, lds, rows, cols, rep)`: `dst[r·ldd + j] = src[(r / rep)·lds + j]` (concat into an offset, bias broadcast with `lds = 0`, nearest upsampling with `rep`, im2col with overlapping source rows)."
);
kdef!(
    TRANSPOSE,
    "transpose",
    [Ptr, I64, Ptr, I64, I64, I64],
    host_transpose,
    "`(out, ldo, x, ldx, rows, cols)`: `out[c·ldo + r] = x[r·ldx + c]`."
);
kdef!(
    LAYER_NORM,
    "layer_norm",
    [Ptr, I64, Ptr, I64, Ptr, Ptr, I64, I64, F32],
    host_layer_norm,
    "`(y, ldy, x, ldx, gamma|null, beta|null, rows, dim, eps)`: LayerNorm per row (one warp per row: launch [`row_threads`]`(rows)` threads, blocks of a multiple of 32)."
);
kdef!(
    LAYER_NORM_MODULATE,
    "layer_norm_modulate",
    [Ptr, Ptr, Ptr, Ptr, I64, I64, F32],
    host_layer_norm_modulate,
    "`(y, x, shift, scale, rows, dim, eps)`: non-affine LayerNorm then `· (1 + scale) + shift` (one warp per row, as [`LAYER_NORM`])."
);
kdef!(
    L2_NORMALIZE,
    "l2_normalize",
    [Ptr, Ptr, I64, I64, F32],
    host_l2_normalize,
    "`(y, x, rows, dim, eps)`: `x / max(‖x‖₂, eps)` per row (one warp per row, as [`LAYER_NORM`])."
);
kdef!(
    ACT,
    "act",
    [Ptr, I64, I32, F32],
    host_act,
    "`(x, n, op, alpha)` in place: op 0 SiLU, 1 Mish, 2 GELU-tanh, 3 leaky ReLU (slope alpha), 4 scale by alpha."
);
kdef!(
    ADD,
    "add",
    [Ptr, Ptr, I64],
    host_add,
    "`(x, y, n)`: `x += y` in place."
);
kdef!(
    GATED_ADD,
    "gated_add",
    [Ptr, Ptr, Ptr, I64, I64],
    host_gated_add,
    "`(x, gate, y, rows, dim)`: `x[r, j] += gate[j] · y[r, j]` in place."
);
kdef!(
    CFG_EULER,
    "cfg_euler",
    [Ptr, Ptr, I64, F32, F32],
    host_cfg_euler,
    "`(x, v, n, cfg, dt)`: `x += dt · ((1 + cfg) · v[i] − cfg · v[n + i])` in place."
);
kdef!(
    TIMESTEP_EMBEDDING,
    "timestep_embedding",
    [Ptr, I64, F32, F32, F32],
    host_timestep_embedding,
    "`(out, dim, t, scale, max_period)`: sinusoidal timestep features `[cos ‖ sin]`."
);
kdef!(
    KV_PACK,
    "kv_pack",
    [Ptr, I64, I64, Ptr, Ptr, I64, I64, I64, I64, I64],
    host_kv_pack,
    "`(cache, cap, t0, k, v, ld, batch, heads, t, d)`: writes `t` new key/value rows (`[batch·t, ld]`, head `h` at column `h·d`) into a `[batch, heads, cap, 2d]` cache at frames `t0..t0+t`."
);
kdef!(
    ATTENTION,
    "attention",
    [Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, F32],
    host_attention,
    "`(out, q, kv, batch, heads, tq, tk, d, cap, scale)`: unmasked SDPA, `q`/`out` `[batch, tq, heads·d]`, keys/values frames `0..tk` of a `[batch, heads, cap, 2d]` cache, `d ≤ 128`; one warp per query row, launch with [`attention_dims`]."
);
kdef!(
    REL_POS_ATTENTION,
    "rel_pos_attention",
    [Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64],
    host_rel_pos_attention,
    "`(out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, tk, d, cap)`: the conformer's relative-position attention (batch 1), `d ≤ 128`; one warp per query row, launch with [`attention_dims`]."
);

kdef!(
    QK_NORM_PACK,
    "qk_norm_pack",
    [
        Ptr, Ptr, I64, I64, Ptr, I64, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, F32
    ],
    host_qk_norm_pack,
    "`(qn, cache, cap, t0, qkv, ld, gamma_q, beta_q, gamma_k, beta_k, batch, heads, t, d, eps)`: q/k LayerNorm per head of a fused `[batch·t, ld]` q‖k‖v projection, `qn` `[batch·t, heads·d]`, `LN(k) ‖ v` into frames `t0..t0+t` of a `[batch, heads, cap, 2d]` cache (one warp per (row, head) of q then of k, as [`LAYER_NORM`])."
);
kdef!(
    GATED_NORM_MODULATE,
    "gated_norm_modulate",
    [Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, F32],
    host_gated_norm_modulate,
    "`(x, gate, y, xn, shift, scale, rows, dim, eps)`: [`GATED_ADD`] in place then [`LAYER_NORM_MODULATE`] of the result into `xn` (one warp per row)."
);
kdef!(
    CONV_IM2COL,
    "conv_im2col",
    [Ptr, Ptr, I64, Ptr, I64, I64, I64, I64, I64],
    host_conv_im2col,
    "`(col, src, src_b, ctx, ctx_b, batch, frames, k, dim)`: im2col rows of a causal conv of kernel `k` over `ctx_b ‖ src_b` per batch (`k − 1` context rows)."
);
kdef!(
    LAYER_NORM_ACT_IM2COL,
    "layer_norm_act_im2col",
    [
        Ptr, Ptr, Ptr, Ptr, F32, I32, F32, Ptr, I64, I64, I64, I64, I64
    ],
    host_layer_norm_act_im2col,
    "`(col, x, gamma, beta, eps, op, alpha, ctx, ctx_b, batch, frames, k, dim)`: affine LayerNorm and activation `op` (as [`ACT`]) of `batch·frames` rows, written as [`CONV_IM2COL`] rows (one block per context or input row, blocks of a multiple of 32 threads: every warp reduces the row, the block's warps share its columns; launch [`LN_ACT_BLOCK`]-thread blocks, one per row)."
);
kdef!(
    COPY_BATCHED,
    "copy_batched",
    [Ptr, I64, I64, Ptr, I64, I64, I64, I64, I64],
    host_copy_batched,
    "`(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols)`: `dst[b·dst_b + r·ldd + j] = src[b·src_b + r·lds + j]`."
);

/// Threads per block of [`LAYER_NORM_ACT_IM2COL`] (8 warps share a row's activations).
pub const LN_ACT_BLOCK: u32 = 256;

/// Every Token2Wav kernel.
pub static KERNELS: &[&KernelDef] = &[
    &EMBEDDING,
    &COPY_BLOCK,
    &TRANSPOSE,
    &LAYER_NORM,
    &LAYER_NORM_MODULATE,
    &L2_NORMALIZE,
    &ACT,
    &ADD,
    &GATED_ADD,
    &CFG_EULER,
    &TIMESTEP_EMBEDDING,
    &KV_PACK,
    &ATTENTION,
    &REL_POS_ATTENTION,
    &QK_NORM_PACK,
    &GATED_NORM_MODULATE,
    &CONV_IM2COL,
    &LAYER_NORM_ACT_IM2COL,
    &COPY_BATCHED,
];

/// `ACT` op codes.
pub mod act {
    pub const SILU: i32 = 0;
    pub const MISH: i32 = 1;
    pub const GELU_TANH: i32 = 2;
    pub const LEAKY_RELU: i32 = 3;
    pub const SCALE: i32 = 4;
}

/// Lanes per row of the warp-per-row kernels ([`LAYER_NORM`], [`LAYER_NORM_MODULATE`],
/// [`L2_NORMALIZE`], and per query row of [`ATTENTION`], [`REL_POS_ATTENTION`]).
pub const WARP: usize = super::math::WARP;

/// Threads to launch for the warp-per-row kernels over `rows` rows (any block size that is a
/// multiple of 32; rows beyond the grid's warps are grid-strided).
pub const fn row_threads(rows: usize) -> usize {
    rows * WARP
}

/// Largest head dimension of the attention kernels.
pub const MAX_HEAD_DIM: usize = 128;

/// Query rows (warps) per block the attention kernels are launched with, at most.
pub const ATTN_WARPS: usize = 8;

/// Frames per key/value tile the attention kernels stage in shared memory.
pub const ATTN_TILE: usize = 64;

/// Dynamic shared memory a block of `warps` query rows needs: queries `2·warps·d`, scores
/// `warps·tk`, one key/value tile `64·(d + 1)` floats.
pub const fn attention_shared_bytes(warps: usize, tk: usize, d: usize) -> usize {
    (2 * warps * d + warps * tk + ATTN_TILE * (d + 1)) * 4
}

/// Shared memory a block may take without an opt-in attribute.
pub const MAX_SHARED_BYTES: usize = 48 * 1024;

/// Launch shape of [`ATTENTION`] (`outer` = batch · heads) and [`REL_POS_ATTENTION`]
/// (`outer` = heads) with `warps` query rows per block (`1..=8`; see [`attention_dims`]).
pub fn attention_dims_with(
    warps: usize,
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<LaunchDims, KernelError> {
    if !(1..=ATTN_WARPS).contains(&warps) || d == 0 || d > MAX_HEAD_DIM {
        return Err(invalid(format!(
            "attention: {warps} warps per block (1..={ATTN_WARPS}) or head dim {d} (1..={MAX_HEAD_DIM})"
        )));
    }
    let shared = attention_shared_bytes(warps, tk, d);
    if shared > MAX_SHARED_BYTES {
        return Err(invalid(format!(
            "attention: {tk} keys of dim {d} need {shared} B of shared memory for {warps} rows per block (max {MAX_SHARED_BYTES})"
        )));
    }
    let blocks = (outer * tq.div_ceil(warps)).clamp(1, u32::MAX as usize);
    Ok(LaunchDims {
        grid: (blocks as u32, 1, 1),
        block: ((warps * WARP) as u32, 1, 1),
        shared_bytes: shared as u32,
    })
}

/// Blocks below which [`attention_dims`] trades rows per block for more blocks (an H200 has 132
/// SMs; one block of 8 rows per SM was measured slower than two of 4 for the conformer's
/// 8 heads × 56 rows, and faster for the DiT's 16 × 56).
pub const ATTN_MIN_BLOCKS: usize = 96;

/// Launch shape of the attention kernels: [`ATTN_WARPS`] query rows per block, fewer (down to 2)
/// while that leaves fewer than [`ATTN_MIN_BLOCKS`] blocks, and fewer still where the score rows
/// of `tk` keys would not fit in shared memory; an error when not even one fits (`tk` above
/// about 8,000 keys at `d = 64`) or `d > 128`. The result does not depend on the rows per block
/// (each row's reductions are its own warp's).
pub fn attention_dims(
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<LaunchDims, KernelError> {
    let mut w = ATTN_WARPS;
    while w > 2 && outer * tq.div_ceil(w) < ATTN_MIN_BLOCKS {
        w /= 2;
    }
    while w > 1 && attention_shared_bytes(w, tk, d) > MAX_SHARED_BYTES {
        w /= 2;
    }
    attention_dims_with(w, outer, tq, tk, d)
}

/// Checks a warp-per-row launch: 1-D blocks of a multiple of 32 threads.
fn check_warp_block(name: &str, dims: &LaunchDims) -> Result<usize, KernelError> {
    let (x, y, z) = dims.block;
    if x == 0 || !(x as usize).is_multiple_of(WARP) || y != 1 || z != 1 {
        return Err(invalid(format!(
            "{name}: block {:?} is not 1-D with a multiple of {WARP} threads",
            dims.block
        )));
    }
    Ok(x as usize / WARP)
}

/// Checks an attention launch against what the kernel needs (it traps otherwise).
fn check_attention_launch(
    name: &str,
    dims: &LaunchDims,
    tk: usize,
    d: usize,
) -> Result<(), KernelError> {
    let warps = check_warp_block(name, dims)?;
    if d == 0 || d > MAX_HEAD_DIM {
        return Err(invalid(format!(
            "{name}: head dim {d} outside 1..={MAX_HEAD_DIM}"
        )));
    }
    let need = attention_shared_bytes(warps, tk, d);
    if (dims.shared_bytes as usize) < need {
        return Err(invalid(format!(
            "{name}: {} B of shared memory given, {need} B needed ({warps} rows of {tk} keys, d = {d})",
            dims.shared_bytes
        )));
    }
    Ok(())
}

fn invalid(m: impl Into<String>) -> KernelError {
    KernelError::Invalid(m.into())
}

/// Elements spanned by a `rows × cols` block with leading dimension `ld`.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// # Safety
/// `p` addresses `n` readable floats (or `n == 0`).
unsafe fn rd<'a>(p: DevPtr, n: usize) -> Result<&'a [f32], KernelError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid("null input address"));
    }
    // SAFETY: HostFn contract (caller).
    Ok(unsafe { std::slice::from_raw_parts(p.0 as *const f32, n) })
}

/// # Safety
/// `p` addresses `n` writable floats not aliased by any other slice of the launch.
unsafe fn wr<'a>(p: DevPtr, n: usize) -> Result<&'a mut [f32], KernelError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(invalid("null output address"));
    }
    // SAFETY: HostFn contract (caller).
    Ok(unsafe { std::slice::from_raw_parts_mut(p.0 as *mut f32, n) })
}

unsafe fn host_embedding(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, dim, vocab) = (a.usize(3)?, a.usize(4)?, a.usize(5)?);
    // SAFETY: HostFn contract.
    let ids = unsafe { std::slice::from_raw_parts(a.ptr(1)?.0 as *const u32, n) };
    let (out, table) = unsafe { (wr(a.ptr(0)?, n * dim)?, rd(a.ptr(2)?, vocab * dim)?) };
    for (t, &id) in ids.iter().enumerate() {
        let row = &mut out[t * dim..(t + 1) * dim];
        if (id as usize) < vocab {
            ew::embedding_gather(table, dim, &[id], row).map_err(|_| invalid("id"))?;
        } else {
            row.fill(0.0);
        }
    }
    Ok(())
}

unsafe fn host_copy_block(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (ldd, lds, rows, cols, rep) = (
        a.usize(1)?,
        a.usize(3)?,
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
    );
    if rep == 0 {
        return Err(invalid("copy_block: rep = 0"));
    }
    let src_rows = if rows == 0 { 0 } else { (rows - 1) / rep + 1 };
    // SAFETY: HostFn contract; dst and src do not overlap.
    let (dst, src) = unsafe {
        (
            wr(a.ptr(0)?, span(rows, cols, ldd))?,
            rd(a.ptr(2)?, span(src_rows, cols, lds))?,
        )
    };
    for r in 0..rows {
        let s = (r / rep) * lds;
        dst[r * ldd..r * ldd + cols].copy_from_slice(&src[s..s + cols]);
    }
    Ok(())
}

unsafe fn host_transpose(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (ldo, ldx, rows, cols) = (a.usize(1)?, a.usize(3)?, a.usize(4)?, a.usize(5)?);
    // SAFETY: HostFn contract.
    let (out, x) = unsafe {
        (
            wr(a.ptr(0)?, span(cols, rows, ldo))?,
            rd(a.ptr(2)?, span(rows, cols, ldx))?,
        )
    };
    ew::transpose(rows, cols, x, ldx, out, ldo);
    Ok(())
}

unsafe fn host_layer_norm(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("layer_norm", dims)?;
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
    norm::layer_norm(rows, dim, x, ldx, g, b, eps, y, ldy);
    Ok(())
}

unsafe fn host_layer_norm_modulate(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("layer_norm_modulate", dims)?;
    let (rows, dim, eps) = (a.usize(4)?, a.usize(5)?, a.f32(6)?);
    // SAFETY: HostFn contract.
    let (y, x, shift, scale) = unsafe {
        (
            wr(a.ptr(0)?, rows * dim)?,
            rd(a.ptr(1)?, rows * dim)?,
            rd(a.ptr(2)?, dim)?,
            rd(a.ptr(3)?, dim)?,
        )
    };
    norm::layer_norm_modulate(rows, dim, x, eps, shift, scale, y);
    Ok(())
}

unsafe fn host_l2_normalize(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("l2_normalize", dims)?;
    let (rows, dim, eps) = (a.usize(2)?, a.usize(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let (y, x) = unsafe { (wr(a.ptr(0)?, rows * dim)?, rd(a.ptr(1)?, rows * dim)?) };
    norm::l2_normalize(rows, dim, x, eps, y);
    Ok(())
}

unsafe fn host_act(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, op, alpha) = (a.usize(1)?, a.i32(2)?, a.f32(3)?);
    // SAFETY: HostFn contract.
    let x = unsafe { wr(a.ptr(0)?, n)? };
    match op {
        act::SILU => ew::silu_inplace(x),
        act::MISH => ew::mish_inplace(x),
        act::GELU_TANH => ew::gelu_tanh_inplace(x),
        act::LEAKY_RELU => ew::leaky_relu_inplace(x, alpha),
        act::SCALE => ew::scale_inplace(x, alpha),
        _ => return Err(invalid(format!("act: unknown op {op}"))),
    }
    Ok(())
}

unsafe fn host_add(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(2)?;
    // SAFETY: HostFn contract.
    let (x, y) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, n)?) };
    ew::add_inplace(x, y);
    Ok(())
}

unsafe fn host_gated_add(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (rows, dim) = (a.usize(3)?, a.usize(4)?);
    // SAFETY: HostFn contract.
    let (x, g, y) = unsafe {
        (
            wr(a.ptr(0)?, rows * dim)?,
            rd(a.ptr(1)?, dim)?,
            rd(a.ptr(2)?, rows * dim)?,
        )
    };
    ew::gated_add(rows, dim, x, g, y);
    Ok(())
}

unsafe fn host_cfg_euler(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, cfg, dt) = (a.usize(2)?, a.f32(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let (x, v) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, 2 * n)?) };
    ew::cfg_euler_step(x, &v[..n], &v[n..], cfg, dt);
    Ok(())
}

unsafe fn host_timestep_embedding(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (dim, t, scale, max_period) = (a.usize(1)?, a.f32(2)?, a.f32(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let out = unsafe { wr(a.ptr(0)?, dim)? };
    pos::timestep_embedding(t, scale, dim, max_period, out);
    Ok(())
}

unsafe fn host_kv_pack(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (cap, t0, ld) = (a.usize(1)?, a.usize(2)?, a.usize(5)?);
    let (batch, heads, t, d) = (a.usize(6)?, a.usize(7)?, a.usize(8)?, a.usize(9)?);
    if t0 + t > cap || heads * d > ld {
        return Err(invalid(
            "kv_pack: frames past the cache capacity or head columns past ld",
        ));
    }
    // SAFETY: HostFn contract.
    let (cache, k, v) = unsafe {
        (
            wr(a.ptr(0)?, batch * heads * cap * 2 * d)?,
            rd(a.ptr(3)?, span(batch * t, heads * d, ld))?,
            rd(a.ptr(4)?, span(batch * t, heads * d, ld))?,
        )
    };
    ew::kv_pack(cache, cap, t0, k, v, ld, batch, heads, t, d);
    Ok(())
}

unsafe fn host_attention(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (batch, heads, tq, tk, d, cap, scale) = (
        a.usize(3)?,
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
        a.f32(9)?,
    );
    if tk > cap || tk == 0 {
        return Err(invalid("attention: tk outside 1..=cap"));
    }
    check_attention_launch("attention", dims, tk, d)?;
    let n = batch * tq * heads * d;
    // SAFETY: HostFn contract.
    let (out, q, kv) = unsafe {
        (
            wr(a.ptr(0)?, n)?,
            rd(a.ptr(1)?, n)?,
            rd(a.ptr(2)?, batch * heads * cap * 2 * d)?,
        )
    };
    let rows = attn::AttnLayout::rows(tq, heads, d);
    let kl = attn::AttnLayout::kv_cache(heads, cap, d, false);
    let vl = attn::AttnLayout::kv_cache(heads, cap, d, true);
    attn::attention(
        batch, heads, tq, tk, d, scale, q, rows, kv, kl, kv, vl, out, rows,
    );
    Ok(())
}

unsafe fn host_rel_pos_attention(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (heads, tq, tk, d, cap) = (
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
        a.usize(9)?,
        a.usize(10)?,
    );
    if tq == 0 || tq > tk || tk > cap {
        return Err(invalid("rel_pos_attention: need 0 < tq <= tk <= cap"));
    }
    check_attention_launch("rel_pos_attention", dims, tk, d)?;
    let hd = heads * d;
    // SAFETY: HostFn contract.
    let (out, q, u, w, kv, p) = unsafe {
        (
            wr(a.ptr(0)?, tq * hd)?,
            rd(a.ptr(1)?, tq * hd)?,
            rd(a.ptr(2)?, hd)?,
            rd(a.ptr(3)?, hd)?,
            rd(a.ptr(4)?, heads * cap * 2 * d)?,
            rd(a.ptr(5)?, (2 * tk - 1) * hd)?,
        )
    };
    attn::rel_pos_attention(heads, tq, tk, d, cap, q, hd, u, w, kv, p, out, hd);
    Ok(())
}

unsafe fn host_qk_norm_pack(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("qk_norm_pack", dims)?;
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
        return Err(invalid(
            "qk_norm_pack: frames past the cache capacity or q/k/v columns past ld",
        ));
    }
    // SAFETY: HostFn contract (qn, cache and qkv do not overlap).
    let (qn, cache, qkv, gq, bq, gk, bk) = unsafe {
        (
            wr(a.ptr(0)?, batch * t * inner)?,
            wr(a.ptr(1)?, batch * heads * cap * 2 * d)?,
            rd(a.ptr(4)?, span(batch * t, 3 * inner, ld))?,
            rd(a.ptr(6)?, d)?,
            rd(a.ptr(7)?, d)?,
            rd(a.ptr(8)?, d)?,
            rd(a.ptr(9)?, d)?,
        )
    };
    fused::qk_norm_pack(
        qn,
        cache,
        cap,
        t0,
        qkv,
        ld,
        (gq, bq),
        (gk, bk),
        batch,
        heads,
        t,
        d,
        eps,
    );
    Ok(())
}

unsafe fn host_gated_norm_modulate(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("gated_norm_modulate", dims)?;
    let (rows, dim, eps) = (a.usize(6)?, a.usize(7)?, a.f32(8)?);
    // SAFETY: HostFn contract (x, y and xn do not overlap).
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
    fused::gated_norm_modulate(rows, dim, x, gate, y, xn, shift, scale, eps);
    Ok(())
}

unsafe fn host_conv_im2col(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (src_b, ctx_b) = (a.usize(2)?, a.usize(4)?);
    let (batch, frames, k, dim) = (a.usize(5)?, a.usize(6)?, a.usize(7)?, a.usize(8)?);
    if k == 0 {
        return Err(invalid("conv_im2col: k = 0"));
    }
    let c0 = k - 1;
    // SAFETY: HostFn contract.
    let (col, src, ctx) = unsafe {
        (
            wr(a.ptr(0)?, batch * frames * k * dim)?,
            rd(a.ptr(1)?, span(batch, frames * dim, src_b))?,
            rd(a.ptr(3)?, span(batch, c0 * dim, ctx_b))?,
        )
    };
    fused::conv_im2col(col, src, src_b, ctx, ctx_b, batch, frames, k, dim);
    Ok(())
}

unsafe fn host_layer_norm_act_im2col(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    check_warp_block("layer_norm_act_im2col", dims)?;
    let (eps, op, alpha) = (a.f32(4)?, a.i32(5)?, a.f32(6)?);
    let ctx_b = a.usize(8)?;
    let (batch, frames, k, dim) = (a.usize(9)?, a.usize(10)?, a.usize(11)?, a.usize(12)?);
    if k == 0 {
        return Err(invalid("layer_norm_act_im2col: k = 0"));
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
    fused::layer_norm_act_im2col(
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

unsafe fn host_copy_batched(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (dst_b, ldd, src_b, lds) = (a.usize(1)?, a.usize(2)?, a.usize(4)?, a.usize(5)?);
    let (batch, rows, cols) = (a.usize(6)?, a.usize(7)?, a.usize(8)?);
    let ext = |bs: usize, ld: usize| {
        if batch == 0 {
            0
        } else {
            (batch - 1) * bs + span(rows, cols, ld)
        }
    };
    // SAFETY: HostFn contract; dst and src do not overlap.
    let (dst, src) = unsafe {
        (
            wr(a.ptr(0)?, ext(dst_b, ldd))?,
            rd(a.ptr(3)?, ext(src_b, lds))?,
        )
    };
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    fused::copy_batched(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_exist_in_the_cuda_source() {
        for k in KERNELS {
            let sig = format!("void {}(", k.entry);
            assert!(SOURCE.code.contains(&sig), "{} missing", k.entry);
            assert!(k.name.starts_with("token2wav."));
        }
    }

    #[test]
    fn copy_block_twin_broadcasts_and_repeats() {
        let src = [1.0f32, 2.0, 3.0, 4.0];
        let mut dst = [0.0f32; 8];
        let p = |v: &[f32]| Arg::Ptr(DevPtr(v.as_ptr() as u64));
        let args = [
            Arg::Ptr(DevPtr(dst.as_mut_ptr() as u64)),
            Arg::I64(2),
            p(&src),
            Arg::I64(2),
            Arg::I64(4),
            Arg::I64(2),
            Arg::I64(2),
        ];
        // SAFETY: buffers sized for the launch.
        unsafe {
            COPY_BLOCK
                .run_host(&LaunchDims::linear(8, 128), &args)
                .unwrap()
        };
        assert_eq!(dst, [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
    }
}
