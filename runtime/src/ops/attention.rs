//! Key/value caches and attention over them. A cache is a packed `[batch, heads, cap, 2·d]`
//! view: per (batch, head) row, `cap` frames of key ‖ value.

use dcc_kernels as k;
use dcc_kernels::Arg;

use super::{
    Ctx, Elem, GemmPath, OpError, Tensor, Work, dims, disjoint, int, matrix, operand, packed, ptr,
};

/// `(batch, heads, cap, d)` of a packed cache view.
fn cache(
    op: &'static str,
    view: &'static str,
    t: &Tensor<'_>,
) -> Result<(usize, usize, usize, usize), OpError> {
    packed(op, view, t)?;
    match t.dims() {
        &[b, h, cap, dd] if dd.is_multiple_of(2) => Ok((b, h, cap, dd / 2)),
        d => Err(OpError::shape(op, view, "[batch, heads, cap, 2·d]", d)),
    }
}

fn frames(op: &'static str, t0: usize, t: usize, cap: usize) -> Result<(), OpError> {
    if t0.checked_add(t).is_none_or(|e| e > cap) {
        return Err(OpError::arg(
            op,
            "t0",
            format!("frames {t0}..{t0}+{t} past the cache's {cap}"),
        ));
    }
    Ok(())
}

/// Launch shape of an attention kernel from its launch function (`sdpa_dims`, which may hold
/// every key frame in shared memory; `rel_pos_dims`, which stages the position rows), or why
/// there is none.
fn launch_dims(
    op: &'static str,
    dims: fn(usize, usize, usize, usize) -> Result<dcc_kernels::LaunchDims, k::KernelError>,
    (outer, tq, tk, d): (usize, usize, usize, usize),
) -> Result<dcc_kernels::LaunchDims, OpError> {
    dims(outer, tq, tk, d).map_err(|e| OpError::arg(op, "tk", e.to_string()))
}

/// The queries of an SDPA over `b` batch rows of `h` heads of width `d`: `q` and `out` packed
/// `[b, tq, h·d]`; returns `tq` (the checks every SDPA op makes of its queries and output).
pub(super) fn queries(
    op: &'static str,
    q: &Tensor<'_>,
    out: &Tensor<'_>,
    (b, h, d): (usize, usize, usize),
) -> Result<usize, OpError> {
    let tq = match q.dims() {
        &[qb, tq, w] if qb == b && w == h * d => tq,
        x => return Err(OpError::shape(op, "q", format!("[{b}, tq, {}]", h * d), x)),
    };
    packed(op, "q", q)?;
    dims(op, "out", out, q.dims())?;
    packed(op, "out", out)?;
    Ok(tq)
}

/// Writes `t` new key/value rows into frames `t0..t0 + t` of `cache` (`KV_PACK`, one thread per
/// element): `k`, `v` `[batch · t, ≥ heads · d]` with one leading dimension, head `h` at
/// columns `h·d..(h + 1)·d`.
pub fn kv_pack(
    cx: &Ctx<'_>,
    cache_: Tensor<'_>,
    t0: usize,
    k: Tensor<'_>,
    v: Tensor<'_>,
) -> Result<(), OpError> {
    let op = "kv_pack";
    let (b, h, cap, d) = cache(op, "cache", &cache_)?;
    let (rows, cols, ld) = matrix(op, "k", &k)?;
    let (_, _, ldv) = matrix(op, "v", &v)?;
    dims(op, "v", &v, k.dims())?;
    if ldv != ld || b == 0 || !rows.is_multiple_of(b) || cols < h * d {
        return Err(OpError::shape(
            op,
            "k",
            format!("[{b}·t, >= {}] with v's leading dimension {ldv}", h * d),
            k.dims(),
        ));
    }
    let t = rows / b;
    frames(op, t0, t, cap)?;
    disjoint(
        op,
        &[
            operand("cache", &cache_, true),
            operand("k", &k, false),
            operand("v", &v, false),
        ],
    )?;
    let args = [
        ptr(&cache_),
        int(cap),
        int(t0),
        ptr(&k),
        ptr(&v),
        int(ld),
        int(b),
        int(h),
        int(t),
        int(d),
    ];
    cx.work(Work::f32(0, 4 * b * h * t * d));
    // SAFETY: the kernel reads rows < batch·t, columns < heads·d of k and v at stride ld and
    // writes frames t0..t0+t (<= cap) of the packed cache: the checked views; the cache
    // overlaps neither input.
    unsafe { cx.launch_linear(&k::copy::KV_PACK, b * h * t * d, &args) }
}

