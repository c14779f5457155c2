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
//!
//! [`CONV1D_TILE`] / [`CONV1D_TILE_F64`] compute the same outputs in the same order, from shared
//! memory: a block stages a tile's input window and weights per chunk of input channels, so that
//! each value read from global memory serves a whole tile (the plain kernel, reading every
//! operand from global memory with a few warps per multiprocessor at the vocoder's shapes, waits
//! on memory latency). Their twin is [`conv1d`] too; [`conv1d_tile_pick`] chooses.
//! [`CONV1D_TILE_GROUP`] runs up to three independent float convolutions in one launch (a
//! vocoder stage's resblocks, whose grids alone are less than a wave), each output with the bits
//! it has alone; its twin runs them in turn.

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

kdef!(
    CONV1D_TILE,
    "conv",
    "conv1d_tile",
    [
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64, I64
    ],
    host_conv1d_tile_f32,
    "[`CONV1D`]'s arguments and then `cfg` (a [`TileShape`] index): the same outputs, bit for bit, computed by tiles that stage their input window and weights in shared memory. Launch it as [`conv1d_tile_dims`] says, for a geometry [`conv1d_tile_fits`] accepts."
);
kdef!(
    CONV1D_TILE_F64,
    "conv",
    "conv1d_tile_f64",
    [
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64, I64
    ],
    host_conv1d_tile_f64,
    "[`CONV1D_TILE`] in double."
);

kdef!(
    CONV1D_TILE_GROUP,
    "conv",
    "conv1d_tile_group",
    [
        I64, // n: problems 1..=3
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64, I64, // problem 0: CONV1D_TILE's arguments
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64, I64, // problem 1
        Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64, I64,
        I64, I64, // problem 2
    ],
    host_conv1d_tile_group,
    "`(n, problem 0, problem 1, problem 2)`: `n` (1 to 3) independent float convolutions in one launch, each given as [`CONV1D_TILE`]'s 20 arguments (the slots past `n` are not read; fill them with a copy of problem 0). No problem may read what another writes. Launch [`conv1d_group_blocks`] blocks of [`CONV1D_TILE_BLOCK`]."
);

/// Problems one [`CONV1D_TILE_GROUP`] launch takes.
pub const CONV1D_GROUP_MAX: usize = 3;

pub static KERNELS: &[&crate::KernelDef] = &[
    &CONV1D,
    &CONV1D_F64,
    &CONV1D_TILE,
    &CONV1D_TILE_F64,
    &CONV1D_TILE_GROUP,
];

/// The blocks one problem of a [`CONV1D_TILE_GROUP`] launch owns (`dcc_tile_blocks` in
/// `conv.cu`): its tiles in `shape` when the tiled kernel takes its geometry (less the window
/// bound, which the kernel checks per tile), else one block per [`CONV1D_TILE_BLOCK`] outputs.
pub fn conv1d_group_problem_blocks(g: &Conv1dGeom, shape: TileShape) -> usize {
    let lim = i32::MAX as usize;
    let fits = g.stride == 1
        && matches!(g.k, 1 | 3 | 5 | 7 | 11 | 16)
        && (g.t_out + 8 * g.dil) + g.k * g.dil + g.pad < lim
        && g.t_in * g.up < lim
        && g.t_in.saturating_mul(g.sxt) < lim;
    if fits {
        shape.tiles(g.c_out, g.t_out, g.dil)
    } else {
        (g.c_out * g.t_out).div_ceil(CONV1D_TILE_BLOCK as usize)
    }
}

/// Blocks of a [`CONV1D_TILE_GROUP`] launch: every problem's share, one after the other.
pub fn conv1d_group_blocks(problems: &[(Conv1dGeom, TileShape)]) -> usize {
    problems
        .iter()
        .map(|(g, s)| conv1d_group_problem_blocks(g, *s))
        .sum()
}

/// Threads per block of [`CONV1D_TILE`] (`DCC_TILE_THREADS`): four groups of
/// [`CONV1D_TILE_ITEMS`] lanes.
pub const CONV1D_TILE_BLOCK: u32 = 128;
/// Work items per tile (`DCC_TILE_ITEMS`): one per lane of a group.
pub const CONV1D_TILE_ITEMS: usize = 32;
/// Input positions a tile's staged window holds (`DCC_TILE_WIN`).
pub const CONV1D_TILE_WIN: usize = 256;

