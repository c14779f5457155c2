//! The small-row tile variants of the 3xTF32 linear (one session's 112 rows, a few sessions'
//! up to 448): [`T16X32S8`], [`T16X32W8`], [`T16X32K128`], [`T16X32S4`], [`T16X64S4`],
//! [`T32X32S6`] and [`T32X64S4`]. Each is an instance of `gemm_t3w`
//! (`kernels/cuda/gemm_tiles.cuh`: the chains dealt to warps, one chain a warp here), so each
//! gives **the bits of `gemm.linear_tf32x3`** for every shape for
//! the reasons [`super`]'s module docs give (the operand values of every `mma`, the chain
//! `s mod 4` in ascending order with its three `mma` per step, and the end `(p0 + p1) +
//! (p2 + p3)`, `+ b`, act, kept per output element); only the CTA tile, the k tile and the ring
//! depth differ from the base.
//!
//! # Where the base loses time at 112 rows (reasoned from its timings, not profiled per stall)
//!
//! The base ([`super::BASE`]: 16 × 32 outputs a CTA, four warps, one chain each, 64-k tiles
//! through three buffers) gives 112 CTAs for the 512-output linears (7 row tiles × 16) on 132
//! SMs, one CTA an SM, and its timings grow with K at about 0.6 µs per 64-k tile (H100, commit
//! 851d140: 512 → 512 7.91 µs, 1536 → 512 15.88, 2048 → 512 19.74 for 8, 24 and 32 tiles).
//! A tile's work per warp is two k steps (24 `mma`), a few hundred cycles; what fits 0.6 µs is
//! the ring: the loop waits for tile `c`, then queues tile `c + 2`, so two tiles (24 KB) are in
//! flight an SM, and a tile takes half a load's round trip (weights from device memory, about
//! 1 µs under load). The 1,536- and 2,048-output linears (336 and 448 CTAs) have more CTAs an
//! SM in flight, and there the operand traffic out of L2 counts: a 16 × 32 tile stages
//! `(16 + 32) / (16 · 32)` floats per output and k, about 33 MB (512 → 1536) to 44 MB
//! (512 → 2048) a launch, 2.5–2.7 TB/s at the measured times.
//!
//! So the variants keep the base's small tile where the grid needs it and change:
//!
//! * **ring depth** ([`T16X32S8`]): the base's tile and warps, eight 64-k buffers (104 KB, two
//!   CTAs an SM), seven tiles in flight; for the 512-output linears, where one CTA an SM waits
//!   on its loads;
//! * **warps** ([`T16X32W8`]): the base's CTA tile on eight warps (each chain's four `n8` tiles
//!   split over two warps, the x fragment split by both) and eight buffers: two warps a
//!   scheduler where the base has one, to cover the `mma` chains' and the loads' latency;
//! * **k tile** ([`T16X32K128`]): 128-k tiles through four buffers (101 KB): three tiles of 128
//!   (384 k) in flight and one barrier per 128 k (each warp runs four steps between barriers,
//!   the base two);
//! * **residency** ([`T16X32S4`]): four 64-k buffers (52 KB) compiled for four CTAs an SM (128
//!   registers a thread at most): all 448 CTAs of a 2,048-output linear resident at once (528
//!   slots on 132 SMs), three tiles in flight each; for the wide linears;
//! * **more `n8` tiles a warp** ([`T16X64S4`]): 16 × 64 outputs a CTA, each warp eight `n8` tiles
//!   of its chain (eight independent `mma` chains per loaded x fragment, the x split once for
//!   24 `mma` a step, the base 12), 80/1024 floats staged per output and k (the base 96/1024),
//!   four buffers (87 KB, two CTAs an SM: 264 slots for the 168 and 224 CTAs of the 1,536- and
//!   2,048-output linears);
//! * **two row tiles** ([`T32X32S6`]): 32 × 32 outputs a CTA on eight warps (two warp tiles of
//!   the base × four chains), a third less staged per output and k (64/1024), six buffers
//!   (104 KB, two CTAs an SM); 112 rows take four row tiles (128 rows, one eighth of the work on
//!   zero rows), so 64 CTAs for 512 outputs, 192 and 256 for 1,536 and 2,048;
//! * **a larger tile for the widest linears** ([`T32X64S4`]): 32 × 64 outputs a CTA on eight
//!   warps of eight `n8` tiles, 48/1024 floats staged per output and k (half the base's), four
//!   buffers (104 KB, two CTAs an SM); 96 and 128 CTAs for 1,536 and 2,048 outputs.
//!
//! Which tile stages least for a given number of CTAs: a launch stages about `4 · K · rows ·
//! out · (1/bn + 1/bm)` bytes out of L2 (x once per CTA column, W once per CTA row; rows past
//! `rows` are zero-filled without a read), least for a square CTA tile of `rows · out / CTAs`
//! outputs: about 21 × 21 at 112 rows for 512 outputs on 132 SMs (the base's 16 × 32), 36 × 36
//! for 1,536 and 42 × 42 for 2,048 (32 × 32 or 32 × 64).
//!
//! Split-K over CTAs is not among them: the chains are the only split of k the bits allow, and
//! the variants that put the four chains on a thread-block cluster's CTAs lost everywhere
//! (module docs of [`super`]).
//!
//! Which variant wins per band was measured on an H100 (`dcc-bench kernels --variants
//! tf32x3,tf32small --rows 112,224,896,1792`; `tf32small`: every variant of [`SMALL`]); the
//! figures and the choice are in [`super::PICK`]'s docs.

