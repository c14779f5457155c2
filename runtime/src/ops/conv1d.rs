//! Direct 1-D convolutions over channel-major `[c, t]` views (`conv.conv1d`, `conv.conv1d_f64`,
//! and their tiled forms `conv.conv1d_tile`, `conv.conv1d_tile_f64`): zero padding on either
//! side, dilation, stride, nearest upsampling of the input and an optional residual, in float or
//! double. A launch the tiled kernel takes ([`k::conv::conv1d_tile_pick`]: stride 1, the
//! unrolled kernel sizes, a window that fits its staging buffer) runs one block of
//! [`k::conv::CONV1D_TILE_BLOCK`] threads per tile; any other runs the plain kernel, one thread
//! per [`k::conv::CONV1D_OUTPUTS_PER_THREAD`] outputs of a row ([`k::conv::conv1d_threads`]) in
//! blocks of [`k::conv::CONV1D_BLOCK`]. Both sum every output alone in one order, so which one
//! runs never changes a bit.

use dcc_kernels as k;
use dcc_kernels::{Arg, KernelDef, LaunchDims};

use super::{Ctx, Elem, OpError, Tensor, disjoint, int, matrix, operand, packed, ptr};

/// Element types with a direct-convolution kernel.
pub trait ConvElem: Elem {
    const KERNEL: &'static KernelDef;
    /// The tiled kernel (the same bits; [`k::conv::conv1d_tile_pick`] decides).
    const TILED: &'static KernelDef;
}

impl ConvElem for f32 {
    const KERNEL: &'static KernelDef = &k::conv::CONV1D;
    const TILED: &'static KernelDef = &k::conv::CONV1D_TILE;
}

impl ConvElem for f64 {
    const KERNEL: &'static KernelDef = &k::conv::CONV1D_F64;
    const TILED: &'static KernelDef = &k::conv::CONV1D_TILE_F64;
}

/// The geometry of a convolution besides its weight: output frame `t`, tap `j` reads position
/// `t·stride + j·dil − pad` of the input upsampled `up` times (nearest), zero outside it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    pub stride: usize,
    pub dil: usize,
    /// Zero frames before the (upsampled) input; the frames past its end read zero too.
    pub pad: usize,
    pub up: usize,
}

impl ConvGeom {
    /// Stride 1, no dilation, no padding, no upsampling.
    pub const PLAIN: ConvGeom = ConvGeom {
        stride: 1,
        dil: 1,
        pad: 0,
        up: 1,
    };
}

/// What is added to a convolution's output.
#[derive(Copy, Clone, Debug)]
pub enum Residual<'a, T: Elem> {
    None,
    /// `y = conv + res`, `res` a `[c_out, t_out]` view with unit column stride, disjoint from `y`.
    Add(Tensor<'a, T>),
    /// `y += conv` (the output's own values, read before written).
    InPlace,
}

/// `y[co, t] = Σ_ci Σ_j w[co, ci, j] · x̃[ci, t·stride + j·dil − pad] + bias[co]` (+ the residual),
/// `x̃` the input upsampled `g.up` times and zero outside: `y` `[c_out, t_out]` with unit column
/// stride, `x` `[c_in, t_in]` (any strides: a slice of a longer history is read in place), `w`
/// packed `[c_out, c_in, k]` (torch's layout), `bias` packed `[c_out]`.
pub fn conv1d<T: ConvElem>(
    cx: &Ctx<'_>,
    y: Tensor<'_, T>,
    x: Tensor<'_, T>,
    w: Tensor<'_, T>,
    bias: Tensor<'_, T>,
    res: Residual<'_, T>,
    g: ConvGeom,
) -> Result<(), OpError> {
    let op = "conv1d";
    let (c_out, t_out, ldy) = matrix(op, "y", &y)?;
    let (c_in, t_in, sxc, sxt) = match (x.dims(), x.strides()) {
        (&[c, t], &[sc, st]) => (c, t, sc, st),
        (d, _) => return Err(OpError::shape(op, "x", "[c_in, t_in]", d)),
    };
    let kk = match w.dims() {
        &[o, i, kk] if o == c_out && i == c_in && kk > 0 => kk,
        d => {
            return Err(OpError::shape(
                op,
                "w",
                format!("[{c_out}, {c_in}, k > 0]"),
                d,
            ));
        }
    };
    packed(op, "w", &w)?;
    super::dims(op, "bias", &bias, &[c_out])?;
    packed(op, "bias", &bias)?;
    if g.stride == 0 || g.dil == 0 || g.up == 0 {
        return Err(OpError::arg(
            op,
            "geometry",
            format!("stride, dil and up must be positive: {g:?}"),
        ));
    }
    let mut operands = vec![
        operand("y", &y, true),
        operand("x", &x, false),
        operand("w", &w, false),
        operand("bias", &bias, false),
    ];
    let (res_ptr, ldr, use_res) = match res {
        Residual::None => (ptr(&y), ldy, 0),
        Residual::InPlace => (ptr(&y), ldy, 1),
        Residual::Add(r) => {
            let (rc, rt, ldr) = matrix(op, "res", &r)?;
            if (rc, rt) != (c_out, t_out) {
                return Err(OpError::shape(
                    op,
                    "res",
                    format!("[{c_out}, {t_out}]"),
                    r.dims(),
                ));
            }
            operands.push(operand("res", &r, false));
            (ptr(&r), ldr, 1)
        }
    };
    disjoint(op, &operands)?;
    if c_out == 0 || t_out == 0 {
        return Ok(());
    }
    let args = [
        ptr(&y),
        ptr(&x),
        ptr(&w),
        ptr(&bias),
        res_ptr,
        int(c_in),
        int(t_in),
        int(sxc),
        int(sxt),
        int(c_out),
        int(t_out),
        int(ldy),
        int(ldr),
        int(kk),
        int(g.stride),
        int(g.dil),
        int(g.pad),
        int(g.up),
        Arg::I64(use_res),
    ];
    let geom = k::conv::Conv1dGeom {
        c_in,
        t_in,
        sxc,
        sxt,
        c_out,
        t_out,
        ldy,
        ldr,
        k: kk,
        stride: g.stride,
        dil: g.dil,
        pad: g.pad,
        up: g.up,
    };
    let (kernel, dims, args) = match k::conv::conv1d_tile_pick(&geom) {
        Some(shape) => {
            let blocks = k::conv::conv1d_tile_blocks(&geom, shape);
            let mut tiled = args.to_vec();
            tiled.push(Arg::I64(shape as i64));
            let dims = LaunchDims::linear(
                blocks * k::conv::CONV1D_TILE_BLOCK as usize,
                k::conv::CONV1D_TILE_BLOCK,
            );
            (T::TILED, dims, tiled)
        }
        None => {
            let threads = k::conv::conv1d_threads(c_out, t_out, g.dil);
            let dims = LaunchDims::linear(threads, k::conv::CONV1D_BLOCK);
            (T::KERNEL, dims, args.to_vec())
        }
    };
    // SAFETY: the kernel writes y[co·ldy + t] (co < c_out, t < t_out: the checked y view), reads
    // x[ci·sxc + p·sxt] only for p < t_in (the checked x view), w and bias over their checked
    // packed dims, and the residual at res[co·ldr + t] (the checked res view, or y itself read
    // before written by the same thread). Written and read views do not overlap (checked), except
    // the declared in-place residual. The launch geometry and the kernel (plain or tiled: the
    // same arguments, plus the tile shape) only decide which thread computes which outputs.
    unsafe { cx.launch(kernel, dims, &args) }
}
