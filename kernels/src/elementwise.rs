//! Elementwise arithmetic (`kernels/cuda/elementwise.cu`): residual adds and the CFM solver step,
//! each a kernel whose host twin's body is the slice function below. Launch: one thread per
//! element, grid-strided.
//!
//! The half-precision kernels keep f16 values in f32 storage: [`rn16`] rounds an f32 to the
//! nearest f16 value (round to nearest even, overflow to ±inf, as CUDA's `__float2half_rn`),
//! with integer and float operations only, the same lines on both sides, so twin and kernel are
//! bit-equal by construction (and [`rn16`] is tested against the `half` crate's conversion).

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::math::{cos_f32, exp_f32, ln64, sin_f32};
use crate::twin::{kdef, rd, wr};

use Param::{F32, I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "elementwise",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/elementwise.cu")
    ),
};

kdef!(
    ADD,
    "elementwise",
    "add",
    [Ptr, Ptr, I64],
    host_add,
    "`(x, y, n)`: `x += y` in place ([`add_inplace`])."
);
kdef!(
    GATED_ADD,
    "elementwise",
    "gated_add",
    [Ptr, Ptr, Ptr, I64, I64],
    host_gated_add,
    "`(x, gate, y, rows, dim)`: `x[r, j] += gate[j] · y[r, j]` in place ([`gated_add`])."
);
kdef!(
    CFG_EULER,
    "elementwise",
    "cfg_euler",
    [Ptr, Ptr, I64, I64, F32, F32],
    host_cfg_euler,
    "`(x, v, n, m, cfg, dt)`: `x += dt · ((1 + cfg) · v_c − cfg · v_u)` in place over `n / m` sessions' rows at once ([`cfg_euler_step`] per session): `x` `[n / m, m]`, `v` `[n / m, 2, m]` (each session's conditional `v_c` then unconditional `v_u` velocities; one session: `v[i]`, `v[n + i]`)."
);

kdef!(
    ROUND_F16,
    "elementwise",
    "round_f16",
    [Ptr, I64, I64, I64],
    host_round_f16,
    "`(x, rows, cols, ld)`: `x = rn16(x)` in place over `rows` rows of `cols` elements, row `r` \
     at `x + r·ld`: the nearest f16 value ([`round_f16`])."
);
kdef!(
    ROUND_F16_SHIFTED,
    "elementwise",
    "round_f16_shifted",
    [Ptr, I64, I64, I64, F32],
    host_round_f16_shifted,
    "`(x, rows, cols, ld, c)`: `x = rn16(c + x) − c` in place, rows as [`ROUND_F16`] \
     ([`round_f16_shifted`])."
);
kdef!(
    GATED_ADD_F16,
    "elementwise",
    "gated_add_f16",
    [Ptr, Ptr, Ptr, I64, I64],
    host_gated_add_f16,
    "`(x, gate, y, rows, dim)`: `x[r, j] = rn16(x[r, j] + rn16(gate[j] · y[r, j]))` in place \
     ([`gated_add_f16`])."
);
kdef!(
    CFG_EULER_F16,
    "elementwise",
    "cfg_euler_f16",
    [Ptr, Ptr, I64, I64, F32, F32],
    host_cfg_euler_f16,
    "`(x, v, n, m, cfg, dt)`: [`CFG_EULER`] with every operation rounded to f16 ([`cfg_euler_step_f16`])."
);
kdef!(
    TIMESTEP_F16,
    "elementwise",
    "timestep_f16",
    [Ptr, I64, F32, F32, F32],
    host_timestep_f16,
    "`(out, dim, t, scale, max_period)`: the timestep features with every operation rounded to \
     f16 ([`timestep_embedding_f16`]); one thread per frequency."
);

pub static KERNELS: &[&crate::KernelDef] = &[
    &ADD,
    &GATED_ADD,
    &CFG_EULER,
    &ROUND_F16,
    &ROUND_F16_SHIFTED,
    &GATED_ADD_F16,
    &CFG_EULER_F16,
    &TIMESTEP_F16,
];

