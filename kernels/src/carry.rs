//! The carry kernel (`kernels/cuda/carry.cu`, paper eq. 2) and its host twin.
//!
//! [`RETAIN`] takes `(dst, src, outer, dst_row_stride, src_row_stride, inner, head, tail,
//! extent)`, all sizes in 32-bit words / frames, and keeps `H[·, 0:head] ‖ H[·, extent−tail :
//! extent]` of each of `outer` rows ([`Retention`]). One kernel serves every storage order and
//! keep rule: the contract's `keep: {head, tail}` is the pair it takes. See the .cu file for the
//! in-place ordering argument; the twin performs the very same passes.
//!
//! Guards: a launch whose window would not move left (`extent ≤ head + tail`), whose tail is
//! longer than the extent, or that runs in place (`dst == src`) with different row strides is
//! refused by the twin ([`KernelError::Invalid`]) and returns without writing on the device (an
//! in-place pass of `shift ≤ 0` frames would never end).

use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::{CudaSource, KernelDef};

pub static SOURCE: CudaSource = CudaSource {
    name: "carry",
    code: include_str!("../cuda/carry.cu"),
};

/// `carry_retain(dst, src, outer, dst_row_stride, src_row_stride, inner, head, tail, extent)`:
/// keeps `H[·, 0:head] ‖ H[·, extent−tail : extent]` of `outer` rows of `src` in frames
/// `[0, head + tail)` of the rows of `dst` (in place when `dst == src`). One block per row
/// (grid-strided), any block size.
pub static RETAIN: KernelDef = KernelDef {
    name: "carry.retain",
    source: &SOURCE,
    entry: "carry_retain",
    params: &[
        Param::Ptr,
        Param::Ptr,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
    ],
    host: host_retain,
};

/// `carry_retain_layers(dst, src, layers, dst_layer_stride, src_layer_stride, outer,
/// dst_row_stride, src_row_stride, inner, head, tail, extent)`: [`RETAIN`] over `layers` blocks of
/// `outer` rows, layer `l`'s rows at `l · layer_stride` words from each side's start (a session's
/// rows of every layer of a batched workspace): one launch for what [`RETAIN`] takes one per
/// layer, the same words moved the same way. One block per row (grid-strided over `layers ·
/// outer` rows), any block size.
pub static RETAIN_LAYERS: KernelDef = KernelDef {
    name: "carry.retain_layers",
    source: &SOURCE,
    entry: "carry_retain_layers",
    params: &[
        Param::Ptr,
        Param::Ptr,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
        Param::I64,
    ],
    host: host_retain_layers,
};

pub static KERNELS: &[&KernelDef] = &[&RETAIN, &RETAIN_LAYERS];

/// Geometry of one retention, as the kernel sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Frames kept in place at the start of each row.
    pub head: usize,
    /// First source frame of the tail window (`extent − tail`).
    pub tail_src: usize,
    /// Frames in the tail window (written at `head..head + tail_len`).
    pub tail_len: usize,
}

impl Retention {
    /// Keeps `H[0:head] ‖ H[extent−tail : extent]`. `None` unless the window moves left by at
    /// least one frame (`extent > head + tail`, which also gives `tail ≤ extent`): at
    /// `extent ≤ head + tail` there is nothing to drop, and the kernel refuses the launch.
    pub fn new(head: usize, tail: usize, extent: usize) -> Option<Retention> {
        let tail_src = extent.checked_sub(tail)?;
        (tail_src > head).then_some(Retention {
            head,
            tail_src,
            tail_len: tail,
        })
    }

    /// Frames after retention (`head + tail`).
    pub fn kept(&self) -> usize {
        self.head + self.tail_len
    }

    /// Frames the window moves left by (`extent − kept`), the in-place pass length.
    pub fn shift(&self) -> usize {
        self.tail_src - self.head
    }
}

/// Row strides of one side of a retention, in 32-bit words: `layers` blocks of `outer` rows,
/// row `r` of layer `l` at `l · layer + r · row`.
#[derive(Copy, Clone, Debug)]
struct Rows {
    layer: usize,
    row: usize,
}

