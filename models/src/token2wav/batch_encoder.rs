//! Exact cross-session batching of the `encoder` callable: the members of a batched flow call
//! run their encoders as one call too ([`BatchedFlow::encode`]), every session's `mu` (and so
//! its mel) byte-identical to the same session's encoder call alone on the same flow.
//!
//! **Why it is exact.** The members share what fixes an encoder call's host values: the
//! tokens of a call (a chunk's, lookahead included), the conformer extent (so the attended
//! frames and the relative positions) and what the caches keep — the batcher groups sessions by
//! them. Their rows are stacked session-major (session `s`'s tokens `s·t..(s + 1)·t`, its
//! frames `s·tu..(s + 1)·tu`) and every arithmetic launch covers all rows: the embedding, the
//! linears and convolution GEMMs, the norms, adds and scales, `kv_pack`, the relative-position
//! attention (one warp per (session, head, query row)). On a batch-invariant path (which
//! [`BatchedFlow::new`] requires: the encoder's GEMMs run on the flow's path, and the backend
//! GEMM's kernels follow the row count) a row's bits do not depend on the rows beside it. The
//! position projection is computed once: every member attends over the same `tk` frames, so
//! the same rows of the same table.
//!
//! **Per-row addressing.** Each session's encoder state — the pre-lookahead and upsampling conv
//! contexts and the two conformer stacks' key/value caches — stays at its own arena addresses.
//! What the call reads of it is gathered by launches that take that session's addresses: its
//! two contexts into its rows of the batch's `[n, context ‖ frames, dim]` conv buffer (one copy
//! each), its histories of every layer of a stack into its rows of the batch's conformer
//! workspace `[layers, n, heads, work, 2·d_k]` (one `copy.batched` per stack); what it writes
//! back is written per session: the new contexts (one copy each) and the kept frames of every
//! layer of a stack (`carry::write_back_layers`: one `copy.batched` below retention, one
//! `carry.retain_layers` above). Everything else is one launch for all members. The batch's
//! buffers are call-lifetime and per process, sized for the largest batch (`Work` with the
//! encoder's buffers for `max` sessions; the conformer workspaces at the flow's own per-session
//! capacity, so any call the flow takes alone fits). The members' `mu` lands directly in the
//! batch's `mu` rows the batched flow call reads; their `cond` rows are the flow's (zeros after
//! a prime), their `spk` rows and token ids uploaded by [`BatchedFlow::stage_inputs`].

use dcc_runtime::DevPtr;
use dcc_runtime::arena::packed_strides;
use dcc_runtime::contract::Keep;
use dcc_runtime::ops::{self, Act, Ctx, RawTensor, Tensor};

use super::batch::part;
use super::encoder::{ConformerLayer, Encoder};
use super::io::EncoderIo;
use super::state::Keeps;
use super::work::{Caps, Work, v};
use super::{BatchedFlow, DeviceState, FlowError};
use crate::nn::RelPosScratch;

/// One member of a batched `encoder` call: the session's encoder state at its own addresses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EncoderMember {
    /// The blocks' cache `[blocks, heads, token capacity, 2·d_k]` (`conformer_cache`).
    pub conformer: RawTensor,
    /// The up-blocks' cache `[up_blocks, heads, frame capacity, 2·d_k]` (`upsample_cache`).
    pub upsample: RawTensor,
    /// The pre-lookahead context `[CONV2_K − 1, dim]` and the upsampling context `[2·stride,
    /// dim]`, read and written in place.
    pub pre_cnn: RawTensor,
    pub up_cnn: RawTensor,
}

impl EncoderMember {
    /// The member `st` is: its state's tensors (fixed addresses under the state rule).
    pub fn of(st: &DeviceState) -> EncoderMember {
        let t = st.tensors();
        EncoderMember {
            conformer: t.conformer,
            upsample: t.upsample,
            pre_cnn: t.pre_lookahead,
            up_cnn: t.up_layer,
        }
    }

    fn tensors(&self) -> [&RawTensor; 4] {
        [&self.conformer, &self.upsample, &self.pre_cnn, &self.up_cnn]
    }
}

