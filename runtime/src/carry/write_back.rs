//! The write-back: the one function in the runtime that launches `carry.retain`
//! ([`write_back_rows`]), and the typed entry point the model calls ([`write_back`]), which
//! checks its views and goes through it.

use dcc_kernels::carry::{self as kc, Retention};
use dcc_kernels::{Arg, LaunchDims};

use crate::DevPtr;
use crate::contract::Keep;
use crate::error::{Error, Result};
use crate::ops::{self, Ctx, Elem, OpError, RawTensor, THREADS, Tensor};

/// Most blocks a launch grid holds along x on CUDA (`2^31 − 1`); the carry runs one block per
/// row, so a cache of more rows is refused on both backends alike.
const MAX_GRID_X: usize = i32::MAX as usize;

/// Frames a cache of extent `extent` keeps under `keep`: all of them up to `head + tail`, then
/// `head + tail`.
pub fn kept(keep: &Keep, extent: usize) -> usize {
    extent.min(keep.bound())
}

/// Writes a cache back: `outer` rows of `src` (row stride `src_row_frames` frames of `inner`
/// 32-bit words, frames `[0, extent)` live) into the rows of `dst` (stride `dst_row_frames`).
/// With `extent ≤ keep.head + keep.tail` the rows are copied as they are ([`ops::copy`] over
/// `[outer, extent·inner]` views: `copy.block`, one thread per word in blocks of [`THREADS`];
/// nothing to do in place); above, `carry.retain` keeps `H[·, 0:head] ‖ H[·, extent−tail :
/// extent]`, one block of [`THREADS`] threads per row. Returns the extent after the write-back
/// ([`kept`]). While `cx`'s profile is open the launch is marked under the kernel's name, as
/// every op's is.
///
/// Checked before anything is launched, with the same typed errors on both backends: the
/// geometry ([`Error::Carry`]: the kept frames fit a destination row and `extent` a source row,
/// in place (`dst == src`) only with equal strides, every size representable as the kernels'
/// `i64`, at most `2^31 − 1` rows), 4-byte alignment ([`Error::Invalid`]), that each of the two
/// ranges the launch touches lies inside one live buffer of the backend
/// ([`crate::Backend::check_range`]: [`Error::Dangling`], [`Error::OutOfBounds`]), and that they
/// do not overlap unless in place ([`Error::Carry`]). The buffers must stay alive until the work
/// completes (a graph capturing it: until its last replay), as for every stream operation; the
/// range check and the launch are two lookups of the backend's registry, so a buffer another
/// thread frees (and reallocates) between them is not seen, as with the start checks of
/// [`crate::Backend::launch`].
#[allow(clippy::too_many_arguments)]
pub fn write_back_rows(
    cx: &Ctx<'_>,
    dst: DevPtr,
    dst_row_frames: usize,
    src: DevPtr,
    src_row_frames: usize,
    outer: usize,
    inner: usize,
    keep: Keep,
    extent: usize,
) -> Result<usize> {
    let be = cx.backend();
    let bad = |why: &str| {
        Error::Carry(format!(
            "write-back of {outer} rows of {extent} frames × {inner} words keeping \
             head {} ‖ tail {} from rows of {src_row_frames} into rows of {dst_row_frames} \
             frames: {why}",
            keep.head, keep.tail
        ))
    };
    let retention = Retention::new(keep.head, keep.tail, extent);
    let kept = retention.map_or(Some(extent), |_| keep.head.checked_add(keep.tail));
    let kept = kept.ok_or_else(|| bad("head + tail overflows"))?;
    if extent > src_row_frames || kept > dst_row_frames {
        return Err(bad("the frames do not fit the rows"));
    }
    let inplace = dst == src;
    if inplace && dst_row_frames != src_row_frames {
        return Err(bad("in place with different row strides"));
    }
    if outer > MAX_GRID_X {
        return Err(bad("more rows than a launch grid holds"));
    }
    // Words each side spans, `((outer − 1)·row_frames + frames)·inner`, and every kernel
    // argument, as checked integers that fit the kernels' i64.
    let span = |row_frames: usize, frames: usize| -> Option<usize> {
        if outer == 0 || frames == 0 || inner == 0 {
            return Some(0);
        }
        (outer - 1)
            .checked_mul(row_frames)?
            .checked_add(frames)?
            .checked_mul(inner)
    };
    let fits = |v: Option<usize>| {
        v.filter(|&w| w.checked_mul(4).is_some_and(|b| i64::try_from(b).is_ok()))
    };
    let (Some(dst_words), Some(src_words), Some(dst_rs), Some(src_rs)) = (
        fits(span(dst_row_frames, kept)),
        fits(span(src_row_frames, extent)),
        fits(dst_row_frames.checked_mul(inner)),
        fits(src_row_frames.checked_mul(inner)),
    ) else {
        return Err(bad("the sizes overflow"));
    };
    if fits(extent.checked_mul(inner)).is_none() {
        return Err(bad("the sizes overflow"));
    }
    if !dst.0.is_multiple_of(4) || !src.0.is_multiple_of(4) {
        return Err(Error::Invalid(format!(
            "write-back: {dst} or {src} is not 4-byte aligned"
        )));
    }
    be.check_range(dst, dst_words * 4)?;
    be.check_range(src, src_words * 4)?;
    // Both ranges lie in live allocations, so these sums do not overflow.
    let (d0, d1) = (dst.0, dst.0 + dst_words as u64 * 4);
    let (s0, s1) = (src.0, src.0 + src_words as u64 * 4);
    if !inplace && dst_words > 0 && src_words > 0 && d0 < s1 && s0 < d1 {
        return Err(bad("the destination overlaps the source"));
    }
    let Some(r) = retention else {
        if inplace || dst_words == 0 {
            return Ok(extent);
        }
        let view = |p: DevPtr, rs: usize| {
            RawTensor::<f32>::new(p, &[outer, extent * inner], &[rs, 1]).map_err(op_err)
        };
        let (d, s) = (view(dst, dst_rs)?, view(src, src_rs)?);
        // SAFETY: each view spans `(outer − 1)·rs + extent·inner` words from its address, the
        // `dst_words` / `src_words` range checked above to lie inside one live buffer of the
        // backend `cx` queues on; the buffers outlive the work per this function's contract.
        let (d, s) = unsafe { (d.bind(), s.bind()) };
        ops::copy(cx, d, s).map_err(op_err)?;
        return Ok(extent);
    };
    if dst_words == 0 {
        return Ok(r.kept());
    }
    let n = |v: usize| Arg::I64(v as i64);
    let args = [
        Arg::Ptr(dst),
        Arg::Ptr(src),
        n(outer),
        n(dst_rs),
        n(src_rs),
        n(inner),
        n(keep.head),
        n(keep.tail),
        n(extent),
    ];
    if let Some(p) = cx.profiler() {
        // words moved: the tail window (in place) or both kept parts (copy), read and written
        let moved = if dst == src {
            keep.tail
        } else {
            keep.head + keep.tail
        };
        p.declare(ops::Work::f32(0, 2 * outer * moved * inner));
        p.mark(be, kc::RETAIN.name)?;
    }
    // SAFETY: `carry.retain` at these arguments (extent > head + tail, so the kernel runs and its
    // window moves left) writes frames [0, head + tail) of `outer` rows at stride `dst_rs` words
    // from `dst` and reads frames [0, extent) at stride `src_rs` from `src`: the `dst_words` /
    // `src_words` ranges checked above to lie inside one live buffer each, 4-byte aligned, every
    // count within i64. In place, dst == src with equal strides, the aliasing the kernel is
    // written for; otherwise the ranges do not overlap (checked). The buffers outlive the work
    // per this function's contract (frees are stream-ordered). `outer ≤ 2^31 − 1` (checked).
    unsafe {
        be.launch(
            &kc::RETAIN,
            LaunchDims::blocks(outer as u32, THREADS),
            &args,
        )
    }?;
    Ok(r.kept())
}

