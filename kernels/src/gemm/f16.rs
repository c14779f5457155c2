//! The half-precision linear on tensor cores, `gemm.linear_f16_*` (`kernels/cuda/gemm_f16.cu`,
//! the `linear` op's `GemmPath::Half`): `y = rn16(rn16(x) · W16ᵀ + b16)`, `W16` packed
//! `[out, in]` and `b16` `[out]` in IEEE binary16, `x` and `y` float with unit column stride
//! and their own leading dimensions (the fp32 linear's layout, [`super`]). `rn16` rounds a float
//! to the nearest binary16 value, ties to even, overflow to ±inf ([`rn16`]; CUDA
//! `cvt.rn.f16.f32`, `__float2half_rn`; the `half` crate's `f16::from_f32`).
//!
//! This is what a PyTorch linear computes under `torch.autocast(dtype=float16)` on half weights:
//! an fp16 GEMM with fp32 accumulation whose output is an fp16 tensor, the bias added to the fp32
//! accumulator and the sum rounded once; an activation applied to that output computes in fp32
//! and rounds to fp16 again. Activations stay stored as float here, their values exact binary16
//! values; only the weights and biases are stored in binary16 (half the weight memory).
//!
//! # The order of one output (it depends on K alone)
//!
//! 1. Each `x` value is rounded to binary16; a product of two binary16 values is exact in float
//!    (two 11-bit significands; the smallest product, `2⁻⁴⁸`, is a normal float).
//! 2. k is padded with zeros to a multiple of [`STEP`] (16); k step `s` (`k ∈ [16s, 16s + 16)`)
//!    belongs to chain `s mod 4` ([`CHAINS`]); a chain starts at 0 and takes its steps in
//!    ascending order, one `mma.m16n8k16` (f16 inputs, f32 accumulator) per step; a step wholly
//!    past K is skipped.
//! 3. `s = (p0 + p1) + (p2 + p3)` over the chains, then `s + b[o]` in float, then `rn16`; with a
//!    fused activation (the `act.apply` op codes), `rn16(act(s))`; `y = s` as float.
//!
//! Nothing there depends on the rows of the launch, the tile or the grid, and an `mma` computes
//! each output element from its own row of `x`, its own column of `W16ᵀ` and its own
//! accumulator: a row's bits never depend on the rows sharing the launch, and every tile
//! variant ([`VARIANTS`]) gives the same bits (on CUDA; `runtime/tests/gemm_f16.rs` checks
//! them on the GPU).
//!
//! # The host twin is a model, not the kernel's bits
//!
//! How an `mma` adds its sixteen products to the accumulator inside the tensor core is not
//! specified, so no host code can repeat it bit for bit. The twin ([`dot`], [`linear`]) follows
//! steps 1–3 exactly and models each `mma` as its sixteen products (exact) summed in ascending
//! k in float, then added to the accumulator. It is deterministic and batch-invariant; the
//! CUDA kernel is checked against it within [`bound`].
//!
//! # The bound against the twin
//!
//! With `u = 2⁻²⁴`, `T = Σ_k |rn16(x_k)·w_k|` and `n = ⌈⌈K/16⌉/4⌉` (a chain's `mma`s at most),
//! for finite operands whose sums do not overflow, the kernel's and the twin's outputs `y₁`,
//! `y₂` of the same element (no activation) differ by at most
//! `(53·(n + 1) + 5)·u·T + (2⁻¹¹ + 4u)·(|y₁| + |y₂|) + 2⁻²³` ([`bound`]):
//!
//! * **One `mma`** (52.1u of `|c| + Σ|p|`): the products are exact on both sides. The kernel
//!   adds seventeen terms (the accumulator and sixteen products) aligned to the largest and
//!   truncated to 24 significant bits (at most `2u·max` each) and normalizes the sum by
//!   truncation (`2u`): at most `36u·(|c| + Σ|p|)` from the exact sum. The twin's sixteen float
//!   additions err by at most `γ₁₆ ≤ 16.01u` of the same. Their difference: `52.1u`.
//! * **A chain** (`n` `mma`s): the accumulator `c` before each is at most `1.01` times the sum
//!   of the earlier steps' `Σ|p|` (the relative error stays below 1 % for K below about 1.5
//!   million), so a chain's `Σ(|c| + Σ|p|)` is at most `1.01·(n + 1)·T_chain`, and the chains
//!   together at most `1.01·(n + 1)·T`: `52.7·(n + 1)·u·T`.
//! * **The chains' tree** (4.1u): two levels of float additions on each side, `γ₂·1.01·T` each.
//! * **The bias** rounds each side once more (`u` of `|s + b|`), and **`rn16`** once more (half
//!   a binary16 ulp, `2⁻¹¹` of the result, or `2⁻²⁵` below the normal range); `|s + b|` is at
//!   most `(1 + 2⁻¹⁰)·|y| + 2⁻²⁵`: the last two terms.
//!
//! It is a worst-case bound, far above what ordinary data shows (there the two sides mostly
//! agree, or differ by one binary16 ulp where the float sums straddle a rounding boundary), but
//! not vacuous: a lost k step errs by about `T/⌈K/16⌉`, above it for K up to about 100,000 on
//! data of one sign.

