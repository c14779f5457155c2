//! Copies, packs and gathers (`kernels/cuda/copy.cu`): strided row blocks (concat into an offset,
//! bias broadcast, nearest upsampling, im2col with overlapping rows), transposes, key/value cache
//! packing, causal-conv im2col and batched 2-D copies of floats ([`BATCHED`]) or binary16 values
//! ([`BATCHED_F16`]: the half point's estimator cache, one launch per session over every layer as
//! the f32 cache's). Each kernel's host twin's body is the slice function below (`copy.block`'s
//! is the loop in its twin).
//! Launch: one thread per destination element, grid-strided; the batched copies
//! [`batched_dims`], im2col [`im2col_dims`] (one grid row per destination row: its index
//! arithmetic once per row).

#![allow(clippy::too_many_arguments)]

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::twin::{invalid, kdef, rd, rd16, span, wr, wr16};

use Param::{I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "copy",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/copy.cu")
    ),
};

kdef!(
    BLOCK,
    "copy",
    "block",
    [Ptr, I64, Ptr, I64, I64, I64, I64],
    host_block,
    "`(dst, ldd, src, lds, rows, cols, rep)`: `dst[r·ldd + j] = src[(r / rep)·lds + j]` (concat into an offset, bias broadcast with `lds = 0`, nearest upsampling with `rep`, im2col with overlapping source rows)."
);
kdef!(
    TRANSPOSE,
    "copy",
    "transpose",
    [Ptr, I64, I64, Ptr, I64, I64, I64, I64, I64],
    host_transpose,
    "`(out, out_b, ldo, x, x_b, ldx, batch, rows, cols)`: `out[b·out_b + c·ldo + r] = x[b·x_b + r·ldx + c]` ([`transpose`] per batch entry)."
);
kdef!(
    KV_PACK,
    "copy",
    "kv_pack",
    [Ptr, I64, I64, Ptr, Ptr, I64, I64, I64, I64, I64],
    host_kv_pack,
    "`(cache, cap, t0, k, v, ld, batch, heads, t, d)`: writes `t` new key/value rows (`[batch·t, ld]`, head `h` at column `h·d`) into a `[batch, heads, cap, 2d]` cache at frames `t0..t0+t` ([`kv_pack`])."
);
kdef!(
    IM2COL,
    "copy",
    "im2col",
    [Ptr, Ptr, I64, Ptr, I64, I64, I64, I64, I64],
    host_im2col,
    "`(col, src, src_b, ctx, ctx_b, batch, frames, k, dim)`: im2col rows of a causal conv of kernel `k` over `ctx_b ‖ src_b` per batch (`k − 1` context rows; [`conv_im2col`]); launch [`im2col_dims`] (any geometry covers every element)."
);
kdef!(
    BATCHED,
    "copy",
    "batched",
    [Ptr, I64, I64, Ptr, I64, I64, I64, I64, I64],
    host_batched,
    "`(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols)`: `dst[b·dst_b + r·ldd + j] = src[b·src_b + r·lds + j]` ([`copy_batched`])."
);

kdef!(
    BATCHED_F16,
    "copy",
    "batched_f16",
    [Ptr, I64, I64, Ptr, I64, I64, I64, I64, I64],
    host_batched_f16,
    "`(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols)`: [`BATCHED`] over binary16 elements (counts and strides in elements; 2-byte aligned addresses)."
);

pub static KERNELS: &[&crate::KernelDef] = &[
    &BLOCK,
    &TRANSPOSE,
    &KV_PACK,
    &IM2COL,
    &BATCHED,
    &BATCHED_F16,
];

/// Launch geometry of `copy.batched` (`elem_bytes` 4) and `copy.batched_f16` (2) over `[batch,
/// rows, cols]`: one grid row per (batch, row) pair (at most 65,535; the kernel strides over the
/// rest), and across x enough blocks of `threads` for the row's columns moved 16 bytes at a time
/// (the kernel strides over the rest, and moves one element at a time where the rows are not
/// 16-byte aligned). The kernel covers every element once at any geometry, so the geometry
/// changes only its speed.
pub fn batched_dims(
    batch: usize,
    rows: usize,
    cols: usize,
    elem_bytes: usize,
    threads: u32,
) -> LaunchDims {
    let per_move = (16 / elem_bytes.clamp(1, 16)).max(1);
    let pairs = batch.saturating_mul(rows).clamp(1, 65_535);
    let across = cols
        .div_ceil(per_move)
        .div_ceil(threads as usize)
        .clamp(1, 65_535);
    LaunchDims {
        grid: (across as u32, pairs as u32, 1),
        block: (threads, 1, 1),
        shared_bytes: 0,
    }
}

