//! `UpsampleConformerEncoderV2.forward_chunk` (batch 1) over the nn layers, with its streaming
//! caches: the pre-lookahead and upsampling conv contexts and the two conformer stacks' key/value
//! caches (token clock before the upsampling, frame clock after).

use dcc_runtime::contract::Keep;
use dcc_runtime::ops::{self, Act, Ctx, Tensor};

use super::FlowError;
use super::config::EncoderConfig;
use super::work::{Caps, Work, v};
use crate::nn::{
    CausalConv1d, Conv1d, LayerNorm, Linear, LoadError, Loader, Mlp, RelPosAttention, RelPosScratch,
};

/// LayerNorm eps of `LinearNoSubsampling` and `after_norm`.
const EMBED_EPS: f32 = 1e-5;
/// LayerNorm eps inside `ConformerEncoderLayer`.
const LAYER_EPS: f32 = 1e-12;
/// Pre-lookahead conv2 kernel (its causal context is `CONV2_K − 1` tokens).
pub(super) const CONV2_K: usize = 3;

/// `LinearNoSubsampling` + the positional-encoding input scale: `y = LN(x·Wᵀ + b) · √dim`.
pub(super) struct Embed {
    lin: Linear,
    norm: LayerNorm,
    xscale: f32,
}

impl Embed {
    fn load(ld: &Loader<'_>, p: &str, d: usize) -> Result<Self, LoadError> {
        Ok(Embed {
            lin: Linear::load(ld, &format!("{p}.out.0"), d, d, true)?,
            norm: LayerNorm::load(ld, &format!("{p}.out.1"), d, EMBED_EPS)?,
            xscale: (d as f64).sqrt() as f32,
        })
    }

    /// `y = LN(x·Wᵀ + b) · √dim` over `[t, dim]` views, `tmp` the linear's output.
    pub(super) fn forward(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        tmp: Tensor<'_>,
        y: Tensor<'_>,
    ) -> Result<(), ops::OpError> {
        self.lin.forward(cx, x, tmp)?;
        self.norm.forward(cx, tmp, y)?;
        ops::act(cx, y, Act::Scale(self.xscale))
    }
}

/// `ConformerEncoderLayer`: relative-position self-attention + SiLU feed-forward, pre-norm, no
/// macaron, no conv module.
pub(super) struct ConformerLayer {
    pub(super) norm_mha: LayerNorm,
    pub(super) attn: RelPosAttention,
    pub(super) norm_ff: LayerNorm,
    pub(super) ff: Mlp,
}

/// One conformer layer's cache: its slice of the stack's cache (`[heads, cap, 2·d_k]`, extent
/// `extent`), its workspace (`[heads, work, 2·d_k]`), whether to write the kept frames back
/// in place and what they are.
struct LayerCache<'a> {
    cache: Tensor<'a>,
    extent: usize,
    work: Tensor<'a>,
    write_back: bool,
    keep: &'a Keep,
}

impl ConformerLayer {
    fn load(ld: &Loader<'_>, p: &str, c: &EncoderConfig) -> Result<Self, LoadError> {
        let d = c.dim;
        let ff = (
            format!("{p}.feed_forward.w_1"),
            format!("{p}.feed_forward.w_2"),
        );
        Ok(ConformerLayer {
            norm_mha: LayerNorm::load(ld, &format!("{p}.norm_mha"), d, LAYER_EPS)?,
            attn: RelPosAttention::load(ld, &format!("{p}.self_attn"), d, c.heads)?,
            norm_ff: LayerNorm::load(ld, &format!("{p}.norm_ff"), d, LAYER_EPS)?,
            ff: Mlp::load(ld, (&ff.0, &ff.1), d, c.linear_units, Act::Silu)?,
        })
    }

