//! The host twins of the shared `__device__` helpers of `kernels/cuda/common.cuh`, which every
//! model kernel family includes: transcendentals and the warp reduction order.
//!
//! Transcendentals from `+ − * /` (and fused multiply-adds) only, so that a CUDA `__device__`
//! port of each helper (`--fmad=false`, `__fmaf_rn` where the twin writes `mul_add`,
//! `__longlong_as_double` / `__int_as_float` for the bit casts, `round`/`rintf` which are exact)
//! is bit-equal to the host twin (see the bit-faithfulness rules in `kernels/src/lib.rs`).
//!
//! [`exp_f32`] and [`mish_f32`] (the hot ones: attention softmax, SiLU, Mish) evaluate in single
//! precision (range reduction + a polynomial in `f32` fused multiply-adds): `exp_f32` is within
//! 1 ulp of the correctly rounded `e^x`, `mish_f32` within a few ulp (tests below, dense sweeps
//! against `f64`). The other `*_f32` helpers evaluate in double and round once to float, i.e.
//! they are (all but always) the correctly rounded float result. glibc's and SLEEF's float
//! functions used by torch are themselves within an ulp or so.

// fdlibm's constants, as bit patterns (in CUDA: __longlong_as_double of the same integers).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000); // ln 2, 32 significant bits: k·LN2_HI exact
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76); // ln 2 − LN2_HI
const LOG2E: f64 = std::f64::consts::LOG2_E;
const PIO2_1: f64 = f64::from_bits(0x3ff9_21fb_5440_0000); // first 33 bits of π/2
const PIO2_1T: f64 = f64::from_bits(0x3dd0_b461_1a62_6331); // π/2 − PIO2_1
const TWO_OVER_PI: f64 = std::f64::consts::FRAC_2_PI;

/// `2^k` for `k` in `[-1022, 1023]`.
#[inline]
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `e^x` in double (relative error ≈ 1e-15) for `x` in about `[-708, 709]`; saturates outside.
pub fn exp64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x > 709.0 {
        return f64::INFINITY;
    }
    if x < -708.0 {
        return 0.0;
    }
    let k = (x * LOG2E).round();
    let r = (x - k * LN2_HI) - k * LN2_LO; // |r| ≤ ln2/2 + ε
    // Taylor series of e^r to degree 13 (Horner); truncation < 1e-16 relative.
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    p = p * r + 1.0 / 479_001_600.0;
    p = p * r + 1.0 / 39_916_800.0;
    p = p * r + 1.0 / 3_628_800.0;
    p = p * r + 1.0 / 362_880.0;
    p = p * r + 1.0 / 40_320.0;
    p = p * r + 1.0 / 5_040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    p * pow2(k as i64)
}

/// Natural logarithm in double for `x > 0` (finite).
pub fn ln64(x: f64) -> f64 {
    if x.is_nan() || x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    if x.is_infinite() {
        return x;
    }
    // normalise subnormals
    let (x, bias) = if x < f64::MIN_POSITIVE {
        (x * pow2(54), -54i64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023 + bias;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000); // [1, 2)
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // ln m = 2 atanh(s), s = (m − 1)/(m + 1), |s| ≤ 0.1716
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut p = 1.0 / 23.0;
    for d in [21.0, 19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0] {
        p = p * s2 + 1.0 / d;
    }
    let lnm = 2.0 * s * p;
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + lnm)
}

/// `ln(1 + x)` in double, accurate for small `x` (Goldberg's correction).
pub fn log1p64(x: f64) -> f64 {
    let u = 1.0 + x;
    if u == 1.0 {
        x
    } else if u.is_infinite() {
        u
    } else {
        ln64(u) * (x / (u - 1.0))
    }
}

