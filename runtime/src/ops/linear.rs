//! `y = x · Wᵀ + b` on one of four GEMM paths ([`GemmPath`], chosen per [`Ctx`]): the backend's
//! GEMM ([`crate::Backend::gemm`] / [`crate::Backend::gemm_bias`]: cuBLAS / cuBLASLt on a
//! device, an ordered loop on the Host), the deterministic, batch-invariant fp32 `gemm.linear_*`
//! kernels (`dcc_kernels::gemm`), their 3xTF32 tensor-core sibling `gemm.linear_tf32x3`
//! (`dcc_kernels::gemm::tf32`), or the half-precision `gemm.linear_f16_*` over binary16 weights
//! (`dcc_kernels::gemm::f16`). The weights' element type follows the path ([`WeightElem`]):
//! `f32` on the first three, `half::f16` on [`GemmPath::Half`].

use dcc_kernels::gemm::f16::{self as h16, F16Variant};
use dcc_kernels::gemm::tf32_tiles::Tf32Variant;
use dcc_kernels::gemm::{self, Variant};
use dcc_kernels::{Arg, KernelDef};
use half::f16;

use crate::backend::Gemm;
use crate::contract::DType;

use super::{
    Act, Ctx, Elem, OpError, Tensor, Work, dims, disjoint, int, matrix, operand, packed, ptr,
};

/// Which GEMM a [`linear`] runs. Both are deterministic from run to run; they differ in what
/// else they promise and in speed (`dcc-bench kernels` measures both at the model's shapes).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum GemmPath {
    /// The backend's GEMM: cuBLAS (`gemm`) and cuBLASLt with a bias epilogue (`gemm_bias`),
    /// TF32 off, on CUDA; the ordered-loop twin on the Host. On an H100 at one session's 112
    /// rows the two paths are within a few percent of each other over the DiT's linears (each
    /// faster at some shapes); with many sessions batched cuBLAS is about twice as fast. cuBLAS
    /// picks its algorithm by shape, so a row's result may depend on how many rows share the
    /// launch, and CUDA and Host agree within rounding only.
    #[default]
    Backend,
    /// The `gemm.linear_*` kernels: one k order fixed by K alone, so a row's bits never depend
    /// on the rows that share the launch (batch invariance, what batching sessions needs), and
    /// CUDA equals Host bit for bit. Activations fuse into the epilogue ([`linear_act`]).
    Invariant,
    /// `gemm.linear_tf32x3` (`dcc_kernels::gemm::tf32`): every product as three TF32 products
    /// on tensor cores (big·big, big·small, small·big), one order fixed by K alone, so batch
    /// invariant on CUDA as [`GemmPath::Invariant`] is. Not bit-equal to its host twin (an
    /// `mma`'s internal accumulation is unspecified): both stay within a derived bound of the
    /// fp32 twin (`dcc_kernels::gemm::tf32::bound`). Activations fuse into the epilogue.
    InvariantTf32x3,
    /// `gemm.linear_f16_*` (`dcc_kernels::gemm::f16`): binary16 weights and bias (loaded so,
    /// [`GemmPath::weight_dtype`]), `x` rounded to binary16, fp16 products accumulated in fp32
    /// on tensor cores in an order fixed by K alone (batch invariant on CUDA), the bias added in
    /// fp32 and every output rounded to a binary16 value (stored as f32): what a PyTorch linear
    /// computes under `torch.autocast(dtype=float16)` on half weights. A fused activation runs
    /// on that value and is rounded to binary16 again. Not bit-equal to its host twin (an
    /// `mma`'s internal accumulation is unspecified): within `dcc_kernels::gemm::f16::bound`.
    Half,
}

impl GemmPath {
    /// Whether a row's result never depends on the rows sharing the launch (every path but the
    /// backend's): what batching independent streams exactly needs.
    pub fn batch_invariant(self) -> bool {
        !matches!(self, GemmPath::Backend)
    }

