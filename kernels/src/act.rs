//! Activations (`kernels/cuda/act.cu`): the [`APPLY`] kernel and its host twin, whose body is the
//! slice functions below. Launch: one thread per element, grid-strided.

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::math::{exp_f32, mish_f32, tanh_f32};
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

pub static KERNELS: &[&crate::KernelDef] = &[&APPLY];

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
