//! The f16 scaled dot-product attention on tensor cores, `attention.sdpa_f16` (binary16 cache)
//! and `attention.sdpa_f16_kv32` (an f32 cache holding binary16 values), in
//! `kernels/cuda/attention_f16.cu`: the SDPA of the half path (`GemmPath::Half`, the vendor's
//! fp16 mode, which runs FlashAttention-style SDPA on f16 operands). The op of [`super::SDPA`]
//! (same layouts, unmasked softmax over frames `0..tk` of the packed cache) with both products as
//! one `mma.m16n8k16` (f16 operands, f32 accumulator) per k step, and the unnormalized
//! probabilities rounded to binary16 before the `P·V` product, as flash attention does.
//!
//! # The order of one query row (it depends on `d` and `tk` alone)
//!
//! 0. The operands are rounded to binary16 ([`rn16`]): exact for what the half path holds (`q` is
//!    `rn16(LN_q(q))`, the cache `rn16(LN_k(k)) ‖ v16`), and it names the `mma`'s operand.
//! 1. Every score `s_j = scale · dot16(q_i, k_j)` over the `d` columns, `dot16` the order of the
//!    half linear (`gemm.linear_f16_*`, [`crate::gemm::f16`]): k padded with zeros to a multiple
//!    of 16; k step `s` to chain `s mod 4`; one `mma.m16n8k16` per step; the chains added as
//!    `(p0 + p1) + (p2 + p3)`; then one float multiply by `scale`.
//! 2. `m = max_j s_j`, `e_j = exp_f32(s_j − m)`, `Σ = Σ e_j` in the warp order
//!    ([`crate::math::warp_sum`]): [`super::attention`]'s softmax.
//! 3. `P_j = rn16(e_j)`, every output column `o_c = dot16(P, v_c) / Σ` over the `tk` keys (the
//!    keys as the k dimension, padded and chained as in 1).
//!
//! Nothing there depends on the batch, the heads, the query tile or the grid, and an `mma`
//! computes each output element from its own row of A and its own accumulator: one (batch,
//! head, row)'s bits never depend on the rows sharing the launch (on CUDA; the test
//! `batch_invariant_sdpa_f16mma` checks it on the GPU). Both kernels compute the same bits where
//! the f32 cache holds the binary16 cache's values (step 0), so the half path's SDPA does not
//! depend on how the contract stores its cache.
//!
//! # Two tilings, one set of bits
//!
//! A CTA of 8 warps takes 16 or 64 query rows of one (batch, head) ([`Tiling`]; [`dims`] picks
//! by shape). The query fragments stay in registers; keys, then values, stream once per CTA
//! through a three-tile ring of 64 binary16 frames. At one session's batch the 16-row tiling's
//! four times as many CTAs fill the device; at many sessions the 64-row tiling stages a head's
//! keys and values once per 64 queries instead of once per 16. Which warp computes a score or an
//! output changes, its `mma` steps, chains and order do not: the bits are the same (on CUDA;
//! `runtime/tests/attention_f16.rs` compares them).
//!
//! # The host twin is a model, not the kernel's bits
//!
//! As for the half linear, the `mma`'s internal accumulation is not specified: the twin
//! ([`attention`]) follows steps 0–3 with the half linear's model of an `mma` (its sixteen exact
//! products summed in ascending k in float, then added to the accumulator); it and the kernel
//! are checked against the fp32 twin ([`super::attention`]) over the same binary16 values within
//! [`bound`].
//!
//! # The bound against the fp32 twin
//!
//! With `u = 2⁻²⁴`, for one output `(row, c)`: `T = max_j Σ_c |q_c·k_jc|` (the row's largest
//! score mass before the scale), `V = max_j |v_jc|` (the column's largest value), the chain
//! lengths `n_d = ⌈⌈d/16⌉/4⌉` and `n_k = ⌈⌈tk/16⌉/4⌉` (`mma`s per chain), `w = ⌈tk/32⌉ + 5`
//! (the depth of the warp sum), and `D(n) = 36.4·(n + 1) + 2.1` (an f16 dot of chain length `n`
//! against its exact value, over the sum of its `|products|`: each `mma` adds seventeen terms
//! aligned to the largest and truncated, at most `36u` of `|c| + Σ|p|`, the chains' `Σ(|c| +
//! Σ|p|)` at most `1.01·(n + 1)` times that sum, and the two-level tree `2.03u`; the twin's model
//! errs less, `16.01u` per `mma`; see [`crate::gemm::f16`]):
//!
//! * **Scores**: both sides' scores differ by at most `Δ = (D(n_d) + 1.01·d + 2.01)·u·scale·T`:
//!   the f16 dot, the fp32 twin's sequential dot (`γ_d ≤ 1.01·d·u`) and one rounding of
//!   `scale · dot` on each side.
//! * **Numerators**: as for the 3xTF32 attention ([`super::tf32`]): every numerator of this
//!   attention is the fp32 twin's times `1 + r_j`, `|r_j| ≤ ρ = e^λ − 1`,
//!   `λ = 2Δ + 4.02·u·scale·T + 4.01·u`; numerators below `2⁻¹²⁶` are charged absolutely,
//!   `2·tk·2⁻¹²⁶·V`. The normalized weights then move the output by at most `2ρ/(1 − ρ)·V`.
//! * **P rounding**: `|rn16(e) − e| ≤ 2⁻¹¹·e`, or `≤ 2⁻²⁵` below binary16's normal range
//!   (`e < 2⁻¹⁴`); the row's largest numerator is `exp(0) = 1`, so `Σ ≥ 1` and the output moves
//!   by at most `(1.01·2⁻¹¹ + tk·2⁻²⁵)·V`.
//! * **Each side's own arithmetic** on its weights: the f16 dot over the keys
//!   (`D(n_k)·u·Σ P|v|`), the fp32 twin's sequential dot (`1.01·tk·u·Σ e|v|`), both warp sums
//!   (`γ_w = 1.01·w·u` relative each, positive terms), all over the sum (a factor below `1.01`),
//!   and the final division (`u·(|ô| + |o|)`).
//!
//! In all: `|ô − o| ≤ 2ρ/(1 − ρ)·V + (1.01·2⁻¹¹ + tk·2⁻²⁵)·V + 1.01·((D(n_k) + 1.01·tk)·u +
//! 2γ_w)·V + u·(|ô| + |o|) + 2·tk·2⁻¹²⁶·V` ([`bound`]). The `P` rounding dominates on ordinary
//! data (half a binary16 ulp of the weights); the bound is not vacuous: an attention that drops
//! one key step, or rounds its scores to binary16, lands outside it (tests).

