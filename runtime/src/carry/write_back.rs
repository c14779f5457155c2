//! The write-back: the one function in the runtime that launches `carry.retain` and
//! `carry.retain_layers` ([`write_back_layered_rows`]; [`write_back_rows`] is its one-layer
//! form), and the typed entry points the model calls ([`write_back`], [`write_back_layers`]),
//! which check their views and go through it.

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
    write_back_layered_rows(
        cx,
        (dst, dst_row_frames),
        (src, src_row_frames),
        Layers::ONE,
        outer,
        inner,
        keep,
        extent,
        None,
    )
}

/// What the source of a write-back already shares with its destination: in every row, source
/// frames `[at, at + frames)` hold the bytes of destination frames `[0, frames)` (the history
/// a call staged from this very cache into its workspace, behind `at` new frames, neither side
/// written there since). A kept part whose source lies inside that copy at its own destination
/// offset is already in place and is not moved again: at the steady state of a prepend cache
/// (extent before the call at `head + tail`) the whole tail, at an append cache's the head.
/// The caller's promise; a false one leaves stale frames in the destination (every range is
/// still checked, so never memory outside the two views).
///
/// A **partial** staging (`partial`) copied only the destination's first `frames` frames: the
/// source's frames from `at + frames` on were never written, and the history they stand for
/// is the destination's frames from `frames` on, still in place (a step that read them from the
/// carry itself). Such a write-back moves only source frames `[0, at + frames)`; where a kept
/// part would need others and is not in place (below retention, or a tail that does not land
/// where it lies), it is refused ([`Error::Carry`]) before anything is launched.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Staged {
    /// First source frame of the copy (the new frames before it).
    pub at: usize,
    /// Frames copied from the destination's start.
    pub frames: usize,
    /// Only those frames were copied; the rest of the history stayed in the destination.
    pub partial: bool,
}

impl Staged {
    /// The whole history `[0, frames)` copied behind `at` new frames.
    pub const fn whole(at: usize, frames: usize) -> Staged {
        Staged {
            at,
            frames,
            partial: false,
        }
    }
}

/// One part of a write-back: `(destination frame, source frame, frames)` of every row.
type Part = (usize, usize, usize);

/// The parts of a write-back left to move when `staged` says some are in place: `(destination
/// frame, source frame, frames)` of every row, or `None` when nothing is in place (the whole
/// write-back runs as without `staged`). A partial staging ([`Staged::partial`]) always gives
/// its parts, or why it cannot: a part to move lies past the frames the source holds.
fn staged_parts(
    st: Staged,
    keep: Keep,
    extent: usize,
    retention: Option<Retention>,
) -> std::result::Result<Option<Vec<Part>>, &'static str> {
    if st.partial {
        let Some(r) = retention else {
            return Err("a partial staging below retention (every frame moves)");
        };
        let held = st.at.saturating_add(st.frames);
        let head_in_place = st.at == 0 && keep.head <= st.frames;
        // in the copy at its destination offset, or past it and left in the destination there
        let tail_in_place = r.tail_src >= st.at && r.tail_src - st.at == r.head;
        let mut parts = Vec::with_capacity(1);
        if !head_in_place && r.head > 0 {
            if r.head > held {
                return Err("the head lies past the frames the partial staging holds");
            }
            parts.push((0, 0, r.head));
        }
        if !tail_in_place && r.tail_len > 0 {
            if r.tail_src + r.tail_len > held {
                return Err("the tail is not in place and lies past the staged frames");
            }
            parts.push((r.head, r.tail_src, r.tail_len));
        }
        return Ok(Some(parts));
    }
    Ok(whole_parts(st, keep, extent, retention))
}

