//! The half linear's tests: `rn16`, the documented order, the bound, the variant table against
//! the CUDA source, the twin's geometry checks and `pick`.

use super::*;
use crate::DevPtr;
use crate::gemm::tests::data;
use crate::gemm::{MAX_K, NO_ACT};

#[test]
fn rn16_rounds_to_nearest_even_and_overflows_to_inf() {
    // 1 + 2⁻¹¹ is halfway between 1 and 1 + 2⁻¹⁰: ties to the even significand (1).
    assert_eq!(rn16(1.0 + 2f32.powi(-11)), 1.0);
    // 1 + 3·2⁻¹¹ is halfway between 1 + 2⁻¹⁰ and 1 + 2⁻⁹: to the even one (1 + 2⁻⁹).
    assert_eq!(rn16(1.0 + 3.0 * 2f32.powi(-11)), 1.0 + 2f32.powi(-9));
    assert_eq!(rn16(-(1.0 + 3.0 * 2f32.powi(-11))), -(1.0 + 2f32.powi(-9)));
    assert_eq!(rn16(65504.0), 65504.0);
    assert_eq!(rn16(65520.0), f32::INFINITY);
    assert_eq!(rn16(-1e6), f32::NEG_INFINITY);
    // Subnormals: multiples of 2⁻²⁴; half of the smallest ties to zero.
    assert_eq!(rn16(2f32.powi(-24)), 2f32.powi(-24));
    assert_eq!(rn16(2f32.powi(-25)), 0.0);
    assert_eq!(rn16(3.0 * 2f32.powi(-25)), 2f32.powi(-23));
    assert!(rn16(f32::NAN).is_nan());
    for v in data(3, 10_000) {
        let r = rn16(v);
        assert_eq!(rn16(r), r, "idempotent");
        assert!((r - v).abs() <= v.abs() * 2f32.powi(-11) + 2f32.powi(-25));
    }
}

/// The order written out by hand for K = 101 (seven steps of 16, the last one 5 k long):
/// steps 0..6 to chains 0, 1, 2, 3, 0, 1, 2, each step's products summed in ascending k.
#[test]
fn dot_follows_the_documented_order() {
    let k = 101;
    let x = data(1, k);
    let w: Vec<f16> = data(2, k).into_iter().map(to_f16).collect();
    let mut p = [0.0f32; 4];
    for s in 0..7 {
        let mut sum = 0.0f32;
        for j in 0..16 {
            let kk = 16 * s + j;
            let prod = if kk < k {
                rn16(x[kk]) * w[kk].to_f32()
            } else {
                0.0
            };
            sum = if j == 0 { prod } else { sum + prod };
        }
        p[s % 4] += sum;
    }
    let want = (p[0] + p[1]) + (p[2] + p[3]);
    assert_eq!(dot(&x, &w, k).to_bits(), want.to_bits());
    assert_eq!(dot(&x, &w, 0).to_bits(), 0.0f32.to_bits());
    // x is rounded to binary16 before its product: the unrounded x gives other bits somewhere.
    let unrounded = (0..50u64).any(|seed| {
        let x = data(seed, 64);
        let w: Vec<f16> = data(seed + 7, 64).into_iter().map(to_f16).collect();
        let mut p = [0.0f32; 4];
        for (s, ps) in p.iter_mut().enumerate() {
            *ps = (0..16).fold(0.0, |a, j| a + x[16 * s + j] * w[16 * s + j].to_f32());
        }
        dot(&x, &w, 64) != (p[0] + p[1]) + (p[2] + p[3])
    });
    assert!(unrounded);
}