/// The DiT's q/k LayerNorm per head over a fused `[batch·t, ≥ 3·heads·d]` q‖k‖v projection
/// (`QK_NORM_PACK`, one warp per (row, head) of q then of k): `qn` packed `[batch·t, heads·d]`,
/// `LN(k) ‖ v` into frames `t0..t0 + t` of `cache`; `(gq, bq)`, `(gk, bk)` the `[d]` affine
/// parameters, one `eps`.
#[allow(clippy::too_many_arguments)]
pub fn qk_norm_pack(
    cx: &Ctx<'_>,
    qn: Tensor<'_>,
    cache_: Tensor<'_>,
    t0: usize,
    qkv: Tensor<'_>,
    (gq, bq): (Tensor<'_>, Tensor<'_>),
    (gk, bk): (Tensor<'_>, Tensor<'_>),
    eps: f32,
) -> Result<(), OpError> {
    let op = "qk_norm_pack";
    let (b, h, cap, d) = cache(op, "cache", &cache_)?;
    let (args, rows) = qk_pack_args(
        op,
        (b, h, cap, d),
        qn,
        cache_,
        t0,
        qkv,
        (gq, bq),
        (gk, bk),
        eps,
    )?;
    // q and k normalized (≈ 8 flops per element), v copied: reads 3 and writes 3 of rows·h·d
    cx.work(Work::f32(16 * rows * h * d, 6 * rows * h * d));
    // SAFETY: the kernel reads batch·t rows of 3·heads·d columns of qkv at stride ld and the
    // four [d] vectors, writes qn[0..batch·t·heads·d] and frames t0..t0+t (<= cap) of the
    // packed cache: the checked views; qn and the cache overlap no other operand.
    unsafe { cx.launch_linear(&k::norm::QK_PACK, k::norm::row_threads(2 * rows * h), &args) }
}

