//! Attention (`kernels/cuda/attention.cu`): scaled dot-product attention ([`SDPA`]) and the
//! conformer's relative-position attention ([`REL_POS`]), whose host twins' bodies are
//! [`attention`] and [`rel_pos_attention`]. Launch: one warp per `(batch, head, query row)`
//! (several rows of one head per block, sharing key/value tiles in shared memory, see
//! [`attention_dims`]; [`rel_pos_dims`] stages the position rows of each key tile too); the warp
//! computes the score row (each dot product ascending over the head dimension), its max, the
//! exp-sum in the warp order ([`warp_sum`]), then the weighted value sum (ascending over keys).
//! No atomics; the order is fixed. [`tf32`]: the same SDPA with both products as 3xTF32 on
//! tensor cores (`GemmPath::InvariantTf32x3`), its twin a model within a derived bound of
//! [`attention`]. [`f16`]: the half path's SDPA (`GemmPath::Half`) on tensor cores, one f16
//! `mma` per k step with the probabilities rounded to binary16 before `P·V` (FlashAttention-
//! style, as the vendor's fp16 mode), its twin a model within a derived bound of [`attention`].
#![allow(clippy::too_many_arguments)]

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::math::{WARP, exp_f32, warp_sum};
use crate::twin::{check_warp_block, invalid, kdef, rd, wr};

use Param::{F32, I64, Ptr};

pub mod f16;
pub mod tf32;

pub static SOURCE: CudaSource = CudaSource {
    name: "attention",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/attention_body.cuh"),
        include_str!("../cuda/attention.cu")
    ),
};

kdef!(
    SDPA,
    "attention",
    "sdpa",
    [Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, F32],
    host_sdpa,
    "`(out, q, kv, batch, heads, tq, tk, d, cap, scale)`: unmasked SDPA ([`attention`]), `q`/`out` `[batch, tq, heads·d]`, keys/values frames `0..tk` of a `[batch, heads, cap, 2d]` cache, `d ≤ 128`; one warp per query row, launch with [`attention_dims`]."
);
kdef!(
    REL_POS,
    "attention",
    "rel_pos",
    [Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64],
    host_rel_pos,
    "`(out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, tk, d, cap)`: the conformer's relative-position attention ([`rel_pos_attention`]) of `batch` independent entries (sessions) at once: `q`/`out` `[batch, tq, heads·d]`, keys/values a `[batch, heads, cap, 2d]` cache, the projected positions `p` and the biases shared; `d ≤ 128`; one warp per (entry, head, query row), launch with [`rel_pos_dims`] (`outer` = batch · heads; [`attention_dims`]'s smaller shared memory reads the positions from global memory, the same bits)."
);

pub static KERNELS: &[&crate::KernelDef] = &[&SDPA, &REL_POS];

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

/// Launch shape of [`SDPA`] and [`REL_POS`] (`outer` = batch · heads) with
/// `warps` query rows per block (`1..=8`; see [`attention_dims`]).
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

/// Dynamic shared memory a launch above [`MAX_SHARED_BYTES`] may take (resident SDPA, `sdpa_dims`;
/// staged relative-position attention, [`rel_pos_dims`]): below the opt-in limit of every GPU
/// since sm_80 (A100: 163 KB, H100/H200: 227 KB). The CUDA backend raises a kernel's dynamic
/// shared memory limit to what a launch asks for.
pub const RESIDENT_MAX_SHARED_BYTES: usize = 160 * 1024;

/// Dynamic shared memory of a resident SDPA block (see `kernels/cuda/attention.cu`): queries
/// `2·warps·d`, scores `warps·tk`, and every key (then value) frame, `tk` rounded up to a whole
/// tile, `(d + 1)` floats each.
pub const fn sdpa_resident_bytes(warps: usize, tk: usize, d: usize) -> usize {
    (2 * warps * d + warps * tk + tk.div_ceil(ATTN_TILE) * ATTN_TILE * (d + 1)) * 4
}

