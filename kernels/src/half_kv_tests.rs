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

/// The twin refuses what the kernel cannot do (nothing written).
#[test]
fn launch_checks() {
    let dims = LaunchDims::blocks(1, 128);
    let mut qn = [0.0f32; 4];
    let mut cache = [f16::ZERO; 8];
    let qkv = [0.0f32; 12];
    let g = [1.0f32; 2];
    let gp = Arg::Ptr(DevPtr(g.as_ptr() as u64));
    let args = [
        Arg::Ptr(DevPtr(qn.as_mut_ptr() as u64)),
        Arg::Ptr(DevPtr(cache.as_mut_ptr() as u64)),
        Arg::I64(1), // cap
        Arg::I64(1), // t0: frame 1 is past the capacity
        Arg::Ptr(DevPtr(qkv.as_ptr() as u64)),
        Arg::I64(6),
        gp,
        gp,
        gp,
        gp,
        Arg::I64(1),
        Arg::I64(1),
        Arg::I64(1),
        Arg::I64(2),
        Arg::F32(1e-5),
    ];
    // SAFETY: the pointers address the arrays above; the twin refuses before touching them.
    let err = unsafe { QK_PACK.run_host(&dims, &args) }.unwrap_err();
    assert!(
        err.to_string()
            .contains("half.qk_pack: frames past the cache capacity"),
        "{err}"
    );
    assert!(cache.iter().all(|c| *c == f16::ZERO) && qn == [0.0; 4]);
    // the fp32 kernel's twin refuses the same launch under its own name
    let mut cache32 = [0.0f32; 8];
    let mut args32 = args;
    args32[1] = Arg::Ptr(DevPtr(cache32.as_mut_ptr() as u64));
    // SAFETY: as above.
    let err = unsafe { crate::norm::QK_PACK.run_host(&dims, &args32) }.unwrap_err();
    assert!(
        err.to_string()
            .contains("norm.qk_pack: frames past the cache capacity"),
        "{err}"
    );
}
