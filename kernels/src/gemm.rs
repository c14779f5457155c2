//! The deterministic, batch-invariant fp32 linear (`kernels/cuda/gemm.cu`):
//! `y[rows, out] = x[rows, in] · Wᵀ + b`, `W` packed `[out, in]` (a `torch.nn.Linear` weight),
//! `x` and `y` with unit column stride and their own leading dimensions (an "NT" GEMM: rows of
//! `x` and of `W` are both contiguous along k). Its tensor-core sibling, the 3xTF32 linear with
//! the same arguments (batch-invariant, not bit-equal to a twin), is [`tf32`]; the
//! half-precision linear on tensor cores (binary16 weights, its own module), [`f16`].
//!
//! # The invariant: CUDA and Host are bit-identical
//!
//! Every fp32 variant ([`VARIANTS`]) and the host twin [`linear`] perform, for each
//! output element, the same operations in the same order:
//!
//! 1. k is padded with zeros to a multiple of [`K_TILE`] (= [`K_GROUPS`] · [`K_SLICE`] = 64);
//! 2. k-group `g < K_GROUPS` (16 groups) owns every `k` with `(k / K_SLICE) mod K_GROUPS == g`
//!    (the slice `[64t + 4g, 64t + 4g + 4)` of every 64-wide tile `t`) and accumulates
//!    `p_g = fma(x[r, k], w[o, k], p_g)` from `p_g = 0` over its k in ascending order, one
//!    rounding per step (CUDA `__fmaf_rn`, Rust [`f32::mul_add`]); a padded k contributes
//!    `fma(0, 0, p_g)`;
//! 3. the pairwise tree in group order: for `h = 1, 2, 4, 8`, `p_g = p_g + p_{g+h}` for every
//!    `g` that is a multiple of `2h`; `s = p_0` (so `s = (((p_0 + p_1) + (p_2 + p_3)) + ((p_4 +
//!    p_5) + (p_6 + p_7))) + (…p_8 … p_15…)`, [`reduce`]);
//! 4. `s = s + b[o]` with a bias; then, with a fused activation, `s = act(s)` (the `act.apply`
//!    op codes, computed per element exactly as `act.apply` does: [`crate::act::act_inplace`]
//!    on the host, `dcc_act1` on the device); `y = s`. So a linear with a fused activation gives
//!    the bits of the linear followed by `act.apply`.
//!
//! That order depends only on K: never on the number of rows, the tile shape, the tile's
//! position or the grid. So every variant gives the same bits, and a row's result does not
//! depend on which other rows share the launch (batch invariance: sessions can be batched into
//! one launch without changing a bit). The variants differ only in how the work is spread
//! (output tile per CTA, register tile per thread, how many k-groups each thread carries);
//! [`pick`] chooses one by shape for speed.
//!
//! Why 16 groups and a pairwise tree: at one session's 112 rows the outputs alone cannot fill an
//! H100 (a 2048 → 512 linear has 57,344 of them), so each output's k range is spread over 16
//! independent chains. Every subtree of the pairwise tree is a run of consecutive groups, i.e. a
//! contiguous k range of each tile: a thread carries a run of groups (`s·G .. s·G + G` for `G =
//! K_GROUPS / gw`, four in the variants here: independent accumulators that keep the FMA pipes
//! busy) and sums them in registers before the thread sets meet in shared memory, and the same
//! tree can split k over CTAs (a run of groups per CTA, then the last levels over the CTAs'
//! partials) without changing a bit.
//!
//! # One NVRTC module per variant
//!
//! Each variant is its own module (`gemm/linear_<name>`: `common.cuh`, `gemm.cu`'s templates,
//! then the one entry the `variant!` table writes), not one `gemm` module with every entry.
//! NVRTC spends most of its time on these template instantiations (two per variant, the 16-byte
//! and the 4-byte staging; about a minute for all six on the H100 host), and a module is
//! compiled whole. Split, a process compiles the variants it launches and nothing
//! else: the four [`PICKED`] ones for the `linear` op on the invariant path, none on the backend
//! path, all six only for the benchmark's sweep. Finer splits (one module per staging width) would
//! not pay: a launch picks the width from its operands' alignment at run time, so both are
//! needed wherever the variant is. The entry is written from the same literals as the
//! [`Variant`] table, so the two cannot disagree.
//!
//! Launch of a variant `v`: grid `(ceil(out / v.bn), ceil(rows / v.bm), 1)`, block
//! `(v.threads(), 1, 1)`, [`Variant::shared_bytes`] of dynamic shared memory ([`Variant::dims`]);
//! the kernels trap on another block shape, less shared memory or `in` above [`MAX_K`], and the
//! twins refuse any other geometry and such an `in`. Arguments: `(y, ldy, x, ldx, w, b, bias, act, alpha, rows,
//! in, out)`; `b` is read only when `bias != 0` (the backends check every pointer argument against
//! their live buffers, so a launch without a bias passes some live address there, never null);
//! `act` is [`NO_ACT`] or an `act.apply` op code ([`crate::act::SILU`], ...) with its `alpha`.