    /// The kernels [`linear`] and [`linear_act`] may launch on this path: none on
    /// [`GemmPath::Backend`] (its GEMMs are the backend's; `linear_act`'s activation is an
    /// `act.apply` launch, one of [`dcc_kernels::fixed`]), every variant [`gemm::pick`] can
    /// choose ([`gemm::PICKED`]) on [`GemmPath::Invariant`], every 3xTF32 variant
    /// `gemm::tf32_tiles::pick` can choose ([`gemm::tf32_tiles::PICKED`]) on
    /// [`GemmPath::InvariantTf32x3`].
    pub fn linear_kernels(self) -> Vec<&'static KernelDef> {
        match self {
            GemmPath::Backend => Vec::new(),
            GemmPath::Invariant => gemm::PICKED.iter().map(|v| v.kernel).collect(),
            GemmPath::InvariantTf32x3 => {
                gemm::tf32_tiles::PICKED.iter().map(|v| v.kernel).collect()
            }
            GemmPath::Half => h16::KERNELS.to_vec(),
        }
    }

    /// The element type of the weights and biases a [`linear`] on this path reads: `F16` on
    /// [`GemmPath::Half`], `F32` on every other path. A layer stores its weights in it (converted
    /// once at load, rounding to nearest even), so a flow is built for its path.
    pub fn weight_dtype(self) -> DType {
        match self {
            GemmPath::Half => DType::F16,
            _ => DType::F32,
        }
    }

    /// Every kernel the ops may launch with their linears on this path: the fixed families
    /// ([`dcc_kernels::fixed`]) and [`GemmPath::linear_kernels`]. What a model preloads (a
    /// CUDA process compiles the modules of exactly these), so that the backend path never
    /// compiles the invariant linear.
    pub fn op_kernels(self) -> Vec<&'static KernelDef> {
        let mut k = dcc_kernels::fixed();
        k.extend(self.linear_kernels());
        k
    }
}

/// A linear's weight and optional bias in the element type of the path that reads them.
#[derive(Copy, Clone, Debug)]
pub enum LinearWeights<'a> {
    /// `f32`: [`GemmPath::Backend`], [`GemmPath::Invariant`], [`GemmPath::InvariantTf32x3`].
    F32 {
        w: Tensor<'a>,
        b: Option<Tensor<'a>>,
    },
    /// Binary16: [`GemmPath::Half`].
    F16 {
        w: Tensor<'a, f16>,
        b: Option<Tensor<'a, f16>>,
    },
}

/// The element types a linear's weights may have (`f32`, `half::f16`): [`linear`] takes either
/// and refuses the one its context's path does not read ([`GemmPath::weight_dtype`]).
pub trait WeightElem: Elem {
    /// The weight and bias as [`LinearWeights`].
    fn weights<'a>(w: Tensor<'a, Self>, b: Option<Tensor<'a, Self>>) -> LinearWeights<'a>;
}

impl WeightElem for f32 {
    fn weights<'a>(w: Tensor<'a>, b: Option<Tensor<'a>>) -> LinearWeights<'a> {
        LinearWeights::F32 { w, b }
    }
}

impl WeightElem for f16 {
    fn weights<'a>(w: Tensor<'a, f16>, b: Option<Tensor<'a, f16>>) -> LinearWeights<'a> {
        LinearWeights::F16 { w, b }
    }
}

/// `y[rows, out] = x[rows, in] · Wᵀ (+ b)`: `w` packed `[out, in]` (a `torch.nn.Linear`
/// weight), `b` packed `[out]` added in the epilogue (as `addmm`, no separate broadcast), `x` and
/// `y` with unit column stride and their own leading dimensions (rows of `y` must not overlap;
/// rows of `x` may, as a convolution's rows over its input do), on the context's [`GemmPath`].
/// `w` and `b` are `f32` on every path but [`GemmPath::Half`], which reads them as binary16
/// (another element type is an [`OpError::Arg`] on `w`, nothing queued).
/// [`GemmPath::Invariant`]: one launch of the variant [`gemm::pick`] chooses for `rows × out`
/// (every variant computes the same bits, whatever the rows: `dcc_kernels::gemm`'s module docs
/// give the order), bit-identical on CUDA and Host; nothing is queued when `rows` or `out` is 0
/// (nothing to write). [`GemmPath::Half`]: one launch of the variant
/// `dcc_kernels::gemm::f16::pick` chooses, every output a binary16 value ([`linear_f16`]).
/// [`GemmPath::Backend`]: one backend GEMM (see there). Profile category `gemv (rows = 1)` for
/// a single row or a projection more than 16× wider than its input, `gemm` otherwise.
pub fn linear<'a, W: WeightElem>(
    cx: &Ctx<'_>,
    w: Tensor<'a, W>,
    b: Option<Tensor<'a, W>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
) -> Result<(), OpError> {
    on_path(cx, W::weights(w, b), x, y, None)
}

/// [`linear`] then the activation `f` of every output (`y` packed): on
/// [`GemmPath::Invariant`] in one launch (the kernel's epilogue), the same bits as [`linear`]
/// followed by [`super::act`] over `y`; on [`GemmPath::Backend`] as those two launches; on
/// [`GemmPath::Half`] in one launch, the activation's result rounded to binary16.
pub fn linear_act<'a, W: WeightElem>(
    cx: &Ctx<'_>,
    w: Tensor<'a, W>,
    b: Option<Tensor<'a, W>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Act,
) -> Result<(), OpError> {
    on_path(cx, W::weights(w, b), x, y, Some(f))
}