use crate::abi::{Arg, KernelError, LaunchDims};
use crate::{CudaSource, KernelDef};

use super::{PARAMS, Tf32Variant, tf32};

/// The NVRTC module of [`LINEAR_T16X32S8`] alone: `common.cuh`, `gemm.cu`, `gemm_tiles.cuh` and
/// the variant's entry.
pub static SOURCE_T16X32S8: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t16x32s8",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 2) gemm_linear_tf32x3_t16x32s8(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 4, 1, 1, 4, 64, 8, \
         128>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t16x32s8`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`
/// ([`super`]'s module docs); the base's tile with an eight-buffer ring.
pub static LINEAR_T16X32S8: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t16x32s8",
    source: &SOURCE_T16X32S8,
    entry: "gemm_linear_tf32x3_t16x32s8",
    params: PARAMS,
    host: host_t16x32s8,
};

/// The launch configuration of [`LINEAR_T16X32S8`]: 16 × 32 outputs a CTA on four warps (one
/// chain each, as the base), 64-k tiles through eight stages, two CTAs an SM.
pub static T16X32S8: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T16X32S8,
    mt: 1,
    ntl: 4,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 8,
    min_blocks: 2,
};

unsafe fn host_t16x32s8(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T16X32S8, dims, a) }
}

/// The NVRTC module of [`LINEAR_T16X32W8`] alone.
pub static SOURCE_T16X32W8: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t16x32w8",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(256, 2) gemm_linear_tf32x3_t16x32w8(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 2, 1, 2, 4, 64, 8, \
         256>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t16x32w8`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`; the
/// base's CTA tile on eight warps.
pub static LINEAR_T16X32W8: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t16x32w8",
    source: &SOURCE_T16X32W8,
    entry: "gemm_linear_tf32x3_t16x32w8",
    params: PARAMS,
    host: host_t16x32w8,
};

/// The launch configuration of [`LINEAR_T16X32W8`]: 16 × 32 outputs a CTA on eight warps (two
/// warp tiles of 16 × 16 × four chains), 64-k tiles through eight stages, two CTAs an SM.
pub static T16X32W8: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T16X32W8,
    mt: 1,
    ntl: 2,
    wm: 1,
    wn: 2,
    cg: 4,
    bk: 64,
    stages: 8,
    min_blocks: 2,
};

unsafe fn host_t16x32w8(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T16X32W8, dims, a) }
}

/// The NVRTC module of [`LINEAR_T16X32K128`] alone.
pub static SOURCE_T16X32K128: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t16x32k128",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 2) gemm_linear_tf32x3_t16x32k128(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 4, 1, 1, 4, 128, 4, \
         128>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t16x32k128`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`; the
/// base's tile with 128-k tiles.
pub static LINEAR_T16X32K128: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t16x32k128",
    source: &SOURCE_T16X32K128,
    entry: "gemm_linear_tf32x3_t16x32k128",
    params: PARAMS,
    host: host_t16x32k128,
};

/// The launch configuration of [`LINEAR_T16X32K128`]: 16 × 32 outputs a CTA on four warps,
/// 128-k tiles through four stages, two CTAs an SM.
pub static T16X32K128: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T16X32K128,
    mt: 1,
    ntl: 4,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 128,
    stages: 4,
    min_blocks: 2,
};

unsafe fn host_t16x32k128(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T16X32K128, dims, a) }
}

/// The NVRTC module of [`LINEAR_T16X32S4`] alone.
pub static SOURCE_T16X32S4: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t16x32s4",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 4) gemm_linear_tf32x3_t16x32s4(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 4, 1, 1, 4, 64, 4, \
         128>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t16x32s4`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`; the
/// base's tile compiled for four CTAs an SM.
pub static LINEAR_T16X32S4: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t16x32s4",
    source: &SOURCE_T16X32S4,
    entry: "gemm_linear_tf32x3_t16x32s4",
    params: PARAMS,
    host: host_t16x32s4,
};