/// Launch geometry of `copy.im2col` over `batch·frames·k` destination rows of `dim` columns: one
/// grid row per destination row (at most 65,535; the kernel strides over the rest), and across x
/// enough blocks of `threads` for a row's columns moved four at a time. The kernel covers every
/// element once at any geometry, so the geometry changes only its speed.
pub fn im2col_dims(batch: usize, frames: usize, k: usize, dim: usize, threads: u32) -> LaunchDims {
    batched_dims(batch.saturating_mul(frames), k, dim, 4, threads)
}

/// `out[c, r] = x[r, c]` for an `rows × cols` input (`x` with leading dimension `ldx`,
/// `out` with leading dimension `ldo`).
pub fn transpose(rows: usize, cols: usize, x: &[f32], ldx: usize, out: &mut [f32], ldo: usize) {
    for r in 0..rows {
        for c in 0..cols {
            out[c * ldo + r] = x[r * ldx + c];
        }
    }
}

/// Writes `t` new key/value rows into a `[batch, heads, cap, 2d]` cache at frames `t0..t0 + t`:
/// `cache[b, h, t0 + i, 0..d] = k[(b·t + i)·ld + h·d ..]`, `cache[b, h, t0 + i, d..2d] = v[…]`.
pub fn kv_pack(
    cache: &mut [f32],
    cap: usize,
    t0: usize,
    k: &[f32],
    v: &[f32],
    ld: usize,
    batch: usize,
    heads: usize,
    t: usize,
    d: usize,
) {
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..t {
                let dst = ((b * heads + h) * cap + t0 + i) * 2 * d;
                let src = (b * t + i) * ld + h * d;
                cache[dst..dst + d].copy_from_slice(&k[src..src + d]);
                cache[dst + d..dst + 2 * d].copy_from_slice(&v[src..src + d]);
            }
        }
    }
}

/// im2col of a causal convolution of kernel `k` over `batch` sequences with a `k − 1`-row
/// context: with `cat_b = ctx_b ‖ src_b` (`ctx_b` at `ctx[b·ctx_b..]`, `k − 1` rows; `src_b` at
/// `src[b·src_b..]`, `frames` rows; rows of `dim`), writes
/// `col[((b·frames + f)·k + s)·dim + c] = cat_b[f + s, c]`.
/// Launch: [`im2col_dims`] (one grid row per row of `col`).
pub fn conv_im2col(
    col: &mut [f32],
    src: &[f32],
    src_b: usize,
    ctx: &[f32],
    ctx_b: usize,
    batch: usize,
    frames: usize,
    k: usize,
    dim: usize,
) {
    let c0 = k - 1;
    for b in 0..batch {
        for f in 0..frames {
            for s in 0..k {
                let r = f + s;
                let dst = ((b * frames + f) * k + s) * dim;
                let from = if r < c0 {
                    &ctx[b * ctx_b + r * dim..b * ctx_b + (r + 1) * dim]
                } else {
                    let o = b * src_b + (r - c0) * dim;
                    &src[o..o + dim]
                };
                col[dst..dst + dim].copy_from_slice(from);
            }
        }
    }
}

/// Batched 2-D copy of any element type (the twin of [`BATCHED`] over floats and of
/// [`BATCHED_F16`] over binary16 values): `dst[b·dst_b + r·ldd + j] = src[b·src_b + r·lds + j]`.
/// Launch: [`batched_dims`].
pub fn copy_batched<T: Copy>(
    dst: &mut [T],
    dst_b: usize,
    ldd: usize,
    src: &[T],
    src_b: usize,
    lds: usize,
    batch: usize,
    rows: usize,
    cols: usize,
) {
    if cols == 0 {
        return;
    }
    for b in 0..batch {
        for r in 0..rows {
            let (d, s) = (b * dst_b + r * ldd, b * src_b + r * lds);
            dst[d..d + cols].copy_from_slice(&src[s..s + cols]);
        }
    }
}

