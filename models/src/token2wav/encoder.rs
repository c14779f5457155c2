//! `UpsampleConformerEncoderV2.forward_chunk` (batch 1) with its streaming caches.

use dcc_kernels as k;

use super::FlowError;
use super::config::EncoderConfig;
use super::layers::{Conv1d, LayerNorm, Linear, causal_concat};
use super::weights::WeightStore;

/// LayerNorm eps of `LinearNoSubsampling` and `after_norm`.
const EMBED_EPS: f32 = 1e-5;
/// LayerNorm eps inside `ConformerEncoderLayer`.
const LAYER_EPS: f32 = 1e-12;
/// Pre-lookahead conv2 kernel (its causal cache is `CONV2_K − 1` rows).
pub(crate) const CONV2_K: usize = 3;

/// `RelPositionMultiHeadedAttention` + `PositionwiseFeedForward` (SiLU), pre-norm, no macaron,
/// no conv module.
#[derive(Clone, Debug)]
pub(crate) struct ConformerLayer {
    pub(crate) norm_mha: LayerNorm,
    pub(crate) q: Linear,
    pub(crate) k: Linear,
    pub(crate) v: Linear,
    pub(crate) out: Linear,
    pub(crate) pos: Linear,
    pub(crate) pos_bias_u: Vec<f32>,
    pub(crate) pos_bias_v: Vec<f32>,
    pub(crate) norm_ff: LayerNorm,
    pub(crate) w1: Linear,
    pub(crate) w2: Linear,
}

impl ConformerLayer {
    fn load(ws: &WeightStore, p: &str, c: &EncoderConfig) -> Result<Self, FlowError> {
        let d = c.dim;
        let dk = d / c.heads;
        Ok(Self {
            norm_mha: LayerNorm::load(ws, &format!("{p}.norm_mha"), d, LAYER_EPS)?,
            q: Linear::load(ws, &format!("{p}.self_attn.linear_q"), d, d, true)?,
            k: Linear::load(
                ws,
                &format!("{p}.self_attn.linear_k"),
                d,
                d,
                ws.contains(&format!("{p}.self_attn.linear_k.bias")),
            )?,
            v: Linear::load(ws, &format!("{p}.self_attn.linear_v"), d, d, true)?,
            out: Linear::load(ws, &format!("{p}.self_attn.linear_out"), d, d, true)?,
            pos: Linear::load(ws, &format!("{p}.self_attn.linear_pos"), d, d, false)?,
            pos_bias_u: ws.get(&format!("{p}.self_attn.pos_bias_u"), &[c.heads, dk])?,
            pos_bias_v: ws.get(&format!("{p}.self_attn.pos_bias_v"), &[c.heads, dk])?,
            norm_ff: LayerNorm::load(ws, &format!("{p}.norm_ff"), d, LAYER_EPS)?,
            w1: Linear::load(
                ws,
                &format!("{p}.feed_forward.w_1"),
                d,
                c.linear_units,
                true,
            )?,
            w2: Linear::load(
                ws,
                &format!("{p}.feed_forward.w_2"),
                c.linear_units,
                d,
                true,
            )?,
        })
    }

    /// One layer over `t` new rows `x` (in place). `cache` is this layer's `[heads, t_cache, 2·d_k]`
    /// key/value cache (append-ordered) and is replaced by `[heads, t_cache + t, 2·d_k]`.
    /// `pos_table` is `espnet_rel_pos_table(t_cache + t)`.
    fn forward(
        &self,
        heads: usize,
        t: usize,
        x: &mut [f32],
        cache: &mut Vec<f32>,
        t_cache: usize,
        pos_table: &[f32],
    ) {
        let d = self.q.in_dim;
        let dk = d / heads;
        let tk = t_cache + t;
        // multi-headed self-attention with relative positions
        let xn = self.norm_mha.apply(t, x);
        let q = self.q.apply(t, &xn);
        let kk = self.k.apply(t, &xn);
        let v = self.v.apply(t, &xn);
        let mut kv = vec![0.0f32; heads * tk * 2 * dk];
        for h in 0..heads {
            // old rows first (append order), then the new ones
            let old = &cache[h * t_cache * 2 * dk..(h + 1) * t_cache * 2 * dk];
            let base = h * tk * 2 * dk;
            kv[base..base + old.len()].copy_from_slice(old);
            let dst = &mut kv[base + t_cache * 2 * dk..];
            k::copy::copy_block(t, dk, &kk[h * dk..], d, dst, 2 * dk);
            k::copy::copy_block(t, dk, &v[h * dk..], d, &mut dst[dk..], 2 * dk);
        }
        let p = self.pos.apply(2 * tk - 1, pos_table);
        let mut att = vec![0.0f32; t * d];
        k::attention::rel_pos_attention(
            heads,
            t,
            tk,
            dk,
            tk,
            &q,
            d,
            &self.pos_bias_u,
            &self.pos_bias_v,
            &kv,
            &p,
            &mut att,
            d,
        );
        *cache = kv;
        let o = self.out.apply(t, &att);
        k::elementwise::add_inplace(x, &o);
        // feed forward
        let xn = self.norm_ff.apply(t, x);
        let mut h1 = self.w1.apply(t, &xn);
        k::act::silu_inplace(&mut h1);
        let h2 = self.w2.apply(t, &h1);
        k::elementwise::add_inplace(x, &h2);
    }
}