/// Launch shape of [`SDPA`]: [`attention_dims`], with the shared memory raised to hold every key
/// frame at once where that stays within [`RESIDENT_MAX_SHARED_BYTES`] (the kernel then stages
/// keys and values in one pass each instead of one 64-frame tile at a time). The result is the
/// same bits either way: each row's products and sums are its own warp's, in the same order.
pub fn sdpa_dims(outer: usize, tq: usize, tk: usize, d: usize) -> Result<LaunchDims, KernelError> {
    let mut dims = attention_dims(outer, tq, tk, d)?;
    let warps = dims.block.0 as usize / WARP;
    let resident = sdpa_resident_bytes(warps, tk, d);
    if resident <= RESIDENT_MAX_SHARED_BYTES {
        dims.shared_bytes = resident as u32;
    }
    Ok(dims)
}

/// Dynamic shared memory of a staged [`REL_POS`] block (see `kernels/cuda/attention.cu`):
/// [`attention_shared_bytes`] and the position rows one key tile pairs with, `warps + 63` rows
/// (query rows `i0..i0 + warps` against keys `j0..j0 + 64` read rows `tq − i0 − warps + j0` on)
/// of `d + 1` floats.
pub const fn rel_pos_staged_bytes(warps: usize, tk: usize, d: usize) -> usize {
    attention_shared_bytes(warps, tk, d) + (warps + ATTN_TILE - 1) * (d + 1) * 4
}

/// Most [`rel_pos_staged_bytes`] of a launch whose [`attention_shared_bytes`] is within
/// [`MAX_SHARED_BYTES`]: 48 KB and 71 rows of 129 floats (8 rows per block, d = 128), under
/// [`RESIDENT_MAX_SHARED_BYTES`], so every [`attention_dims`] shape can be staged.
pub const REL_POS_MAX_SHARED_BYTES: usize =
    MAX_SHARED_BYTES + (ATTN_WARPS + ATTN_TILE - 1) * (MAX_HEAD_DIM + 1) * 4;
const _: () = assert!(REL_POS_MAX_SHARED_BYTES <= RESIDENT_MAX_SHARED_BYTES);

/// `dims` (an [`attention_dims`] shape) with the shared memory raised to
/// [`rel_pos_staged_bytes`] (at most [`REL_POS_MAX_SHARED_BYTES`]).
fn rel_pos_staged(mut dims: LaunchDims, tk: usize, d: usize) -> LaunchDims {
    dims.shared_bytes = rel_pos_staged_bytes(dims.block.0 as usize / WARP, tk, d) as u32;
    dims
}

/// Launch shape of [`REL_POS`]: [`attention_dims`], with the shared memory raised to stage the
/// position rows of each key tile beside it ([`rel_pos_staged_bytes`]: coalesced loads shared by
/// the block's query rows, instead of each lane reading its own row from global memory, as the
/// kernel does when a launch gives only [`attention_shared_bytes`]). The result is the same bits
/// either way: each score takes the same products and sums in the same order, only the memory
/// its position row is read from differs.
pub fn rel_pos_dims(
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<LaunchDims, KernelError> {
    Ok(rel_pos_staged(attention_dims(outer, tq, tk, d)?, tk, d))
}

/// [`rel_pos_dims`] with `warps` query rows per block (`1..=8`, as [`attention_dims_with`]).
pub fn rel_pos_dims_with(
    warps: usize,
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<LaunchDims, KernelError> {
    Ok(rel_pos_staged(
        attention_dims_with(warps, outer, tq, tk, d)?,
        tk,
        d,
    ))
}

/// Checks an attention launch against what the kernel needs (it traps otherwise).
pub(crate) fn check_attention_launch(
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

/// Strided view of a 4-D `(batch, head, time, d)` tensor with `d` contiguous:
/// element `(b, h, t, j)` lives at `offset + b·batch + h·head + t·time + j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnLayout {
    pub offset: usize,
    pub batch: usize,
    pub head: usize,
    pub time: usize,
}

impl AttnLayout {
    /// `[batch, time, heads·d]` row-major (the output of a Linear, split into heads).
    pub fn rows(time: usize, heads: usize, d: usize) -> Self {
        Self {
            offset: 0,
            batch: time * heads * d,
            head: d,
            time: heads * d,
        }
    }

    /// The vendor cache layout `[batch, heads, time, 2·d]`: keys in `[0, d)`, values in `[d, 2d)`
    /// of the last axis (`value = true` selects the values).
    pub fn kv_cache(heads: usize, time: usize, d: usize, value: bool) -> Self {
        Self {
            offset: if value { d } else { 0 },
            batch: heads * time * 2 * d,
            head: time * 2 * d,
            time: 2 * d,
        }
    }

    #[inline]
    pub fn at(&self, b: usize, h: usize, t: usize) -> usize {
        self.offset + b * self.batch + h * self.head + t * self.time
    }
}

#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        acc += x * y;
    }
    acc
}

