//! What a flow holds once per process for every session it serves: the activation workspace,
//! sized once for the largest call, and the per-process part of the contract's arena.
//!
//! Sessions of one flow are time-multiplexed on its one device stream: no two calls run at
//! once. So the state a call leaves nothing in — the activations here, and the arena regions
//! whose declared lifetime ends within one call (`solver_workspace`, `lifetime: iteration`: one
//! solver step's slice; `attention_mask`, `lifetime: operator`) — is placed once ([`DeviceFlow::process_arena`]),
//! and each session owns only the per-session part of the arena (lifetime `turn` / `session`:
//! the carries, caches and conv contexts).

use std::sync::Arc;

use dcc_runtime::ProcessArena;
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::contract::ArenaLayout;
use dcc_runtime::ops::{OpError, Tensor};

use super::FlowError;
use super::config::FlowConfig;
use super::dit::{CFG_BATCH, CONV_K};
use super::encoder::CONV2_K;
use super::flow::DeviceFlow;

/// Shapes the device buffers are sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest token count of one call, lookahead included (the prompt call: 151 + 3).
    pub max_call_tokens: usize,
    /// Cache capacity `L` in frames: every session's caches (their kept frames, `head + tail`)
    /// must fit.
    pub carry_frames: usize,
}

/// Capacities derived from the [`DeviceLimits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Caps {
    /// Tokens of one call at most (`max_call_tokens + lookahead`).
    pub t_tok: usize,
    /// Frames of one call at most (`stride · t_tok`).
    pub t_up: usize,
    /// Per-layer conformer workspace: tokens (`L / stride + t_tok`) and frames (`L + t_up`).
    pub work_tok: usize,
    pub work_up: usize,
    /// Size of the relative-position table (`2·pe_size − 1` rows): `work_up`.
    pub pe_size: usize,
}

impl Caps {
    pub fn new(cfg: &FlowConfig, limits: &DeviceLimits) -> Caps {
        let e = &cfg.encoder;
        let t_tok = limits.max_call_tokens + e.pre_lookahead;
        let t_up = t_tok * e.up_stride;
        let l = limits.carry_frames;
        Caps {
            t_tok,
            t_up,
            work_tok: l / e.up_stride + t_tok,
            work_up: l + t_up,
            pe_size: l + t_up,
        }
    }
}

/// Activation buffers (each used as the views the ops need at the call's sizes).
pub(super) struct Work {
    pub ids: DeviceBuffer,
    pub a: DeviceBuffer,
    pub b: DeviceBuffer,
    pub x: DeviceBuffer,
    pub xn: DeviceBuffer,
    pub q: DeviceBuffer,
    pub k: DeviceBuffer,
    pub v: DeviceBuffer,
    pub qn: DeviceBuffer,
    /// The DiT's fused q‖k‖v projection `[rows, 3·inner]`.
    pub qkv: DeviceBuffer,
    /// Every adaLN modulation of a solver step: `[depth, 9, hidden]` then the final layer's
    /// `[2, hidden]` (one GEMM of the step's time condition).
    pub mods: DeviceBuffer,
    /// im2col rows of the DiT conv block: conv1 `[rows, CONV_K·hidden]` then conv2 (same).
    pub ccol: DeviceBuffer,
    pub att: DeviceBuffer,
    pub o: DeviceBuffer,
    pub hidden: DeviceBuffer,
    pub cat: DeviceBuffer,
    pub col: DeviceBuffer,
    pub pos: DeviceBuffer,
    /// Per-layer conformer attention workspaces `[carry ‖ new]`: token-clock blocks `[blocks,
    /// heads, work_tok, 2·d_k]` then frame-clock up-blocks `[up_blocks, heads, work_up,
    /// 2·d_k]` (the stock store materializes its fresh caches from here after the call); a
    /// batch's, every session's at once: `[blocks, n, heads, work_tok, 2·d_k]` then
    /// `[up_blocks, n, heads, work_up, 2·d_k]` ([`Work::conformer_batch`]).
    pub conf_ws: DeviceBuffer,
    /// The dims of the two conformer workspaces in `conf_ws` (one session's).
    conf_dims: [[usize; 4]; 2],
    /// Sessions the encoder buffers hold (0: none).
    enc_sessions: usize,
    pub mu: DeviceBuffer,
    pub cond: DeviceBuffer,
    pub xin: DeviceBuffer,
    pub xs: DeviceBuffer,
    pub vel: DeviceBuffer,
    /// The emitted mel `[mel, frames]` (channel-major).
    pub mel_out: DeviceBuffer,
    /// The raw speaker embedding `[1, spk_dim]` (the flow's `spk` input).
    pub spk: DeviceBuffer,
    /// `[freq ‖ t hidden ‖ cond ‖ 11·hidden spare]` then `[spk normed ‖ spk proj]`.
    pub small: DeviceBuffer,
}

