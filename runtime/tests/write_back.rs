//! `carry::write_back_rows`, the one function that launches `carry.retain` (every retention goes
//! through it, the model's typed `carry::write_back` included), and the guards of the kernel
//! itself, on both backends.

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::carry::{self, write_back_rows};
use dcc_runtime::contract::{CacheOrder, Keep};
use dcc_runtime::kernels::KernelError;
use dcc_runtime::kernels::carry::RETAIN;
use dcc_runtime::ops::{Ctx, OpError, Profiler, Tensor};
use dcc_runtime::{Arg, DevPtr, Error, LaunchDims};

const OUTER: usize = 3;
const INNER: usize = 4;
const CAP: usize = 30;

fn words(seed: u32, n: usize) -> Vec<u32> {
    (0..n as u32)
        .map(|i| (i ^ seed).wrapping_mul(0x9E37_79B9))
        .collect()
}

/// `H[·, 0:head] ‖ H[·, ℓ−tail:ℓ]` of rows of `rs` words, or the first ℓ frames when ℓ ≤ L.
fn naive(h: &[u32], rs: usize, keep: Keep, extent: usize) -> Vec<Vec<u32>> {
    (0..OUTER)
        .map(|r| {
            let row = &h[r * rs..r * rs + extent * INNER];
            if extent <= keep.bound() {
                return row.to_vec();
            }
            let mut v = row[..keep.head * INNER].to_vec();
            v.extend_from_slice(&row[(extent - keep.tail) * INNER..]);
            v
        })
        .collect()
}

/// In place and into a separate region, for extents below, at and above `L`, both storage
/// orders' rules: the rows hold the naive concatenation (or the rows as they were, ℓ ≤ L), the
/// returned extent is `min(ℓ, L)`-shaped as documented, and nothing past it moves.
fn write_back_equals_naive(b: Arc<dyn Backend>) {
    let (p, r) = (7, 5);
    for keep in [
        Keep::natural(CacheOrder::Prepend, p, r),
        Keep::natural(CacheOrder::Append, p, r),
    ] {
        for extent in [0, 3, p + r, p + r + 1, p + r + 9, CAP] {
            let rs = CAP * INNER;
            let h = words(extent as u32, OUTER * rs);
            let want = naive(&h, rs, keep, extent);
            let kept = if extent > keep.bound() {
                keep.bound()
            } else {
                extent
            };
            let what = format!("{keep:?} extent {extent}");

            let live = b.alloc_from(&h, AllocKind::Arena).unwrap();
            let got = write_back_rows(
                &Ctx::new(&*b, None),
                live.ptr(),
                CAP,
                live.ptr(),
                CAP,
                OUTER,
                INNER,
                keep,
                extent,
            );
            assert_eq!(got, Ok(kept), "{what} in place");
            let dev: Vec<u32> = b.download(live.ptr(), OUTER * rs).unwrap();
            for (row, w) in want.iter().enumerate() {
                assert_eq!(&dev[row * rs..row * rs + kept * INNER], &w[..], "{what}");
                assert_eq!(
                    &dev[row * rs + extent.max(kept) * INNER..(row + 1) * rs],
                    &h[row * rs + extent.max(kept) * INNER..(row + 1) * rs],
                    "{what}: spare capacity untouched"
                );
            }

            let src = b.alloc_from(&h, AllocKind::Arena).unwrap();
            let dst_frames = keep.bound() + 2;
            let dst = b
                .alloc(OUTER * dst_frames * INNER * 4, AllocKind::Arena)
                .unwrap();
            let got = write_back_rows(
                &Ctx::new(&*b, None),
                dst.ptr(),
                dst_frames,
                src.ptr(),
                CAP,
                OUTER,
                INNER,
                keep,
                extent,
            );
            assert_eq!(got, Ok(kept), "{what} separate");
            let dev: Vec<u32> = b.download(dst.ptr(), OUTER * dst_frames * INNER).unwrap();
            for (row, w) in want.iter().enumerate() {
                let at = row * dst_frames * INNER;
                assert_eq!(&dev[at..at + kept * INNER], &w[..], "{what} separate");
                assert!(
                    dev[at + kept * INNER..at + dst_frames * INNER]
                        .iter()
                        .all(|&x| x == 0),
                    "{what}: past the kept frames untouched"
                );
            }
            assert_eq!(b.download::<u32>(src.ptr(), h.len()).unwrap(), h);
        }
    }
}

