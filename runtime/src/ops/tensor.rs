//! Views over device memory that carry their shape and the memory they may reach.
//!
//! A [`Tensor`] is an address, up to [`MAX_RANK`] dims with element strides, and `len`: how many
//! elements the memory it was made from holds from its address on. Every view method keeps the
//! invariant `span <= len` (the span is the last element the dims and strides reach, plus one),
//! so an op that checks its operands' dims can hand their spans to a kernel. A `Tensor` borrows
//! what it was made from (a [`DeviceBuffer`], an [`Arena`]) for `'a`, so the memory outlives
//! every eager op queued over it; a [`RawTensor`] is the same description without the borrow,
//! for addresses that cross an API boundary (the I/O of a captured callable), turned back into a
//! `Tensor` by an `unsafe` [`RawTensor::bind`] whose caller vouches for the memory.
//!
//! Views are `Copy` and never allocate: building them inside a capture is free.

use std::marker::PhantomData;

use crate::DevPtr;
use crate::arena::{Arena, packed_strides};
use crate::backend::DeviceBuffer;
use crate::contract::DType;

use super::OpError;

/// Most dims a view holds (the Token2Wav estimator cache is `[step, layer, cfg, head, frame,
/// k‖v]`).
pub const MAX_RANK: usize = 6;

/// Element types of views: the 32-bit words most kernels move, the doubles of the kernels
/// that compute in float64 (the vocoder's F0 predictor and harmonic phase), and the binary16
/// weights of the half-precision linear (`GemmPath::Half`).
pub trait Elem: Copy + 'static {
    const DTYPE: DType;
}

impl Elem for f32 {
    const DTYPE: DType = DType::F32;
}

impl Elem for f64 {
    const DTYPE: DType = DType::F64;
}

impl Elem for u32 {
    const DTYPE: DType = DType::I32;
}

/// IEEE binary16: the weights and biases of a linear on `GemmPath::Half`.
impl Elem for half::f16 {
    const DTYPE: DType = DType::F16;
}

/// The vocoder's int64 stream counters.
impl Elem for i64 {
    const DTYPE: DType = DType::I64;
}

const fn size_of<T: Elem>() -> usize {
    std::mem::size_of::<T>()
}

/// Elements from the first to one past the last a layout reaches (0 when a dim is 0); `None` on
/// overflow.
fn span_of(dims: &[usize], strides: &[usize]) -> Option<usize> {
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter().zip(strides).try_fold(1usize, |acc, (&d, &s)| {
        acc.checked_add((d - 1).checked_mul(s)?)
    })
}

/// A tensor's address and layout without a borrow (see the module docs).
#[derive(Copy, Clone, Debug)]
pub struct RawTensor<T: Elem = f32> {
    ptr: DevPtr,
    rank: u8,
    dims: [usize; MAX_RANK],
    strides: [usize; MAX_RANK],
    _elem: PhantomData<T>,
}

impl<T: Elem> PartialEq for RawTensor<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.ptr, self.dims(), self.strides()) == (o.ptr, o.dims(), o.strides())
    }
}

impl<T: Elem> Eq for RawTensor<T> {}

impl<T: Elem> RawTensor<T> {
    /// `dims` with element `strides` at `ptr`.
    pub fn new(ptr: DevPtr, dims: &[usize], strides: &[usize]) -> Result<Self, OpError> {
        if dims.len() > MAX_RANK || dims.len() != strides.len() {
            return Err(OpError::shape(
                "tensor",
                "dims",
                format!("at most {MAX_RANK} dims, one stride each ({strides:?})"),
                dims,
            ));
        }
        if span_of(dims, strides).is_none() {
            return Err(OpError::shape("tensor", "dims", "a span below 2^64", dims));
        }
        if !ptr.0.is_multiple_of(size_of::<T>() as u64) {
            return Err(OpError::arg(
                "tensor",
                "ptr",
                format!("{ptr} is not aligned for {}", T::DTYPE.name()),
            ));
        }
        let mut d = [0; MAX_RANK];
        let mut s = [0; MAX_RANK];
        d[..dims.len()].copy_from_slice(dims);
        s[..dims.len()].copy_from_slice(strides);
        Ok(RawTensor {
            ptr,
            rank: dims.len() as u8,
            dims: d,
            strides: s,
            _elem: PhantomData,
        })
    }

    /// `dims` packed row-major at `ptr`.
    pub fn packed(ptr: DevPtr, dims: &[usize]) -> Result<Self, OpError> {
        Self::new(ptr, dims, &packed_strides(dims))
    }

    /// The same layout at another address (a staging copy of the same shape).
    pub fn with_ptr(self, ptr: DevPtr) -> Self {
        RawTensor { ptr, ..self }
    }