/// What a [`Work`] is sized for: the encoder's buffers for `encoder` sessions of calls of up to
/// `encoder_frames` frames each (`stride ·` its tokens, lookahead included; none when 0), and
/// the solver's rows: `sessions` sessions of `frames` frames each, every session two CFG rows
/// per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Sizing {
    pub encoder: usize,
    pub encoder_frames: usize,
    pub sessions: usize,
    pub frames: usize,
}

impl Work {
    /// The flow's own workspace: the encoder's buffers and one session's solver rows at the
    /// largest call.
    pub fn new(be: &dyn Backend, cfg: &FlowConfig, caps: &Caps) -> Result<Work, FlowError> {
        let sizing = Sizing {
            encoder: 1,
            encoder_frames: caps.t_up,
            sessions: 1,
            frames: caps.t_up,
        };
        Work::sized(be, cfg, caps, sizing)
    }

    /// A workspace sized by `z`. Without the encoder its encoder-only buffers (`ids`, `a`, `b`,
    /// `k`, `v`, `cat`, `col`, `pos`, `conf_ws`) hold one float: an encoder call over it is
    /// refused by the views' span checks. The conformer workspaces are the flow's own per
    /// session (`work_tok`, `work_up` of `caps`), so that every call the flow takes alone fits a
    /// batch too; the position projection is one for all sessions (they share its frames).
    pub fn sized(
        be: &dyn Backend,
        cfg: &FlowConfig,
        caps: &Caps,
        z: Sizing,
    ) -> Result<Work, FlowError> {
        let (e, d) = (&cfg.encoder, &cfg.dit);
        let alloc = |floats: usize| -> Result<DeviceBuffer, FlowError> {
            Ok(be.alloc(floats.max(1) * 4, AllocKind::Other)?)
        };
        let encoder = z.encoder > 0;
        let enc = |floats: usize| alloc(if encoder { floats } else { 1 });
        let overflow = || FlowError::Config(format!("a workspace of {z:?} overflows"));
        // frames of all sessions, and the solver's rows (two CFG rows per frame)
        let frames = z.sessions.checked_mul(z.frames).ok_or_else(overflow)?;
        let rows = CFG_BATCH.checked_mul(frames).ok_or_else(overflow)?;
        // the encoder's frames, every session's (tokens, lookahead included, fit too)
        let t_up = z
            .encoder
            .checked_mul(z.encoder_frames)
            .ok_or_else(overflow)?;
        // the encoder shares `x`..`hidden` with the solver: at least its rows
        let rows = rows.max(CFG_BATCH * t_up);
        let wide = e
            .dim
            .max(d.hidden)
            .max(d.inner())
            .max(cfg.mel)
            .max(d.in_channels);
        let ff = e.linear_units.max(d.mlp_hidden);
        let kmax = (e.pre_lookahead + 1)
            .max(2 * e.up_stride + 1)
            .max(CONV2_K)
            .max(CONV_K);
        let dk2 = 2 * (e.dim / e.heads);
        let conf_ws = (e.blocks * caps.work_tok + e.up_blocks * caps.work_up) * e.heads * dk2;
        let conf_ws = conf_ws.checked_mul(z.encoder).ok_or_else(overflow)?;
        // the solver's per-frame inputs and output, every session's
        let io = frames.max(t_up);
        // token ids: every session's call, lookahead included
        let ids = (t_up / e.up_stride).max(1) * 4;
        Ok(Work {
            ids: be.alloc(ids, AllocKind::Other)?,
            a: enc(t_up * e.dim)?,
            b: enc(t_up * e.dim)?,
            x: alloc(rows * wide)?,
            xn: alloc(rows * wide)?,
            q: alloc(rows * wide)?,
            k: enc(rows * wide)?,
            v: enc(rows * wide)?,
            qn: alloc(rows * wide)?,
            qkv: alloc(rows * 3 * d.inner())?,
            mods: alloc((d.depth * 9 + 2) * d.hidden)?,
            ccol: alloc(2 * rows * CONV_K * d.hidden)?,
            att: alloc(rows * wide)?,
            o: alloc(rows * wide)?,
            hidden: alloc(rows * ff)?,
            cat: enc((t_up + z.encoder * 2 * kmax) * wide)?,
            col: enc(rows * kmax * wide)?,
            pos: enc((2 * caps.pe_size - 1) * e.dim)?,
            conf_ws: enc(conf_ws)?,
            conf_dims: [
                [e.blocks, e.heads, caps.work_tok, dk2],
                [e.up_blocks, e.heads, caps.work_up, dk2],
            ],
            enc_sessions: z.encoder,
            mu: alloc(io * cfg.mel)?,
            cond: alloc(io * cfg.mel)?,
            xin: alloc(rows * d.in_channels)?,
            xs: alloc(io * cfg.mel)?,
            vel: alloc(rows * cfg.mel)?,
            mel_out: alloc(io * cfg.mel)?,
            spk: alloc(z.sessions * cfg.spk_dim)?,
            small: alloc(d.freq_dim + 13 * d.hidden + z.sessions * (cfg.spk_dim + cfg.mel))?,
        })
    }