/// Every malformed write-back is refused before anything is launched, with the same typed
/// error on both backends, and leaves the buffers as they were.
fn write_back_refuses_bad_geometry(b: Arc<dyn Backend>) {
    let keep = Keep::natural(CacheOrder::Prepend, 7, 5);
    let rs = CAP * INNER;
    let h = words(3, OUTER * rs);
    let live = b.alloc_from(&h, AllocKind::Arena).unwrap();
    let small = b.alloc(OUTER * 11 * INNER * 4, AllocKind::Arena).unwrap();
    let (lp, sp) = (live.ptr(), small.ptr());
    let cx = Ctx::new(&*b, None);
    let wb = |dst: DevPtr, df: usize, src: DevPtr, sf: usize, outer: usize, extent: usize| {
        write_back_rows(&cx, dst, df, src, sf, outer, INNER, keep, extent)
    };
    let carry = |r: Result<usize, Error>| matches!(r, Err(Error::Carry(_)));
    // in place with different row strides
    assert!(carry(wb(lp, CAP, lp, CAP - 1, OUTER, 20)));
    // the extent past a source row, the kept frames past a destination row
    assert!(carry(wb(lp, CAP, lp, CAP, OUTER, CAP + 1)));
    assert!(carry(wb(sp, 11, lp, CAP, OUTER, 20)), "L = 12 > 11 frames");
    // overlapping, not in place
    assert!(carry(wb(lp.offset(4), CAP, lp, CAP, OUTER, 20)));
    // sizes that overflow; more rows than a launch grid holds (one block per row)
    assert!(carry(wb(lp, usize::MAX / 2, lp, usize::MAX / 2, OUTER, 20)));
    assert!(carry(wb(lp, CAP, lp, CAP, i32::MAX as usize + 1, 20)));
    // misaligned
    assert!(matches!(
        wb(sp.offset(2), 12, lp, CAP, 1, 20),
        Err(Error::Invalid(_))
    ));
    // a destination too small for the rows, a source past its buffer, a dangling address
    assert!(matches!(
        wb(sp, 12, lp, CAP, OUTER, 20),
        Err(Error::OutOfBounds(_))
    ));
    assert!(matches!(
        wb(lp, CAP, lp.offset(rs * 4), CAP, OUTER, 20),
        Err(Error::OutOfBounds(_))
    ));
    assert!(matches!(
        wb(sp, 12, DevPtr(8), CAP, 1, 20),
        Err(Error::Dangling(8))
    ));
    assert_eq!(b.download::<u32>(lp, h.len()).unwrap(), h);
    assert!(
        b.download::<u32>(sp, OUTER * 11 * INNER)
            .unwrap()
            .iter()
            .all(|&x| x == 0)
    );
}