use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::twin::{invalid, rd, span, wr};
use crate::{CudaSource, KernelDef};

use Param::{F32, I32, I64, Ptr};

pub mod f16;
pub mod tf32;
pub mod tf32_tiles;

/// The largest `in` (K) the kernels take (`GEMM_MAX_K`: their k offsets are 32-bit; the CUDA
/// entries trap above it, the twins refuse it).
pub const MAX_K: usize = 0x7fff_ff00;

/// The `act` argument for no fused activation.
pub const NO_ACT: i32 = -1;

/// k-groups (`GEMM_KG` in `gemm.cu`): independent partial sums, reduced by the halving tree.
pub const K_GROUPS: usize = 16;
/// Consecutive k per group and tile (`GEMM_KS`).
pub const K_SLICE: usize = 4;
/// k per staged tile (`GEMM_BK`); K is padded with zeros to a multiple of it.
pub const K_TILE: usize = K_GROUPS * K_SLICE;

/// Declared parameters of every variant: `(y, ldy, x, ldx, w, b, bias, act, alpha, rows, in,
/// out)`.
const PARAMS: &[Param] = &[Ptr, I64, Ptr, I64, Ptr, Ptr, I32, I32, F32, I64, I64, I64];

/// One launch configuration of the linear kernel. Tile sizes are compile-time template arguments
/// of the CUDA entry; this table must repeat them (a test checks it against `gemm.cu`). To add a
/// variant: one `extern "C"` entry in `gemm.cu`, one `variant!` line below, and its name in
/// [`VARIANTS`].
#[derive(Debug)]
pub struct Variant {
    pub kernel: &'static KernelDef,
    /// Output rows per CTA.
    pub bm: usize,
    /// Output columns per CTA.
    pub bn: usize,
    /// Rows per thread.
    pub tm: usize,
    /// Columns per thread.
    pub tn: usize,
    /// Thread sets per CTA (a power of two dividing [`K_GROUPS`]): set `s` carries the k-groups
    /// `s·G .. s·G + G`, `G = K_GROUPS / gw` (one register tile each).
    pub gw: usize,
    /// Staging buffers in shared memory: `stages − 1` chunks are in flight (`cp.async`) while
    /// one is multiplied.
    pub stages: usize,
    /// k tiles ([`K_TILE`]) per staged chunk: one barrier per chunk.
    pub chunk: usize,
    /// CTAs per SM the kernel is compiled for (`__launch_bounds__`: registers per thread at most
    /// 65,536 / (threads · this)).
    pub min_blocks: usize,
}

impl Variant {
    /// Threads per CTA: `gw · (bm / tm) · (bn / tn)`.
    pub const fn threads(&self) -> u32 {
        (self.gw * (self.bm / self.tm) * (self.bn / self.tn)) as u32
    }

