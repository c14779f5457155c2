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

/// One convolution, checked: the plain kernel's 19 arguments, the kernels' geometry and the
/// operands' byte ranges (for the overlap checks). `None` for an empty output.
struct Planned {
    args: Vec<Arg>,
    geom: k::conv::Conv1dGeom,
    operands: Vec<(&'static str, (u64, u64), bool)>,
}

/// Operand names per problem of a group (the overlap error names which).
const NAMES: [[&str; 5]; 3] = [
    ["y", "x", "w", "bias", "res"],
    [
        "y (problem 1)",
        "x (problem 1)",
        "w (problem 1)",
        "bias (problem 1)",
        "res (problem 1)",
    ],
    [
        "y (problem 2)",
        "x (problem 2)",
        "w (problem 2)",
        "bias (problem 2)",
        "res (problem 2)",
    ],
];

fn plan<T: ConvElem>(
    op: &'static str,
    names: &[&'static str; 5],
    c: &Conv<'_, T>,
) -> Result<Option<Planned>, OpError> {
    let (y, x, w, bias, g) = (&c.y, &c.x, &c.w, &c.bias, c.geom);
    let (c_out, t_out, ldy) = matrix(op, names[0], y)?;
    let (c_in, t_in, sxc, sxt) = match (x.dims(), x.strides()) {
        (&[c, t], &[sc, st]) => (c, t, sc, st),
        (d, _) => return Err(OpError::shape(op, names[1], "[c_in, t_in]", d)),
    };
    let kk = match w.dims() {
        &[o, i, kk] if o == c_out && i == c_in && kk > 0 => kk,
        d => {
            return Err(OpError::shape(
                op,
                names[2],
                format!("[{c_out}, {c_in}, k > 0]"),
                d,
            ));
        }
    };
    packed(op, names[2], w)?;
    super::dims(op, names[3], bias, &[c_out])?;
    packed(op, names[3], bias)?;
    if g.stride == 0 || g.dil == 0 || g.up == 0 {
        return Err(OpError::arg(
            op,
            "geometry",
            format!("stride, dil and up must be positive: {g:?}"),
        ));
    }
    let mut operands = vec![
        operand(names[0], y, true),
        operand(names[1], x, false),
        operand(names[2], w, false),
        operand(names[3], bias, false),
    ];
    let (res_ptr, ldr, use_res) = match c.res {
        Residual::None => (ptr(y), ldy, 0),
        Residual::InPlace => (ptr(y), ldy, 1),
        Residual::Add(r) => {
            let (rc, rt, ldr) = matrix(op, names[4], &r)?;
            if (rc, rt) != (c_out, t_out) {
                return Err(OpError::shape(
                    op,
                    names[4],
                    format!("[{c_out}, {t_out}]"),
                    r.dims(),
                ));
            }
            operands.push(operand(names[4], &r, false));
            (ptr(&r), ldr, 1)
        }
    };
    if c_out == 0 || t_out == 0 {
        disjoint(op, &operands)?;
        return Ok(None);
    }
    let args = vec![
        ptr(y),
        ptr(x),
        ptr(w),
        ptr(bias),
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
    Ok(Some(Planned {
        args,
        geom,
        operands,
    }))
}

/// One convolution's operands: `y = conv(x; w, bias) (+ res)` with geometry `geom` (see
/// [`conv1d`]).
#[derive(Copy, Clone, Debug)]
pub struct Conv<'a, T: Elem> {
    pub y: Tensor<'a, T>,
    pub x: Tensor<'a, T>,
    pub w: Tensor<'a, T>,
    pub bias: Tensor<'a, T>,
    pub res: Residual<'a, T>,
    pub geom: ConvGeom,
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
    let c = Conv {
        y,
        x,
        w,
        bias,
        res,
        geom: g,
    };
    let Some(p) = plan(op, &NAMES[0], &c)? else {
        return Ok(());
    };
    disjoint(op, &p.operands)?;
    let (kernel, dims, args) = match k::conv::conv1d_tile_pick(&p.geom) {
        Some(shape) => {
            let blocks = k::conv::conv1d_tile_blocks(&p.geom, shape);
            let mut tiled = p.args;
            tiled.push(Arg::I64(shape as i64));
            let dims = LaunchDims::linear(
                blocks * k::conv::CONV1D_TILE_BLOCK as usize,
                k::conv::CONV1D_TILE_BLOCK,
            );
            (T::TILED, dims, tiled)
        }
        None => {
            let threads = k::conv::conv1d_threads(p.geom.c_out, p.geom.t_out, p.geom.dil);
            let dims = LaunchDims::linear(threads, k::conv::CONV1D_BLOCK);
            (T::KERNEL, dims, p.args)
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

/// Independent float convolutions in one launch (`conv.conv1d_tile_group`, up to
/// [`k::conv::CONV1D_GROUP_MAX`] at a time; more are split over launches): each output has the
/// bits [`conv1d`] gives it, and the launch fills the device where each alone would leave it
/// mostly idle (the vocoder's resblocks of one stage). No convolution may write what another
/// reads or writes (checked across the whole group), and each is checked as [`conv1d`] checks
/// it.
pub fn conv1d_group(cx: &Ctx<'_>, convs: &[Conv<'_, f32>]) -> Result<(), OpError> {
    let op = "conv1d_group";
    for chunk in convs.chunks(k::conv::CONV1D_GROUP_MAX) {
        let mut planned = Vec::with_capacity(chunk.len());
        let mut operands = Vec::new();
        for (i, c) in chunk.iter().enumerate() {
            if let Some(p) = plan(op, &NAMES[i], c)? {
                operands.extend_from_slice(&p.operands);
                planned.push(p);
            }
        }
        disjoint(op, &operands)?;
        if planned.is_empty() {
            continue;
        }
        // the largest problem first, so that its blocks start first (speed only)
        let work = |p: &Planned| p.geom.c_out * p.geom.t_out * p.geom.c_in * p.geom.k;
        planned.sort_by_key(|p| std::cmp::Reverse(work(p)));
        let mut args = vec![int(planned.len())];
        let mut shapes = Vec::with_capacity(planned.len());
        for p in &planned {
            let shape = k::conv::conv1d_tile_pick(&p.geom).unwrap_or(k::conv::TileShape::Narrow);
            shapes.push((p.geom, shape));
            args.extend_from_slice(&p.args);
            args.push(Arg::I64(shape as i64));
        }
        for _ in planned.len()..k::conv::CONV1D_GROUP_MAX {
            args.extend_from_within(1..21);
        }
        let blocks = k::conv::conv1d_group_blocks(&shapes);
        let dims = LaunchDims::linear(
            blocks * k::conv::CONV1D_TILE_BLOCK as usize,
            k::conv::CONV1D_TILE_BLOCK,
        );
        // SAFETY: as for `conv1d`, problem by problem (each checked by `plan`); no problem
        // writes what another reads or writes (checked across the group), so running them
        // concurrently reads what running them in turn would. The unused slots repeat problem
        // 0's arguments, which the kernel does not read.
        unsafe { cx.launch(&k::conv::CONV1D_TILE_GROUP, dims, &args)? };
    }
    Ok(())
}