/// The model's typed entry point goes through `write_back_rows`: the same bits, the launches
/// marked under the kernels' names while a profile is open (`carry.retain` above `L`, the block
/// copy `copy.block` at or below it), and a refusal of the raw checks comes back as the op's
/// `Backend` error.
fn typed_write_back_goes_through_the_rows(b: Arc<dyn Backend>) {
    let keep = Keep::natural(CacheOrder::Prepend, 7, 5);
    let rs = CAP * INNER;
    let h = words(5, OUTER * rs);
    let src = b.alloc_from(&h, AllocKind::Arena).unwrap();
    let dst = b.alloc(OUTER * 12 * INNER * 4, AllocKind::Arena).unwrap();
    let prof = Profiler::new();
    let cx = Ctx::new(&*b, Some(&prof));
    let s = Tensor::<f32>::of(&src)
        .unwrap()
        .view(&[OUTER, CAP, INNER])
        .unwrap();
    let d = Tensor::of(&dst).unwrap().view(&[OUTER, 12, INNER]).unwrap();
    prof.begin();
    assert_eq!(carry::write_back(&cx, d, s, 20, &keep), Ok(12));
    assert_eq!(carry::write_back(&cx, d, s, 12, &keep), Ok(12));
    assert_eq!(carry::write_back(&cx, d, s, 9, &keep), Ok(9));
    let mut cats: Vec<_> = prof
        .end(&*b)
        .unwrap()
        .iter()
        .map(|r| (r.category, r.launches))
        .collect();
    cats.sort();
    assert_eq!(cats, [("carry.retain", 1), ("copy.block", 2)]);
    let got: Vec<u32> = b.download(dst.ptr(), OUTER * 12 * INNER).unwrap();
    let first = naive(&h, rs, keep, 9);
    let retained = naive(&h, rs, keep, 20);
    for row in 0..OUTER {
        let at = row * 12 * INNER;
        assert_eq!(&got[at..at + 9 * INNER], &first[row][..], "row {row}");
        // frames 9..12 still hold what the exact-bound copy (ℓ = L = 12) wrote
        assert_eq!(
            &got[at + 9 * INNER..at + 12 * INNER],
            &h[row * rs + 9 * INNER..row * rs + 12 * INNER],
            "row {row}"
        );
        assert_ne!(retained[row], naive(&h, rs, keep, 12)[row]);
    }
    // the raw entry point, in place, agrees with the retention the typed one made
    let live = b.alloc_from(&h, AllocKind::Arena).unwrap();
    let raw = write_back_rows(
        &cx,
        live.ptr(),
        CAP,
        live.ptr(),
        CAP,
        OUTER,
        INNER,
        keep,
        20,
    );
    assert_eq!(raw, Ok(12));
    let dst2 = b.alloc(OUTER * 12 * INNER * 4, AllocKind::Arena).unwrap();
    let d2 = Tensor::of(&dst2)
        .unwrap()
        .view(&[OUTER, 12, INNER])
        .unwrap();
    carry::write_back(&cx, d2, s, 20, &keep).unwrap();
    let typed: Vec<u32> = b.download(dst2.ptr(), OUTER * 12 * INNER).unwrap();
    let inplace: Vec<u32> = b.download(live.ptr(), OUTER * rs).unwrap();
    for row in 0..OUTER {
        let want = &retained[row][..];
        assert_eq!(&typed[row * 12 * INNER..(row + 1) * 12 * INNER], want);
        assert_eq!(&inplace[row * rs..row * rs + 12 * INNER], want);
    }
    // a view that lies about its memory (bound at an address no live buffer owns) is refused
    // by the range check against the backend's live allocations, before any launch
    let raw_view = s.raw().with_ptr(DevPtr(8));
    // SAFETY: the view is only handed to `write_back`, which checks its range against the
    // backend's live buffers and refuses it before launching.
    let dangling = unsafe { raw_view.bind() };
    assert!(matches!(
        carry::write_back(&cx, d, dangling, 20, &keep),
        Err(OpError::Backend {
            op: "write_back",
            error: Error::Dangling(8)
        })
    ));
    assert!(matches!(
        carry::write_back(&cx, d, d, 5, &keep),
        Err(OpError::Overlap { .. })
    ));
}

