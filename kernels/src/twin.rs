//! What every host twin of the model kernel families (`act`, `attention`, `copy`,
//! `elementwise`, `embed`, `norm`) shares: the [`kdef!`] declaration of a kernel, the slices a
//! twin rebuilds from raw addresses, and the launch-shape checks of the warp-per-row kernels.
//!
//! Sizes are `i64` (`long long` in CUDA), scalars `f32`, addresses [`crate::Param::Ptr`]. A null
//! address is allowed only where a kernel's doc says so (optional LayerNorm affine parameters).
//! Buffers a kernel reads and writes must not overlap unless its doc says "in place".

use half::f16;

use crate::abi::{DevPtr, KernelError, LaunchDims};
use crate::math::WARP;

/// Declares `pub static $id: KernelDef` named `<family>.<name>` with the CUDA entry
/// `<family>_<name>` of the family's `SOURCE`.
macro_rules! kdef {
    ($id:ident, $family:literal, $name:literal, [$($p:expr),* $(,)?], $host:ident, $doc:literal) => {
        #[doc = $doc]
        pub static $id: $crate::KernelDef = $crate::KernelDef {
            name: concat!($family, ".", $name),
            source: &SOURCE,
            entry: concat!($family, "_", $name),
            params: &[$($p),*],
            host: $host,
        };
    };
}
pub(crate) use kdef;

pub(crate) fn invalid(m: impl Into<String>) -> KernelError {
    KernelError::Invalid(m.into())
}

/// Elements spanned by a `rows × cols` block with leading dimension `ld`.
pub(crate) fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * ld + cols
    }
}

/// # Safety
/// `p` addresses `n` readable floats (or `n == 0`).
pub(crate) unsafe fn rd<'a>(p: DevPtr, n: usize) -> Result<&'a [f32], KernelError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid("null input address"));
    }
    // SAFETY: HostFn contract (caller).
    Ok(unsafe { std::slice::from_raw_parts(p.0 as *const f32, n) })
}

/// # Safety
/// `p` addresses `n` writable floats not aliased by any other slice of the launch.
pub(crate) unsafe fn wr<'a>(p: DevPtr, n: usize) -> Result<&'a mut [f32], KernelError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(invalid("null output address"));
    }
    // SAFETY: HostFn contract (caller).
    Ok(unsafe { std::slice::from_raw_parts_mut(p.0 as *mut f32, n) })
}

/// # Safety
/// `p` addresses `n` readable binary16 values (or `n == 0`).
pub(crate) unsafe fn rd16<'a>(p: DevPtr, n: usize) -> Result<&'a [f16], KernelError> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() || !p.0.is_multiple_of(2) {
        return Err(invalid("null or unaligned binary16 input address"));
    }
    // SAFETY: HostFn contract (caller); f16 is a 2-byte plain value, the address 2-aligned.
    Ok(unsafe { std::slice::from_raw_parts(p.0 as *const f16, n) })
}

/// # Safety
/// `p` addresses `n` writable binary16 values not aliased by any other slice of the launch.
pub(crate) unsafe fn wr16<'a>(p: DevPtr, n: usize) -> Result<&'a mut [f16], KernelError> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() || !p.0.is_multiple_of(2) {
        return Err(invalid("null or unaligned binary16 output address"));
    }
    // SAFETY: HostFn contract (caller); f16 is a 2-byte plain value, the address 2-aligned.
    Ok(unsafe { std::slice::from_raw_parts_mut(p.0 as *mut f16, n) })
}

/// Checks a warp-per-row launch: 1-D blocks of a multiple of 32 threads (the kernels trap
/// otherwise). Returns the warps per block.
pub(crate) fn check_warp_block(name: &str, dims: &LaunchDims) -> Result<usize, KernelError> {
    let (x, y, z) = dims.block;
    if x == 0 || !(x as usize).is_multiple_of(WARP) || y != 1 || z != 1 {
        return Err(invalid(format!(
            "{name}: block {:?} is not 1-D with a multiple of {WARP} threads",
            dims.block
        )));
    }
    Ok(x as usize / WARP)
}