/// `LinearNoSubsampling` + the positional-encoding input scale: `x ← LN(x·Wᵀ + b) · √dim`.
#[derive(Clone, Debug)]
pub(crate) struct Embed {
    pub(crate) lin: Linear,
    pub(crate) norm: LayerNorm,
    pub(crate) xscale: f32,
}

impl Embed {
    fn load(ws: &WeightStore, p: &str, d: usize) -> Result<Self, FlowError> {
        Ok(Self {
            lin: Linear::load(ws, &format!("{p}.out.0"), d, d, true)?,
            norm: LayerNorm::load(ws, &format!("{p}.out.1"), d, EMBED_EPS)?,
            xscale: (d as f64).sqrt() as f32,
        })
    }

    fn apply(&self, t: usize, x: &[f32]) -> Vec<f32> {
        let y = self.lin.apply(t, x);
        let mut y = self.norm.apply(t, &y);
        k::act::scale_inplace(&mut y, self.xscale);
        y
    }
}

/// The encoder's weights.
#[derive(Clone, Debug)]
pub struct Encoder {
    pub(crate) cfg: EncoderConfig,
    pub(crate) embed: Embed,
    pub(crate) pre_conv1: Conv1d,
    pub(crate) pre_conv2: Conv1d,
    pub(crate) encoders: Vec<ConformerLayer>,
    pub(crate) up_conv: Conv1d,
    pub(crate) up_embed: Embed,
    pub(crate) up_encoders: Vec<ConformerLayer>,
    pub(crate) after_norm: LayerNorm,
}

/// The encoder's streaming state (the vendor's `conformer_cnn_cache` / `conformer_att_cache`).
///
/// Key/value caches are append-ordered (oldest frame first). The vendor packs both stacks into
/// one tensor `[blocks + up_blocks, 1, heads, t_up, 2·d_k]`, repeating the token-clock caches
/// twice along time to fill `t_up = stride · t_tok`; here each stack keeps its own clock.
#[derive(Clone, Debug, PartialEq)]
pub struct ConformerCache {
    /// `[blocks, heads, t_tok, 2·d_k]`, token clock.
    pub att: Vec<f32>,
    /// `[up_blocks, heads, t_up, 2·d_k]`, frame clock.
    pub up_att: Vec<f32>,
    /// Cached tokens `t_tok` (frames `t_up = stride · t_tok`).
    pub t_tok: usize,
    /// Pre-lookahead conv2 context: last 2 rows of conv1's output, `[2, dim]` time-major.
    pub pre_cnn: Vec<f32>,
    /// Upsample conv context: last `2·stride` upsampled rows, `[2·stride, dim]`.
    pub up_cnn: Vec<f32>,
}

impl ConformerCache {
    /// The empty state (`cnn_cache = None` ≡ zeros, no attention context).
    pub fn empty(c: &EncoderConfig) -> Self {
        Self {
            att: Vec::new(),
            up_att: Vec::new(),
            t_tok: 0,
            pre_cnn: vec![0.0; (CONV2_K - 1) * c.dim],
            up_cnn: vec![0.0; 2 * c.up_stride * c.dim],
        }
    }

    /// Frame-clock extent of the attention cache (the vendor's `att_cache.shape[3]`).
    pub fn extent(&self, c: &EncoderConfig) -> usize {
        self.t_tok * c.up_stride
    }

    /// Retention: keep token rows `tok` of the first stack and frame rows `up` of the second
    /// (append-ordered segments, in order).
    pub fn retain(
        &mut self,
        c: &EncoderConfig,
        tok: &[std::ops::Range<usize>],
        up: &[std::ops::Range<usize>],
    ) {
        let dk2 = 2 * (c.dim / c.heads);
        let t_up = self.extent(c);
        let nt: usize = tok.iter().map(|r| r.len()).sum();
        let nu: usize = up.iter().map(|r| r.len()).sum();
        assert_eq!(
            nu,
            nt * c.up_stride,
            "conformer retention must keep the two clocks aligned"
        );
        let mut att = vec![0.0; c.blocks * c.heads * nt * dk2];
        k::copy::gather_time_segments(
            c.blocks * c.heads,
            self.t_tok,
            dk2,
            tok,
            &self.att,
            &mut att,
        );
        let mut up_att = vec![0.0; c.up_blocks * c.heads * nu * dk2];
        k::copy::gather_time_segments(
            c.up_blocks * c.heads,
            t_up,
            dk2,
            up,
            &self.up_att,
            &mut up_att,
        );
        self.att = att;
        self.up_att = up_att;
        self.t_tok = nt;
    }
}