/// Unmasked scaled dot-product attention of `q` over frames `0..tk` of `kv`: `q`, `out` packed
/// `[batch, tq, heads·d]`, `d <= 128`, on the context's GEMM path as [`super::linear`] is:
/// `attention.sdpa_tf32x3` (both products as 3xTF32 on tensor cores, launched with
/// `attention::tf32::dims`) on [`GemmPath::InvariantTf32x3`], `attention.sdpa_f16_kv32` (the
/// half path's f16 tensor-core SDPA over the cache's values rounded to binary16, launched with
/// `attention::f16::dims`: the bits of [`super::attention_f16`] over a binary16 cache of the
/// same values) on [`GemmPath::Half`], `attention.sdpa` (fp32, launched with `sdpa_dims`) on the
/// other paths. All are batch-invariant: a (batch, head)'s bits never depend on the batch rows
/// sharing the launch.
pub fn attention(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    q: Tensor<'_>,
    kv: Tensor<'_>,
    tk: usize,
    scale: f32,
) -> Result<(), OpError> {
    let op = "attention";
    let (b, h, cap, d) = cache(op, "kv", &kv)?;
    let tq = queries(op, &q, &out, (b, h, d))?;
    if tk == 0 || tk > cap {
        return Err(OpError::arg(op, "tk", format!("{tk} outside 1..={cap}")));
    }
    disjoint(
        op,
        &[
            operand("out", &out, true),
            operand("q", &q, false),
            operand("kv", &kv, false),
        ],
    )?;
    let mut args = vec![
        ptr(&out),
        ptr(&q),
        ptr(&kv),
        int(b),
        int(h),
        int(tq),
        int(tk),
        int(d),
        int(cap),
        Arg::F32(scale),
    ];
    let (kernel, dims) = match cx.gemm_path() {
        GemmPath::InvariantTf32x3 => {
            let dims = k::attention::tf32::dims(b * h, tq, tk, d)
                .map_err(|e| OpError::arg(op, "tk", e.to_string()))?;
            (&k::attention::tf32::SDPA_TF32X3, dims)
        }
        GemmPath::Half => {
            let (dims, tiling) = k::attention::f16::dims(b * h, tq, tk, d)
                .map_err(|e| OpError::arg(op, "tk", e.to_string()))?;
            args.push(int(tiling.rows()));
            (&k::attention::f16::SDPA_F16_KV32, dims)
        }
        _ => (
            &k::attention::SDPA,
            launch_dims(op, k::attention::sdpa_dims, (b * h, tq, tk, d))?,
        ),
    };
    // scores and weighted values: 2 · 2·d flops per (query, key); q, out and tk frames of k ‖ v
    cx.work(Work::f32(
        4 * b * h * tq * tk * d,
        2 * b * tq * h * d + 2 * b * h * tk * d,
    ));
    // SAFETY: the kernel reads q[0..batch·tq·heads·d] and frames < tk <= cap of the packed
    // cache and writes out (q's extent): the checked views; out overlaps neither input; `dims`
    // (and the half kernel's rows argument) come from the kernel's own launch function
    // (`sdpa_dims`, `tf32::dims`, `f16::dims`), which its shared-memory layout assumes.
    unsafe { cx.launch(kernel, dims, &args) }
}

/// The conformer's relative-position attention over `batch` independent entries (sessions) at
/// once (`attention.rel_pos`, launched with `rel_pos_dims` over `batch · heads`: the position
/// rows each key tile pairs with staged in shared memory): `kv` packed
/// `[batch, heads, cap, 2·d]` (or `[heads, cap, 2·d]`, batch 1), `q`, `out` packed `[batch·tq,
/// heads·d]` (entry `b`'s queries rows `b·tq..(b + 1)·tq`), `u`, `v` packed `[heads, d]` (the
/// position biases), `pos` packed `[2·tk − 1, heads·d]` (the projected relative positions, one
/// table for every entry: they share `tk`), `0 < tq <= tk <= cap`. Batch-invariant: each
/// (entry, head, query row) is one warp's, its products and sums in the same order whatever
/// entries share the launch.
#[allow(clippy::too_many_arguments)]
pub fn rel_pos_attention(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    q: Tensor<'_>,
    u: Tensor<'_>,
    v: Tensor<'_>,
    kv: Tensor<'_>,
    pos: Tensor<'_>,
    tk: usize,
) -> Result<(), OpError> {
    let op = "rel_pos_attention";
    packed(op, "kv", &kv)?;
    let (b, h, cap, d) = match kv.dims() {
        &[h, cap, dd] if dd.is_multiple_of(2) => (1, h, cap, dd / 2),
        &[b, h, cap, dd] if dd.is_multiple_of(2) => (b, h, cap, dd / 2),
        x => return Err(OpError::shape(op, "kv", "[batch, heads, cap, 2·d]", x)),
    };
    let tq = match q.dims() {
        &[rows, w] if w == h * d && b > 0 && rows.is_multiple_of(b) => rows / b,
        x => {
            return Err(OpError::shape(op, "q", format!("[{b}·tq, {}]", h * d), x));
        }
    };
    if tq == 0 || tq > tk || tk > cap {
        return Err(OpError::arg(
            op,
            "tk",
            format!("need 0 < tq ({tq}) <= tk ({tk}) <= cap ({cap})"),
        ));
    }
    for (view, t, want) in [
        ("q", &q, [b * tq, h * d]),
        ("out", &out, [b * tq, h * d]),
        ("u", &u, [h, d]),
        ("v", &v, [h, d]),
        ("pos", &pos, [2 * tk - 1, h * d]),
    ] {
        dims(op, view, t, &want)?;
        packed(op, view, t)?;
    }
    disjoint(
        op,
        &[
            operand("out", &out, true),
            operand("q", &q, false),
            operand("u", &u, false),
            operand("v", &v, false),
            operand("kv", &kv, false),
            operand("pos", &pos, false),
        ],
    )?;
    let dims = launch_dims(op, k::attention::rel_pos_dims, (b * h, tq, tk, d))?;
    let args = [
        ptr(&out),
        ptr(&q),
        ptr(&u),
        ptr(&v),
        ptr(&kv),
        ptr(&pos),
        int(b),
        int(h),
        int(tq),
        int(tk),
        int(d),
        int(cap),
    ];
    // content and position scores (2 · 2·d) and weighted values (2·d) per (query, key)
    cx.work(Work::f32(
        6 * b * h * tq * tk * d,
        2 * b * tq * h * d + 2 * b * h * tk * d + (2 * tk - 1) * h * d,
    ));
    // SAFETY: the kernel reads q, u, v, pos and frames < tk <= cap of the packed cache's
    // batch·heads rows, and writes out (batch·tq rows): the checked packed views; out overlaps
    // no input; `dims` come from the kernel's own launch function (`rel_pos_dims`), which its
    // shared-memory layout assumes.
    unsafe { cx.launch(&k::attention::REL_POS, dims, &args) }
}

