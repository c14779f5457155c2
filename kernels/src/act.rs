//! Activations (`kernels/cuda/act.cu`): the [`APPLY`] kernel and its host twin, whose body is the
//! slice functions below. Launch: one thread per element, grid-strided.

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::conv::{rd_as, wr_as};
use crate::math::{exp_f32, exp64, mish_f32, sin_f32, tanh_f32};
use crate::twin::{invalid, kdef, wr};

pub static SOURCE: CudaSource = CudaSource {
    name: "act",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/act.cu")
    ),
};

/// [`APPLY`] op code: `torch.nn.SiLU`.
pub const SILU: i32 = 0;
/// [`APPLY`] op code: `torch.nn.Mish`.
pub const MISH: i32 = 1;
/// [`APPLY`] op code: `torch.nn.GELU(approximate="tanh")`.
pub const GELU_TANH: i32 = 2;
/// [`APPLY`] op code: leaky ReLU with slope `alpha`.
pub const LEAKY_RELU: i32 = 3;
/// [`APPLY`] op code: multiply by `alpha`.
pub const SCALE: i32 = 4;

kdef!(
    APPLY,
    "act",
    "apply",
    [Param::Ptr, Param::I64, Param::I32, Param::F32],
    host_apply,
    "`(x, n, op, alpha)` in place: op [`SILU`], [`MISH`], [`GELU_TANH`], [`LEAKY_RELU`] (slope alpha), [`SCALE`] (by alpha)."
);

kdef!(
    SNAKE,
    "act",
    "snake",
    [
        Param::Ptr,
        Param::Ptr,
        Param::Ptr,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64
    ],
    host_snake,
    "`(y, x, alpha, rows, cols, ldy, ldx)`: Snake over channel-major rows ([`snake`]); `y` may be `x` (in place, `ldy = ldx`)."
);
kdef!(
    ELU_F64,
    "act",
    "elu_f64",
    [Param::Ptr, Param::I64],
    host_elu_f64,
    "`(x, n)`: `torch.nn.ELU` in double, in place ([`elu_f64_inplace`])."
);
kdef!(
    DIV,
    "act",
    "div",
    [Param::Ptr, Param::I64, Param::F32],
    host_div,
    "`(x, n, d)`: `x /= d` in place ([`div_inplace`])."
);

pub static KERNELS: &[&crate::KernelDef] = &[&APPLY, &SNAKE, &ELU_F64, &DIV];

/// Snake (BigVGAN's periodic activation, `alpha_logscale=False`) over `[rows, cols]`
/// channel-major blocks: `y[r, c] = x + (1 / (alpha[r] + 1e-9)) · sin(x · alpha[r])²`, the
/// reciprocal and the square as torch evaluates `x + (1.0 / (alpha + 1e-9)) * pow(sin(x *
/// alpha), 2)`. `y = None` writes `x` in place.
pub fn snake(
    y: Option<&mut [f32]>,
    x: &mut [f32],
    alpha: &[f32],
    rows: usize,
    cols: usize,
    ldy: usize,
    ldx: usize,
) {
    let one = |v: f32, a: f32| {
        let inv = 1.0f32 / (a + 1e-9);
        let s = sin_f32(v * a);
        v + inv * (s * s)
    };
    match y {
        Some(y) => {
            for r in 0..rows {
                for c in 0..cols {
                    y[r * ldy + c] = one(x[r * ldx + c], alpha[r]);
                }
            }
        }
        None => {
            for r in 0..rows {
                for c in 0..cols {
                    x[r * ldx + c] = one(x[r * ldx + c], alpha[r]);
                }
            }
        }
    }
}