unsafe fn host_block(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (ldd, lds, rows, cols, rep) = (
        a.usize(1)?,
        a.usize(3)?,
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
    );
    if rep == 0 {
        return Err(invalid("copy.block: rep = 0"));
    }
    let src_rows = if rows == 0 { 0 } else { (rows - 1) / rep + 1 };
    // SAFETY: HostFn contract; dst and src do not overlap.
    let (dst, src) = unsafe {
        (
            wr(a.ptr(0)?, span(rows, cols, ldd))?,
            rd(a.ptr(2)?, span(src_rows, cols, lds))?,
        )
    };
    for r in 0..rows {
        let s = (r / rep) * lds;
        dst[r * ldd..r * ldd + cols].copy_from_slice(&src[s..s + cols]);
    }
    Ok(())
}

unsafe fn host_transpose(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (out_b, ldo, x_b, ldx) = (a.usize(1)?, a.usize(2)?, a.usize(4)?, a.usize(5)?);
    let (batch, rows, cols) = (a.usize(6)?, a.usize(7)?, a.usize(8)?);
    if batch == 0 || rows == 0 || cols == 0 {
        return Ok(());
    }
    // SAFETY: HostFn contract.
    let (out, x) = unsafe {
        (
            wr(a.ptr(0)?, (batch - 1) * out_b + span(cols, rows, ldo))?,
            rd(a.ptr(3)?, (batch - 1) * x_b + span(rows, cols, ldx))?,
        )
    };
    for b in 0..batch {
        transpose(rows, cols, &x[b * x_b..], ldx, &mut out[b * out_b..], ldo);
    }
    Ok(())
}

unsafe fn host_kv_pack(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (cap, t0, ld) = (a.usize(1)?, a.usize(2)?, a.usize(5)?);
    let (batch, heads, t, d) = (a.usize(6)?, a.usize(7)?, a.usize(8)?, a.usize(9)?);
    if t0 + t > cap || heads * d > ld {
        return Err(invalid(
            "copy.kv_pack: frames past the cache capacity or head columns past ld",
        ));
    }
    // SAFETY: HostFn contract.
    let (cache, k, v) = unsafe {
        (
            wr(a.ptr(0)?, batch * heads * cap * 2 * d)?,
            rd(a.ptr(3)?, span(batch * t, heads * d, ld))?,
            rd(a.ptr(4)?, span(batch * t, heads * d, ld))?,
        )
    };
    kv_pack(cache, cap, t0, k, v, ld, batch, heads, t, d);
    Ok(())
}

unsafe fn host_im2col(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (src_b, ctx_b) = (a.usize(2)?, a.usize(4)?);
    let (batch, frames, k, dim) = (a.usize(5)?, a.usize(6)?, a.usize(7)?, a.usize(8)?);
    if k == 0 {
        return Err(invalid("copy.im2col: k = 0"));
    }
    let c0 = k - 1;
    // SAFETY: HostFn contract.
    let (col, src, ctx) = unsafe {
        (
            wr(a.ptr(0)?, batch * frames * k * dim)?,
            rd(a.ptr(1)?, span(batch, frames * dim, src_b))?,
            rd(a.ptr(3)?, span(batch, c0 * dim, ctx_b))?,
        )
    };
    conv_im2col(col, src, src_b, ctx, ctx_b, batch, frames, k, dim);
    Ok(())
}

/// `(dst_b, ldd, src_b, lds, batch, rows, cols)` of a batched copy's arguments and the elements
/// each side spans.
struct Batched {
    shape: [usize; 7],
    dst_span: usize,
    src_span: usize,
}

fn batched_args(a: &[Arg]) -> Result<Batched, KernelError> {
    let (dst_b, ldd, src_b, lds) = (a.usize(1)?, a.usize(2)?, a.usize(4)?, a.usize(5)?);
    let (batch, rows, cols) = (a.usize(6)?, a.usize(7)?, a.usize(8)?);
    let ext = |bs: usize, ld: usize| {
        if batch == 0 || rows == 0 || cols == 0 {
            0
        } else {
            (batch - 1) * bs + span(rows, cols, ld)
        }
    };
    Ok(Batched {
        shape: [dst_b, ldd, src_b, lds, batch, rows, cols],
        dst_span: ext(dst_b, ldd),
        src_span: ext(src_b, lds),
    })
}

unsafe fn host_batched(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let c = batched_args(a)?;
    let [dst_b, ldd, src_b, lds, batch, rows, cols] = c.shape;
    // SAFETY: HostFn contract; dst and src do not overlap.
    let (dst, src) = unsafe { (wr(a.ptr(0)?, c.dst_span)?, rd(a.ptr(3)?, c.src_span)?) };
    copy_batched(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols);
    Ok(())
}