/// The I/O of a batched `encoder` call: the class's conformer extent and call width, the
/// members in row order (each reading its staged row of token ids).
#[derive(Clone, Debug)]
pub struct BatchEncoderIo<'a> {
    /// The conformer extent on the token clock every member has (the class).
    pub t_tok: usize,
    /// Tokens of every member's call, lookahead included.
    pub tokens: usize,
    pub members: &'a [EncoderMember],
    /// What every member's caches keep (the contract's, one for all).
    pub keeps: Keeps,
}

impl BatchedFlow {
    /// Uploads one member's host inputs into row `row` of the batch: its token ids (a call of
    /// `tokens.len()` tokens, lookahead included, rows of that width) and its speaker
    /// embedding. Checked as [`super::DeviceFlow::set_inputs`] checks a call's, nothing uploaded
    /// otherwise. Host copies: never inside a capture.
    pub fn stage_inputs(&self, row: usize, tokens: &[u32], spk: &[f32]) -> Result<(), FlowError> {
        let c = self.dev.config();
        self.dev.check_inputs(tokens, spk, false)?;
        let t = tokens.len();
        if row >= self.sizes.max() || self.call_frames(t).is_none() {
            return Err(FlowError::Input(format!(
                "row {row} of {t} tokens (the batch holds {} rows of calls of {} frames)",
                self.sizes.max(),
                self.frames
            )));
        }
        let ids = Tensor::<u32>::of(&self.w.ids)?.narrow(0, row * t, t)?;
        let be = self.dev.backend();
        be.upload(ids.ptr(), tokens)?;
        be.upload(
            part(&self.w.spk, row * c.spk_dim, &[1, c.spk_dim])?.ptr(),
            spk,
        )?;
        Ok(())
    }

    /// The batch's token rows, `[n, tokens]` (`u32`): what a graph of a batched encoder call
    /// reads (fixed addresses).
    pub(crate) fn token_rows(&self, n: usize, tokens: usize) -> Result<DevPtr, FlowError> {
        Ok(Tensor::<u32>::of(&self.w.ids)?
            .narrow(0, 0, n * tokens)?
            .ptr())
    }

    /// Frames a call of `tokens` tokens (lookahead included) presents, if the batch holds it.
    fn call_frames(&self, tokens: usize) -> Option<usize> {
        let e = &self.dev.config().encoder;
        let tn = tokens.checked_sub(e.pre_lookahead).filter(|&tn| tn > 0)?;
        Some(tn * e.up_stride).filter(|&f| f <= self.frames)
    }

    /// Moves row `from`'s flow inputs (`mu`, `cond` of `frames` frames and `spk`) to row `to`
    /// (a member that failed after the batched encoder leaves the batch: the rows behind it
    /// close up). Stream work.
    pub(crate) fn move_row(&self, from: usize, to: usize, frames: usize) -> Result<(), FlowError> {
        let c = self.dev.config();
        let cx = self.dev.cx();
        let (mel, spk) = (c.mel, c.spk_dim);
        for b in [&self.w.mu, &self.w.cond] {
            let row = |r: usize| part(b, r * frames * mel, &[frames, mel]);
            ops::copy(&cx, row(to)?, row(from)?)?;
        }
        let row = |r: usize| part(&self.w.spk, r * spk, &[1, spk]);
        ops::copy(&cx, row(to)?, row(from)?)?;
        Ok(())
    }