use half::f16;

use crate::abi::{Arg, Args, KernelError, LaunchDims};
use crate::gemm::f16::{STEP, dot_rounded, rn16};
use crate::math::{exp_f32, warp_sum};
use crate::twin::{invalid, kdef, rd, wr};

use super::{MAX_HEAD_DIM, RESIDENT_MAX_SHARED_BYTES};
use crate::CudaSource;
use crate::abi::Param::{F32, I64, Ptr};

/// The NVRTC module of [`SDPA_F16`] and [`SDPA_F16_KV32`]: `common.cuh`, then
/// `attention_f16.cu` (a module of its own, as the 3xTF32 attention's).
pub static SOURCE: CudaSource = CudaSource {
    name: "attention/sdpa_f16",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/attention_f16.cu")
    ),
};

/// Frames per staged key (value) tile.
pub const KEYS: usize = 64;
/// Warps per CTA (each score and each output is one warp's: the count changes no order).
pub const WARPS: usize = 8;
/// Tiles in the staging ring.
pub const STAGES: usize = 3;
/// Threads per CTA.
pub const THREADS: u32 = 32 * WARPS as u32;
/// CTAs of the 64-row tiling from which [`dims`] takes it (as the 3xTF32 attention: below, the
/// 16-row tiling's four times as many CTAs fill more of the device's SMs).
pub const ROWS64_MIN_BLOCKS: usize = 96;

/// How the kernel tiles a (batch, head)'s queries (its last argument, `rows`); both give the
/// same bits, so [`dims`] picks by shape alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiling {
    /// One CTA per 16 query rows (one `m16` tile; every warp on one key `n8` tile of each key
    /// tile and one column `n8` tile of the output).
    Rows16,
    /// One CTA per 64 query rows (four `m16` tiles; two warps per tile, each on half the keys of
    /// each key tile and half the columns).
    Rows64,
}

impl Tiling {
    /// Query rows per CTA: the kernel's `rows` argument.
    pub const fn rows(self) -> usize {
        match self {
            Tiling::Rows16 => 16,
            Tiling::Rows64 => 64,
        }
    }

    fn of_rows(rows: usize) -> Option<Tiling> {
        match rows {
            16 => Some(Tiling::Rows16),
            64 => Some(Tiling::Rows64),
            _ => None,
        }
    }
}

