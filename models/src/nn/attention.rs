//! Multi-head self-attention over a key/value cache: new frames are packed into a workspace
//! after (or before) the cached ones, and the queries attend over all of them.

use dcc_runtime::backend::DeviceBuffer;
use dcc_runtime::ops::CopyElem;

use super::{Ctx, LayerNorm, Linear, LoadError, Loader, OpError, Tensor, ops};
use crate::token2wav::half;

/// The element type of the DiT's key/value cache (its history and the workspace the new frames
/// join): `f32`, or `half::f16` where the contract's `half` operating point stores the carry and
/// the solver workspace as binary16. The two launches that compute on the cache go through it,
/// so [`SelfAttention::forward`] is one body for both; its copies are [`ops::copy_batched`] over
/// either type ([`CopyElem`]).
///
/// In the vendor's fp16 mode the cache holds f16 keys (the k LayerNorm's output, rounded) and
/// values (a linear's f16 output): an f32 cache on the half path holds those values after
/// `round_f16` launches, a binary16 cache holds the same values in half the bytes, so both give
/// the same bits.
pub trait KvElem: CopyElem {
    /// q/k LayerNorms of the fused `qkv` rows into `qn` and the new frames `0..t` of `work`
    /// (`[batch, heads, cap, 2·head_dim]`), rounded to f16 where the path rounds.
    #[allow(clippy::too_many_arguments)]
    fn pack(
        cx: &Ctx<'_>,
        qn: Tensor<'_>,
        work: Tensor<'_, Self>,
        t: usize,
        qkv: Tensor<'_>,
        q_ln: (Tensor<'_>, Tensor<'_>),
        k_ln: (Tensor<'_>, Tensor<'_>),
        eps: f32,
    ) -> Result<(), OpError>;

    /// SDPA of `q` over frames `0..tk` of `kv`.
    fn attention(
        cx: &Ctx<'_>,
        out: Tensor<'_>,
        q: Tensor<'_>,
        kv: Tensor<'_, Self>,
        tk: usize,
        scale: f32,
    ) -> Result<(), OpError>;

    /// Whether [`KvElem::attention_split`] reads histories in place: where it does not, a step
    /// stages every history frame into its workspace ([`History::staged`]` == `[`History::extent`]).
    const READS_CARRIES: bool;

    /// SDPA of `q` over frames `0..t + h.staged` of `kv`, then each session's history frames
    /// `h.staged..h.extent` where its carry holds them ([`History`]): the bits of
    /// [`KvElem::attention`] over a `kv` holding all `t + h.extent` frames.
    fn attention_split(
        cx: &Ctx<'_>,
        out: Tensor<'_>,
        q: Tensor<'_>,
        kv: Tensor<'_, Self>,
        t: usize,
        h: &History<'_, '_, Self>,
        scale: f32,
    ) -> Result<(), OpError>;
}

/// Where a step's attention finds each session's history, the `extent` cached frames after its
/// `t` new ones: frames `0..staged` copied behind the new frames of the workspace, frames
/// `staged..extent` where each session's carry layer holds them (`carries`, `[cfg, heads, cap,
/// 2·head_dim]` each, one per session of the batch, the rows of session `s` the batch rows
/// `cfg·s..cfg·(s + 1)`). All staged (`staged == extent`) is the plain case, which needs no
/// carries; [`KvElem::READS_CARRIES`] says where fewer may be.
#[derive(Copy, Clone, Debug)]
pub struct History<'h, 'a, K: KvElem> {
    pub extent: usize,
    pub staged: usize,
    pub carries: &'h [Tensor<'a, K>],
}

impl<K: KvElem> History<'_, '_, K> {
    /// Whether every history frame lies in the workspace.
    pub fn all_staged(&self) -> bool {
        self.staged >= self.extent
    }
}

impl KvElem for f32 {
    fn pack(
        cx: &Ctx<'_>,
        qn: Tensor<'_>,
        work: Tensor<'_>,
        t: usize,
        qkv: Tensor<'_>,
        q_ln: (Tensor<'_>, Tensor<'_>),
        k_ln: (Tensor<'_>, Tensor<'_>),
        eps: f32,
    ) -> Result<(), OpError> {
        ops::qk_norm_pack(cx, qn, work, 0, qkv, q_ln, k_ln, eps)?;
        if half::rounds(cx.gemm_path()) {
            // the vendor's fp16 mode feeds SDPA (and its cache) f16 q and k: the LayerNorms'
            // f32 outputs rounded (v, a linear's output, already is)
            ops::round_f16(cx, qn)?;
            let new = work.narrow(2, 0, t)?.flatten(0, 1)?.flatten(1, 2)?;
            ops::round_f16(cx, new)?;
        }
        Ok(())
    }

