use super::*;
use crate::abi::DevPtr;
use crate::attention::test_data::{data, worst_ratio};
use crate::gemm::tf32::tf32;

type Sdpa = fn(
    usize,
    usize,
    usize,
    usize,
    usize,
    f32,
    &[f32],
    AttnLayout,
    &[f32],
    AttnLayout,
    &[f32],
    AttnLayout,
    &mut [f32],
    AttnLayout,
);

/// One head's `(q [tq, d], kv [tk, 2d])` through `f`, packed rows out.
fn run(f: Sdpa, q: &[f32], kv: &[f32], tq: usize, tk: usize, d: usize, scale: f32) -> Vec<f32> {
    let mut out = vec![0.0; tq * d];
    let rows = AttnLayout::rows(tq, 1, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(1, tk, d, false),
        AttnLayout::kv_cache(1, tk, d, true),
    );
    f(
        1, 1, tq, tk, d, scale, q, rows, kv, kl, kv, vl, &mut out, rows,
    );
    out
}

/// The largest ratio of `|got − fp32 twin|` to [`bound`] over every output (above 1: outside).
fn worst(got: &[f32], q: &[f32], kv: &[f32], tq: usize, tk: usize, d: usize, scale: f32) -> f64 {
    let want = run(super::super::attention, q, kv, tq, tk, d, scale);
    worst_ratio(got, &want, q, kv, tq, tk, d, |t, vmax, a, b| {
        bound(d, tk, scale, t, vmax, a, b)
    })
}

#[test]
fn twin_is_within_the_bound_of_the_fp32_twin() {
    for (tq, tk, d) in [
        (1, 1, 1),
        (3, 7, 8),
        (17, 65, 13),
        (56, 458, 64),
        (5, 100, 100),
        (2, 64, 128),
    ] {
        let q: Vec<f32> = data(tk as u32, tq * d).iter().map(|x| 3.0 * x).collect();
        let kv: Vec<f32> = data(d as u32 + 7, tk * 2 * d)
            .iter()
            .map(|x| 3.0 * x)
            .collect();
        let scale = (1.0 / (d as f64).sqrt()) as f32;
        let got = run(attention, &q, &kv, tq, tk, d, scale);
        let w = worst(&got, &q, &kv, tq, tk, d, scale);
        assert!(w < 0.5, "tq {tq}, tk {tk}, d {d}: {w} of the bound");
    }
}

/// Values a TF32 rounding moves by half its ulp every time (`1 + 2⁻¹¹`, a tie rounded away):
/// the 3xTF32 twin stays within the bound, one TF32 product per term does not.
#[test]
fn bound_refuses_a_single_tf32_product() {
    fn single(x: &[f32], w: &[f32], k: usize) -> f32 {
        x[..k]
            .iter()
            .zip(&w[..k])
            .map(|(a, b)| tf32(*a) * tf32(*b))
            .sum()
    }
    fn single_sdpa(
        batch: usize,
        heads: usize,
        tq: usize,
        tk: usize,
        d: usize,
        scale: f32,
        q: &[f32],
        ql: AttnLayout,
        k: &[f32],
        kl: AttnLayout,
        v: &[f32],
        vl: AttnLayout,
        out: &mut [f32],
        ol: AttnLayout,
    ) {
        attention_by(
            single, batch, heads, tq, tk, d, scale, q, ql, k, kl, v, vl, out, ol,
        );
    }
    let (tq, tk, d) = (8, 458, 64);
    let q = data(1, tq * d);
    let mut kv = data(2, tk * 2 * d);
    for j in 0..tk {
        for c in 0..d {
            kv[j * 2 * d + d + c] = 1.0 + 2.0f32.powi(-11);
        }
    }
    let scale = 0.125;
    let got = run(attention, &q, &kv, tq, tk, d, scale);
    assert!(worst(&got, &q, &kv, tq, tk, d, scale) < 0.5);
    let one = run(single_sdpa, &q, &kv, tq, tk, d, scale);
    let w = worst(&one, &q, &kv, tq, tk, d, scale);
    assert!(w > 1.0, "a single TF32 product within the bound ({w})");
}