use half::f16;

use crate::abi::{Arg, Args, KernelError, LaunchDims};
use crate::twin::{invalid, span, wr};
use crate::{CudaSource, KernelDef};

use super::{LinearArgs, PARAMS};

/// k per `mma` step.
pub const STEP: usize = 16;
/// Chains over which the k steps are dealt, step `s` to chain `s mod CHAINS` (`H16_KW`).
pub const CHAINS: usize = 4;
/// k per staged tile of the 64 × 64 and 16 × 32 tiles (`H16_BK`: one step per chain).
pub const BK: usize = STEP * CHAINS;
/// Staging buffers in the ring of the 64 × 64 and 16 × 32 tiles (`H16_ST`).
pub const STAGES: usize = 4;

/// The NVRTC module of every `gemm.linear_f16_*` kernel: `common.cuh`, then `gemm_f16.cu` (its
/// template and the entries; three instantiations, so one module).
pub static SOURCE: CudaSource = CudaSource {
    name: "gemm/linear_f16",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm_f16.cu")
    ),
};

/// One tile shape of the half linear (a template instantiation in `gemm_f16.cu`: warp tiles of
/// `16·mt × 8·nt` outputs, `wm × wn` of them per CTA, each computed by [`CHAINS`] warps, k tiles
/// of `bk` through `stages` buffers).
#[derive(Debug)]
pub struct F16Variant {
    pub kernel: &'static KernelDef,
    /// `m16` tiles per warp.
    pub mt: usize,
    /// `n8` tiles per warp.
    pub nt: usize,
    /// Warp tiles along the rows.
    pub wm: usize,
    /// Warp tiles along the outputs.
    pub wn: usize,
    /// k per staged tile (a multiple of `STEP · CHAINS`: step `j` of a tile is chain `j mod 4`).
    pub bk: usize,
    /// Staging buffers in the ring.
    pub stages: usize,
}

impl F16Variant {
    /// Output rows per CTA.
    pub const fn bm(&self) -> usize {
        16 * self.mt * self.wm
    }

    /// Outputs per CTA.
    pub const fn bn(&self) -> usize {
        8 * self.nt * self.wn
    }

    /// Threads per CTA: one warp per chain and warp tile.
    pub const fn threads(&self) -> u32 {
        (32 * self.wm * self.wn * CHAINS) as u32
    }

    /// Bytes of dynamic shared memory: the staging ring, `stages` stages of `bm · (bk + 8)`
    /// floats and `bn · (bk + 8)` halves, or the chains' partials, `CHAINS · bm · (bn + 8)`
    /// floats (rows padded for conflict-free stores), whichever is larger (the kernel traps on
    /// less).
    pub const fn shared_bytes(&self) -> usize {
        let stage = self.bm() * (self.bk + 8) * 4 + self.bn() * (self.bk + 8) * 2;
        let red = CHAINS * self.bm() * (self.bn() + 8) * 4;
        if self.stages * stage > red {
            self.stages * stage
        } else {
            red
        }
    }

    /// The template call of the variant's entry in `gemm_f16.cu`: `h16_linear<mt, nt, wm, wn,
    /// bk, stages>`, the last two as `H16_BK, H16_ST` where they are [`BK`] and [`STAGES`].
    pub fn template(&self) -> String {
        let (bk, st) = if (self.bk, self.stages) == (BK, STAGES) {
            ("H16_BK".to_string(), "H16_ST".to_string())
        } else {
            (self.bk.to_string(), self.stages.to_string())
        };
        format!(
            "h16_linear<{}, {}, {}, {}, {bk}, {st}>",
            self.mt, self.nt, self.wm, self.wn
        )
    }

    /// The launch over `rows × out` outputs: grid `(⌈out / bn⌉, ⌈rows / bm⌉, 1)`; `None` when
    /// empty or past CUDA's grid limits.
    pub fn dims(&self, rows: usize, out: usize) -> Option<LaunchDims> {
        let gx = out.div_ceil(self.bn());
        let gy = rows.div_ceil(self.bm());
        if gx == 0 || gy == 0 || gx > i32::MAX as usize || gy > 65_535 {
            return None;
        }
        Some(LaunchDims {
            grid: (gx as u32, gy as u32, 1),
            block: (self.threads(), 1, 1),
            shared_bytes: self.shared_bytes() as u32,
        })
    }
}