/// The two tile shapes of [`CONV1D_TILE`] (`cfg`): `channels` output channels per thread
/// (`C`, so `4·C` per tile) by `outputs` outputs per work item (`R`). Speed only: every shape
/// gives the same bits.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TileShape {
    /// `C = 2, R = 4`: the most reuse per staged value, for long rows.
    Wide = 0,
    /// `C = 1, R = 2`: four times the threads, for short rows and few channels.
    Narrow = 1,
}

impl TileShape {
    /// `(C, R)`.
    pub fn dims(self) -> (usize, usize) {
        match self {
            TileShape::Wide => (2, 4),
            TileShape::Narrow => (1, 2),
        }
    }

    /// Tiles of a launch: `⌈c_out / 4C⌉` channel tiles by `⌈items / 32⌉` item tiles, `items =
    /// dil · ⌈t_out / (R · dil)⌉`.
    pub fn tiles(self, c_out: usize, t_out: usize, dil: usize) -> usize {
        let (c, r) = self.dims();
        let dil = dil.max(1);
        let items = dil * t_out.div_ceil(r * dil);
        c_out.div_ceil(4 * c) * items.div_ceil(CONV1D_TILE_ITEMS)
    }

    /// Positions a tile's window can span: the first to the last item's base (at most `31·R +
    /// (R − 1)(dil − 1)` apart), plus the `R + k − 2` window offsets of an item at `dil` each.
    pub fn window_bound(self, k: usize, dil: usize) -> usize {
        let (_, r) = self.dims();
        let w = CONV1D_TILE_ITEMS - 1;
        w * r + (r - 1) * (dil.max(1) - 1) + (r + k - 2) * dil.max(1) + 1
    }
}

/// Whether [`CONV1D_TILE`] takes a launch of geometry `g` in shape `s`: stride 1, `k` one of
/// the unrolled kernel sizes, offsets within 32 bits, and the tile's window within
/// [`CONV1D_TILE_WIN`].
pub fn conv1d_tile_fits(g: &Conv1dGeom, s: TileShape) -> bool {
    let lim = i32::MAX as usize;
    g.stride == 1
        && matches!(g.k, 1 | 3 | 5 | 7 | 11 | 16)
        && (g.t_out + 8 * g.dil) + g.k * g.dil + g.pad < lim
        && g.t_in * g.up < lim
        && g.t_in.saturating_mul(g.sxt) < lim
        && s.window_bound(g.k, g.dil) <= CONV1D_TILE_WIN
}

/// Tiles from which a launch takes [`TileShape::Wide`]: about two per multiprocessor of an
/// H100 (132), so that the wide shape's fewer threads still fill the device.
pub const CONV1D_TILE_WIDE_MIN_TILES: usize = 256;

/// The tile shape for a launch: [`TileShape::Wide`] when it makes at least
/// [`CONV1D_TILE_WIDE_MIN_TILES`] tiles, else [`TileShape::Narrow`]; `None` when the geometry
/// does not fit the tiled kernel (launch [`CONV1D`]). Speed only: every choice gives the same
/// bits.
pub fn conv1d_tile_pick(g: &Conv1dGeom) -> Option<TileShape> {
    let wide = TileShape::Wide;
    if conv1d_tile_fits(g, wide)
        && wide.tiles(g.c_out, g.t_out, g.dil) >= CONV1D_TILE_WIDE_MIN_TILES
    {
        return Some(wide);
    }
    let narrow = TileShape::Narrow;
    conv1d_tile_fits(g, narrow).then_some(narrow)
}

/// Blocks of [`CONV1D_TILE_BLOCK`] threads for a launch: one per tile (the kernel walks tiles
/// grid-strided, so fewer are correct too).
pub fn conv1d_tile_blocks(g: &Conv1dGeom, s: TileShape) -> usize {
    s.tiles(g.c_out, g.t_out, g.dil)
}

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

/// The tiled kernels' extra argument: a [`TileShape`] index (speed only, the same bits).
fn tile_cfg(a: &[Arg]) -> Result<(), KernelError> {
    match a.i64(19)? {
        0 | 1 => Ok(()),
        c => Err(invalid(format!(
            "conv1d_tile: cfg {c} is not a tile shape (0, 1)"
        ))),
    }
}