/// The backend's error inside an op's, or an op's refusal (which the checks before it rule out)
/// as a carry error.
fn op_err(e: OpError) -> Error {
    match e {
        OpError::Backend { error, .. } => error,
        other => Error::Carry(other.to_string()),
    }
}

/// `(outer, frames, inner)` of a packed `[outer, frames, inner]` cache view, `inner` in 32-bit
/// words: a frame of `inner` elements of `T` must be whole words (`carry.retain` moves words,
/// so a binary16 cache of `2·d` values a frame moves as `d` words).
fn rows<T: Elem>(view: &'static str, t: &Tensor<'_, T>) -> Result<(usize, usize, usize), OpError> {
    let op = "write_back";
    let size = std::mem::size_of::<T>();
    match t.dims() {
        &[o, c, i] if t.is_packed() && (i * size).is_multiple_of(4) => Ok((o, c, i * size / 4)),
        &[_, _, i] if t.is_packed() => Err(OpError::shape(
            op,
            view,
            format!("[outer, frames, inner] with inner × {size} B a multiple of 4 B"),
            &[i],
        )),
        &[_, _, _] => Err(OpError::layout(op, view, "packed", t.strides())),
        d => Err(OpError::shape(op, view, "[outer, frames, inner]", d)),
    }
}

/// The model's write-back: the frames `keep` retains of `src` (extent `extent`) into `dst`, both
/// packed `[outer, frames, inner]` views of one element type (rows of frames of `inner`
/// elements, whole 32-bit words: f32, or an even count of binary16 values; the frame capacities
/// may differ) that do not overlap. A pure move, so the element type changes nothing but the
/// word count. `head` and `tail` are taken from `keep` as
/// declared, on the cache's own clock and storage order. Checks the views (an [`OpError`]
/// naming `dst` or `src`), then goes through [`write_back_rows`], whose refusals come back as
/// [`OpError::Backend`]. Returns the extent after retention ([`kept`]).
pub fn write_back<T: Elem>(
    cx: &Ctx<'_>,
    dst: Tensor<'_, T>,
    src: Tensor<'_, T>,
    extent: usize,
    keep: &Keep,
) -> Result<usize, OpError> {
    let op = "write_back";
    let (outer, dst_cap, inner) = rows("dst", &dst)?;
    let (src_outer, src_cap, src_inner) = rows("src", &src)?;
    // the frame width in elements, for the messages (`inner` counts words)
    let width = dst.dims()[2];
    if (src_outer, src_inner) != (outer, inner) || extent > src_cap {
        return Err(OpError::shape(
            op,
            "src",
            format!("[{outer}, >= {extent}, {width}]"),
            src.dims(),
        ));
    }
    let after = kept(keep, extent);
    if after > dst_cap {
        return Err(OpError::shape(
            op,
            "dst",
            format!("[{outer}, >= {after}, {width}]"),
            dst.dims(),
        ));
    }
    let (d, s) = (dst.byte_range(), src.byte_range());
    if d.0 != d.1 && s.0 != s.1 && d.0 < s.1 && s.0 < d.1 {
        return Err(OpError::Overlap {
            op,
            written: "dst",
            other: "src",
        });
    }
    write_back_rows(
        cx,
        dst.ptr(),
        dst_cap,
        src.ptr(),
        src_cap,
        outer,
        inner,
        *keep,
        extent,
    )
    .map_err(|error| OpError::Backend { op, error })
}