    fn attention(
        cx: &Ctx<'_>,
        out: Tensor<'_>,
        q: Tensor<'_>,
        kv: Tensor<'_>,
        tk: usize,
        scale: f32,
    ) -> Result<(), OpError> {
        ops::attention(cx, out, q, kv, tk, scale)
    }

    const READS_CARRIES: bool = false;

    fn attention_split(
        cx: &Ctx<'_>,
        out: Tensor<'_>,
        q: Tensor<'_>,
        kv: Tensor<'_>,
        t: usize,
        h: &History<'_, '_, Self>,
        scale: f32,
    ) -> Result<(), OpError> {
        if !h.all_staged() {
            return Err(OpError::Arg {
                op: "self_attention",
                arg: "history",
                detail: format!(
                    "frames {}..{} of an f32 history left in its carries: an f32 cache is \
                     read from the workspace only",
                    h.staged, h.extent
                ),
            });
        }
        Self::attention(cx, out, q, kv, t + h.extent, scale)
    }
}

/// The binary16 cache: only where the path rounds to f16 (the values an f32 cache would hold
/// after rounding); elsewhere storing the cache as f16 would change bits, and it is refused.
impl KvElem for ::half::f16 {
    fn pack(
        cx: &Ctx<'_>,
        qn: Tensor<'_>,
        work: Tensor<'_, Self>,
        _t: usize,
        qkv: Tensor<'_>,
        q_ln: (Tensor<'_>, Tensor<'_>),
        k_ln: (Tensor<'_>, Tensor<'_>),
        eps: f32,
    ) -> Result<(), OpError> {
        if !half::rounds(cx.gemm_path()) {
            return Err(OpError::Arg {
                op: "self_attention",
                arg: "work",
                detail: format!(
                    "a binary16 cache on the {:?} path, which keeps f32 keys and values",
                    cx.gemm_path()
                ),
            });
        }
        ops::qk_pack_f16(cx, qn, work, 0, qkv, q_ln, k_ln, eps)
    }

    fn attention(
        cx: &Ctx<'_>,
        out: Tensor<'_>,
        q: Tensor<'_>,
        kv: Tensor<'_, Self>,
        tk: usize,
        scale: f32,
    ) -> Result<(), OpError> {
        ops::attention_f16(cx, out, q, kv, tk, scale)
    }

    const READS_CARRIES: bool = true;

    fn attention_split(
        cx: &Ctx<'_>,
        out: Tensor<'_>,
        q: Tensor<'_>,
        kv: Tensor<'_, Self>,
        t: usize,
        h: &History<'_, '_, Self>,
        scale: f32,
    ) -> Result<(), OpError> {
        let tk = t + h.extent;
        if h.all_staged() {
            return Self::attention(cx, out, q, kv, tk, scale);
        }
        // frame j ≥ t + staged of the keys is frame j − t of its session's carry
        let keys = (t + h.staged, tk);
        ops::attention_f16_split(cx, out, q, kv, keys, h.carries, t, scale)
    }
}

/// Scratch of [`RelPosAttention::forward`], packed buffers of at least: `q`, `k`, `v`, `att`:
/// `t · dim`; `pos`: `(2·tk − 1) · dim`.
#[derive(Copy, Clone, Debug)]
pub struct RelPosScratch<'a> {
    pub q: Tensor<'a>,
    pub k: Tensor<'a>,
    pub v: Tensor<'a>,
    pub pos: Tensor<'a>,
    pub att: Tensor<'a>,
}

/// ESPnet's `RelPositionMultiHeadedAttention` (batch 1; [`RelPosAttention::forward_batch`]: a batch of streams): q, k, v, out and the bias-free
/// position projection, with the position biases `u`, `v` `[heads, d_k]`. The cache is
/// append-ordered: cached frames first, new frames after.
#[derive(Debug)]
pub struct RelPosAttention {
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub out: Linear,
    pub pos: Linear,
    pos_bias_u: DeviceBuffer,
    pos_bias_v: DeviceBuffer,
    heads: usize,
    dk: usize,
}

impl RelPosAttention {
    /// `{p}.linear_{q,k,v,out}` (`linear_k`'s bias where the state_dict has one),
    /// `{p}.linear_pos` (no bias), `{p}.pos_bias_{u,v}` `[heads, dim / heads]`.
    pub fn load(ld: &Loader<'_>, p: &str, dim: usize, heads: usize) -> Result<Self, LoadError> {
        let dk = dim / heads;
        let k_bias = ld.contains(&format!("{p}.linear_k.bias"));
        Ok(RelPosAttention {
            q: Linear::load(ld, &format!("{p}.linear_q"), dim, dim, true)?,
            k: Linear::load(ld, &format!("{p}.linear_k"), dim, dim, k_bias)?,
            v: Linear::load(ld, &format!("{p}.linear_v"), dim, dim, true)?,
            out: Linear::load(ld, &format!("{p}.linear_out"), dim, dim, true)?,
            pos: Linear::load(ld, &format!("{p}.linear_pos"), dim, dim, false)?,
            pos_bias_u: ld.tensor(&format!("{p}.pos_bias_u"), &[heads, dk])?,
            pos_bias_v: ld.tensor(&format!("{p}.pos_bias_v"), &[heads, dk])?,
            heads,
            dk,
        })
    }