/// `expm1` in double (`dcc_expm1_64` in `act.cu`): the Taylor series to `x^17` by Horner on
/// `|x| < 0.5` (no cancellation near 0), else `e^x − 1` ([`exp64`]).
pub fn expm1_64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x.abs() < 0.5 {
        let mut p = 1.0 / 355_687_428_096_000.0;
        let mut f = 355_687_428_096_000.0f64;
        for i in 0..16 {
            f /= (16 - i) as f64 + 1.0;
            p = p * x + 1.0 / f;
        }
        return p * x;
    }
    exp64(x) - 1.0
}

/// `torch.nn.ELU()` (alpha 1) in double, in place: `x > 0 ? x : expm1(x)`.
pub fn elu_f64_inplace(x: &mut [f64]) {
    for v in x {
        *v = if *v > 0.0 { *v } else { expm1_64(*v) };
    }
}

/// `x /= d` (torch's true division by a number).
pub fn div_inplace(x: &mut [f32], d: f32) {
    for v in x {
        *v /= d;
    }
}

/// `torch.nn.SiLU` in place: `x / (1 + exp(−x))`.
pub fn silu_inplace(x: &mut [f32]) {
    for v in x {
        *v = *v / (1.0 + exp_f32(-*v));
    }
}

/// `torch.nn.Mish` in place: `x · tanh(log1p(exp(x)))` ([`mish_f32`]).
pub fn mish_inplace(x: &mut [f32]) {
    for v in x {
        *v = mish_f32(*v);
    }
}

/// `torch.nn.GELU(approximate="tanh")` in place:
/// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`.
pub fn gelu_tanh_inplace(x: &mut [f32]) {
    /// √(2/π) rounded to float (the CUDA kernel spells the same bits).
    const BETA: f32 = f32::from_bits(0x3f4c_422a);
    const KAPPA: f32 = 0.044715;
    for v in x {
        let x = *v;
        let cube = x * x * x;
        let inner = BETA * (x + KAPPA * cube);
        *v = 0.5 * x * (1.0 + tanh_f32(inner));
    }
}

/// `F.leaky_relu` (slope 0.01) in place.
pub fn leaky_relu_inplace(x: &mut [f32], slope: f32) {
    for v in x {
        if *v <= 0.0 {
            *v *= slope;
        }
    }
}

/// `x *= s`.
pub fn scale_inplace(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

/// Activation `op` (an [`APPLY`] op code) in place: the twin of [`APPLY`] and of the activation
/// step of the fused kernels (`dcc_act1` in `common.cuh`).
pub fn act_inplace(x: &mut [f32], op: i32, alpha: f32) -> Result<(), String> {
    match op {
        SILU => silu_inplace(x),
        MISH => mish_inplace(x),
        GELU_TANH => gelu_tanh_inplace(x),
        LEAKY_RELU => leaky_relu_inplace(x, alpha),
        SCALE => scale_inplace(x, alpha),
        _ => return Err(format!("unknown activation op {op}")),
    }
    Ok(())
}

unsafe fn host_apply(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, op, alpha) = (a.usize(1)?, a.i32(2)?, a.f32(3)?);
    // SAFETY: HostFn contract.
    let x = unsafe { wr(a.ptr(0)?, n)? };
    act_inplace(x, op, alpha).map_err(|e| invalid(format!("act.apply: {e}")))
}