/// `F.scaled_dot_product_attention(q, k, v)` without mask (the DiT estimator, all queries see
/// all keys): `out[b,h,i,:] = Σ_j e_ij · v[b,h,j,:] / Σ_j e_ij`, `e_ij = exp(s_ij − max_j s_ij)`,
/// `s_ij = scale · q[b,h,i,:]·k[b,h,j,:]` (flash-attention order: normalise at the end).
pub fn attention(
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    scale: f32,
    q: &[f32],
    ql: AttnLayout,
    k: &[f32],
    kl: AttnLayout,
    v: &[f32],
    vl: AttnLayout,
    out: &mut [f32],
    ol: AttnLayout,
) {
    let mut s = vec![0.0f32; tk];
    let mut acc = vec![0.0f32; d];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..tq {
                let qi = &q[ql.at(b, h, i)..ql.at(b, h, i) + d];
                let mut m = f32::NEG_INFINITY;
                for (j, sj) in s.iter_mut().enumerate() {
                    let kj = &k[kl.at(b, h, j)..kl.at(b, h, j) + d];
                    *sj = scale * dot(qi, kj);
                    m = m.max(*sj);
                }
                for sj in s.iter_mut() {
                    *sj = exp_f32(*sj - m);
                }
                let sum = warp_sum(tk, |j| s[j]);
                acc.fill(0.0);
                for (j, &e) in s.iter().enumerate() {
                    let vj = &v[vl.at(b, h, j)..vl.at(b, h, j) + d];
                    for (a, x) in acc.iter_mut().zip(vj) {
                        *a += e * x;
                    }
                }
                let o = &mut out[ol.at(b, h, i)..ol.at(b, h, i) + d];
                for (oo, a) in o.iter_mut().zip(&acc) {
                    *oo = a / sum;
                }
            }
        }
    }
}