/// [`staged_parts`] of a whole staging.
fn whole_parts(
    st: Staged,
    keep: Keep,
    extent: usize,
    retention: Option<Retention>,
) -> Option<Vec<Part>> {
    let Some(r) = retention else {
        // rows copied as they are: a copy at the start of the source is already there
        let p = if st.at == 0 { st.frames.min(extent) } else { 0 };
        return (p > 0).then(|| {
            if p < extent {
                vec![(p, p, extent - p)]
            } else {
                Vec::new()
            }
        });
    };
    let head_in_place = st.at == 0 && keep.head <= st.frames;
    let tail_in_place = r.tail_src >= st.at
        && r.tail_src - st.at == r.head
        && r.tail_src + r.tail_len <= st.at + st.frames;
    if !head_in_place && !tail_in_place {
        return None;
    }
    let mut parts = Vec::with_capacity(1);
    if !head_in_place && r.head > 0 {
        parts.push((0, 0, r.head));
    }
    if !tail_in_place && r.tail_len > 0 {
        parts.push((r.head, r.tail_src, r.tail_len));
    }
    Some(parts)
}

/// Layers of a write-back: `count` blocks of `outer` rows each, layer `l`'s rows starting
/// `l · dst` (`l · src`) 32-bit words after the first layer's on each side. A session's rows of
/// every layer of a batched workspace repeat at the workspace's layer stride, its carry's at its
/// own; [`Layers::ONE`] is one block of rows.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Layers {
    /// Blocks of rows.
    pub count: usize,
    /// Words from one destination layer to the next.
    pub dst: usize,
    /// Words from one source layer to the next.
    pub src: usize,
}

impl Layers {
    /// One block of rows.
    pub const ONE: Layers = Layers {
        count: 1,
        dst: 0,
        src: 0,
    };
}