/// The f16 value nearest `x`, as an f32 (round to nearest even; `|x| ≥ 65520` to ±inf; NaN
/// kept; f16 subnormals, multiples of 2⁻²⁴, below 2⁻¹⁴): `__half2float(__float2half_rn(x))`.
/// The CUDA helper `dcc_rn16` is these lines.
pub fn rn16(x: f32) -> f32 {
    let bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    let mut a = bits & 0x7fff_ffff;
    if a >= 0x7f80_0000 {
        return x;
    }
    if a >= 0x477f_f000 {
        return f32::from_bits(sign | 0x7f80_0000);
    }
    if a < 0x3880_0000 {
        // below 2^-14: the ulp of [0.5, 1) is 2^-24, so the sum rounds to a multiple of it
        let m = (0.5f32 + f32::from_bits(a)) - 0.5f32;
        return f32::from_bits(sign | m.to_bits());
    }
    a = (a + 0xfff + ((a >> 13) & 1)) & !0x1fff;
    f32::from_bits(sign | a)
}

/// `x = rn16(x)` elementwise: activations stored as f16 values.
pub fn round_f16(x: &mut [f32]) {
    for v in x {
        *v = rn16(*v);
    }
}

/// `x = rn16(c + x) − c` elementwise: an f16 sum with the constant `c` (the modulate's
/// `1 + scale`, `c = 1`), kept as its offset from `c` so that a kernel computing `c + x` in f32
/// gets the f16 sum exactly.
pub fn round_f16_shifted(x: &mut [f32], c: f32) {
    for v in x {
        *v = rn16(c + *v) - c;
    }
}

/// [`gated_add`] as the vendor's fp16 mode computes it: the gate's product rounded to f16, then
/// the residual sum (`x` holds f16 values before and after).
pub fn gated_add_f16(rows: usize, dim: usize, x: &mut [f32], gate: &[f32], y: &[f32]) {
    for r in 0..rows {
        let xr = &mut x[r * dim..(r + 1) * dim];
        let yr = &y[r * dim..(r + 1) * dim];
        for j in 0..dim {
            xr[j] = rn16(xr[j] + rn16(gate[j] * yr[j]));
        }
    }
}

/// [`cfg_euler_step`] as the vendor's fp16 mode computes it, every torch op an f16 op (its
/// result rounded): `x = rn16(x + rn16(dt · rn16(rn16((1 + cfg) · d_cond) − rn16(cfg ·
/// d_uncond))))`.
pub fn cfg_euler_step_f16(x: &mut [f32], d_cond: &[f32], d_uncond: &[f32], cfg: f32, dt: f32) {
    assert!(x.len() == d_cond.len() && x.len() == d_uncond.len());
    let a = 1.0 + cfg;
    for i in 0..x.len() {
        let d = rn16(rn16(a * d_cond[i]) - rn16(cfg * d_uncond[i]));
        x[i] = rn16(x[i] + rn16(dt * d));
    }
}

/// The sinusoidal timestep features (`TimestepEmbedder.timestep_embedding`) in the vendor's fp16
/// mode: `t · scale` rounded to f16, the float32 frequencies rounded (`.to(t)`), each product
/// rounded, cos and sin rounded. `t` is the solver's f16 time.
pub fn timestep_embedding_f16(t: f32, scale: f32, dim: usize, max_period: f32, out: &mut [f32]) {
    let half = dim / 2;
    let c = -(ln64(max_period as f64) as f32);
    let ts = rn16(t * scale);
    for i in 0..half {
        let f = rn16(exp_f32(c * i as f32 / half as f32));
        let a = rn16(ts * f);
        out[i] = rn16(cos_f32(a));
        out[half + i] = rn16(sin_f32(a));
    }
    if dim % 2 == 1 {
        out[dim - 1] = 0.0;
    }
}

