//! The carry kernels (`kernels/cuda/carry.cu`, paper eq. 2) and their host twins.
//!
//! Both kernels take `(dst, src, outer, dst_row_stride, src_row_stride, inner, f_prompt,
//! f_retained, extent)`, all sizes in 32-bit words / frames. See the .cu file for the in-place
//! ordering argument; the twin performs the very same passes.

use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::{CudaSource, KernelDef};

pub static SOURCE: CudaSource = CudaSource {
    name: "carry",
    code: include_str!("../cuda/carry.cu"),
};

const PARAMS: &[Param] = &[
    Param::Ptr,
    Param::Ptr,
    Param::I64,
    Param::I64,
    Param::I64,
    Param::I64,
    Param::I64,
    Param::I64,
    Param::I64,
];

/// Prepend-ordered cache (newest first, prompt tail): keeps `H[0:f_ret] ‖ H[ℓ-f_prompt:ℓ]`.
pub static PREPEND: KernelDef = KernelDef {
    name: "carry.prepend",
    source: &SOURCE,
    entry: "carry_prepend",
    params: PARAMS,
    host: host_prepend,
};

/// Append-ordered cache (prompt head, newest last): keeps `H[0:f_prompt] ‖ H[ℓ-f_ret:ℓ]`.
pub static APPEND: KernelDef = KernelDef {
    name: "carry.append",
    source: &SOURCE,
    entry: "carry_append",
    params: PARAMS,
    host: host_append,
};

pub static KERNELS: &[&KernelDef] = &[&PREPEND, &APPEND];

/// Geometry of one retention, as the kernels see it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Frames kept in place at the start of each row.
    pub head: usize,
    /// First source frame of the tail window.
    pub tail_src: usize,
    /// Frames in the tail window (written at `head..head+tail_len`).
    pub tail_len: usize,
}

impl Retention {
    /// Prepend order: head = newest `f_retained`, tail = the last `f_prompt` frames.
    pub fn prepend(f_prompt: usize, f_retained: usize, extent: usize) -> Option<Retention> {
        Retention {
            head: f_retained,
            tail_src: extent.checked_sub(f_prompt)?,
            tail_len: f_prompt,
        }
        .valid()
    }

    /// Append order: head = the `f_prompt` prompt frames, tail = the newest `f_retained`.
    pub fn append(f_prompt: usize, f_retained: usize, extent: usize) -> Option<Retention> {
        Retention {
            head: f_prompt,
            tail_src: extent.checked_sub(f_retained)?,
            tail_len: f_retained,
        }
        .valid()
    }

    fn valid(self) -> Option<Retention> {
        // The window must move left by at least one frame (extent > L).
        (self.tail_src > self.head).then_some(self)
    }

    /// Frames after retention (L).
    pub fn kept(&self) -> usize {
        self.head + self.tail_len
    }

    /// Frames the window moves left by (`extent - L`), the in-place pass length.
    pub fn shift(&self) -> usize {
        self.tail_src - self.head
    }
}

struct Geometry {
    dst: *mut u32,
    src: *const u32,
    outer: usize,
    dst_rs: usize,
    src_rs: usize,
    inner: usize,
}

fn geometry(a: &[Arg]) -> Result<(Geometry, usize, usize, usize), KernelError> {
    let g = Geometry {
        dst: a.ptr(0)?.0 as *mut u32,
        src: a.ptr(1)?.0 as *const u32,
        outer: a.usize(2)?,
        dst_rs: a.usize(3)?,
        src_rs: a.usize(4)?,
        inner: a.usize(5)?,
    };
    Ok((g, a.usize(6)?, a.usize(7)?, a.usize(8)?))
}

/// The twin of `dcc_retain`: the same passes, row by row.
///
/// # Safety
/// Rows of `dst`/`src` hold the frames the retention touches.
unsafe fn retain(g: &Geometry, r: Retention) -> Result<(), KernelError> {
    let inplace = std::ptr::eq(g.dst, g.src);
    if inplace && g.dst_rs != g.src_rs {
        return Err(KernelError::Invalid(
            "in-place carry with different row strides".into(),
        ));
    }
    let inner = g.inner;
    for row in 0..g.outer {
        // SAFETY: row bases are inside the buffers (caller).
        let (d, s) = unsafe { (g.dst.add(row * g.dst_rs), g.src.add(row * g.src_rs)) };
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
    Ok(())
}

unsafe fn host_prepend(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (g, f_prompt, f_retained, extent) = geometry(a)?;
    let r = Retention::prepend(f_prompt, f_retained, extent).ok_or_else(|| {
        KernelError::Invalid(format!(
            "prepend carry needs extent {extent} > {f_prompt}+{f_retained}"
        ))
    })?;
    // SAFETY: HostFn contract.
    unsafe { retain(&g, r) }
}

unsafe fn host_append(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (g, f_prompt, f_retained, extent) = geometry(a)?;
    let r = Retention::append(f_prompt, f_retained, extent).ok_or_else(|| {
        KernelError::Invalid(format!(
            "append carry needs extent {extent} > {f_prompt}+{f_retained}"
        ))
    })?;
    // SAFETY: HostFn contract.
    unsafe { retain(&g, r) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::DevPtr;

    #[allow(clippy::too_many_arguments)]
    fn run(
        k: &KernelDef,
        buf: &mut [u32],
        outer: usize,
        rs: usize,
        inner: usize,
        fp: usize,
        fr: usize,
        ext: usize,
    ) {
        let p = DevPtr(buf.as_mut_ptr() as u64);
        let args = [
            Arg::Ptr(p),
            Arg::Ptr(p),
            Arg::I64(outer as i64),
            Arg::I64(rs as i64),
            Arg::I64(rs as i64),
            Arg::I64(inner as i64),
            Arg::I64(fp as i64),
            Arg::I64(fr as i64),
            Arg::I64(ext as i64),
        ];
        // SAFETY: buf holds outer * rs words and ext * inner <= rs.
        unsafe { k.run_host(&LaunchDims::blocks(1, 32), &args).unwrap() };
    }

    #[test]
    fn in_place_equals_concat_for_every_shift() {
        let (outer, inner, fp, fr) = (3, 2, 7, 4);
        let cap = 40;
        for ext in fp + fr + 1..=cap {
            for (k, prepend) in [(&PREPEND, true), (&APPEND, false)] {
                let rs = cap * inner;
                let mut buf: Vec<u32> = (0..outer * rs)
                    .map(|i| (i as u32).wrapping_mul(2654435761))
                    .collect();
                let orig = buf.clone();
                run(k, &mut buf, outer, rs, inner, fp, fr, ext);
                for r in 0..outer {
                    let row = &orig[r * rs..r * rs + ext * inner];
                    let (a, b) = if prepend {
                        (&row[..fr * inner], &row[(ext - fp) * inner..])
                    } else {
                        (&row[..fp * inner], &row[(ext - fr) * inner..])
                    };
                    let want: Vec<u32> = a.iter().chain(b).copied().collect();
                    assert_eq!(
                        &buf[r * rs..r * rs + (fp + fr) * inner],
                        &want[..],
                        "ext {ext} prepend {prepend}"
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
    fn rejects_extent_not_past_bound() {
        assert!(Retention::prepend(302, 100, 402).is_none());
        assert!(Retention::prepend(302, 100, 403).is_some());
        assert_eq!(Retention::append(302, 100, 452).unwrap().shift(), 50);
    }
}