/// `tanh` in double.
pub fn tanh64(x: f64) -> f64 {
    let ax = x.abs();
    let t = if ax < 0.05 {
        // odd Taylor series to x^11
        let x2 = ax * ax;
        let mut p = -1382.0 / 155_925.0;
        p = p * x2 + 62.0 / 2835.0;
        p = p * x2 - 17.0 / 315.0;
        p = p * x2 + 2.0 / 15.0;
        p = p * x2 - 1.0 / 3.0;
        p = p * x2 + 1.0;
        ax * p
    } else if ax > 20.0 {
        1.0
    } else {
        1.0 - 2.0 / (exp64(2.0 * ax) + 1.0)
    };
    if x < 0.0 { -t } else { t }
}

/// Sine and cosine in double of `x` with `|x| ≲ 1e5` (Cody–Waite reduction by π/2, then
/// Taylor series on `|r| ≤ π/4`: sine to `r^17`, cosine to `r^18`).
pub fn sincos64(x: f64) -> (f64, f64) {
    const SIN: [f64; 9] = [
        1.0 / 355_687_428_096_000.0,
        -1.0 / 1_307_674_368_000.0,
        1.0 / 6_227_020_800.0,
        -1.0 / 39_916_800.0,
        1.0 / 362_880.0,
        -1.0 / 5_040.0,
        1.0 / 120.0,
        -1.0 / 6.0,
        1.0,
    ];
    const COS: [f64; 10] = [
        -1.0 / 6_402_373_705_728_000.0,
        1.0 / 20_922_789_888_000.0,
        -1.0 / 87_178_291_200.0,
        1.0 / 479_001_600.0,
        -1.0 / 3_628_800.0,
        1.0 / 40_320.0,
        -1.0 / 720.0,
        1.0 / 24.0,
        -0.5,
        1.0,
    ];
    let k = (x * TWO_OVER_PI).round();
    let r = (x - k * PIO2_1) - k * PIO2_1T;
    let r2 = r * r;
    let mut s = 0.0;
    for c in SIN {
        s = s * r2 + c;
    }
    let sin_r = r * s;
    let mut cr = 0.0;
    for c in COS {
        cr = cr * r2 + c;
    }
    match (k as i64).rem_euclid(4) {
        0 => (sin_r, cr),
        1 => (cr, -sin_r),
        2 => (-sin_r, -cr),
        _ => (-cr, sin_r),
    }
}

// `exp_f32`'s constants, as bit patterns (in CUDA: __int_as_float of the same integers).
const LOG2E_F: f32 = f32::from_bits(0x3fb8_aa3b); // log2 e rounded to float
const LN2_HI_F: f32 = f32::from_bits(0x3f31_7200); // ln 2, 16 significant bits
const LN2_LO_F: f32 = f32::from_bits(0x35bf_be8e); // ln 2 − LN2_HI_F, rounded
const EXP_OVER_F: f32 = f32::from_bits(0x42b1_7218); // 88.72284: above, e^x overflows
const EXP_UNDER_F: f32 = f32::from_bits(0xc2cf_f1b4); // −103.97208: below, e^x rounds to 0
/// Taylor coefficients 1/7!, 1/6!, …, 1/2! rounded to float (highest degree first).
const EXP_POLY_F: [f32; 6] = [
    f32::from_bits(0x3950_0d01),
    f32::from_bits(0x3ab6_0b61),
    f32::from_bits(0x3c08_8889),
    f32::from_bits(0x3d2a_aaab),
    f32::from_bits(0x3e2a_aaab),
    f32::from_bits(0x3f00_0000),
];