/// `write_back_layers` over one session's rows of a batched workspace (two sessions' rows per
/// layer, so the session's rows repeat at a stride from layer to layer) equals `write_back` layer
/// by layer, word for word: one `copy.batched` launch while the rows are copied as they are
/// (ℓ ≤ L), one `carry.retain_layers` above. Rows of 4 words (CUDA's 16-byte path) and of 3.
fn layered_write_back_equals_per_layer(b: Arc<dyn Backend>) {
    const LAYERS: usize = 3;
    const SESSIONS: usize = 2;
    const DCAP: usize = 12;
    let keep = Keep::natural(CacheOrder::Prepend, 7, 5);
    for inner in [INNER, 3] {
        let n = LAYERS * SESSIONS * OUTER * CAP * inner;
        let h = words(inner as u32, n);
        let src = b.alloc_from(&h, AllocKind::Arena).unwrap();
        let ws = Tensor::<f32>::of(&src)
            .unwrap()
            .view(&[LAYERS, SESSIONS * OUTER, CAP, inner])
            .unwrap();
        let session = ws.narrow(1, OUTER, OUTER).unwrap();
        for (extent, launches) in [
            (9, ("copy.batched", 1)),
            (12, ("copy.batched", 1)),
            (20, ("carry.retain_layers", 1)),
        ] {
            let what = format!("inner {inner} extent {extent}");
            let bytes = LAYERS * OUTER * DCAP * inner * 4;
            let (one, each) = (
                b.alloc(bytes, AllocKind::Arena).unwrap(),
                b.alloc(bytes, AllocKind::Arena).unwrap(),
            );
            let carry = |buf| {
                Tensor::<f32>::of(buf)
                    .unwrap()
                    .view(&[LAYERS, OUTER, DCAP, inner])
                    .unwrap()
            };
            let prof = Profiler::new();
            let cx = Ctx::new(&*b, Some(&prof));
            prof.begin();
            let kept = carry::write_back_layers(&cx, carry(&one), session, extent, &keep);
            let cats: Vec<_> = prof
                .end(&*b)
                .unwrap()
                .iter()
                .map(|r| (r.category, r.launches))
                .collect();
            assert_eq!(kept, Ok(extent.min(keep.bound())), "{what}");
            assert_eq!(cats, [launches], "{what}");
            let cx = Ctx::new(&*b, None);
            for li in 0..LAYERS {
                let (d, s) = (
                    carry(&each).index(0, li).unwrap(),
                    session.index(0, li).unwrap(),
                );
                carry::write_back(&cx, d, s, extent, &keep).unwrap();
            }
            let got: Vec<u32> = b.download(one.ptr(), bytes / 4).unwrap();
            let want: Vec<u32> = b.download(each.ptr(), bytes / 4).unwrap();
            assert_eq!(got, want, "{what}");
            assert!(got.iter().any(|&w| w != 0), "{what}: nothing moved");
        }
        // a carry of other rows than the session's is refused before anything runs
        let bad = b
            .alloc(LAYERS * 2 * OUTER * DCAP * inner * 4, AllocKind::Arena)
            .unwrap();
        let bad = Tensor::of(&bad)
            .unwrap()
            .view(&[LAYERS, 2 * OUTER, DCAP, inner])
            .unwrap();
        let cx = Ctx::new(&*b, None);
        assert!(matches!(
            carry::write_back_layers(&cx, bad, session, 9, &keep),
            Err(OpError::Shape { .. })
        ));
    }
}

/// `write_back_layered_rows` refuses, before anything runs, layers whose stride is shorter than
/// their rows (rows of two layers would overlap) and an in-place write-back whose layer strides
/// differ; at a stride that leaves room it retains every layer in one launch.
fn layered_rows_refuse_overlapping_layers(b: Arc<dyn Backend>) {
    let (layers, rf) = (2, 10);
    let keep = Keep::natural(CacheOrder::Prepend, 3, 2);
    let rs = rf * INNER;
    let buf = b
        .alloc_from(&words(7, 4 * OUTER * rs), AllocKind::Arena)
        .unwrap();
    let other = b.alloc(4 * 4 * OUTER * rs, AllocKind::Arena).unwrap();
    let cx = Ctx::new(&*b, None);
    let run = |dst: DevPtr, src: DevPtr, l: carry::Layers| {
        carry::write_back_layered_rows(&cx, (dst, rf), (src, rf), l, OUTER, INNER, keep, 8, None)
    };
    let lay = |dst: usize, src: usize| carry::Layers {
        count: layers,
        dst,
        src,
    };
    let before: Vec<u32> = b.download(other.ptr(), 4 * OUTER * rs).unwrap();
    for l in [lay(OUTER * rs - INNER, OUTER * rs), lay(OUTER * rs, rs)] {
        let r = run(other.ptr(), buf.ptr(), l);
        assert!(matches!(r, Err(Error::Carry(_))), "{l:?}: {r:?}");
    }
    let r = run(buf.ptr(), buf.ptr(), lay(OUTER * rs, 2 * OUTER * rs));
    assert!(matches!(r, Err(Error::Carry(_))), "in place: {r:?}");
    let after: Vec<u32> = b.download(other.ptr(), 4 * OUTER * rs).unwrap();
    assert_eq!(before, after, "a refused write-back wrote");
    assert_eq!(
        run(other.ptr(), buf.ptr(), lay(OUTER * rs, 2 * OUTER * rs)),
        Ok(keep.bound())
    );
}