    /// The `encoder` callable over the members of `io` (see the module docs), each reading its
    /// staged row of token ids ([`BatchedFlow::stage_inputs`]) and its own caches and contexts:
    /// every member's `mu` lands in its row of the batch's `mu`, its `cond` row is the flow's.
    /// Stream work only. Returns `(frames, conformer extent on the token clock after
    /// retention)`, every member's.
    ///
    /// Checked before anything is queued, for every member, as one session's call is
    /// ([`super::DeviceFlow::encoder_call`]): 1 to the largest batch size of members, of
    /// disjoint memory, each member's caches and contexts of the flow's shapes and packed, a
    /// non-final call of a width the batch holds.
    ///
    /// # Safety
    /// Every tensor of every member lies, over its span, inside a live buffer of the flow's
    /// backend that stays alive until the call's work completes (every replay of a graph it is
    /// captured into, too), and overlaps no buffer of the flow's or of this batch's. An
    /// [`EncoderMember::of`] a state of this flow satisfies it.
    pub unsafe fn encode(&self, io: &BatchEncoderIo<'_>) -> Result<(usize, usize), FlowError> {
        let dev = &*self.dev;
        let c = dev.config();
        let (n, t) = (io.members.len(), io.tokens);
        let frames = self.call_frames(t);
        let Some(frames) = frames.filter(|_| n > 0 && n <= self.sizes.max()) else {
            return Err(FlowError::Input(format!(
                "a batched encoder call of {n} members of {t} tokens (the batch holds 1..={} \
                 members of calls of up to {} frames)",
                self.sizes.max(),
                self.frames
            )));
        };
        let spans: Vec<(u64, u64)> = io
            .members
            .iter()
            .flat_map(|m| m.tensors())
            .map(|r| (r.ptr().0, r.ptr().0 + 4 * r.span() as u64))
            .collect();
        for (i, a) in spans.iter().enumerate() {
            if spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1) {
                return Err(FlowError::Input(
                    "the members of a batched encoder call overlap in memory".into(),
                ));
            }
        }
        let ids = Tensor::<u32>::of(&self.w.ids)?;
        for (i, m) in io.members.iter().enumerate() {
            let one = EncoderIo {
                ids: ids.narrow(0, i * t, t)?.raw(),
                last_chunk: false,
                t_tok: io.t_tok,
                carry: m.conformer,
                up_carry: m.upsample,
                pre_cnn: m.pre_cnn,
                up_cnn: m.up_cnn,
                write_back: true,
                keeps: io.keeps,
            };
            dev.check_encoder(&one)?;
            if let Some(r) = m
                .tensors()
                .iter()
                .find(|r| r.strides() != packed_strides(r.dims()))
            {
                return Err(FlowError::Input(format!(
                    "member {i}: a batched encoder call takes packed caches and contexts, not \
                     {:?} at strides {:?}",
                    r.dims(),
                    r.strides()
                )));
            }
        }
        let cx = dev.cx();
        let w = &self.w;
        let bind = |pick: fn(&EncoderMember) -> RawTensor| -> Vec<Tensor<'_>> {
            // SAFETY: the caller's promise (`# Safety`): every member's tensors lie in live
            // memory of this backend for as long as the call's work may run.
            io.members
                .iter()
                .map(|m| unsafe { pick(m).bind() })
                .collect()
        };
        let (conformer, upsample) = (bind(|m| m.conformer), bind(|m| m.upsample));
        let (pre, up) = (bind(|m| m.pre_cnn), bind(|m| m.up_cnn));
        let d = c.encoder.dim;
        dev.embedding
            .forward(&cx, ids.narrow(0, 0, n * t)?, v(&w.a, &[n * t, d])?)?;
        let st = BatchState {
            conformer: &conformer,
            upsample: &upsample,
            pre_lookahead: &pre,
            up_layer: &up,
            tokens: io.t_tok,
            keeps: &io.keeps,
        };
        let caps = &dev.caps;
        let pe = v(&dev.pe, &[2 * caps.pe_size - 1, d])?;
        let (tu, kept) = dev.encoder.forward_batch(&cx, w, caps, pe, t, st)?;
        debug_assert_eq!(tu, frames);
        let mel = c.mel;
        dev.encoder_proj
            .forward(&cx, v(&w.a, &[n * tu, d])?, part(&w.mu, 0, &[n * tu, mel])?)?;
        // every member's `cond` is the flow's (zeros after a prime, as alone)
        let cond = part(&dev.w.cond, 0, &[tu, mel])?.broadcast(0, n)?;
        ops::copy_batched(&cx, part(&w.cond, 0, &[n, tu, mel])?, cond)?;
        Ok((tu, kept))
    }
}

/// The members' encoder state in a batched call, in row order.
pub(super) struct BatchState<'a, 'b> {
    pub conformer: &'b [Tensor<'a>],
    pub upsample: &'b [Tensor<'a>],
    pub pre_lookahead: &'b [Tensor<'a>],
    pub up_layer: &'b [Tensor<'a>],
    /// The conformer extent (token clock), every member's.
    pub tokens: usize,
    pub keeps: &'b Keeps,
}