    /// Bytes of dynamic shared memory a launch gives the kernel: the staging buffers, `stages ·
    /// (bm + bn) · (chunk · K_TILE + 4)` floats, or the exchange between sets, `gw / 2 · bm · bn`
    /// floats, whichever is larger (the kernel traps on less).
    pub const fn shared_bytes(&self) -> usize {
        let stage = self.stages * (self.bm + self.bn) * (self.chunk * K_TILE + 4);
        let red = self.gw / 2 * self.bm * self.bn;
        4 * if stage > red { stage } else { red }
    }

    /// The launch over `rows × out` outputs, or `None` when the grid would exceed CUDA's limits
    /// (`gridDim.y ≤ 65535`, `gridDim.x < 2³¹`) or be empty (`rows` or `out` zero: nothing to
    /// write).
    pub fn dims(&self, rows: usize, out: usize) -> Option<LaunchDims> {
        let gx = out.div_ceil(self.bn);
        let gy = rows.div_ceil(self.bm);
        if gx == 0 || gy == 0 || gx > i32::MAX as usize || gy > 65_535 {
            return None;
        }
        Some(LaunchDims {
            grid: (gx as u32, gy as u32, 1),
            block: (self.threads(), 1, 1),
            shared_bytes: self.shared_bytes() as u32,
        })
    }

    /// CTAs of a `rows × out` launch.
    pub fn ctas(&self, rows: usize, out: usize) -> usize {
        out.div_ceil(self.bn) * rows.div_ceil(self.bm)
    }
}

macro_rules! variant {
    ($kid:ident, $vid:ident, $src:ident, $host:ident, $name:literal, $bm:literal, $bn:literal, $tm:literal, $tn:literal, $gw:literal, $st:literal, $ch:literal, $mb:literal, $nt:literal) => {
        #[doc = concat!("The NVRTC module of [`", stringify!($kid), "`] alone: `common.cuh`, ",
                        "`gemm.cu` (templates only) and this variant's entry (module docs: ",
                        "why one module per variant).")]
        pub static $src: CudaSource = CudaSource {
            name: concat!("gemm/linear_", $name),
            code: concat!(
                include_str!("../cuda/common.cuh"),
                include_str!("../cuda/gemm.cu"),
                "\nextern \"C\" __global__ void __launch_bounds__(",
                $nt,
                ", ",
                $mb,
                ") gemm_linear_",
                $name,
                "(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, \
                 int bias, int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_linear<",
                $bm, ", ", $bn, ", ", $tm, ", ", $tn, ", ", $gw, ", ", $st, ", ", $ch, ", ",
                $nt,
                ">(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
            ),
        };
        #[doc = concat!("`gemm.linear_", $name, "`: ", stringify!($bm), " × ", stringify!($bn),
                                    " outputs per CTA, ", stringify!($tm), " × ", stringify!($tn),
                                    " per thread, ", stringify!($gw), " thread sets (module docs: ",
                                    "arguments, launch, arithmetic).")]
        pub static $kid: KernelDef = KernelDef {
            name: concat!("gemm.linear_", $name),
            source: &$src,
            entry: concat!("gemm_linear_", $name),
            params: PARAMS,
            host: $host,
        };
        #[doc = concat!("The launch configuration of [`", stringify!($kid), "`].")]
        pub static $vid: Variant = Variant {
            kernel: &$kid,
            bm: $bm,
            bn: $bn,
            tm: $tm,
            tn: $tn,
            gw: $gw,
            stages: $st,
            chunk: $ch,
            min_blocks: $mb,
        };
        unsafe fn $host(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
            // SAFETY: forwarded HostFn contract.
            unsafe { host_linear(&$vid, dims, a) }
        }
    };
}