/// The twin of `dcc_retain`: the same passes, row by row, layer by layer.
///
/// # Safety
/// Rows of `dst`/`src` hold the frames the retention touches.
unsafe fn retain(
    dst: *mut u32,
    src: *const u32,
    (layers, outer, inner): (usize, usize, usize),
    (dr, sr): (Rows, Rows),
    r: Retention,
) {
    let inplace = std::ptr::eq(dst, src);
    for row in 0..layers * outer {
        let (l, o) = (row / outer, row % outer);
        // SAFETY: row bases are inside the buffers (caller).
        let (d, s) = unsafe {
            (
                dst.add(l * dr.layer + o * dr.row),
                src.add(l * sr.layer + o * sr.row),
            )
        };
        if !inplace {
            // SAFETY: distinct buffers; the head is `head * inner` words in each.
            unsafe { std::ptr::copy_nonoverlapping(s, d, r.head * inner) };
        }
        let pass = if inplace { r.shift() } else { r.tail_len };
        let mut p0 = 0;
        while p0 < r.tail_len {
            let p1 = (p0 + pass).min(r.tail_len);
            // SAFETY: within one pass the written frames [head+p0, head+p1) and the read frames
            // [tail_src+p0, tail_src+p1) are disjoint because tail_src - head = shift >= pass.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    s.add((r.tail_src + p0) * inner),
                    d.add((r.head + p0) * inner),
                    (p1 - p0) * inner,
                )
            };
            p0 = p1;
        }
    }
}

/// What both entries do once their arguments are read: the guards they share (in place only
/// with equal strides, a window that moves left: [`Retention::new`]), then the retention.
///
/// # Safety
/// As [`retain`]'s.
unsafe fn checked_retain(
    name: &str,
    (dst, src): (*mut u32, *const u32),
    shape: (usize, usize, usize),
    (dr, sr): (Rows, Rows),
    (head, tail, extent): (usize, usize, usize),
) -> Result<(), KernelError> {
    let inplace = std::ptr::eq(dst, src);
    if inplace && (dr.row != sr.row || dr.layer != sr.layer) {
        return Err(KernelError::Invalid(format!(
            "{name} in place with different strides (rows {} and {}, layers {} and {})",
            dr.row, sr.row, dr.layer, sr.layer
        )));
    }
    let r = Retention::new(head, tail, extent).ok_or_else(|| {
        KernelError::Invalid(format!(
            "{name} needs tail {tail} <= extent {extent} and extent > head {head} + tail"
        ))
    })?;
    // SAFETY: the caller's promise.
    unsafe { retain(dst, src, shape, (dr, sr), r) };
    Ok(())
}

unsafe fn host_retain(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (dst, src) = (a.ptr(0)?.0 as *mut u32, a.ptr(1)?.0 as *const u32);
    let (outer, dst_rs, src_rs, inner) = (a.usize(2)?, a.usize(3)?, a.usize(4)?, a.usize(5)?);
    let (head, tail, extent) = (a.usize(6)?, a.usize(7)?, a.usize(8)?);
    let (dr, sr) = (
        Rows {
            layer: 0,
            row: dst_rs,
        },
        Rows {
            layer: 0,
            row: src_rs,
        },
    );
    let (shape, lens) = ((1, outer, inner), (head, tail, extent));
    // SAFETY: HostFn contract.
    unsafe { checked_retain("carry.retain", (dst, src), shape, (dr, sr), lens) }
}

