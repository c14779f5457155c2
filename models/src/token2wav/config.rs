//! Model dimensions: the released checkpoint's (`full`), the golden test's (`tiny`), or inferred
//! from the weight shapes.

use super::FlowError;
use crate::nn::WeightStore;

/// UpsampleConformerEncoderV2 dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncoderConfig {
    /// Model width (`output_size`; the token embedding has the same width).
    pub dim: usize,
    pub heads: usize,
    /// Feed-forward hidden width (`linear_units`).
    pub linear_units: usize,
    /// Conformer blocks before upsampling.
    pub blocks: usize,
    /// Conformer blocks after upsampling.
    pub up_blocks: usize,
    /// Lookahead tokens consumed by the pre-lookahead conv (`pre_lookahead_len`).
    pub pre_lookahead: usize,
    /// Upsampling factor (token clock → frame clock).
    pub up_stride: usize,
}

/// DiT estimator dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DitConfig {
    /// Input channels: `x ‖ mu ‖ spk ‖ cond` = 4 × mel bins.
    pub in_channels: usize,
    pub out_channels: usize,
    pub hidden: usize,
    pub depth: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub mlp_hidden: usize,
    /// Sinusoidal timestep feature width.
    pub freq_dim: usize,
}

impl DitConfig {
    pub fn inner(&self) -> usize {
        self.heads * self.head_dim
    }
}

/// The whole flow (`CausalMaskedDiffWithXvec`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowConfig {
    pub vocab: usize,
    /// Mel bins (`output_size`).
    pub mel: usize,
    /// Speaker embedding width.
    pub spk_dim: usize,
    pub encoder: EncoderConfig,
    pub dit: DitConfig,
}

impl FlowConfig {
    /// Step-Audio2 token2wav flow (flow.yaml of the released checkpoint).
    pub fn full() -> Self {
        Self::with(512, 8, 2048, 6, 4, 16, 512, 8, 64)
    }

    /// The golden test's tiny configuration (same code paths).
    pub fn tiny() -> Self {
        Self::with(64, 2, 128, 2, 1, 2, 64, 2, 32)
    }

    #[allow(clippy::too_many_arguments)]
    fn with(
        enc_dim: usize,
        enc_heads: usize,
        enc_units: usize,
        enc_blocks: usize,
        enc_up_blocks: usize,
        dit_depth: usize,
        dit_hidden: usize,
        dit_heads: usize,
        dit_head_dim: usize,
    ) -> Self {
        Self {
            vocab: 6561,
            mel: 80,
            spk_dim: 192,
            encoder: EncoderConfig {
                dim: enc_dim,
                heads: enc_heads,
                linear_units: enc_units,
                blocks: enc_blocks,
                up_blocks: enc_up_blocks,
                pre_lookahead: 3,
                up_stride: 2,
            },
            dit: DitConfig {
                in_channels: 320,
                out_channels: 80,
                hidden: dit_hidden,
                depth: dit_depth,
                heads: dit_heads,
                head_dim: dit_head_dim,
                mlp_hidden: 4 * dit_hidden,
                freq_dim: 256,
            },
        }
    }

