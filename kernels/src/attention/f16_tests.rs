use super::*;
use crate::abi::DevPtr;
use crate::attention::AttnLayout;
use crate::attention::test_data::{self, worst_ratio};

/// Deterministic binary16 values in about [-1, 1) (the shared values, rounded).
fn data(seed: u32, n: usize) -> Vec<f32> {
    test_data::data(seed, n).into_iter().map(rn16).collect()
}

/// The fp32 twin over one head's `(q [tq, d], kv [tk, 2d])`.
fn fp32(q: &[f32], kv: &[f32], tq: usize, tk: usize, d: usize, scale: f32) -> Vec<f32> {
    let mut out = vec![0.0; tq * d];
    let rows = AttnLayout::rows(tq, 1, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(1, tk, d, false),
        AttnLayout::kv_cache(1, tk, d, true),
    );
    super::super::attention(
        1, 1, tq, tk, d, scale, q, rows, kv, kl, kv, vl, &mut out, rows,
    );
    out
}

/// The twin over one head, with `p_hook` applied to each row's `P` before the `P·V` product
/// (the identity: [`attention`]'s order).
fn twin_with(
    q: &[f32],
    kv: &[f32],
    tq: usize,
    tk: usize,
    d: usize,
    scale: f32,
    p_hook: impl Fn(&mut [f32]),
) -> Vec<f32> {
    let mut out = vec![0.0; tq * d];
    for i in 0..tq {
        let qi = &q[i * d..(i + 1) * d];
        let mut s: Vec<f32> = (0..tk)
            .map(|j| scale * dot_rounded(qi, &kv[j * 2 * d..j * 2 * d + d], d))
            .collect();
        let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        s.iter_mut().for_each(|x| *x = exp_f32(*x - m));
        let sum = warp_sum(tk, |j| s[j]);
        s.iter_mut().for_each(|x| *x = rn16(*x));
        p_hook(&mut s);
        for c in 0..d {
            let v: Vec<f32> = (0..tk).map(|j| kv[j * 2 * d + d + c]).collect();
            out[i * d + c] = dot_rounded(&s, &v, tk) / sum;
        }
    }
    out
}

/// The largest ratio of `|got − fp32 twin|` to [`bound`] over every output (above 1: outside).
fn worst(got: &[f32], q: &[f32], kv: &[f32], tq: usize, tk: usize, d: usize, scale: f32) -> f64 {
    let want = fp32(q, kv, tq, tk, d, scale);
    worst_ratio(got, &want, q, kv, tq, tk, d, |t, vmax, a, b| {
        bound(d, tk, scale, t, vmax, a, b)
    })
}

const SHAPES: [(usize, usize, usize); 7] = [
    (1, 1, 1),
    (3, 7, 8),
    (17, 65, 13),
    (56, 458, 64),
    (5, 100, 100),
    (2, 64, 128),
    (4, 33, 32),
];

#[test]
fn twin_is_within_the_bound_of_the_fp32_twin() {
    // the bound's premise: the row's largest numerator is exactly 1, so the sum is at least 1
    assert_eq!(exp_f32(0.0), 1.0);
    for (n, (tq, tk, d)) in SHAPES.into_iter().enumerate() {
        // scores up to about ±8 at scale 1: the softmax is far from uniform
        let q: Vec<f32> = data(3 + n as u32, tq * d)
            .iter()
            .map(|x| rn16(x * 4.0))
            .collect();
        let kv = data(40 + n as u32, tk * 2 * d);
        for scale in [(1.0 / (d as f64).sqrt()) as f32, 1.0] {
            let mut got = vec![0.0; tq * d];
            attention(1, 1, tq, tk, d, tk, scale, &q, &kv, &mut got);
            assert_eq!(got, twin_with(&q, &kv, tq, tk, d, scale, |_| {}));
            let w = worst(&got, &q, &kv, tq, tk, d, scale);
            assert!(
                w <= 1.0,
                "({tq}, {tk}, {d}) at {scale}: {w:.3} of the bound"
            );
            assert!(got.iter().all(|x| x.is_finite()));
        }
    }
}

/// The bound is not vacuous: the P rounding alone takes a visible share of it on the DiT's
/// shape, and an attention that loses one k step of the values product (16 keys) or skips the
/// rounding of one side's operands to binary16 (here: values off binary16 by a third of an ulp,
/// which the twin's rounding moves) lands outside.
#[test]
fn the_bound_catches_a_lost_step() {
    let (tq, tk, d) = (8, 458, 64);
    let scale = 0.125;
    let q: Vec<f32> = data(7, tq * d).iter().map(|x| rn16(x * 4.0)).collect();
    // values of one sign: a lost step cannot cancel out
    let kv: Vec<f32> = data(8, tk * 2 * d)
        .iter()
        .enumerate()
        .map(|(i, x)| if i % (2 * d) >= d { x.abs() + 0.5 } else { *x })
        .collect();
    let kv: Vec<f32> = kv.iter().map(|x| rn16(*x)).collect();
    let good = twin_with(&q, &kv, tq, tk, d, scale, |_| {});
    let w = worst(&good, &q, &kv, tq, tk, d, scale);
    assert!(w <= 1.0 && w > 1e-3, "{w:.3e} of the bound");
    let lost = twin_with(&q, &kv, tq, tk, d, scale, |p| {
        p[16..32].iter_mut().for_each(|x| *x = 0.0)
    });
    let w = worst(&lost, &q, &kv, tq, tk, d, scale);
    assert!(w > 1.0, "a lost k step is {w:.3} of the bound");
}

