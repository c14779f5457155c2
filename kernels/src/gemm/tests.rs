//! The invariant linear's tests: its documented order, its variant table against the CUDA source,
//! the twins' geometry checks and `pick`.

use super::*;
use crate::abi::DevPtr;

/// Deterministic values in [-1, 1) (xorshift), shared with the 3xTF32 twin's tests.
pub(crate) fn data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// The order written out by hand for K = 101 (one full tile, then 37 k of a padded tile),
/// with the tree spelled out level by level.
#[test]
fn dot_follows_the_documented_order() {
    let k = 101;
    let (x, w) = (data(1, k), data(2, k));
    let mut p = [0.0f32; 16];
    for kk in 0..128 {
        let g = (kk / 4) % 16;
        let (a, b) = if kk < k { (x[kk], w[kk]) } else { (0.0, 0.0) };
        p[g] = a.mul_add(b, p[g]);
    }
    let l8: Vec<f32> = (0..8).map(|g| p[2 * g] + p[2 * g + 1]).collect();
    let l4: Vec<f32> = (0..4).map(|g| l8[2 * g] + l8[2 * g + 1]).collect();
    let l2 = [l4[0] + l4[1], l4[2] + l4[3]];
    let want = l2[0] + l2[1];
    assert_eq!(dot(&x, &w, k).to_bits(), want.to_bits());
    assert_eq!(dot(&x, &w, 0).to_bits(), 0.0f32.to_bits());
    // The tree is not the sequential sum (the order matters, and this is the one).
    let seq = p.iter().skip(1).fold(p[0], |s, q| s + q);
    let other = (0..200u64).any(|seed| {
        let (x, w) = (data(seed, k), data(seed + 1000, k));
        let mut p = [0.0f32; 16];
        for kk in 0..k {
            p[(kk / 4) % 16] = x[kk].mul_add(w[kk], p[(kk / 4) % 16]);
        }
        reduce(p) != p.iter().skip(1).fold(p[0], |s, q| s + q)
    });
    assert!(
        other,
        "the tree never differed from the sequential sum ({seq})"
    );
}

/// Close to the float64 dot product (it is a dot product), and each row of `linear` is
/// `dot` plus the bias.
#[test]
fn linear_is_a_dot_product() {
    let (rows, k, out, ldx, ldy) = (5, 70, 9, 73, 11);
    let x = data(3, span(rows, k, ldx));
    let w = data(4, out * k);
    let b = data(5, out);
    let mut y = vec![f32::NAN; span(rows, out, ldy)];
    linear(&mut y, ldy, &x, ldx, &w, Some(&b), rows, k, out, None).unwrap();
    for r in 0..rows {
        for o in 0..out {
            let xr = &x[r * ldx..][..k];
            let wr = &w[o * k..][..k];
            let exact: f64 = xr.iter().zip(wr).map(|(a, b)| *a as f64 * *b as f64).sum();
            let got = y[r * ldy + o];
            assert_eq!(got.to_bits(), (dot(xr, wr, k) + b[o]).to_bits());
            assert!(
                (got as f64 - exact - b[o] as f64).abs() < 1e-5,
                "{got} vs {exact}"
            );
        }
    }
}

/// Every variant registered here has an entry in `gemm.cu` instantiating exactly these tile
/// sizes and thread count, the source's k-grouping constants are this module's, and every
/// entry of the source is a variant.
#[test]
fn variants_match_the_cuda_source() {
    for v in VARIANTS {
        let src = v.kernel.source.code;
        assert!(src.contains(&format!("#define GEMM_KG {K_GROUPS}\n")));
        assert!(src.contains(&format!("#define GEMM_KS {K_SLICE}\n")));
        assert!(src.contains(&format!("#define GEMM_MAX_K {MAX_K:#x}LL\n")));
        // One module per variant, holding that variant's entry alone.
        assert_eq!(src.matches("extern \"C\" __global__ void ").count(), 1);
        assert_eq!(v.kernel.source.family(), "gemm");
        let inst = format!(
            "extern \"C\" __global__ void __launch_bounds__({nt}, {}) {}(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out) {{\n    gemm_linear<{}, {}, {}, {}, {}, {}, {}, {nt}>(",
            v.min_blocks,
            v.kernel.entry,
            v.bm,
            v.bn,
            v.tm,
            v.tn,
            v.gw,
            v.stages,
            v.chunk,
            nt = v.threads(),
        );
        assert!(src.contains(&inst), "{}: no entry {inst}", v.kernel.name);
        assert!(v.bm % v.tm == 0 && v.bn % v.tn == 0);
        assert!(
            v.gw.is_power_of_two()
                && K_GROUPS.is_multiple_of(v.gw)
                && v.stages >= 2
                && v.chunk >= 1,
            "{}",
            v.kernel.name
        );
        assert!(
            v.threads() <= 1024 && v.threads() % 32 == 0,
            "{}",
            v.kernel.name
        );
        // Within an H100's 227 KB per CTA, for as many CTAs per SM as compiled for.
        assert!(
            v.shared_bytes() * v.min_blocks <= 227 * 1024,
            "{}",
            v.kernel.name
        );
    }
    assert_eq!(
        KERNELS.len(),
        VARIANTS.len() + 1 + tf32_tiles::KERNELS.len()
    );
    assert!(std::ptr::eq(KERNELS[VARIANTS.len()], &tf32::LINEAR));
    for (k, t) in KERNELS[VARIANTS.len() + 1..]
        .iter()
        .zip(tf32_tiles::KERNELS)
    {
        assert!(std::ptr::eq(*k, *t));
    }
    for (k, v) in KERNELS.iter().zip(VARIANTS) {
        assert!(std::ptr::eq(*k, v.kernel));
    }
}