/// A staged write-back (the source holds a copy of the destination's first frames, as a call's
/// workspace holds the history it staged from the cache) leaves the destination with the bytes
/// the full write-back leaves, for both storage orders' keeps, extents below, at and above the
/// bound, every staging offset the model uses (prepend: behind the new frames; append: at the
/// start) and one that puts nothing in place; at a prepend cache's steady state it moves only the
/// head (one `copy.batched`), at an append cache's only the tail. One layer and three.
fn staged_write_back_equals_full(b: Arc<dyn Backend>) {
    const LAYERS: usize = 3;
    const DCAP: usize = 14;
    let (p, r) = (7, 5);
    let cx = Ctx::new(&*b, None);
    for order in [CacheOrder::Prepend, CacheOrder::Append] {
        let keep = Keep::natural(order, p, r);
        for l_old in [0, 4, p + r] {
            for new in [3, 6] {
                let extent = l_old + new;
                // prepend: [new ‖ history]; append: [history ‖ new]; then one offset off by one
                let natural = if order == CacheOrder::Prepend { new } else { 0 };
                for at in [natural, natural + 1] {
                    let what = format!("{order:?} l_old {l_old} new {new} at {at}");
                    let dwords = LAYERS * OUTER * DCAP * INNER;
                    let carry0 = words(l_old as u32 + 11, dwords);
                    let mut ws = words(at as u32 + 101, LAYERS * OUTER * CAP * INNER);
                    for li in 0..LAYERS {
                        for o in 0..OUTER {
                            let d = (li * OUTER + o) * DCAP * INNER;
                            let s = (li * OUTER + o) * CAP * INNER + at * INNER;
                            ws[s..s + l_old * INNER].copy_from_slice(&carry0[d..d + l_old * INNER]);
                        }
                    }
                    let src = b.alloc_from(&ws, AllocKind::Arena).unwrap();
                    let (one, full) = (
                        b.alloc_from(&carry0, AllocKind::Arena).unwrap(),
                        b.alloc_from(&carry0, AllocKind::Arena).unwrap(),
                    );
                    let v = |buf, cap| {
                        Tensor::<f32>::of(buf)
                            .unwrap()
                            .view(&[LAYERS, OUTER, cap, INNER])
                            .unwrap()
                    };
                    let staged = Some(carry::Staged::whole(at, l_old));
                    let prof = Profiler::new();
                    let pcx = Ctx::new(&*b, Some(&prof));
                    prof.begin();
                    let k1 = carry::write_back_layers_staged(
                        &pcx,
                        v(&one, DCAP),
                        v(&src, CAP),
                        extent,
                        &keep,
                        staged,
                    );
                    let cats: Vec<_> = prof
                        .end(&*b)
                        .unwrap()
                        .iter()
                        .map(|r| (r.category, r.launches))
                        .collect();
                    let k2 =
                        carry::write_back_layers(&cx, v(&full, DCAP), v(&src, CAP), extent, &keep);
                    assert_eq!(k1, k2, "{what}");
                    let got: Vec<u32> = b.download(one.ptr(), dwords).unwrap();
                    let want: Vec<u32> = b.download(full.ptr(), dwords).unwrap();
                    assert_eq!(got, want, "{what}");
                    if l_old == p + r && at == natural {
                        assert_eq!(cats, [("copy.batched", 1)], "{what}: one part moved");
                    }
                    // one layer through the typed one-layer entry
                    let one1 = b.alloc_from(&carry0, AllocKind::Arena).unwrap();
                    let l0 = |buf, cap| v(buf, cap).index(0, 0).unwrap();
                    carry::write_back_staged(
                        &cx,
                        l0(&one1, DCAP),
                        l0(&src, CAP),
                        extent,
                        &keep,
                        staged,
                    )
                    .unwrap();
                    let n0 = OUTER * DCAP * INNER;
                    let got: Vec<u32> = b.download(one1.ptr(), n0).unwrap();
                    assert_eq!(got, want[..n0], "{what}: one layer");
                }
            }
        }
    }
    // staged frames past the source rows are refused
    let src = b.alloc(OUTER * CAP * INNER * 4, AllocKind::Arena).unwrap();
    let dst = b.alloc(OUTER * DCAP * INNER * 4, AllocKind::Arena).unwrap();
    let t = |buf, cap| {
        Tensor::<f32>::of(buf)
            .unwrap()
            .view(&[OUTER, cap, INNER])
            .unwrap()
    };
    let keep = Keep::natural(CacheOrder::Prepend, p, r);
    let bad = Some(carry::Staged::whole(CAP - 2, 3));
    assert!(matches!(
        carry::write_back_staged(&cx, t(&dst, DCAP), t(&src, CAP), 15, &keep, bad),
        Err(OpError::Backend {
            error: Error::Carry(_),
            ..
        })
    ));
}