macro_rules! f16_variant {
    ($kid:ident, $vid:ident, $host:ident, $name:literal, $mt:literal, $nt:literal, $wm:literal, $wn:literal,
     $bk:expr, $st:expr) => {
        #[doc = concat!("`gemm.linear_f16_", $name, "` (module docs: arguments, order, bound).")]
        pub static $kid: KernelDef = KernelDef {
            name: concat!("gemm.linear_f16_", $name),
            source: &SOURCE,
            entry: concat!("gemm_linear_f16_", $name),
            params: PARAMS,
            host: $host,
        };
        #[doc = concat!("The tile shape of [`", stringify!($kid), "`].")]
        pub static $vid: F16Variant = F16Variant {
            kernel: &$kid,
            mt: $mt,
            nt: $nt,
            wm: $wm,
            wn: $wn,
            bk: $bk,
            stages: $st,
        };
        unsafe fn $host(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
            // SAFETY: forwarded HostFn contract.
            unsafe { host_f16(&$vid, dims, a) }
        }
    };
}

f16_variant!(
    LINEAR_64X128,
    V64X128,
    host_64x128,
    "64x128",
    4,
    8,
    1,
    2,
    128,
    3
);
f16_variant!(
    LINEAR_64X64,
    V64X64,
    host_64x64,
    "64x64",
    2,
    4,
    2,
    2,
    BK,
    STAGES
);
f16_variant!(
    LINEAR_16X32,
    V16X32,
    host_16x32,
    "16x32",
    1,
    4,
    1,
    1,
    BK,
    STAGES
);

/// Every tile shape, the most rows × outputs first.
pub static VARIANTS: &[&F16Variant] = &[&V64X128, &V64X64, &V16X32];

/// Every kernel of the half linear (one module): what a process on `GemmPath::Half` preloads.
pub static KERNELS: &[&KernelDef] = &[&LINEAR_64X128, &LINEAR_64X64, &LINEAR_16X32];

/// Rows from which [`pick`] takes the 64 × 64 tile.
pub const LARGE_ROWS: usize = 256;

/// Rows from which [`pick`] takes the 64 × 128 tile for [`WIDE_OUT`] outputs and more.
pub const BATCH_ROWS: usize = 896;

/// Outputs from which [`pick`] takes the 64 × 128 tile (the 80-output linear keeps 64 × 64:
/// one partial 128-output tile would halve its CTAs).
pub const WIDE_OUT: usize = 512;

/// The variant the `linear` op launches for `rows × out` outputs (speed only: every variant
/// gives the same bits): from [`BATCH_ROWS`] rows and [`WIDE_OUT`] outputs the 64 × 128 tile
/// (eight sessions batched and more: 64 × 64 warp tiles, a third of the other instructions
/// per `mma` of 32 × 32 ones; expected faster there, not yet measured), from [`LARGE_ROWS`]
/// rows the 64 × 64 tile (sessions batched: the most reuse per staged tile, and enough CTAs),
/// below it 16 × 32 (one session's 112 rows: the most CTAs).
pub fn pick(rows: usize, out: usize) -> &'static F16Variant {
    if rows >= BATCH_ROWS && out >= WIDE_OUT {
        &V64X128
    } else if rows >= LARGE_ROWS {
        &V64X64
    } else {
        &V16X32
    }
}

/// The variant whose kernel is `name` (`gemm.linear_f16_64x64`, ...).
pub fn variant(name: &str) -> Option<&'static F16Variant> {
    VARIANTS.iter().copied().find(|v| v.kernel.name == name)
}

/// `v` rounded to the nearest binary16 value (ties to even, overflow to ±inf), as float.
#[inline]
pub fn rn16(v: f32) -> f32 {
    f16::from_f32(v).to_f32()
}

/// `v` rounded to binary16 ([`rn16`]), for uploading a weight.
#[inline]
pub fn to_f16(v: f32) -> f16 {
    f16::from_f32(v)
}

/// One output before the bias, on the twin's model of the `mma` (module docs). `x` and `w` hold
/// at least `k` elements.
pub fn dot(x: &[f32], w: &[f16], k: usize) -> f32 {
    let xh: Vec<f32> = x[..k].iter().map(|&v| rn16(v)).collect();
    let wf: Vec<f32> = w[..k].iter().map(|v| v.to_f32()).collect();
    dot_rounded(&xh, &wf, k)
}

