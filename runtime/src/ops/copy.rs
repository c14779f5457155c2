//! Data movement: block copies (concatenation, broadcast, im2col over overlapping windows,
//! nearest upsampling), batched copies, transposes, memsets and the embedding gather.

use dcc_kernels::{self as k, KernelDef};

use super::{Ctx, Elem, OpError, Tensor, Work, dims, disjoint, int, matrix, operand, packed, ptr};

/// Element types [`copy_batched`] moves: `f32` (`COPY_BATCHED`) and binary16 (`COPY_BATCHED_F16`:
/// the half point's estimator cache).
pub trait CopyElem: Elem {
    /// The batched copy over this element type.
    const BATCHED: &'static KernelDef;
}

impl CopyElem for f32 {
    const BATCHED: &'static KernelDef = &k::copy::BATCHED;
}

impl CopyElem for half::f16 {
    const BATCHED: &'static KernelDef = &k::copy::BATCHED_F16;
}

/// `dst = src` over `[rows, cols]` views with unit column stride (`COPY_BLOCK`, one thread per
/// element). `src` may have row stride 0 (one row broadcast) or overlapping rows
/// ([`Tensor::windows`]: im2col). Nothing is queued for an empty view.
pub fn copy(cx: &Ctx<'_>, dst: Tensor<'_>, src: Tensor<'_>) -> Result<(), OpError> {
    block(cx, "copy", dst, src, 1)
}

/// Nearest upsampling along rows: `dst[r] = src[r / rep]`, `dst` `[rows · rep, cols]`, `src`
/// `[rows, cols]` (`COPY_BLOCK` with `rep`).
pub fn repeat_rows(
    cx: &Ctx<'_>,
    dst: Tensor<'_>,
    src: Tensor<'_>,
    rep: usize,
) -> Result<(), OpError> {
    block(cx, "repeat_rows", dst, src, rep)
}

fn block(
    cx: &Ctx<'_>,
    op: &'static str,
    dst: Tensor<'_>,
    src: Tensor<'_>,
    rep: usize,
) -> Result<(), OpError> {
    let (rows, cols, ldd) = matrix(op, "dst", &dst)?;
    let (srows, scols, lds) = matrix(op, "src", &src)?;
    if rep == 0 {
        return Err(OpError::arg(op, "rep", "0"));
    }
    if scols != cols || srows.checked_mul(rep) != Some(rows) {
        return Err(OpError::shape(
            op,
            "src",
            format!("[{rows} / {rep}, {cols}]"),
            src.dims(),
        ));
    }
    disjoint(
        op,
        &[operand("dst", &dst, true), operand("src", &src, false)],
    )?;
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let args = [
        ptr(&dst),
        int(ldd),
        ptr(&src),
        int(lds),
        int(rows),
        int(cols),
        int(rep),
    ];
    cx.work(Work::f32(0, rows * cols + srows * cols));
    // SAFETY: the kernel writes `dst[r·ldd + j]` and reads `src[(r / rep)·lds + j]` for r <
    // rows, j < cols: exactly the two checked views (rows = srows · rep), which do not overlap.
    unsafe { cx.launch_linear(&k::copy::BLOCK, rows * cols, &args) }
}

/// `dst = src` over `[batch, rows, cols]` views of `f32` or binary16 elements with unit column
/// stride (`COPY_BATCHED` / `COPY_BATCHED_F16`, one grid row per copied row,
/// [`k::copy::batched_dims`]); either batch stride may be 0 on the source (a broadcast). A copy:
/// the same bits land whatever the geometry.
pub fn copy_batched<E: CopyElem>(
    cx: &Ctx<'_>,
    dst: Tensor<'_, E>,
    src: Tensor<'_, E>,
) -> Result<(), OpError> {
    let op = "copy_batched";
    let three = |view, t: &Tensor<'_, E>| match (t.dims(), t.strides()) {
        (&[b, r, c], &[bs, ld, 1]) => Ok(([b, r, c], bs, ld)),
        (&[_, _, _], s) => Err(OpError::layout(op, view, "[batch stride, ld, 1]", s)),
        (d, _) => Err(OpError::shape(op, view, "[batch, rows, cols]", d)),
    };
    let (d, dst_b, ldd) = three("dst", &dst)?;
    let (s, src_b, lds) = three("src", &src)?;
    if s != d {
        return Err(OpError::shape(op, "src", format!("{d:?}"), src.dims()));
    }
    disjoint(
        op,
        &[operand("dst", &dst, true), operand("src", &src, false)],
    )?;
    let [batch, rows, cols] = d;
    let args = [
        ptr(&dst),
        int(dst_b),
        int(ldd),
        ptr(&src),
        int(src_b),
        int(lds),
        int(batch),
        int(rows),
        int(cols),
    ];
    let size = std::mem::size_of::<E>();
    // bytes moved, counted in floats
    cx.work(Work::f32(0, (2 * batch * rows * cols * size).div_ceil(4)));
    let dims = k::copy::batched_dims(batch, rows, cols, size, super::THREADS);
    // SAFETY: the kernel touches `dst[b·dst_b + r·ldd + j]` and `src[b·src_b + r·lds + j]` for
    // b < batch, r < rows, j < cols (at any geometry), elements of `E`'s size (`E::BATCHED` is
    // the kernel over `E`): the two checked views, which do not overlap.
    unsafe { cx.launch(E::BATCHED, dims, &args) }
}