variant!(
    LINEAR_16X16,
    V16X16,
    SOURCE_16X16,
    host_16x16,
    "16x16",
    16,
    16,
    4,
    2,
    4,
    3,
    2,
    2,
    128
);
variant!(
    LINEAR_16X32,
    V16X32,
    SOURCE_16X32,
    host_16x32,
    "16x32",
    16,
    32,
    4,
    4,
    4,
    3,
    2,
    1,
    128
);
variant!(
    LINEAR_16X32N,
    V16X32N,
    SOURCE_16X32N,
    host_16x32n,
    "16x32n",
    16,
    32,
    2,
    4,
    4,
    3,
    2,
    1,
    256
);
variant!(
    LINEAR_32X32,
    V32X32,
    SOURCE_32X32,
    host_32x32,
    "32x32",
    32,
    32,
    4,
    4,
    4,
    3,
    2,
    1,
    256
);
variant!(
    LINEAR_32X64,
    V32X64,
    SOURCE_32X64,
    host_32x64,
    "32x64",
    32,
    64,
    4,
    8,
    4,
    3,
    2,
    1,
    256
);
variant!(
    LINEAR_1X128,
    V1X128,
    SOURCE_1X128,
    host_1x128,
    "1x128",
    1,
    128,
    1,
    4,
    16,
    3,
    1,
    2,
    512
);

/// Every variant, smallest CTA tile first (the single-row tile last).
pub static VARIANTS: &[&Variant] = &[&V16X16, &V16X32, &V16X32N, &V32X32, &V32X64, &V1X128];

/// Every fp32-weight kernel of the family: the fp32 variants, then the 3xTF32 linear
/// ([`tf32::LINEAR`]), then its tile variants ([`tf32_tiles::KERNELS`]). The half linear's
/// kernels are [`f16::KERNELS`] (another argument type).
pub static KERNELS: &[&KernelDef] = &[
    &LINEAR_16X16,
    &LINEAR_16X32,
    &LINEAR_16X32N,
    &LINEAR_32X32,
    &LINEAR_32X64,
    &LINEAR_1X128,
    &tf32::LINEAR,
    &tf32_tiles::LINEAR_T64X64R,
    &tf32_tiles::LINEAR_T64X128W,
    &tf32_tiles::LINEAR_T64X64W,
    &tf32_tiles::LINEAR_T16X32S8,
    &tf32_tiles::LINEAR_T16X32W8,
    &tf32_tiles::LINEAR_T16X32K128,
    &tf32_tiles::LINEAR_T16X32S4,
    &tf32_tiles::LINEAR_T16X64S4,
    &tf32_tiles::LINEAR_T32X32S6,
    &tf32_tiles::LINEAR_T32X64S4,
];

/// Rows from which [`pick`] takes the widest tile whatever the outputs (sessions batched: the
/// grid is large enough, and the wide tile stages each k tile for the most outputs).
pub const LARGE_ROWS: usize = 512;

/// The variant the `linear` op launches for `rows × out` outputs. Speed only: every variant
/// computes the same bits. The rule follows `dcc-bench kernels` on an H100 (fp32, the full
/// model's shapes at 112 and 1,792 rows): up to 2 rows the single-row tile; from [`LARGE_ROWS`]
/// rows, or from 1,024 outputs, `32x64` (the most reuse per staged tile, and enough CTAs); up to
/// 128 outputs `16x16` (the most CTAs); otherwise `16x32`.
pub fn pick(rows: usize, out: usize) -> &'static Variant {
    if rows <= 2 {
        &V1X128
    } else if rows >= LARGE_ROWS || out >= 1024 {
        &V32X64
    } else if out <= 128 {
        &V16X16
    } else {
        &V16X32
    }
}

/// Every variant [`pick`] can choose, whatever the shape: what a process that launches the
/// `linear` op on this path compiles (the rest, `16x32n` and `32x32`, serve the benchmark's sweep
/// only). A test checks every `pick` over a range of shapes against this list.
pub static PICKED: &[&Variant] = &[&V16X16, &V16X32, &V32X64, &V1X128];

/// The variant whose kernel is `name` (`gemm.linear_32x64`, ...).
pub fn variant(name: &str) -> Option<&'static Variant> {
    VARIANTS.iter().copied().find(|v| v.kernel.name == name)
}