    /// The layer over the `t` rows of `w.x` (in place), attending over `[cache ‖ new]` in its
    /// workspace; with `write_back`, the kept frames are written back into the cache right
    /// after. Returns the cache extent after retention.
    fn forward(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        (pe, pe_size): (Tensor<'_>, usize),
        (t, d): (usize, usize),
        lc: LayerCache<'_>,
    ) -> Result<usize, FlowError> {
        let tk = lc.extent + t;
        let first = pe_size.checked_sub(tk).ok_or_else(|| {
            FlowError::Input(format!("{tk} frames exceed the position table's {pe_size}"))
        })?;
        let (x, xn, o) = (v(&w.x, &[t, d])?, v(&w.xn, &[t, d])?, v(&w.o, &[t, d])?);
        self.norm_mha.forward(cx, x, xn)?;
        // relative positions for size tk: the centre 2·tk − 1 rows of the stored table
        let pe = pe.rows(first, 2 * tk - 1)?;
        let s = RelPosScratch {
            q: Tensor::of(&w.q)?,
            k: Tensor::of(&w.k)?,
            v: Tensor::of(&w.v)?,
            pos: Tensor::of(&w.pos)?,
            att: Tensor::of(&w.att)?,
        };
        let history = lc.cache.narrow(1, 0, lc.extent)?;
        self.attn.forward(cx, xn, history, lc.work, pe, s, o)?;
        ops::add(cx, x, o)?;
        self.norm_ff.forward(cx, x, xn)?;
        let hidden = v(&w.hidden, &[t, self.ff.fc1.out_dim()])?;
        self.ff.forward(cx, xn, hidden, o)?;
        ops::add(cx, x, o)?;
        Ok(if lc.write_back {
            ops::carry::write_back(cx, lc.cache, lc.work, tk, lc.keep)?
        } else {
            ops::carry::kept(lc.keep, tk)
        })
    }
}

/// The encoder's weights.
///
/// Its batched forward, over several sessions' rows at once, is `super::batch_encoder`'s.
pub(super) struct Encoder {
    pub(super) cfg: EncoderConfig,
    pub(super) embed: Embed,
    pub(super) pre_conv1: Conv1d,
    pub(super) pre_conv2: CausalConv1d,
    pub(super) encoders: Vec<ConformerLayer>,
    pub(super) up_conv: CausalConv1d,
    pub(super) up_embed: Embed,
    pub(super) up_encoders: Vec<ConformerLayer>,
    pub(super) after_norm: LayerNorm,
}

/// The encoder's streaming state for one call (tensors of the session's regions).
pub(super) struct EncoderState<'a> {
    /// The blocks' cache `[blocks, heads, cap, 2·d_k]` and its extent in tokens.
    pub conformer: Tensor<'a>,
    pub tokens: usize,
    /// The up-blocks' cache `[up_blocks, heads, cap, 2·d_k]` (extent `stride · tokens`).
    pub upsample: Tensor<'a>,
    /// The pre-lookahead context `[CONV2_K − 1, dim]` and the upsampling context `[2·stride,
    /// dim]`, read and written in place.
    pub pre_lookahead: Tensor<'a>,
    pub up_layer: Tensor<'a>,
    /// Write the kept frames back into the caches in place (state rule).
    pub write_back: bool,
    pub keep_conformer: &'a Keep,
    pub keep_upsample: &'a Keep,
}

impl Encoder {
    pub fn load(ld: &Loader<'_>, c: &EncoderConfig) -> Result<Self, LoadError> {
        let d = c.dim;
        let layers = |name: &str, n: usize| -> Result<Vec<ConformerLayer>, LoadError> {
            (0..n)
                .map(|i| ConformerLayer::load(ld, &format!("encoder.{name}.{i}"), c))
                .collect()
        };
        let pre = "encoder.pre_lookahead_layer";
        Ok(Encoder {
            cfg: c.clone(),
            embed: Embed::load(ld, "encoder.embed", d)?,
            pre_conv1: Conv1d::load(ld, &format!("{pre}.conv1"), d, d, c.pre_lookahead + 1)?,
            pre_conv2: CausalConv1d {
                conv: Conv1d::load(ld, &format!("{pre}.conv2"), d, d, CONV2_K)?,
            },
            encoders: layers("encoders", c.blocks)?,
            up_conv: CausalConv1d {
                conv: Conv1d::load(ld, "encoder.up_layer.conv", d, d, 2 * c.up_stride + 1)?,
            },
            up_embed: Embed::load(ld, "encoder.up_embed", d)?,
            up_encoders: layers("up_encoders", c.up_blocks)?,
            after_norm: LayerNorm::load(ld, "encoder.after_norm", d, EMBED_EPS)?,
        })
    }