/// [`linear`] (`f = None`) or [`linear_act`] on the context's path, refusing weights of the
/// element type it does not read.
fn on_path(
    cx: &Ctx<'_>,
    wb: LinearWeights<'_>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
) -> Result<(), OpError> {
    let path = cx.gemm_path();
    match (path, wb) {
        (GemmPath::Half, LinearWeights::F16 { w, b }) => linear_f16(cx, w, b, x, y, f),
        (GemmPath::Half, LinearWeights::F32 { .. }) | (_, LinearWeights::F16 { .. }) => {
            let found = match wb {
                LinearWeights::F32 { .. } => DType::F32,
                LinearWeights::F16 { .. } => DType::F16,
            };
            Err(OpError::arg(
                "linear",
                "w",
                format!(
                    "{} weights on GemmPath::{path:?}, which reads {} weights (a layer loads its \
                     weights for the path it runs on)",
                    found.name(),
                    path.weight_dtype().name()
                ),
            ))
        }
        (GemmPath::Backend, LinearWeights::F32 { w, b }) => {
            cublas_linear(cx, w, b, x, y)?;
            match f {
                Some(f) => super::act(cx, y, f),
                None => Ok(()),
            }
        }
        (GemmPath::Invariant, LinearWeights::F32 { w, b }) => {
            linear_with(cx, picked(&w, &y), w, b, x, y, f)
        }
        (GemmPath::InvariantTf32x3, LinearWeights::F32 { w, b }) => {
            linear_tf32x3(cx, w, b, x, y, f)
        }
    }
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
    launch_linear(cx, v.kernel, |rows, o| v.dims(rows, o), w, b, x, y, f)
}

/// [`linear`] (`f = None`) or [`linear_act`] on [`GemmPath::InvariantTf32x3`]: one launch of
/// the 3xTF32 variant `gemm::tf32_tiles::pick` chooses for `y`'s rows and `w`'s outputs
/// (every variant computes the bits of `gemm.linear_tf32x3`; benchmarks call it
/// directly, whatever the context's path).
pub fn linear_tf32x3(
    cx: &Ctx<'_>,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
) -> Result<(), OpError> {
    let rows = y.dims().first().copied().unwrap_or(0);
    let out = w.dims().first().copied().unwrap_or(0);
    let v = gemm::tf32_tiles::pick(rows, out);
    linear_tf32x3_with(cx, v, w, b, x, y, f)
}

/// [`linear_tf32x3`] with the 3xTF32 variant chosen by the caller (benchmarks and the variant
/// tests; `gemm::tf32_tiles::BASE` is `gemm.linear_tf32x3` itself).
pub fn linear_tf32x3_with(
    cx: &Ctx<'_>,
    v: &'static Tf32Variant,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
) -> Result<(), OpError> {
    launch_linear(cx, v.kernel, |rows, o| v.dims(rows, o), w, b, x, y, f)
}

/// [`linear`] (`f = None`) or [`linear_act`] on [`GemmPath::Half`]: one launch of the
/// `gemm.linear_f16_*` variant `dcc_kernels::gemm::f16::pick` chooses for `rows × out` (every
/// variant computes the same bits; benchmarks call it directly, whatever the context's path).
pub fn linear_f16(
    cx: &Ctx<'_>,
    w: Tensor<'_, f16>,
    b: Option<Tensor<'_, f16>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
) -> Result<(), OpError> {
    let (rows, out) = (y.dims().first().copied(), w.dims().first().copied());
    let v = h16::pick(rows.unwrap_or(0), out.unwrap_or(0));
    linear_f16_with(cx, v, w, b, x, y, f)
}

/// [`linear_f16`] with the tile variant chosen by the caller (benchmarks and the variant tests;
/// the result is the same bits for every variant).
pub fn linear_f16_with(
    cx: &Ctx<'_>,
    v: &'static F16Variant,
    w: Tensor<'_, f16>,
    b: Option<Tensor<'_, f16>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
) -> Result<(), OpError> {
    launch_linear(cx, v.kernel, |rows, o| v.dims(rows, o), w, b, x, y, f)
}