    pub fn ptr(&self) -> DevPtr {
        self.ptr
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank as usize]
    }

    pub fn strides(&self) -> &[usize] {
        &self.strides[..self.rank as usize]
    }

    /// Elements the layout reaches from its address (checked at construction not to overflow).
    pub fn span(&self) -> usize {
        span_of(self.dims(), self.strides()).unwrap_or(usize::MAX)
    }

    /// A [`Tensor`] over this layout, reaching exactly its span.
    ///
    /// # Safety
    /// The span's elements at `ptr` lie inside live memory of the backend the tensor's ops run
    /// on, which stays alive for `'a` and, for ops recorded into a graph, until the graph's last
    /// replay completes.
    pub unsafe fn bind<'a>(self) -> Tensor<'a, T> {
        Tensor {
            len: self.span(),
            raw: self,
            _borrow: PhantomData,
        }
    }
}

/// A view of device memory borrowed for `'a` (see the module docs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Tensor<'a, T: Elem = f32> {
    raw: RawTensor<T>,
    /// Elements the memory holds from `raw.ptr` on (`>= span`).
    len: usize,
    _borrow: PhantomData<&'a ()>,
}

fn view_err(method: &'static str, expected: impl Into<String>, dims: &[usize]) -> OpError {
    OpError::shape(method, "tensor", expected, dims)
}

impl<'a, T: Elem> Tensor<'a, T> {
    /// The whole buffer as one dim of `bytes / size_of::<T>()` elements.
    pub fn of(buf: &'a DeviceBuffer) -> Result<Self, OpError> {
        let n = buf.bytes() / size_of::<T>();
        let raw = RawTensor::new(buf.ptr(), &[n], &[1])?;
        Ok(Tensor {
            raw,
            len: n,
            _borrow: PhantomData,
        })
    }

    /// Region `name` of `arena` with the dims and strides of its layout (the contract's
    /// `layout:`); its dtype must be `T`'s.
    pub fn region(arena: &'a Arena, name: &str) -> Result<Self, OpError> {
        let r = arena.region(name).map_err(|error| OpError::Backend {
            op: "region",
            error,
        })?;
        if r.info.dtype != T::DTYPE {
            return Err(OpError::arg(
                "region",
                "dtype",
                format!(
                    "region `{name}` holds {}, the view {}",
                    r.info.dtype.name(),
                    T::DTYPE.name()
                ),
            ));
        }
        let raw = RawTensor::new(r.ptr, r.info.dims, &r.info.strides())?;
        if raw.span() > r.info.elems {
            return Err(OpError::Bounds {
                op: "region",
                view: r.info.name,
                needed: raw.span(),
                held: r.info.elems,
            });
        }
        Ok(Tensor {
            raw,
            len: r.info.elems,
            _borrow: PhantomData,
        })
    }

    /// The layout without the borrow.
    pub fn raw(&self) -> RawTensor<T> {
        self.raw
    }

    pub fn ptr(&self) -> DevPtr {
        self.raw.ptr
    }

    pub fn dims(&self) -> &[usize] {
        self.raw.dims()
    }

    pub fn strides(&self) -> &[usize] {
        self.raw.strides()
    }

    pub fn rank(&self) -> usize {
        self.raw.rank as usize
    }

