//! The tile variants of the 3xTF32 linear (`kernels/cuda/gemm_tiles.cuh`), [`T64X64R`],
//! [`T64X128W`] and [`T64X64W`] for batched rows, and the small-row ones for one session's 112
//! rows ([`SMALL`]: [`T16X32S8`], [`T16X32W8`], [`T16X32K128`], [`T16X32S4`], [`T16X64S4`], [`T32X32S6`], [`T32X64S4`];
//! their design and why, in `tf32_tiles_small.rs`): the same arguments and **the same bits as
//! [`tf32::LINEAR`] for every shape**, with other work per warp and per CTA. [`pick`] chooses
//! one or the base by shape for speed, by the table [`PICK`]; [`BASE`] describes
//! `gemm.linear_tf32x3` itself in the same terms.
//!
//! # Why the bits are those of `gemm.linear_tf32x3`
//!
//! [`tf32`]'s module docs fix, per output element, everything that decides its bits: the operand
//! values of every `mma` (step `s` holds `x[r, 8s + p]` and `w[o, 8s + p]` at `mma` k position
//! `p`, zeros past K, split into big and small), the chain (`s mod 4`; from 0, ascending `s`,
//! three `mma` per step in the order small·big, big·small, big·big; steps past K skipped) and the
//! end (`(p0 + p1) + (p2 + p3)`, `+ b`, the activation). An `mma` computes each of its outputs
//! from that output's row of A, column of B and accumulator alone (what the base kernel's
//! batch invariance rests on: its CUDA test moves a row to every position of an `m16` tile), so
//! an output's bits are a function of those three things. The variant keeps all three and
//! changes only who computes what:
//!
//! * a warp owns `mt × ntl` `mma` tiles (`16·mt` rows × `8·ntl` outputs; the base: 1 × 4),
//!   loading each fragment exactly as the base does;
//! * the chains: in `t64x64r` each warp runs all four in four accumulator sets (the base: one
//!   chain per warp, the partials exchanged through shared memory); in the `w` variants
//!   (`cg` = 4 chain groups of warps over one output tile) each warp runs one, as in the base;
//!   a tile is a multiple of 32 k, so a tile's step `j` is chain `j mod 4`, and every chain takes
//!   its steps in ascending order;
//! * the end is the same fp32 additions on the same values (NVRTC `--fmad=false`), from the
//!   thread's own registers (`t64x64r`) or from the four chains' partial tiles in shared memory
//!   (the `w` variants, as the base).
//!
//! The Host twin is [`tf32`]'s model ([`tf32::dot`]) for all: the Host cannot repeat an `mma`'s
//! bits, so bit-equality with the base is a CUDA test (`runtime/tests/gemm_tf32_tiles.rs`: each
//! variant against the base, bit for bit, over the model's shapes and tails in rows, outputs and
//! K, and row windows of one launch). Without a GPU, `scripts/tf32_tiles_emu/run.sh` runs the
//! CUDA source of the base and of the variants on a CPU emulation (a thread per CUDA thread, each
//! `mma` one fixed per-element model) and checks each output bit for bit against the spec
//! evaluated on the same model: the indexing (fragments, staging, chains) is the spec's.
//!
//! # The variants and the pick (H100: 132 SMs, 228 KB shared memory and 64K registers per SM)
//!
//! [`T64X64R`]: 64 × 64 outputs a CTA on 4 warps, each warp 32 × 32 outputs running the four
//! chains in registers (128 accumulators a thread, 215 registers from `ptxas -v` for sm_90 under
//! NVRTC 13.2, no spills; two CTAs an SM); 32-k tiles, four stages. A warp splits 8 x and 8 w
//! values per step for 24 `mma` (the base: 4 and 8 for 12): the split's integer work is what
//! bounds the base at large M. At one session's 112 rows its 64 × 64 tiles give too few CTAs
//! (112 × 512 outputs: 16 of them for 132 SMs), and the base wins.
//!
//! Measured on one NVIDIA H100 80GB HBM3 at commit 851d140 (`dcc-bench kernels --variants
//! tf32x3,tf32tiles,tf32auto --rows 112,1600,1792`, µs per launch; the variants were bit-equal
//! to `gemm.linear_tf32x3` there; cuBLAS is the fp32 `Backend::gemm_bias` path, not
//! batch-invariant):
//!
//! | in → out | rows | cuBLAS | base | `t64x64r` |
//! |---|---|---|---|---|
//! | 512 → 1536 | 112 | 14.46 | **13.08** | 20.60 |
//! | 512 → 1536 | 1792 | 74.48 | 110.04 | **76.53** |
//! | 512 → 512 | 112 | 11.22 | **7.91** | 19.84 |
//! | 512 → 512 | 1792 | 33.58 | 43.02 | **28.31** |
//! | 512 → 2048 | 112 | 16.22 | **16.50** | 20.57 |
//! | 512 → 2048 | 1792 | 92.98 | 144.12 | **90.86** |
//! | 2048 → 512 | 112 | 18.88 | **19.74** | 62.72 |
//! | 2048 → 512 | 1792 | 98.51 | 147.26 | **94.78** |
//! | 1536 → 512 | 112 | 17.98 | **15.88** | 48.83 |
//! | 1536 → 512 | 1792 | 76.39 | 117.28 | **70.69** |
//! | 320 → 512 | 112 | 9.85 | **6.50** | 14.64 |
//! | 320 → 512 | 1600 | – | – | **20.38** |
//! | 320 → 512 | 1792 | 23.39 | 30.53 | **20.55** |
//! | 512 → 80 | 112 | 10.19 | **7.51** | 19.31 |
//! | 512 → 80 | 1792 | 14.36 | **12.78** | 20.07 |
//!
//! So `t64x64r` from [`LARGE_ROWS`] rows for 512 outputs and more (1.3–1.6× the base there, on
//! par with cuBLAS), the base below that and for the 80-output linear (before `t64x128w`). The variants that lost
//! everywhere there (the chains on a thread-block cluster's four CTAs at 32 × 32, 32 × 64 and
//! 64 × 64, and a 64 × 64 tile of 16 warps exchanging partials in shared memory) were removed.
//!
//! **Large rows, `t64x128w`.** `ncu` on an H100 (16 sessions batched, 3,584 rows): `t64x64r` runs
//! at about 28 TFLOP/s, far under what `mma.sync` gives; its SASS issues about four other
//! instructions per `mma` (the split's integer and float work, the fragment loads), and two
//! CTAs of four warps leave two warps a scheduler to hide the loads' and the splits' latency. The
//! four chains in one warp are what caps its warp tile: four accumulator sets of 32 × 32 are
//! the 128 registers a thread can spare. [`T64X128W`] deals the chains to warps instead (one
//! each, as the base), so the same 128 accumulators hold a 64 × 64 warp tile: a warp splits 16
//! x and 16 w values per step for 96 `mma` (a third of a split per `mma`, against two thirds),
//! about two other instructions per `mma` in its SASS. Eight warps make a 64 × 128 CTA tile
//! (two warp tiles × four chains; 255 registers, no spills, one CTA an SM), 64-k tiles through
//! three stages (156 KB; each warp runs two of a tile's eight steps between barriers), and the
//! four partial tiles meet in shared memory at the end, each output summed
//! `(p0 + p1) + (p2 + p3)` by one thread, coalesced stores. Per output and k it stages 3/128
//! floats (`t64x64r`: 1/32), so at twice `t64x64r`'s rate it asks L2 for about 3 TB/s at
//! 1,792 rows. [`T64X64W`] is its warp tile on a CTA of four warps, two CTAs an SM (more CTAs,
//! an overlap of one CTA's barriers and ends with the other's work, a third more L2 traffic;
//! 255 registers and 76 bytes of spills): for the benchmark's comparison, not picked (below).
//! The grids at 1,792 rows: 28 × 4 CTAs of `t64x128w` for 512 outputs (one wave of 132 SMs,
//! 85 % full), 28 × 12 for 1,536, 28 × 16 for 2,048; the 80-output linear keeps the base
//! (one partial 128-output tile, 28 CTAs).
//!
//! **What [`PICK`] takes, measured** (one H100, `dcc-bench kernels --variants
//! tf32x3,tf32tiles,tf32small,tf32auto --rows 112,224,896,1792`; [`PICK`]'s docs give the µs):
//! at one session's 112 rows [`T32X64S4`] for 1,536 and 2,048 outputs and [`T16X32K128`] (one
//! barrier per 128 k) for 512 and 80; from 512 rows `t64x64r` and `t64x128w` as before (alone
//! [`T64X64W`] launched faster at 1,792 rows, inside a batched call's graph it was slower).
//!
//! The weights are not pre-split: storing big and small parts would double the weights' memory
//! (and the stream a chunk reads, about 3 GB) to save the integer work of the split, which the
//! larger warp tiles already amortize (a w value split once per 32 rows).