kdef!(
    SDPA_F16,
    "attention",
    "sdpa_f16",
    [Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, F32, I64],
    host_sdpa_f16,
    "`(out, q, kv, batch, heads, tq, tk, d, cap, scale, rows)`: the half path's SDPA over a binary16 cache ([`attention`]: the order; [`bound`]: its distance from the fp32 twin): `q`/`out` `[batch, tq, heads·d]` f32, keys/values frames `0..tk` of a `[batch, heads, cap, 2d]` binary16 cache, `d ≤ 128`; one CTA of 8 warps per (batch, head, `rows` = 16 or 64 query rows: [`Tiling`]), launch with [`dims`]."
);
kdef!(
    SDPA_F16_KV32,
    "attention",
    "sdpa_f16_kv32",
    [Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, F32, I64],
    host_sdpa_f16_kv32,
    "`(out, q, kv, batch, heads, tq, tk, d, cap, scale, rows)`: [`SDPA_F16`] over an f32 cache (each value rounded to binary16 as staged: the same bits where it holds binary16 values, as the half path's f32 cache does); launch with [`dims`]."
);

/// Most carries one [`SDPA_F16_SPLIT`] launch reads the history from (its pointer arguments).
pub const MAX_HISTORIES: usize = 32;

/// [`SDPA_F16`]'s parameters, then `(tn, shift, group, hcap, nhist)` and [`MAX_HISTORIES`]
/// carry addresses.
const SPLIT_PARAMS: [crate::abi::Param; 16 + MAX_HISTORIES] = {
    let mut p = [Ptr; 16 + MAX_HISTORIES];
    let head = [
        Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, F32, I64, I64, I64, I64, I64, I64,
    ];
    let mut i = 0;
    while i < head.len() {
        p[i] = head[i];
        i += 1;
    }
    p
};

/// `(out, q, kv, batch, heads, tq, tk, d, cap, scale, rows, tn, shift, group, hcap, nhist,
/// h0, …, h31)`: [`SDPA_F16`] over keys split between the cache and the sessions' carries.
/// Frames `0..tn` (`tn ≤ cap`) come from the binary16 cache `kv`, as `SDPA_F16` reads them;
/// frame `j ≥ tn` of batch row `b` comes from frame `j − shift` of row `(b mod group, head)` of
/// the packed `[group, heads, hcap, 2d]` binary16 block at `h<b / group>` (`shift ≤ tn`,
/// `tk − shift ≤ hcap`, `nhist · group ≥ batch`, `nhist ≤` [`MAX_HISTORIES`]; the unused
/// address slots repeat a used one). Every key and value lands in the same place of the same
/// tile as `SDPA_F16` stages it from a cache holding all `tk` frames, so the two give the same
/// bits: a step reads each session's history where its carry holds it instead of copying it
/// into the workspace first. One CTA per (batch row, head, query tile), which picks its
/// history's address before the body runs (a grid of fewer is refused); launch with [`dims`].
pub static SDPA_F16_SPLIT: crate::KernelDef = crate::KernelDef {
    name: "attention.sdpa_f16_split",
    source: &SOURCE,
    entry: "attention_sdpa_f16_split",
    params: &SPLIT_PARAMS,
    host: host_sdpa_f16_split,
};

/// The kernels of this module (their own list and module, as the 3xTF32 attention's: the twin
/// is a model, not bit-equal).
pub static KERNELS: &[&crate::KernelDef] = &[&SDPA_F16, &SDPA_F16_KV32, &SDPA_F16_SPLIT];

/// The head dimension the kernel computes with: `d` rounded up to 32, 64 or 128 (the columns
/// past `d` are zeros and their k steps are skipped).
pub const fn padded_dim(d: usize) -> usize {
    if d <= 32 {
        32
    } else if d <= 64 {
        64
    } else {
        128
    }
}

/// Floats per stored score row (`dcc_ha_ls`): the values' k steps end at `tk` rounded up to 16;
/// that rounded up to 32, plus 8 (conflict-free 64-bit accesses of a fragment's rows).
pub const fn score_stride(tk: usize) -> usize {
    (tk.div_ceil(STEP) * STEP).div_ceil(32) * 32 + 8
}