    /// Attention of the `t` rows of `xn` (`[t, dim]`, normalized) over the cached frames
    /// `history` (`[heads, l, 2·d_k]`) and themselves, into `out` (`[t, dim]`). The keys and
    /// values land in `work` (`[heads, cap, 2·d_k]`, frames `0..l + t`: the history copied,
    /// then the new frames); `pe` holds the `2·(l + t) − 1` relative positions (`[2·tk − 1,
    /// dim]`).
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        xn: Tensor<'_>,
        history: Tensor<'_>,
        work: Tensor<'_>,
        pe: Tensor<'_>,
        s: RelPosScratch<'_>,
        out: Tensor<'_>,
    ) -> Result<(), OpError> {
        let (h, dk) = (self.heads, self.dk);
        let (t, d) = (xn.dims()[0], h * dk);
        let l = history.dims().get(1).copied().unwrap_or(0);
        let tk = l + t;
        let (q, k, v) = (s.q.view(&[t, d])?, s.k.view(&[t, d])?, s.v.view(&[t, d])?);
        self.q.forward(cx, xn, q)?;
        self.k.forward(cx, xn, k)?;
        self.v.forward(cx, xn, v)?;
        // [history ‖ new] (append order)
        ops::copy(
            cx,
            work.narrow(1, 0, l)?.flatten(1, 2)?,
            history.flatten(1, 2)?,
        )?;
        let cap = work.dims()[1];
        ops::kv_pack(cx, work.view(&[1, h, cap, 2 * dk])?, l, k, v)?;
        let pos = s.pos.view(&[2 * tk - 1, d])?;
        self.pos.forward(cx, pe, pos)?;
        let att = s.att.view(&[t, d])?;
        let u = Tensor::of(&self.pos_bias_u)?.view(&[h, dk])?;
        let w = Tensor::of(&self.pos_bias_v)?.view(&[h, dk])?;
        ops::rel_pos_attention(cx, att, q, u, w, work, pos, tk)?;
        self.out.forward(cx, att, out)
    }
}

impl RelPosAttention {
    /// [`RelPosAttention::forward`] over a batch of `n` independent streams (sessions) at one
    /// history extent `l`: `xn`, `out` `[n·t, dim]` (stream `s`'s rows `s·t..(s + 1)·t`),
    /// `work` packed `[n, heads, cap, 2·d_k]` whose frames `0..l` of row `s` the caller staged
    /// with stream `s`'s history (one copy per stream: its cache lies at its own addresses);
    /// the new frames land after them. One position projection serves every stream (they
    /// share `tk = l + t`, so `pe`), and every launch covers all rows: each row's arithmetic
    /// is the same whatever rows share it (the batch-invariant GEMM path and op families), so
    /// stream `s`'s output equals [`RelPosAttention::forward`] of stream `s` alone.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_batch(
        &self,
        cx: &Ctx<'_>,
        xn: Tensor<'_>,
        l: usize,
        work: Tensor<'_>,
        pe: Tensor<'_>,
        s: RelPosScratch<'_>,
        out: Tensor<'_>,
    ) -> Result<(), OpError> {
        let (h, dk) = (self.heads, self.dk);
        let (rows, d) = (xn.dims()[0], h * dk);
        let n = work.dims().first().copied().unwrap_or(0);
        let t = rows.checked_div(n).unwrap_or(0);
        if work.rank() != 4 || n == 0 || t * n != rows {
            return Err(OpError::Shape {
                op: "rel_pos_attention",
                view: "work",
                expected: format!("[n | {rows}, {h}, cap, {}]", 2 * dk),
                actual: work.dims().to_vec(),
            });
        }
        let tk = l + t;
        let (q, k, v) = (
            s.q.view(&[rows, d])?,
            s.k.view(&[rows, d])?,
            s.v.view(&[rows, d])?,
        );
        self.q.forward(cx, xn, q)?;
        self.k.forward(cx, xn, k)?;
        self.v.forward(cx, xn, v)?;
        ops::kv_pack(cx, work, l, k, v)?;
        let pos = s.pos.view(&[2 * tk - 1, d])?;
        self.pos.forward(cx, pe, pos)?;
        let att = s.att.view(&[rows, d])?;
        let u = Tensor::of(&self.pos_bias_u)?.view(&[h, dk])?;
        let w = Tensor::of(&self.pos_bias_v)?.view(&[h, dk])?;
        ops::rel_pos_attention(cx, att, q, u, w, work, pos, tk)?;
        self.out.forward(cx, att, out)
    }
}