impl Encoder {
    pub fn load(ws: &WeightStore, c: &EncoderConfig) -> Result<Self, FlowError> {
        let d = c.dim;
        let layers = |name: &str, n: usize| -> Result<Vec<ConformerLayer>, FlowError> {
            (0..n)
                .map(|i| ConformerLayer::load(ws, &format!("encoder.{name}.{i}"), c))
                .collect()
        };
        Ok(Self {
            cfg: c.clone(),
            embed: Embed::load(ws, "encoder.embed", d)?,
            pre_conv1: Conv1d::load(
                ws,
                "encoder.pre_lookahead_layer.conv1",
                d,
                d,
                c.pre_lookahead + 1,
            )?,
            pre_conv2: Conv1d::load(ws, "encoder.pre_lookahead_layer.conv2", d, d, CONV2_K)?,
            encoders: layers("encoders", c.blocks)?,
            up_conv: Conv1d::load(ws, "encoder.up_layer.conv", d, d, 2 * c.up_stride + 1)?,
            up_embed: Embed::load(ws, "encoder.up_embed", d)?,
            up_encoders: layers("up_encoders", c.up_blocks)?,
            after_norm: LayerNorm::load(ws, "encoder.after_norm", d, EMBED_EPS)?,
        })
    }

    /// `forward_chunk(xs, last_chunk, cnn_cache, att_cache)`: `xs` is the `[t, dim]` token
    /// embedding of the chunk including its `pre_lookahead` lookahead tokens (with `last_chunk`
    /// the lookahead is zero padding instead). Returns `(frames, h)` with `h` `[frames, dim]`,
    /// `frames = stride · (t − pre_lookahead)` (`stride · t` for the last chunk).
    pub fn forward_chunk(
        &self,
        t: usize,
        xs: &[f32],
        last_chunk: bool,
        cache: &mut ConformerCache,
    ) -> (usize, Vec<f32>) {
        let c = &self.cfg;
        let d = c.dim;
        let la = c.pre_lookahead;
        let mut x = self.embed.apply(t, xs);
        let t = if last_chunk {
            x.resize((t + la) * d, 0.0);
            t + la
        } else {
            t
        };
        assert!(t > la + 1, "chunk too short for the pre-lookahead layer");
        // pre-lookahead layer: conv1 (k = la + 1) sees the lookahead, leaky ReLU, causal conv2
        let mut h = self.pre_conv1.apply(t, &x);
        let tn = t - la;
        k::act::leaky_relu_inplace(&mut h, 0.01);
        let cat = causal_concat(&mut cache.pre_cnn, &h, d);
        let mut y = self.pre_conv2.apply(tn + CONV2_K - 1, &cat);
        k::elementwise::add_inplace(&mut y, &x[..tn * d]);
        let mut x = y;

        // first conformer stack, token clock
        let t_cache = cache.t_tok;
        let dk2 = 2 * (d / c.heads);
        let mut pe = vec![0.0f32; (2 * (t_cache + tn) - 1) * d];
        k::embed::espnet_rel_pos_table(t_cache + tn, d, &mut pe);
        let per = c.heads * t_cache * dk2;
        let mut new_att = Vec::with_capacity(c.blocks * c.heads * (t_cache + tn) * dk2);
        for (i, layer) in self.encoders.iter().enumerate() {
            let mut lc = cache.att[i * per..(i + 1) * per].to_vec();
            layer.forward(c.heads, tn, &mut x, &mut lc, t_cache, &pe);
            new_att.extend_from_slice(&lc);
        }

        // upsample: nearest ×stride, causal conv k = 2·stride + 1
        let s = c.up_stride;
        let tu = tn * s;
        let mut up = vec![0.0f32; tu * d];
        k::copy::repeat_rows(tn, d, s, &x, &mut up);
        let cat = causal_concat(&mut cache.up_cnn, &up, d);
        let y = self.up_conv.apply(tu + 2 * s, &cat);
        let mut x = self.up_embed.apply(tu, &y);

        // second conformer stack, frame clock
        let tu_cache = t_cache * s;
        let mut pe = vec![0.0f32; (2 * (tu_cache + tu) - 1) * d];
        k::embed::espnet_rel_pos_table(tu_cache + tu, d, &mut pe);
        let per = c.heads * tu_cache * dk2;
        let mut new_up_att = Vec::with_capacity(c.up_blocks * c.heads * (tu_cache + tu) * dk2);
        for (i, layer) in self.up_encoders.iter().enumerate() {
            let mut lc = cache.up_att[i * per..(i + 1) * per].to_vec();
            layer.forward(c.heads, tu, &mut x, &mut lc, tu_cache, &pe);
            new_up_att.extend_from_slice(&lc);
        }
        cache.att = new_att;
        cache.up_att = new_up_att;
        cache.t_tok = t_cache + tn;
        (tu, self.after_norm.apply(tu, &x))
    }
}