/// The model's write-back of one session's rows of several layers: `dst` and `src` are
/// `[layers, outer, frames, inner]` views of one element type whose layers each are a packed
/// `[outer, frames, inner]` block (the layers themselves at any stride: a session's rows of a
/// batched workspace repeat from layer to layer), one layer as [`write_back`] takes it. Below
/// retention (`extent ≤ head + tail`, where [`write_back`] copies the rows as they are) one
/// `copy.batched` launch moves every layer's 32-bit words; above, one [`write_back`] per layer
/// (`carry.retain`). Either way each layer's frames land exactly as [`write_back`] puts them,
/// word for word. Returns the extent after retention ([`kept`]).
pub fn write_back_layers<T: Elem>(
    cx: &Ctx<'_>,
    dst: Tensor<'_, T>,
    src: Tensor<'_, T>,
    extent: usize,
    keep: &Keep,
) -> Result<usize, OpError> {
    let op = "write_back";
    let size = std::mem::size_of::<T>();
    let layered = |view: &'static str, t: &Tensor<'_, T>| match (t.dims(), t.strides()) {
        (&[l, o, c, i], &[ls, os, cs, 1])
            if cs == i
                && os == c * i
                && (i * size).is_multiple_of(4)
                && (ls * size).is_multiple_of(4) =>
        {
            Ok((l, o, c, i, ls))
        }
        (&[_, _, _, _], st) => Err(OpError::layout(
            op,
            view,
            "[any, packed layer of words]",
            st,
        )),
        (d, _) => Err(OpError::shape(
            op,
            view,
            "[layers, outer, frames, inner]",
            d,
        )),
    };
    let (layers, outer, dst_cap, inner, dst_ls) = layered("dst", &dst)?;
    let (src_layers, src_outer, src_cap, src_inner, src_ls) = layered("src", &src)?;
    if (src_layers, src_outer, src_inner) != (layers, outer, inner) || extent > src_cap {
        return Err(OpError::shape(
            op,
            "src",
            format!("[{layers}, {outer}, >= {extent}, {inner}]"),
            src.dims(),
        ));
    }
    let after = kept(keep, extent);
    if Retention::new(keep.head, keep.tail, extent).is_some() || layers < 2 {
        for li in 0..layers {
            write_back(cx, dst.index(0, li)?, src.index(0, li)?, extent, keep)?;
        }
        return Ok(after);
    }
    if after > dst_cap {
        return Err(OpError::shape(
            op,
            "dst",
            format!("[{layers}, {outer}, >= {after}, {inner}]"),
            dst.dims(),
        ));
    }
    if extent == 0 || outer == 0 || inner == 0 {
        return Ok(after);
    }
    // The frames [0, extent) of every row of every layer as 32-bit words, `[layers, outer,
    // extent·inner·size / 4]` on both sides. The element views are checked views of live
    // buffers; these word views span exactly their bytes (frames past `extent` excluded), and
    // copy_batched checks them again (inside one live buffer each, not overlapping).
    let cols = extent * inner * size / 4;
    let words = |t: &Tensor<'_, T>, ls: usize, cap: usize| -> Result<RawTensor<f32>, OpError> {
        let (ls, rs) = (ls * size / 4, cap * inner * size / 4);
        let span = (layers - 1) * ls + (outer - 1) * rs + cols;
        cx.backend()
            .check_range(t.ptr(), span * 4)
            .map_err(|error| OpError::Backend { op, error })?;
        RawTensor::<f32>::new(t.ptr(), &[layers, outer, cols], &[ls, rs, 1])
    };
    let (d, s) = (words(&dst, dst_ls, dst_cap)?, words(&src, src_ls, src_cap)?);
    // SAFETY: each word view spans bytes of its element view (checked above to lie inside one
    // live buffer of the backend `cx` queues on); the buffers outlive the work per this
    // function's contract (stream-ordered frees, graphs keep theirs alive).
    let (d, s) = unsafe { (d.bind(), s.bind()) };
    ops::copy_batched(cx, d, s)?;
    Ok(after)
}
