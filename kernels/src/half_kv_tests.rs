//! The half cache's twins against the fp32 twins they stand in for: the same values, bit for bit.

use half::f16;

use super::*;
use crate::DevPtr;
use crate::norm::qk_norm_pack;

/// Deterministic values in about [-2, 2), with a few large ones (past f16's range) and tiny ones.
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    (0..n)
        .map(|i| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let u = (s >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0;
            match i % 97 {
                0 => u * 70_000.0,
                1 => u * 1e-6,
                _ => u,
            }
        })
        .collect()
}

#[test]
fn f16_rounding_is_rn16() {
    let mut xs = data(20_000, 7);
    xs.extend([
        0.0,
        -0.0,
        65504.0,
        65519.99,
        65520.0,
        -65520.0,
        5.96e-8,
        2.98e-8,
        2.99e-8,
        6.1e-5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MIN_POSITIVE,
    ]);
    for x in xs {
        assert_eq!(
            f16::from_f32(x).to_f32().to_bits(),
            rn16(x).to_bits(),
            "{x:e}"
        );
    }
}

/// `qk_pack_f16` is `qk_norm_pack` followed by `round_f16` over `qn` and the new frames.
#[test]
fn qk_pack_f16_is_qk_norm_pack_rounded() {
    let (batch, heads, t, d, cap, t0) = (2, 3, 5, 32, 9, 3);
    let inner = heads * d;
    let ld = 3 * inner + 4;
    let qkv = data(batch * t * ld, 1);
    let (gq, bq, gk, bk) = (data(d, 2), data(d, 3), data(d, 4), data(d, 5));
    let eps = 1e-6;
    let mut qn32 = vec![0.0f32; batch * t * inner];
    let mut c32 = vec![0.0f32; batch * heads * cap * 2 * d];
    qk_norm_pack(
        &mut qn32,
        &mut c32,
        cap,
        t0,
        &qkv,
        ld,
        (&gq, &bq),
        (&gk, &bk),
        batch,
        heads,
        t,
        d,
        eps,
    );
    let mut qn = vec![1.0f32; batch * t * inner];
    let mut c16 = vec![f16::from_f32(7.0); batch * heads * cap * 2 * d];
    qk_pack_f16(
        &mut qn,
        &mut c16,
        cap,
        t0,
        &qkv,
        ld,
        (&gq, &bq),
        (&gk, &bk),
        batch,
        heads,
        t,
        d,
        eps,
    );
    for (a, b) in qn.iter().zip(&qn32) {
        assert_eq!(a.to_bits(), rn16(*b).to_bits());
    }
    for (i, (a, b)) in c16.iter().zip(&c32).enumerate() {
        let frame = (i / (2 * d)) % cap;
        if (t0..t0 + t).contains(&frame) {
            assert_eq!(a.to_f32().to_bits(), rn16(*b).to_bits(), "element {i}");
        } else {
            assert_eq!(a.to_f32(), 7.0, "element {i} outside the new frames");
        }
    }
}

/// `sdpa_f16` over a binary16 cache equals the fp32 twin over the same values in f32 storage.
#[test]
fn sdpa_f16_is_sdpa_over_the_widened_cache() {
    let (batch, heads, tq, d, cap, tk) = (2, 2, 7, 64, 40, 33);
    let q = data(batch * tq * heads * d, 11);
    let kv: Vec<f32> = data(batch * heads * cap * 2 * d, 12)
        .into_iter()
        .map(|v| rn16(v.clamp(-8.0, 8.0)))
        .collect();
    let kv16: Vec<f16> = kv.iter().map(|v| f16::from_f32(*v)).collect();
    let scale = 0.125;
    let mut want = vec![0.0f32; q.len()];
    let rows = AttnLayout::rows(tq, heads, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(heads, cap, d, false),
        AttnLayout::kv_cache(heads, cap, d, true),
    );
    attention(
        batch, heads, tq, tk, d, scale, &q, rows, &kv, kl, &kv, vl, &mut want, rows,
    );
    let mut got = vec![0.0f32; q.len()];
    sdpa_f16(batch, heads, tq, tk, d, cap, scale, &q, &kv16, &mut got);
    assert!(
        got.iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    assert!(got.iter().all(|v| v.is_finite()));
}

/// The twins refuse what the kernels cannot do (nothing written).
#[test]
fn launch_checks() {
    let dims = LaunchDims::blocks(1, 128);
    let mut out = [0.0f32; 4];
    let kv = [f16::ZERO; 8];
    let args = [
        Arg::Ptr(DevPtr(out.as_mut_ptr() as u64)),
        Arg::Ptr(DevPtr(out.as_ptr() as u64)),
        Arg::Ptr(DevPtr(kv.as_ptr() as u64)),
        Arg::I64(1),
        Arg::I64(1),
        Arg::I64(1),
        Arg::I64(3), // tk past cap
        Arg::I64(2),
        Arg::I64(2),
        Arg::F32(1.0),
    ];
    // SAFETY: the pointers address the arrays above; the twin refuses before touching them.
    assert!(unsafe { SDPA.run_host(&dims, &args) }.is_err());
}