/// [`dot`] over `x` already rounded to binary16 and `w`'s binary16 values as floats (the twin
/// rounds each row of `x` and widens `w` once per launch, not once per output; the half path's
/// attention twin, [`crate::attention::f16`], its operands once per head).
pub(crate) fn dot_rounded(x: &[f32], w: &[f32], k: usize) -> f32 {
    let (x, w) = (&x[..k], &w[..k]);
    let mut p = [0.0f32; CHAINS];
    for s in 0..k.div_ceil(STEP) {
        let base = STEP * s;
        let mut sum = 0.0f32;
        for j in 0..STEP {
            let (a, b) = match (x.get(base + j), w.get(base + j)) {
                (Some(a), Some(b)) => (*a, *b),
                _ => (0.0, 0.0),
            };
            sum = if j == 0 { a * b } else { sum + a * b };
        }
        p[s % CHAINS] += sum;
    }
    (p[0] + p[1]) + (p[2] + p[3])
}

/// The largest `|y₁ − y₂|` the module docs' bound allows between the kernel's output `y₁` and
/// the twin's `y₂` for the same element (no activation), `t = Σ_k |rn16(x_k)·w_k|` (exact, or
/// in f64).
pub fn bound(k: usize, t: f64, y1: f32, y2: f32) -> f64 {
    let u = f64::powi(2.0, -24);
    let n = k.div_ceil(STEP).div_ceil(CHAINS);
    (53.0 * (n + 1) as f64 + 5.0) * u * t
        + (f64::powi(2.0, -11) + 4.0 * u) * (f64::from(y1).abs() + f64::from(y2).abs())
        + f64::powi(2.0, -23)
}

/// `y[r, o] = rn16(act(rn16(dot(x[r, :], w[o, :]) (+ b[o]))))` for `r < rows`, `o < out` (the
/// outer `rn16(act(·))` only with an activation): the twin of every variant (module docs).
/// `x[r, :]` at `x[r·ldx..][..k]`, `w` packed `[out, k]`, `y[r, o]` at `y[r·ldy + o]`; `act`:
/// `None`, or an `act.apply` op code and alpha (an unknown code is an error, before anything is
/// written).
#[allow(clippy::too_many_arguments)]
pub fn linear(
    y: &mut [f32],
    ldy: usize,
    x: &[f32],
    ldx: usize,
    w: &[f16],
    b: Option<&[f16]>,
    rows: usize,
    k: usize,
    out: usize,
    act: Option<(i32, f32)>,
) -> Result<(), String> {
    if let Some((op, alpha)) = act {
        crate::act::act_inplace(&mut [], op, alpha)?;
    }
    let wf: Vec<f32> = w[..out * k].iter().map(|v| v.to_f32()).collect();
    let mut xh = vec![0.0f32; k];
    for r in 0..rows {
        for (h, v) in xh.iter_mut().zip(&x[r * ldx..][..k]) {
            *h = rn16(*v);
        }
        let yr = &mut y[r * ldy..][..out];
        for (o, yo) in yr.iter_mut().enumerate() {
            let s = dot_rounded(&xh, &wf[o * k..][..k], k);
            *yo = rn16(match b {
                Some(b) => s + b[o].to_f32(),
                None => s,
            });
        }
        if let Some((op, alpha)) = act {
            crate::act::act_inplace(yr, op, alpha)?;
            yr.iter_mut().for_each(|v| *v = rn16(*v));
        }
    }
    Ok(())
}

/// # Safety
/// `p` addresses `n` readable binary16 values (or `n == 0`).
unsafe fn rd16<'a>(p: crate::DevPtr, n: usize) -> Result<&'a [f16], KernelError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() || !p.0.is_multiple_of(2) {
        return Err(invalid("null or unaligned binary16 input address"));
    }
    // SAFETY: HostFn contract (caller); f16 is a 2-byte plain value, the address 2-aligned.
    Ok(unsafe { std::slice::from_raw_parts(p.0 as *const f16, n) })
}

/// The twin of variant `v`: checks the launch geometry the kernel assumes and the sizes, then
/// [`linear`].
///
/// # Safety
/// As [`crate::HostFn`].
unsafe fn host_f16(v: &F16Variant, dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let name = v.kernel.name;
    let LinearArgs {
        rows,
        k,
        out,
        ldx,
        ldy,
        bias,
        act,
    } = super::linear_args(name, |r, o| v.dims(r, o), dims, a)?;
    // SAFETY: HostFn contract: x spans rows of `k` floats at stride ldx, w `out · k` halves, b
    // `out` halves, y rows of `out` floats at stride ldy, y aliasing no input.
    unsafe {
        let b = if bias {
            Some(rd16(a.ptr(5)?, out)?)
        } else {
            None
        };
        let x = crate::twin::rd(a.ptr(2)?, span(rows, k, ldx))?;
        let w = rd16(a.ptr(4)?, out * k)?;
        let y = wr(a.ptr(0)?, span(rows, out, ldy))?;
        linear(y, ldy, x, ldx, w, b, rows, k, out, act).map_err(|e| invalid(format!("{name}: {e}")))
    }
}

#[cfg(test)]
#[path = "f16_tests.rs"]
mod tests;