/// `linear` is `rn16(dot + b)` (then `rn16(act(·))`), close to the float64 result.
#[test]
fn linear_rounds_its_outputs_to_binary16() {
    let (rows, k, out, ldx, ldy) = (5, 70, 9, 73, 11);
    let x = data(3, span(rows, k, ldx));
    let w: Vec<f16> = data(4, out * k).into_iter().map(to_f16).collect();
    let b: Vec<f16> = data(5, out).into_iter().map(to_f16).collect();
    let mut y = vec![f32::NAN; span(rows, out, ldy)];
    linear(&mut y, ldy, &x, ldx, &w, Some(&b), rows, k, out, None).unwrap();
    let mut ya = vec![f32::NAN; span(rows, out, ldy)];
    let silu = crate::act::SILU;
    linear(
        &mut ya,
        ldy,
        &x,
        ldx,
        &w,
        Some(&b),
        rows,
        k,
        out,
        Some((silu, 0.0)),
    )
    .unwrap();
    for r in 0..rows {
        for o in 0..out {
            let xr = &x[r * ldx..][..k];
            let wr = &w[o * k..][..k];
            let got = y[r * ldy + o];
            assert_eq!(
                got.to_bits(),
                rn16(dot(xr, wr, k) + b[o].to_f32()).to_bits()
            );
            assert_eq!(rn16(got), got);
            let exact: f64 = xr
                .iter()
                .zip(wr)
                .map(|(a, b)| rn16(*a) as f64 * b.to_f64())
                .sum::<f64>()
                + b[o].to_f64();
            assert!((got as f64 - exact).abs() <= 1e-5 + exact.abs() * 2f64.powi(-11));
            let mut one = [got];
            crate::act::act_inplace(&mut one, silu, 0.0).unwrap();
            assert_eq!(ya[r * ldy + o].to_bits(), rn16(one[0]).to_bits());
        }
    }
    assert!(
        linear(
            &mut y,
            ldy,
            &x,
            ldx,
            &w,
            None,
            rows,
            k,
            out,
            Some((99, 0.0))
        )
        .is_err()
    );
}

/// The twin sits well inside the bound of the exact result rounded once (a stand-in for a
/// kernel), and one lost k step lies outside it: the bound is not vacuous.
#[test]
fn the_bound_holds_and_is_not_vacuous() {
    for k in [1, 15, 16, 17, 64, 100, 512, 2048, 4096] {
        let (x, w) = (data(k as u64, 20 * k), data(k as u64 + 99, 20 * k));
        let w: Vec<f16> = w.into_iter().map(to_f16).collect();
        for r in 0..20 {
            let (xr, wr) = (&x[r * k..][..k], &w[r * k..][..k]);
            let twin = rn16(dot(xr, wr, k));
            let prods: Vec<f64> = xr
                .iter()
                .zip(wr)
                .map(|(a, b)| rn16(*a) as f64 * b.to_f64())
                .collect();
            let t: f64 = prods.iter().map(|p| p.abs()).sum();
            let exact = rn16(prods.iter().sum::<f64>() as f32);
            let d = (twin as f64 - exact as f64).abs();
            assert!(
                d <= bound(k, t, twin, exact),
                "K {k}, row {r}: {twin} vs {exact}"
            );
        }
    }
    // Data of one sign: dropping the last full step is far outside the bound.
    let k = 2048;
    let x: Vec<f32> = data(8, k).iter().map(|v| v.abs() + 0.5).collect();
    let w: Vec<f16> = data(9, k).iter().map(|v| to_f16(v.abs() + 0.5)).collect();
    let full = rn16(dot(&x, &w, k));
    let lost = rn16(dot(&x, &w, k - 16));
    let t: f64 = x
        .iter()
        .zip(&w)
        .map(|(a, b)| (rn16(*a) as f64 * b.to_f64()).abs())
        .sum();
    assert!((full as f64 - lost as f64).abs() > bound(k, t, full, lost));
}