/// Relative-position self-attention of the conformer (`RelPositionMultiHeadedAttention`, batch 1,
/// no mask, Transformer-XL scores with ESPnet's `rel_shift`):
///
/// `s_ij = ((q_i + u)·k_j + (q_i + w)·p_{tq−1−i+j}) / √d`, `attn = softmax_j(s)`,
/// `out_i = Σ_j attn_ij · v_j`,
///
/// with `q` `[tq, heads·d]` (row stride `ldq`), `u = pos_bias_u`, `w = pos_bias_v` `[heads, d]`,
/// keys/values in the vendor cache layout `[heads, cap, 2d]` of which frames `0..tk` are used
/// (append-ordered: the query `i` is the key `tk − tq + i`), `p = linear_pos(pos_emb)` `[2tk − 1, heads·d]` (row `r` ↔ relative
/// position `tk − 1 − r`), `out` `[tq, heads·d]`. The softmax multiplies by `1 / Σ` (torch's
/// CPU softmax).
pub fn rel_pos_attention(
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    cap: usize,
    q: &[f32],
    ldq: usize,
    pos_bias_u: &[f32],
    pos_bias_v: &[f32],
    kv: &[f32],
    p: &[f32],
    out: &mut [f32],
    ldo: usize,
) {
    assert!(tq <= tk && tq > 0 && tk <= cap);
    let hd = heads * d;
    let kl = AttnLayout::kv_cache(heads, cap, d, false);
    let vl = AttnLayout::kv_cache(heads, cap, d, true);
    let denom = (d as f64).sqrt() as f32;
    let mut qu = vec![0.0f32; d];
    let mut qv = vec![0.0f32; d];
    let mut s = vec![0.0f32; tk];
    let mut acc = vec![0.0f32; d];
    for h in 0..heads {
        let u = &pos_bias_u[h * d..(h + 1) * d];
        let w = &pos_bias_v[h * d..(h + 1) * d];
        for i in 0..tq {
            let qi = &q[i * ldq + h * d..i * ldq + (h + 1) * d];
            for c in 0..d {
                qu[c] = qi[c] + u[c];
                qv[c] = qi[c] + w[c];
            }
            let mut m = f32::NEG_INFINITY;
            for (j, sj) in s.iter_mut().enumerate() {
                let kj = &kv[kl.at(0, h, j)..kl.at(0, h, j) + d];
                let r = tq - 1 - i + j;
                let pr = &p[r * hd + h * d..r * hd + (h + 1) * d];
                *sj = (dot(&qu, kj) + dot(&qv, pr)) / denom;
                m = m.max(*sj);
            }
            for sj in s.iter_mut() {
                *sj = exp_f32(*sj - m);
            }
            let sum = warp_sum(tk, |j| s[j]);
            let inv = 1.0 / sum;
            acc.fill(0.0);
            for (j, sj) in s.iter().enumerate() {
                let pj = sj * inv;
                let vj = &kv[vl.at(0, h, j)..vl.at(0, h, j) + d];
                for (a, x) in acc.iter_mut().zip(vj) {
                    *a += pj * x;
                }
            }
            out[i * ldo + h * d..i * ldo + (h + 1) * d].copy_from_slice(&acc);
        }
    }
}

/// The shape arguments every SDPA entry shares (`attention.sdpa`, [`tf32`]'s and [`f16`]'s, slots
/// 3 to 9): `(batch, heads, tq, tk, d, cap, scale)`, with `tk` checked inside `1..=cap`.
pub(crate) type SdpaShape = (usize, usize, usize, usize, usize, usize, f32);

/// Reads [`SdpaShape`] from an SDPA kernel's arguments; `name` labels the refusal.
pub(crate) fn sdpa_shape(name: &str, a: &[Arg]) -> Result<SdpaShape, KernelError> {
    let shape = (
        a.usize(3)?,
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
        a.f32(9)?,
    );
    let (tk, cap) = (shape.3, shape.5);
    if tk > cap || tk == 0 {
        return Err(invalid(format!("{name}: tk outside 1..=cap")));
    }
    Ok(shape)
}

unsafe fn host_sdpa(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (batch, heads, tq, tk, d, cap, scale) = sdpa_shape("attention.sdpa", a)?;
    check_attention_launch("attention.sdpa", dims, tk, d)?;
    let n = batch * tq * heads * d;
    // SAFETY: HostFn contract.
    let (out, q, kv) = unsafe {
        (
            wr(a.ptr(0)?, n)?,
            rd(a.ptr(1)?, n)?,
            rd(a.ptr(2)?, batch * heads * cap * 2 * d)?,
        )
    };
    let rows = AttnLayout::rows(tq, heads, d);
    let kl = AttnLayout::kv_cache(heads, cap, d, false);
    let vl = AttnLayout::kv_cache(heads, cap, d, true);
    attention(
        batch, heads, tq, tk, d, scale, q, rows, kv, kl, kv, vl, out, rows,
    );
    Ok(())
}

