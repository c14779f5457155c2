//! The DiT estimator (`decoder_dit.DiT.forward_chunk`) over a classifier-free-guidance batch of
//! two, on the nn layers, with its streaming state: every block's key/value cache
//! (prepend-ordered: the new frames first) and its causal conv block's two contexts.

use dcc_runtime::ops::{self, Act, Ctx, Tensor};

use super::FlowError;
use super::config::DitConfig;
use super::half;
use super::work::{Work, v};
use crate::nn::{
    AdaNorm, Conv1d, History, KvElem, LayerNorm, Linear, LoadError, Loader, Mlp, SelfAttention,
};

/// Batch rows of the classifier-free-guidance estimator call (conditional, unconditional).
pub(super) const CFG_BATCH: usize = 2;
/// Non-affine LayerNorms of the block (norm1/2/3, norm_final).
const ADALN_EPS: f32 = 1e-6;
/// q/k LayerNorms and the conv block's LayerNorm (torch default).
const NORM_EPS: f32 = 1e-5;
/// Causal conv kernel of `CausalConvBlock` (context = `CONV_K − 1` frames per conv).
pub(super) const CONV_K: usize = 3;
/// `TimestepEmbedder.scale` and `max_period`.
const T_SCALE: f32 = 1000.0;
const MAX_PERIOD: f32 = 10000.0;
/// adaLN modulations per block: shift, scale, gate of the attention, the MLP and the conv.
const MODS: usize = 9;
const SHIFT_MSA: usize = 0;
const SCALE_MSA: usize = 1;
const GATE_MSA: usize = 2;
const SHIFT_MLP: usize = 3;
const SCALE_MLP: usize = 4;
const GATE_MLP: usize = 5;
const SHIFT_CONV: usize = 6;
const SCALE_CONV: usize = 7;
const GATE_CONV: usize = 8;

/// One DiT block: attention, the causal conv block (conv → LayerNorm → Mish → conv) and the
/// GELU-tanh MLP, each behind an adaLN-modulated norm and a gated residual.
struct Block {
    attn: SelfAttention,
    conv1: Conv1d,
    conv_norm: LayerNorm,
    conv2: Conv1d,
    mlp: Mlp,
}

impl Block {
    fn load(ld: &Loader<'_>, p: &str, c: &DitConfig) -> Result<Self, LoadError> {
        let h = c.hidden;
        let (fc1, fc2) = (format!("{p}.mlp.fc1"), format!("{p}.mlp.fc2"));
        Ok(Block {
            attn: SelfAttention::load(
                ld,
                &format!("{p}.attn"),
                h,
                (c.heads, c.head_dim),
                NORM_EPS,
            )?,
            conv1: Conv1d::load(ld, &format!("{p}.conv.block.1"), h, h, CONV_K)?,
            conv_norm: LayerNorm::load(ld, &format!("{p}.conv.block.3"), h, NORM_EPS)?,
            conv2: Conv1d::load(ld, &format!("{p}.conv.block.6"), h, h, CONV_K)?,
            mlp: Mlp::load(ld, (&fc1, &fc2), h, c.mlp_hidden, Act::GeluTanh)?,
        })
    }
}

/// The estimator's weights.
pub(super) struct Dit {
    cfg: DitConfig,
    t_mlp0: Linear,
    t_mlp2: Linear,
    in_proj: Linear,
    blocks: Vec<Block>,
    /// Every block's `adaLN_modulation.1` then the final layer's, stacked (`[depth·9·hidden +
    /// 2·hidden, hidden]`): one GEMM per solver step.
    ada_all: Linear,
    final_linear: Linear,
    norm: AdaNorm,
}