/// `2^k` for `k` in `[-126, 127]`.
#[inline]
fn pow2_f32(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// `expf` in single precision (`dcc_expf` in `common.cuh`, line by line): `k = rint(x·log2 e)`,
/// `r = x − k·ln 2` (Cody–Waite, two fused multiply-adds, `|r| ≤ 0.35`), `e^r` by its Taylor
/// polynomial of degree 7 (Horner, fused multiply-adds; truncation < 0.1 ulp), then `· 2^k` as two
/// exact power-of-two factors (one rounding, also into the subnormal range). Within 1 ulp of the
/// correctly rounded result on `[-104, 88.7]`; `+∞` above 88.72284, `0` below −103.97208, NaN
/// kept.
#[inline]
pub fn exp_f32(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x > EXP_OVER_F {
        return f32::INFINITY;
    }
    if x < EXP_UNDER_F {
        return 0.0;
    }
    let k = (x * LOG2E_F).round_ties_even(); // in [-150, 128]
    let r = (-k).mul_add(LN2_HI_F, x);
    let r = (-k).mul_add(LN2_LO_F, r);
    let mut p = EXP_POLY_F[0];
    for c in &EXP_POLY_F[1..] {
        p = p.mul_add(r, *c);
    }
    p = p.mul_add(r, 1.0);
    p = p.mul_add(r, 1.0);
    let ki = k as i32;
    let k1 = ki >> 1; // floor(k / 2): both factors are normal floats
    (p * pow2_f32(k1)) * pow2_f32(ki - k1)
}

/// `torch.nn.Mish` of one float (`dcc_mish` in `common.cuh`): `x · tanh(softplus(x))` through
/// the identity `tanh(ln(1 + n)) = n(n + 2) / (n(n + 2) + 2)` with `n = e^x` ([`exp_f32`]): one
/// exponential and one division. `x > 20` returns `x` (torch's softplus threshold; the factor
/// rounds to 1 there anyway).
#[inline]
pub fn mish_f32(x: f32) -> f32 {
    if x > 20.0 {
        return x;
    }
    let n = exp_f32(x);
    let u = n * (n + 2.0);
    x * (u / (u + 2.0))
}

/// `tanhf`.
#[inline]
pub fn tanh_f32(x: f32) -> f32 {
    tanh64(x as f64) as f32
}

/// `log1pf`.
#[inline]
pub fn log1p_f32(x: f32) -> f32 {
    log1p64(x as f64) as f32
}

/// `sinf`.
#[inline]
pub fn sin_f32(x: f32) -> f32 {
    sincos64(x as f64).0 as f32
}

/// `cosf`.
#[inline]
pub fn cos_f32(x: f32) -> f32 {
    sincos64(x as f64).1 as f32
}

/// Lanes of the kernels' row reductions (one warp per row).
pub const WARP: usize = 32;

/// `Σ_{j<n} term(j)` in the kernels' warp order: lane `l` sums the terms `j ≡ l (mod 32)` in
/// ascending `j` from `0.0`, then the 32 lane partials are added in a fixed tree
/// (`lane[l] += lane[l + off]` for `off` = 16, 8, 4, 2, 1), the result being lane 0's.
/// `dcc_warp_tree` in `common.cuh` performs the same additions (`__shfl_down_sync`).
#[inline]
pub fn warp_sum(n: usize, term: impl Fn(usize) -> f32) -> f32 {
    let mut lanes = [0.0f32; WARP];
    for j in 0..n {
        lanes[j % WARP] += term(j);
    }
    let mut off = WARP / 2;
    while off > 0 {
        for l in 0..off {
            lanes[l] += lanes[l + off];
        }
        off /= 2;
    }
    lanes[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f32, b: f32) -> u32 {
        if a == b {
            return 0;
        }
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
    }

    #[test]
    fn against_std() {
        let mut worst = [0u32; 5];
        let mut x = -30.0f32;
        while x < 30.0 {
            let xd = x as f64;
            worst[0] = worst[0].max(ulps(exp_f32(x), xd.exp() as f32));
            worst[1] = worst[1].max(ulps(tanh_f32(x), xd.tanh() as f32));
            let y = x.exp();
            worst[2] = worst[2].max(ulps(log1p_f32(y), (y as f64).ln_1p() as f32));
            let z = x * 40.0;
            worst[3] = worst[3].max(ulps(sin_f32(z), (z as f64).sin() as f32));
            worst[4] = worst[4].max(ulps(cos_f32(z), (z as f64).cos() as f32));
            x += 0.0137;
        }
        assert!(
            worst.iter().all(|w| *w <= 1),
            "worst ulps vs std f64 rounded (exp, tanh, log1p, sin, cos): {worst:?}"
        );
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-200.0), 0.0);
        assert_eq!(exp_f32(100.0), f32::INFINITY);
        assert_eq!(tanh_f32(0.0), 0.0);
        assert_eq!(tanh_f32(-50.0), -1.0);
        assert_eq!(log1p_f32(0.0), 0.0);
        assert_eq!(log1p_f32(1e-30), 1e-30);
        assert_eq!(sin_f32(0.0), 0.0);
        assert_eq!(cos_f32(0.0), 1.0);
        assert!((ln64(10.0) - std::f64::consts::LN_10).abs() < 1e-15);
    }
}

