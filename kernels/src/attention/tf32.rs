//! The 3xTF32 scaled dot-product attention on tensor cores, `attention.sdpa_tf32x3`
//! (`attention_sdpa_tf32x3` in `kernels/cuda/attention_tf32.cu`): the op of [`super::SDPA`] (same
//! arguments, layouts and unmasked softmax over frames `0..tk` of the packed cache), with the
//! scores `Q·Kᵀ` and the output `P·V` taken on tensor cores as three TF32 products each.
//!
//! # The order of one query row (it depends on `d` and `tk` alone)
//!
//! 1. Every score `s_j = scale · dot(q_i, k_j)` over the `d` columns, where `dot` is the order of
//!    `gemm.linear_tf32x3` ([`crate::gemm::tf32::dot`]): each value split into `big = tf32(v)`
//!    and `small = tf32(v − big)`; k padded with zeros to a multiple of 8; k step `s` to chain
//!    `s mod 4`; three `mma.m16n8k8` per step (`small(q)·big(k)`, `big(q)·small(k)`,
//!    `big(q)·big(k)`); the chains added as `(p0 + p1) + (p2 + p3)`.
//! 2. The softmax of [`super::attention`]: `m = max_j s_j`, `e_j = exp_f32(s_j − m)`, `Σ e_j` in
//!    the warp order ([`crate::math::warp_sum`]).
//! 3. Every output column `o_c = dot(e, v_c) / Σ`, `dot` as in 1 over the `tk` keys (`x` the
//!    numerators, `w` the value column).
//!
//! Nothing there depends on the batch, the heads, the query tile or the grid, and an `mma`
//! computes each output element from its own row of A and its own accumulator: one (batch,
//! head, row)'s bits never depend on the rows sharing the launch (on CUDA; the test
//! `batch_invariant_sdpa_tf32x3` checks it on the GPU).
//!
//! # Two tilings, one set of bits
//!
//! The kernel tiles a (batch, head)'s queries by 16 rows per CTA or, where `d ≤ 64`, by 64
//! ([`Tiling`], [`dims`] picks by shape). At one session's batch the 16-row tiling's many CTAs
//! fill the device; at many sessions it re-streams each head's keys and values once per 16
//! queries and feeds each warp's k step to one `n8` tile, and the 64-row tiling (keys and values
//! once, query fragments held in registers, four `n8` tiles per k step) does the same `mma`s
//! with a quarter of the staging and of the score phase's shared-memory loads. Which warp
//! computes a score or an output changes, its `mma` steps, chains and order do not: the bits are
//! the same (on CUDA; `runtime/tests/attention_tf32.rs` compares the two tilings' bits).
//!
//! # The host twin is a model, not the kernel's bits
//!
//! As for the 3xTF32 linear ([`crate::gemm::tf32`]), the `mma`'s internal accumulation is not
//! specified: the twin ([`attention`]) follows steps 1–3 with the linear's model of an `mma`
//! ([`crate::gemm::tf32::dot`]); it and the kernel are checked against the fp32 twin
//! ([`super::attention`]) within [`bound`].
//!
//! # The bound against the fp32 twin
//!
//! With `u = 2⁻²⁴`, for one output `(row, c)`: `T = max_j Σ_c |q_c·k_jc|` (the row's largest
//! score mass before the scale), `V = max_j |v_jc|` (the column's largest value), the chain
//! lengths `n_d = 3·⌈⌈d/8⌉/4⌉` and `n_k = 3·⌈⌈tk/8⌉/4⌉` (`mma`s per chain), `w = ⌈tk/32⌉ + 5`
//! (the depth of the warp sum):
//!
//! * **Scores**: both sides' scores differ by at most `Δ = (16.3 + 20.3·n_d + 1.01·d)·u·scale·T`:
//!   the 3xTF32 dot's split, chains and tree (`14.2 + 20.3·n_d`, derived in
//!   [`crate::gemm::tf32`]), the fp32 twin's sequential dot (`γ_d ≤ 1.01·d·u`) and one rounding of
//!   `scale · dot` on each side (`2.01·u`).
//! * **Numerators**: `|s_j − m| ≤ 2.01·scale·T`, so the arguments of `exp_f32` differ by at most
//!   `2Δ + 4.02·u·scale·T` (the max moves by `Δ` at most; one rounded subtraction each), and
//!   `exp_f32` is within one ulp (`2u` relative) on each side: every numerator of the kernel is
//!   the fp32 twin's times `1 + r_j`, `|r_j| ≤ ρ = e^λ − 1`, `λ = 2Δ + 4.02·u·scale·T + 4.01·u`.
//!   Numerators below `2⁻¹²⁶` (subnormal, or flushed to zero below `e⁻¹⁰⁴`) are outside that
//!   relative model and are charged absolutely: `2·tk·2⁻¹²⁶·V`.
//! * **Normalized weights**: `p̂_j / p_j = (1 + r_j) / (1 + r̄)` (`r̄` a weighted mean of the
//!   `r_j`), within `2ρ / (1 − ρ)` of 1, so `|Σ (p̂_j − p_j)·v_jc| ≤ 2ρ/(1 − ρ)·V`.
//! * **Each side's own arithmetic** on its weights: the 3xTF32 dot over the keys
//!   (`(14.2 + 20.3·n_k)·u·Σ ê|v|`), the fp32 twin's sequential dot (`1.01·tk·u·Σ e|v|`), both
//!   warp sums (`γ_w = 1.01·w·u` relative each, positive terms), all over the sum (`Σ p|v| ≤ V`,
//!   a factor `1/(1 − γ_w) < 1.01`), and the final division (`u·(|ô| + |o|)`).
//!
//! In all: `|ô − o| ≤ 2ρ/(1 − ρ)·V + 1.01·((14.2 + 20.3·n_k + 1.01·tk)·u + 2γ_w)·V
//! + u·(|ô| + |o|) + 2·tk·2⁻¹²⁶·V` ([`bound`]). A worst-case bound, loose on ordinary data by
//! orders of magnitude, but not vacuous: values that TF32 alone rounds by half its ulp every time
//! (`1 + 2⁻¹¹`) put a single-product attention outside it (test below).

