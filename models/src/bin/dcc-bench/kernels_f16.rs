//! The half-precision rows of `dcc-bench kernels`: the `gemm.linear_f16_*` variants
//! (`GemmPath::Half`), which read binary16 weights and bias and write binary16 values, so they
//! are judged against their own host twin (`dcc_kernels::gemm::f16`, within its derived bound)
//! and against cuBLAS's fp32 result at `--half-tol`, not `--tol`.

use dcc_runtime::kernels::gemm::f16::{self as h16, F16Variant};
use half::f16;

/// `f16_16x32` for `gemm.linear_f16_16x32` (the row label and `--variants` name).
pub fn label(v: &F16Variant) -> &'static str {
    v.kernel.name.trim_start_matches("gemm.linear_")
}

/// The variant labelled `name` (`f16_64x64`, ...).
pub fn by_label(name: &str) -> Option<&'static F16Variant> {
    h16::variant(&format!("gemm.linear_{name}"))
}

/// `v` rounded to binary16 (nearest, ties to even): the weights the half path stores.
pub fn halves(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&x| f16::from_f32(x)).collect()
}

/// Whether every output of `got` (a half kernel's `y`, `[rows, out]` packed, for `x`
/// `[rows, in]`, the weight `w` `[out, in]` and bias `b` `[out]` before their rounding to
/// binary16) lies within `gemm::f16::bound` of the half twin's on the same operands.
pub fn twin_ok(
    (rows, i, o): (usize, usize, usize),
    x: &[f32],
    w: &[f32],
    b: &[f32],
    got: &[f32],
) -> bool {
    let (w, b) = (halves(w), halves(b));
    let mut want = vec![f32::NAN; rows * o];
    if got.len() != rows * o
        || h16::linear(&mut want, o, x, i, &w, Some(&b), rows, i, o, None).is_err()
    {
        return false;
    }
    (0..rows * o).all(|e| {
        let (xr, wr) = (&x[e / o * i..][..i], &w[e % o * i..][..i]);
        let t: f64 = xr
            .iter()
            .zip(wr)
            .map(|(p, q)| (h16::rn16(*p) as f64 * q.to_f64()).abs())
            .sum();
        let (g, f) = (got[e], want[e]);
        (g as f64 - f as f64).abs() <= h16::bound(i, t, g, f)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_every_variant_and_the_twin_check_can_fail() {
        for v in h16::VARIANTS {
            assert!(std::ptr::eq(by_label(label(v)).unwrap(), *v));
        }
        assert_eq!(label(&h16::V16X32), "f16_16x32");
        assert!(by_label("16x32").is_none());
        let (rows, i, o) = (3, 40, 5);
        let x: Vec<f32> = (0..rows * i).map(|v| (v % 7) as f32 * 0.25 - 0.5).collect();
        let w: Vec<f32> = (0..o * i).map(|v| (v % 5) as f32 * 0.125 - 0.25).collect();
        let b = vec![0.5f32; o];
        let mut y = vec![0.0f32; rows * o];
        h16::linear(
            &mut y,
            o,
            &x,
            i,
            &halves(&w),
            Some(&halves(&b)),
            rows,
            i,
            o,
            None,
        )
        .unwrap();
        assert!(twin_ok((rows, i, o), &x, &w, &b, &y));
        y[4] += 0.5;
        assert!(!twin_ok((rows, i, o), &x, &w, &b, &y));
        assert!(!twin_ok((rows, i, o), &x, &w, &b, &y[1..]));
    }
}