unsafe fn host_batched_f16(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let c = batched_args(a)?;
    let [dst_b, ldd, src_b, lds, batch, rows, cols] = c.shape;
    // SAFETY: HostFn contract; dst and src do not overlap.
    let (dst, src) = unsafe { (wr16(a.ptr(0)?, c.dst_span)?, rd16(a.ptr(3)?, c.src_span)?) };
    copy_batched(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::DevPtr;

    #[test]
    fn transposes() {
        let mut t = [0.0; 6];
        transpose(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3, &mut t, 2);
        assert_eq!(t, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }

    #[test]
    fn block_twin_broadcasts_and_repeats() {
        let src = [1.0f32, 2.0, 3.0, 4.0];
        let mut dst = [0.0f32; 8];
        let p = |v: &[f32]| Arg::Ptr(DevPtr(v.as_ptr() as u64));
        let args = [
            Arg::Ptr(DevPtr(dst.as_mut_ptr() as u64)),
            Arg::I64(2),
            p(&src),
            Arg::I64(2),
            Arg::I64(4),
            Arg::I64(2),
            Arg::I64(2),
        ];
        // SAFETY: buffers sized for the launch.
        unsafe { BLOCK.run_host(&LaunchDims::linear(8, 128), &args).unwrap() };
        assert_eq!(dst, [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]);
    }

    /// `copy.batched_f16` moves exactly the `[batch, rows, cols]` block of binary16 values, bit for
    /// bit (NaN payloads included), at any strides, and refuses an address that is no binary16
    /// element's.
    #[test]
    fn batched_f16_twin_moves_the_block_only() {
        use half::f16;
        let (batch, rows, cols, ldd, lds, dst_b, src_b) = (3, 4, 9, 11, 13, 50, 60);
        let src: Vec<f16> = (0..batch * src_b)
            .map(|i| f16::from_bits((i as u16).wrapping_mul(40_503) ^ 0x7e01))
            .collect();
        let fill = f16::from_bits(0xbeef);
        let mut dst = vec![fill; batch * dst_b];
        let p16 = |v: &[f16]| Arg::Ptr(DevPtr(v.as_ptr() as u64));
        let args = |dst: &mut [f16]| {
            [
                Arg::Ptr(DevPtr(dst.as_mut_ptr() as u64)),
                Arg::I64(dst_b as i64),
                Arg::I64(ldd as i64),
                p16(&src),
                Arg::I64(src_b as i64),
                Arg::I64(lds as i64),
                Arg::I64(batch as i64),
                Arg::I64(rows as i64),
                Arg::I64(cols as i64),
            ]
        };
        let dims = batched_dims(batch, rows, cols, 2, 128);
        // SAFETY: dst and src hold batch·stride ≥ (batch − 1)·stride + (rows − 1)·ld + cols
        // elements each, disjoint.
        unsafe { BATCHED_F16.run_host(&dims, &args(&mut dst)).unwrap() };
        for b in 0..batch {
            for i in 0..dst_b {
                let (r, j) = (i / ldd, i % ldd);
                let want = if r < rows && j < cols {
                    src[b * src_b + r * lds + j]
                } else {
                    fill
                };
                assert_eq!(dst[b * dst_b + i].to_bits(), want.to_bits(), "({b}, {i})");
            }
        }
        // an odd byte address is no binary16 element
        let mut odd = args(&mut dst);
        odd[0] = Arg::Ptr(DevPtr(dst.as_ptr() as u64 + 1));
        // SAFETY: refused before any access.
        assert!(unsafe { BATCHED_F16.run_host(&dims, &odd) }.is_err());
    }

    /// The geometry moves 16 bytes a thread: four floats, eight binary16 values.
    #[test]
    fn batched_dims_cover_a_row_in_16_byte_moves() {
        assert_eq!(batched_dims(2, 3, 1024, 4, 128).grid, (2, 6, 1));
        assert_eq!(batched_dims(2, 3, 1024, 2, 128).grid, (1, 6, 1));
        assert_eq!(batched_dims(16, 16, 402 * 128, 2, 128).grid, (51, 256, 1));
        assert_eq!(batched_dims(0, 0, 0, 2, 128).grid, (1, 1, 1));
    }
}