#[cfg(test)]
mod f32_accuracy {
    //! The single-precision helpers against `f64` references on dense sweeps.
    use super::*;

    /// Distance in ulps between a float and a double reference (in units of the float's ulp at
    /// the reference; subnormal results measured in the smallest subnormal).
    fn err_ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = if w.abs() < f32::MIN_POSITIVE {
            f32::from_bits(1) as f64
        } else {
            let e = (w.abs().to_bits() >> 23) as i32 - 127;
            2f64.powi(e - 23)
        };
        (got as f64 - want).abs() / ulp
    }

    /// Every 61st float of `[lo, hi]`, both ends and zero.
    fn sweep(lo: f32, hi: f32, mut f: impl FnMut(f32)) {
        let mut x = lo;
        while x <= hi {
            f(x);
            let b = x.to_bits();
            x = if x < 0.0 {
                if b < 0x8000_0000 + 61 {
                    0.0
                } else {
                    f32::from_bits(b - 61)
                }
            } else {
                f32::from_bits(b + 61)
            };
        }
        f(hi);
    }

    #[test]
    fn exp_f32_is_within_one_ulp() {
        let mut worst = (0.0f64, 0.0f32);
        let mut n = 0usize;
        sweep(-103.97, 88.72, |x| {
            let e = err_ulps(exp_f32(x), (x as f64).exp());
            n += 1;
            if e > worst.0 {
                worst = (e, x);
            }
        });
        // the softmax range, uniformly
        for i in 0..=3_000_000 {
            let x = -(i as f32) * 1e-5;
            let e = err_ulps(exp_f32(x), (x as f64).exp());
            if e > worst.0 {
                worst = (e, x);
            }
        }
        assert!(n > 5_000_000, "{n} points");
        assert!(worst.0 <= 1.0, "exp_f32: {} ulp at {:e}", worst.0, worst.1);
        assert_eq!(exp_f32(0.0), 1.0);
        assert_eq!(exp_f32(-0.0), 1.0);
        assert_eq!(exp_f32(1.0), std::f32::consts::E);
        assert_eq!(exp_f32(-104.0), 0.0);
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(88.73), f32::INFINITY);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(88.72).is_finite());
        // the smallest results are subnormal, correctly scaled
        assert!(exp_f32(-103.0) > 0.0 && exp_f32(-103.0) < f32::MIN_POSITIVE);
    }

    fn mish64(x: f64) -> f64 {
        x * x.exp().ln_1p().tanh()
    }

    #[test]
    fn mish_f32_is_within_a_few_ulp() {
        let mut worst = (0.0f64, 0.0f32);
        let mut worst_abs = 0.0f64;
        sweep(-110.0, 60.0, |x| {
            let got = mish_f32(x);
            let want = mish64(x as f64);
            worst_abs = worst_abs.max((got as f64 - want).abs());
            // relative accuracy where the result is a normal float of useful size
            if want.abs() > 1e-30 {
                let e = err_ulps(got, want);
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        });
        assert!(worst.0 <= 4.0, "mish_f32: {} ulp at {:e}", worst.0, worst.1);
        assert!(worst_abs < 1e-6, "mish_f32: absolute error {worst_abs:e}");
        assert_eq!(mish_f32(0.0), 0.0);
        assert_eq!(mish_f32(30.0), 30.0);
        assert!(mish_f32(f32::NAN).is_nan());
        println!("mish_f32 worst {} ulp at {:e}", worst.0, worst.1);
    }

    #[test]
    fn silu_through_exp_f32_is_within_two_ulp() {
        let mut worst = (0.0f64, 0.0f32);
        sweep(-80.0, 80.0, |x| {
            let mut v = [x];
            crate::act::silu_inplace(&mut v);
            let want = x as f64 / (1.0 + (-(x as f64)).exp());
            if want.abs() > 1e-30 {
                let e = err_ulps(v[0], want);
                if e > worst.0 {
                    worst = (e, x);
                }
            }
        });
        assert!(worst.0 <= 2.5, "silu: {} ulp at {:e}", worst.0, worst.1);
    }
}