use crate::abi::{Arg, KernelError, LaunchDims};
use crate::{CudaSource, KernelDef};

use super::{PARAMS, tf32};

/// One launch configuration of the 3xTF32 linear ([`BASE`] or [`T64X64R`]). The CUDA entry of
/// the tile variant repeats these numbers as template arguments (a test checks the two agree).
#[derive(Debug)]
pub struct Tf32Variant {
    pub kernel: &'static KernelDef,
    /// `m16` tiles per warp (rows `16·mt`).
    pub mt: usize,
    /// `n8` tiles per warp (outputs `8·ntl`).
    pub ntl: usize,
    /// Warps along rows and along outputs in one chain group.
    pub wm: usize,
    pub wn: usize,
    /// Chain groups per CTA (4 in the base: one chain each; 1 in the tile variant: every warp
    /// runs the four chains).
    pub cg: usize,
    /// k per staged tile (a multiple of 32).
    pub bk: usize,
    /// Staging buffers in the ring.
    pub stages: usize,
    /// CTAs per SM the entry is compiled for (`__launch_bounds__`).
    pub min_blocks: usize,
}

impl Tf32Variant {
    /// Output rows per CTA.
    pub const fn bm(&self) -> usize {
        16 * self.mt * self.wm
    }

    /// Outputs per CTA.
    pub const fn bn(&self) -> usize {
        8 * self.ntl * self.wn
    }