/// One solver step's estimator state over `n` sessions (tensors of their regions, this step's
/// slices); batch row `cfg·s + c` is session `s`'s CFG row `c`. `K`: the element type of the
/// carries and the workspace (f32, or binary16 at the contract's `half` point; [`KvElem`]).
pub(super) struct StepState<'a, 'b, K: KvElem = f32> {
    /// Each session's carry `[depth, cfg, heads, cap, 2·head_dim]`, extent `extent` (the same
    /// for all: they share a catalog class).
    pub carries: &'b [Tensor<'a, K>],
    pub extent: usize,
    /// The history frames `0..staged` the step copies into the workspace; the attention reads
    /// frames `staged..extent` where the carries hold them (`nn::History`). `extent` where the
    /// cache's element type reads only the workspace ([`KvElem::READS_CARRIES`]).
    pub staged: usize,
    /// The solver workspace `[depth, n·cfg, heads, work, 2·head_dim]`.
    pub work: Tensor<'a, K>,
    /// The conv contexts `[depth, n·cfg, conv, CONV_K − 1, hidden]`, read and written in place.
    pub conv: Tensor<'a>,
}

/// Copies each session's staged history (its carry's frames `0..staged`, every layer) behind
/// the `frames` new frames of its rows of the workspace (`[new ‖ history]`, the prepend order the
/// attention reads): one `copy.batched` launch per session covering all `depth` layers
/// (`copy.batched_f16` on a binary16 cache), since a session's rows repeat at one stride from
/// layer to layer on both sides. Nothing in a step writes those frames, or the carries, before
/// the attention of the last layer reads them (each layer writes only its new frames
/// `0..frames`; the write-back comes after), so staging them once per step equals copying them
/// layer by layer before each attention, as moves, bit for bit, and the frames left in the
/// carries are read there as they would be read from a copy.
fn stage_histories<K: KvElem>(
    cx: &Ctx<'_>,
    st: &StepState<'_, '_, K>,
    frames: usize,
) -> Result<(), FlowError> {
    let l = st.staged.min(st.extent);
    if l == 0 {
        return Ok(());
    }
    // [depth, cfg, heads, l, 2·hd] → [depth, cfg·heads, l·2·hd]
    fn rows<K: KvElem>(t: Tensor<'_, K>) -> Result<Tensor<'_, K>, ops::OpError> {
        t.flatten(1, 2)?.flatten(2, 3)
    }
    for (i, carry) in st.carries.iter().enumerate() {
        let dst = st
            .work
            .narrow(1, i * CFG_BATCH, CFG_BATCH)?
            .narrow(3, frames, l)?;
        ops::copy_batched(cx, rows(dst)?, rows(carry.narrow(3, 0, l)?)?)?;
    }
    Ok(())
}

impl Dit {
    pub fn load(ld: &Loader<'_>, c: &DitConfig) -> Result<Self, LoadError> {
        let p = "decoder.estimator";
        let h = c.hidden;
        let ada: Vec<(String, usize)> = (0..c.depth)
            .map(|i| (format!("{p}.blocks.{i}.adaLN_modulation.1"), MODS * h))
            .chain([(format!("{p}.final_layer.adaLN_modulation.1"), 2 * h)])
            .collect();
        let ada: Vec<(&str, usize)> = ada.iter().map(|(n, o)| (n.as_str(), *o)).collect();
        Ok(Dit {
            cfg: c.clone(),
            t_mlp0: Linear::load(ld, &format!("{p}.t_embedder.mlp.0"), c.freq_dim, h, true)?,
            t_mlp2: Linear::load(ld, &format!("{p}.t_embedder.mlp.2"), h, h, true)?,
            in_proj: Linear::load(ld, &format!("{p}.in_proj"), c.in_channels, h, true)?,
            blocks: (0..c.depth)
                .map(|i| Block::load(ld, &format!("{p}.blocks.{i}"), c))
                .collect::<Result<_, _>>()?,
            ada_all: Linear::stacked(ld, &ada, h, true)?,
            final_linear: Linear::load(
                ld,
                &format!("{p}.final_layer.linear"),
                h,
                c.out_channels,
                true,
            )?,
            norm: AdaNorm { eps: ADALN_EPS },
        })
    }

    /// Floats of one solver step's time condition: every block's nine adaLN modulations, then
    /// the final layer's two, `hidden` each.
    pub fn mods_len(&self) -> usize {
        (self.cfg.depth * MODS + 2) * self.cfg.hidden
    }

    /// The time condition of the estimator at time `t` into `mods` (`[1, mods_len]`):
    /// `SiLU(t_embedder(t))` (through `w.small`), then every block's modulations and the final
    /// layer's in one GEMM. It depends on `t` alone, not on any session: the solver computes it
    /// once per step for all the sessions of a call, or reads it from the flow's table of every
    /// step's (`DeviceFlow::prepare_time_conditions`: the same launches, once per process).
    pub fn time_condition(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        t: f32,
        mods: Tensor<'_>,
    ) -> Result<(), FlowError> {
        let c = &self.cfg;
        let (hid, fd) = (c.hidden, c.freq_dim);
        let small = Tensor::of(&w.small)?;
        let (freq, th, cond) = (
            small.narrow(0, 0, fd)?,
            small.narrow(0, fd, hid)?,
            small.narrow(0, fd + hid, hid)?,
        );
        if half::rounds(cx.gemm_path()) {
            ops::timestep_embedding_f16(cx, freq, t, T_SCALE, MAX_PERIOD)?;
        } else {
            ops::timestep_embedding(cx, freq, t, T_SCALE, MAX_PERIOD)?;
        }
        self.t_mlp0
            .forward_act(cx, freq.view(&[1, fd])?, th.view(&[1, hid])?, Act::Silu)?;
        self.t_mlp2
            .forward_act(cx, th.view(&[1, hid])?, cond.view(&[1, hid])?, Act::Silu)?;
        self.ada_all.forward(cx, cond.view(&[1, hid])?, mods)?;
        Ok(())
    }

    /// The estimator over the `frames` new frames of every session's CFG rows in `w.xin`
    /// (`[n·cfg·frames, in_channels]`), its time condition in `mods` (`[1, mods_len]`, what
    /// [`Dit::time_condition`] wrote): leaves the final layer's modulated norm of the output in
    /// `w.xn` (the caller writes the carries back, then calls [`Dit::output`]). Every launch
    /// covers the rows of all `n` sessions but the copies of each session's history (its own
    /// addresses).
    pub fn forward<K: KvElem>(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        mods: Tensor<'_>,
        frames: usize,
        st: StepState<'_, '_, K>,
    ) -> Result<(), FlowError> {
        let c = &self.cfg;
        let (hid, depth) = (c.hidden, c.depth);
        let half = half::rounds(cx.gemm_path());
        let batch = CFG_BATCH * st.carries.len();
        let rows = batch * frames;
        let n_mods = depth * MODS + 2;
        // in the vendor's fp16 mode every modulation's `1 + scale` is an f16 sum: the modulated
        // norms below round it themselves (`*_f16`), the scale rows stay as the linear wrote them
        let mods = mods.view(&[n_mods, hid])?;
        let m = |i: usize| mods.index(0, i);
        let mm = |li: usize, a: usize, b: usize| -> Result<_, ops::OpError> {
            Ok((m(li * MODS + a)?, m(li * MODS + b)?))
        };

        let (x, xn) = (v(&w.x, &[rows, hid])?, v(&w.xn, &[rows, hid])?);
        self.in_proj
            .forward(cx, v(&w.xin, &[rows, c.in_channels])?, x)?;
        if half {
            self.norm
                .forward_f16(cx, x, mm(0, SHIFT_MSA, SCALE_MSA)?, xn)?;
        } else {
            self.norm.forward(cx, x, mm(0, SHIFT_MSA, SCALE_MSA)?, xn)?;
        }
        let ctx = CONV_K - 1;
        let last = frames
            .checked_sub(1)
            .ok_or_else(|| FlowError::Input("a solver step over no frames".into()))?;
        let ccol = v(&w.ccol, &[2, batch, frames, CONV_K * hid])?;
        let (col1, col2) = (ccol.index(0, 0)?, ccol.index(0, 1)?);
        let (o, att) = (v(&w.o, &[rows, hid])?, v(&w.att, &[rows, hid])?);
        let scratch = (Tensor::of(&w.qkv)?, Tensor::of(&w.qn)?, Tensor::of(&w.att)?);
        stage_histories(cx, &st, frames)?;
        let mut layer_carries = Vec::with_capacity(st.carries.len());
        for (li, blk) in self.blocks.iter().enumerate() {
            // attention over [new ‖ history]; xn holds modulate(norm1(x)) here
            let work = st.work.index(0, li)?;
            layer_carries.clear();
            if st.staged < st.extent {
                for c in st.carries {
                    layer_carries.push(c.index(0, li)?);
                }
            }
            let history = History {
                extent: st.extent,
                staged: st.staged,
                carries: &layer_carries,
            };
            blk.attn.forward(cx, xn, &history, work, scratch, o)?;
            // x += gate_msa · o; xn = modulate(norm3(x), shift_conv, scale_conv)
            let gate = (m(li * MODS + GATE_MSA)?, o);
            let next = mm(li, SHIFT_CONV, SCALE_CONV)?;
            self.gated(cx, half, x, gate, next, xn)?;
            // causal conv block; the contexts of both convs and both CFG rows in place
            let conv = st.conv.index(0, li)?;
            let xb = v(&w.xn, &[batch, frames, hid])?;
            ops::conv_im2col(cx, col1, xb, conv.index(1, 0)?, CONV_K)?;
            let q = v(&w.q, &[batch, frames, hid])?;
            blk.conv1
                .linear()
                .forward(cx, col1.flatten(0, 1)?, q.flatten(0, 1)?)?;
            // LayerNorm + Mish of conv1's output, straight into conv2's im2col rows
            let norm = blk.conv_norm.params()?;
            let eps = blk.conv_norm.eps();
            let ctx2 = conv.index(1, 1)?;
            ops::layer_norm_act_im2col(cx, col2, q, norm, eps, Act::Mish, ctx2, CONV_K)?;
            // new contexts: the last ctx rows of ctx ‖ input, i.e. slots 1..K of each batch's
            // last im2col row, of both convs
            let tail = ccol
                .index(2, last)?
                .narrow(2, hid, ctx * hid)?
                .transpose(0, 1)?;
            ops::copy_batched(cx, conv.flatten(2, 3)?, tail)?;
            blk.conv2.linear().forward(cx, col2.flatten(0, 1)?, att)?;
            // x += gate_conv · conv; xn = modulate(norm2(x), shift_mlp, scale_mlp)
            let gate = (m(li * MODS + GATE_CONV)?, att);
            self.gated(cx, half, x, gate, mm(li, SHIFT_MLP, SCALE_MLP)?, xn)?;
            blk.mlp
                .forward(cx, xn, v(&w.hidden, &[rows, c.mlp_hidden])?, o)?;
            // x += gate_mlp · mlp; xn = the next block's modulate(norm1(x)) (or the final
            // layer's)
            let next = if li + 1 < depth {
                mm(li + 1, SHIFT_MSA, SCALE_MSA)?
            } else {
                (m(depth * MODS)?, m(depth * MODS + 1)?)
            };
            let gate = (m(li * MODS + GATE_MLP)?, o);
            self.gated(cx, half, x, gate, next, xn)?;
        }
        Ok(())
    }

    /// The gated residual `x += gate · y`, then `xn` = the next modulated norm of `x`: one fused
    /// launch; in the vendor's fp16 mode (`half`) also one, the residual rounded as it rounds it
    /// (`x = rn16(x + rn16(gate · y))`) and the norm modulated by `rn16(1 + scale)`.
    fn gated(
        &self,
        cx: &Ctx<'_>,
        half: bool,
        x: Tensor<'_>,
        (gate, y): (Tensor<'_>, Tensor<'_>),
        next: (Tensor<'_>, Tensor<'_>),
        xn: Tensor<'_>,
    ) -> Result<(), FlowError> {
        if half {
            self.norm.gated_f16(cx, x, (gate, y), next, xn)?;
        } else {
            self.norm.gated(cx, x, (gate, y), next, xn)?;
        }
        Ok(())
    }

    /// The final layer's linear over `w.xn`: the velocity of every session's CFG rows in `w.vel`
    /// (`[n·cfg·frames, out_channels]`).
    pub fn output(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        frames: usize,
        sessions: usize,
    ) -> Result<(), FlowError> {
        let rows = CFG_BATCH * sessions * frames;
        let (hid, out) = (self.cfg.hidden, self.cfg.out_channels);
        self.final_linear
            .forward(cx, v(&w.xn, &[rows, hid])?, v(&w.vel, &[rows, out])?)?;
        Ok(())
    }
}