unsafe fn host_snake(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (rows, cols, ldy, ldx) = (a.usize(3)?, a.usize(4)?, a.usize(5)?, a.usize(6)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let (py, px) = (a.ptr(0)?, a.ptr(1)?);
    let span = |ld: usize| (rows - 1) * ld + cols;
    // SAFETY: HostFn contract: y and x address their spans and are the same block (in place) or
    // disjoint.
    unsafe {
        let alpha = rd_as::<f32>(a.ptr(2)?, rows)?;
        if py == px {
            if ldy != ldx {
                return Err(invalid("act.snake: in place with two row strides"));
            }
            snake(
                None,
                wr_as::<f32>(px, span(ldx))?,
                alpha,
                rows,
                cols,
                ldy,
                ldx,
            );
        } else {
            let x = rd_as::<f32>(px, span(ldx))?;
            let y = wr_as::<f32>(py, span(ldy))?;
            // the twin's slice function takes x mutably for the in-place form only; copy the
            // read-only input view into that shape without aliasing y
            let mut xs = x.to_vec();
            snake(Some(y), &mut xs, alpha, rows, cols, ldy, ldx);
        }
    }
    Ok(())
}

unsafe fn host_elu_f64(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(1)?;
    // SAFETY: HostFn contract.
    elu_f64_inplace(unsafe { wr_as::<f64>(a.ptr(0)?, n)? });
    Ok(())
}

unsafe fn host_div(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, d) = (a.usize(1)?, a.f32(2)?);
    // SAFETY: HostFn contract.
    div_inplace(unsafe { wr(a.ptr(0)?, n)? }, d);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_constant_is_sqrt_2_over_pi() {
        let want = (std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5) as f32;
        assert_eq!(want.to_bits(), 0x3f4c_422a);
    }

    #[test]
    fn activations() {
        let mut x = [0.0, 1.0, -2.0];
        silu_inplace(&mut x);
        assert!((x[1] - 0.7310586).abs() < 1e-6 && (x[2] + 0.23840584).abs() < 1e-6);
        let mut x = [0.0, 1.0, -1.0];
        mish_inplace(&mut x);
        assert!(
            x[0] == 0.0 && (x[1] - 0.86509836).abs() < 1e-6 && (x[2] + 0.30340144).abs() < 1e-6
        );
        let mut x = [0.0, 1.0, -3.0];
        gelu_tanh_inplace(&mut x);
        assert!(x[0] == 0.0 && (x[1] - 0.841_192).abs() < 1e-6 && (x[2] + 0.0036373).abs() < 1e-6);
        let mut x = [2.0, -2.0];
        leaky_relu_inplace(&mut x, 0.01);
        assert_eq!(x, [2.0, -0.02]);
    }

    #[test]
    fn snake_elu_div() {
        let mut x = [0.5f32, -1.0];
        let mut y = [0.0f32; 2];
        snake(Some(&mut y), &mut x, &[2.0], 1, 2, 2, 2);
        let want = |v: f32| v + (1.0 / (2.0 + 1e-9f32)) * (2.0 * v).sin().powi(2);
        assert!((y[0] - want(0.5)).abs() < 1e-6 && (y[1] - want(-1.0)).abs() < 1e-6);
        snake(None, &mut x, &[2.0], 1, 2, 2, 2);
        assert_eq!(x, y);
        for v in [-3.0, -0.7, -0.49, -1e-9, -0.0, 1e-3, 0.3, 0.6, 2.0] {
            let got = expm1_64(v);
            let want = v.exp_m1();
            assert!(
                (got - want).abs() <= 4.0 * f64::EPSILON * want.abs().max(1e-300),
                "{v}: {got} vs {want}"
            );
        }
        let mut e = [1.5f64, -1.0, 0.0];
        elu_f64_inplace(&mut e);
        assert!(e[0] == 1.5 && (e[1] - (-1.0f64).exp_m1()).abs() < 1e-15 && e[2] == 0.0);
        let mut d = [1.0f32, 3.0];
        div_inplace(&mut d, 3.0);
        assert_eq!(d, [1.0 / 3.0, 1.0]);
    }

    #[test]
    fn unknown_op_is_refused() {
        let mut x = [1.0f32; 4];
        let args = [
            Arg::Ptr(crate::DevPtr(x.as_mut_ptr() as u64)),
            Arg::I64(4),
            Arg::I32(5),
            Arg::F32(0.0),
        ];
        // SAFETY: x holds the 4 floats the launch names.
        let r = unsafe { APPLY.run_host(&LaunchDims::linear(4, 128), &args) };
        assert!(matches!(r, Err(KernelError::Invalid(_))), "{r:?}");
        assert_eq!(x, [1.0; 4]);
    }
}