/// [`write_back_rows`] over `layers.count` blocks of `outer` rows ([`Layers`]), each block as
/// `write_back_rows` takes one, in one launch: below retention one copy of every layer's rows
/// (`copy.block` for one layer, `copy.batched` for more); above, one `carry.retain` (one layer)
/// or one `carry.retain_layers` (more), one block of [`THREADS`] threads per row of every layer,
/// moving each layer's words exactly as one `carry.retain` per layer would. `dst` and `src` are
/// (address, row stride in frames). The checks of `write_back_rows`, over the whole span of
/// every layer, plus: with more than one layer, each side's layer stride leaves room for its
/// `outer` rows (rows never overlap), and in place the layer strides are equal too.
#[allow(clippy::too_many_arguments)]
pub fn write_back_layered_rows(
    cx: &Ctx<'_>,
    (dst, dst_row_frames): (DevPtr, usize),
    (src, src_row_frames): (DevPtr, usize),
    layers: Layers,
    outer: usize,
    inner: usize,
    keep: Keep,
    extent: usize,
    staged: Option<Staged>,
) -> Result<usize> {
    let be = cx.backend();
    let bad = |why: &str| {
        Error::Carry(format!(
            "write-back of {} × {outer} rows of {extent} frames × {inner} words keeping \
             head {} ‖ tail {} from rows of {src_row_frames} into rows of {dst_row_frames} \
             frames: {why}",
            layers.count, keep.head, keep.tail
        ))
    };
    let retention = Retention::new(keep.head, keep.tail, extent);
    let kept = retention.map_or(Some(extent), |_| keep.head.checked_add(keep.tail));
    let kept = kept.ok_or_else(|| bad("head + tail overflows"))?;
    if extent > src_row_frames || kept > dst_row_frames {
        return Err(bad("the frames do not fit the rows"));
    }
    let inplace = dst == src;
    if inplace && (dst_row_frames != src_row_frames || layers.dst != layers.src) {
        return Err(bad("in place with different row or layer strides"));
    }
    let rows = layers
        .count
        .checked_mul(outer)
        .filter(|&r| r <= MAX_GRID_X)
        .ok_or_else(|| bad("more rows than a launch grid holds"))?;
    // Words each side spans, `(count − 1)·layer + (outer − 1)·row_frames·inner + frames·inner`,
    // and every kernel argument, as checked integers that fit the kernels' i64.
    let span = |layer: usize, row_frames: usize, frames: usize| -> Option<usize> {
        if rows == 0 || frames == 0 || inner == 0 {
            return Some(0);
        }
        (layers.count - 1)
            .checked_mul(layer)?
            .checked_add((outer - 1).checked_mul(row_frames)?.checked_mul(inner)?)?
            .checked_add(frames.checked_mul(inner)?)
    };
    let fits = |v: Option<usize>| {
        v.filter(|&w| w.checked_mul(4).is_some_and(|b| i64::try_from(b).is_ok()))
    };
    let (Some(dst_words), Some(src_words), Some(dst_rs), Some(src_rs)) = (
        fits(span(layers.dst, dst_row_frames, kept)),
        fits(span(layers.src, src_row_frames, extent)),
        fits(dst_row_frames.checked_mul(inner)),
        fits(src_row_frames.checked_mul(inner)),
    ) else {
        return Err(bad("the sizes overflow"));
    };
    if fits(extent.checked_mul(inner)).is_none() {
        return Err(bad("the sizes overflow"));
    }
    // a layer's rows end before the next layer's begin (so no row of one side overlaps another)
    let room = |layer: usize, rs: usize| outer.checked_mul(rs).is_some_and(|w| w <= layer);
    if layers.count > 1
        && rows > 0
        && inner > 0
        && !(room(layers.dst, dst_rs) && room(layers.src, src_rs))
    {
        return Err(bad("a layer stride is shorter than its layer's rows"));
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
    if let Some(st) = staged {
        let inside = st
            .at
            .checked_add(st.frames)
            .is_some_and(|e| e <= src_row_frames)
            && st.frames <= dst_row_frames;
        if !inside {
            return Err(bad("the staged frames lie outside the rows"));
        }
    }
    // Frames [s_at, s_at + frames) of every source row of every layer into frames [d_at, d_at +
    // frames) of the destination's, one `copy.batched`; the callers keep both ranges inside the
    // rows' kept (destination) and `extent` (source) frames.
    let move_frames = |d_at: usize, s_at: usize, frames: usize| -> Result<()> {
        let view = |p: DevPtr, at: usize, ls: usize, rs: usize| {
            let p = DevPtr(p.0 + (at * inner * 4) as u64);
            RawTensor::<f32>::new(p, &[layers.count, outer, frames * inner], &[ls, rs, 1])
                .map_err(op_err)
        };
        let (d, s) = (
            view(dst, d_at, layers.dst, dst_rs)?,
            view(src, s_at, layers.src, src_rs)?,
        );
        // SAFETY: the frames moved of every row lie inside the rows' kept / `extent` frames, so
        // each view lies inside the `dst_words` / `src_words` range checked above to lie inside
        // one live buffer of the backend `cx` queues on; the buffers outlive the work per this
        // function's contract.
        let (d, s) = unsafe { (d.bind(), s.bind()) };
        ops::copy_batched(cx, d, s).map_err(op_err)
    };
    let parts = match staged.filter(|_| !inplace && dst_words > 0) {
        Some(st) => staged_parts(st, keep, extent, retention).map_err(bad)?,
        None if staged.is_some_and(|st| st.partial) && inplace => {
            return Err(bad("a partial staging in place"));
        }
        None => None,
    };
    if let Some(parts) = parts {
        // `staged_parts` gives frames inside the kept and `extent` frames
        for (d_at, s_at, frames) in parts {
            move_frames(d_at, s_at, frames)?;
        }
        return Ok(kept);
    }
    let Some(r) = retention else {
        if inplace || dst_words == 0 {
            return Ok(extent);
        }
        let cols = extent * inner;
        if layers.count == 1 {
            let view = |p: DevPtr, rs: usize| {
                RawTensor::<f32>::new(p, &[outer, cols], &[rs, 1]).map_err(op_err)
            };
            let (d, s) = (view(dst, dst_rs)?, view(src, src_rs)?);
            // SAFETY: each view spans `(outer − 1)·rs + extent·inner` words from its address,
            // the `dst_words` / `src_words` range checked above to lie inside one live buffer of
            // the backend `cx` queues on; the buffers outlive the work per this function's
            // contract.
            let (d, s) = unsafe { (d.bind(), s.bind()) };
            ops::copy(cx, d, s).map_err(op_err)?;
        } else {
            // below retention the kept frames are the `extent` frames
            move_frames(0, 0, extent)?;
        }
        return Ok(extent);
    };
    if dst_words == 0 {
        return Ok(r.kept());
    }
    let n = |v: usize| Arg::I64(v as i64);
    let (kernel, args) = if layers.count == 1 {
        let args = vec![
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
        (&kc::RETAIN, args)
    } else {
        let args = vec![
            Arg::Ptr(dst),
            Arg::Ptr(src),
            n(layers.count),
            n(layers.dst),
            n(layers.src),
            n(outer),
            n(dst_rs),
            n(src_rs),
            n(inner),
            n(keep.head),
            n(keep.tail),
            n(extent),
        ];
        (&kc::RETAIN_LAYERS, args)
    };
    if let Some(p) = cx.profiler() {
        // words moved: the tail window (in place) or both kept parts (copy), read and written
        let moved = if dst == src {
            keep.tail
        } else {
            keep.head + keep.tail
        };
        p.declare(ops::Work::f32(0, 2 * rows * moved * inner));
        p.mark(be, kernel.name)?;
    }
    // SAFETY: `carry.retain` (`carry.retain_layers`) at these arguments (extent > head + tail, so
    // the kernel runs and its window moves left) writes frames [0, head + tail) of `outer` rows
    // of every layer at stride `dst_rs` words (layers `layers.dst` apart) from `dst` and reads
    // frames [0, extent) of the same rows of `src`: the `dst_words` / `src_words` ranges checked
    // above to lie inside one live buffer each, 4-byte aligned, every count within i64; no two
    // rows of a side overlap (a layer stride leaves room for its rows, checked). In place, dst ==
    // src with equal strides, the aliasing the kernel is written for; otherwise the ranges do not
    // overlap (checked). The buffers outlive the work per this function's contract (frees are
    // stream-ordered). `count · outer ≤ 2^31 − 1` (checked).
    unsafe { be.launch(kernel, LaunchDims::blocks(rows as u32, THREADS), &args) }?;
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
    write_back_staged(cx, dst, src, extent, keep, None)
}

/// [`write_back`] of a source that holds a copy of the destination's first frames ([`Staged`]):
/// the kept parts that copy already puts in place are not moved again (at a prepend cache's
/// steady state the write-back moves its `head` frames instead of `head + tail`), the rest as
/// `write_back` moves it, so the destination ends with the same bytes. `None` is `write_back`.
pub fn write_back_staged<T: Elem>(
    cx: &Ctx<'_>,
    dst: Tensor<'_, T>,
    src: Tensor<'_, T>,
    extent: usize,
    keep: &Keep,
    staged: Option<Staged>,
) -> Result<usize, OpError> {
    let (outer, dst_cap, inner) = rows("dst", &dst)?;
    let (src_outer, src_cap, src_inner) = rows("src", &src)?;
    // the frame width in elements, for the messages (`inner` counts words)
    let width = dst.dims()[2];
    let sides = [(dst_cap, 0), (src_cap, 0)];
    let same = (src_outer, src_inner) == (outer, inner);
    let lead = String::new();
    let io = Typed {
        dst,
        src,
        sides,
        same,
        lead,
    };
    io.write_back(cx, (1, outer), (width, inner), extent, keep, staged)
}

/// What a typed write-back's views checked out as: the two views, each side's (frames a row
/// holds, 32-bit words from one layer to the next), whether the source's rows and frame width
/// are the destination's, and the leading dimensions of the messages (`""` for one layer).
struct Typed<'a, 'b, T: Elem> {
    dst: Tensor<'a, T>,
    src: Tensor<'b, T>,
    sides: [(usize, usize); 2],
    same: bool,
    lead: String,
}

impl<T: Elem> Typed<'_, '_, T> {
    /// The checks both typed entries share once their views are read — the source's rows match
    /// and hold `extent` frames, the kept frames fit the destination, the views do not overlap —
    /// then [`write_back_layered_rows`] over `layers` blocks of `outer` rows of frames of
    /// `width` elements, `inner` words.
    fn write_back(
        self,
        cx: &Ctx<'_>,
        (layers, outer): (usize, usize),
        (width, inner): (usize, usize),
        extent: usize,
        keep: &Keep,
        staged: Option<Staged>,
    ) -> Result<usize, OpError> {
        let op = "write_back";
        let Typed {
            dst,
            src,
            sides: [(dst_cap, dst_ls), (src_cap, src_ls)],
            same,
            lead,
        } = self;
        if !same || extent > src_cap {
            return Err(OpError::shape(
                op,
                "src",
                format!("[{lead}{outer}, >= {extent}, {width}]"),
                src.dims(),
            ));
        }
        let after = kept(keep, extent);
        if after > dst_cap {
            return Err(OpError::shape(
                op,
                "dst",
                format!("[{lead}{outer}, >= {after}, {width}]"),
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
        let layers = Layers {
            count: layers,
            dst: dst_ls,
            src: src_ls,
        };
        write_back_layered_rows(
            cx,
            (dst.ptr(), dst_cap),
            (src.ptr(), src_cap),
            layers,
            outer,
            inner,
            *keep,
            extent,
            staged,
        )
        .map_err(|error| OpError::Backend { op, error })
    }
}

/// The model's write-back of one session's rows of several layers: `dst` and `src` are
/// `[layers, outer, frames, inner]` views of one element type whose layers each are a packed
/// `[outer, frames, inner]` block (the layers themselves at any stride: a session's rows of a
/// batched workspace repeat from layer to layer), one layer as [`write_back`] takes it, in one
/// launch through [`write_back_layered_rows`]: below retention (`extent ≤ head + tail`, where
/// [`write_back`] copies the rows as they are) one `copy.batched` moves every layer's 32-bit
/// words; above, one `carry.retain_layers` (one block per row of every layer, where a launch per
/// layer would give each only the rows of one layer). Either way each layer's frames land
/// exactly as [`write_back`] puts them, word for word. Returns the extent after retention
/// ([`kept`]).
pub fn write_back_layers<T: Elem>(
    cx: &Ctx<'_>,
    dst: Tensor<'_, T>,
    src: Tensor<'_, T>,
    extent: usize,
    keep: &Keep,
) -> Result<usize, OpError> {
    write_back_layers_staged(cx, dst, src, extent, keep, None)
}

/// [`write_back_layers`] of a source whose every layer holds a copy of the destination layer's
/// first frames ([`Staged`], as [`write_back_staged`] takes it).
pub fn write_back_layers_staged<T: Elem>(
    cx: &Ctx<'_>,
    dst: Tensor<'_, T>,
    src: Tensor<'_, T>,
    extent: usize,
    keep: &Keep,
    staged: Option<Staged>,
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
    // in 32-bit words: a frame of `inner` elements of T, a layer `ls` elements
    let words = |v: usize| v * size / 4;
    let sides = [(dst_cap, words(dst_ls)), (src_cap, words(src_ls))];
    let same = (src_layers, src_outer, src_inner) == (layers, outer, inner);
    let lead = format!("{layers}, ");
    let io = Typed {
        dst,
        src,
        sides,
        same,
        lead,
    };
    io.write_back(
        cx,
        (layers, outer),
        (inner, words(inner)),
        extent,
        keep,
        staged,
    )
}
