//! The 3xTF32 linear on tensor cores, `gemm.linear_tf32x3` (`gemm_tf32x3` in
//! `kernels/cuda/gemm.cu`): the same arguments, layout and epilogue as the fp32 variants
//! ([`super`]), with every product taken on tensor cores as three TF32 products.
//!
//! # The order of one output (it depends on K alone)
//!
//! 1. Each operand value `v` is split into `big = tf32(v)` and `small = tf32(v − big)`
//!    ([`split`]; `tf32` rounds to 10 fraction bits, to nearest with ties away from zero: the
//!    bits `(v + 0x1000) & 0xffffe000`; `v − big` is exact in fp32).
//! 2. k is padded with zeros to a multiple of 8; k step `s` (`k ∈ [8s, 8s + 8)`) belongs to
//!    chain `s mod 4` ([`CHAINS`], one warp each); a chain starts at 0 and takes its steps in
//!    ascending order, three `mma.m16n8k8` per step in this order: `small(x)·big(w)`,
//!    `big(x)·small(w)`, `big(x)·big(w)` (`small·small` is left out).
//! 3. `s = (p0 + p1) + (p2 + p3)` over the chains, then `s + b[o]`, then the activation.
//!
//! Nothing there depends on the rows of the launch, the tile or the grid, and an `mma`
//! computes each output element from its own row of `x`, its own column of `Wᵀ` and its own
//! accumulator: a row's bits never depend on the rows sharing the launch (on CUDA; the test
//! `batch_invariant_linear_tf32x3_row_windows` checks it on the GPU).
//!
//! # The host twin is a model, not the kernel's bits
//!
//! How an `mma` adds its eight products to the accumulator inside the tensor core (alignment,
//! extra bits, truncation) is not specified, so no host code can repeat it bit for bit. The
//! twin ([`dot`], [`linear`]) follows steps 1–3 exactly and models each `mma` as its eight
//! products (exact in fp32: two 11-bit significands) summed in ascending k in fp32, then added
//! to the accumulator. It is deterministic and batch-invariant, and both it and the CUDA kernel
//! are checked against the fp32 twin ([`super::linear`]) within [`bound`].
//!
//! # The bound against the fp32 twin
//!
//! With `u = 2⁻²⁴`, `T = Σ_k |x_k·w_k|`, `n = 3·⌈⌈K/8⌉/4⌉` (a chain's `mma`s at most) and
//! `L = 4·⌈K/64⌉` (an fp32 k-group's fused multiply-adds), for finite operands whose products
//! neither overflow nor underflow, the two results before the bias differ by at most
//! `(14.2 + 20.3·n + 1.01·(L + 4))·u·T`, and after the bias by `u·(|y₁| + |y₂|)` more
//! ([`bound`]):
//!
//! * **Split** (12.1u): `|v − big| ≤ 2⁻¹¹|v|` (half a TF32 ulp) and `|v − big − small| ≤
//!   2⁻¹¹|v − big| ≤ 2⁻²²|v|`; the product of `x = xb + xs + ex` and `w = wb + ws + ew` less
//!   the three kept terms is `xb·ew + xs·ws + xs·ew + ex·w`, at most `3.002·2⁻²²·|x·w|`.
//! * **Accumulation** (20.3u per `mma` of a chain): the model of an `mma` is `c + Σ₈ p` with an
//!   error of at most `20u·(|c| + Σ|p|)`: nine terms aligned to the largest and truncated to
//!   24 significant bits (at most `2u·max` each) and the sum normalized by truncation (`2u`);
//!   the fp32 sum of the model (`γ₈ + u`, about `9u`) is inside it. Each `mma`'s `|c| + Σ|p|`
//!   is at most `1.01 · 1.002 · T` (the three kept terms of a product sum to at most
//!   `1.002·|x·w|`, the accumulator's growth is below 1 % for `20.3·n·u < 0.005`, K below
//!   about 65,000), so a chain errs by at most `20.3·n·u·T`.
//! * **Chains' tree** (2.1u): two levels of fp32 additions.
//! * **The fp32 twin** (`1.01·(L + 4)·u`): a chain of `L` fused multiply-adds per group (one
//!   rounding each) and a four-level tree: `γ_{L+4}`.
//! * **The bias**: each result rounds once more, by `u·|y|`.
//!
//! It is a worst-case bound, loose by orders of magnitude on ordinary data, but not vacuous: a
//! lost cross term (`small·big`) errs by about `2⁻¹²·T`, above the bound for K up to about 1,600.

use crate::abi::{Arg, KernelError, LaunchDims};
use crate::{CudaSource, KernelDef};

use super::PARAMS;