#[test]
fn twins_refuse_a_wrong_geometry() {
    let x = [1.0f32; 8];
    let w = [1.0f32; 8];
    let mut y = [0.0f32; 4];
    let args = |y: &mut [f32]| {
        [
            Arg::Ptr(DevPtr(y.as_mut_ptr() as u64)),
            Arg::I64(2),
            Arg::Ptr(DevPtr(x.as_ptr() as u64)),
            Arg::I64(4),
            Arg::Ptr(DevPtr(w.as_ptr() as u64)),
            Arg::Ptr(DevPtr(w.as_ptr() as u64)),
            Arg::I32(0),
            Arg::I32(NO_ACT),
            Arg::F32(0.0),
            Arg::I64(2),
            Arg::I64(4),
            Arg::I64(2),
        ]
    };
    let good = V32X64.dims(2, 2).unwrap();
    let mut bad = good;
    bad.block.0 = 128;
    // Another variant's geometry (the single-row tile: one CTA per row) is refused too.
    // SAFETY: x and w hold 2 rows of 4, y 2 rows of 2: what these arguments address.
    unsafe {
        assert!(LINEAR_32X64.run_host(&bad, &args(&mut y)).is_err());
        assert!(LINEAR_1X128.run_host(&good, &args(&mut y)).is_err());
        LINEAR_32X64.run_host(&good, &args(&mut y)).unwrap();
    }
    assert_eq!(y, [4.0; 4]);
}

#[test]
fn pick_follows_the_measured_rule_at_the_model_shapes() {
    assert_eq!(pick(112, 2048).kernel.name, "gemm.linear_32x64");
    assert_eq!(pick(112, 1536).kernel.name, "gemm.linear_32x64");
    assert_eq!(pick(112, 512).kernel.name, "gemm.linear_16x32");
    assert_eq!(pick(112, 80).kernel.name, "gemm.linear_16x16");
    assert_eq!(pick(1792, 512).kernel.name, "gemm.linear_32x64");
    assert_eq!(pick(1, 3072).kernel.name, "gemm.linear_1x128");
    for rows in [1, 2, 3, 8, 56, 112, 150, 511, 512, 896, 1792] {
        for out in [1, 80, 512, 1536, 2048, 74_752] {
            assert!(pick(rows, out).dims(rows, out).is_some(), "{rows} × {out}");
        }
    }
    assert!(V32X64.dims(0, 5).is_none() && V32X64.dims(65_535 * 32 + 1, 5).is_none());
}

/// `pick` never leaves [`PICKED`] (every row count to twice [`LARGE_ROWS`], outputs to
/// 4,096 and a few wider), and every variant there is picked for some shape.
#[test]
fn picked_lists_every_choice_of_pick() {
    let mut seen = vec![false; PICKED.len()];
    let outs = (1..=4096).chain([8191, 74_752, 1 << 20]);
    for out in outs {
        for rows in 1..=2 * LARGE_ROWS {
            let v = pick(rows, out);
            let i = PICKED.iter().position(|p| std::ptr::eq(*p, v));
            let i = i.unwrap_or_else(|| panic!("{rows} × {out}: {}", v.kernel.name));
            seen[i] = true;
        }
    }
    assert!(seen.iter().all(|s| *s), "{seen:?}");
}
