//! The estimator's key/value cache stored as IEEE binary16 (the contract's `half` operating point:
//! `carry` and `solver_workspace` in f16; `GemmPath::Half`). One function per kernel of
//! `dcc_kernels::half_kv`: the q/k LayerNorms packing the new frames into a binary16 cache
//! ([`qk_pack_f16`]) and SDPA over one ([`attention_f16`]: the half path's tensor-core SDPA).
//! Each computes what the half path computes over an f32 cache holding the same values (the fp32
//! op plus `round_f16`; [`super::attention`] on `GemmPath::Half`), so a flow storing its cache in
//! f16 gets the bits of one storing the rounded values in f32. The cache's copies are
//! [`super::copy_batched`] over binary16 views.

use dcc_kernels as k;
use dcc_kernels::Arg;
use half::f16;

use super::{Ctx, OpError, Tensor, Work, disjoint, int, operand, packed, ptr};

/// `(batch, heads, cap, d)` of a packed `[batch, heads, cap, 2·d]` binary16 cache view.
fn cache16(
    op: &'static str,
    view: &'static str,
    t: &Tensor<'_, f16>,
) -> Result<(usize, usize, usize, usize), OpError> {
    packed(op, view, t)?;
    match t.dims() {
        &[b, h, cap, dd] if dd.is_multiple_of(2) => Ok((b, h, cap, dd / 2)),
        d => Err(OpError::shape(op, view, "[batch, heads, cap, 2·d]", d)),
    }
}

/// [`super::qk_norm_pack`] into a binary16 cache (`HALF_QK_PACK`, one warp per (row, head) of q
/// then of k, as `norm.qk_pack`): `qn` packed `[batch·t, heads·d]` f32 gets `rn16(LN_q(q))`,
/// frames `t0..t0 + t` of `cache` get `LN_k(k) ‖ v` as binary16 (round to nearest even);
/// `(gq, bq)`, `(gk, bk)` the `[d]` affine parameters, one `eps`.
#[allow(clippy::too_many_arguments)]
pub fn qk_pack_f16(
    cx: &Ctx<'_>,
    qn: Tensor<'_>,
    cache: Tensor<'_, f16>,
    t0: usize,
    qkv: Tensor<'_>,
    (gq, bq): (Tensor<'_>, Tensor<'_>),
    (gk, bk): (Tensor<'_>, Tensor<'_>),
    eps: f32,
) -> Result<(), OpError> {
    let op = "qk_pack_f16";
    let (b, h, cap, d) = cache16(op, "cache", &cache)?;
    let (args, rows) = super::attention::qk_pack_args(
        op,
        (b, h, cap, d),
        qn,
        cache,
        t0,
        qkv,
        (gq, bq),
        (gk, bk),
        eps,
    )?;
    // q and k normalized (≈ 8 flops per element), v copied: reads 3 rows·h·d floats, writes
    // rows·h·d floats and 2·rows·h·d halves (one float's bytes)
    cx.work(Work::f32(16 * rows * h * d, 5 * rows * h * d));
    // SAFETY: the kernel reads batch·t rows of 3·heads·d columns of qkv at stride ld and the
    // four [d] vectors, writes qn[0..batch·t·heads·d] and frames t0..t0+t (<= cap) of the
    // packed binary16 cache: the checked views; qn and the cache overlap no other operand.
    unsafe {
        cx.launch_linear(
            &k::half_kv::QK_PACK,
            k::norm::row_threads(2 * rows * h),
            &args,
        )
    }
}

/// The half path's SDPA over a binary16 cache (`attention.sdpa_f16`, launched with
/// `attention::f16::dims`): `q`, `out` packed `[batch, tq, heads·d]`, frames `0..tk` of `kv`
/// (packed `[batch, heads, cap, 2·d]` binary16), `d <= 128`. Both products on tensor cores, one
/// f16 `mma` per k step, the probabilities rounded to binary16 before `P·V` (FlashAttention's
/// order, as the vendor's fp16 mode): within `attention::f16::bound` of the fp32 SDPA over the
/// same values, and the bits [`super::attention`] gives on `GemmPath::Half` over an f32 cache
/// holding them. Batch-invariant: a (batch, head)'s bits never depend on the rows sharing the
/// launch.
pub fn attention_f16(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    q: Tensor<'_>,
    kv: Tensor<'_, f16>,
    tk: usize,
    scale: f32,
) -> Result<(), OpError> {
    let op = "attention_f16";
    let (b, h, cap, d) = cache16(op, "kv", &kv)?;
    let tq = super::attention::queries(op, &q, &out, (b, h, d))?;
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
    let (launch, tiling) = k::attention::f16::dims(b * h, tq, tk, d)
        .map_err(|e| OpError::arg(op, "tk", e.to_string()))?;
    let args = [
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
        int(tiling.rows()),
    ];
    // scores and weighted values: 2 · 2·d flops per (query, key); q, out (floats) and tk frames
    // of k ‖ v (halves)
    cx.work(Work::f32(
        4 * b * h * tq * tk * d,
        2 * b * tq * h * d + b * h * tk * d,
    ));
    // SAFETY: the kernel reads q[0..batch·tq·heads·d] and frames < tk <= cap of the packed
    // binary16 cache and writes out (q's extent): the checked views; out overlaps neither
    // input; `launch` and the rows argument come from `attention::f16::dims`, which the
    // kernel's shared-memory layout assumes.
    unsafe { cx.launch(&k::attention::f16::SDPA_F16, launch, &args) }
}