    /// The conformer workspaces of a batch of `n` sessions: `([blocks, n, heads, work_tok,
    /// 2·d_k], [up_blocks, n, heads, work_up, 2·d_k])`, each layer's `[n, heads, work, 2·d_k]`
    /// packed (what `kv_pack` and `rel_pos_attention` take as a batch).
    pub fn conformer_batch(&self, n: usize) -> Result<(Tensor<'_>, Tensor<'_>), OpError> {
        if n == 0 || n > self.enc_sessions {
            return Err(OpError::Arg {
                op: "conformer_batch",
                arg: "n",
                detail: format!("{n} sessions, the workspace holds {}", self.enc_sessions),
            });
        }
        let [[bl, h, wt, dk2], [ub, _, wu, _]] = self.conf_dims;
        let (tok, up) = ([bl, n, h, wt, dk2], [ub, n, h, wu, dk2]);
        let all = Tensor::of(&self.conf_ws)?;
        let tok_n = tok.iter().product::<usize>();
        let up_n = up.iter().product::<usize>();
        Ok((
            all.narrow(0, 0, tok_n)?.view(&tok)?,
            all.narrow(0, tok_n, up_n)?.view(&up)?,
        ))
    }

    /// The conformer workspaces: `([blocks, heads, work_tok, 2·d_k], [up_blocks, heads,
    /// work_up, 2·d_k])`.
    pub fn conformer(&self) -> Result<(Tensor<'_>, Tensor<'_>), OpError> {
        let [tok, up] = self.conf_dims;
        let all = Tensor::of(&self.conf_ws)?;
        let n = |d: [usize; 4]| d.iter().product::<usize>();
        Ok((all.view(&tok)?, all.narrow(0, n(tok), n(up))?.view(&up)?))
    }
}

impl DeviceFlow {
    /// The per-process part of `layout`'s arena (its regions of lifetime `operator` / `unit` /
    /// `process`), placed on the first call for a layout and shared from then on by every
    /// session of this flow under the state rule; freed with the flow. Calling it before the
    /// first session places the part up front (so a caller can measure what a session alone
    /// adds).
    pub fn process_arena(&self, layout: &ArenaLayout) -> Result<Arc<ProcessArena>, FlowError> {
        // a poisoned lock only means another thread panicked while placing: the list itself is
        // always whole (one push), so keep using it
        let mut placed = self.process.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = placed.iter().find(|p| p.serves(layout)) {
            return Ok(p.clone());
        }
        let p = ProcessArena::new(&self.be, layout)?;
        placed.push(p.clone());
        Ok(p)
    }

    /// Device bytes of the per-process arena parts placed so far.
    pub fn process_arena_bytes(&self) -> usize {
        let placed = self.process.lock().unwrap_or_else(|e| e.into_inner());
        placed.iter().map(|p| p.bytes()).sum()
    }
}

/// The first `dims.iter().product()` floats of `b` as a packed `dims` view.
pub(super) fn v<'a>(b: &'a DeviceBuffer, dims: &[usize]) -> Result<Tensor<'a>, OpError> {
    Tensor::of(b)?.view(dims)
}