/// A partial staging (only the history's first frames copied behind the new ones; the rest read
/// where the carry holds it, as a half step's attention does) leaves, at a prepend cache's
/// steady state, the bytes the full write-back of a wholly staged source leaves, moving only the
/// head; where a part it would move is not in the source (below retention, or an offset that
/// puts the tail elsewhere) it is refused and nothing is written.
fn partial_write_back_equals_full(b: Arc<dyn Backend>) {
    const LAYERS: usize = 3;
    const DCAP: usize = 14;
    // (a nested fn: one view helper for buffers of any lifetime)
    let (p, r) = (7, 5);
    let keep = Keep::natural(CacheOrder::Prepend, p, r);
    let cx = Ctx::new(&*b, None);
    fn v(buf: &DeviceBuffer, cap: usize) -> Tensor<'_, f32> {
        Tensor::<f32>::of(buf)
            .unwrap()
            .view(&[LAYERS, OUTER, cap, INNER])
            .unwrap()
    }
    let dwords = LAYERS * OUTER * DCAP * INNER;
    // `staged` history frames behind `new` ones at `at`, the rest of the source unrelated words
    let source = |carry: &[u32], at: usize, frames: usize, seed: u32| {
        let mut ws = words(seed, LAYERS * OUTER * CAP * INNER);
        for row in 0..LAYERS * OUTER {
            let (d, s) = (row * DCAP * INNER, row * CAP * INNER + at * INNER);
            ws[s..s + frames * INNER].copy_from_slice(&carry[d..d + frames * INNER]);
        }
        ws
    };
    for new in [1, 3, 5, 6] {
        let l_old = p + r;
        let extent = l_old + new;
        let what = format!("new {new}");
        let carry0 = words(new as u32 + 31, dwords);
        let frames = r.saturating_sub(new);
        let part = b
            .alloc_from(&source(&carry0, new, frames, 7), AllocKind::Arena)
            .unwrap();
        let whole = b
            .alloc_from(&source(&carry0, new, l_old, 7), AllocKind::Arena)
            .unwrap();
        let (one, full) = (
            b.alloc_from(&carry0, AllocKind::Arena).unwrap(),
            b.alloc_from(&carry0, AllocKind::Arena).unwrap(),
        );
        let staged = Some(carry::Staged {
            at: new,
            frames,
            partial: true,
        });
        let prof = Profiler::new();
        let pcx = Ctx::new(&*b, Some(&prof));
        prof.begin();
        let k1 = carry::write_back_layers_staged(
            &pcx,
            v(&one, DCAP),
            v(&part, CAP),
            extent,
            &keep,
            staged,
        );
        let cats: Vec<_> = prof
            .end(&*b)
            .unwrap()
            .iter()
            .map(|r| (r.category, r.launches))
            .collect();
        let k2 = carry::write_back_layers(&cx, v(&full, DCAP), v(&whole, CAP), extent, &keep);
        assert_eq!(k1, k2, "{what}");
        let got: Vec<u32> = b.download(one.ptr(), dwords).unwrap();
        let want: Vec<u32> = b.download(full.ptr(), dwords).unwrap();
        assert_eq!(got, want, "{what}");
        assert_eq!(cats, [("copy.batched", 1)], "{what}: the head alone moved");
    }
    // refused, nothing written: below retention, and a tail that would not land where it lies
    for (l_old, new, at) in [(4, 3, 3), (p + r, 3, 4)] {
        let carry0 = words(5, dwords);
        let src = b
            .alloc_from(&source(&carry0, at, 2, 9), AllocKind::Arena)
            .unwrap();
        let dst = b.alloc_from(&carry0, AllocKind::Arena).unwrap();
        let staged = Some(carry::Staged {
            at,
            frames: 2,
            partial: true,
        });
        let r = carry::write_back_layers_staged(
            &cx,
            v(&dst, DCAP),
            v(&src, CAP),
            l_old + new,
            &keep,
            staged,
        );
        assert!(
            matches!(
                r,
                Err(OpError::Backend {
                    error: Error::Carry(_),
                    ..
                })
            ),
            "l_old {l_old} at {at}: {r:?}"
        );
        b.synchronize().unwrap();
        let after: Vec<u32> = b.download(dst.ptr(), dwords).unwrap();
        assert_eq!(after, carry0, "a refused write-back wrote");
    }
}