    /// Infers every dimension from the shapes of a vendor state_dict.
    pub fn from_weights(w: &WeightStore) -> Result<Self, FlowError> {
        let bad = |what: &str| FlowError::Config(what.to_string());
        let (vocab, dim) = dims2(w.shape("input_embedding.weight")?, "input_embedding.weight")?;
        let (mel, _) = dims2(w.shape("encoder_proj.weight")?, "encoder_proj.weight")?;
        let (_, spk_dim) = dims2(
            w.shape("spk_embed_affine_layer.weight")?,
            "spk_embed_affine_layer.weight",
        )?;
        let blocks = w.count_indexed("encoder.encoders", "norm_mha.weight");
        let up_blocks = w.count_indexed("encoder.up_encoders", "norm_mha.weight");
        if blocks == 0 || up_blocks == 0 {
            return Err(bad(&format!(
                "{}: no conformer blocks found (`encoder.encoders.<i>.norm_mha.weight`: {blocks}, \
                 `encoder.up_encoders.<i>.norm_mha.weight`: {up_blocks})",
                w.file()
            )));
        }
        let pbu = "encoder.encoders.0.self_attn.pos_bias_u";
        let (heads, dk) = dims2(w.shape(pbu)?, pbu)?;
        if heads.checked_mul(dk) != Some(dim) {
            return Err(bad(&format!(
                "{}: `{pbu}` is [{heads}, {dk}]: {heads} heads × d_k {dk} != the encoder width \
                 {dim} (`input_embedding.weight` is [{vocab}, {dim}])",
                w.file()
            )));
        }
        let w1 = "encoder.encoders.0.feed_forward.w_1.weight";
        let (linear_units, _) = dims2(w.shape(w1)?, w1)?;
        let pre = w.shape("encoder.pre_lookahead_layer.conv1.weight")?;
        let up = w.shape("encoder.up_layer.conv.weight")?;
        if pre.len() != 3 || up.len() != 3 || pre[2] < 2 || up[2] % 2 == 0 || up[2] < 3 {
            return Err(bad(&format!(
                "{}: `encoder.pre_lookahead_layer.conv1.weight` is {pre:?} (want 3 dimensions, \
                 kernel ≥ 2), `encoder.up_layer.conv.weight` is {up:?} (want 3 dimensions, an \
                 odd kernel ≥ 3)",
                w.file()
            )));
        }
        let d = "decoder.estimator";
        let name = |s: &str| format!("{d}.{s}");
        let n = name("in_proj.weight");
        let (hidden, in_channels) = dims2(w.shape(&n)?, &n)?;
        let depth = w.count_indexed(&format!("{d}.blocks"), "attn.to_q.weight");
        if depth == 0 {
            return Err(bad(&format!(
                "{}: no DiT blocks found (`{d}.blocks.<i>.attn.to_q.weight`)",
                w.file()
            )));
        }
        let qn = name("blocks.0.attn.q_norm.weight");
        let q_norm = w.shape(&qn)?;
        let head_dim = *q_norm.first().ok_or_else(|| {
            bad(&format!(
                "{}: `{qn}` is {q_norm:?}, want [head_dim]",
                w.file()
            ))
        })?;
        let tq = name("blocks.0.attn.to_q.weight");
        let (inner, _) = dims2(w.shape(&tq)?, &tq)?;
        if head_dim == 0 || inner % head_dim != 0 {
            return Err(bad(&format!(
                "{}: `{tq}` has {inner} rows, not a multiple of head_dim {head_dim} (`{qn}`)",
                w.file()
            )));
        }
        let fc1 = name("blocks.0.mlp.fc1.weight");
        let (mlp_hidden, _) = dims2(w.shape(&fc1)?, &fc1)?;
        let fl = name("final_layer.linear.weight");
        let (out_channels, _) = dims2(w.shape(&fl)?, &fl)?;
        let te = name("t_embedder.mlp.0.weight");
        let (_, freq_dim) = dims2(w.shape(&te)?, &te)?;
        if Some(in_channels) != mel.checked_mul(3).and_then(|m| m.checked_add(out_channels))
            || out_channels != mel
        {
            return Err(bad(&format!(
                "{}: the DiT input is not x ‖ mu ‖ spk ‖ cond of mel width: `{n}` has \
                 {in_channels} columns, `{fl}` {out_channels} rows, `encoder_proj.weight` {mel} \
                 rows (want {mel} rows and 4 × {mel} columns)",
                w.file()
            )));
        }
        Ok(Self {
            vocab,
            mel,
            spk_dim,
            encoder: EncoderConfig {
                dim,
                heads,
                linear_units,
                blocks,
                up_blocks,
                pre_lookahead: pre[2] - 1,
                up_stride: (up[2] - 1) / 2,
            },
            dit: DitConfig {
                in_channels,
                out_channels,
                hidden,
                depth,
                heads: inner / head_dim,
                head_dim,
                mlp_hidden,
                freq_dim,
            },
        })
    }
}

fn dims2(s: &[usize], name: &str) -> Result<(usize, usize), FlowError> {
    match s {
        [a, b] => Ok((*a, *b)),
        _ => Err(FlowError::Config(format!(
            "tensor `{name}`: expected 2 dimensions, found shape {s:?}"
        ))),
    }
}