    /// Elements the memory holds from this view's address on.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.elems() == 0
    }

    /// Elements the view names (the product of its dims).
    pub fn elems(&self) -> usize {
        self.dims().iter().product()
    }

    /// Elements from the first to one past the last the view reaches.
    pub fn span(&self) -> usize {
        self.raw.span()
    }

    /// Whether the strides are the packed row-major strides of the dims (the stride of an axis
    /// of one position is immaterial).
    pub fn is_packed(&self) -> bool {
        if self.is_empty() {
            return true;
        }
        let mut want = 1;
        for (&d, &s) in self.dims().iter().zip(self.strides()).rev() {
            if d != 1 && s != want {
                return false;
            }
            want *= d;
        }
        true
    }

    /// Byte range `[start, end)` the view reaches.
    pub(crate) fn byte_range(&self) -> (u64, u64) {
        let start = self.raw.ptr.0;
        (start, start + (self.span() * size_of::<T>()) as u64)
    }

    /// The view of `dims`/`strides` (their first `rank` entries) `skip` elements in, checked to
    /// stay inside the memory.
    fn with(
        &self,
        rank: usize,
        (dims, strides): ([usize; MAX_RANK], [usize; MAX_RANK]),
        skip: usize,
    ) -> Result<Self, OpError> {
        let raw = RawTensor::new(
            self.raw.ptr.offset(skip * size_of::<T>()),
            &dims[..rank],
            &strides[..rank],
        )?;
        let len = self.len.saturating_sub(skip);
        if raw.span() > len {
            return Err(OpError::Bounds {
                op: "view",
                view: "tensor",
                needed: raw.span(),
                held: len,
            });
        }
        Ok(Tensor {
            raw,
            len,
            _borrow: PhantomData,
        })
    }

    /// This view's dims and strides as arrays.
    fn parts(&self) -> ([usize; MAX_RANK], [usize; MAX_RANK]) {
        (self.raw.dims, self.raw.strides)
    }

    fn axis(&self, method: &'static str, axis: usize) -> Result<(), OpError> {
        if axis >= self.rank() {
            return Err(view_err(method, format!("an axis {axis}"), self.dims()));
        }
        Ok(())
    }

    /// The first `dims.iter().product()` elements of a packed view, packed as `dims` (a view of
    /// part of a larger workspace).
    pub fn view(&self, dims: &[usize]) -> Result<Self, OpError> {
        if !self.is_packed() {
            return Err(OpError::layout(
                "view",
                "tensor",
                "packed strides",
                self.strides(),
            ));
        }
        if dims.len() > MAX_RANK {
            return Err(view_err("view", format!("at most {MAX_RANK} dims"), dims));
        }
        let n = dims
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or(usize::MAX);
        if n > self.elems() {
            return Err(view_err(
                "view",
                format!("at least {n} elements for {dims:?}"),
                self.dims(),
            ));
        }
        let mut d = [0; MAX_RANK];
        let mut st = [0; MAX_RANK];
        d[..dims.len()].copy_from_slice(dims);
        let mut acc = 1;
        for i in (0..dims.len()).rev() {
            st[i] = acc;
            acc *= dims[i];
        }
        self.with(dims.len(), (d, st), 0)
    }

    /// Positions `start..start + n` of `axis`.
    pub fn narrow(&self, axis: usize, start: usize, n: usize) -> Result<Self, OpError> {
        self.axis("narrow", axis)?;
        let (mut dims, strides) = self.parts();
        if start.checked_add(n).is_none_or(|e| e > dims[axis]) {
            return Err(view_err(
                "narrow",
                format!("positions {start}..{start}+{n} of axis {axis}"),
                self.dims(),
            ));
        }
        dims[axis] = n;
        let skip = if n == 0 { 0 } else { start * strides[axis] };
        self.with(self.rank(), (dims, strides), skip)
    }

    /// `n` rows from `start` (axis 0).
    pub fn rows(&self, start: usize, n: usize) -> Result<Self, OpError> {
        self.narrow(0, start, n)
    }

    /// Position `i` of `axis`, the axis removed.
    pub fn index(&self, axis: usize, i: usize) -> Result<Self, OpError> {
        let one = self.narrow(axis, i, 1)?;
        let (mut dims, mut strides) = self.parts();
        let r = self.rank();
        dims.copy_within(axis + 1..r, axis);
        strides.copy_within(axis + 1..r, axis);
        one.with(r - 1, (dims, strides), 0)
    }

    /// Axes `a` and `b` swapped.
    pub fn transpose(&self, a: usize, b: usize) -> Result<Self, OpError> {
        self.axis("transpose", a)?;
        self.axis("transpose", b)?;
        let (mut dims, mut strides) = self.parts();
        dims.swap(a, b);
        strides.swap(a, b);
        self.with(self.rank(), (dims, strides), 0)
    }

    /// Axes `first..=last` merged into one (each must step over the next exactly: `stride[i] ==
    /// dims[i + 1] · stride[i + 1]`, or the view is empty).
    pub fn flatten(&self, first: usize, last: usize) -> Result<Self, OpError> {
        self.axis("flatten", last)?;
        if first > last {
            return Err(view_err(
                "flatten",
                format!("axes {first}..={last}"),
                self.dims(),
            ));
        }
        let (d, s) = self.parts();
        let mergeable = (first..last).all(|i| s[i] == d[i + 1] * s[i + 1]);
        if !mergeable && !self.is_empty() {
            return Err(OpError::layout(
                "flatten",
                "tensor",
                format!("axes {first}..={last} of dims {:?} contiguous", self.dims()),
                self.strides(),
            ));
        }
        let (mut dims, mut strides) = (d, s);
        dims[first] = d[first..=last].iter().product();
        strides[first] = s[last];
        let r = self.rank();
        dims.copy_within(last + 1..r, first + 1);
        strides.copy_within(last + 1..r, first + 1);
        self.with(r - (last - first), (dims, strides), 0)
    }

    /// A new axis of `n` positions at `axis`, all aliasing the same elements (stride 0).
    pub fn broadcast(&self, axis: usize, n: usize) -> Result<Self, OpError> {
        let r = self.rank();
        if axis > r || r == MAX_RANK {
            return Err(view_err(
                "broadcast",
                format!("room for a new axis {axis}"),
                self.dims(),
            ));
        }
        let (mut dims, mut strides) = self.parts();
        dims.copy_within(axis..r, axis + 1);
        strides.copy_within(axis..r, axis + 1);
        dims[axis] = n;
        strides[axis] = 0;
        self.with(r + 1, (dims, strides), 0)
    }

    /// The `k`-row windows of a row-major `[t, d]` view as `[t − k + 1, k·d]` rows that overlap
    /// (row stride `d`): the im2col rows of a valid convolution of kernel `k`. A `[batch, t, d]`
    /// view (rows of `d` packed, entries at any stride) gives each entry's windows, `[batch, t −
    /// k + 1, k·d]` at the entry stride: the im2col rows of a batch of independent streams.
    pub fn windows(&self, k: usize) -> Result<Self, OpError> {
        let r = self.rank();
        let (t, d) = match self.dims() {
            &[t, d] | &[_, t, d] if k >= 1 && t >= k => (t, d),
            dims => return Err(view_err("windows", format!("[batch?, t >= {k}, d]"), dims)),
        };
        if self.strides()[r - 2..] != [d, 1] {
            return Err(OpError::layout(
                "windows",
                "tensor",
                format!("[.., {d}, 1]"),
                self.strides(),
            ));
        }
        let (mut dims, mut strides) = self.parts();
        dims[r - 2..r].copy_from_slice(&[t - k + 1, k * d]);
        strides[r - 2..r].copy_from_slice(&[d, 1]);
        self.with(r, (dims, strides), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{AllocKind, host};

    #[test]
    fn views_keep_their_span_inside_the_memory() {
        let be = host();
        let buf = be.alloc(4 * 24, AllocKind::Other).unwrap();
        let t = Tensor::<f32>::of(&buf).unwrap();
        assert_eq!(t.dims(), [24]);
        let m = t.view(&[2, 3, 4]).unwrap();
        assert_eq!(m.strides(), [12, 4, 1]);
        let n = m.narrow(1, 1, 2).unwrap();
        assert_eq!((n.dims(), n.strides()), (&[2, 2, 4][..], &[12, 4, 1][..]));
        assert_eq!(n.ptr(), buf.ptr().offset(16));
        assert_eq!(n.span(), 12 + 4 + 3 + 1);
        let f = n.flatten(1, 2).unwrap();
        assert_eq!((f.dims(), f.strides()), (&[2, 8][..], &[12, 1][..]));
        // axes 0..=1 of the narrowed view do not step over each other
        assert!(matches!(n.flatten(0, 1), Err(OpError::Layout { .. })));
        let i = m.index(0, 1).unwrap();
        assert_eq!((i.dims(), i.ptr()), (&[3, 4][..], buf.ptr().offset(48)));
        let tr = i.transpose(0, 1).unwrap();
        assert_eq!(tr.strides(), [1, 4]);
        let w = i.windows(2).unwrap();
        assert_eq!(
            (w.dims(), w.strides(), w.span()),
            (&[2, 8][..], &[4, 1][..], 12)
        );
        let b = i.rows(0, 1).unwrap().broadcast(0, 5).unwrap();
        assert_eq!((b.dims(), b.strides()), (&[5, 1, 4][..], &[0, 4, 1][..]));
        assert!(m.view(&[5, 5]).is_err());
        assert!(m.narrow(1, 2, 2).is_err());
        assert!(m.index(3, 0).is_err());
        assert!(t.view(&[24]).unwrap().narrow(0, 24, 0).unwrap().is_empty());
        assert!(n.view(&[4]).is_err(), "a strided view is not packed");
    }

    #[test]
    fn raw_tensors_bind_to_their_span() {
        let r = RawTensor::<f32>::new(DevPtr(256), &[2, 3], &[8, 1]).unwrap();
        assert_eq!(r.span(), 11);
        // SAFETY: the view is only inspected, never handed to an op.
        let t = unsafe { r.bind() };
        assert_eq!(t.len(), 11);
        assert!(t.narrow(1, 0, 3).is_ok());
        assert!(RawTensor::<f32>::new(DevPtr(2), &[1], &[1]).is_err());
        assert!(RawTensor::<f32>::new(DevPtr(0), &[1; 7], &[1; 7]).is_err());
        assert!(RawTensor::<f32>::new(DevPtr(0), &[usize::MAX, 3], &[usize::MAX, 1]).is_err());
    }
}