/// The checks and launch arguments `norm.qk_pack` and `half.qk_pack` share (the same argument
/// list; only the cache's element type differs): `(b, h, cap, d)` of the packed cache (its own
/// view check), the fused `[b·t, >= 3·h·d]` projection, `qn` packed `[b·t, h·d]`, the four
/// packed `[d]` affine parameters, frames `t0..t0 + t` within `cap`, written views disjoint from
/// every other. Returns the arguments and the projection's rows `b·t`.
#[allow(clippy::too_many_arguments)]
pub(super) fn qk_pack_args<K: Elem>(
    op: &'static str,
    (b, h, cap, d): (usize, usize, usize, usize),
    qn: Tensor<'_>,
    cache: Tensor<'_, K>,
    t0: usize,
    qkv: Tensor<'_>,
    (gq, bq): (Tensor<'_>, Tensor<'_>),
    (gk, bk): (Tensor<'_>, Tensor<'_>),
    eps: f32,
) -> Result<([Arg; 15], usize), OpError> {
    let (rows, cols, ld) = matrix(op, "qkv", &qkv)?;
    if b == 0 || !rows.is_multiple_of(b) || cols < 3 * h * d {
        return Err(OpError::shape(
            op,
            "qkv",
            format!("[{b}·t, >= {}]", 3 * h * d),
            qkv.dims(),
        ));
    }
    let t = rows / b;
    dims(op, "qn", &qn, &[rows, h * d])?;
    packed(op, "qn", &qn)?;
    for (view, p) in [("gq", &gq), ("bq", &bq), ("gk", &gk), ("bk", &bk)] {
        dims(op, view, p, &[d])?;
        packed(op, view, p)?;
    }
    frames(op, t0, t, cap)?;
    disjoint(
        op,
        &[
            operand("qn", &qn, true),
            operand("cache", &cache, true),
            operand("qkv", &qkv, false),
            operand("gq", &gq, false),
            operand("bq", &bq, false),
            operand("gk", &gk, false),
            operand("bk", &bk, false),
        ],
    )?;
    let args = [
        ptr(&qn),
        ptr(&cache),
        int(cap),
        int(t0),
        ptr(&qkv),
        int(ld),
        ptr(&gq),
        ptr(&bq),
        ptr(&gk),
        ptr(&bk),
        int(b),
        int(h),
        int(t),
        int(d),
        Arg::F32(eps),
    ];
    Ok((args, rows))
}
