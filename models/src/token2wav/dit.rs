//! The DiT estimator (`decoder_dit.DiT.forward_chunk`) over a CFG batch.

use dcc_kernels as k;

use super::FlowError;
use super::config::DitConfig;
use super::layers::{Conv1d, LayerNorm, Linear};
use super::weights::WeightStore;

/// Non-affine LayerNorms of the block (norm1/2/3, norm_final).
pub(crate) const ADALN_EPS: f32 = 1e-6;
/// q/k LayerNorm and the conv block's LayerNorm (torch default).
const NORM_EPS: f32 = 1e-5;
/// Causal conv kernel of `CausalConvBlock` (cache = `CONV_K − 1` rows per conv).
pub const CONV_K: usize = 3;
/// `TimestepEmbedder.scale` and `max_period`.
pub(crate) const T_SCALE: f32 = 1000.0;
pub(crate) const MAX_PERIOD: f32 = 10000.0;

#[derive(Clone, Debug)]
pub(crate) struct Block {
    pub(crate) ada: Linear,
    pub(crate) q: Linear,
    pub(crate) k: Linear,
    pub(crate) v: Linear,
    pub(crate) q_norm: LayerNorm,
    pub(crate) k_norm: LayerNorm,
    pub(crate) proj: Linear,
    pub(crate) conv1: Conv1d,
    pub(crate) conv_norm: LayerNorm,
    pub(crate) conv2: Conv1d,
    pub(crate) fc1: Linear,
    pub(crate) fc2: Linear,
}

impl Block {
    fn load(ws: &WeightStore, p: &str, c: &DitConfig) -> Result<Self, FlowError> {
        let (h, inner, hd) = (c.hidden, c.inner(), c.head_dim);
        Ok(Self {
            ada: Linear::load(ws, &format!("{p}.adaLN_modulation.1"), h, 9 * h, true)?,
            q: Linear::load(ws, &format!("{p}.attn.to_q"), h, inner, true)?,
            k: Linear::load(ws, &format!("{p}.attn.to_k"), h, inner, true)?,
            v: Linear::load(ws, &format!("{p}.attn.to_v"), h, inner, true)?,
            q_norm: LayerNorm::load(ws, &format!("{p}.attn.q_norm"), hd, NORM_EPS)?,
            k_norm: LayerNorm::load(ws, &format!("{p}.attn.k_norm"), hd, NORM_EPS)?,
            proj: Linear::load(ws, &format!("{p}.attn.proj"), inner, h, true)?,
            conv1: Conv1d::load(ws, &format!("{p}.conv.block.1"), h, h, CONV_K)?,
            conv_norm: LayerNorm::load(ws, &format!("{p}.conv.block.3"), h, NORM_EPS)?,
            conv2: Conv1d::load(ws, &format!("{p}.conv.block.6"), h, h, CONV_K)?,
            fc1: Linear::load(ws, &format!("{p}.mlp.fc1"), h, c.mlp_hidden, true)?,
            fc2: Linear::load(ws, &format!("{p}.mlp.fc2"), c.mlp_hidden, h, true)?,
        })
    }
}

/// The estimator's weights.
#[derive(Clone, Debug)]
pub struct Dit {
    pub(crate) cfg: DitConfig,
    pub(crate) t_mlp0: Linear,
    pub(crate) t_mlp2: Linear,
    pub(crate) in_proj: Linear,
    pub(crate) blocks: Vec<Block>,
    pub(crate) final_ada: Linear,
    pub(crate) final_linear: Linear,
}

/// Per-layer views of one solver step's estimator state for a CFG batch of `batch` rows.
///
/// `att[l]` is `[batch, heads, t_cache, 2·head_dim]` (keys ‖ values, **prepend**-ordered: the
/// newest frames first), `cnn[l]` is `[batch, 2·(CONV_K − 1), hidden]`: per batch row, the last
/// input rows of conv1 then of conv2 (time-major).
pub struct StepCache<'a> {
    pub att: &'a [f32],
    pub cnn: &'a [f32],
    pub t_cache: usize,
}