/// Dynamic shared memory of a launch (`dcc_ha_smem_bytes`): the ring (`STAGES · 64 · (DP + 8)`
/// halves), the score rows of `min(tq, rows)` queries ([`score_stride`] floats each; the rows of
/// a tile past `tq` are not stored) and the row sums (`rows` floats).
pub const fn shared_bytes(tiling: Tiling, tq: usize, tk: usize, d: usize) -> usize {
    let rows = tiling.rows();
    let r = if tq < rows { tq } else { rows };
    STAGES * KEYS * (padded_dim(d) + 8) * 2 + (r * score_stride(tk) + rows) * 4
}

/// The launch of `tiling` over `outer` = batch · heads slices of `tq` queries: one CTA of
/// [`THREADS`] per slice and 16 (64) query rows with [`shared_bytes`]; an error where `d` is
/// outside `1..=128`, `tk` is 0 or the shared memory would pass [`RESIDENT_MAX_SHARED_BYTES`]
/// (the score rows: about 2,400 keys in 16 rows at `d = 64`, about 600 in 64 rows at 56
/// queries).
pub fn dims_with(
    tiling: Tiling,
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<LaunchDims, KernelError> {
    if d == 0 || d > MAX_HEAD_DIM || tk == 0 {
        return Err(invalid(format!(
            "attention.sdpa_f16: head dim {d} (1..={MAX_HEAD_DIM}) or {tk} keys"
        )));
    }
    let shared = shared_bytes(tiling, tq, tk, d);
    if shared > RESIDENT_MAX_SHARED_BYTES {
        return Err(invalid(format!(
            "attention.sdpa_f16: {tk} keys of dim {d} need {shared} B of shared memory in {tiling:?} (max {RESIDENT_MAX_SHARED_BYTES})"
        )));
    }
    let blocks = outer
        .saturating_mul(tq.div_ceil(tiling.rows()))
        .clamp(1, i32::MAX as usize);
    Ok(LaunchDims {
        grid: (blocks as u32, 1, 1),
        block: (THREADS, 1, 1),
        shared_bytes: shared as u32,
    })
}

/// The launch the half path takes and its tiling (the kernel's `rows` argument):
/// [`Tiling::Rows64`] where it gives at least [`ROWS64_MIN_BLOCKS`] CTAs (many sessions
/// batched) and fits, else [`Tiling::Rows16`]; errors as [`dims_with`]'s 16-row ones. The bits
/// are the same either way.
pub fn dims(
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<(LaunchDims, Tiling), KernelError> {
    if outer.saturating_mul(tq.div_ceil(64)) >= ROWS64_MIN_BLOCKS
        && let Ok(wide) = dims_with(Tiling::Rows64, outer, tq, tk, d)
    {
        return Ok((wide, Tiling::Rows64));
    }
    Ok((dims_with(Tiling::Rows16, outer, tq, tk, d)?, Tiling::Rows16))
}

/// The twin's body: the module docs' order for `q`, `out` `[batch, tq, heads·d]` and frames
/// `0..tk` of a packed `[batch, heads, cap, 2d]` cache given as f32 values (a binary16 cache
/// widened: exact), every operand rounded to binary16 ([`rn16`]), both products on the half
/// linear's model of the `mma` ([`crate::gemm::f16::dot`]).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    cap: usize,
    scale: f32,
    q: &[f32],
    kv: &[f32],
    out: &mut [f32],
) {
    let hd = heads * d;
    let mut s = vec![0.0f32; tk];
    let mut qi = vec![0.0f32; d];
    let mut k = vec![0.0f32; tk * d];
    // one head's value columns, contiguous over the keys
    let mut vt = vec![0.0f32; d * tk];
    for b in 0..batch {
        for h in 0..heads {
            let base = (b * heads + h) * cap * 2 * d;
            for j in 0..tk {
                let f = &kv[base + j * 2 * d..][..2 * d];
                for c in 0..d {
                    k[j * d + c] = rn16(f[c]);
                    vt[c * tk + j] = rn16(f[d + c]);
                }
            }
            for i in 0..tq {
                let row = (b * tq + i) * hd + h * d;
                for (x, y) in qi.iter_mut().zip(&q[row..row + d]) {
                    *x = rn16(*y);
                }
                let mut m = f32::NEG_INFINITY;
                for (j, sj) in s.iter_mut().enumerate() {
                    *sj = scale * dot_rounded(&qi, &k[j * d..(j + 1) * d], d);
                    m = m.max(*sj);
                }
                for sj in s.iter_mut() {
                    *sj = exp_f32(*sj - m);
                }
                let sum = warp_sum(tk, |j| s[j]);
                for sj in s.iter_mut() {
                    *sj = rn16(*sj);
                }
                for (c, o) in out[row..row + d].iter_mut().enumerate() {
                    *o = dot_rounded(&s, &vt[c * tk..(c + 1) * tk], tk) / sum;
                }
            }
        }
    }
}

/// The largest `|ô − o|` the module docs' bound allows between this attention's output `ô` and
/// the fp32 twin's `o` (over the same binary16 values) for one output: `t` = the row's
/// `max_j Σ_c |q_c·k_jc|`, `vmax` = the column's `max_j |v_jc|` (exact, or in f64).
pub fn bound(d: usize, tk: usize, scale: f32, t: f64, vmax: f64, y1: f32, y2: f32) -> f64 {
    let u = f64::powi(2.0, -24);
    let dot16 = |k: usize| 36.4 * (k.div_ceil(STEP).div_ceil(4) + 1) as f64 + 2.1;
    let st = f64::from(scale).abs() * t;
    let delta = (dot16(d) + 1.01 * d as f64 + 2.01) * u * st;
    let lambda = 2.0 * delta + 4.02 * u * st + 4.01 * u;
    let rho = lambda.exp_m1();
    let gw = 1.01 * (tk.div_ceil(32) + 5) as f64 * u;
    let weights = 2.0 * rho / (1.0 - rho);
    let p16 = 1.01 * f64::powi(2.0, -11) + tk as f64 * f64::powi(2.0, -25);
    let arith = 1.01 * ((dot16(tk) + 1.01 * tk as f64) * u + 2.0 * gw);
    let tiny = 2.0 * tk as f64 * f64::powi(2.0, -126);
    (weights + p16 + arith + tiny) * vmax + u * (f64::from(y1).abs() + f64::from(y2).abs())
}

/// The launch's arguments after checking them against what the kernel needs (it traps
/// otherwise): `(batch, heads, tq, tk, d, cap, scale)`.
fn check_launch(
    name: &str,
    dims_: &LaunchDims,
    a: &[Arg],
) -> Result<super::SdpaShape, KernelError> {
    let shape = super::sdpa_shape(name, a)?;
    let (_, _, tq, tk, d, _, _) = shape;
    let rows = a.usize(10)?;
    if dims_.block != (THREADS, 1, 1) {
        return Err(invalid(format!(
            "{name}: block {:?}, the kernel needs ({THREADS}, 1, 1)",
            dims_.block
        )));
    }
    if d == 0 || d > MAX_HEAD_DIM {
        return Err(invalid(format!(
            "{name}: head dim {d} outside 1..={MAX_HEAD_DIM}"
        )));
    }
    let Some(tiling) = Tiling::of_rows(rows) else {
        return Err(invalid(format!("{name}: {rows} rows per CTA (16 or 64)")));
    };
    let need = shared_bytes(tiling, tq, tk, d);
    if (dims_.shared_bytes as usize) < need {
        return Err(invalid(format!(
            "{name}: {} B of shared memory given, {need} B needed ({tk} keys, d = {d}, {rows} rows)",
            dims_.shared_bytes
        )));
    }
    Ok(shape)
}

unsafe fn host_sdpa_f16(dims_: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let name = SDPA_F16.name;
    let (batch, heads, tq, tk, d, cap, scale) = check_launch(name, dims_, a)?;
    let n = batch * tq * heads * d;
    let nkv = batch * heads * cap * 2 * d;
    let kv16 = a.ptr(2)?;
    if nkv > 0 && (kv16.is_null() || !kv16.0.is_multiple_of(2)) {
        return Err(invalid(format!(
            "{name}: null or unaligned binary16 cache address"
        )));
    }
    // SAFETY: HostFn contract (out overlaps neither input); f16 is a 2-byte plain value, the
    // cache address 2-aligned (checked).
    let (out, q, kv) = unsafe {
        (
            wr(a.ptr(0)?, n)?,
            rd(a.ptr(1)?, n)?,
            if nkv == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(kv16.0 as *const f16, nkv)
            },
        )
    };
    let kv: Vec<f32> = kv.iter().map(|h| h.to_f32()).collect();
    attention(batch, heads, tq, tk, d, cap, scale, q, &kv, out);
    Ok(())
}

