//! Transcendentals from `+ − * /` only, so that a CUDA `__device__` port of each helper (double
//! arithmetic, `--fmad=false`, `__longlong_as_double` / `__double_as_longlong` for the bit
//! casts, `round`/`floor` which are exact) is bit-equal to the host twin (see the
//! bit-faithfulness rules in `kernels/src/lib.rs`). Each `*_f32` helper evaluates in double and
//! rounds once to float, i.e. it is (all but always) the correctly rounded float result, which is
//! what glibc's and SLEEF's float functions used by torch return to within an ulp.

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

/// `expf`: `e^x` rounded to float.
#[inline]
pub fn exp_f32(x: f32) -> f32 {
    exp64(x as f64) as f32
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
/// `t2w_warp_tree` in `token2wav.cu` performs the same additions (`__shfl_down_sync`).
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
mod cuda_cross_check {
    //! Bits of the helpers and of the `ACT` / `TIMESTEP_EMBEDDING` twins over a fixed grid,
    //! hashed (FNV-1a over the float bits). The expected values come from compiling
    //! `kernels/cuda/token2wav.cu` as C++ on a CPU (`g++ -ffp-contract=off`, a shim defining the
    //! CUDA builtins, one thread per launch): the CUDA source and the twins agree bit for bit.
    use super::*;
    use crate::token2wav::{elementwise as ew, pos};

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
        assert_eq!(h.0, 0x1812_3205_ad47_c253);
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
        assert_eq!(h.0, 0xf76b_9bfe_2146_c009);
    }
}