impl Dit {
    pub fn load(ws: &WeightStore, c: &DitConfig) -> Result<Self, FlowError> {
        let p = "decoder.estimator";
        Ok(Self {
            cfg: c.clone(),
            t_mlp0: Linear::load(
                ws,
                &format!("{p}.t_embedder.mlp.0"),
                c.freq_dim,
                c.hidden,
                true,
            )?,
            t_mlp2: Linear::load(
                ws,
                &format!("{p}.t_embedder.mlp.2"),
                c.hidden,
                c.hidden,
                true,
            )?,
            in_proj: Linear::load(ws, &format!("{p}.in_proj"), c.in_channels, c.hidden, true)?,
            blocks: (0..c.depth)
                .map(|i| Block::load(ws, &format!("{p}.blocks.{i}"), c))
                .collect::<Result<_, _>>()?,
            final_ada: Linear::load(
                ws,
                &format!("{p}.final_layer.adaLN_modulation.1"),
                c.hidden,
                2 * c.hidden,
                true,
            )?,
            final_linear: Linear::load(
                ws,
                &format!("{p}.final_layer.linear"),
                c.hidden,
                c.out_channels,
                true,
            )?,
        })
    }

    /// Elements of one layer's conv cache.
    pub fn cnn_elems(&self, batch: usize) -> usize {
        batch * 2 * (CONV_K - 1) * self.cfg.hidden
    }

    /// `SiLU(t_embedder(t))`: the adaLN conditioning vector shared by every batch row (the CFG
    /// batch repeats the same `t`).
    pub fn time_condition(&self, t: f32) -> Vec<f32> {
        let mut freq = vec![0.0f32; self.cfg.freq_dim];
        k::embed::timestep_embedding(t, T_SCALE, self.cfg.freq_dim, MAX_PERIOD, &mut freq);
        let mut h = self.t_mlp0.apply(1, &freq);
        k::act::silu_inplace(&mut h);
        let mut c = self.t_mlp2.apply(1, &h);
        // every adaLN_modulation starts with SiLU
        k::act::silu_inplace(&mut c);
        c
    }