use crate::abi::{Arg, Args, KernelError, LaunchDims};
use crate::gemm::tf32::dot;
use crate::math::{exp_f32, warp_sum};
use crate::twin::{invalid, kdef, rd, wr};

use super::{AttnLayout, MAX_HEAD_DIM, RESIDENT_MAX_SHARED_BYTES};
use crate::CudaSource;
use crate::abi::Param::{F32, I64, Ptr};

/// The NVRTC module of [`SDPA_TF32X3`]: `common.cuh`, then `attention_tf32.cu` (a module of its
/// own: the fp32 attention's module does not compile its templates, nor this one the fp32's).
pub static SOURCE: CudaSource = CudaSource {
    name: "attention/sdpa_tf32x3",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/attention_tf32.cu")
    ),
};

/// Query rows per CTA of the 16-row tiling (one `m16` tile).
pub const ROWS: usize = 16;
/// Query rows per CTA of the 64-row tiling (four `m16` tiles: the DiT's 56 queries of a head in
/// one CTA).
pub const ROWS64: usize = 64;
/// Frames per staged key (value) tile.
pub const KEYS: usize = 64;
/// Warps per CTA (each score and each output is one warp's: the count changes no order).
pub const WARPS: usize = 8;
/// Tiles in the staging ring of the 16-row tiling.
pub const STAGES: usize = 3;
/// Tiles in the staging ring of the 64-row tiling.
pub const STAGES64: usize = 3;
/// Threads per CTA.
pub const THREADS: u32 = 32 * WARPS as u32;
/// CTAs of the 64-row tiling from which [`dims`] takes it: below, the 16-row tiling's four times
/// as many CTAs fill more of the device's SMs (132 on an H100) than the 64-row tiling's
/// fewer loads per `mma` save.
pub const ROWS64_MIN_BLOCKS: usize = 96;

/// How the kernel tiles a (batch, head)'s queries; both give the same bits (each score and
/// output is one warp's, its `mma` steps in the same chains and order), so [`dims`] picks by
/// shape alone. The kernel tells them apart by the launch's shared memory ([`tiling_of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tiling {
    /// One CTA per 16 query rows: keys and values staged once per 16 queries through a
    /// three-tile ring, every warp on one `n8` tile of each key tile ([`shared_bytes`]).
    Rows16,
    /// One CTA per 64 query rows (`d ≤ 64`): keys and values staged once per 64 queries through
    /// a three-tile ring, each warp on one `m16` tile and half the columns, its query fragments in
    /// registers ([`shared_bytes_rows64`]).
    Rows64,
}

kdef!(
    SDPA_TF32X3,
    "attention",
    "sdpa_tf32x3",
    [Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, F32],
    host_sdpa_tf32x3,
    "`(out, q, kv, batch, heads, tq, tk, d, cap, scale)`: [`super::SDPA`]'s op with both products as 3xTF32 on tensor cores ([`attention`]: the order; [`bound`]: its distance from the fp32 twin), `d ≤ 128`; one CTA of 8 warps per (batch, head, 16 or 64 query rows: [`Tiling`]), launch with [`dims`]."
);