/// One launch of an invariant linear kernel `k` (the `gemm` family's argument list; weights of
/// `W`: `f32`, or binary16 for the half kernels) with the geometry `dims` gives for `rows × out`
/// outputs.
#[allow(clippy::too_many_arguments)]
fn launch_linear<W: Elem>(
    cx: &Ctx<'_>,
    k: &'static KernelDef,
    dims: impl Fn(usize, usize) -> Option<dcc_kernels::LaunchDims>,
    w: Tensor<'_, W>,
    b: Option<Tensor<'_, W>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
    f: Option<Act>,
) -> Result<(), OpError> {
    let op = "linear";
    let Shape {
        rows,
        i,
        o,
        ldx,
        ldy,
    } = checked(op, &w, b.as_ref(), &x, &y)?;
    if rows > 1 && ldy < o {
        return Err(OpError::layout(
            op,
            "y",
            format!("[ld >= {o}, 1]"),
            y.strides(),
        ));
    }
    if rows == 0 || o == 0 {
        return Ok(());
    }
    let (act, alpha) = f.map_or((gemm::NO_ACT, 0.0), Act::code);
    let launch = dims(rows, o)
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
    marked(cx, op, rows, i, o, std::mem::size_of::<W>())?;
    // SAFETY: the kernel reads `rows` rows of `in` floats at stride ldx of x, `out · in` elements
    // of w and, with a bias, `out` of b (of the kernel's weight type, `W`), and writes `rows`
    // rows of `out` floats at stride ldy of y (the launch covers exactly rows × out outputs,
    // `Variant::dims` / `Tf32Variant::dims` / `F16Variant::dims`): the checked views; y overlaps
    // no input.
    unsafe { cx.be.launch(k, launch, &args) }.map_err(|error| OpError::Backend { op, error })
}

/// [`GemmPath::Backend`]: `w` packed `[out, in]`, `b` packed `[out]` added in the GEMM's
/// epilogue (as `addmm`, no separate broadcast), `x` and `y` with unit column stride and their own
/// leading dimensions. One column-major GEMM `C[out × rows] = Wᵀ-op · X` with `m = out, n =
/// rows, k = in, lda = in, ldb = ld(x), ldc = ld(y)`, batch 1.
fn cublas_linear(
    cx: &Ctx<'_>,
    w: Tensor<'_>,
    b: Option<Tensor<'_>>,
    x: Tensor<'_>,
    y: Tensor<'_>,
) -> Result<(), OpError> {
    let op = "linear";
    let Shape {
        rows,
        i,
        o,
        ldx,
        ldy,
    } = checked(op, &w, b.as_ref(), &x, &y)?;
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
    marked(cx, op, rows, i, o, 4)?;
    match b {
        Some(b) => cx.be.gemm_bias(&g, b.ptr()),
        None => cx.be.gemm(&g),
    }
    .map_err(|error| OpError::Backend { op, error })
}

/// A linear's sizes: `rows` of `x`, `i` inputs, `o` outputs, and the leading dimensions.
struct Shape {
    rows: usize,
    i: usize,
    o: usize,
    ldx: usize,
    ldy: usize,
}

/// The checks every GEMM path makes: `w` packed `[out, in]`, `x` `[rows, in]` and `y` `[rows,
/// out]` with unit column stride, `b` packed `[out]`, and `y` overlapping no input.
fn checked<W: Elem>(
    op: &'static str,
    w: &Tensor<'_, W>,
    b: Option<&Tensor<'_, W>>,
    x: &Tensor<'_>,
    y: &Tensor<'_>,
) -> Result<Shape, OpError> {
    packed(op, "w", w)?;
    let (o, i) = match w.dims() {
        &[o, i] => (o, i),
        d => return Err(OpError::shape(op, "w", "[out, in]", d)),
    };
    let (rows, xi, ldx) = matrix(op, "x", x)?;
    let (_, _, ldy) = matrix(op, "y", y)?;
    if xi != i {
        return Err(OpError::shape(op, "x", format!("[rows, {i}]"), x.dims()));
    }
    dims(op, "y", y, &[rows, o])?;
    let bias = match b {
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
            operand("y", y, true),
            operand("x", x, false),
            operand("w", w, false),
            bias,
        ],
    )?;
    Ok(Shape {
        rows,
        i,
        o,
        ldx,
        ldy,
    })
}

/// Declares a linear's work (`wbytes` per weight and bias element, 4 per activation element)
/// and marks it under `gemv (rows = 1)` for a single row or a projection more than 16× wider than
/// its input, `gemm` otherwise.
fn marked(
    cx: &Ctx<'_>,
    op: &'static str,
    rows: usize,
    i: usize,
    o: usize,
    wbytes: usize,
) -> Result<(), OpError> {
    cx.work(Work {
        flops: (2 * rows * i * o) as f64,
        bytes: (4 * (rows * i + rows * o) + wbytes * (o * i + o)) as f64,
    });
    cx.mark(
        op,
        if o > 16 * i || rows == 1 {
            "gemv (rows = 1)"
        } else {
            "gemm"
        },
    )
}