unsafe fn host_sdpa_f16_kv32(dims_: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (batch, heads, tq, tk, d, cap, scale) = check_launch(SDPA_F16_KV32.name, dims_, a)?;
    let n = batch * tq * heads * d;
    // SAFETY: HostFn contract (out overlaps neither input).
    let (out, q, kv) = unsafe {
        (
            wr(a.ptr(0)?, n)?,
            rd(a.ptr(1)?, n)?,
            rd(a.ptr(2)?, batch * heads * cap * 2 * d)?,
        )
    };
    attention(batch, heads, tq, tk, d, cap, scale, q, kv, out);
    Ok(())
}

/// The split launch's history arguments after checking them against what the kernel needs (it
/// traps otherwise): `(tn, shift, group, hcap, histories)`.
fn split_args(
    name: &str,
    (batch, tk, cap): (usize, usize, usize),
    a: &[Arg],
) -> Result<(usize, usize, usize, usize, Vec<crate::DevPtr>), KernelError> {
    let (tn, shift, group, hcap, n) = (
        a.usize(11)?,
        a.usize(12)?,
        a.usize(13)?,
        a.usize(14)?,
        a.usize(15)?,
    );
    let ok = (1..=MAX_HISTORIES).contains(&n)
        && group >= 1
        && n.checked_mul(group).is_some_and(|r| r >= batch)
        && tn <= tk
        && tn <= cap
        && shift <= tn
        && tk - shift <= hcap;
    if !ok {
        return Err(invalid(format!(
            "{name}: {n} histories of {group} rows of {hcap} frames, keys {tn} of {tk} from a cache of {cap}, shift {shift}, {batch} rows"
        )));
    }
    let hist = (0..n)
        .map(|i| a.ptr(16 + i))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((tn, shift, group, hcap, hist))
}

