//! `y = x · Wᵀ + b` through the deterministic, batch-invariant `gemm.linear_*` kernels
//! (`dcc_kernels::gemm`).

use dcc_kernels::Arg;
use dcc_kernels::gemm::{self, Variant};

use super::{Act, Ctx, OpError, Tensor, dims, disjoint, int, matrix, operand, packed, ptr};

/// `y[rows, out] = x[rows, in] · Wᵀ (+ b)`: `w` packed `[out, in]` (a `torch.nn.Linear`
/// weight), `b` packed `[out]` added in the kernel's epilogue (as `addmm`, no separate
/// broadcast), `x` and `y` with unit column stride and their own leading dimensions (rows of `y`
/// must not overlap; rows of `x` may, as a convolution's rows over its input do). One launch
/// of the variant [`gemm::pick`] chooses for `rows × out` (every variant computes the same bits,
/// whatever the rows: `dcc_kernels::gemm`'s module docs give the order), bit-identical on CUDA
/// and Host. Nothing is queued when `rows` or `out` is 0 (nothing to write). Profile category
/// `gemv (rows = 1)` for a single row or a projection more than 16× wider than its input, `gemm`
/// otherwise.
pub fn linear(
    cx: &Ctx<'_>,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
) -> Result<(), OpError> {
    linear_with(cx, picked(&w, &y), w, b, x, y, None)
}

/// [`linear`] then the activation `f` of every output, in one launch (the kernel's epilogue):
/// the same bits as [`linear`] followed by [`super::act`] over `y`, one launch fewer.
pub fn linear_act(
    cx: &Ctx<'_>,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Act,
) -> Result<(), OpError> {
    linear_with(cx, picked(&w, &y), w, b, x, y, Some(f))
}

/// The variant [`gemm::pick`] chooses for `y`'s rows and `w`'s outputs (views not yet checked:
/// a malformed one is refused by [`linear_with`]).
fn picked(w: &Tensor<'_>, y: &Tensor<'_>) -> &'static Variant {
    let (rows, out) = (y.dims().first().copied(), w.dims().first().copied());
    gemm::pick(rows.unwrap_or(0), out.unwrap_or(0))
}

/// [`linear`] (`f = None`) or [`linear_act`] with the kernel variant chosen by the caller
/// (benchmarks and the variant tests; the result is the same bits for every variant).
pub fn linear_with(
    cx: &Ctx<'_>,
    v: &'static Variant,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
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
    if rows > 1 && ldy < o {
        return Err(OpError::layout(
            op,
            "y",
            format!("[ld >= {o}, 1]"),
            y.strides(),
        ));
    }
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
    if rows == 0 || o == 0 {
        return Ok(());
    }
    let (act, alpha) = f.map_or((gemm::NO_ACT, 0.0), Act::code);
    let launch = v
        .dims(rows, o)
        .ok_or_else(|| OpError::arg(op, "y", format!("{rows} × {o} outputs exceed a grid")))?;
    let args = [
        ptr(&y),
        int(ldy),
        ptr(&x),
        int(ldx),
        ptr(&w),
        // Without a bias the kernel reads nothing there; w stands in (a live buffer, as the
        // backends require of every pointer argument).
        b.as_ref().map_or_else(|| ptr(&w), ptr),
        Arg::I32(b.is_some().into()),
        Arg::I32(act),
        Arg::F32(alpha),
        int(rows),
        int(i),
        int(o),
    ];
    cx.mark(
        op,
        if o > 16 * i || rows == 1 {
            "gemv (rows = 1)"
        } else {
            "gemm"
        },
    )?;
    // SAFETY: the kernel reads `rows` rows of `in` floats at stride ldx of x, `out · in` floats
    // of w and, with a bias, `out` of b, and writes `rows` rows of `out` floats at stride ldy of y (the launch
    // covers exactly rows × out outputs, `Variant::dims`): the checked views; y overlaps no
    // input.
    unsafe { cx.be.launch(v.kernel, launch, &args) }.map_err(|error| OpError::Backend { op, error })
}