    /// `forward_chunk` over the `t` embedded tokens in `w.a` (lookahead included; with
    /// `last_chunk` the lookahead is zero padding appended here): the output `[frames, dim]`
    /// lands in `w.a`. `pe` is the relative-position table (`[2·pe_size − 1, dim]`). Returns
    /// `(frames, conformer extent in tokens after retention)`.
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        caps: &Caps,
        pe: Tensor<'_>,
        (t, last_chunk): (usize, bool),
        st: EncoderState<'_>,
    ) -> Result<(usize, usize), FlowError> {
        let c = &self.cfg;
        let (d, la, s) = (c.dim, c.pre_lookahead, c.up_stride);
        self.embed
            .forward(cx, v(&w.a, &[t, d])?, v(&w.x, &[t, d])?, v(&w.b, &[t, d])?)?;
        let t = if last_chunk {
            ops::memset(cx, v(&w.b, &[t + la, d])?.rows(t, la)?, 0)?;
            t + la
        } else {
            t
        };
        let tn = t
            .checked_sub(la)
            .ok_or_else(|| FlowError::Input(format!("{t} tokens: fewer than the lookahead")))?;
        // pre-lookahead: conv1 (k = la + 1) sees the lookahead, leaky ReLU, causal conv2
        let col = Tensor::of(&w.col)?;
        let ctx = self.pre_conv2.context();
        let cat = v(&w.cat, &[ctx + tn, d])?;
        self.pre_conv2.load_context(cx, st.pre_lookahead, cat)?;
        let h = cat.rows(ctx, tn)?;
        // the leaky ReLU in the GEMM's launch (on the half path rounded there, as the vendor's
        // fp16 mode computes it in f16)
        let x = v(&w.b, &[t, d])?;
        self.pre_conv1
            .forward_act(cx, x, col, h, Act::LeakyRelu(0.01))?;
        let x = v(&w.x, &[tn, d])?;
        self.pre_conv2.forward(cx, cat, st.pre_lookahead, col, x)?;
        ops::add(cx, x, v(&w.b, &[tn, d])?)?;

        // first conformer stack (token clock)
        let (ws_tok, ws_up) = w.conformer()?;
        let mut kept = st.tokens + tn;
        for (i, layer) in self.encoders.iter().enumerate() {
            let lc = LayerCache {
                cache: st.conformer.index(0, i)?,
                extent: st.tokens,
                work: ws_tok.index(0, i)?,
                write_back: st.write_back,
                keep: st.keep_conformer,
            };
            kept = layer.forward(cx, w, (pe, caps.pe_size), (tn, d), lc)?;
        }

        // upsample ×s (nearest) after the 2s-row context, causal conv k = 2s + 1
        let tu = tn * s;
        let uctx = self.up_conv.context();
        let cat = v(&w.cat, &[uctx + tu, d])?;
        self.up_conv.load_context(cx, st.up_layer, cat)?;
        ops::repeat_rows(cx, cat.rows(uctx, tu)?, x, s)?;
        let a = v(&w.a, &[tu, d])?;
        self.up_conv.forward(cx, cat, st.up_layer, col, a)?;
        let x = v(&w.x, &[tu, d])?;
        self.up_embed.forward(cx, a, v(&w.b, &[tu, d])?, x)?;

        // second conformer stack (frame clock)
        for (i, layer) in self.up_encoders.iter().enumerate() {
            let lc = LayerCache {
                cache: st.upsample.index(0, i)?,
                extent: st.tokens * s,
                work: ws_up.index(0, i)?,
                write_back: st.write_back,
                keep: st.keep_upsample,
            };
            layer.forward(cx, w, (pe, caps.pe_size), (tu, d), lc)?;
        }
        self.after_norm.forward(cx, x, a)?;
        Ok((tu, kept))
    }
}