unsafe fn host_retain_layers(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (dst, src) = (a.ptr(0)?.0 as *mut u32, a.ptr(1)?.0 as *const u32);
    let (layers, dst_ls, src_ls) = (a.usize(2)?, a.usize(3)?, a.usize(4)?);
    let (outer, dst_rs, src_rs, inner) = (a.usize(5)?, a.usize(6)?, a.usize(7)?, a.usize(8)?);
    let (head, tail, extent) = (a.usize(9)?, a.usize(10)?, a.usize(11)?);
    if layers.checked_mul(outer).is_none() {
        return Err(KernelError::Invalid(format!(
            "carry.retain_layers: {layers} layers of {outer} rows overflow"
        )));
    }
    let (dr, sr) = (
        Rows {
            layer: dst_ls,
            row: dst_rs,
        },
        Rows {
            layer: src_ls,
            row: src_rs,
        },
    );
    let (shape, lens) = ((layers, outer, inner), (head, tail, extent));
    // SAFETY: HostFn contract.
    unsafe { checked_retain("carry.retain_layers", (dst, src), shape, (dr, sr), lens) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::DevPtr;

    /// Runs the twin in place over `buf`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        buf: &mut [u32],
        outer: usize,
        rs: usize,
        inner: usize,
        head: usize,
        tail: usize,
        ext: usize,
    ) -> Result<(), KernelError> {
        let p = DevPtr(buf.as_mut_ptr() as u64);
        let args = [
            Arg::Ptr(p),
            Arg::Ptr(p),
            Arg::I64(outer as i64),
            Arg::I64(rs as i64),
            Arg::I64(rs as i64),
            Arg::I64(inner as i64),
            Arg::I64(head as i64),
            Arg::I64(tail as i64),
            Arg::I64(ext as i64),
        ];
        // SAFETY: buf holds outer * rs words and ext * inner <= rs (every caller below).
        unsafe { RETAIN.run_host(&LaunchDims::blocks(1, 32), &args) }
    }

    #[test]
    fn in_place_equals_concat_for_every_shift() {
        let (outer, inner) = (3, 2);
        let cap = 40;
        // (head, tail): prepend storage under the paper's rule (retained 4, prompt 7), then the
        // append rule (prompt 7, retained 4), then degenerate splits.
        for (head, tail) in [(4, 7), (7, 4), (0, 5), (5, 0)] {
            for ext in head + tail + 1..=cap {
                let rs = cap * inner;
                let mut buf: Vec<u32> = (0..outer * rs)
                    .map(|i| (i as u32).wrapping_mul(2654435761))
                    .collect();
                let orig = buf.clone();
                run(&mut buf, outer, rs, inner, head, tail, ext).unwrap();
                for r in 0..outer {
                    let row = &orig[r * rs..r * rs + ext * inner];
                    let want: Vec<u32> = row[..head * inner]
                        .iter()
                        .chain(&row[(ext - tail) * inner..])
                        .copied()
                        .collect();
                    assert_eq!(
                        &buf[r * rs..r * rs + (head + tail) * inner],
                        &want[..],
                        "ext {ext} head {head} tail {tail}"
                    );
                    // Frames past L are left as they were (envelope spare capacity).
                    assert_eq!(
                        &buf[r * rs + ext * inner..(r + 1) * rs],
                        &orig[r * rs + ext * inner..(r + 1) * rs]
                    );
                }
            }
        }
    }

    #[test]
    fn geometry_needs_the_window_to_move_left() {
        assert!(Retention::new(100, 302, 402).is_none());
        assert!(Retention::new(100, 302, 401).is_none());
        assert!(
            Retention::new(0, 10, 5).is_none(),
            "tail longer than the extent"
        );
        let r = Retention::new(100, 302, 403).unwrap();
        assert_eq!((r.head, r.tail_src, r.tail_len), (100, 101, 302));
        assert_eq!((r.kept(), r.shift()), (402, 1));
        assert_eq!(Retention::new(302, 100, 452).unwrap().shift(), 50);
    }

    /// Every launch the kernel returns from without writing, the twin refuses with a typed
    /// error, also without writing.
    #[test]
    fn guards_refuse_without_writing() {
        let (outer, inner, cap) = (2, 3, 20);
        let rs = cap * inner;
        let orig: Vec<u32> = (0..outer * rs).map(|i| i as u32 ^ 0x5a5a).collect();
        let invalid = |r: &Result<(), KernelError>| matches!(r, Err(KernelError::Invalid(_)));
        // extent == head + tail (shift 0: an in-place pass would never end) and below it
        for ext in [12, 11, 0] {
            let mut buf = orig.clone();
            assert!(
                invalid(&run(&mut buf, outer, rs, inner, 5, 7, ext)),
                "ext {ext}"
            );
            assert_eq!(buf, orig);
        }
        // tail longer than the extent
        let mut buf = orig.clone();
        assert!(invalid(&run(&mut buf, outer, rs, inner, 0, 9, 8)));
        assert_eq!(buf, orig);
        // in place with different row strides
        let mut buf = orig.clone();
        let p = DevPtr(buf.as_mut_ptr() as u64);
        let args = [
            Arg::Ptr(p),
            Arg::Ptr(p),
            Arg::I64(1),
            Arg::I64(rs as i64),
            Arg::I64(rs as i64 - inner as i64),
            Arg::I64(inner as i64),
            Arg::I64(2),
            Arg::I64(3),
            Arg::I64(10),
        ];
        // SAFETY: one row of at most rs words of buf; refused before any access.
        let r = unsafe { RETAIN.run_host(&LaunchDims::blocks(1, 32), &args) };
        assert!(invalid(&r), "{r:?}");
        assert_eq!(buf, orig);
        // a negative size is refused as an argument error
        let mut buf = orig.clone();
        let p = DevPtr(buf.as_mut_ptr() as u64);
        let mut args = args;
        args[0] = Arg::Ptr(p);
        args[1] = Arg::Ptr(p);
        args[4] = Arg::I64(rs as i64);
        args[6] = Arg::I64(-1);
        // SAFETY: as above.
        assert!(unsafe { RETAIN.run_host(&LaunchDims::blocks(1, 32), &args) }.is_err());
        assert_eq!(buf, orig);
    }

    /// `carry.retain_layers` over layers at their own strides equals one `carry.retain` per
    /// layer, word for word: from a separate source (the batched write-back: the source's layers
    /// farther apart than its rows) and in place.
    #[test]
    fn layers_equal_one_launch_per_layer() {
        let (layers, outer, inner, cap) = (3, 2, 2, 16);
        let rs = cap * inner;
        let (src_ls, dst_ls) = (5 * outer * rs, outer * rs);
        let fill = |n: usize, salt: u32| -> Vec<u32> {
            (0..n)
                .map(|i| (i as u32 ^ salt).wrapping_mul(2654435761))
                .collect()
        };
        let i = |v: usize| Arg::I64(v as i64);
        for (head, tail) in [(4, 7), (7, 4), (0, 5)] {
            for ext in head + tail + 1..=cap {
                for inplace in [false, true] {
                    let src = fill(layers * src_ls, 1);
                    let (sl, dl) = if inplace {
                        (dst_ls, dst_ls)
                    } else {
                        (src_ls, dst_ls)
                    };
                    let mut one = if inplace {
                        fill(layers * dst_ls, 1)
                    } else {
                        fill(layers * dst_ls, 2)
                    };
                    let mut each = one.clone();
                    let s_ptr = |d: &mut Vec<u32>| {
                        if inplace {
                            DevPtr(d.as_mut_ptr() as u64)
                        } else {
                            DevPtr(src.as_ptr() as u64)
                        }
                    };
                    let sp = s_ptr(&mut one);
                    let args = [
                        Arg::Ptr(DevPtr(one.as_mut_ptr() as u64)),
                        Arg::Ptr(sp),
                        i(layers),
                        i(dl),
                        i(sl),
                        i(outer),
                        i(rs),
                        i(rs),
                        i(inner),
                        i(head),
                        i(tail),
                        i(ext),
                    ];
                    // SAFETY: every layer's rows lie inside `one` / `src` (strides above).
                    unsafe { RETAIN_LAYERS.run_host(&LaunchDims::blocks(1, 32), &args) }.unwrap();
                    let sp = s_ptr(&mut each);
                    for l in 0..layers {
                        let args = [
                            Arg::Ptr(DevPtr(each.as_mut_ptr() as u64 + 4 * (l * dl) as u64)),
                            Arg::Ptr(DevPtr(sp.0 + 4 * (l * sl) as u64)),
                            i(outer),
                            i(rs),
                            i(rs),
                            i(inner),
                            i(head),
                            i(tail),
                            i(ext),
                        ];
                        // SAFETY: layer l's rows lie inside `each` / `src`.
                        unsafe { RETAIN.run_host(&LaunchDims::blocks(1, 32), &args) }.unwrap();
                    }
                    assert_eq!(
                        one, each,
                        "head {head} tail {tail} ext {ext} in place {inplace}"
                    );
                }
            }
        }
        // in place with different layer strides is refused without writing
        let mut buf = fill(layers * src_ls, 3);
        let orig = buf.clone();
        let p = DevPtr(buf.as_mut_ptr() as u64);
        let args = [
            Arg::Ptr(p),
            Arg::Ptr(p),
            i(layers),
            i(dst_ls),
            i(src_ls),
            i(outer),
            i(rs),
            i(rs),
            i(inner),
            i(4),
            i(7),
            i(12),
        ];
        // SAFETY: refused before any access.
        let r = unsafe { RETAIN_LAYERS.run_host(&LaunchDims::blocks(1, 32), &args) };
        assert!(matches!(r, Err(KernelError::Invalid(_))), "{r:?}");
        assert_eq!(buf, orig);
    }
}