impl Encoder {
    /// [`Encoder::forward`] over `n` members' calls of `t` tokens each (not a last chunk), the
    /// embedded tokens in `w.a` (`[n·t, dim]`, session-major): the output `[n·frames, dim]`
    /// lands in `w.a`. Returns `(frames, conformer extent in tokens after retention)`.
    pub(super) fn forward_batch(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        caps: &Caps,
        pe: Tensor<'_>,
        t: usize,
        st: BatchState<'_, '_>,
    ) -> Result<(usize, usize), FlowError> {
        let c = &self.cfg;
        let (d, la, s) = (c.dim, c.pre_lookahead, c.up_stride);
        let n = st.pre_lookahead.len();
        let tn = t
            .checked_sub(la)
            .filter(|&tn| tn > 0)
            .ok_or_else(|| FlowError::Input(format!("{t} tokens: no more than the lookahead")))?;
        let rows = n * t;
        self.embed.forward(
            cx,
            v(&w.a, &[rows, d])?,
            v(&w.x, &[rows, d])?,
            v(&w.b, &[rows, d])?,
        )?;
        let emb = v(&w.b, &[n, t, d])?;
        // pre-lookahead: conv1 (k = la + 1) over each member's tokens, its lookahead included;
        // the leaky ReLU in the GEMM's launch, as alone
        let k1 = self.pre_conv1.kernel();
        let col = v(&w.col, &[n, tn, k1 * d])?;
        ops::copy_batched(cx, col, emb.windows(k1)?)?;
        let h = v(&w.o, &[n * tn, d])?;
        let col = col.view(&[n * tn, k1 * d])?;
        self.pre_conv1
            .linear()
            .forward_act(cx, col, h, Act::LeakyRelu(0.01))?;
        // causal conv2 over [context ‖ h] of each member
        let ctx = self.pre_conv2.context();
        let cat = v(&w.cat, &[n, ctx + tn, d])?;
        self.pre_conv2.load_contexts(cx, st.pre_lookahead, cat)?;
        ops::copy_batched(cx, cat.narrow(1, ctx, tn)?, h.view(&[n, tn, d])?)?;
        let x = v(&w.x, &[n * tn, d])?;
        let col = Tensor::of(&w.col)?;
        self.pre_conv2
            .forward_batch(cx, cat, st.pre_lookahead, col, x)?;
        // + each member's first tn embedded tokens (gathered packed for the add)
        let res = v(&w.xn, &[n, tn, d])?;
        ops::copy_batched(cx, res, emb.narrow(1, 0, tn)?)?;
        ops::add(cx, x, res.view(&[n * tn, d])?)?;

        // first conformer stack (token clock)
        let (ws_tok, ws_up) = w.conformer_batch(n)?;
        let pe = (pe, caps.pe_size);
        let tok = Stack {
            layers: &self.encoders,
            ws: ws_tok,
            caches: st.conformer,
            extent: st.tokens,
            keep: &st.keeps.conformer,
        };
        let kept = tok.forward(cx, w, pe, (tn, d))?;

        // upsample ×s (nearest) after each member's 2s-row context, causal conv k = 2s + 1
        let tu = tn * s;
        let uctx = self.up_conv.context();
        if !uctx.is_multiple_of(s) {
            return Err(FlowError::Config(format!(
                "an upsampling context of {uctx} frames at stride {s}"
            )));
        }
        let cat = v(&w.cat, &[n, uctx + tu, d])?;
        self.up_conv.load_contexts(cx, st.up_layer, cat)?;
        // frame j·s + r of member i is its token j: one copy per r for every member
        let wide = v(&w.cat, &[n, uctx / s + tn, s * d])?.narrow(1, uctx / s, tn)?;
        let x = v(&w.x, &[n, tn, d])?;
        for r in 0..s {
            ops::copy_batched(cx, wide.narrow(2, r * d, d)?, x)?;
        }
        let a = v(&w.a, &[n * tu, d])?;
        self.up_conv.forward_batch(cx, cat, st.up_layer, col, a)?;
        let x = v(&w.x, &[n * tu, d])?;
        self.up_embed.forward(cx, a, v(&w.b, &[n * tu, d])?, x)?;

        // second conformer stack (frame clock)
        let up = Stack {
            layers: &self.up_encoders,
            ws: ws_up,
            caches: st.upsample,
            extent: st.tokens * s,
            keep: &st.keeps.upsample,
        };
        up.forward(cx, w, pe, (tu, d))?;
        self.after_norm.forward(cx, x, a)?;
        Ok((tu, kept))
    }
}