/// The kernels of this module (their own list: the twin is a model, so they are not among the
/// bit-equal twins of [`super::KERNELS`]; their own CUDA module, [`SOURCE`]).
pub static KERNELS: &[&crate::KernelDef] = &[&SDPA_TF32X3];

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

/// Dynamic shared memory of a 16-row launch (`kernels/cuda/attention_tf32.cu`,
/// `dcc_t3_smem_floats`): the query tile split in two (`2·16·(DP + 4)`), the score rows
/// (`16·(⌈tk/64⌉·64 + 4)`), the ring (`STAGES·64·(DP + 8)`) and the row sums (16), in floats.
pub const fn shared_bytes(tk: usize, d: usize) -> usize {
    let dp = padded_dim(d);
    let ls = tk.div_ceil(KEYS) * KEYS + 4;
    4 * (2 * ROWS * (dp + 4) + ROWS * ls + STAGES * KEYS * (dp + 8) + ROWS)
}

/// Dynamic shared memory of a 64-row launch (`dcc_t3w_smem_floats`): the score rows of
/// `min(tq, 64)` queries (`⌈tk/8⌉·8 + 4` floats each: the values' k steps end there; the rows of
/// a tile past `tq` are not stored), the ring (`STAGES64·64·(DP + 8)`; the query tile passes
/// through its last slot first) and the row sums (64), in floats.
pub const fn shared_bytes_rows64(tq: usize, tk: usize, d: usize) -> usize {
    let dp = padded_dim(d);
    let ls = tk.div_ceil(8) * 8 + 4;
    let rows = if tq < ROWS64 { tq } else { ROWS64 };
    4 * (rows * ls + STAGES64 * KEYS * (dp + 8) + ROWS64)
}

/// The tiling the kernel takes for a launch given `shared` bytes of dynamic shared memory (its
/// rule): 64 rows where `d ≤ 64`, that tiling needs more than the 16-row one (so the size tells
/// them apart) and `shared` holds it; else 16 rows where `shared` holds those; else none (the
/// kernel traps).
pub const fn tiling_of(tq: usize, tk: usize, d: usize, shared: usize) -> Option<Tiling> {
    let (rows16, rows64) = (shared_bytes(tk, d), shared_bytes_rows64(tq, tk, d));
    if padded_dim(d) <= 64 && rows64 > rows16 && shared >= rows64 {
        Some(Tiling::Rows64)
    } else if shared >= rows16 {
        Some(Tiling::Rows16)
    } else {
        None
    }
}

/// The launch of `tiling` over `outer` = batch · heads slices of `tq` queries: one CTA of
/// [`THREADS`] per slice and 16 (64) query rows, [`shared_bytes`] ([`shared_bytes_rows64`]); an
/// error where `d` is outside `1..=128`, the shared memory would pass
/// [`RESIDENT_MAX_SHARED_BYTES`] (the 16-row tiling's score rows: about 2,000 keys at
/// `d = 64`; the 64-row tiling's: about 470 at 56 queries), or the kernel would not take `tiling` at that size
/// ([`tiling_of`]: 64 rows need `d ≤ 64` and more than 16 rows' shared memory).
pub fn dims_with(
    tiling: Tiling,
    outer: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Result<LaunchDims, KernelError> {
    if d == 0 || d > MAX_HEAD_DIM || tk == 0 {
        return Err(invalid(format!(
            "attention.sdpa_tf32x3: head dim {d} (1..={MAX_HEAD_DIM}) or {tk} keys"
        )));
    }
    let (rows, shared) = match tiling {
        Tiling::Rows16 => (ROWS, shared_bytes(tk, d)),
        Tiling::Rows64 => (ROWS64, shared_bytes_rows64(tq, tk, d)),
    };
    if shared > RESIDENT_MAX_SHARED_BYTES {
        return Err(invalid(format!(
            "attention.sdpa_tf32x3: {tk} keys of dim {d} need {shared} B of shared memory in {tiling:?} (max {RESIDENT_MAX_SHARED_BYTES})"
        )));
    }
    if tiling_of(tq, tk, d, shared) != Some(tiling) {
        return Err(invalid(format!(
            "attention.sdpa_tf32x3: {tiling:?} does not apply to {tq} queries over {tk} keys of dim {d}"
        )));
    }
    let blocks = outer
        .saturating_mul(tq.div_ceil(rows))
        .clamp(1, i32::MAX as usize);
    Ok(LaunchDims {
        grid: (blocks as u32, 1, 1),
        block: (THREADS, 1, 1),
        shared_bytes: shared as u32,
    })
}

/// The launch `ops::attention` takes: [`Tiling::Rows64`] where it applies and gives at least
/// [`ROWS64_MIN_BLOCKS`] CTAs (many sessions batched), else [`Tiling::Rows16`]; errors as
/// [`dims_with`]'s 16-row ones. The bits are the same either way.
pub fn dims(outer: usize, tq: usize, tk: usize, d: usize) -> Result<LaunchDims, KernelError> {
    if outer.saturating_mul(tq.div_ceil(ROWS64)) >= ROWS64_MIN_BLOCKS
        && let Ok(wide) = dims_with(Tiling::Rows64, outer, tq, tk, d)
    {
        return Ok(wide);
    }
    dims_with(Tiling::Rows16, outer, tq, tk, d)
}

/// The twin's body: [`super::attention`]'s op (same layouts) in the order of the module docs,
/// with [`crate::gemm::tf32::dot`] for both products.
#[allow(clippy::too_many_arguments)]
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
    attention_by(
        dot, batch, heads, tq, tk, d, scale, q, ql, k, kl, v, vl, out, ol,
    );
}