#[cfg(test)]
mod cuda_cross_check {
    //! Bits of the helpers and of the `act.apply` / `embed.timestep` twins over a fixed grid,
    //! hashed (FNV-1a over the float bits). The expected values come from compiling the CUDA
    //! source (`common.cuh` with `act.cu` and `embed.cu`) as C++ on a CPU
    //! (`g++ -ffp-contract=off`, a shim defining the CUDA builtins, one thread per launch): the
    //! CUDA source and the twins agree bit for bit.
    use super::*;
    use crate::{act as ew, embed as pos};

    struct Fnv(u64);
    impl Fnv {
        fn mix(&mut self, f: f32) {
            self.0 = (self.0 ^ f.to_bits() as u64).wrapping_mul(1_099_511_628_211);
        }
    }

    #[test]
    fn twins_match_the_cuda_source_run_on_cpu() {
        let mut h = Fnv(1_469_598_103_934_665_603);
        let mut x = -30.0f32;
        while x < 30.0 {
            h.mix(exp_f32(x));
            h.mix(tanh_f32(x));
            h.mix(log1p_f32(exp_f32(x)));
            h.mix(sin_f32(x * 40.0));
            h.mix(cos_f32(x * 40.0));
            x += 0.0137;
        }
        assert_eq!(h.0, 0xeaf1_dc29_daea_c881);
        let xs = [-3.0f32, -1.0, -0.01, 0.0, 0.5, 2.0, 9.0];
        for op in 0..5 {
            let mut y = xs;
            match op {
                0 => ew::silu_inplace(&mut y),
                1 => ew::mish_inplace(&mut y),
                2 => ew::gelu_tanh_inplace(&mut y),
                3 => ew::leaky_relu_inplace(&mut y, 0.25),
                _ => ew::scale_inplace(&mut y, 0.25),
            }
            y.iter().for_each(|v| h.mix(*v));
        }
        let mut te = [0.0f32; 16];
        pos::timestep_embedding(0.3, 1000.0, 16, 10000.0, &mut te);
        te.iter().for_each(|v| h.mix(*v));
        assert_eq!(h.0, 0x00fe_dc3e_d946_7b2d);
    }

    /// `exp_f32` and `mish_f32` at every 997th bit pattern of `u32` (all signs, subnormals,
    /// infinities, NaNs), hashed; the same loop over `dcc_expf` / `dcc_mish` compiled as C++.
    #[test]
    fn single_precision_helpers_match_the_cuda_source_run_on_cpu() {
        let mut h = Fnv(1_469_598_103_934_665_603);
        for b in (0..1u64 << 32).step_by(997) {
            let v = f32::from_bits(b as u32);
            h.mix(exp_f32(v));
            h.mix(mish_f32(v));
        }
        assert_eq!(h.0, 0xc415_1a38_f800_9579);
    }
}