/// `x += y` elementwise.
pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    assert_eq!(x.len(), y.len());
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Residual with a per-column gate (adaLN-Zero): `x[r, j] += gate[j] · y[r, j]`, `rows × dim`.
pub fn gated_add(rows: usize, dim: usize, x: &mut [f32], gate: &[f32], y: &[f32]) {
    for r in 0..rows {
        let xr = &mut x[r * dim..(r + 1) * dim];
        let yr = &y[r * dim..(r + 1) * dim];
        for j in 0..dim {
            xr[j] += gate[j] * yr[j];
        }
    }
}

/// Classifier-free guidance and one Euler step of the CFM solver, fused:
/// `x += dt · ((1 + cfg) · d_cond − cfg · d_uncond)`.
pub fn cfg_euler_step(x: &mut [f32], d_cond: &[f32], d_uncond: &[f32], cfg: f32, dt: f32) {
    assert!(x.len() == d_cond.len() && x.len() == d_uncond.len());
    let a = 1.0 + cfg;
    for i in 0..x.len() {
        let d = a * d_cond[i] - cfg * d_uncond[i];
        x[i] += dt * d;
    }
}

unsafe fn host_add(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(2)?;
    // SAFETY: HostFn contract.
    let (x, y) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, n)?) };
    add_inplace(x, y);
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
    gated_add(rows, dim, x, g, y);
    Ok(())
}

/// Runs `step` over each session of a `cfg_euler` launch `(x, v, n, m, cfg, dt)`: `x` `[n / m,
/// m]`, `v` `[n / m, 2, m]`.
///
/// # Safety
/// HostFn contract: `x` addresses `n` writable floats, `v` `2n` readable ones, not overlapping.
unsafe fn cfg_euler_sessions(
    a: &[Arg],
    step: fn(&mut [f32], &[f32], &[f32], f32, f32),
) -> Result<(), KernelError> {
    let (n, m, cfg, dt) = (a.usize(2)?, a.usize(3)?, a.f32(4)?, a.f32(5)?);
    if n > 0 && (m == 0 || !n.is_multiple_of(m)) {
        return Err(crate::twin::invalid(
            "cfg_euler: n is not a whole number of sessions of m elements",
        ));
    }
    // SAFETY: HostFn contract (the caller's).
    let (x, v) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, 2 * n)?) };
    for (x, v) in x.chunks_mut(m.max(1)).zip(v.chunks(2 * m.max(1))) {
        let (c, u) = v.split_at(m);
        step(x, c, u, cfg, dt);
    }
    Ok(())
}