/// At the DiT's shapes the half path takes 16 rows at one session's batch (2 CFG entries × 8
/// heads: 64 CTAs) and 64 rows at sixteen sessions' (256 CTAs); both fit the resident limit;
/// a cache too long for the 16-row score rows is refused.
#[test]
fn dims_pick_the_tiling_by_shape() {
    let (one, t1) = dims(2 * 8, 56, 458, 64).unwrap();
    assert_eq!((t1, one.grid.0), (Tiling::Rows16, 64));
    let (many, t2) = dims(32 * 8, 56, 458, 64).unwrap();
    assert_eq!((t2, many.grid.0), (Tiling::Rows64, 256));
    assert_eq!(
        many.shared_bytes as usize,
        shared_bytes(Tiling::Rows64, 56, 458, 64)
    );
    assert_eq!(one.block, (THREADS, 1, 1));
    // the prompt call: 302 queries over 302 keys, 5 query tiles of 64 per head
    let (p, tp) = dims(2 * 8, 302, 302, 64).unwrap();
    assert_eq!((tp, p.grid.0), (Tiling::Rows16, 16 * 19));
    // 64 rows that do not fit fall back to 16
    let (long, tl) = dims(32 * 8, 56, 1500, 64).unwrap();
    assert_eq!(tl, Tiling::Rows16);
    assert!(long.shared_bytes as usize <= RESIDENT_MAX_SHARED_BYTES);
    assert!(dims(2, 16, 5000, 64).is_err());
    assert!(dims(2, 16, 10, 129).is_err());
    assert!(dims(2, 16, 0, 64).is_err());
    assert_eq!(score_stride(458), 488);
    assert_eq!(score_stride(1), 40);
}

/// Runs `kernel`'s twin at `dims`; the error, if refused.
fn launch(
    kernel: &crate::KernelDef,
    dims: &LaunchDims,
    out: &mut [f32],
    q: &[f32],
    kv: u64,
    (batch, heads, tq, tk, d, cap): (usize, usize, usize, usize, usize, usize),
    rows: usize,
) -> Result<(), KernelError> {
    let args = [
        Arg::Ptr(DevPtr(out.as_mut_ptr() as u64)),
        Arg::Ptr(DevPtr(q.as_ptr() as u64)),
        Arg::Ptr(DevPtr(kv)),
        Arg::I64(batch as i64),
        Arg::I64(heads as i64),
        Arg::I64(tq as i64),
        Arg::I64(tk as i64),
        Arg::I64(d as i64),
        Arg::I64(cap as i64),
        Arg::F32(0.125),
        Arg::I64(rows as i64),
    ];
    // SAFETY: the callers' buffers hold batch·tq·heads·d floats (out, q) and batch·heads·cap·2d
    // cache elements of the kernel's type; out overlaps neither.
    unsafe { kernel.run_host(dims, &args) }
}

/// Both entries compute the twin over the same values (a binary16 cache, or an f32 one holding
/// those values); the launch checks refuse what the kernel would trap on.
#[test]
fn both_caches_and_the_launch_checks() {
    let shape @ (batch, heads, tq, tk, d, cap) = (2, 3, 9, 37, 40, 50);
    let q = data(1, batch * tq * heads * d);
    let kv = data(2, batch * heads * cap * 2 * d);
    let kv16: Vec<f16> = kv.iter().map(|x| f16::from_f32(*x)).collect();
    let n = q.len();
    let (dims16, t) = dims(batch * heads, tq, tk, d).unwrap();
    let rows = t.rows();
    let mut a = vec![0.0; n];
    let mut b = vec![0.0; n];
    launch(
        &SDPA_F16,
        &dims16,
        &mut a,
        &q,
        kv16.as_ptr() as u64,
        shape,
        rows,
    )
    .unwrap();
    launch(
        &SDPA_F16_KV32,
        &dims16,
        &mut b,
        &q,
        kv.as_ptr() as u64,
        shape,
        rows,
    )
    .unwrap();
    let mut want = vec![0.0; n];
    attention(batch, heads, tq, tk, d, cap, 0.125, &q, &kv, &mut want);
    assert_eq!(a, want);
    assert_eq!(b, want);
    // the 64-row tiling's launch runs the same twin
    let wide = dims_with(Tiling::Rows64, batch * heads, tq, tk, d).unwrap();
    let mut c = vec![0.0; n];
    launch(
        &SDPA_F16,
        &wide,
        &mut c,
        &q,
        kv16.as_ptr() as u64,
        shape,
        64,
    )
    .unwrap();
    assert_eq!(c, want);

    let p16 = kv16.as_ptr() as u64;
    let mut o = vec![0.0; n];
    // rows other than 16 or 64
    assert!(launch(&SDPA_F16, &wide, &mut o, &q, p16, shape, 32).is_err());
    // 64 rows' shared memory is more than 16 rows give
    assert!(launch(&SDPA_F16, &dims16, &mut o, &q, p16, shape, 64).is_err());
    // another block shape
    let mut small = dims16;
    small.block = (128, 1, 1);
    assert!(launch(&SDPA_F16, &small, &mut o, &q, p16, shape, rows).is_err());
    // tk past cap, d past 128
    let bad_tk = (batch, heads, tq, cap + 1, d, cap);
    assert!(launch(&SDPA_F16, &dims16, &mut o, &q, p16, bad_tk, rows).is_err());
    // an unaligned binary16 cache
    assert!(launch(&SDPA_F16, &dims16, &mut o, &q, p16 + 1, shape, rows).is_err());
    assert!(o.iter().all(|x| *x == 0.0), "a refused launch wrote");
}