both!(
    partial_write_back_equals_full,
    staged_write_back_equals_full,
    layered_rows_refuse_overlapping_layers,
    write_back_equals_naive,
    write_back_refuses_bad_geometry,
    typed_write_back_goes_through_the_rows,
    layered_write_back_equals_per_layer
);

/// One launch of `carry.retain` over `buf` (a buffer of `OUTER` rows of `CAP` frames).
fn launch(
    b: &dyn Backend,
    dst: DevPtr,
    src: DevPtr,
    src_rs: i64,
    head: i64,
    tail: i64,
    extent: i64,
) -> Result<(), Error> {
    let rs = (CAP * INNER) as i64;
    // SAFETY: dst and src are buffers of OUTER rows of CAP frames (every caller below); the
    // kernel touches at most frames [0, extent) with extent <= CAP of those rows, at most
    // `src_rs <= rs` words apart, or nothing at all (the guards under test).
    unsafe {
        b.launch(
            &RETAIN,
            LaunchDims::blocks(OUTER as u32, 64),
            &[
                Arg::Ptr(dst),
                Arg::Ptr(src),
                Arg::I64(OUTER as i64),
                Arg::I64(rs),
                Arg::I64(src_rs),
                Arg::I64(INNER as i64),
                Arg::I64(head),
                Arg::I64(tail),
                Arg::I64(extent),
            ],
        )
    }?;
    b.synchronize()
}

/// The kernel's guards, launched directly (not through `write_back_rows`): extent ≤ head + tail
/// (shift ≤ 0: an in-place pass would never end), a tail longer than the extent, in place with
/// different row strides, a negative count. The Host twin refuses each with a typed
/// `KernelError` before touching memory; the CUDA kernel returns without writing (and does
/// return: the test would hang otherwise). Either way the buffer is as it was.
fn retain_kernel_guards(b: Arc<dyn Backend>, host: bool) {
    let rs = (CAP * INNER) as i64;
    let h = words(9, OUTER * CAP * INNER);
    let buf = b.alloc_from(&h, AllocKind::Arena).unwrap();
    let p = buf.ptr();
    for (what, src_rs, head, tail, extent) in [
        ("extent == head + tail", rs, 5, 7, 12),
        ("extent < head + tail", rs, 5, 7, 11),
        ("extent 0", rs, 5, 7, 0),
        ("tail > extent", rs, 0, 9, 8),
        ("in place, different strides", rs - INNER as i64, 2, 3, 10),
        ("negative head", rs, -1, 3, 10),
        ("negative tail", rs, 2, -3, 10),
    ] {
        let r = launch(&*b, p, p, src_rs, head, tail, extent);
        if host {
            assert!(
                matches!(
                    r,
                    Err(Error::Kernel(
                        KernelError::Invalid(_) | KernelError::Args(_)
                    ))
                ),
                "{what}: {r:?}"
            );
        } else {
            assert_eq!(r, Ok(()), "{what}: the kernel returns");
        }
        assert_eq!(b.download::<u32>(p, h.len()).unwrap(), h, "{what}");
    }
}

#[test]
fn retain_kernel_guards_host() {
    retain_kernel_guards(common::host(), true);
}

#[test]
fn retain_kernel_guards_cuda() {
    if let Some(b) = common::cuda() {
        retain_kernel_guards(b.backend(), false);
    }
}
