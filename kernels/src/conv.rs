//! Direct 1-D convolutions (`kernels/cuda/conv.cu`): dilated, strided, zero-padded on either
//! side, optionally over a nearest-upsampled input and with a residual, in float ([`CONV1D`])
//! and double ([`CONV1D_F64`]). The host twins' body is [`conv1d`].
//!
//! These serve the layers a GEMM over im2col rows does not fit cheaply: the vocoder's causal
//! convolutions over channel-major `[c, t]` activations (left- or right-padded, dilated), its
//! transposed-convolution replacement (nearest upsampling then a causal convolution), its strided
//! source downsampling, and the float64 F0 predictor (cuBLAS and the host GEMM are float-only).
//! Launch: [`conv1d_threads`] threads in blocks of [`CONV1D_BLOCK`], grid-strided (any geometry gives the same bits): each
//! thread owns [`CONV1D_OUTPUTS_PER_THREAD`] outputs of one row, each output summed alone in a
//! fixed order (input channels ascending, taps ascending, from zero), so the twin is the kernel's
//! arithmetic exactly.

#![allow(clippy::too_many_arguments)]

use std::ops::{Add, Mul};

use crate::CudaSource;
use crate::abi::{Arg, Args, DevPtr, KernelError, LaunchDims, Param};
use crate::twin::{invalid, kdef};

use Param::{I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "conv",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/conv.cu")
    ),
};

kdef!(
    CONV1D,
    "conv",
    "conv1d",
    [
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64
    ],
    host_conv1d_f32,
    "`(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k, stride, dil, pad, up, use_res)` in float: see [`conv1d`]; `res` is read only when `use_res` is nonzero, and may be `y` itself with `ldr = ldy` (in place)."
);
kdef!(
    CONV1D_F64,
    "conv",
    "conv1d_f64",
    [
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64
    ],
    host_conv1d_f64,
    "[`CONV1D`] in double."
);

pub static KERNELS: &[&crate::KernelDef] = &[&CONV1D, &CONV1D_F64];

/// Outputs of one row each thread of [`CONV1D`] / [`CONV1D_F64`] computes (`DCC_CONV_R` in
/// `conv.cu`): independent accumulators that share every weight load (and, at stride 1, every
/// input load: the outputs `t, t + dil, ..`, read overlapping tap windows). Changes speed only,
/// never bits: every output keeps its own summation order.
pub const CONV1D_OUTPUTS_PER_THREAD: usize = 4;

/// Threads per block of a convolution launch: small blocks spread the few hundred blocks of the
/// short, wide layers (256 channels × 416 frames: 26,624 threads) over every multiprocessor.
pub const CONV1D_BLOCK: u32 = 64;

/// The threads a convolution launch needs to give every work item its own thread: `c_out` rows
/// of `dil · ⌈t_out / (R · dil)⌉` items, `R` = [`CONV1D_OUTPUTS_PER_THREAD`] (`conv.cu`'s
/// dilation-interleaved split; its other split needs `⌈t_out / R⌉` per row, never more). Fewer
/// threads are correct too (grid-strided), only slower.
pub fn conv1d_threads(c_out: usize, t_out: usize, dil: usize) -> usize {
    let group = CONV1D_OUTPUTS_PER_THREAD * dil.max(1);
    c_out * dil.max(1) * t_out.div_ceil(group)
}

/// The element types the convolution kernels exist for.
pub trait Real: Copy + Default + Add<Output = Self> + Mul<Output = Self> + 'static {}
impl Real for f32 {}
impl Real for f64 {}

/// The geometry of one convolution launch (the kernels' integer arguments, in order).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Conv1dGeom {
    pub c_in: usize,
    /// Input frames (before upsampling).
    pub t_in: usize,
    /// Input element strides per channel and per frame.
    pub sxc: usize,
    pub sxt: usize,
    pub c_out: usize,
    pub t_out: usize,
    /// Output (and residual) row strides.
    pub ldy: usize,
    pub ldr: usize,
    pub k: usize,
    pub stride: usize,
    pub dil: usize,
    /// Zero frames before the (upsampled) input.
    pub pad: usize,
    /// Nearest-upsampling factor of the input (1: none).
    pub up: usize,
}

impl Conv1dGeom {
    /// Elements of `x` the launch reaches from its address.
    pub fn x_span(&self) -> usize {
        span2(self.c_in, self.sxc, self.t_in, self.sxt)
    }
    /// Elements of `y` (and of `res`, with `ldr`) the launch reaches.
    pub fn y_span(&self, ld: usize) -> usize {
        span2(self.c_out, ld, self.t_out, 1)
    }
    /// Elements of the weight `[c_out, c_in, k]`.
    pub fn w_len(&self) -> usize {
        self.c_out * self.c_in * self.k
    }
}