/// One output element: the k-grouped, fused dot product of `x` and `w` over `k` (module docs,
/// steps 1–3), before the bias. `x` and `w` hold at least `k` elements.
#[inline]
pub fn dot(x: &[f32], w: &[f32], k: usize) -> f32 {
    let (x, w) = (&x[..k], &w[..k]);
    let mut p = [0.0f32; K_GROUPS];
    let full = k / K_TILE;
    for t in 0..full {
        let (xt, wt) = (&x[t * K_TILE..][..K_TILE], &w[t * K_TILE..][..K_TILE]);
        for (g, pg) in p.iter_mut().enumerate() {
            let (xs, ws) = (&xt[g * K_SLICE..][..K_SLICE], &wt[g * K_SLICE..][..K_SLICE]);
            for j in 0..K_SLICE {
                *pg = xs[j].mul_add(ws[j], *pg);
            }
        }
    }
    if full * K_TILE < k {
        // The last, partial tile: k past the end reads as zero on both sides.
        let base = full * K_TILE;
        for (g, pg) in p.iter_mut().enumerate() {
            for j in 0..K_SLICE {
                let kk = base + g * K_SLICE + j;
                let (a, b) = if kk < k { (x[kk], w[kk]) } else { (0.0, 0.0) };
                *pg = a.mul_add(b, *pg);
            }
        }
    }
    reduce(p)
}

/// The pairwise tree over the groups' partial sums (module docs, step 3): for `h = 1, 2, 4, 8`,
/// `p[g] = p[g] + p[g + h]` for every multiple `g` of `2h`; the result is `p[0]`.
#[inline]
pub fn reduce(mut p: [f32; K_GROUPS]) -> f32 {
    let mut h = 1;
    while h < K_GROUPS {
        for g in (0..K_GROUPS).step_by(2 * h) {
            p[g] += p[g + h];
        }
        h *= 2;
    }
    p[0]
}

/// `y[r, o] = act(dot(x[r, :], w[o, :]) (+ b[o]))` for `r < rows`, `o < out`: the host twin of
/// every variant (module docs). `x[r, :]` at `x[r·ldx..][..k]`, `w` packed `[out, k]`, `y[r, o]`
/// at `y[r·ldy + o]`; `act`: `None`, or an `act.apply` op code and alpha (an unknown code is an
/// error, before anything is written).
#[allow(clippy::too_many_arguments)]
pub fn linear(
    y: &mut [f32],
    ldy: usize,
    x: &[f32],
    ldx: usize,
    w: &[f32],
    b: Option<&[f32]>,
    rows: usize,
    k: usize,
    out: usize,
    act: Option<(i32, f32)>,
) -> Result<(), String> {
    linear_by(dot, y, ldy, x, ldx, w, b, rows, k, out, act)
}

/// [`linear`] over any per-output `dot` (the fp32 twin's [`dot`], or [`tf32::dot`]): the rows,
/// the bias, the activation and the unknown-code check are the same for every path.
#[allow(clippy::too_many_arguments)]
pub(crate) fn linear_by(
    dot: fn(&[f32], &[f32], usize) -> f32,
    y: &mut [f32],
    ldy: usize,
    x: &[f32],
    ldx: usize,
    w: &[f32],
    b: Option<&[f32]>,
    rows: usize,
    k: usize,
    out: usize,
    act: Option<(i32, f32)>,
) -> Result<(), String> {
    if let Some((op, alpha)) = act {
        crate::act::act_inplace(&mut [], op, alpha)?;
    }
    for r in 0..rows {
        let xr = &x[r * ldx..][..k];
        let yr = &mut y[r * ldy..][..out];
        for (o, yo) in yr.iter_mut().enumerate() {
            let s = dot(xr, &w[o * k..][..k], k);
            *yo = match b {
                Some(b) => s + b[o],
                None => s,
            };
        }
        if let Some((op, alpha)) = act {
            crate::act::act_inplace(yr, op, alpha)?;
        }
    }
    Ok(())
}