#[test]
fn geometry_matches_the_kernel() {
    let code = SOURCE.code;
    assert!(code.contains(
        "#define DCC_T3_ROWS 16\n#define DCC_T3_KEYS 64\n#define DCC_T3_WARPS 8\n#define DCC_T3_STAGES 3\n\
         #define DCC_T3W_ROWS 64\n#define DCC_T3W_STAGES 3\n"
    ));
    assert!(code.contains(" attention_sdpa_tf32x3("));
    assert!(code.contains(
        "    const i64 ls = (tk + 7) / 8 * 8 + 4;\n    const i64 rows = tq < DCC_T3W_ROWS ? tq : DCC_T3W_ROWS;\n    \
         return rows * ls + DCC_T3W_STAGES * DCC_T3_KEYS * (dp + 8) + DCC_T3W_ROWS;"
    ));
    assert!(code.contains("const bool rows64 = dp <= 64 && wide > narrow && smem >= wide;"));
    assert_eq!(
        (ROWS, ROWS64, KEYS, WARPS, STAGES, STAGES64),
        (16, 64, 64, 8, 3, 3)
    );
    // The DiT's slices at one session (CFG 2 × 8 heads): 16 rows, about 95 KB.
    let dims_ = dims(16, 56, 458, 64).unwrap();
    assert_eq!(dims_.grid, (64, 1, 1));
    assert_eq!(dims_.block, (256, 1, 1));
    assert_eq!(
        dims_.shared_bytes as usize,
        4 * (2 * 16 * 68 + 16 * 516 + 3 * 64 * 72 + 16)
    );
    // At 16 sessions (32 × 8 slices): 64 rows, one CTA per slice, 56 score rows, just under the
    // limit (160 KB).
    let wide = dims(256, 56, 458, 64).unwrap();
    assert_eq!(wide.grid, (256, 1, 1));
    assert_eq!(wide.block, (256, 1, 1));
    assert_eq!(
        wide.shared_bytes as usize,
        4 * (56 * 468 + 3 * 64 * 72 + 64)
    );
    assert_eq!(
        tiling_of(56, 458, 64, wide.shared_bytes as usize),
        Some(Tiling::Rows64)
    );
    assert_eq!(
        tiling_of(56, 458, 64, dims_.shared_bytes as usize),
        Some(Tiling::Rows16)
    );
    assert_eq!(
        tiling_of(56, 458, 64, dims_.shared_bytes as usize - 4),
        None
    );
    assert_eq!(
        dims_with(Tiling::Rows16, 256, 56, 458, 64).unwrap().grid,
        (1024, 1, 1)
    );
    // The threshold: 96 CTAs of 64 rows (12 sessions).
    assert_eq!(dims(95, 56, 458, 64).unwrap().grid, (95 * 4, 1, 1));
    assert_eq!(dims(96, 56, 458, 64).unwrap().grid, (96, 1, 1));
    // Two query tiles, the second partial.
    assert_eq!(dims(48, 70, 130, 64).unwrap().grid, (96, 1, 1));
    // 64 rows of 458 keys would pass the shared-memory limit.
    assert_eq!(dims(96, 100, 458, 64).unwrap().grid, (96 * 7, 1, 1));
    // Where 64 rows do not apply, the 16-row launch at any batch.
    assert_eq!(dims(256, 56, 458, 100).unwrap().grid, (1024, 1, 1));
    assert_eq!(dims(256, 8, 458, 64).unwrap().grid, (256, 1, 1));
    assert_eq!(dims(256, 56, 1500, 64).unwrap().grid, (1024, 1, 1));
    assert_eq!(dims(256, 56, 472, 64).unwrap().grid, (256, 1, 1));
    assert_eq!(dims(256, 56, 473, 64).unwrap().grid, (1024, 1, 1));
    assert!(dims_with(Tiling::Rows64, 1, 56, 458, 100).is_err());
    assert!(dims_with(Tiling::Rows64, 1, 8, 458, 64).is_err());
    assert!(dims_with(Tiling::Rows64, 1, 56, 1500, 64).is_err());
    // Few keys: 64 rows would need less shared memory than 16, which the kernel could not tell
    // apart.
    assert!(dims_with(Tiling::Rows64, 1, 17, 65, 13).is_err());
    assert!(dims_with(Tiling::Rows64, 1, 40, 200, 30).is_ok());
    assert_eq!(padded_dim(1), 32);
    assert_eq!(padded_dim(33), 64);
    assert_eq!(padded_dim(65), 128);
    assert!(dims(1, 1, 1, 129).is_err());
    assert!(dims(1, 1, 0, 64).is_err());
    assert!(dims(1, 1, 5000, 64).is_err());
    assert!(dims(1, 1, 1500, 64).is_ok());
}

#[test]
fn twin_checks_the_launch() {
    let (tq, tk, d, cap) = (3, 5, 8, 6);
    let q = data(3, tq * d);
    let kv = data(4, cap * 2 * d);
    let mut out = vec![f32::NAN; tq * d];
    let args = |out: &mut [f32], tk: i64| {
        [
            Arg::Ptr(DevPtr(out.as_mut_ptr() as u64)),
            Arg::Ptr(DevPtr(q.as_ptr() as u64)),
            Arg::Ptr(DevPtr(kv.as_ptr() as u64)),
            Arg::I64(1),
            Arg::I64(1),
            Arg::I64(tq as i64),
            Arg::I64(tk),
            Arg::I64(d as i64),
            Arg::I64(cap as i64),
            Arg::F32(0.5),
        ]
    };
    let good = dims(1, tq, tk, d).unwrap();
    let mut small = good;
    small.shared_bytes -= 4;
    let mut narrow = good;
    narrow.block.0 = 128;
    // SAFETY: q holds tq rows of d, kv cap frames of 2d, out tq rows of d: what these
    // arguments address.
    unsafe {
        assert!(
            SDPA_TF32X3
                .run_host(&small, &args(&mut out, tk as i64))
                .is_err()
        );
        assert!(
            SDPA_TF32X3
                .run_host(&narrow, &args(&mut out, tk as i64))
                .is_err()
        );
        assert!(SDPA_TF32X3.run_host(&good, &args(&mut out, 7)).is_err());
        assert!(out.iter().all(|x| x.is_nan()), "written before the checks");
        SDPA_TF32X3
            .run_host(&good, &args(&mut out, tk as i64))
            .unwrap();
    }
    let mut packed = vec![0.0; tk * 2 * d];
    packed.copy_from_slice(&kv[..tk * 2 * d]);
    assert_eq!(out, run(attention, &q, &packed, tq, tk, d, 0.5));
}