fn span2(a: usize, sa: usize, b: usize, sb: usize) -> usize {
    if a == 0 || b == 0 {
        0
    } else {
        (a - 1) * sa + (b - 1) * sb + 1
    }
}

/// Where the residual of a launch comes from.
#[derive(Copy, Clone, Debug)]
pub enum Residual<'a, T> {
    None,
    /// A separate `[c_out, t_out]` block with row stride `ldr`.
    Separate(&'a [T]),
    /// `y` itself (`y += conv`, read before written, element by element).
    InPlace,
}

/// `y[co·ldy + t] = (Σ_ci Σ_j w[co, ci, j] · x̃[ci, t·stride + j·dil − pad] + bias[co]) (+ res)`,
/// where `x̃` is `x` upsampled `up` times (nearest) and zero outside `[0, t_in·up)`. The sum runs
/// over `ci` ascending, then `j` ascending, from zero, skipping zero taps: the CUDA kernel's
/// order.
pub fn conv1d<T: Real>(
    g: &Conv1dGeom,
    y: &mut [T],
    x: &[T],
    w: &[T],
    bias: &[T],
    res: Residual<'_, T>,
) {
    let span = g.t_in * g.up;
    for co in 0..g.c_out {
        for t in 0..g.t_out {
            let mut acc = T::default();
            for ci in 0..g.c_in {
                let wr = &w[(co * g.c_in + ci) * g.k..][..g.k];
                for (j, &wj) in wr.iter().enumerate() {
                    let p = (t * g.stride + j * g.dil) as isize - g.pad as isize;
                    if p >= 0 && (p as usize) < span {
                        acc = acc + wj * x[ci * g.sxc + (p as usize / g.up) * g.sxt];
                    }
                }
            }
            let mut v = acc + bias[co];
            let yi = co * g.ldy + t;
            match res {
                Residual::None => {}
                Residual::Separate(r) => v = v + r[co * g.ldr + t],
                Residual::InPlace => v = v + y[yi],
            }
            y[yi] = v;
        }
    }
}

/// # Safety
/// `p` addresses `n` readable `T` (or `n == 0`).
pub(crate) unsafe fn rd_as<'a, T>(p: DevPtr, n: usize) -> Result<&'a [T], KernelError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid("null input address"));
    }
    // SAFETY: HostFn contract (caller).
    Ok(unsafe { std::slice::from_raw_parts(p.0 as *const T, n) })
}

/// # Safety
/// `p` addresses `n` writable `T` not aliased by any other slice of the launch.
pub(crate) unsafe fn wr_as<'a, T>(p: DevPtr, n: usize) -> Result<&'a mut [T], KernelError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(invalid("null output address"));
    }
    // SAFETY: HostFn contract (caller).
    Ok(unsafe { std::slice::from_raw_parts_mut(p.0 as *mut T, n) })
}

fn geom(a: &[Arg]) -> Result<Conv1dGeom, KernelError> {
    let g = Conv1dGeom {
        c_in: a.usize(5)?,
        t_in: a.usize(6)?,
        sxc: a.usize(7)?,
        sxt: a.usize(8)?,
        c_out: a.usize(9)?,
        t_out: a.usize(10)?,
        ldy: a.usize(11)?,
        ldr: a.usize(12)?,
        k: a.usize(13)?,
        stride: a.usize(14)?,
        dil: a.usize(15)?,
        pad: a.usize(16)?,
        up: a.usize(17)?,
    };
    if g.up == 0 || g.k == 0 || g.stride == 0 || g.dil == 0 {
        return Err(invalid(format!(
            "conv1d: zero k, stride, dil or up in {g:?}"
        )));
    }
    if g.t_out > 0 && g.ldy < g.t_out {
        return Err(invalid(format!(
            "conv1d: ldy {} < t_out {}",
            g.ldy, g.t_out
        )));
    }
    Ok(g)
}

