//! Elementwise arithmetic (`kernels/cuda/elementwise.cu`): residual adds and the CFM solver step,
//! each a kernel whose host twin's body is the slice function below. Launch: one thread per
//! element, grid-strided.

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::twin::{kdef, rd, wr};

use Param::{F32, I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "elementwise",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/elementwise.cu")
    ),
};

kdef!(
    ADD,
    "elementwise",
    "add",
    [Ptr, Ptr, I64],
    host_add,
    "`(x, y, n)`: `x += y` in place ([`add_inplace`])."
);
kdef!(
    GATED_ADD,
    "elementwise",
    "gated_add",
    [Ptr, Ptr, Ptr, I64, I64],
    host_gated_add,
    "`(x, gate, y, rows, dim)`: `x[r, j] += gate[j] · y[r, j]` in place ([`gated_add`])."
);
kdef!(
    CFG_EULER,
    "elementwise",
    "cfg_euler",
    [Ptr, Ptr, I64, F32, F32],
    host_cfg_euler,
    "`(x, v, n, cfg, dt)`: `x += dt · ((1 + cfg) · v[i] − cfg · v[n + i])` in place ([`cfg_euler_step`])."
);

pub static KERNELS: &[&crate::KernelDef] = &[&ADD, &GATED_ADD, &CFG_EULER];

/// `x += y` elementwise.
pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    assert_eq!(x.len(), y.len());
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Residual with a per-column gate (adaLN-Zero): `x[r, j] += gate[j] · y[r, j]`, `rows × dim`.
pub fn gated_add(rows: usize, dim: usize, x: &mut [f32], gate: &[f32], y: &[f32]) {
    for r in 0..rows {
        let xr = &mut x[r * dim..(r + 1) * dim];
        let yr = &y[r * dim..(r + 1) * dim];
        for j in 0..dim {
            xr[j] += gate[j] * yr[j];
        }
    }
}

/// Classifier-free guidance and one Euler step of the CFM solver, fused:
/// `x += dt · ((1 + cfg) · d_cond − cfg · d_uncond)`.
pub fn cfg_euler_step(x: &mut [f32], d_cond: &[f32], d_uncond: &[f32], cfg: f32, dt: f32) {
    assert!(x.len() == d_cond.len() && x.len() == d_uncond.len());
    let a = 1.0 + cfg;
    for i in 0..x.len() {
        let d = a * d_cond[i] - cfg * d_uncond[i];
        x[i] += dt * d;
    }
}

unsafe fn host_add(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(2)?;
    // SAFETY: HostFn contract.
    let (x, y) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, n)?) };
    add_inplace(x, y);
    Ok(())
}

unsafe fn host_gated_add(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (rows, dim) = (a.usize(3)?, a.usize(4)?);
    // SAFETY: HostFn contract.
    let (x, g, y) = unsafe {
        (
            wr(a.ptr(0)?, rows * dim)?,
            rd(a.ptr(1)?, dim)?,
            rd(a.ptr(2)?, rows * dim)?,
        )
    };
    gated_add(rows, dim, x, g, y);
    Ok(())
}

unsafe fn host_cfg_euler(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, cfg, dt) = (a.usize(2)?, a.f32(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let (x, v) = unsafe { (wr(a.ptr(0)?, n)?, rd(a.ptr(1)?, 2 * n)?) };
    cfg_euler_step(x, &v[..n], &v[n..], cfg, dt);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn euler_and_gates() {
        let mut x = [1.0, 1.0];
        cfg_euler_step(&mut x, &[1.0, 2.0], &[0.0, 2.0], 0.5, 0.1);
        assert!((x[0] - 1.15).abs() < 1e-7 && (x[1] - 1.2).abs() < 1e-7);
        let mut x = [1.0, 1.0, 1.0, 1.0];
        gated_add(2, 2, &mut x, &[2.0, 0.0], &[1.0, 1.0, 3.0, 3.0]);
        assert_eq!(x, [3.0, 1.0, 7.0, 1.0]);
    }
}