unsafe fn host_conv1d_tile_f32(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    tile_cfg(a)?;
    // SAFETY: forwarded HostFn contract (the first 19 arguments are CONV1D's).
    unsafe { host_conv1d::<f32>(a) }
}

unsafe fn host_conv1d_tile_f64(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    tile_cfg(a)?;
    // SAFETY: forwarded HostFn contract.
    unsafe { host_conv1d::<f64>(a) }
}

/// The group's problems one after the other: the same outputs as the concurrent launch, since
/// no problem reads what another writes.
unsafe fn host_conv1d_tile_group(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(0)?;
    if n == 0 || n > CONV1D_GROUP_MAX {
        return Err(invalid(format!(
            "conv1d_tile_group: {n} problems (1 to {CONV1D_GROUP_MAX})"
        )));
    }
    for p in 0..n {
        let args = &a[1 + 20 * p..1 + 20 * (p + 1)];
        tile_cfg(args)?;
        // SAFETY: forwarded HostFn contract: each problem's pointers address what its geometry
        // reaches (the launch's caller checks them like a CONV1D_TILE launch's).
        unsafe { host_conv1d::<f32>(args)? };
    }
    Ok(())
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
    fn tile_constants_are_the_kernels() {
        for (name, v) in [
            ("DCC_TILE_THREADS", CONV1D_TILE_BLOCK as usize),
            ("DCC_TILE_ITEMS", CONV1D_TILE_ITEMS),
            ("DCC_TILE_WIN", CONV1D_TILE_WIN),
        ] {
            let def = format!("#define {name} {v}\n");
            assert!(SOURCE.code.contains(&def), "conv.cu lacks `{def}`");
        }
        // the staging buffer holds at least one input channel's largest window (with its
        // skipped words) and a wide tile's weights at k 16, in double
        let smem = 32768;
        assert!(
            SOURCE
                .code
                .contains(&format!("#define DCC_TILE_SMEM {smem}\n"))
        );
        let per_channel = CONV1D_TILE_WIN + CONV1D_TILE_WIN / 32 + 1 + 8 * 16;
        assert_eq!(smem / 8 / per_channel, 10);
        let (c, _) = TileShape::Wide.dims();
        assert_eq!(4 * c, 8);
        assert_eq!(CONV1D_TILE_BLOCK as usize, 4 * CONV1D_TILE_ITEMS);
    }

    /// The bases `b` of a tile's items, as `conv.cu` maps item `g` (R outputs at `dil`).
    fn base(g: usize, r: usize, dil: usize) -> usize {
        (g / dil) * (r * dil) + g % dil
    }

    #[test]
    fn tile_window_bound_holds_for_every_tile() {
        for shape in [TileShape::Wide, TileShape::Narrow] {
            let (_, r) = shape.dims();
            for k in [1, 3, 5, 7, 11, 16] {
                for dil in 1usize..=7 {
                    for t_out in 1usize..=260 {
                        let ng = dil * t_out.div_ceil(r * dil);
                        for g0 in (0..ng).step_by(CONV1D_TILE_ITEMS) {
                            let g1 = (g0 + CONV1D_TILE_ITEMS - 1).min(ng - 1);
                            let wl = base(g1, r, dil) - base(g0, r, dil) + (r + k - 2) * dil + 1;
                            assert!(
                                wl <= shape.window_bound(k, dil),
                                "{shape:?} k{k} d{dil} t{t_out} tile {g0}: {wl}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn tile_pick_by_shape() {
        let mut big = g(6241, 6241, 11, 1, 5, 50, 1);
        big.c_in = 64;
        big.c_out = 64;
        assert_eq!(conv1d_tile_pick(&big), Some(TileShape::Wide));
        let mut f0 = g(24, 24, 3, 1, 1, 2, 1);
        f0.c_in = 512;
        f0.c_out = 512;
        assert_eq!(conv1d_tile_pick(&f0), Some(TileShape::Narrow));
        assert_eq!(conv1d_tile_pick(&g(100, 43, 30, 15, 1, 14, 1)), None); // stride 15
        assert_eq!(conv1d_tile_pick(&g(100, 100, 4, 1, 1, 3, 1)), None); // k 4
        assert_eq!(conv1d_tile_pick(&g(300, 300, 11, 1, 20, 200, 1)), None); // window 442
        // a block per tile
        assert_eq!(conv1d_tile_blocks(&big, TileShape::Wide), 8 * 49);
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