/// The twin of variant `v`: checks the launch geometry the kernel assumes, then [`linear`].
///
/// # Safety
/// As [`crate::HostFn`].
unsafe fn host_linear(v: &Variant, dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host_linear_by(v.kernel.name, |r, o| v.dims(r, o), dot, dims, a) }
}

/// A linear launch's integer arguments (the `gemm` family's argument list, every linear
/// kernel's: fp32, 3xTF32 and half), checked: the launch geometry `expected` gives, y's leading
/// dimension, `in · out` without overflow, `in` at most [`MAX_K`].
pub(crate) struct LinearArgs {
    pub rows: usize,
    pub k: usize,
    pub out: usize,
    pub ldx: usize,
    pub ldy: usize,
    pub bias: bool,
    pub act: Option<(i32, f32)>,
}

/// Reads and checks [`LinearArgs`] from `a` for kernel `name` launched with `dims`.
pub(crate) fn linear_args(
    name: &str,
    expected: impl Fn(usize, usize) -> Option<LaunchDims>,
    dims: &LaunchDims,
    a: &[Arg],
) -> Result<LinearArgs, KernelError> {
    let (ldy, ldx) = (a.usize(1)?, a.usize(3)?);
    let (rows, k, out) = (a.usize(9)?, a.usize(10)?, a.usize(11)?);
    let act = match a.i32(7)? {
        NO_ACT => None,
        op => Some((op, a.f32(8)?)),
    };
    if expected(rows, out) != Some(*dims) {
        return Err(invalid(format!(
            "{name}: launch {dims:?} for {rows} × {out} outputs, expected {:?}",
            expected(rows, out)
        )));
    }
    // Rows of x may overlap (a convolution's rows over its input, `ldx < in`: only read); rows
    // of y may not.
    if (rows > 1 && ldy < out) || k.checked_mul(out).is_none() {
        return Err(invalid(format!(
            "{name}: y's leading dimension {ldy} below out {out}, or in {k} · out {out} overflows"
        )));
    }
    if k > MAX_K {
        return Err(invalid(format!("{name}: in {k} above {MAX_K}")));
    }
    Ok(LinearArgs {
        rows,
        k,
        out,
        ldx,
        ldy,
        bias: a.i32(6)? != 0,
        act,
    })
}

/// A linear kernel's twin (an fp32 variant's or [`tf32::LINEAR`]'s, which share their
/// arguments): checks that the launch is `expected(rows, out)` and the sizes the kernel
/// assumes, then runs [`linear_by`] over `dot`.
///
/// # Safety
/// As [`crate::HostFn`].
pub(crate) unsafe fn host_linear_by(
    name: &str,
    expected: impl Fn(usize, usize) -> Option<LaunchDims>,
    dot: fn(&[f32], &[f32], usize) -> f32,
    dims: &LaunchDims,
    a: &[Arg],
) -> Result<(), KernelError> {
    let LinearArgs {
        rows,
        k,
        out,
        ldx,
        ldy,
        bias,
        act,
    } = linear_args(name, expected, dims, a)?;
    // SAFETY: HostFn contract: x spans rows of `k` at stride ldx, w `out · k`, b `out`, y rows
    // of `out` at stride ldy, y aliasing no input.
    unsafe {
        let b = if bias {
            Some(rd(a.ptr(5)?, out)?)
        } else {
            None
        };
        let x = rd(a.ptr(2)?, span(rows, k, ldx))?;
        let w = rd(a.ptr(4)?, out * k)?;
        let y = wr(a.ptr(0)?, span(rows, out, ldy))?;
        linear_by(dot, y, ldy, x, ldx, w, b, rows, k, out, act)
            .map_err(|e| invalid(format!("{name}: {e}")))
    }
}

#[cfg(test)]
pub(crate) mod tests;