/// Both entries are in the source with the tile arguments of their table entry and the
/// constants of this module, and every entry of the source is a variant.
#[test]
fn variants_match_the_cuda_source() {
    let src = SOURCE.code;
    assert!(src.contains(&format!("#define H16_KW {CHAINS}\n")));
    assert!(src.contains(&format!("#define H16_BK {BK}\n")));
    assert!(src.contains(&format!("#define H16_ST {STAGES}\n")));
    assert!(src.contains(&format!("#define H16_MAX_K {MAX_K:#x}LL\n")));
    assert_eq!(
        src.matches("extern \"C\" __global__ void ").count(),
        VARIANTS.len()
    );
    for v in VARIANTS {
        assert_eq!(v.kernel.source.family(), "gemm");
        let at = src
            .find(&format!(" {}(", v.kernel.entry))
            .unwrap_or_else(|| panic!("{}: no entry", v.kernel.name));
        let line = &src[src[..at].rfind('\n').map_or(0, |i| i + 1)..at];
        let head = format!(
            "extern \"C\" __global__ void __launch_bounds__({}, ",
            v.threads()
        );
        assert!(line.starts_with(&head), "{}: {line}", v.kernel.name);
        let body = &src[at..];
        let body = &body[..body.find("\n}\n").unwrap()];
        let inst = format!("{}(", v.template());
        assert!(body.contains(&inst), "{}: no {inst}", v.kernel.name);
        assert!(v.threads() <= 1024 && v.shared_bytes() <= 227 * 1024);
        assert!(
            v.bk % (STEP * CHAINS) == 0 && v.stages >= 2,
            "{}",
            v.kernel.name
        );
    }
    assert_eq!(KERNELS.len(), VARIANTS.len());
    for (k, v) in KERNELS.iter().zip(VARIANTS) {
        assert!(std::ptr::eq(*k, v.kernel));
    }
    assert_eq!(V64X64.bm(), 64);
    assert_eq!(V64X64.bn(), 64);
    assert_eq!(V16X32.bm(), 16);
    assert_eq!(V16X32.bn(), 32);
    assert_eq!(V64X64.shared_bytes(), 4 * (64 * 72 * 4 + 64 * 72 * 2));
    assert_eq!(
        (V64X128.bm(), V64X128.bn(), V64X128.threads()),
        (64, 128, 256)
    );
    // The ring (3 stages of 128 k) holds the four padded partial tiles (4 · 64 · 136 floats).
    assert_eq!(V64X128.shared_bytes(), 3 * (64 * 136 * 4 + 128 * 136 * 2));
    assert!(4 * 64 * 136 * 4 <= V64X128.shared_bytes());
    assert_eq!(V64X128.template(), "h16_linear<4, 8, 1, 2, 128, 3>");
    assert_eq!(V64X64.template(), "h16_linear<2, 4, 2, 2, H16_BK, H16_ST>");
}

#[test]
fn the_twin_refuses_a_wrong_geometry() {
    let x = [1.0f32; 8];
    let w = [to_f16(1.0); 8];
    let b = [to_f16(0.5); 2];
    let mut y = [0.0f32; 4];
    let args = |y: &mut [f32]| {
        [
            Arg::Ptr(DevPtr(y.as_mut_ptr() as u64)),
            Arg::I64(2),
            Arg::Ptr(DevPtr(x.as_ptr() as u64)),
            Arg::I64(4),
            Arg::Ptr(DevPtr(w.as_ptr() as u64)),
            Arg::Ptr(DevPtr(b.as_ptr() as u64)),
            Arg::I32(1),
            Arg::I32(NO_ACT),
            Arg::F32(0.0),
            Arg::I64(2),
            Arg::I64(4),
            Arg::I64(2),
        ]
    };
    let good = V16X32.dims(2, 2).unwrap();
    let mut bad = good;
    bad.block.0 = 512;
    // SAFETY: x holds 2 rows of 4 floats, w 2 rows of 4 halves, b 2 halves, y 2 rows of 2.
    unsafe {
        assert!(LINEAR_16X32.run_host(&bad, &args(&mut y)).is_err());
        assert!(LINEAR_64X64.run_host(&good, &args(&mut y)).is_err());
        LINEAR_16X32.run_host(&good, &args(&mut y)).unwrap();
    }
    assert_eq!(y, [4.5; 4]);
}

#[test]
fn pick_stays_in_the_table() {
    assert!(std::ptr::eq(pick(112, 512), &V16X32));
    assert!(std::ptr::eq(pick(448, 512), &V64X64));
    assert!(std::ptr::eq(pick(895, 2048), &V64X64));
    assert!(std::ptr::eq(pick(1792, 80), &V64X64));
    for rows in [896, 1792, 3584] {
        for out in [512, 1536, 2048] {
            assert!(std::ptr::eq(pick(rows, out), &V64X128), "{rows} × {out}");
        }
    }
    let mut seen = [false; 3];
    for rows in [1, 7, 112, 255, 256, 895, 896, 1600, 1792, 3584] {
        for out in [1, 80, 511, 512, 2048] {
            let v = pick(rows, out);
            seen[VARIANTS.iter().position(|p| std::ptr::eq(*p, v)).unwrap()] = true;
        }
    }
    assert_eq!(seen, [true; 3]);
    for rows in [1, 7, 112, 255, 256, 1600, 1792] {
        for out in [1, 80, 512, 2048] {
            let v = pick(rows, out);
            assert!(VARIANTS.iter().any(|p| std::ptr::eq(*p, v)));
            assert!(v.dims(rows, out).is_some());
        }
    }
    assert_eq!(variant("gemm.linear_f16_64x64").map(|v| v.bm()), Some(64));
    assert!(V16X32.dims(0, 4).is_none());
}