unsafe fn host_cfg_euler(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract (the caller's).
    unsafe { cfg_euler_sessions(a, cfg_euler_step) }
}

/// The rows `(rows, cols, ld)` of a round kernel's launch, each as a mutable slice.
///
/// # Safety
/// HostFn contract: argument 0 addresses `span(rows, cols, ld)` writable floats.
unsafe fn round_rows(a: &[Arg], each: impl Fn(&mut [f32])) -> Result<(), KernelError> {
    let (rows, cols, ld) = (a.usize(1)?, a.usize(2)?, a.usize(3)?);
    if rows > 1 && ld < cols {
        return Err(crate::twin::invalid("ld < cols: rows overlap"));
    }
    // SAFETY: HostFn contract (the caller's).
    let x = unsafe { wr(a.ptr(0)?, crate::twin::span(rows, cols, ld))? };
    for r in 0..rows {
        each(&mut x[r * ld..r * ld + cols]);
    }
    Ok(())
}

unsafe fn host_round_f16(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract.
    unsafe { round_rows(a, round_f16) }
}

unsafe fn host_round_f16_shifted(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let c = a.f32(4)?;
    // SAFETY: HostFn contract.
    unsafe { round_rows(a, |x| round_f16_shifted(x, c)) }
}

unsafe fn host_gated_add_f16(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (rows, dim) = (a.usize(3)?, a.usize(4)?);
    // SAFETY: HostFn contract.
    let (x, g, y) = unsafe {
        (
            wr(a.ptr(0)?, rows * dim)?,
            rd(a.ptr(1)?, dim)?,
            rd(a.ptr(2)?, rows * dim)?,
        )
    };
    gated_add_f16(rows, dim, x, g, y);
    Ok(())
}

unsafe fn host_cfg_euler_f16(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract (the caller's).
    unsafe { cfg_euler_sessions(a, cfg_euler_step_f16) }
}

unsafe fn host_timestep_f16(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (dim, t, scale, max_period) = (a.usize(1)?, a.f32(2)?, a.f32(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let out = unsafe { wr(a.ptr(0)?, dim)? };
    timestep_embedding_f16(t, scale, dim, max_period, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_and_gates() {
        let mut x = [1.0, 1.0];
        cfg_euler_step(&mut x, &[1.0, 2.0], &[0.0, 2.0], 0.5, 0.1);
        assert!((x[0] - 1.15).abs() < 1e-7 && (x[1] - 1.2).abs() < 1e-7);
        let mut x = [1.0, 1.0, 1.0, 1.0];
        gated_add(2, 2, &mut x, &[2.0, 0.0], &[1.0, 1.0, 3.0, 3.0]);
        assert_eq!(x, [3.0, 1.0, 7.0, 1.0]);
    }

    /// Every f32 bit pattern of a dense sweep (all exponents, mantissas stepped by a prime, the
    /// f16 halfway points and their neighbours, both signs) rounds as the `half` crate's RNE
    /// conversion.
    #[test]
    fn rn16_is_the_half_crates_rounding() {
        let want = |x: f32| half::f16::from_f32(x).to_f32();
        let same = |a: f32, b: f32| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        let mut checked = 0u64;
        for bits in (0u32..=0xffff_ffff).step_by(4093) {
            let x = f32::from_bits(bits);
            assert!(same(rn16(x), want(x)), "{x:e} ({bits:#010x})");
            checked += 1;
        }
        // halfway points between neighbouring f16 values (ties) and one f32 ulp either side
        for h in 0u16..0x7c00 {
            let (lo, hi) = (
                half::f16::from_bits(h).to_f32(),
                half::f16::from_bits(h + 1).to_f32(),
            );
            let mid = ((lo as f64 + hi as f64) / 2.0) as f32;
            for x in [
                mid,
                f32::from_bits(mid.to_bits() + 1),
                f32::from_bits(mid.to_bits() - 1),
            ] {
                for x in [x, -x] {
                    assert!(same(rn16(x), want(x)), "{x:e}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 1_000_000);
        assert_eq!(rn16(65519.0), 65504.0);
        assert_eq!(rn16(65520.0), f32::INFINITY);
        assert_eq!(rn16(-1e9), f32::NEG_INFINITY);
        assert_eq!(rn16(2f32.powi(-25)), 0.0);
        assert_eq!(rn16(2f32.powi(-25) * 1.5), 2f32.powi(-24));
    }

    #[test]
    fn half_kernels_round_every_operation() {
        let mut x = [1.0 + 2f32.powi(-12), 0.1, -3.0];
        round_f16(&mut x);
        assert_eq!(x, [1.0, rn16(0.1), -3.0]);
        // the modulate's 1 + scale: 1 + 3e-4 is not an f16 value, 1 + 2^-10 is
        let mut s = [3e-4f32, 2e-3];
        round_f16_shifted(&mut s, 1.0);
        assert_eq!(1.0 + s[0], rn16(1.0 + 3e-4));
        assert_eq!(1.0 + s[1], rn16(1.002));
        let mut x = [0.5f32];
        cfg_euler_step_f16(&mut x, &[0.3], &[0.1], 0.7, 0.0913);
        let d = rn16(rn16(1.7 * 0.3) - rn16(0.7 * 0.1));
        assert_eq!(x[0], rn16(0.5 + rn16(0.0913 * d)));
        let mut e = [0.0; 8];
        timestep_embedding_f16(0.001, 1000.0, 8, 10000.0, &mut e);
        assert_eq!(e[0], rn16(cos_f32(1.0)));
        assert!(e.iter().all(|v| *v == rn16(*v)));
    }
}