/// [`attention`] over another model of the dot (the tests' single-TF32 product).
#[allow(clippy::too_many_arguments)]
fn attention_by(
    dot: impl Fn(&[f32], &[f32], usize) -> f32,
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
    // one head's value columns, contiguous over the keys
    let mut vt = vec![0.0f32; d * tk];
    for b in 0..batch {
        for h in 0..heads {
            for j in 0..tk {
                for c in 0..d {
                    vt[c * tk + j] = v[vl.at(b, h, j) + c];
                }
            }
            for i in 0..tq {
                let qi = &q[ql.at(b, h, i)..ql.at(b, h, i) + d];
                let mut m = f32::NEG_INFINITY;
                for (j, sj) in s.iter_mut().enumerate() {
                    let kj = &k[kl.at(b, h, j)..kl.at(b, h, j) + d];
                    *sj = scale * dot(qi, kj, d);
                    m = m.max(*sj);
                }
                for sj in s.iter_mut() {
                    *sj = exp_f32(*sj - m);
                }
                let sum = warp_sum(tk, |j| s[j]);
                let o = &mut out[ol.at(b, h, i)..ol.at(b, h, i) + d];
                for (c, oc) in o.iter_mut().enumerate() {
                    *oc = dot(&s, &vt[c * tk..(c + 1) * tk], tk) / sum;
                }
            }
        }
    }
}

/// The largest `|ô − o|` the module docs' bound allows between this attention's output `ô` and
/// the fp32 twin's `o` for one output: `t` = the row's `max_j Σ_c |q_c·k_jc|`, `vmax` = the
/// column's `max_j |v_jc|` (exact, or in f64).
pub fn bound(d: usize, tk: usize, scale: f32, t: f64, vmax: f64, y1: f32, y2: f32) -> f64 {
    let u = f64::powi(2.0, -24);
    let chain = |k: usize| (3 * k.div_ceil(8).div_ceil(4)) as f64;
    let st = f64::from(scale).abs() * t;
    let delta = (16.3 + 20.3 * chain(d) + 1.01 * d as f64) * u * st;
    let lambda = 2.0 * delta + 4.02 * u * st + 4.01 * u;
    let rho = lambda.exp_m1();
    let gw = 1.01 * (tk.div_ceil(32) + 5) as f64 * u;
    let weights = 2.0 * rho / (1.0 - rho);
    let arith = 1.01 * ((14.2 + 20.3 * chain(tk) + 1.01 * tk as f64) * u + 2.0 * gw);
    let tiny = 2.0 * tk as f64 * f64::powi(2.0, -126);
    (weights + arith + tiny) * vmax + u * (f64::from(y1).abs() + f64::from(y2).abs())
}

/// Checks a launch against what the kernel needs (it traps otherwise).
fn check_launch(dims_: &LaunchDims, tq: usize, tk: usize, d: usize) -> Result<(), KernelError> {
    let name = SDPA_TF32X3.name;
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
    let shared = dims_.shared_bytes as usize;
    if tiling_of(tq, tk, d, shared).is_none() {
        return Err(invalid(format!(
            "{name}: {shared} B of shared memory given, {} B needed ({tk} keys, d = {d})",
            shared_bytes(tk, d)
        )));
    }
    Ok(())
}

unsafe fn host_sdpa_tf32x3(dims_: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (batch, heads, tq, tk, d, cap, scale) = super::sdpa_shape("attention.sdpa_tf32x3", a)?;
    check_launch(dims_, tq, tk, d)?;
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

#[cfg(test)]
#[path = "tf32_tests.rs"]
mod tests;