/// Output rows per CTA (one `m16` tile).
pub const BM: usize = 16;
/// Outputs per CTA (four `n8` tiles).
pub const BN: usize = 32;
/// k per staged tile.
pub const BK: usize = 64;
/// Chains (warps) over which the k steps are dealt, step `s` to chain `s mod CHAINS`.
pub const CHAINS: usize = 4;
/// Staging buffers in the ring.
pub const STAGES: usize = 3;
/// Threads per CTA.
pub const THREADS: u32 = 32 * CHAINS as u32;

/// The module of [`LINEAR`] alone (`common.cuh`, `gemm.cu`'s templates, this entry).
pub static SOURCE: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 1) gemm_linear_tf32x3(float* y, \
         i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, \
         float alpha, i64 rows, i64 in, i64 out) {\n    gemm_tf32x3(GemmArgs{y, ldy, x, ldx, w, \
         b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3`: the 3xTF32 linear (module docs: order, bound; arguments as the fp32
/// variants').
pub static LINEAR: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3",
    source: &SOURCE,
    entry: "gemm_linear_tf32x3",
    params: PARAMS,
    host: host_tf32x3,
};

/// Bytes of dynamic shared memory of a launch: the staging ring, `STAGES · (BM + BN) · (BK + 4)`
/// floats (the chains' partials, `CHAINS · BM · BN` floats, reuse it).
pub const fn shared_bytes() -> usize {
    let stage = STAGES * (BM + BN) * (BK + 4);
    let red = CHAINS * BM * BN;
    4 * if stage > red { stage } else { red }
}

/// The launch over `rows × out` outputs: grid `(⌈out / BN⌉, ⌈rows / BM⌉, 1)`, [`THREADS`]
/// threads, [`shared_bytes`]; `None` when empty or past CUDA's grid limits.
pub fn dims(rows: usize, out: usize) -> Option<LaunchDims> {
    let gx = out.div_ceil(BN);
    let gy = rows.div_ceil(BM);
    if gx == 0 || gy == 0 || gx > i32::MAX as usize || gy > 65_535 {
        return None;
    }
    Some(LaunchDims {
        grid: (gx as u32, gy as u32, 1),
        block: (THREADS, 1, 1),
        shared_bytes: shared_bytes() as u32,
    })
}

/// `v` rounded to TF32 (10 fraction bits), to nearest with ties away from zero, as the kernel
/// rounds it (`t3_tf32`).
pub fn tf32(v: f32) -> f32 {
    f32::from_bits(v.to_bits().wrapping_add(0x1000) & 0xffff_e000)
}

/// `(big, small)` of `v` (module docs, step 1).
pub fn split(v: f32) -> (f32, f32) {
    let big = tf32(v);
    (big, tf32(v - big))
}

/// One output before the bias, on the twin's model of the `mma` (module docs). `x` and `w`
/// hold at least `k` elements.
pub fn dot(x: &[f32], w: &[f32], k: usize) -> f32 {
    let mut p = [0.0f32; CHAINS];
    for s in 0..k.div_ceil(8) {
        let (mut xb, mut xs, mut wb, mut ws) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
        for j in 0..8 {
            if let (Some(a), Some(b)) = (x[..k].get(8 * s + j), w[..k].get(8 * s + j)) {
                (xb[j], xs[j]) = split(*a);
                (wb[j], ws[j]) = split(*b);
            }
        }
        let c = &mut p[s % CHAINS];
        for (a, b) in [(&xs, &wb), (&xb, &ws), (&xb, &wb)] {
            let mut sum = a[0] * b[0];
            for j in 1..8 {
                sum += a[j] * b[j];
            }
            *c += sum;
        }
    }
    (p[0] + p[1]) + (p[2] + p[3])
}

/// The largest `|y₁ − y₂|` the module docs' bound allows between this linear's output `y₁` and
/// the fp32 twin's `y₂` for the same output, `t = Σ_k |x_k·w_k|` (exact, or in f64).
pub fn bound(k: usize, t: f64, y1: f32, y2: f32) -> f64 {
    let u = f64::powi(2.0, -24);
    let n = 3 * k.div_ceil(8).div_ceil(CHAINS);
    let l = 4 * k.div_ceil(super::K_TILE);
    (14.2 + 20.3 * n as f64 + 1.01 * (l + 4) as f64) * u * t
        + u * (f64::from(y1).abs() + f64::from(y2).abs())
}

/// `y[r, o] = act(dot(x[r, :], w[o, :]) (+ b[o]))`: the twin (as [`super::linear`], over
/// [`dot`]).
#[allow(clippy::too_many_arguments)]
pub fn linear(
    y: &mut [f32],
    ldy: usize,
    x: &[f32],
    ldx: usize,
    w: &[f32],
    b: Option<&[f32]>,
    rows: usize,
    k: usize,
    out: usize,
    act: Option<(i32, f32)>,
) -> Result<(), String> {
    super::linear_by(dot, y, ldy, x, ldx, w, b, rows, k, out, act)
}

/// The twin of [`LINEAR`]: checks the geometry the kernel assumes, then [`linear`].
///
/// # Safety
/// As [`crate::HostFn`].
unsafe fn host_tf32x3(launch: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { super::host_linear_by(LINEAR.name, dims, dot, launch, a) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm::NO_ACT;
    use crate::gemm::tests::data;

    #[test]
    fn split_rounds_to_tf32_and_keeps_22_bits() {
        // Ties away from zero, on both signs; exact TF32 values stay.
        assert_eq!(tf32(1.0 + 2.0f32.powi(-11)), 1.0 + 2.0f32.powi(-10));
        assert_eq!(tf32(-(1.0 + 2.0f32.powi(-11))), -(1.0 + 2.0f32.powi(-10)));
        assert_eq!(tf32(1.0 + 2.0f32.powi(-12)), 1.0);
        assert_eq!(tf32(0.75), 0.75);
        for v in data(9, 10_000) {
            let (b, s) = split(v * 1000.0);
            assert_eq!(b.to_bits() & 0x1fff, 0);
            assert_eq!(s.to_bits() & 0x1fff, 0);
            let v = v * 1000.0;
            assert!(((v as f64) - b as f64 - s as f64).abs() <= (v as f64).abs() * 2f64.powi(-22));
            assert!((v - b).abs() <= v.abs() * 2f32.powi(-11));
        }
    }

    /// The model stays within the bound of the fp32 twin, and is far closer than TF32 alone
    /// (one product of the big parts), which the bound would refuse at small K.
    #[test]
    fn model_is_within_the_bound_of_the_fp32_twin() {
        for k in [1, 7, 8, 13, 64, 100, 256, 512, 2048] {
            let (x, w) = (data(k as u64, 40 * k), data(k as u64 + 99, 40 * k));
            let mut worst = 0.0f64;
            for r in 0..40 {
                let (xr, wr) = (&x[r * k..][..k], &w[r * k..][..k]);
                let a = dot(xr, wr, k);
                let f = super::super::dot(xr, wr, k);
                let t: f64 = xr
                    .iter()
                    .zip(wr)
                    .map(|(p, q)| (*p as f64 * *q as f64).abs())
                    .sum();
                let lim = bound(k, t, a, f);
                let d = (a as f64 - f as f64).abs();
                assert!(d <= lim, "K {k}, row {r}: {a} vs {f}: {d:e} above {lim:e}");
                worst = worst.max(d / lim);
            }
            assert!(worst < 0.5, "K {k}: {worst}");
        }
        // One TF32 product alone is outside the bound at small K.
        let k = 64;
        let (x, w) = (data(5, k), data(6, k));
        let one: f32 = x.iter().zip(&w).map(|(p, q)| tf32(*p) * tf32(*q)).sum();
        let f = super::super::dot(&x, &w, k);
        let t: f64 = x
            .iter()
            .zip(&w)
            .map(|(p, q)| (*p as f64 * *q as f64).abs())
            .sum();
        assert!((one as f64 - f as f64).abs() > bound(k, t, one, f));
    }

    #[test]
    fn source_holds_one_entry_and_the_twin_checks_geometry() {
        assert_eq!(
            SOURCE.code.matches("extern \"C\" __global__ void ").count(),
            1
        );
        assert!(
            SOURCE
                .code
                .contains("#define T3_BM 16\n#define T3_BN 32\n#define T3_BK 64\n")
        );
        assert!(SOURCE.code.contains("#define T3_KW 4\n#define T3_ST 3\n"));
        assert!(shared_bytes() <= 48 * 1024, "no opt-in needed");
        let x = [1.0f32; 8];
        let w = [1.0f32; 8];
        let mut y = [0.0f32; 4];
        let args = |y: &mut [f32]| {
            [
                Arg::Ptr(crate::DevPtr(y.as_mut_ptr() as u64)),
                Arg::I64(2),
                Arg::Ptr(crate::DevPtr(x.as_ptr() as u64)),
                Arg::I64(4),
                Arg::Ptr(crate::DevPtr(w.as_ptr() as u64)),
                Arg::Ptr(crate::DevPtr(w.as_ptr() as u64)),
                Arg::I32(0),
                Arg::I32(NO_ACT),
                Arg::F32(0.0),
                Arg::I64(2),
                Arg::I64(4),
                Arg::I64(2),
            ]
        };
        let good = dims(2, 2).unwrap();
        let mut bad = good;
        bad.block.0 = 256;
        // SAFETY: x and w hold 2 rows of 4, y 2 rows of 2: what these arguments address.
        unsafe {
            assert!(LINEAR.run_host(&bad, &args(&mut y)).is_err());
            LINEAR.run_host(&good, &args(&mut y)).unwrap();
        }
        assert_eq!(y, [4.0; 4]);
    }
}