unsafe fn host_sdpa_f16_split(dims_: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let name = SDPA_F16_SPLIT.name;
    let (batch, heads, tq, tk, d, cap) = (
        a.usize(3)?,
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
    );
    let scale = a.f32(9)?;
    if tk == 0 {
        return Err(invalid(format!("{name}: no keys")));
    }
    let (tn, shift, group, hcap, hist) = split_args(name, (batch, tk, cap), a)?;
    // the launch checks of the whole-cache kernels, over a cache of the tk frames gathered below
    check_launch(
        name,
        dims_,
        &[&a[..8], &[Arg::I64(tk as i64)], &a[9..11]].concat(),
    )?;
    // one unit (batch row, head, query tile) per CTA, as the kernel picks each CTA's history
    let units = batch * heads * tq.div_ceil(a.usize(10)?);
    if (dims_.grid.0 as usize) < units {
        return Err(invalid(format!(
            "{name}: {} CTAs for {units} (batch, head, query tile) units: one each",
            dims_.grid.0
        )));
    }
    let half16 = |p: crate::DevPtr, len: usize| -> Result<&[f16], KernelError> {
        if len > 0 && (p.is_null() || !p.0.is_multiple_of(2)) {
            return Err(invalid(format!(
                "{name}: null or unaligned binary16 address {p}"
            )));
        }
        // SAFETY: HostFn contract (the launch's extents lie in live buffers); f16 is a 2-byte
        // plain value, the address 2-aligned (checked).
        Ok(if len == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(p.0 as *const f16, len) }
        })
    };
    let n = batch * tq * heads * d;
    let w = 2 * d;
    let kv = half16(a.ptr(2)?, batch * heads * cap * w)?;
    let carries = hist
        .iter()
        .map(|&p| half16(p, group * heads * hcap * w))
        .collect::<Result<Vec<_>, _>>()?;
    // [batch, heads, tk, 2d]: frames 0..tn of the cache, then the carries' frames j − shift
    let mut all = vec![0.0f32; batch * heads * tk * w];
    for b in 0..batch {
        for h in 0..heads {
            let dst = &mut all[(b * heads + h) * tk * w..][..tk * w];
            let own = &kv[(b * heads + h) * cap * w..];
            let row = (b % group * heads + h) * hcap * w;
            let carry = &carries[b / group][row..];
            for j in 0..tk {
                let f = if j < tn {
                    &own[j * w..][..w]
                } else {
                    &carry[(j - shift) * w..][..w]
                };
                for (x, y) in dst[j * w..][..w].iter_mut().zip(f) {
                    *x = y.to_f32();
                }
            }
        }
    }
    // SAFETY: HostFn contract (out overlaps neither input).
    let (out, q) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, n)?) };
    attention(batch, heads, tq, tk, d, tk, scale, q, &all, out);
    Ok(())
}

#[cfg(test)]
#[path = "f16_tests.rs"]
mod tests;