/// The DiT's attention over a CFG batch: `to_q ‖ to_k ‖ to_v` stacked into one GEMM, q/k
/// LayerNorms per head (one eps), the output projection. The cache is prepend-ordered: new
/// frames first, cached frames after.
#[derive(Debug)]
pub struct SelfAttention {
    pub qkv: Linear,
    pub q_norm: LayerNorm,
    pub k_norm: LayerNorm,
    pub proj: Linear,
    heads: usize,
    head_dim: usize,
    scale: f32,
}

impl SelfAttention {
    /// `{p}.to_{q,k,v}` `[heads·head_dim, hidden]` with biases (stacked), `{p}.{q,k}_norm`
    /// `[head_dim]` (LayerNorms with `eps`), `{p}.proj` `[hidden, heads·head_dim]`.
    pub fn load(
        ld: &Loader<'_>,
        p: &str,
        hidden: usize,
        (heads, head_dim): (usize, usize),
        eps: f32,
    ) -> Result<Self, LoadError> {
        let inner = heads * head_dim;
        let part = |n: &str| (format!("{p}.{n}"), inner);
        let parts = [part("to_q"), part("to_k"), part("to_v")];
        let parts: Vec<(&str, usize)> = parts.iter().map(|(n, o)| (n.as_str(), *o)).collect();
        Ok(SelfAttention {
            qkv: Linear::stacked(ld, &parts, hidden, true)?,
            q_norm: LayerNorm::load(ld, &format!("{p}.q_norm"), head_dim, eps)?,
            k_norm: LayerNorm::load(ld, &format!("{p}.k_norm"), head_dim, eps)?,
            proj: Linear::load(ld, &format!("{p}.proj"), inner, hidden, true)?,
            heads,
            head_dim,
            scale: (1.0 / (head_dim as f64).sqrt()) as f32,
        })
    }

    /// Attention of the `batch · t` rows of `xn` (`[batch·t, hidden]`, modulated) over
    /// themselves and `history.extent` cached frames, into `out` (`[batch·t, hidden]`). Keys and
    /// values lie in `work` (`[batch, heads, cap, 2·head_dim]`, frames `0..t + staged`: the new
    /// frames, which this call writes, then the history frames the caller staged at frames
    /// `t..t + staged` of every row before the call: one copy per session for every layer of a
    /// solver step, see `token2wav::dit`), and the history's other frames in each session's
    /// carry ([`History`]); `(qkv, qn, att)` are packed scratch of at least `batch·t · 3·inner`,
    /// `batch·t · inner` and `batch·t · inner`. Every launch covers all rows at once, and each
    /// row's arithmetic is the same whatever rows share the launch, and wherever its history
    /// frames are read from.
    ///
    /// The cache's element type `K` is the contract's (f32, or binary16 at the `half` point; see
    /// [`KvElem`]): the same launches either way, the binary16 ones storing the values the f32
    /// ones store after rounding.
    #[allow(clippy::too_many_arguments)]
    pub fn forward<K: KvElem>(
        &self,
        cx: &Ctx<'_>,
        xn: Tensor<'_>,
        history: &History<'_, '_, K>,
        work: Tensor<'_, K>,
        (qkv, qn, att): (Tensor<'_>, Tensor<'_>, Tensor<'_>),
        out: Tensor<'_>,
    ) -> Result<(), OpError> {
        let inner = self.heads * self.head_dim;
        // the workspace holds the new frames and the staged ones
        let l = history.staged.min(history.extent);
        let batch = work.dims().first().copied().unwrap_or(0);
        let rows = xn.dims()[0];
        let t = rows.checked_div(batch).unwrap_or(0);
        if batch == 0 || t * batch != rows || work.dims().get(2).is_none_or(|&cap| t + l > cap) {
            return Err(OpError::Shape {
                op: "self_attention",
                view: "work",
                expected: format!("[batch | {rows}, heads, >= {rows} / batch + {l}, 2·head_dim]"),
                actual: work.dims().to_vec(),
            });
        }
        let qkv = qkv.view(&[rows, 3 * inner])?;
        self.qkv.forward(cx, xn, qkv)?;
        let qn = qn.view(&[rows, inner])?;
        K::pack(
            cx,
            qn,
            work,
            t,
            qkv,
            self.q_norm.params()?,
            self.k_norm.params()?,
            self.q_norm.eps(),
        )?;
        let att3 = att.view(&[batch, t, inner])?;
        K::attention_split(
            cx,
            att3,
            qn.view(&[batch, t, inner])?,
            work,
            t,
            history,
            self.scale,
        )?;
        self.proj.forward(cx, att.view(&[rows, inner])?, out)
    }
}