    /// Threads per CTA: 32 per warp, `wm · wn · cg` warps.
    pub const fn threads(&self) -> u32 {
        (32 * self.wm * self.wn * self.cg) as u32
    }

    /// Bytes of dynamic shared memory: the staging ring, `stages · (bm + bn) · (bk + 4)` floats,
    /// or, with chains on several warps (`cg > 1`), the partials' exchange, `cg` tiles of
    /// `bm × (bn + 8)` floats (the rows padded for conflict-free stores; the base's `cg` tiles
    /// of `bm × bn` fit in it), whichever is larger.
    pub const fn shared_bytes(&self) -> usize {
        let stage = self.stages * (self.bm() + self.bn()) * (self.bk + 4);
        let red = if self.cg > 1 {
            self.cg * self.bm() * (self.bn() + 8)
        } else {
            0
        };
        4 * if stage > red { stage } else { red }
    }

    /// The CUDA template call of a tile variant's entry: `gemm_t3v<mt, ntl, wm, wn, bk, stages,
    /// threads>` (every warp running the four chains, `cg = 1`) or `gemm_t3w<mt, ntl, wm, wn,
    /// cg, bk, stages, threads>` (the chains dealt to `cg` warp groups).
    pub fn template(&self) -> String {
        if self.cg == 1 {
            format!(
                "gemm_t3v<{}, {}, {}, {}, {}, {}, {}>",
                self.mt,
                self.ntl,
                self.wm,
                self.wn,
                self.bk,
                self.stages,
                self.threads()
            )
        } else {
            format!(
                "gemm_t3w<{}, {}, {}, {}, {}, {}, {}, {}>",
                self.mt,
                self.ntl,
                self.wm,
                self.wn,
                self.cg,
                self.bk,
                self.stages,
                self.threads()
            )
        }
    }

    /// The launch over `rows × out` outputs: grid `(⌈out / bn⌉, ⌈rows / bm⌉, 1)`; `None` when
    /// empty or past CUDA's grid limits.
    pub fn dims(&self, rows: usize, out: usize) -> Option<LaunchDims> {
        let gx = out.div_ceil(self.bn());
        let gy = rows.div_ceil(self.bm());
        if gx == 0 || gy == 0 || gx > i32::MAX as usize || gy > 65_535 {
            return None;
        }
        Some(LaunchDims {
            grid: (gx as u32, gy as u32, 1),
            block: (self.threads(), 1, 1),
            shared_bytes: self.shared_bytes() as u32,
        })
    }
}

/// `gemm.linear_tf32x3` in these terms: one `m16 × n8·4` tile per warp, four warps (one chain
/// each), 64-k tiles, three stages; its launch is [`tf32::dims`].
pub static BASE: Tf32Variant = Tf32Variant {
    kernel: &tf32::LINEAR,
    mt: 1,
    ntl: 4,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 3,
    min_blocks: 1,
};

/// The NVRTC module of [`LINEAR_T64X64R`] alone: `common.cuh`, `gemm.cu`, `gemm_tiles.cuh` and
/// the variant's entry.
pub static SOURCE_T64X64R: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t64x64r",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 2) gemm_linear_tf32x3_t64x64r(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3v<2, 4, 2, 2, 32, 4, 128>(\
         GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t64x64r`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3` (module
/// docs).
pub static LINEAR_T64X64R: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t64x64r",
    source: &SOURCE_T64X64R,
    entry: "gemm_linear_tf32x3_t64x64r",
    params: PARAMS,
    host: host_t64x64r,
};