/// `out[c, r] = x[r, c]`: `out` `[cols, rows]`, `x` `[rows, cols]`, unit column strides; or a
/// batch of them in one launch, `out[b, c, r] = x[b, r, c]` over `[batch, cols, rows]` and
/// `[batch, rows, cols]` views with unit column strides and any batch strides (`TRANSPOSE`, one
/// thread per element).
pub fn transpose(cx: &Ctx<'_>, out: Tensor<'_>, x: Tensor<'_>) -> Result<(), OpError> {
    let op = "transpose";
    let three = |view, t: &Tensor<'_>| match (t.dims(), t.strides()) {
        (&[r, c], &[ld, 1]) => Ok((1, r, c, 0, ld)),
        (&[b, r, c], &[bs, ld, 1]) => Ok((b, r, c, bs, ld)),
        (&[_, _] | &[_, _, _], s) => Err(OpError::layout(op, view, "[.., ld, 1]", s)),
        (d, _) => Err(OpError::shape(op, view, "[batch?, rows, cols]", d)),
    };
    let (batch, rows, cols, x_b, ldx) = three("x", &x)?;
    let (obatch, orows, ocols, out_b, ldo) = three("out", &out)?;
    if out.rank() != x.rank() || (obatch, orows, ocols) != (batch, cols, rows) {
        let mut want = x.dims().to_vec();
        let r = want.len();
        want.swap(r - 2, r - 1);
        return Err(OpError::shape(op, "out", format!("{want:?}"), out.dims()));
    }
    disjoint(op, &[operand("out", &out, true), operand("x", &x, false)])?;
    let args = [
        ptr(&out),
        int(out_b),
        int(ldo),
        ptr(&x),
        int(x_b),
        int(ldx),
        int(batch),
        int(rows),
        int(cols),
    ];
    let n = batch * rows * cols;
    cx.work(Work::f32(0, 2 * n));
    // SAFETY: the kernel writes `out[b·out_b + c·ldo + r]` and reads `x[b·x_b + r·ldx + c]` for
    // b < batch, r < rows, c < cols: the two checked views, which do not overlap.
    unsafe { cx.launch_linear(&k::copy::TRANSPOSE, n, &args) }
}

/// Sets every element of a packed view to the 32-bit pattern `value`
/// ([`crate::Backend::memset_d32`], category `memset`).
pub fn memset(cx: &Ctx<'_>, t: Tensor<'_>, value: u32) -> Result<(), OpError> {
    let op = "memset";
    packed(op, "tensor", &t)?;
    cx.work(Work::f32(0, t.elems()));
    cx.mark(op, op)?;
    cx.be
        .memset_d32(t.ptr(), value, t.elems())
        .map_err(|error| OpError::Backend { op, error })
}

/// `out[t, :] = table[ids[t], :]` (`EMBEDDING`, one thread per element): `out` `[n, dim]`,
/// `ids` `[n]`, `table` `[vocab, dim]`, all packed. An id at or past `vocab` gives a zero row
/// (validate ids first).
pub fn embedding(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    ids: Tensor<'_, u32>,
    table: Tensor<'_>,
) -> Result<(), OpError> {
    let op = "embedding";
    let (vocab, dim) = match table.dims() {
        &[v, d] => (v, d),
        d => return Err(OpError::shape(op, "table", "[vocab, dim]", d)),
    };
    let n = match ids.dims() {
        &[n] => n,
        d => return Err(OpError::shape(op, "ids", "[n]", d)),
    };
    dims(op, "out", &out, &[n, dim])?;
    packed(op, "out", &out)?;
    packed(op, "ids", &ids)?;
    packed(op, "table", &table)?;
    disjoint(
        op,
        &[
            operand("out", &out, true),
            operand("ids", &ids, false),
            operand("table", &table, false),
        ],
    )?;
    let args = [
        ptr(&out),
        ptr(&ids),
        ptr(&table),
        int(n),
        int(dim),
        int(vocab),
    ];
    cx.work(Work::f32(0, 2 * n * dim + n));
    // SAFETY: the kernel reads ids[0..n] and rows `ids[t] < vocab` of the table, and writes
    // out[0..n·dim]: the checked packed views; out overlaps neither input.
    unsafe { cx.launch_linear(&k::embed::GATHER, n * dim, &args) }
}
