//! What one call of a contract callable reads and writes besides the flow's own buffers: every
//! per-call address and layout, explicitly, so that a call can be recorded into a graph and
//! replayed against staging copies of the same shapes.

use dcc_runtime::contract::Keep;
use dcc_runtime::ops::RawTensor;

use super::flow::SolverParams;
use super::state::{Keeps, KvRaw};

/// The `encoder` callable's I/O.
#[derive(Copy, Clone, Debug)]
pub struct EncoderIo {
    /// Token ids (`u32`), `[n_tokens]`.
    pub ids: RawTensor<u32>,
    pub last_chunk: bool,
    /// Conformer cache extent before the call, token clock (the upsample cache's is `stride ·
    /// t_tok` frames).
    pub t_tok: usize,
    /// The blocks' cache `[blocks, heads, token capacity, 2·d_k]` (`conformer_cache`).
    pub carry: RawTensor,
    /// The up-blocks' cache `[up_blocks, heads, frame capacity, 2·d_k]` (`upsample_cache`).
    pub up_carry: RawTensor,
    /// The pre-lookahead context `[CONV2_K − 1, dim]` (`pre_lookahead_cache`), read and written
    /// in place.
    pub pre_cnn: RawTensor,
    /// The upsampling context `[2·stride, dim]` (`up_layer_cache`), read and written in place.
    pub up_cnn: RawTensor,
    /// Write the kept frames back into the caches in place (state rule); otherwise the call
    /// leaves `[cache ‖ new]` in the conformer workspace for `DeviceFlow::finish_call`.
    pub write_back: bool,
    /// What the caches keep (the conformer and upsample keeps are used).
    pub keeps: Keeps,
}

/// The `flow` callable's I/O (a range of solver steps).
#[derive(Copy, Clone, Debug)]
pub struct FlowIo {
    /// Estimator extent before the call (the noise offset).
    pub l_old: usize,
    /// `mu` and `cond`, `[frames, mel]` (the frames the call presents).
    pub mu: RawTensor,
    pub cond: RawTensor,
    /// The raw speaker embedding `[1, spk_dim]` (normalized and projected by the first step).
    pub spk: RawTensor,
    /// The estimator carry, step-major `[step, depth, cfg, heads, frames, 2·head_dim]`, or one
    /// step's slice `[depth, cfg, heads, frames, 2·head_dim]` for a call of one step (the stock
    /// store's step-clock replay stages one step), in the region's dtype.
    pub carry: KvRaw,
    /// The solver workspace `[step, depth, cfg, heads, frames, 2·head_dim]`, the carry's dtype:
    /// a slice per step, or one slice every step reuses (step extent 1, the contract's
    /// `lifetime: iteration`), which only a call that writes back each step (`write_back`) takes.
    pub ws: KvRaw,
    /// The estimator conv contexts `[step, depth, cfg, conv, CONV_K − 1, hidden]`
    /// (`estimator_conv_cache`), read and written in place.
    pub est_cnn: RawTensor,
    /// Write each step's kept frames back into `carry` in place (state rule).
    pub write_back: bool,
    /// What the carry keeps.
    pub keep: Keep,
    pub solver: SolverParams,
}