/// The launch configuration of [`LINEAR_T64X64R`]: 64 × 64 outputs a CTA on four warps of
/// 32 × 32, 32-k tiles through four stages, two CTAs an SM.
pub static T64X64R: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T64X64R,
    mt: 2,
    ntl: 4,
    wm: 2,
    wn: 2,
    cg: 1,
    bk: 32,
    stages: 4,
    min_blocks: 2,
};

unsafe fn host_t64x64r(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe {
        super::host_linear_by(
            LINEAR_T64X64R.name,
            |r, o| T64X64R.dims(r, o),
            tf32::dot,
            dims,
            a,
        )
    }
}

/// The NVRTC module of [`LINEAR_T64X128W`] alone: `common.cuh`, `gemm.cu`, `gemm_tiles.cuh` and
/// the variant's entry.
pub static SOURCE_T64X128W: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t64x128w",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(256, 1) gemm_linear_tf32x3_t64x128w(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<4, 8, 1, 2, 4, 64, 3, \
         256>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t64x128w`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3` (module
/// docs), for batched row counts.
pub static LINEAR_T64X128W: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t64x128w",
    source: &SOURCE_T64X128W,
    entry: "gemm_linear_tf32x3_t64x128w",
    params: PARAMS,
    host: host_t64x128w,
};

/// The launch configuration of [`LINEAR_T64X128W`]: 64 × 128 outputs a CTA on eight warps, two
/// warp tiles of 64 × 64 times four chains (one a warp), 64-k tiles through three stages, one
/// CTA an SM.
pub static T64X128W: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T64X128W,
    mt: 4,
    ntl: 8,
    wm: 1,
    wn: 2,
    cg: 4,
    bk: 64,
    stages: 3,
    min_blocks: 1,
};

unsafe fn host_t64x128w(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe {
        super::host_linear_by(
            LINEAR_T64X128W.name,
            |r, o| T64X128W.dims(r, o),
            tf32::dot,
            dims,
            a,
        )
    }
}

/// The NVRTC module of [`LINEAR_T64X64W`] alone.
pub static SOURCE_T64X64W: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t64x64w",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 2) gemm_linear_tf32x3_t64x64w(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<4, 8, 1, 1, 4, 64, 3, \
         128>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t64x64w`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3` (module
/// docs); [`T64X128W`]'s warp tile on half its CTA, two CTAs an SM (for the benchmark's
/// comparison: [`pick`] does not choose it).
pub static LINEAR_T64X64W: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t64x64w",
    source: &SOURCE_T64X64W,
    entry: "gemm_linear_tf32x3_t64x64w",
    params: PARAMS,
    host: host_t64x64w,
};

/// The launch configuration of [`LINEAR_T64X64W`]: 64 × 64 outputs a CTA on four warps, one
/// warp tile of 64 × 64 times four chains, 64-k tiles through three stages, two CTAs an SM.
pub static T64X64W: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T64X64W,
    mt: 4,
    ntl: 8,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 3,
    min_blocks: 2,
};

unsafe fn host_t64x64w(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe {
        super::host_linear_by(
            LINEAR_T64X64W.name,
            |r, o| T64X64W.dims(r, o),
            tf32::dot,
            dims,
            a,
        )
    }
}

#[path = "tf32_tiles_small.rs"]
mod small;
pub use small::{
    LINEAR_T16X32K128, LINEAR_T16X32S4, LINEAR_T16X32S8, LINEAR_T16X32W8, LINEAR_T16X64S4,
    LINEAR_T32X32S6, LINEAR_T32X64S4, SMALL, T16X32K128, T16X32S4, T16X32S8, T16X32W8, T16X64S4,
    T32X32S6, T32X64S4,
};

/// The tile variants (not [`BASE`]), in the order `dcc-bench kernels` lists them: the large-row
/// ones, then the small-row ones ([`SMALL`]).
pub static TILES: &[&Tf32Variant] = &[
    &T64X64R,
    &T64X128W,
    &T64X64W,
    &T16X32S8,
    &T16X32W8,
    &T16X32K128,
    &T16X32S4,
    &T16X64S4,
    &T32X32S6,
    &T32X64S4,
];

/// The kernels of [`TILES`].
pub static KERNELS: &[&KernelDef] = &[
    &LINEAR_T64X64R,
    &LINEAR_T64X128W,
    &LINEAR_T64X64W,
    &LINEAR_T16X32S8,
    &LINEAR_T16X32W8,
    &LINEAR_T16X32K128,
    &LINEAR_T16X32S4,
    &LINEAR_T16X64S4,
    &LINEAR_T32X32S6,
    &LINEAR_T32X64S4,
];

