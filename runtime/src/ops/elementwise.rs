//! Elementwise kernels: activations, residual adds, the guided Euler step, timestep features,
//! and the half-precision casts: rounding to f16 values kept in f32 storage (`ROUND_F16`), the
//! fp16 twins of the Euler step and of the timestep features.

use dcc_kernels as k;

use super::{Ctx, OpError, Tensor, Work, disjoint, int, operand, packed, ptr};
use dcc_kernels::Arg;

/// An activation of the `ACT` kernel (and of the fused LayerNorm im2col).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Act {
    Silu,
    Mish,
    GeluTanh,
    /// Leaky ReLU with this negative slope.
    LeakyRelu(f32),
    /// Multiplication by a constant.
    Scale(f32),
}

impl Act {
    /// The kernel's `(op, alpha)` arguments (alpha 0 where the activation takes none).
    pub(crate) fn code(self) -> (i32, f32) {
        match self {
            Act::Silu => (k::act::SILU, 0.0),
            Act::Mish => (k::act::MISH, 0.0),
            Act::GeluTanh => (k::act::GELU_TANH, 0.0),
            Act::LeakyRelu(a) => (k::act::LEAKY_RELU, a),
            Act::Scale(a) => (k::act::SCALE, a),
        }
    }
}

/// `x = f(x)` in place over a packed view (`ACT`, one thread per element).
pub fn act(cx: &Ctx<'_>, x: Tensor<'_>, f: Act) -> Result<(), OpError> {
    packed("act", "x", &x)?;
    let (op, alpha) = f.code();
    let n = x.elems();
    let args = [ptr(&x), int(n), Arg::I32(op), Arg::F32(alpha)];
    cx.work(Work::f32(n, 2 * n));
    // SAFETY: the kernel reads and writes x[0..n] in place, the checked packed view.
    unsafe { cx.launch_linear(&k::act::APPLY, n, &args) }
}

/// `x += y` over packed views of equal dims (`ADD`, one thread per element).
pub fn add(cx: &Ctx<'_>, x: Tensor<'_>, y: Tensor<'_>) -> Result<(), OpError> {
    let op = "add";
    packed(op, "x", &x)?;
    packed(op, "y", &y)?;
    super::dims(op, "y", &y, x.dims())?;
    disjoint(op, &[operand("x", &x, true), operand("y", &y, false)])?;
    let n = x.elems();
    let args = [ptr(&x), ptr(&y), int(n)];
    cx.work(Work::f32(n, 3 * n));
    // SAFETY: the kernel writes x[0..n] and reads y[0..n]: the checked packed views, which do
    // not overlap.
    unsafe { cx.launch_linear(&k::elementwise::ADD, n, &args) }
}

/// Classifier-free guidance and one Euler step of a batch of sessions, in place: for each
/// session `s`, `x[s] += dt · ((1 + cfg) · v[s, 0] − cfg · v[s, 1])`; `x` packed `[batch, e...]`
/// (the solver rows of `batch` sessions), `v` packed `[batch, 2, e...]` (each session's
/// conditional and unconditional velocities) (`CFG_EULER`, one launch for every session: one
/// thread per element of `x`, each element's arithmetic that of one session's step).
pub fn cfg_euler(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    v: Tensor<'_>,
    cfg: f32,
    dt: f32,
) -> Result<(), OpError> {
    euler_by(cx, "cfg_euler", &k::elementwise::CFG_EULER, x, v, (cfg, dt))
}

/// [`cfg_euler`] in the vendor's fp16 mode: every operation's result rounded to f16
/// (`CFG_EULER_F16`); `x` holds f16 values before and after.
pub fn cfg_euler_f16(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    v: Tensor<'_>,
    cfg: f32,
    dt: f32,
) -> Result<(), OpError> {
    euler_by(
        cx,
        "cfg_euler_f16",
        &k::elementwise::CFG_EULER_F16,
        x,
        v,
        (cfg, dt),
    )
}

fn euler_by(
    cx: &Ctx<'_>,
    op: &'static str,
    kernel: &'static k::KernelDef,
    x: Tensor<'_>,
    v: Tensor<'_>,
    (cfg, dt): (f32, f32),
) -> Result<(), OpError> {
    packed(op, "x", &x)?;
    packed(op, "v", &v)?;
    let batched = match (x.dims().split_first(), v.dims()) {
        (Some((&b, e)), &[vb, 2, ref ve @ ..]) => vb == b && ve == e,
        _ => false,
    };
    if !batched {
        let want = match x.dims().split_first() {
            Some((b, e)) => format!("[{b}, 2, {e:?}]"),
            None => "[batch, 2, ...] beside x [batch, ...]".into(),
        };
        return Err(OpError::shape(op, "v", want, v.dims()));
    }
    disjoint(op, &[operand("x", &x, true), operand("v", &v, false)])?;
    let n = x.elems();
    // elements of one session (a batch of none queues nothing: n = 0)
    let m = n.checked_div(x.dims()[0]).unwrap_or(0);
    let args = [
        ptr(&x),
        ptr(&v),
        int(n),
        int(m),
        Arg::F32(cfg),
        Arg::F32(dt),
    ];
    cx.work(Work::f32(5 * n, 4 * n));
    // SAFETY: the kernel writes x[0..n] and reads v[0..2n] (session s's m elements of x at s·m,
    // its 2m of v at 2·s·m): the checked packed views, which do not overlap.
    unsafe { cx.launch_linear(kernel, n, &args) }
}