    /// `forward_chunk` for `batch` rows of `t` new frames: `x_in` is `[batch, t, in_channels]`
    /// (`x ‖ mu ‖ spk ‖ cond` per frame), `cond_act = time_condition(t)`. Returns the velocity
    /// `[batch, t, out_channels]` and writes the new per-layer caches: `new_att[l]` =
    /// `[batch, heads, t + t_cache, 2·hd]` (new frames first), `new_cnn[l]`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward_chunk(
        &self,
        batch: usize,
        t: usize,
        x_in: &[f32],
        cond_act: &[f32],
        cache: &[StepCache<'_>],
        new_att: &mut [Vec<f32>],
        new_cnn: &mut [Vec<f32>],
    ) -> Vec<f32> {
        let c = &self.cfg;
        let (hid, heads, hd, inner) = (c.hidden, c.heads, c.head_dim, c.inner());
        let rows = batch * t;
        let mut x = self.in_proj.apply(rows, x_in);
        let mut tmp = vec![0.0f32; rows * hid];
        let scale = (1.0 / (hd as f64).sqrt()) as f32;
        for (l, blk) in self.blocks.iter().enumerate() {
            let sc = &cache[l];
            let tk = t + sc.t_cache;
            let m = blk.ada.apply(1, cond_act);
            let chunk = |i: usize| &m[i * hid..(i + 1) * hid];
            let (shift_msa, scale_msa, gate_msa) = (chunk(0), chunk(1), chunk(2));
            let (shift_mlp, scale_mlp, gate_mlp) = (chunk(3), chunk(4), chunk(5));
            let (shift_conv, scale_conv, gate_conv) = (chunk(6), chunk(7), chunk(8));

            // attention over [new ‖ cache]
            k::norm::layer_norm_modulate(rows, hid, &x, ADALN_EPS, shift_msa, scale_msa, &mut tmp);
            let q = blk.q.apply(rows, &tmp);
            let kk = blk.k.apply(rows, &tmp);
            let v = blk.v.apply(rows, &tmp);
            let q = blk.q_norm.apply(rows * heads, &q);
            let kk = blk.k_norm.apply(rows * heads, &kk);
            let kv = &mut new_att[l];
            kv.clear();
            kv.resize(batch * heads * tk * 2 * hd, 0.0);
            for b in 0..batch {
                for h in 0..heads {
                    let base = (b * heads + h) * tk * 2 * hd;
                    let src = b * t * inner + h * hd;
                    k::copy::copy_block(t, hd, &kk[src..], inner, &mut kv[base..], 2 * hd);
                    k::copy::copy_block(t, hd, &v[src..], inner, &mut kv[base + hd..], 2 * hd);
                    let n = sc.t_cache * 2 * hd;
                    let old = (b * heads + h) * n;
                    kv[base + t * 2 * hd..base + tk * 2 * hd]
                        .copy_from_slice(&sc.att[old..old + n]);
                }
            }
            let mut att = vec![0.0f32; rows * inner];
            k::attention::attention(
                batch,
                heads,
                t,
                tk,
                hd,
                scale,
                &q,
                k::attention::AttnLayout::rows(t, heads, hd),
                kv,
                k::attention::AttnLayout::kv_cache(heads, tk, hd, false),
                kv,
                k::attention::AttnLayout::kv_cache(heads, tk, hd, true),
                &mut att,
                k::attention::AttnLayout::rows(t, heads, hd),
            );
            let o = blk.proj.apply(rows, &att);
            k::elementwise::gated_add(rows, hid, &mut x, gate_msa, &o);

            // causal conv block
            k::norm::layer_norm_modulate(
                rows, hid, &x, ADALN_EPS, shift_conv, scale_conv, &mut tmp,
            );
            let ctx = CONV_K - 1;
            let nc = &mut new_cnn[l];
            nc.clear();
            nc.resize(batch * 2 * ctx * hid, 0.0);
            let mut conv_out = vec![0.0f32; rows * hid];
            let mut buf = vec![0.0f32; (t + ctx) * hid];
            for b in 0..batch {
                let cb = &sc.cnn[b * 2 * ctx * hid..(b + 1) * 2 * ctx * hid];
                let nb = &mut nc[b * 2 * ctx * hid..(b + 1) * 2 * ctx * hid];
                buf[..ctx * hid].copy_from_slice(&cb[..ctx * hid]);
                buf[ctx * hid..].copy_from_slice(&tmp[b * t * hid..(b + 1) * t * hid]);
                nb[..ctx * hid].copy_from_slice(&buf[t * hid..]);
                let mut y = blk.conv1.apply(t + ctx, &buf);
                let yn = blk.conv_norm.apply(t, &y);
                y.copy_from_slice(&yn);
                k::act::mish_inplace(&mut y);
                buf[..ctx * hid].copy_from_slice(&cb[ctx * hid..]);
                buf[ctx * hid..].copy_from_slice(&y);
                nb[ctx * hid..].copy_from_slice(&buf[t * hid..]);
                blk.conv2
                    .forward(t + ctx, &buf, &mut conv_out[b * t * hid..(b + 1) * t * hid]);
            }
            k::elementwise::gated_add(rows, hid, &mut x, gate_conv, &conv_out);

            // MLP
            k::norm::layer_norm_modulate(rows, hid, &x, ADALN_EPS, shift_mlp, scale_mlp, &mut tmp);
            let mut h1 = blk.fc1.apply(rows, &tmp);
            k::act::gelu_tanh_inplace(&mut h1);
            let h2 = blk.fc2.apply(rows, &h1);
            k::elementwise::gated_add(rows, hid, &mut x, gate_mlp, &h2);
        }
        let m = self.final_ada.apply(1, cond_act);
        k::norm::layer_norm_modulate(rows, hid, &x, ADALN_EPS, &m[..hid], &m[hid..], &mut tmp);
        self.final_linear.apply(rows, &tmp)
    }
}
