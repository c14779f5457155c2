//! What a flow holds once per process for every session it serves: the activation workspace,
//! sized once for the largest call, and the per-process part of the contract's arena.
//!
//! Sessions of one flow are time-multiplexed on its one device stream: no two calls run at
//! once. So the state a call leaves nothing in — the activations here, and the arena regions
//! whose declared lifetime is one call (`solver_workspace`, `lifetime: unit`;
//! `attention_mask`, `lifetime: operator`) — is placed once ([`DeviceFlow::process_arena`]),
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
    /// 2·d_k]` (the stock store materializes its fresh caches from here after the call).
    pub conf_ws: DeviceBuffer,
    /// The dims of the two conformer workspaces in `conf_ws`.
    conf_dims: [[usize; 4]; 2],
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

impl Work {
    pub fn new(be: &dyn Backend, cfg: &FlowConfig, caps: &Caps) -> Result<Work, FlowError> {
        let (e, d) = (&cfg.encoder, &cfg.dit);
        let alloc = |floats: usize| -> Result<DeviceBuffer, FlowError> {
            Ok(be.alloc(floats.max(1) * 4, AllocKind::Other)?)
        };
        let rows = CFG_BATCH * caps.t_up;
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
        let t_up = caps.t_up;
        Ok(Work {
            ids: be.alloc(caps.t_tok * 4, AllocKind::Other)?,
            a: alloc(t_up * e.dim)?,
            b: alloc(t_up * e.dim)?,
            x: alloc(rows * wide)?,
            xn: alloc(rows * wide)?,
            q: alloc(rows * wide)?,
            k: alloc(rows * wide)?,
            v: alloc(rows * wide)?,
            qn: alloc(rows * wide)?,
            qkv: alloc(rows * 3 * d.inner())?,
            mods: alloc((d.depth * 9 + 2) * d.hidden)?,
            ccol: alloc(2 * rows * CONV_K * d.hidden)?,
            att: alloc(rows * wide)?,
            o: alloc(rows * wide)?,
            hidden: alloc(rows * ff)?,
            cat: alloc((t_up + 2 * kmax) * wide)?,
            col: alloc(rows * kmax * wide)?,
            pos: alloc((2 * caps.pe_size - 1) * e.dim)?,
            conf_ws: alloc(conf_ws)?,
            conf_dims: [
                [e.blocks, e.heads, caps.work_tok, dk2],
                [e.up_blocks, e.heads, caps.work_up, dk2],
            ],
            mu: alloc(t_up * cfg.mel)?,
            cond: alloc(t_up * cfg.mel)?,
            xin: alloc(rows * d.in_channels)?,
            xs: alloc(t_up * cfg.mel)?,
            vel: alloc(rows * cfg.mel)?,
            mel_out: alloc(t_up * cfg.mel)?,
            spk: alloc(cfg.spk_dim)?,
            small: alloc(d.freq_dim + 13 * d.hidden + cfg.spk_dim + cfg.mel)?,
        })
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