/// The rows a round launch covers: a packed view of any rank is one row of all its elements;
/// a 2-D view `[rows, cols]` with unit column stride is `rows` rows `ld` apart (`ld ≥ cols`).
fn round_rows(op: &'static str, x: &Tensor<'_>) -> Result<(usize, usize, usize), OpError> {
    if x.is_packed() {
        return Ok((1, x.elems(), x.elems()));
    }
    match (x.dims(), x.strides()) {
        (&[rows, cols], &[ld, 1]) if ld >= cols => Ok((rows, cols, ld)),
        (d, _) => Err(OpError::shape(
            op,
            "x",
            "packed, or [rows, cols] with unit column stride and rows apart",
            d,
        )),
    }
}

/// `x = rn16(x)` in place: every element the nearest f16 value (round to nearest even, overflow
/// to ±inf, as `__float2half_rn`), kept in f32 (`ROUND_F16`, one thread per element). `x` is
/// packed, or `[rows, cols]` with unit column stride (rows of a cache's new frames). One of the
/// vendor's fp16 cast points where no kernel of ours computes the value.
pub fn round_f16(cx: &Ctx<'_>, x: Tensor<'_>) -> Result<(), OpError> {
    let (rows, cols, ld) = round_rows("round_f16", &x)?;
    let n = rows * cols;
    let args = [ptr(&x), int(rows), int(cols), int(ld)];
    cx.work(Work::f32(n, 2 * n));
    // SAFETY: the kernel reads and writes `rows` rows of `cols` elements `ld` apart from x's
    // address: the checked view (packed, or 2-D with unit column stride and ld ≥ cols).
    unsafe { cx.launch_linear(&k::elementwise::ROUND_F16, n, &args) }
}

/// `x = rn16(c + x) − c` in place (`ROUND_F16_SHIFTED`), `x` as [`round_f16`]'s: the f16 sum of
/// `x` and the constant `c`, stored as its offset from `c`, for a kernel that adds `c` itself
/// (the modulate's `1 + scale`, which the vendor's fp16 mode rounds before the product).
pub fn round_f16_shifted(cx: &Ctx<'_>, x: Tensor<'_>, c: f32) -> Result<(), OpError> {
    let (rows, cols, ld) = round_rows("round_f16_shifted", &x)?;
    let n = rows * cols;
    let args = [ptr(&x), int(rows), int(cols), int(ld), Arg::F32(c)];
    cx.work(Work::f32(2 * n, 2 * n));
    // SAFETY: as round_f16: the checked rows of x, read and written in place.
    unsafe { cx.launch_linear(&k::elementwise::ROUND_F16_SHIFTED, n, &args) }
}

/// The vendor's fp16 gated residual, in place: `x[r, j] = rn16(x[r, j] + rn16(gate[j] · y[r,
/// j]))`, `x` and `y` packed `[rows, dim]`, `gate` packed `[dim]` (`GATED_ADD_F16`).
pub fn gated_add_f16(
    cx: &Ctx<'_>,
    x: Tensor<'_>,
    gate: Tensor<'_>,
    y: Tensor<'_>,
) -> Result<(), OpError> {
    let op = "gated_add_f16";
    packed(op, "x", &x)?;
    packed(op, "y", &y)?;
    packed(op, "gate", &gate)?;
    let (rows, dim) = match x.dims() {
        &[r, d] => (r, d),
        d => return Err(OpError::shape(op, "x", "[rows, dim]", d)),
    };
    super::dims(op, "y", &y, x.dims())?;
    super::dims(op, "gate", &gate, &[dim])?;
    disjoint(
        op,
        &[
            operand("x", &x, true),
            operand("gate", &gate, false),
            operand("y", &y, false),
        ],
    )?;
    let n = rows * dim;
    let args = [ptr(&x), ptr(&gate), ptr(&y), int(rows), int(dim)];
    cx.work(Work::f32(4 * n, 3 * n));
    // SAFETY: the kernel writes x[0..n] and reads gate[0..dim] and y[0..n]: the checked packed
    // views, which do not overlap.
    unsafe { cx.launch_linear(&k::elementwise::GATED_ADD_F16, n, &args) }
}

/// Sinusoidal timestep features `[cos ‖ sin]` of `t · scale` into a packed `[dim]` view
/// (`TIMESTEP_EMBEDDING`, one thread per frequency).
pub fn timestep_embedding(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    t: f32,
    scale: f32,
    max_period: f32,
) -> Result<(), OpError> {
    timestep_by(
        cx,
        "timestep_embedding",
        &k::embed::TIMESTEP,
        out,
        (t, scale, max_period),
    )
}

/// [`timestep_embedding`] in the vendor's fp16 mode (`TIMESTEP_F16`): `t · scale`, the
/// frequencies, their products, cos and sin each rounded to f16.
pub fn timestep_embedding_f16(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    t: f32,
    scale: f32,
    max_period: f32,
) -> Result<(), OpError> {
    let kernel = &k::elementwise::TIMESTEP_F16;
    timestep_by(
        cx,
        "timestep_embedding_f16",
        kernel,
        out,
        (t, scale, max_period),
    )
}

fn timestep_by(
    cx: &Ctx<'_>,
    op: &'static str,
    kernel: &'static k::KernelDef,
    out: Tensor<'_>,
    (t, scale, max_period): (f32, f32, f32),
) -> Result<(), OpError> {
    let dim = match out.dims() {
        &[d] if d.is_multiple_of(2) => d,
        d => return Err(OpError::shape(op, "out", "[even dim]", d)),
    };
    packed(op, "out", &out)?;
    let args = [
        ptr(&out),
        int(dim),
        Arg::F32(t),
        Arg::F32(scale),
        Arg::F32(max_period),
    ];
    cx.work(Work::f32(dim, dim));
    // SAFETY: the kernel writes out[0..dim], the checked packed view.
    unsafe { cx.launch_linear(kernel, dim / 2, &args) }
}