unsafe fn host_conv1d<T: Real>(a: &[Arg]) -> Result<(), KernelError> {
    let g = geom(a)?;
    if g.c_out == 0 || g.t_out == 0 {
        return Ok(());
    }
    let (py, pr) = (a.ptr(0)?, a.ptr(4)?);
    // SAFETY: HostFn contract: every pointer addresses what the geometry reaches; the residual is
    // null, y itself (in place, same row stride) or disjoint from y.
    unsafe {
        let y = wr_as::<T>(py, g.y_span(g.ldy))?;
        let x = rd_as::<T>(a.ptr(1)?, g.x_span())?;
        let w = rd_as::<T>(a.ptr(2)?, g.w_len())?;
        let b = rd_as::<T>(a.ptr(3)?, g.c_out)?;
        let res = if a.i64(18)? == 0 {
            Residual::None
        } else if pr == py {
            if g.ldr != g.ldy {
                return Err(invalid("conv1d: in-place residual with another row stride"));
            }
            Residual::InPlace
        } else {
            Residual::Separate(rd_as::<T>(pr, g.y_span(g.ldr))?)
        };
        conv1d(&g, y, x, w, b, res);
    }
    Ok(())
}

unsafe fn host_conv1d_f32(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host_conv1d::<f32>(a) }
}

unsafe fn host_conv1d_f64(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host_conv1d::<f64>(a) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(
        t_in: usize,
        t_out: usize,
        k: usize,
        stride: usize,
        dil: usize,
        pad: usize,
        up: usize,
    ) -> Conv1dGeom {
        Conv1dGeom {
            c_in: 1,
            t_in,
            sxc: t_in,
            sxt: 1,
            c_out: 1,
            t_out,
            ldy: t_out,
            ldr: t_out,
            k,
            stride,
            dil,
            pad,
            up,
        }
    }

    #[test]
    fn outputs_per_thread_is_the_kernels() {
        let def = format!("#define DCC_CONV_R {CONV1D_OUTPUTS_PER_THREAD}\n");
        assert!(SOURCE.code.contains(&def), "conv.cu lacks {def:?}");
        assert_eq!(conv1d_threads(3, 9, 1), 9);
        assert_eq!(conv1d_threads(2, 8, 1), 4);
        // dilation 3: runs of 12 frames, 3 items each
        assert_eq!(conv1d_threads(1, 13, 3), 6);
        for (t, d) in [(1, 1), (7, 2), (6241, 5), (416, 3)] {
            let r = CONV1D_OUTPUTS_PER_THREAD;
            assert!(conv1d_threads(1, t, d) >= t.div_ceil(r));
        }
    }

    #[test]
    fn padding_dilation_stride_and_upsampling() {
        let x = [1.0f32, 2.0, 3.0, 4.0];
        // left pad 2, kernel 3: y[t] = x[t-2] + 10 x[t-1] + 100 x[t]
        let w = [1.0f32, 10.0, 100.0];
        let mut y = [0.0f32; 4];
        conv1d(
            &g(4, 4, 3, 1, 1, 2, 1),
            &mut y,
            &x,
            &w,
            &[0.5],
            Residual::None,
        );
        assert_eq!(y, [100.5, 210.5, 321.5, 432.5]);
        // right padding (kernel 2, no pad, t_out = t_in): the last tap reads zero
        let mut y = [0.0f32; 4];
        conv1d(
            &g(4, 4, 2, 1, 1, 0, 1),
            &mut y,
            &x,
            &[1.0, 10.0],
            &[0.0],
            Residual::None,
        );
        assert_eq!(y, [21.0, 32.0, 43.0, 4.0]);
        // dilation 2, left pad 2
        let mut y = [0.0f32; 4];
        conv1d(
            &g(4, 4, 2, 1, 2, 2, 1),
            &mut y,
            &x,
            &[1.0, 10.0],
            &[0.0],
            Residual::None,
        );
        assert_eq!(y, [10.0, 20.0, 31.0, 42.0]);
        // stride 2, kernel 2
        let mut y = [0.0f32; 2];
        conv1d(
            &g(4, 2, 2, 2, 1, 0, 1),
            &mut y,
            &x,
            &[1.0, 10.0],
            &[0.0],
            Residual::None,
        );
        assert_eq!(y, [21.0, 43.0]);
        // upsample 2 then kernel 1: x repeated
        let mut y = [0.0f32; 8];
        conv1d(
            &g(4, 8, 1, 1, 1, 0, 2),
            &mut y,
            &x,
            &[1.0],
            &[0.0],
            Residual::None,
        );
        assert_eq!(y, [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]);
        // in-place residual
        let mut y = [1.0f32; 4];
        conv1d(
            &g(4, 4, 1, 1, 1, 0, 1),
            &mut y,
            &x,
            &[2.0],
            &[0.0],
            Residual::InPlace,
        );
        assert_eq!(y, [3.0, 5.0, 7.0, 9.0]);
    }
}