unsafe fn host_rel_pos(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (batch, heads, tq, tk, d, cap) = (
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
        a.usize(9)?,
        a.usize(10)?,
        a.usize(11)?,
    );
    if tq == 0 || tq > tk || tk > cap {
        return Err(invalid("attention.rel_pos: need 0 < tq <= tk <= cap"));
    }
    check_attention_launch("attention.rel_pos", dims, tk, d)?;
    let hd = heads * d;
    let entry = heads * cap * 2 * d;
    // SAFETY: HostFn contract.
    let (out, q, u, w, kv, p) = unsafe {
        (
            wr(a.ptr(0)?, batch * tq * hd)?,
            rd(a.ptr(1)?, batch * tq * hd)?,
            rd(a.ptr(2)?, hd)?,
            rd(a.ptr(3)?, hd)?,
            rd(a.ptr(4)?, batch * entry)?,
            rd(a.ptr(5)?, (2 * tk - 1) * hd)?,
        )
    };
    // each entry alone: its rows of q and out, its cache rows, the shared positions and biases
    for b in 0..batch {
        let rows = b * tq * hd..(b + 1) * tq * hd;
        rel_pos_attention(
            heads,
            tq,
            tk,
            d,
            cap,
            &q[rows.clone()],
            hd,
            u,
            w,
            &kv[b * entry..(b + 1) * entry],
            p,
            &mut out[rows],
            hd,
        );
    }
    Ok(())
}