/// [`attention_f16`] over keys split between the workspace and each session's carry
/// (`attention.sdpa_f16_split`): frames `0..tn` of `kv` (packed `[batch, heads, cap, 2·d]`
/// binary16: a step's new frames and whatever history it staged), then frame `j ≥ tn` of batch
/// row `b` from frame `j − shift` of row `(b mod g, head)` of `hist[b / g]`, each a packed
/// `[g, heads, hcap, 2·d]` binary16 block (a session's carry layer; `g · hist.len() = batch`,
/// at most `attention::f16::MAX_HISTORIES` of them). The kernel stages every key and value where
/// [`attention_f16`] stages them from a cache holding all `tk` frames, so the two give the same
/// bits, and the step need not copy each session's history into the workspace first.
#[allow(clippy::too_many_arguments)]
pub fn attention_f16_split(
    cx: &Ctx<'_>,
    out: Tensor<'_>,
    q: Tensor<'_>,
    kv: Tensor<'_, f16>,
    (tn, tk): (usize, usize),
    hist: &[Tensor<'_, f16>],
    shift: usize,
    scale: f32,
) -> Result<(), OpError> {
    let op = "attention_f16_split";
    let (b, h, cap, d) = cache16(op, "kv", &kv)?;
    let tq = super::attention::queries(op, &q, &out, (b, h, d))?;
    let n = hist.len();
    let max = k::attention::f16::MAX_HISTORIES;
    if n == 0 || n > max || !b.is_multiple_of(n) {
        return Err(OpError::arg(
            op,
            "hist",
            format!("{n} histories for {b} batch rows (1..={max}, dividing the rows)"),
        ));
    }
    let g = b / n;
    let mut hcap = 0;
    for t in hist {
        let (hb, hh, c, hd) = cache16(op, "hist", t)?;
        if (hb, hh, hd) != (g, h, d) || (hcap != 0 && c != hcap) {
            return Err(OpError::shape(
                op,
                "hist",
                format!("[{g}, {h}, one cap for all, {}]", 2 * d),
                t.dims(),
            ));
        }
        hcap = c;
    }
    if tk == 0 || tn > tk || tn > cap || shift > tn || tk - shift > hcap {
        return Err(OpError::arg(
            op,
            "tk",
            format!(
                "keys 0..{tn} of a cache of {cap}, {tn}..{tk} from histories of {hcap} frames \
                 at shift {shift}"
            ),
        ));
    }
    let mut operands = vec![
        operand("out", &out, true),
        operand("q", &q, false),
        operand("kv", &kv, false),
    ];
    operands.extend(hist.iter().map(|t| operand("hist", t, false)));
    disjoint(op, &operands)?;
    let (launch, tiling) = k::attention::f16::dims(b * h, tq, tk, d)
        .map_err(|e| OpError::arg(op, "tk", e.to_string()))?;
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
        int(tiling.rows()),
        int(tn),
        int(shift),
        int(g),
        int(hcap),
        int(n),
    ];
    // the unused address slots repeat the last history (the kernel never reads them)
    args.extend((0..max).map(|i| ptr(&hist[i.min(n - 1)])));
    cx.work(Work::f32(
        4 * b * h * tq * tk * d,
        2 * b * tq * h * d + b * h * tk * d,
    ));
    // SAFETY: the kernel reads q[0..batch·tq·heads·d], frames < tn <= cap of the packed
    // binary16 cache and frames (tn − shift)..(tk − shift) <= hcap of rows < g·heads of each
    // packed history (g · n = batch), and writes out (q's extent): the checked views; out
    // overlaps no input; `launch` and the rows argument come from `attention::f16::dims`, which
    // the kernel's shared-memory layout assumes.
    unsafe { cx.launch(&k::attention::f16::SDPA_F16_SPLIT, launch, &args) }
}