/// The launch configuration of [`LINEAR_T16X32S4`]: 16 × 32 outputs a CTA on four warps,
/// 64-k tiles through four stages, four CTAs an SM.
pub static T16X32S4: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T16X32S4,
    mt: 1,
    ntl: 4,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 4,
    min_blocks: 4,
};

unsafe fn host_t16x32s4(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T16X32S4, dims, a) }
}

/// The NVRTC module of [`LINEAR_T16X64S4`] alone.
pub static SOURCE_T16X64S4: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t16x64s4",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(128, 2) gemm_linear_tf32x3_t16x64s4(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 8, 1, 1, 4, 64, 4, \
         128>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t16x64s4`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`; eight
/// `n8` tiles a warp.
pub static LINEAR_T16X64S4: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t16x64s4",
    source: &SOURCE_T16X64S4,
    entry: "gemm_linear_tf32x3_t16x64s4",
    params: PARAMS,
    host: host_t16x64s4,
};

/// The launch configuration of [`LINEAR_T16X64S4`]: 16 × 64 outputs a CTA on four warps (one
/// chain each over the whole tile), 64-k tiles through four stages, two CTAs an SM.
pub static T16X64S4: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T16X64S4,
    mt: 1,
    ntl: 8,
    wm: 1,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 4,
    min_blocks: 2,
};

unsafe fn host_t16x64s4(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T16X64S4, dims, a) }
}

/// The NVRTC module of [`LINEAR_T32X32S6`] alone.
pub static SOURCE_T32X32S6: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t32x32s6",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(256, 2) gemm_linear_tf32x3_t32x32s6(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 4, 2, 1, 4, 64, 6, \
         256>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t32x32s6`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`; two
/// of the base's warp tiles a CTA.
pub static LINEAR_T32X32S6: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t32x32s6",
    source: &SOURCE_T32X32S6,
    entry: "gemm_linear_tf32x3_t32x32s6",
    params: PARAMS,
    host: host_t32x32s6,
};

/// The launch configuration of [`LINEAR_T32X32S6`]: 32 × 32 outputs a CTA on eight warps (two
/// row tiles of 16 × 32 × four chains), 64-k tiles through six stages, two CTAs an SM.
pub static T32X32S6: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T32X32S6,
    mt: 1,
    ntl: 4,
    wm: 2,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 6,
    min_blocks: 2,
};

unsafe fn host_t32x32s6(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T32X32S6, dims, a) }
}

/// The NVRTC module of [`LINEAR_T32X64S4`] alone.
pub static SOURCE_T32X64S4: CudaSource = CudaSource {
    name: "gemm/linear_tf32x3_t32x64s4",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/gemm.cu"),
        include_str!("../../cuda/gemm_tiles.cuh"),
        "\nextern \"C\" __global__ void __launch_bounds__(256, 2) gemm_linear_tf32x3_t32x64s4(\
         float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, \
         int act, float alpha, i64 rows, i64 in, i64 out) {\n    gemm_t3w<1, 8, 2, 1, 4, 64, 4, \
         256>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});\n}\n"
    ),
};

/// `gemm.linear_tf32x3_t32x64s4`: the 3xTF32 linear, bit-equal to `gemm.linear_tf32x3`; two
/// row tiles of eight `n8` tiles a warp.
pub static LINEAR_T32X64S4: KernelDef = KernelDef {
    name: "gemm.linear_tf32x3_t32x64s4",
    source: &SOURCE_T32X64S4,
    entry: "gemm_linear_tf32x3_t32x64s4",
    params: PARAMS,
    host: host_t32x64s4,
};

/// The launch configuration of [`LINEAR_T32X64S4`]: 32 × 64 outputs a CTA on eight warps (two
/// row tiles of 16 × 64 × four chains), 64-k tiles through four stages, two CTAs an SM.
pub static T32X64S4: Tf32Variant = Tf32Variant {
    kernel: &LINEAR_T32X64S4,
    mt: 1,
    ntl: 8,
    wm: 2,
    wn: 1,
    cg: 4,
    bk: 64,
    stages: 4,
    min_blocks: 2,
};

unsafe fn host_t32x64s4(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { host(&T32X64S4, dims, a) }
}

/// The twin of variant `v`: its geometry checked, then the base's model ([`tf32::dot`]).
///
/// # Safety
/// As [`crate::HostFn`].
unsafe fn host(v: &'static Tf32Variant, dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: forwarded HostFn contract.
    unsafe { super::super::host_linear_by(v.kernel.name, |r, o| v.dims(r, o), tf32::dot, dims, a) }
}

/// The small-row variants, in the order `dcc-bench kernels` lists them.
pub static SMALL: &[&Tf32Variant] = &[
    &T16X32S8,
    &T16X32W8,
    &T16X32K128,
    &T16X32S4,
    &T16X64S4,
    &T32X32S6,
    &T32X64S4,
];