/// What the attention twins' tests share (this module's, [`f16`]'s and [`tf32`]'s).
#[cfg(test)]
pub(crate) mod test_data {
    /// `n` deterministic values in about [-1, 1) (xorshift32 from `seed`).
    pub(crate) fn data(seed: u32, n: usize) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    /// The largest ratio of `|got − want|` to `lim(t, vmax, got, want)` over one head's outputs
    /// `[tq, d]` (above 1: outside the bound; infinite where a ratio is NaN), `t` the row's
    /// largest `Σ_c |q·k|` over the keys and `vmax` the column's largest `|v|` (in f64), `kv`
    /// packed `[tk, 2d]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn worst_ratio(
        got: &[f32],
        want: &[f32],
        q: &[f32],
        kv: &[f32],
        tq: usize,
        tk: usize,
        d: usize,
        lim: impl Fn(f64, f64, f32, f32) -> f64,
    ) -> f64 {
        let mut worst = 0.0f64;
        for i in 0..tq {
            let t = (0..tk)
                .map(|j| {
                    (0..d)
                        .map(|c| (q[i * d + c] as f64 * kv[j * 2 * d + c] as f64).abs())
                        .sum::<f64>()
                })
                .fold(0.0, f64::max);
            for c in 0..d {
                let vmax = (0..tk)
                    .map(|j| (kv[j * 2 * d + d + c] as f64).abs())
                    .fold(0.0, f64::max);
                let (a, b) = (got[i * d + c], want[i * d + c]);
                let r = (a as f64 - b as f64).abs() / lim(t, vmax, a, b);
                // f64::max would drop a NaN: a non-finite output is outside every bound
                worst = if r.is_nan() {
                    f64::INFINITY
                } else {
                    worst.max(r)
                };
            }
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::test_data::{data, worst_ratio};

    #[test]
    fn worst_ratio_is_infinite_on_a_non_finite_output() {
        let (q, kv) = ([1.0f32], [1.0f32, 1.0]);
        let r = |got: f32| worst_ratio(&[got], &[0.5], &q, &kv, 1, 1, 1, |_, _, _, _| 1.0);
        assert_eq!(r(0.75), 0.25);
        assert_eq!(r(f32::NAN), f64::INFINITY);
        assert_eq!(r(f32::INFINITY), f64::INFINITY);
    }
    use super::*;

    /// Naive reference: explicit score matrix, softmax, matmul.
    fn naive(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        tq: usize,
        tk: usize,
        d: usize,
        scale: f32,
    ) -> Vec<f32> {
        let mut out = vec![0.0; tq * d];
        for i in 0..tq {
            let s: Vec<f64> = (0..tk)
                .map(|j| {
                    (0..d)
                        .map(|c| (q[i * d + c] * k[j * d + c]) as f64)
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for c in 0..d {
                out[i * d + c] =
                    (0..tk).map(|j| e[j] / z * v[j * d + c] as f64).sum::<f64>() as f32;
            }
        }
        out
    }

    #[test]
    fn sdpa_matches_naive() {
        let (tq, tk, d) = (3, 5, 4);
        let q = data(1, tq * d);
        let k = data(2, tk * d);
        let v = data(3, tk * d);
        let mut out = vec![0.0; tq * d];
        let l = AttnLayout::rows;
        attention(
            1,
            1,
            tq,
            tk,
            d,
            0.5,
            &q,
            l(tq, 1, d),
            &k,
            l(tk, 1, d),
            &v,
            l(tk, 1, d),
            &mut out,
            l(tq, 1, d),
        );
        let want = naive(&q, &k, &v, tq, tk, d, 0.5);
        for (a, b) in out.iter().zip(&want) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn rel_pos_attention_with_zero_pos_is_plain_attention() {
        // With p = 0 and u = 0 the rel-pos scores reduce to q·k / √d.
        let (h, tq, tk, d) = (2, 2, 4, 4);
        let q = data(4, tq * h * d);
        let kvh: Vec<Vec<f32>> = (0..h).map(|i| data(10 + i as u32, tk * 2 * d)).collect();
        let kv: Vec<f32> = kvh.concat();
        let p = vec![0.0; (2 * tk - 1) * h * d];
        let u = vec![0.0; h * d];
        let w = data(7, h * d);
        let mut out = vec![0.0; tq * h * d];
        rel_pos_attention(
            h,
            tq,
            tk,
            d,
            tk,
            &q,
            h * d,
            &u,
            &w,
            &kv,
            &p,
            &mut out,
            h * d,
        );
        for hh in 0..h {
            let qh: Vec<f32> = (0..tq)
                .flat_map(|i| q[i * h * d + hh * d..i * h * d + (hh + 1) * d].to_vec())
                .collect();
            let kh: Vec<f32> = (0..tk)
                .flat_map(|j| kvh[hh][j * 2 * d..j * 2 * d + d].to_vec())
                .collect();
            let vh: Vec<f32> = (0..tk)
                .flat_map(|j| kvh[hh][j * 2 * d + d..(j + 1) * 2 * d].to_vec())
                .collect();
            let want = naive(&qh, &kh, &vh, tq, tk, d, 1.0 / 2.0);
            for i in 0..tq {
                for c in 0..d {
                    let a = out[i * h * d + hh * d + c];
                    assert!((a - want[i * d + c]).abs() < 1e-6);
                }
            }
        }
    }

    #[test]
    fn rel_shift_index_is_relative_position() {
        // One head, d = 1, q = 0, k = 0, u = w = 1: s_ij = p[tq-1-i+j] / 1. Put a spike at the
        // row of relative position (query_abs - key_abs) = 1 and check every query attends most to
        // its predecessor.
        let (tq, tk) = (2, 4);
        let q = vec![0.0; tq];
        let kv = {
            let mut kv = vec![0.0; tk * 2];
            for j in 0..tk {
                kv[2 * j + 1] = j as f32; // value = key index
            }
            kv
        };
        let mut p = vec![0.0; 2 * tk - 1];
        p[tk - 1 - 1] = 30.0; // row r ↔ relative position tk-1-r = 1
        let mut out = vec![0.0; tq];
        rel_pos_attention(
            1,
            tq,
            tk,
            1,
            tk,
            &q,
            1,
            &[1.0],
            &[1.0],
            &kv,
            &p,
            &mut out,
            1,
        );
        // query i has absolute position tk - tq + i; its predecessor is key tk - tq + i - 1
        for (i, o) in out.iter().enumerate() {
            assert!((o - (tk - tq + i - 1) as f32).abs() < 1e-6, "{i}: {o}");
        }
    }
}
