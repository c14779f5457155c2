//! The carry write-back of a prompt + history cache: the slices a region's contract keeps
//! ([`Keep`]: `H[0:head] ‖ H[ℓ−tail:ℓ]` of its storage order, paper eq. 2), written from the
//! cache as a call left it into the cache the next call reads.

use dcc_kernels::LaunchDims;

use super::{Ctx, OpError, THREADS, Tensor, int, ptr};
use crate::contract::Keep;

/// Frames a cache of extent `extent` keeps under `keep`: all of them up to `head + tail`, then
/// `head + tail`.
pub fn kept(keep: &Keep, extent: usize) -> usize {
    extent.min(keep.bound())
}

/// `(outer, cap, inner)` of a packed `[outer, frames, inner]` cache view.
fn rows(view: &'static str, t: &Tensor<'_>) -> Result<(usize, usize, usize), OpError> {
    let op = "write_back";
    match t.dims() {
        &[o, c, i] if t.is_packed() => Ok((o, c, i)),
        &[_, _, _] => Err(OpError::layout(op, view, "packed", t.strides())),
        d => Err(OpError::shape(op, view, "[outer, frames, inner]", d)),
    }
}

/// Writes the frames `keep` retains of `src` (extent `extent`) into `dst`, both packed `[outer,
/// frames, inner]` (rows of frames of `inner` 32-bit words, the frame capacities may differ):
/// while `extent <= head + tail` every frame, by a block copy; past it `H[0:head] ‖
/// H[extent−tail:extent]` of every row, by the carry kernel (`carry.append` with `(f_prompt,
/// f_retained) = (head, tail)`: one block of [`THREADS`] threads per row). `head` and `tail`
/// are taken from `keep` as declared, on the cache's own clock and storage order. Returns the
/// extent after retention ([`kept`]). `dst` and `src` do not overlap.
pub fn write_back(
    cx: &Ctx<'_>,
    dst: Tensor<'_>,
    src: Tensor<'_>,
    extent: usize,
    keep: &Keep,
) -> Result<usize, OpError> {
    let op = "write_back";
    let (outer, dst_cap, inner) = rows("dst", &dst)?;
    let (src_outer, src_cap, src_inner) = rows("src", &src)?;
    if (src_outer, src_inner) != (outer, inner) || extent > src_cap {
        return Err(OpError::shape(
            op,
            "src",
            format!("[{outer}, >= {extent}, {inner}]"),
            src.dims(),
        ));
    }
    let after = kept(keep, extent);
    if after > dst_cap {
        return Err(OpError::shape(
            op,
            "dst",
            format!("[{outer}, >= {after}, {inner}]"),
            dst.dims(),
        ));
    }
    super::disjoint(
        op,
        &[
            super::operand("dst", &dst, true),
            super::operand("src", &src, false),
        ],
    )?;
    if extent <= keep.bound() {
        let d = dst.narrow(1, 0, extent)?.flatten(1, 2)?;
        let s = src.narrow(1, 0, extent)?.flatten(1, 2)?;
        super::copy(cx, d, s)?;
        return Ok(after);
    }
    let k = &dcc_kernels::carry::RETAIN;
    let args = [
        ptr(&dst),
        ptr(&src),
        int(outer),
        int(dst_cap * inner),
        int(src_cap * inner),
        int(inner),
        int(keep.head),
        int(keep.tail),
        int(extent),
    ];
    let blocks = u32::try_from(outer.max(1))
        .map_err(|_| OpError::arg(op, "dst", "more rows than a grid holds"))?;
    // SAFETY: extent > head + tail, so the kernel writes frames [0, head + tail) of each of
    // `outer` rows of dst (dst_cap >= head + tail frames, checked) and reads frames [0, extent)
    // of the rows of src (src_cap >= extent, checked); both are the checked packed views, which
    // do not overlap.
    unsafe { cx.launch(k, LaunchDims::blocks(blocks, THREADS), &args) }?;
    Ok(after)
}