/// One conformer stack of a batched call: its layers, the batch's workspace `[layers, n,
/// heads, work, 2·d_k]`, each member's cache `[layers, heads, cap, 2·d_k]` at extent `extent`.
struct Stack<'a, 'b> {
    layers: &'b [ConformerLayer],
    ws: Tensor<'a>,
    caches: &'b [Tensor<'a>],
    extent: usize,
    keep: &'b Keep,
}

impl Stack<'_, '_> {
    /// The stack over the members' `t` rows each of `w.x` (in place): each member's histories
    /// of every layer staged into its rows of the workspace (one launch a member), the layers
    /// over all rows, the kept frames of every layer written back into each member's cache.
    /// Returns the extent after retention.
    fn forward(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        pe: (Tensor<'_>, usize),
        (t, d): (usize, usize),
    ) -> Result<usize, FlowError> {
        let (l, n) = (self.extent, self.caches.len());
        if l > 0 {
            for (i, cache) in self.caches.iter().enumerate() {
                let src = cache.narrow(2, 0, l)?.flatten(2, 3)?;
                let dst = self.ws.index(1, i)?.narrow(2, 0, l)?.flatten(2, 3)?;
                ops::copy_batched(cx, dst, src)?;
            }
        }
        for (li, layer) in self.layers.iter().enumerate() {
            layer.forward_batch(cx, w, pe, (n, t, d), l, self.ws.index(0, li)?)?;
        }
        let tk = l + t;
        let mut kept = ops::carry::kept(self.keep, tk);
        for (i, cache) in self.caches.iter().enumerate() {
            kept = ops::carry::write_back_layers(cx, *cache, self.ws.index(1, i)?, tk, self.keep)?;
        }
        Ok(kept)
    }
}

impl ConformerLayer {
    /// [`ConformerLayer::forward`] over `n` members' `t` rows each of `w.x` (in place), member
    /// `s` attending over `[its history ‖ new]` in row `s` of `work` (`[n, heads, work,
    /// 2·d_k]`, the histories staged by the caller; the write-back is the caller's too).
    fn forward_batch(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        (pe, pe_size): (Tensor<'_>, usize),
        (n, t, d): (usize, usize, usize),
        extent: usize,
        work: Tensor<'_>,
    ) -> Result<(), FlowError> {
        let tk = extent + t;
        let first = pe_size.checked_sub(tk).ok_or_else(|| {
            FlowError::Input(format!("{tk} frames exceed the position table's {pe_size}"))
        })?;
        let rows = n * t;
        let (x, xn, o) = (
            v(&w.x, &[rows, d])?,
            v(&w.xn, &[rows, d])?,
            v(&w.o, &[rows, d])?,
        );
        self.norm_mha.forward(cx, x, xn)?;
        let pe = pe.rows(first, 2 * tk - 1)?;
        let s = RelPosScratch {
            q: Tensor::of(&w.q)?,
            k: Tensor::of(&w.k)?,
            v: Tensor::of(&w.v)?,
            pos: Tensor::of(&w.pos)?,
            att: Tensor::of(&w.att)?,
        };
        self.attn.forward_batch(cx, xn, extent, work, pe, s, o)?;
        ops::add(cx, x, o)?;
        self.norm_ff.forward(cx, x, xn)?;
        let hidden = v(&w.hidden, &[rows, self.ff.fc1.out_dim()])?;
        self.ff.forward(cx, xn, hidden, o)?;
        ops::add(cx, x, o)?;
        Ok(())
    }
}