/// One row of [`PICK`]: from `rows` rows and `out` outputs on, `variant`.
#[derive(Debug)]
pub struct PickRow {
    pub rows: usize,
    pub out: usize,
    pub variant: &'static Tf32Variant,
}

/// Rows from which [`pick`] takes [`T64X128W`] for linears of [`WIDE_OUT`] outputs and more
/// (eight sessions and more).
pub const BATCH_ROWS: usize = 896;

/// Rows from which [`pick`] takes [`T64X64R`] for linears of [`WIDE_OUT`] outputs and more,
/// [`T32X32S6`] for narrower ones (four sessions and more).
pub const LARGE_ROWS: usize = 512;

/// Rows of two sessions (2 × 112): from here the narrow linears take [`T32X32S6`].
pub const PAIR_ROWS: usize = 224;

/// Outputs from which [`pick`] takes a wide tile.
pub const WIDE_OUT: usize = 512;

/// Outputs of the DiT's qkv (1,536): from here one session's rows take [`T32X64S4`].
pub const WIDEST_OUT: usize = 1536;

/// Outputs of the DiT's MLP up (2,048).
pub const MLP_OUT: usize = 2048;

/// The pick rule as a table (`dcc-bench kernels` prints it): the first row whose `rows` and
/// `out` the shape reaches gives the variant, [`BASE`] when none does. By shape alone, and
/// rows may decide: every variant gives the same bits, so the rows sharing a launch still
/// never change a row's result.
///
/// Measured on one H100 (`dcc-bench kernels --variants tf32x3,tf32tiles,tf32small --rows
/// 112,224,896,1792`, µs per launch at the full model's linears): at 112 rows `t32x64s4` is the
/// fastest for 1,536 and 2,048 outputs (12.2 and 12.6 against the base's 12.8 and 16.2) and
/// `t16x32k128` for 512 and 80 (6.9 against 8.0 at 512 → 512; 15.6 against 19.8 at
/// 2,048 → 512); at 224 rows `t32x64s4` for 2,048 outputs (19.9 against 23.1) and `t32x32s6`
/// for the others. From 512 rows the table keeps `t64x64r` and `t64x128w`: alone, `t64x64w` at
/// 1,792 rows and `t32x64s4` at 896 launched faster (84.1 against 98.3 µs at 512 → 2,048;
/// 57.3 against 82.0 at 2,048 → 512), but a batched call of 16 sessions with them in its
/// graph took 172.0 ms against 159.7 ms with these (`dcc-bench sessions --sessions 16 --batch`,
/// the same H100 session; `models/BENCH.md`).
pub static PICK: &[PickRow] = &[
    PickRow {
        rows: BATCH_ROWS,
        out: WIDE_OUT,
        variant: &T64X128W,
    },
    PickRow {
        rows: LARGE_ROWS,
        out: WIDE_OUT,
        variant: &T64X64R,
    },
    PickRow {
        rows: LARGE_ROWS,
        out: 1,
        variant: &T32X32S6,
    },
    PickRow {
        rows: PAIR_ROWS,
        out: MLP_OUT,
        variant: &T32X64S4,
    },
    PickRow {
        rows: PAIR_ROWS,
        out: 1,
        variant: &T32X32S6,
    },
    PickRow {
        rows: 1,
        out: WIDEST_OUT,
        variant: &T32X64S4,
    },
    PickRow {
        rows: 1,
        out: 1,
        variant: &T16X32K128,
    },
];

/// The variant the 3xTF32 `linear` launches for `rows × out` outputs ([`PICK`]'s first row
/// that `rows` and `out` reach, else [`BASE`]). Speed only: all compute the same bits.
pub fn pick(rows: usize, out: usize) -> &'static Tf32Variant {
    PICK.iter()
        .find(|p| rows >= p.rows && out >= p.out)
        .map_or(&BASE, |p| p.variant)
}

/// Every variant [`pick`] can choose: what a process on the 3xTF32 path compiles.
pub static PICKED: &[&Tf32Variant] = &[&T64X128W, &T64X64R, &T32X64S4, &T32X32S6, &T16X32K128];

/// The variant whose kernel is `name` (`gemm.linear_tf32x3`, `gemm.linear_tf32x3_t64x64r`).
pub fn variant(name: &str) -> Option<&'static Tf32Variant> {
    std::iter::once(&BASE)
        .chain(TILES.iter().copied())
        .find(|v| v.kernel.name == name)
}

#[cfg(test)]
#[path = "tf32_tiles_tests.rs"]
mod tests;
