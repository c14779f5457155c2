//! `y = x · Wᵀ + b` through [`crate::Backend::gemm`] / [`crate::Backend::gemm_bias`].

use crate::backend::Gemm;

use super::{Ctx, OpError, Tensor, Work, dims, disjoint, matrix, operand, packed};

/// `y[rows, out] = x[rows, in] · Wᵀ (+ b)`: `w` packed `[out, in]` (a `torch.nn.Linear`
/// weight), `b` packed `[out]` added in the GEMM's epilogue (as `addmm`, no separate broadcast),
/// `x` and `y` with unit column stride and their own leading dimensions. One column-major GEMM
/// `C[out × rows] = Wᵀ-op · X` with `m = out, n = rows, k = in, lda = in, ldb = ld(x), ldc =
/// ld(y)`, batch 1. Profile category `gemv (rows = 1)` for a single row or a projection more
/// than 16× wider than its input, `gemm` otherwise.
pub fn linear(
    cx: &Ctx<'_>,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
) -> Result<(), OpError> {
    let op = "linear";
    packed(op, "w", &w)?;
    let (o, i) = match w.dims() {
        &[o, i] => (o, i),
        d => return Err(OpError::shape(op, "w", "[out, in]", d)),
    };
    let (rows, xi, ldx) = matrix(op, "x", &x)?;
    let (_, _, ldy) = matrix(op, "y", &y)?;
    if xi != i {
        return Err(OpError::shape(op, "x", format!("[rows, {i}]"), x.dims()));
    }
    dims(op, "y", &y, &[rows, o])?;
    let bias = match &b {
        Some(b) => {
            dims(op, "b", b, &[o])?;
            packed(op, "b", b)?;
            operand("b", b, false)
        }
        None => ("b", (0, 0), false),
    };
    disjoint(
        op,
        &[
            operand("y", &y, true),
            operand("x", &x, false),
            operand("w", &w, false),
            bias,
        ],
    )?;
    let g = Gemm {
        trans_a: true,
        trans_b: false,
        m: o,
        n: rows,
        k: i,
        alpha: 1.0,
        a: w.ptr(),
        lda: i,
        stride_a: 0,
        b: x.ptr(),
        ldb: ldx,
        stride_b: 0,
        beta: 0.0,
        c: y.ptr(),
        ldc: ldy,
        stride_c: 0,
        batch: 1,
    };
    cx.work(Work::f32(2 * rows * i * o, rows * i + o * i + rows * o + o));
    cx.mark(
        op,
        if o > 16 * i || rows == 1 {
            "gemv (rows = 1)"
        } else {
            "gemm"
        },
    )?;
    match b {
        Some(b) => cx.be.gemm_bias(&g, b.ptr()),
        None => cx.be.gemm(&g),
    }
    .map_err(|error| OpError::Backend { op, error })
}
