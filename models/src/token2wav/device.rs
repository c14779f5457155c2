//! The flow on a runtime [`Backend`]: every op is a registered kernel launch
//! (the op families of `dcc_kernels`) or a `Backend::gemm`, over device buffers at fixed addresses.
//!
//! State (per session, [`DeviceState`]) lives in one of two stores ([`StateStore`]):
//! * **state rule** (`Fixed`): the estimator carry `[n_steps, depth, 2, heads, L, 2·head_dim]`
//!   (prepend-ordered, `L = prompt + retained`), the solver workspace `[steps, depth, 2, heads,
//!   W, 2·head_dim]` and the two conformer carries, token-clock blocks `[blocks, heads,
//!   L / stride, 2·d_k]` (contract region `conformer_cache`) and frame-clock up-blocks
//!   `[up_blocks, heads, L, 2·d_k]` (`upsample_cache`), append-ordered, at fixed addresses for
//!   the session's life (one region arena laid out by a contract, or buffers of the same
//!   shapes); every carry is
//!   written back in place by the runtime's carry kernel (`carry.retain` with head = retained,
//!   tail = prompt for the paper's retention of the prepend-ordered estimator cache, head =
//!   prompt, tail = retained for the vendor's slicing and for the conformer caches) right after the layer (conformer) or solver step (estimator)
//!   that reads it, which equals the vendor's trim after the call;
//! * **stock** (`Stock`): the vendor's 16-step × 1000-frame estimator envelope; after every call
//!   the kept frames are materialized into freshly allocated compact buffers (the vendor's
//!   `torch.cat`, by the same carry kernel) and the old buffers freed, so carry addresses drift.
//!
//! The work of one chunk is split into the contract's callables: [`DeviceFlow::encoder_call`]
//! (embedding, conformer encoder, `encoder_proj`) and [`DeviceFlow::flow_call`] (a range of CFM
//! solver steps: the whole loop at chunk granularity, one step at step granularity). Both take
//! every per-call address from an explicit I/O description and only launch stream work (no
//! allocation, no host copy), so they can be recorded into a graph. Host inputs are uploaded
//! into fixed input buffers first ([`DeviceFlow::set_inputs`]); the mel lands in a fixed output
//! buffer ([`DeviceFlow::mel_out`]). The conv contexts — the estimator conv cache `[step, layer,
//! cfg, conv, ctx, hidden]` (contract region `estimator_conv_cache`), the pre-lookahead context
//! `[ctx, dim]` (`pre_lookahead_cache`) and the upsampling context `[2·stride, dim]`
//! (`up_layer_cache`) — are written in place by the call that reads them, at fixed addresses in
//! both stores: in the contract's arena under the state rule, in plain session buffers
//! otherwise.

use std::sync::Arc;

use dcc_kernels::{act, attention, copy, elementwise, embed, norm};
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer, Gemm, Marker};
use dcc_runtime::{Arg, DevPtr, KernelDef, LaunchDims};

use super::FlowError;
use super::config::FlowConfig;
use super::dit::{ADALN_EPS, CONV_K, MAX_PERIOD, T_SCALE};
use super::encoder::{CONV2_K, ConformerLayer, Embed};
use super::flow::{Flow, SolverParams, cosine_t_span};
use super::layers::{Conv1d, LayerNorm, Linear};
use super::retention::{Retention, RetentionOrder};
use dcc_runtime::arena::Arena;
use dcc_runtime::contract::{ArenaLayout, RegionInfo};

const CFG_BATCH: usize = 2;
const THREADS: u32 = 128;
/// The vendor's estimator cache envelope (`flow_matching.py:36`, `att_cache_buffer = zeros(16,
/// depth, 2, heads, 1000, 2·head_dim)`): solver steps × frames.
pub const STOCK_STEPS: usize = 16;
pub const STOCK_FRAMES: usize = 1000;

fn at(b: &DeviceBuffer, floats: usize) -> DevPtr {
    b.ptr().offset(floats * 4)
}

fn p(x: DevPtr) -> Arg {
    Arg::Ptr(x)
}

fn n(v: usize) -> Arg {
    Arg::I64(v as i64)
}

/// Shapes the device buffers are sized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceLimits {
    /// Largest token count of one call, lookahead included (the prompt call: 151 + 3).
    pub max_call_tokens: usize,
    /// Carry capacity `L` in frames: every session's `prompt + retained` must fit.
    pub carry_frames: usize,
}

struct DLin {
    w: DeviceBuffer,
    b: Option<DeviceBuffer>,
    i: usize,
    o: usize,
}

struct DNorm {
    g: DeviceBuffer,
    b: DeviceBuffer,
    eps: f32,
}

struct DConf {
    norm_mha: DNorm,
    q: DLin,
    k: DLin,
    v: DLin,
    out: DLin,
    pos: DLin,
    u: DeviceBuffer,
    w: DeviceBuffer,
    norm_ff: DNorm,
    w1: DLin,
    w2: DLin,
}

struct DEmbed {
    lin: DLin,
    norm: DNorm,
    xscale: f32,
}

struct DBlock {
    /// `to_q ‖ to_k ‖ to_v` stacked (`[3·inner, hidden]`, biases likewise): one GEMM.
    qkv: DLin,
    q_norm: DNorm,
    k_norm: DNorm,
    proj: DLin,
    conv1: DLin,
    conv_norm: DNorm,
    conv2: DLin,
    fc1: DLin,
    fc2: DLin,
}

/// Activation workspace, sized once for the largest call.
struct Work {
    ids: DeviceBuffer,
    a: DeviceBuffer,
    b: DeviceBuffer,
    x: DeviceBuffer,
    xn: DeviceBuffer,
    q: DeviceBuffer,
    k: DeviceBuffer,
    v: DeviceBuffer,
    qn: DeviceBuffer,
    /// The DiT's fused q‖k‖v projection `[rows, 3·inner]`.
    qkv: DeviceBuffer,
    /// Every adaLN modulation of a solver step: `[depth, 9, hidden]` then the final layer's
    /// `[2, hidden]` (one GEMM of the step's time condition).
    mods: DeviceBuffer,
    /// im2col rows of the DiT conv block: conv1 `[rows, CONV_K·hidden]` then conv2 (same).
    ccol: DeviceBuffer,
    att: DeviceBuffer,
    o: DeviceBuffer,
    hidden: DeviceBuffer,
    cat: DeviceBuffer,
    col: DeviceBuffer,
    pos: DeviceBuffer,
    /// Per-layer conformer attention workspaces `[carry ‖ new]`: token-clock blocks
    /// `[blocks, heads, work_tok, 2·d_k]` then frame-clock up-blocks `[up_blocks, heads, work_up,
    /// 2·d_k]` (the stock store materializes its fresh carries from here after the call).
    conf_ws: DeviceBuffer,
    mu: DeviceBuffer,
    cond: DeviceBuffer,
    xin: DeviceBuffer,
    xs: DeviceBuffer,
    vel: DeviceBuffer,
    /// The emitted mel `[mel, frames]` (channel-major).
    mel_out: DeviceBuffer,
    /// The raw speaker embedding `[1, spk_dim]` (the flow's `spk` input).
    spk: DeviceBuffer,
    /// `[freq ‖ t hidden ‖ cond ‖ 11·hidden spare]` then `[spk normed ‖ spk proj]` (the
    /// modulations live in `mods`).
    small: DeviceBuffer,
}

/// Identities of [`DeviceFlow`]s, so a [`DeviceState`] is only ever used with the flow (and so
/// the backend, config and limits) it was sized for.
static NEXT_FLOW_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The flow's weights and workspace on a backend.
pub struct DeviceFlow {
    /// This flow's identity (recorded in every state it creates).
    id: u64,
    be: Arc<dyn Backend>,
    cfg: FlowConfig,
    limits: DeviceLimits,
    /// Frames of one call at most (`stride · (max_call_tokens + lookahead)`).
    t_up_cap: usize,
    t_tok_cap: usize,
    embedding: DeviceBuffer,
    spk_affine: DLin,
    embed: DEmbed,
    pre_conv1: DLin,
    pre_conv2: DLin,
    encoders: Vec<DConf>,
    up_conv: DLin,
    up_embed: DEmbed,
    up_encoders: Vec<DConf>,
    after_norm: DNorm,
    encoder_proj: DLin,
    t_mlp0: DLin,
    t_mlp2: DLin,
    in_proj: DLin,
    blocks: Vec<DBlock>,
    /// Every block's `adaLN_modulation.1` then the final layer's, stacked
    /// (`[depth·9·hidden + 2·hidden, hidden]`): one GEMM per solver step.
    ada_all: DLin,
    final_linear: DLin,
    noise: DeviceBuffer,
    noise_frames: usize,
    /// ESPnet relative positions for size `pe_size` (`2·pe_size − 1` rows).
    pe: DeviceBuffer,
    pe_size: usize,
    w: Work,
    /// Per-op markers of an eager profile ([`DeviceFlow::profile_begin`]), `None` when off.
    prof: std::sync::Mutex<Option<Vec<(&'static str, Marker)>>>,
}

/// One row of [`DeviceFlow::profile_end`]: an op category (kernel name, `gemm`, `gemv (rows =
/// 1)`, `memset`), its launches and the device milliseconds between each launch's marker and
/// the next.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    pub category: &'static str,
    pub launches: usize,
    pub ms: f64,
}

/// Where a session's carries and solver workspace live (see the module docs).
pub enum StateStore {
    /// The state rule: fixed addresses, carries written back in place.
    Fixed {
        est_carry: DevPtr,
        /// Frame capacity `L` of the estimator carry.
        est_cap: usize,
        est_ws: DevPtr,
        /// Frame capacity `W` and step capacity of the solver workspace.
        ws_frames: usize,
        ws_steps: usize,
        /// Token-clock blocks' carry `[blocks, heads, conf_cap, 2·d_k]` and its token capacity.
        conf: DevPtr,
        conf_cap: usize,
        /// Frame-clock up-blocks' carry `[up_blocks, heads, up_cap, 2·d_k]` and its frame capacity.
        up: DevPtr,
        up_cap: usize,
        /// The attention-mask region (bound as the flow's `mask` input; the port attends every
        /// frame, so it is not read).
        mask: DevPtr,
        /// What owns the memory: the session arena, or plain buffers.
        _arena: Option<Arena>,
        _bufs: Vec<DeviceBuffer>,
    },
    /// Stock: the 16 × 1000 envelope and fresh compact carries after every call.
    Stock {
        /// `[n_steps, depth, 2, heads, est_extent, 2·head_dim]`, reallocated after every call.
        est_carry: DeviceBuffer,
        /// `[STOCK_STEPS, depth, 2, heads, STOCK_FRAMES, 2·head_dim]`.
        est_ws: DeviceBuffer,
        /// `[blocks, heads, t_tok, 2·d_k]`, reallocated after every call.
        conf: DeviceBuffer,
        /// `[up_blocks, heads, t_tok·stride, 2·d_k]`, reallocated after every call.
        up: DeviceBuffer,
        mask: DeviceBuffer,
    },
}

impl StateStore {
    /// Whether this is the state rule's store.
    pub fn is_fixed(&self) -> bool {
        matches!(self, StateStore::Fixed { .. })
    }
}

/// One session's streaming state on the device.
pub struct DeviceState {
    /// The [`DeviceFlow`] that created this state (its buffers are sized for that flow).
    pub(super) flow: u64,
    pub(super) solver: SolverParams,
    pub(super) retention: Retention,
    pub(super) store: StateStore,
    /// The conv contexts' addresses (fixed for the session's life).
    pub(super) ctx: Contexts,
    /// Floats of each context (estimator conv cache, pre-lookahead, upsampling), all steps.
    pub(super) ctx_floats: [usize; 3],
    /// Solver steps the estimator conv cache holds (its `step` extent).
    pub(super) conv_steps: usize,
    /// The contexts' plain buffers when they are not in the store's arena.
    pub(super) _ctx_bufs: Vec<DeviceBuffer>,
    pub(super) est_extent: usize,
    pub(super) t_tok: usize,
    pub(super) primed: bool,
}

impl DeviceState {
    /// Estimator cache extent (frames attended; the noise offset of the next call).
    pub fn estimator_extent(&self) -> usize {
        self.est_extent
    }

    /// Conformer cache extent on the token clock.
    pub fn conformer_tokens(&self) -> usize {
        self.t_tok
    }

    pub fn retention(&self) -> Retention {
        self.retention
    }

    pub fn solver(&self) -> SolverParams {
        self.solver
    }

    pub fn store(&self) -> &StateStore {
        &self.store
    }

    /// Address of the estimator carry now (fixed under the state rule, new after every call
    /// under the stock store).
    pub fn estimator_carry(&self) -> DevPtr {
        match &self.store {
            StateStore::Fixed { est_carry, .. } => *est_carry,
            StateStore::Stock { est_carry, .. } => est_carry.ptr(),
        }
    }

    /// Address of the token-clock blocks' conformer carry now.
    pub fn conformer_carry(&self) -> DevPtr {
        match &self.store {
            StateStore::Fixed { conf, .. } => *conf,
            StateStore::Stock { conf, .. } => conf.ptr(),
        }
    }

    /// Address of the frame-clock up-blocks' carry now.
    pub fn upsample_carry(&self) -> DevPtr {
        match &self.store {
            StateStore::Fixed { up, .. } => *up,
            StateStore::Stock { up, .. } => up.ptr(),
        }
    }

    /// Address of the solver workspace (fixed in both stores).
    pub fn solver_workspace(&self) -> DevPtr {
        match &self.store {
            StateStore::Fixed { est_ws, .. } => *est_ws,
            StateStore::Stock { est_ws, .. } => est_ws.ptr(),
        }
    }

    /// Address bound as the flow's attention-mask input.
    pub fn mask(&self) -> DevPtr {
        match &self.store {
            StateStore::Fixed { mask, .. } => *mask,
            StateStore::Stock { mask, .. } => mask.ptr(),
        }
    }

    /// Estimator carry frame stride (capacity under the state rule, extent under stock).
    pub fn estimator_cap(&self) -> usize {
        match &self.store {
            StateStore::Fixed { est_cap, .. } => *est_cap,
            StateStore::Stock { .. } => self.est_extent,
        }
    }

    /// Solver workspace frame stride.
    pub fn workspace_frames(&self) -> usize {
        match &self.store {
            StateStore::Fixed { ws_frames, .. } => *ws_frames,
            StateStore::Stock { .. } => STOCK_FRAMES,
        }
    }

    /// Token stride of the blocks' conformer carry (capacity under the state rule, extent
    /// under stock).
    pub fn conformer_cap(&self) -> usize {
        match &self.store {
            StateStore::Fixed { conf_cap, .. } => *conf_cap,
            StateStore::Stock { .. } => self.t_tok,
        }
    }

    /// Frame stride of the up-blocks' carry.
    pub fn upsample_cap(&self, stride: usize) -> usize {
        match &self.store {
            StateStore::Fixed { up_cap, .. } => *up_cap,
            StateStore::Stock { .. } => self.t_tok * stride,
        }
    }

    /// The conv contexts' fixed addresses (regions `estimator_conv_cache`,
    /// `pre_lookahead_cache`, `up_layer_cache` under the state rule's arena).
    pub fn contexts(&self) -> Contexts {
        self.ctx
    }

    /// Solver steps the estimator conv cache holds (the step stride of its storage).
    pub fn conv_steps(&self) -> usize {
        self.conv_steps
    }
}

/// The conv contexts of a session (fixed for its life in both stores): the estimator conv cache
/// `[step, layer, cfg, conv, ctx, hidden]`, the pre-lookahead context `[ctx, dim]` and the
/// upsampling context `[2·stride, dim]`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Contexts {
    pub est_cnn: DevPtr,
    pub pre_cnn: DevPtr,
    pub up_cnn: DevPtr,
}

/// Everything one encoder call reads and writes besides the model's own buffers.
#[derive(Copy, Clone, Debug)]
pub struct EncoderIo {
    /// Token ids (`u32`), `n_tokens` of them.
    pub ids: DevPtr,
    pub n_tokens: usize,
    pub last_chunk: bool,
    /// Conformer extent before the call, token clock.
    pub t_tok: usize,
    /// The blocks' conformer carry (`conformer_cache`) and its token stride.
    pub carry: DevPtr,
    pub carry_cap: usize,
    /// The up-blocks' carry (`upsample_cache`) and its frame stride.
    pub up_carry: DevPtr,
    pub up_cap: usize,
    /// Write the kept frames back into the carries in place (state rule); otherwise the call
    /// leaves `[carry ‖ new]` in the conformer workspace for [`DeviceFlow::finish_call`].
    pub write_back: bool,
    /// The pre-lookahead context `[ctx, dim]` (`pre_lookahead_cache`), read and written in place.
    pub pre_cnn: DevPtr,
    /// The upsampling context `[2·stride, dim]` (`up_layer_cache`), read and written in place.
    pub up_cnn: DevPtr,
    pub retention: Retention,
}

/// Everything one flow call (a range of solver steps) reads and writes besides the model's
/// own buffers.
#[derive(Copy, Clone, Debug)]
pub struct FlowIo {
    /// Estimator extent before the call (the noise offset).
    pub l_old: usize,
    /// Frames the call presents.
    pub frames: usize,
    pub mu: DevPtr,
    pub cond: DevPtr,
    /// The raw speaker embedding `[1, spk_dim]` (normalized and projected by the first step).
    pub spk: DevPtr,
    /// Estimator carry (step-major) and its frame stride.
    pub carry: DevPtr,
    pub carry_cap: usize,
    /// Solver workspace (step-major) and its frame stride.
    pub ws: DevPtr,
    pub ws_frames: usize,
    /// `carry` is the slice of the (single) step of the call rather than the step-major base
    /// (the stock store's step-clock replay stages one step's slice).
    pub carry_slice: bool,
    /// Write each step's kept frames back into `carry` in place (state rule).
    pub write_back: bool,
    /// The estimator conv cache `[step, layer, cfg, conv, ctx, hidden]` (step-major base,
    /// `estimator_conv_cache`), read and written in place.
    pub est_cnn: DevPtr,
    /// Solver steps `est_cnn` holds (its `step` extent, [`DeviceState::conv_steps`]); a call
    /// past it is refused.
    pub conv_steps: usize,
    pub retention: Retention,
    pub solver: SolverParams,
}

impl DeviceFlow {
    /// Uploads a loaded [`Flow`] to `be`, with buffers sized by `limits`.
    pub fn new(be: Arc<dyn Backend>, flow: &Flow, limits: DeviceLimits) -> Result<Self, FlowError> {
        let cfg = flow.cfg.clone();
        let e = &cfg.encoder;
        let d = &cfg.dit;
        if !limits.carry_frames.is_multiple_of(e.up_stride) {
            return Err(FlowError::Config(
                "carry frames must be a multiple of the upsampling stride".into(),
            ));
        }
        if d.head_dim > 128 || e.dim / e.heads > 128 {
            return Err(FlowError::Config(
                "head dimensions above 128 are not supported by the kernels".into(),
            ));
        }
        let t_tok_cap = limits.max_call_tokens + e.pre_lookahead;
        let t_up_cap = t_tok_cap * e.up_stride;
        let l = limits.carry_frames;
        let pe_size = l + t_up_cap;
        let bed = be.as_ref();
        let up = |v: &[f32]| -> Result<DeviceBuffer, FlowError> {
            Ok(bed.alloc_from(v, AllocKind::Other)?)
        };
        let lin = |x: &Linear| -> Result<DLin, FlowError> {
            Ok(DLin {
                w: up(&x.w)?,
                b: x.b.as_deref().map(up).transpose()?,
                i: x.in_dim,
                o: x.out_dim,
            })
        };
        let conv = |x: &Conv1d| -> Result<DLin, FlowError> {
            Ok(DLin {
                w: up(&x.w_okc)?,
                b: Some(up(&x.b)?),
                i: x.k * x.c_in,
                o: x.c_out,
            })
        };
        // Linears reading the same input, stacked along the output (rows of W, bias entries).
        let stack = |xs: &[&Linear]| -> Result<DLin, FlowError> {
            let i = xs[0].in_dim;
            if xs
                .iter()
                .any(|x| x.in_dim != i || x.b.is_some() != xs[0].b.is_some())
            {
                return Err(FlowError::Config(
                    "stacked linears differ in input or bias".into(),
                ));
            }
            let w: Vec<f32> = xs.iter().flat_map(|x| x.w.iter().copied()).collect();
            let b: Option<Vec<f32>> = xs[0].b.is_some().then(|| {
                xs.iter()
                    .flat_map(|x| x.b.as_deref().unwrap_or(&[]).iter().copied())
                    .collect()
            });
            Ok(DLin {
                w: up(&w)?,
                b: b.as_deref().map(up).transpose()?,
                i,
                o: xs.iter().map(|x| x.out_dim).sum(),
            })
        };
        let norm = |x: &LayerNorm| -> Result<DNorm, FlowError> {
            Ok(DNorm {
                g: up(&x.g)?,
                b: up(&x.b)?,
                eps: x.eps,
            })
        };
        let embed = |x: &Embed| -> Result<DEmbed, FlowError> {
            Ok(DEmbed {
                lin: lin(&x.lin)?,
                norm: norm(&x.norm)?,
                xscale: x.xscale,
            })
        };
        let conf = |x: &ConformerLayer| -> Result<DConf, FlowError> {
            Ok(DConf {
                norm_mha: norm(&x.norm_mha)?,
                q: lin(&x.q)?,
                k: lin(&x.k)?,
                v: lin(&x.v)?,
                out: lin(&x.out)?,
                pos: lin(&x.pos)?,
                u: up(&x.pos_bias_u)?,
                w: up(&x.pos_bias_v)?,
                norm_ff: norm(&x.norm_ff)?,
                w1: lin(&x.w1)?,
                w2: lin(&x.w2)?,
            })
        };
        let enc = &flow.encoder;
        let dit = &flow.dit;
        let mut pe = vec![0.0f32; (2 * pe_size - 1) * e.dim];
        dcc_kernels::embed::espnet_rel_pos_table(pe_size, e.dim, &mut pe);

        // workspace
        let alloc = |floats: usize| -> Result<DeviceBuffer, FlowError> {
            Ok(bed.alloc(floats.max(1) * 4, AllocKind::Other)?)
        };
        let rows = CFG_BATCH * t_up_cap;
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
        let work_tok = l / e.up_stride + t_tok_cap;
        let work_up = l + t_up_cap;
        let conf_ws = (e.blocks * work_tok + e.up_blocks * work_up) * e.heads * dk2;
        let w = Work {
            ids: bed.alloc(t_tok_cap * 4, AllocKind::Other)?,
            a: alloc(t_up_cap * e.dim)?,
            b: alloc(t_up_cap * e.dim)?,
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
            cat: alloc((t_up_cap + 2 * kmax) * wide)?,
            col: alloc(rows * kmax * wide)?,
            pos: alloc((2 * pe_size - 1) * e.dim)?,
            conf_ws: alloc(conf_ws)?,
            mu: alloc(t_up_cap * cfg.mel)?,
            cond: alloc(t_up_cap * cfg.mel)?,
            xin: alloc(rows * d.in_channels)?,
            xs: alloc(t_up_cap * cfg.mel)?,
            vel: alloc(rows * cfg.mel)?,
            mel_out: alloc(t_up_cap * cfg.mel)?,
            spk: alloc(cfg.spk_dim)?,
            small: alloc(d.freq_dim + 13 * d.hidden + cfg.spk_dim + cfg.mel)?,
        };
        Ok(Self {
            embedding: up(&flow.embedding)?,
            spk_affine: lin(&flow.spk_affine)?,
            embed: embed(&enc.embed)?,
            pre_conv1: conv(&enc.pre_conv1)?,
            pre_conv2: conv(&enc.pre_conv2)?,
            encoders: enc.encoders.iter().map(conf).collect::<Result<_, _>>()?,
            up_conv: conv(&enc.up_conv)?,
            up_embed: embed(&enc.up_embed)?,
            up_encoders: enc.up_encoders.iter().map(conf).collect::<Result<_, _>>()?,
            after_norm: norm(&enc.after_norm)?,
            encoder_proj: lin(&flow.encoder_proj)?,
            t_mlp0: lin(&dit.t_mlp0)?,
            t_mlp2: lin(&dit.t_mlp2)?,
            in_proj: lin(&dit.in_proj)?,
            blocks: dit
                .blocks
                .iter()
                .map(|b| {
                    Ok(DBlock {
                        qkv: stack(&[&b.q, &b.k, &b.v])?,
                        q_norm: norm(&b.q_norm)?,
                        k_norm: norm(&b.k_norm)?,
                        proj: lin(&b.proj)?,
                        conv1: conv(&b.conv1)?,
                        conv_norm: norm(&b.conv_norm)?,
                        conv2: conv(&b.conv2)?,
                        fc1: lin(&b.fc1)?,
                        fc2: lin(&b.fc2)?,
                    })
                })
                .collect::<Result<_, FlowError>>()?,
            ada_all: stack(
                &dit.blocks
                    .iter()
                    .map(|b| &b.ada)
                    .chain([&dit.final_ada])
                    .collect::<Vec<_>>(),
            )?,
            final_linear: lin(&dit.final_linear)?,
            noise: up(&flow.noise)?,
            noise_frames: flow.noise_frames,
            pe: up(&pe)?,
            pe_size,
            w,
            prof: std::sync::Mutex::new(None),
            id: NEXT_FLOW_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            be,
            cfg,
            limits,
            t_up_cap,
            t_tok_cap,
        })
    }

    pub fn config(&self) -> &FlowConfig {
        &self.cfg
    }

    /// Frames of one call at most (the prompt call: `stride · max_call_tokens`).
    pub fn max_call_frames(&self) -> usize {
        self.t_up_cap
    }

    pub fn limits(&self) -> DeviceLimits {
        self.limits
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.be
    }

    /// Refuses a state another flow created (its buffers are sized for that flow's config,
    /// limits and backend, which this flow's launches would assume).
    fn check_owner(&self, st: &DeviceState) -> Result<(), FlowError> {
        if st.flow != self.id {
            return Err(FlowError::Input(
                "a session state of another DeviceFlow".into(),
            ));
        }
        Ok(())
    }

    fn check_retention(&self, retention: &Retention) -> Result<(), FlowError> {
        let e = &self.cfg.encoder;
        let l = self.limits.carry_frames;
        if retention.limit() > l {
            return Err(FlowError::Input(format!(
                "retention keeps {} frames, the carry holds {l}",
                retention.limit()
            )));
        }
        if !retention.prompt_frames.is_multiple_of(e.up_stride)
            || !retention.retained_frames.is_multiple_of(e.up_stride)
        {
            return Err(FlowError::Input(
                "retention frames must be multiples of the upsampling stride".into(),
            ));
        }
        Ok(())
    }

    /// Floats of the estimator carry per frame of capacity (all steps).
    fn est_floats_per_frame(&self, steps: usize) -> usize {
        let d = &self.cfg.dit;
        steps * d.depth * CFG_BATCH * d.heads * 2 * d.head_dim
    }

    /// Port storage of the blocks' conformer carry at a token capacity `cap`: `[blocks, heads,
    /// cap, 2·d_k]`.
    fn conf_dims(&self, cap: usize) -> [usize; 4] {
        let e = &self.cfg.encoder;
        [e.blocks, e.heads, cap, 2 * (e.dim / e.heads)]
    }

    /// Port storage of the up-blocks' carry at a frame capacity `cap`: `[up_blocks, heads, cap,
    /// 2·d_k]`.
    fn up_dims(&self, cap: usize) -> [usize; 4] {
        let e = &self.cfg.encoder;
        [e.up_blocks, e.heads, cap, 2 * (e.dim / e.heads)]
    }

    /// Port storage of the estimator conv cache holding `steps` solver steps: `[steps, depth,
    /// cfg, conv, ctx, hidden]` (two convs per block, `ctx = CONV_K − 1` frames; the contract's
    /// `estimator_conv_cache` layout).
    pub fn estimator_conv_dims(&self, steps: usize) -> [usize; 6] {
        let d = &self.cfg.dit;
        [steps, d.depth, CFG_BATCH, 2, CONV_K - 1, d.hidden]
    }

    /// Port storage of the pre-lookahead context: `[CONV2_K − 1, dim]` (tokens outer; the
    /// contract's `pre_lookahead_cache` layout).
    pub fn pre_lookahead_dims(&self) -> [usize; 2] {
        [CONV2_K - 1, self.cfg.encoder.dim]
    }

    /// Port storage of the upsampling context: `[2·stride, dim]` (frames outer; the contract's
    /// `up_layer_cache` layout).
    pub fn up_layer_dims(&self) -> [usize; 2] {
        let e = &self.cfg.encoder;
        [2 * e.up_stride, e.dim]
    }

    /// A session state over `store`, its conv contexts at `ctx` (regions of the store's arena,
    /// the estimator conv cache holding `steps` solver steps) or, with `None`, in fresh plain
    /// session buffers sized for `solver`.
    fn state_with(
        &self,
        solver: SolverParams,
        retention: Retention,
        store: StateStore,
        ctx: Option<(Contexts, usize)>,
    ) -> Result<DeviceState, FlowError> {
        let floats = |steps: usize| {
            [
                self.estimator_conv_dims(steps).iter().product::<usize>(),
                self.pre_lookahead_dims().iter().product(),
                self.up_layer_dims().iter().product(),
            ]
        };
        let (ctx, conv_steps, bufs) = match ctx {
            Some((ctx, steps)) => (ctx, steps, Vec::new()),
            None => {
                let be = self.be.as_ref();
                let bufs = floats(solver.n_steps)
                    .iter()
                    .map(|&f| be.alloc(f.max(1) * 4, AllocKind::Session))
                    .collect::<Result<Vec<_>, _>>()?;
                let ctx = Contexts {
                    est_cnn: bufs[0].ptr(),
                    pre_cnn: bufs[1].ptr(),
                    up_cnn: bufs[2].ptr(),
                };
                (ctx, solver.n_steps, bufs)
            }
        };
        // unprimed: `setup_cache` zeroes the contexts (the vendor's `new_zeros`) before use
        Ok(DeviceState {
            flow: self.id,
            solver,
            retention,
            store,
            ctx,
            ctx_floats: floats(conv_steps),
            conv_steps,
            _ctx_bufs: bufs,
            est_extent: 0,
            t_tok: 0,
            primed: false,
        })
    }

    /// A fresh (unprimed) session state streaming under `retention`, state rule, in buffers of
    /// the [`DeviceLimits`] capacity (carry `L`, workspace `L + max call frames`).
    pub fn new_state(
        &self,
        solver: SolverParams,
        retention: Retention,
    ) -> Result<DeviceState, FlowError> {
        self.check_retention(&retention)?;
        let l = self.limits.carry_frames;
        let ws_frames = l + self.t_up_cap;
        let be = self.be.as_ref();
        let alloc = |floats: usize| -> Result<DeviceBuffer, FlowError> {
            Ok(be.alloc(floats.max(1) * 4, AllocKind::Arena)?)
        };
        let carry = alloc(self.est_floats_per_frame(solver.n_steps) * l)?;
        let ws = alloc(self.est_floats_per_frame(solver.n_steps) * ws_frames)?;
        let s = self.cfg.encoder.up_stride;
        let conf = alloc(self.conf_dims(l / s).iter().product())?;
        let up = alloc(self.up_dims(l).iter().product())?;
        let mask = be.alloc(CFG_BATCH * ws_frames, AllocKind::Arena)?;
        let store = StateStore::Fixed {
            est_carry: carry.ptr(),
            est_cap: l,
            est_ws: ws.ptr(),
            ws_frames,
            ws_steps: solver.n_steps,
            conf: conf.ptr(),
            conf_cap: l / s,
            up: up.ptr(),
            up_cap: l,
            mask: mask.ptr(),
            _arena: None,
            _bufs: vec![carry, ws, conf, up, mask],
        };
        self.state_with(solver, retention, store, None)
    }

    /// A fresh session state under the state rule in one region arena laid out by a contract:
    /// regions `carry` and `solver_workspace` (`[step, layer, cfg, head, frame, k‖v]`),
    /// `conformer_cache` (`[block, head, token, k‖v]`), `upsample_cache` (`[up_block, head,
    /// frame, k‖v]`), `attention_mask` and the conv contexts `estimator_conv_cache` (`[step,
    /// layer, cfg, conv, frame, hidden]`, 2 frames), `pre_lookahead_cache` (`[token, dim]`, 2
    /// tokens) and `up_layer_cache` (`[frame, dim]`, `2·stride` frames). Axes are looked up by
    /// name (`step`, `frame`, `token`) and every region's storage (the contract's `layout:`:
    /// dims and strides) must be the port's.
    pub fn new_state_in_arena(
        &self,
        solver: SolverParams,
        retention: Retention,
        layout: &ArenaLayout,
    ) -> Result<DeviceState, FlowError> {
        self.check_retention(&retention)?;
        let arena = Arena::new(self.be.clone(), layout)?;
        let region = |name: &str| arena.region(name).map_err(FlowError::from);
        let (carry, ws, conf, up, mask) = (
            region("carry")?,
            region("solver_workspace")?,
            region("conformer_cache")?,
            region("upsample_cache")?,
            region("attention_mask")?,
        );
        let (est_cnn, pre_cnn, up_cnn) = (
            region("estimator_conv_cache")?,
            region("pre_lookahead_cache")?,
            region("up_layer_cache")?,
        );
        let conv_steps = axis_extent(est_cnn.info, "step")?;
        check_storage(
            est_cnn.info,
            &[("step", 0), ("frame", 4)],
            &self.estimator_conv_dims(conv_steps),
            "[step, layer, cfg, conv, frame, hidden]",
        )?;
        let what = "[token, dim]";
        check_storage(
            pre_cnn.info,
            &[("token", 0)],
            &self.pre_lookahead_dims(),
            what,
        )?;
        let what = "[frame, dim]";
        check_storage(up_cnn.info, &[("frame", 0)], &self.up_layer_dims(), what)?;
        let ctx = Contexts {
            est_cnn: est_cnn.ptr,
            pre_cnn: pre_cnn.ptr,
            up_cnn: up_cnn.ptr,
        };
        let (c_steps, est_cap) = self.estimator_axes(carry.info)?;
        let (ws_steps, ws_frames) = self.estimator_axes(ws.info)?;
        let conf_cap = axis_extent(conf.info, "token")?;
        let up_cap = axis_extent(up.info, "frame")?;
        let what = "[block, head, token, k‖v]";
        check_storage(conf.info, &[("token", 2)], &self.conf_dims(conf_cap), what)?;
        let what = "[up_block, head, frame, k‖v]";
        check_storage(up.info, &[("frame", 2)], &self.up_dims(up_cap), what)?;
        let s = self.cfg.encoder.up_stride;
        if c_steps.min(ws_steps).min(conv_steps) < solver.n_steps {
            return Err(FlowError::Config(format!(
                "the contract's regions hold {c_steps}/{ws_steps}/{conv_steps} solver steps, the \
                 solver takes {}",
                solver.n_steps
            )));
        }
        if est_cap.min(conf_cap * s).min(up_cap) < retention.limit() {
            return Err(FlowError::Config(format!(
                "the contract's carries attend {est_cap}/{}/{up_cap} frames, the retention keeps {}",
                conf_cap * s,
                retention.limit()
            )));
        }
        let store = StateStore::Fixed {
            est_carry: carry.ptr,
            est_cap,
            est_ws: ws.ptr,
            ws_frames,
            ws_steps,
            conf: conf.ptr,
            conf_cap,
            up: up.ptr,
            up_cap,
            mask: mask.ptr,
            _arena: Some(arena),
            _bufs: Vec::new(),
        };
        self.state_with(solver, retention, store, Some((ctx, conv_steps)))
    }

    /// `(steps, frames)` of an estimator-cache region (`carry`, `solver_workspace`): its `step`
    /// and `frame` axes by name, its storage checked against the port's `[step, layer, cfg,
    /// head, frame, k‖v]` (the contract's dims and strides).
    fn estimator_axes(&self, info: &RegionInfo) -> Result<(usize, usize), FlowError> {
        let d = &self.cfg.dit;
        let (steps, frames) = (axis_extent(info, "step")?, axis_extent(info, "frame")?);
        let port = [steps, d.depth, CFG_BATCH, d.heads, frames, 2 * d.head_dim];
        check_storage(
            info,
            &[("step", 0), ("frame", 4)],
            &port,
            "[step, layer, cfg, head, frame, k‖v]",
        )?;
        Ok((steps, frames))
    }

    /// A fresh session state with the stock store: the vendor's 16 × 1000 estimator envelope,
    /// carries materialized into fresh buffers after every call.
    pub fn new_state_stock(
        &self,
        solver: SolverParams,
        retention: Retention,
    ) -> Result<DeviceState, FlowError> {
        self.check_retention(&retention)?;
        if solver.n_steps > STOCK_STEPS {
            return Err(FlowError::Input(format!(
                "the stock envelope holds {STOCK_STEPS} solver steps"
            )));
        }
        let be = self.be.as_ref();
        let store = StateStore::Stock {
            est_carry: be.alloc(4, AllocKind::Other)?,
            est_ws: be.alloc(
                self.est_floats_per_frame(STOCK_STEPS) * STOCK_FRAMES * 4,
                AllocKind::Other,
            )?,
            conf: be.alloc(4, AllocKind::Other)?,
            up: be.alloc(4, AllocKind::Other)?,
            mask: be.alloc(CFG_BATCH * STOCK_FRAMES, AllocKind::Other)?,
        };
        self.state_with(solver, retention, store, None)
    }

    /// A copy of `src` (device to device) that continues under `retention` (a session
    /// snapshot, state rule with plain buffers; the retention must be valid for `src`'s current
    /// extents).
    pub fn clone_state(
        &self,
        src: &DeviceState,
        retention: Retention,
    ) -> Result<DeviceState, FlowError> {
        self.check_owner(src)?;
        let StateStore::Fixed {
            est_carry,
            est_cap,
            conf,
            conf_cap,
            up,
            up_cap,
            ..
        } = &src.store
        else {
            return Err(FlowError::Input(
                "snapshots of stock states are not supported".into(),
            ));
        };
        let mut st = self.new_state(src.solver, retention)?;
        let StateStore::Fixed {
            est_carry: d_carry,
            est_cap: d_cap,
            conf: d_conf,
            conf_cap: d_conf_cap,
            up: d_up,
            up_cap: d_up_cap,
            ..
        } = &st.store
        else {
            unreachable!("new_state builds a fixed store")
        };
        if (est_cap, conf_cap, up_cap) != (d_cap, d_conf_cap, d_up_cap) {
            return Err(FlowError::Input(
                "snapshot of a state with other capacities".into(),
            ));
        }
        self.be.dtod(
            *d_carry,
            *est_carry,
            self.est_floats_per_frame(src.solver.n_steps) * est_cap * 4,
        )?;
        let floats = |dims: [usize; 4]| dims.iter().product::<usize>();
        self.be
            .dtod(*d_conf, *conf, floats(self.conf_dims(*conf_cap)) * 4)?;
        self.be
            .dtod(*d_up, *up, floats(self.up_dims(*up_cap)) * 4)?;
        // the contexts: every step the solver uses (a contract's cache may hold more steps)
        let (dc, sc) = (st.ctx, src.ctx);
        let used = self.ctx_floats_used(src);
        for ((d, s), floats) in [
            (dc.est_cnn, sc.est_cnn),
            (dc.pre_cnn, sc.pre_cnn),
            (dc.up_cnn, sc.up_cnn),
        ]
        .into_iter()
        .zip(used)
        {
            self.be.dtod(d, s, floats * 4)?;
        }
        st.est_extent = src.est_extent;
        st.t_tok = src.t_tok;
        st.primed = src.primed;
        Ok(st)
    }

    // ---- profiling (opt-in, eager only) --------------------------------------------------

    /// Starts an eager op profile: until [`DeviceFlow::profile_end`], every op this flow
    /// enqueues outside a capture is preceded by a stream marker (a CUDA event). Queue the
    /// profiled work behind a long kernel so that the gaps between markers are device time,
    /// not host launch time.
    pub fn profile_begin(&self) {
        *self.prof.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
    }

    /// Ends the profile: device ms from each op's marker to the next (the last op's to a
    /// marker recorded now), summed per category, largest first. Waits for the stream.
    pub fn profile_end(&self) -> Result<Vec<ProfileRow>, FlowError> {
        let marks = self
            .prof
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default();
        let end = self.be.marker()?;
        let mut rows: Vec<ProfileRow> = Vec::new();
        for (i, (cat, m)) in marks.iter().enumerate() {
            let next = marks.get(i + 1).map_or(&end, |x| &x.1);
            let ms = self.be.elapsed_ms(m, next)?;
            match rows.iter_mut().find(|r| r.category == *cat) {
                Some(r) => {
                    r.launches += 1;
                    r.ms += ms;
                }
                None => rows.push(ProfileRow {
                    category: cat,
                    launches: 1,
                    ms,
                }),
            }
        }
        rows.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        Ok(rows)
    }

    fn mark(&self, category: &'static str) -> Result<(), FlowError> {
        let mut g = self.prof.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = g.as_mut()
            && !self.be.is_capturing()
        {
            v.push((category, self.be.marker()?));
        }
        Ok(())
    }

    // ---- launch helpers ------------------------------------------------------------------

    /// Launches `k` over `threads` threads. Private, like every launch helper below (`copy`,
    /// `norm`, `norm_mod`, `gated_norm`, `act`, `add`, `write_back`, `conformer_layer`): this
    /// module is their safety boundary. Every caller passes pointers into this flow's own
    /// buffers (weights, the `Work` buffers, the noise and position tables, all sized at
    /// construction from the config and [`DeviceLimits`]) at offsets and counts bounded by
    /// the same limits (`frames <= t_up_cap`, tokens `<= max_call_tokens`, checked on entry to
    /// `encoder_call`/`flow_call`), or into the caller's I/O regions within the extents the
    /// `# Safety` contracts of [`DeviceFlow::encoder_call`]/[`DeviceFlow::flow_call`] promise,
    /// or into a [`DeviceState`]'s buffers within its capacities.
    fn go(&self, k: &'static KernelDef, threads: usize, args: &[Arg]) -> Result<(), FlowError> {
        self.mark(k.name)?;
        // SAFETY: the module invariant documented above: the arguments name this flow's
        // buffers, a `DeviceState`'s, or I/O regions the callable's caller vouched for, with
        // counts within their sizes, and no written range aliases another argument's except
        // elementwise in place (`act`, `add`, `CFG_EULER`).
        unsafe {
            self.be
                .launch(k, LaunchDims::linear(threads, THREADS), args)
        }?;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        dst: DevPtr,
        ldd: usize,
        src: DevPtr,
        lds: usize,
        rows: usize,
        cols: usize,
        rep: usize,
    ) -> Result<(), FlowError> {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        self.go(
            &copy::BLOCK,
            rows * cols,
            &[p(dst), n(ldd), p(src), n(lds), n(rows), n(cols), n(rep)],
        )
    }

    /// `y[rows, o] (ld ldy) = x[rows, i] (ld ldx) · Wᵀ + b` through `Backend::gemm`.
    fn linear(
        &self,
        l: &DLin,
        rows: usize,
        x: DevPtr,
        ldx: usize,
        y: DevPtr,
        ldy: usize,
    ) -> Result<(), FlowError> {
        let g = Gemm {
            trans_a: true,
            trans_b: false,
            m: l.o,
            n: rows,
            k: l.i,
            alpha: 1.0,
            a: l.w.ptr(),
            lda: l.i,
            stride_a: 0,
            b: x,
            ldb: ldx,
            stride_b: 0,
            beta: 0.0,
            c: y,
            ldc: ldy,
            stride_c: 0,
            batch: 1,
        };
        // bias in the GEMM's epilogue: `acc + bias[o]`, as `addmm` (no separate broadcast)
        self.mark(if l.o > 16 * l.i || rows == 1 {
            "gemv (rows = 1)"
        } else {
            "gemm"
        })?;
        match &l.b {
            Some(b) => self.be.gemm_bias(&g, b.ptr())?,
            None => self.be.gemm(&g)?,
        }
        Ok(())
    }

    fn lin(&self, l: &DLin, rows: usize, x: DevPtr, y: DevPtr) -> Result<(), FlowError> {
        self.linear(l, rows, x, l.i, y, l.o)
    }

    fn norm(
        &self,
        nm: &DNorm,
        rows: usize,
        dim: usize,
        x: DevPtr,
        y: DevPtr,
    ) -> Result<(), FlowError> {
        let args = [
            p(y),
            n(dim),
            p(x),
            n(dim),
            p(nm.g.ptr()),
            p(nm.b.ptr()),
            n(rows),
            n(dim),
            Arg::F32(nm.eps),
        ];
        self.go(&norm::LAYER_NORM, norm::row_threads(rows), &args)
    }

    fn norm_mod(
        &self,
        rows: usize,
        dim: usize,
        x: DevPtr,
        shift: DevPtr,
        scale: DevPtr,
        y: DevPtr,
    ) -> Result<(), FlowError> {
        self.go(
            &norm::LAYER_NORM_MODULATE,
            norm::row_threads(rows),
            &[
                p(y),
                p(x),
                p(shift),
                p(scale),
                n(rows),
                n(dim),
                Arg::F32(ADALN_EPS),
            ],
        )
    }

    /// DiT residual + next modulated norm over the `rows` rows of `w.x`: `x += gate · y`, then
    /// `w.xn = LN(x) · (1 + scale) + shift` (one launch).
    fn gated_norm(
        &self,
        rows: usize,
        y: DevPtr,
        gate: DevPtr,
        shift: DevPtr,
        scale: DevPtr,
    ) -> Result<(), FlowError> {
        let hid = self.cfg.dit.hidden;
        self.go(
            &norm::GATED_ADD_MODULATE,
            norm::row_threads(rows),
            &[
                p(self.w.x.ptr()),
                p(gate),
                p(y),
                p(self.w.xn.ptr()),
                p(shift),
                p(scale),
                n(rows),
                n(hid),
                Arg::F32(ADALN_EPS),
            ],
        )
    }

    fn act(&self, x: DevPtr, count: usize, op: i32, alpha: f32) -> Result<(), FlowError> {
        self.go(
            &act::APPLY,
            count,
            &[p(x), n(count), Arg::I32(op), Arg::F32(alpha)],
        )
    }

    fn add(&self, x: DevPtr, y: DevPtr, count: usize) -> Result<(), FlowError> {
        self.go(&elementwise::ADD, count, &[p(x), p(y), n(count)])
    }

    /// Writes a cache back from a workspace: plain copy while `extent ≤ L`, else `carry.retain`
    /// (`prepend`: the paper's rule on prepend storage; rows of `inner` floats per frame;
    /// `prompt`/`retained` on this clock).
    #[allow(clippy::too_many_arguments)]
    fn write_back(
        &self,
        dst: DevPtr,
        dst_frames: usize,
        src: DevPtr,
        src_frames: usize,
        outer: usize,
        inner: usize,
        extent: usize,
        prompt: usize,
        retained: usize,
        prepend: bool,
    ) -> Result<usize, FlowError> {
        if extent <= prompt + retained {
            self.copy(
                dst,
                dst_frames * inner,
                src,
                src_frames * inner,
                outer,
                extent * inner,
                1,
            )?;
            return Ok(extent);
        }
        // (head, tail): the paper's rule on prepend storage keeps the newest `retained` frames
        // at the head and the prompt at the tail; the append rule keeps the prompt at the head.
        let (head, tail) = if prepend {
            (retained, prompt)
        } else {
            (prompt, retained)
        };
        let k = &dcc_kernels::carry::RETAIN;
        let args = [
            p(dst),
            p(src),
            n(outer),
            n(dst_frames * inner),
            n(src_frames * inner),
            n(inner),
            n(head),
            n(tail),
            n(extent),
        ];
        self.mark(k.name)?;
        // SAFETY: `extent > prompt + retained` here, so the carry kernel's window moves left;
        // it writes frames [0, prompt + retained) of `outer` rows of `dst_frames·inner` floats
        // and reads frames [0, extent) of rows of `src_frames·inner`. Every caller passes a
        // destination carry of capacity `dst_frames >= prompt + retained` (a state's carry
        // capacity, checked against the retention when the state was built, or the stock
        // store's fresh carries allocated just before for exactly the kept extent) and a source
        // workspace of `src_frames >= extent` frames (the conformer/solver workspace the
        // extent was written into), `outer` rows of each; dst and src are different buffers.
        unsafe {
            self.be
                .launch(k, LaunchDims::blocks(outer.max(1) as u32, THREADS), &args)
        }?;
        Ok(prompt + retained)
    }

    // ---- the model -----------------------------------------------------------------------

    /// `[freq ‖ t hidden ‖ cond ‖ 11·hidden spare]` then `[spk normed ‖ proj]`.
    fn spk_slots(&self) -> (DevPtr, DevPtr) {
        let c = &self.cfg;
        let s = &self.w.small;
        let base = c.dit.freq_dim + 13 * c.dit.hidden;
        (at(s, base), at(s, base + c.spk_dim))
    }

    /// The fixed token-id input buffer (`u32`, `max_call_tokens + lookahead`).
    pub fn ids(&self) -> DevPtr {
        self.w.ids.ptr()
    }

    /// The fixed speaker-embedding input buffer (`[1, spk_dim]`, raw), the flow's `spk` input.
    pub fn spk(&self) -> DevPtr {
        self.w.spk.ptr()
    }

    /// The encoder's output `mu` (`[frames, mel]`), the flow's `mu` input.
    pub fn mu(&self) -> DevPtr {
        self.w.mu.ptr()
    }

    /// The flow's `cond` input (`[frames, mel]`): the prompt mel during priming, zeros after.
    pub fn cond(&self) -> DevPtr {
        self.w.cond.ptr()
    }

    /// The solver state `x` (`[frames, mel]`), initialized from the noise table inside the flow.
    pub fn x(&self) -> DevPtr {
        self.w.xs.ptr()
    }

    /// The emitted mel `[mel, frames]` of the last flow call that ran the final step.
    pub fn mel_out(&self) -> DevPtr {
        self.w.mel_out.ptr()
    }

    /// Bytes of each of the fixed `mu`, `cond` and `x` buffers.
    pub fn io_bytes(&self) -> usize {
        self.w
            .mu
            .bytes()
            .min(self.w.cond.bytes())
            .min(self.w.xs.bytes())
    }

    /// The port's storage of the blocks' conformer carry at a token stride `tokens`:
    /// `[blocks, heads, tokens, 2·d_k]` (the contract's `conformer_cache` layout).
    pub fn conformer_dims(&self, tokens: usize) -> [usize; 4] {
        self.conf_dims(tokens)
    }

    /// The port's storage of the up-blocks' carry at a frame stride `frames`: `[up_blocks,
    /// heads, frames, 2·d_k]` (the contract's `upsample_cache` layout).
    pub fn upsample_dims(&self, frames: usize) -> [usize; 4] {
        self.up_dims(frames)
    }

    /// The per-layer conformer workspace (written by every encoder call).
    pub fn conformer_workspace(&self) -> DevPtr {
        self.w.conf_ws.ptr()
    }

    /// Bytes of the fixed token-id buffer.
    pub fn ids_bytes(&self) -> usize {
        self.w.ids.bytes()
    }

    /// Frames one call of `n_tokens` tokens presents.
    pub fn call_frames(&self, n_tokens: usize, last_chunk: bool) -> usize {
        let e = &self.cfg.encoder;
        let t = if last_chunk {
            n_tokens + e.pre_lookahead
        } else {
            n_tokens
        };
        t.saturating_sub(e.pre_lookahead) * e.up_stride
    }

    /// Validates one call's host inputs and uploads them into the fixed input buffers (token
    /// ids, speaker embedding). Host copies: never inside a capture.
    pub fn set_inputs(
        &self,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<(), FlowError> {
        let c = &self.cfg;
        let la = c.encoder.pre_lookahead;
        if spk.len() != c.spk_dim {
            return Err(FlowError::Input(format!(
                "speaker embedding has {} values, expected {}",
                spk.len(),
                c.spk_dim
            )));
        }
        let min = if last_chunk { 2 } else { la + 2 };
        if tokens.len() < min || tokens.len() > self.limits.max_call_tokens {
            return Err(FlowError::Input(format!(
                "{} tokens: a call takes {min}..={} tokens",
                tokens.len(),
                self.limits.max_call_tokens
            )));
        }
        if let Some(id) = tokens.iter().find(|&&t| t as usize >= c.vocab) {
            return Err(FlowError::Input(format!(
                "token {id} outside the vocabulary of {}",
                c.vocab
            )));
        }
        self.be.upload(self.w.spk.ptr(), spk)?;
        self.be.upload(self.w.ids.ptr(), tokens)?;
        Ok(())
    }

    /// Speaker normalization and projection of the raw embedding at `raw`; returns the
    /// projection.
    fn speaker(&self, raw: DevPtr) -> Result<DevPtr, FlowError> {
        let c = &self.cfg;
        let (normed, proj) = self.spk_slots();
        self.go(
            &norm::L2_NORMALIZE,
            norm::row_threads(1),
            &[p(normed), p(raw), n(1), n(c.spk_dim), Arg::F32(1e-12)],
        )?;
        self.lin(&self.spk_affine, 1, normed, proj)?;
        Ok(proj)
    }

    /// Encoder I/O of `st` for a call of `n_tokens` tokens from the fixed id buffer.
    pub fn encoder_io(&self, st: &DeviceState, n_tokens: usize, last_chunk: bool) -> EncoderIo {
        EncoderIo {
            ids: self.w.ids.ptr(),
            n_tokens,
            last_chunk,
            t_tok: st.t_tok,
            carry: st.conformer_carry(),
            carry_cap: st.conformer_cap(),
            up_carry: st.upsample_carry(),
            up_cap: st.upsample_cap(self.cfg.encoder.up_stride),
            write_back: st.store.is_fixed(),
            pre_cnn: st.ctx.pre_cnn,
            up_cnn: st.ctx.up_cnn,
            retention: st.retention,
        }
    }

    /// Flow I/O of `st` for a call presenting `frames` frames (mu/cond from the fixed buffers).
    pub fn flow_io(&self, st: &DeviceState, frames: usize) -> FlowIo {
        FlowIo {
            l_old: st.est_extent,
            frames,
            mu: self.w.mu.ptr(),
            cond: self.w.cond.ptr(),
            spk: self.w.spk.ptr(),
            carry: st.estimator_carry(),
            carry_cap: st.estimator_cap(),
            ws: st.solver_workspace(),
            ws_frames: st.workspace_frames(),
            carry_slice: false,
            write_back: st.store.is_fixed(),
            est_cnn: st.ctx.est_cnn,
            conv_steps: st.conv_steps,
            retention: st.retention,
            solver: st.solver,
        }
    }

    /// Conformer workspace of token-clock block `i` / frame-clock up-block `i` (`up`) and the
    /// layer's carry within its stack's carry `carry` of stride `cap` (`[layers, heads, cap,
    /// 2·d_k]`): `(carry, workspace)`.
    fn conf_ptrs(&self, carry: DevPtr, cap: usize, up: bool, i: usize) -> (DevPtr, DevPtr) {
        let e = &self.cfg.encoder;
        let dk2 = 2 * (e.dim / e.heads);
        let s = e.up_stride;
        let l = self.limits.carry_frames;
        let work_tok = l / s + self.t_tok_cap;
        let work_up = l + self.t_up_cap;
        let layer = carry.offset(i * e.heads * cap * dk2 * 4);
        if up {
            (
                layer,
                at(
                    &self.w.conf_ws,
                    (e.blocks * work_tok + i * work_up) * e.heads * dk2,
                ),
            )
        } else {
            (layer, at(&self.w.conf_ws, i * e.heads * work_tok * dk2))
        }
    }

    /// The `encoder` callable: embedding, encoder and `encoder_proj` of the tokens in `io.ids`
    /// (mu lands in [`DeviceFlow::mu`]). Stream work only. Returns `(frames, conformer extent on
    /// the token clock after retention)`.
    ///
    /// Token counts, extents and capacities are checked against this flow's buffers (an
    /// [`FlowError::Input`] otherwise); the regions `io` names cannot be.
    ///
    /// # Safety
    /// Every address in `io` is inside a live buffer of this flow's backend that stays alive
    /// until the call's work completes (every replay of a graph it is captured into, too), and
    /// holds at least: `ids`, `n_tokens` `u32` ids; `carry`,
    /// [`DeviceFlow::conformer_dims`]`(carry_cap)` floats; `up_carry`,
    /// [`DeviceFlow::upsample_dims`]`(up_cap)` floats; `pre_cnn`, [`DeviceFlow::pre_lookahead_dims`]
    /// floats; `up_cnn`, [`DeviceFlow::up_layer_dims`] floats; these regions do not overlap
    /// each other or this flow's buffers, except `ids` being [`DeviceFlow::ids`]. An
    /// [`DeviceFlow::encoder_io`] of a [`DeviceState`] this flow created satisfies it (so do
    /// staging copies of the same shapes).
    pub unsafe fn encoder_call(&self, io: &EncoderIo) -> Result<(usize, usize), FlowError> {
        let c = &self.cfg;
        let e = &c.encoder;
        let (d, la, s) = (e.dim, e.pre_lookahead, e.up_stride);
        let r = io.retention;
        let w = &self.w;
        let t = io.n_tokens;
        if io.t_tok > io.carry_cap || io.t_tok * s > io.up_cap || t > self.limits.max_call_tokens {
            return Err(FlowError::Input(format!(
                "encoder call: {t} tokens over a conformer extent of {} tokens (capacity {} \
                 tokens, {} frames)",
                io.t_tok, io.carry_cap, io.up_cap
            )));
        }
        // The conformer workspaces hold `work_tok` tokens / `work_up` frames per layer (and the
        // position table `pe_size` = `work_up` frames): the cache plus the call's new frames
        // must fit, as must the kept frames in the carries written back.
        let tn_max = if io.last_chunk {
            t
        } else {
            t.checked_sub(la).unwrap_or(usize::MAX)
        };
        let (work_tok, work_up) = (
            self.limits.carry_frames / s + self.t_tok_cap,
            self.limits.carry_frames + self.t_up_cap,
        );
        let kept_tok = r.prompt_frames / s + r.retained_frames / s;
        if tn_max == usize::MAX
            || io.t_tok + tn_max > work_tok
            || (io.t_tok + tn_max) * s > work_up
            || (io.write_back && (kept_tok > io.carry_cap || r.limit() > io.up_cap))
        {
            return Err(FlowError::Input(format!(
                "encoder call: {t} tokens over a conformer extent of {} tokens exceed the \
                 workspace ({work_tok} tokens) or the carries ({} tokens, {} frames) the \
                 retention keeps {kept_tok} tokens / {} frames in",
                io.t_tok,
                io.carry_cap,
                io.up_cap,
                r.limit()
            )));
        }
        self.go(
            &embed::GATHER,
            t * d,
            &[
                p(w.a.ptr()),
                p(io.ids),
                p(self.embedding.ptr()),
                n(t),
                n(d),
                n(c.vocab),
            ],
        )?;
        // embed: Linear → LayerNorm → ·√d, into b
        self.lin(&self.embed.lin, t, w.a.ptr(), w.x.ptr())?;
        self.norm(&self.embed.norm, t, d, w.x.ptr(), w.b.ptr())?;
        self.act(w.b.ptr(), t * d, act::SCALE, self.embed.xscale)?;
        let t = if io.last_chunk {
            self.mark("memset")?;
            self.be.memset_d32(at(&w.b, t * d), 0, la * d)?;
            t + la
        } else {
            t
        };
        let tn = t - la;
        // pre-lookahead: conv1 (k = la+1) into cat after the 2-row context, leaky ReLU, conv2
        let ctx = CONV2_K - 1;
        let pre_cnn = io.pre_cnn;
        self.copy(w.cat.ptr(), d, pre_cnn, d, ctx, d, 1)?;
        self.copy(w.col.ptr(), (la + 1) * d, w.b.ptr(), d, tn, (la + 1) * d, 1)?;
        self.linear(
            &self.pre_conv1,
            tn,
            w.col.ptr(),
            (la + 1) * d,
            at(&w.cat, ctx * d),
            d,
        )?;
        self.act(at(&w.cat, ctx * d), tn * d, act::LEAKY_RELU, 0.01)?;
        self.copy(pre_cnn, d, at(&w.cat, tn * d), d, ctx, d, 1)?;
        self.copy(w.col.ptr(), CONV2_K * d, w.cat.ptr(), d, tn, CONV2_K * d, 1)?;
        self.lin(&self.pre_conv2, tn, w.col.ptr(), w.x.ptr())?;
        self.add(w.x.ptr(), w.b.ptr(), tn * d)?;

        // first conformer stack (token clock)
        let l_tok = io.t_tok;
        let (cap_tok, cap_up) = (io.carry_cap, io.up_cap);
        let work_tok = self.limits.carry_frames / s + self.t_tok_cap;
        let mut kept = 0;
        for (i, layer) in self.encoders.iter().enumerate() {
            let (carry, ws) = self.conf_ptrs(io.carry, cap_tok, false, i);
            let wb = io.write_back.then_some((carry, cap_tok));
            kept = self.conformer_layer(
                layer,
                tn,
                l_tok,
                (carry, cap_tok),
                (ws, work_tok),
                wb,
                s,
                &r,
            )?;
        }
        let new_tok = if self.encoders.is_empty() {
            l_tok + tn
        } else {
            kept
        };

        // upsample ×s (nearest) after the 2s-row context, conv k = 2s + 1
        let tu = tn * s;
        let uctx = 2 * s;
        let up_cnn = io.up_cnn;
        self.copy(w.cat.ptr(), d, up_cnn, d, uctx, d, 1)?;
        self.copy(at(&w.cat, uctx * d), d, w.x.ptr(), d, tu, d, s)?;
        self.copy(up_cnn, d, at(&w.cat, tu * d), d, uctx, d, 1)?;
        let ku = 2 * s + 1;
        self.copy(w.col.ptr(), ku * d, w.cat.ptr(), d, tu, ku * d, 1)?;
        self.lin(&self.up_conv, tu, w.col.ptr(), w.a.ptr())?;
        self.lin(&self.up_embed.lin, tu, w.a.ptr(), w.b.ptr())?;
        self.norm(&self.up_embed.norm, tu, d, w.b.ptr(), w.x.ptr())?;
        self.act(w.x.ptr(), tu * d, act::SCALE, self.up_embed.xscale)?;

        // second conformer stack (frame clock)
        let work_up = self.limits.carry_frames + self.t_up_cap;
        for (i, layer) in self.up_encoders.iter().enumerate() {
            let (carry, ws) = self.conf_ptrs(io.up_carry, cap_up, true, i);
            let wb = io.write_back.then_some((carry, cap_up));
            self.conformer_layer(
                layer,
                tu,
                l_tok * s,
                (carry, cap_up),
                (ws, work_up),
                wb,
                1,
                &r,
            )?;
        }
        self.norm(&self.after_norm, tu, d, w.x.ptr(), w.a.ptr())?;
        self.lin(&self.encoder_proj, tu, w.a.ptr(), w.mu.ptr())?;
        Ok((tu, new_tok))
    }

    /// One conformer layer over `t` rows in `w.x` (in place): cache `carry` (`[heads, cap,
    /// 2dk]`, extent `l`) copied into the layer's workspace `ws` (`[heads, work, 2dk]`) before
    /// the new frames; with `write_back`, the kept frames are written back in place right after.
    /// `div` converts the retention's frames to this clock. Returns the extent after retention.
    #[allow(clippy::too_many_arguments)]
    fn conformer_layer(
        &self,
        ly: &DConf,
        t: usize,
        l: usize,
        (carry, cap): (DevPtr, usize),
        (kv, work): (DevPtr, usize),
        write_back: Option<(DevPtr, usize)>,
        div: usize,
        r: &Retention,
    ) -> Result<usize, FlowError> {
        let e = &self.cfg.encoder;
        let (d, h) = (e.dim, e.heads);
        let dk = d / h;
        let w = &self.w;
        let tk = l + t;
        self.norm(&ly.norm_mha, t, d, w.x.ptr(), w.xn.ptr())?;
        self.lin(&ly.q, t, w.xn.ptr(), w.q.ptr())?;
        self.lin(&ly.k, t, w.xn.ptr(), w.k.ptr())?;
        self.lin(&ly.v, t, w.xn.ptr(), w.v.ptr())?;
        // [carry ‖ new] (append order)
        self.copy(kv, work * 2 * dk, carry, cap * 2 * dk, h, l * 2 * dk, 1)?;
        let kv_args = [
            p(kv),
            n(work),
            n(l),
            p(w.k.ptr()),
            p(w.v.ptr()),
            n(d),
            n(1),
            n(h),
            n(t),
            n(dk),
        ];
        self.go(&copy::KV_PACK, h * t * dk, &kv_args)?;
        // relative positions for size tk: the centre 2tk − 1 rows of the stored table
        let pe = at(&self.pe, (self.pe_size - tk) * d);
        self.lin(&ly.pos, 2 * tk - 1, pe, w.pos.ptr())?;
        let args = [
            p(w.att.ptr()),
            p(w.q.ptr()),
            p(ly.u.ptr()),
            p(ly.w.ptr()),
            p(kv),
            p(w.pos.ptr()),
            n(h),
            n(t),
            n(tk),
            n(dk),
            n(work),
        ];
        let dims = attention::attention_dims(h, t, tk, dk).map_err(dcc_runtime::Error::from)?;
        self.mark(attention::REL_POS.name)?;
        // SAFETY: att and q are this flow's `Work` buffers, sized for `t_tok_cap`/`t_up_cap`
        // rows of `dim` (t is bounded by them on entry to `encoder_call`); u and w are the
        // layer's `[heads, dk]` weights; pos holds the 2tk − 1 projected rows just written
        // (sized for the position table, `pe_size >= tk`); kv is this layer's slice of the
        // conformer workspace, `h` rows of `work` frames, holding the tk = l + t frames
        // copied/packed above (`encoder_call` checks l + t against `work`). `dims` come from
        // `attention_dims`, which the twin and kernel re-check.
        unsafe { self.be.launch(&attention::REL_POS, dims, &args) }?;
        self.lin(&ly.out, t, w.att.ptr(), w.o.ptr())?;
        self.add(w.x.ptr(), w.o.ptr(), t * d)?;
        self.norm(&ly.norm_ff, t, d, w.x.ptr(), w.xn.ptr())?;
        self.lin(&ly.w1, t, w.xn.ptr(), w.hidden.ptr())?;
        self.act(w.hidden.ptr(), t * ly.w1.o, act::SILU, 0.0)?;
        self.lin(&ly.w2, t, w.hidden.ptr(), w.o.ptr())?;
        self.add(w.x.ptr(), w.o.ptr(), t * d)?;
        // the conformer caches are append-ordered under both retentions
        let (p_, r_) = (r.prompt_frames / div, r.retained_frames / div);
        match write_back {
            Some((dst, dst_cap)) => {
                self.write_back(dst, dst_cap, kv, work, h, 2 * dk, tk, p_, r_, false)
            }
            None => Ok(kept_extent(tk, p_, r_)),
        }
    }

    /// `t` and `dt` of solver step `si` (0-based), accumulated exactly as the loop does.
    fn step_time(&self, t_span: &[f32], si: usize) -> (f32, f32) {
        let mut t = t_span[0];
        let mut dt = t_span[1] - t_span[0];
        for step in 1..=si {
            t += dt;
            dt = t_span[step + 1] - t;
        }
        (t, dt)
    }

    /// The `flow` callable: solver steps `steps` of the CFM Euler loop over the DiT estimator.
    /// The first step also normalizes and projects the speaker (`io.spk`), draws `x` from the noise table at offset
    /// `io.l_old` and assembles `[x ‖ mu ‖ spk ‖ cond]`; the last step also writes the mel to
    /// [`DeviceFlow::mel_out`]. Stream work only. Returns the estimator extent after retention.
    ///
    /// Steps, frame counts, extents and capacities are checked against this flow's buffers and
    /// `io`'s declared capacities (an [`FlowError::Input`] otherwise); the regions `io` names
    /// cannot be.
    ///
    /// # Safety
    /// Every address in `io` is inside a live buffer of this flow's backend that stays alive
    /// until the call's work completes (every replay of a graph it is captured into, too), and
    /// holds at least (floats): `mu` and `cond`, `frames · mel`; `spk`, `spk_dim`; `carry`, the
    /// `[depth, 2, heads, carry_cap, 2·head_dim]` estimator carry of every step up to
    /// `steps.end` (step-major), or of the one step when `carry_slice`; `ws`, the same
    /// per-step shape with `ws_frames` frames for every step up to `steps.end`; `est_cnn`,
    /// [`DeviceFlow::estimator_conv_dims`]`(conv_steps)`. These regions do not overlap each
    /// other or this flow's buffers, except `mu`, `cond` and `spk` being this flow's input
    /// buffers. A [`DeviceFlow::flow_io`] of a [`DeviceState`] this flow created satisfies it
    /// (so do staging copies of the same shapes).
    pub unsafe fn flow_call(
        &self,
        io: &FlowIo,
        steps: std::ops::Range<usize>,
    ) -> Result<usize, FlowError> {
        let c = &self.cfg;
        let dc = &c.dit;
        let (mel, cin, hid, heads, hd) = (c.mel, dc.in_channels, dc.hidden, dc.heads, dc.head_dim);
        let inner = dc.inner();
        let w = &self.w;
        let sv = io.solver;
        let r = io.retention;
        let frames = io.frames;
        let l_old = io.l_old;
        let tk = l_old + frames;
        if tk > self.noise_frames {
            return Err(FlowError::Input(format!(
                "noise table has {} frames, the call needs {}",
                self.noise_frames, tk
            )));
        }
        if sv.n_steps == 0
            || steps.end > sv.n_steps
            || steps.start >= steps.end
            || (io.carry_slice && steps.len() != 1)
        {
            return Err(FlowError::Input(format!(
                "solver steps {steps:?} of {}",
                sv.n_steps
            )));
        }
        if steps.end > io.conv_steps {
            return Err(FlowError::Input(format!(
                "solver steps {steps:?}: the estimator conv cache holds {} steps",
                io.conv_steps
            )));
        }
        if io.write_back && r.prompt_frames + r.retained_frames > io.carry_cap {
            return Err(FlowError::Input(format!(
                "flow call: the retention keeps {} frames, the carry holds {}",
                r.prompt_frames + r.retained_frames,
                io.carry_cap
            )));
        }
        if tk > io.ws_frames || l_old > io.carry_cap || frames > self.t_up_cap {
            return Err(FlowError::Input(format!(
                "flow call: {l_old} + {frames} frames exceed the workspace ({}) or carry ({})",
                io.ws_frames, io.carry_cap
            )));
        }
        let rows = CFG_BATCH * frames;
        let s = &w.small;
        if steps.start == 0 {
            let spk = self.speaker(io.spk)?;
            // z = noise[:, l_old : l_old + frames]ᵀ · temperature
            self.go(
                &copy::TRANSPOSE,
                frames * mel,
                &[
                    p(w.xs.ptr()),
                    n(mel),
                    p(at(&self.noise, l_old)),
                    n(self.noise_frames),
                    n(mel),
                    n(frames),
                ],
            )?;
            self.act(w.xs.ptr(), frames * mel, act::SCALE, sv.temperature)?;
            // x_in = [x ‖ mu ‖ spk ‖ cond] / [x ‖ 0 ‖ 0 ‖ 0]
            self.mark("memset")?;
            self.be.memset_d32(w.xin.ptr(), 0, rows * cin)?;
            self.copy(at(&w.xin, mel), cin, io.mu, mel, frames, mel, 1)?;
            self.copy(at(&w.xin, 2 * mel), cin, spk, 0, frames, mel, 1)?;
            self.copy(at(&w.xin, 3 * mel), cin, io.cond, mel, frames, mel, 1)?;
        }
        let (freq, th, cact) = (at(s, 0), at(s, dc.freq_dim), at(s, dc.freq_dim + hid));
        // adaLN modulation i of layer li (`[depth, 9, hidden]`), then the final layer's
        // shift ‖ scale
        let m = |li: usize, i: usize| at(&w.mods, (li * 9 + i) * hid);
        let (fin_shift, fin_scale) = (m(dc.depth, 0), m(dc.depth, 1));
        let t_span = cosine_t_span(sv.n_steps);
        let (mut t, mut dt) = self.step_time(&t_span, steps.start);
        let work = io.ws_frames;
        let l_cap = io.carry_cap;
        let per_layer_work = CFG_BATCH * heads * work * 2 * hd;
        let per_layer_carry = CFG_BATCH * heads * l_cap * 2 * hd;
        let ctx = CONV_K - 1;
        let cnn_per_layer = CFG_BATCH * 2 * ctx * hid;
        let scale = (1.0 / (hd as f64).sqrt()) as f32;
        let col_rows = rows * CONV_K * hid;
        let (col1, col2) = (w.ccol.ptr(), at(&w.ccol, col_rows));
        let mut kept = kept_extent(tk, r.prompt_frames, r.retained_frames);
        for step in steps.start + 1..=steps.end {
            let si = step - 1;
            let ws = io.ws.offset(si * dc.depth * per_layer_work * 4);
            let carry_step = if io.carry_slice {
                io.carry
            } else {
                io.carry.offset(si * dc.depth * per_layer_carry * 4)
            };
            // x_in[b] ← x for both CFG rows
            self.go(
                &copy::BATCHED,
                rows * mel,
                &[
                    p(w.xin.ptr()),
                    n(frames * cin),
                    n(cin),
                    p(w.xs.ptr()),
                    n(0),
                    n(mel),
                    n(CFG_BATCH),
                    n(frames),
                    n(mel),
                ],
            )?;
            self.go(
                &embed::TIMESTEP,
                dc.freq_dim / 2,
                &[
                    p(freq),
                    n(dc.freq_dim),
                    Arg::F32(t),
                    Arg::F32(T_SCALE),
                    Arg::F32(MAX_PERIOD),
                ],
            )?;
            self.lin(&self.t_mlp0, 1, freq, th)?;
            self.act(th, hid, act::SILU, 0.0)?;
            self.lin(&self.t_mlp2, 1, th, cact)?;
            self.act(cact, hid, act::SILU, 0.0)?;
            // every block's modulations and the final layer's, one GEMM
            self.lin(&self.ada_all, 1, cact, w.mods.ptr())?;
            self.lin(&self.in_proj, rows, w.xin.ptr(), w.x.ptr())?;
            self.norm_mod(rows, hid, w.x.ptr(), m(0, 0), m(0, 1), w.xn.ptr())?;
            for (li, blk) in self.blocks.iter().enumerate() {
                // attention over [new ‖ carry]; w.xn holds modulate(norm1(x)) here
                let kvw = ws.offset(li * per_layer_work * 4);
                let carry = carry_step.offset(li * per_layer_carry * 4);
                self.linear(&blk.qkv, rows, w.xn.ptr(), hid, w.qkv.ptr(), 3 * inner)?;
                let qk_args = [
                    p(w.qn.ptr()),
                    p(kvw),
                    n(work),
                    n(0),
                    p(w.qkv.ptr()),
                    n(3 * inner),
                    p(blk.q_norm.g.ptr()),
                    p(blk.q_norm.b.ptr()),
                    p(blk.k_norm.g.ptr()),
                    p(blk.k_norm.b.ptr()),
                    n(CFG_BATCH),
                    n(heads),
                    n(frames),
                    n(hd),
                    Arg::F32(blk.q_norm.eps),
                ];
                if blk.q_norm.eps != blk.k_norm.eps {
                    return Err(FlowError::Config("q/k LayerNorms differ in eps".into()));
                }
                self.go(
                    &norm::QK_PACK,
                    norm::row_threads(2 * rows * heads),
                    &qk_args,
                )?;
                self.copy(
                    kvw.offset(frames * 2 * hd * 4),
                    work * 2 * hd,
                    carry,
                    l_cap * 2 * hd,
                    CFG_BATCH * heads,
                    l_old * 2 * hd,
                    1,
                )?;
                let args = [
                    p(w.att.ptr()),
                    p(w.qn.ptr()),
                    p(kvw),
                    n(CFG_BATCH),
                    n(heads),
                    n(frames),
                    n(tk),
                    n(hd),
                    n(work),
                    Arg::F32(scale),
                ];
                let dims = attention::attention_dims(CFG_BATCH * heads, frames, tk, hd)
                    .map_err(dcc_runtime::Error::from)?;
                self.mark(attention::SDPA.name)?;
                // SAFETY: att and qn are `Work` buffers sized for CFG_BATCH·t_up_cap rows of
                // `inner` floats, and frames <= t_up_cap (checked on entry); kvw is layer li's
                // slice of the solver workspace `io.ws`, CFG_BATCH·heads rows of `work` =
                // `io.ws_frames` frames, of which tk <= work (checked on entry) were filled
                // above; the workspace's extent is the caller's `# Safety` promise.
                unsafe { self.be.launch(&attention::SDPA, dims, &args) }?;
                self.lin(&blk.proj, rows, w.att.ptr(), w.o.ptr())?;
                // x += gate_msa · o; xn = modulate(norm3(x), shift_conv, scale_conv)
                self.gated_norm(rows, w.o.ptr(), m(li, 2), m(li, 6), m(li, 7))?;
                // causal conv block: contexts of (step, layer, batch, conv) at
                // est_cnn[((si·depth + li)·cnn_per_layer + (b·2 + which)·ctx·hid)]
                let cnn0 = io.est_cnn.offset((si * dc.depth + li) * cnn_per_layer * 4);
                let cnn1 = cnn0.offset(ctx * hid * 4);
                self.go(
                    &copy::IM2COL,
                    col_rows,
                    &[
                        p(col1),
                        p(w.xn.ptr()),
                        n(frames * hid),
                        p(cnn0),
                        n(2 * ctx * hid),
                        n(CFG_BATCH),
                        n(frames),
                        n(CONV_K),
                        n(hid),
                    ],
                )?;
                self.linear(&blk.conv1, rows, col1, CONV_K * hid, w.q.ptr(), hid)?;
                // LayerNorm + Mish of conv1's output, straight into conv2's im2col rows
                self.mark(norm::LAYER_NORM_ACT_IM2COL.name)?;
                // SAFETY: col2 is the second half of `ccol` (sized for two im2col blocks of
                // CFG_BATCH·t_up_cap rows of CONV_K·hidden), q holds conv1's CFG_BATCH·frames
                // rows of hidden, g/b are the block's `[hidden]` norm weights, and cnn1 is this
                // (step, layer)'s second conv context, 2·ctx·hidden floats per batch row inside
                // the estimator conv cache: `si < steps.end <= io.conv_steps` (checked on entry)
                // and the cache's extent is the caller's `# Safety` promise.
                unsafe {
                    self.be.launch(
                        &norm::LAYER_NORM_ACT_IM2COL,
                        LaunchDims::blocks((CFG_BATCH * (frames + ctx)) as u32, norm::LN_ACT_BLOCK),
                        &[
                            p(col2),
                            p(w.q.ptr()),
                            p(blk.conv_norm.g.ptr()),
                            p(blk.conv_norm.b.ptr()),
                            Arg::F32(blk.conv_norm.eps),
                            Arg::I32(act::MISH),
                            Arg::F32(0.0),
                            p(cnn1),
                            n(2 * ctx * hid),
                            n(CFG_BATCH),
                            n(frames),
                            n(CONV_K),
                            n(hid),
                        ],
                    )
                }?;
                // new contexts (both convs, both CFG rows): the last ctx rows of ctx ‖ input,
                // i.e. slots 1..K of each batch's last im2col row
                self.go(
                    &copy::BATCHED,
                    CFG_BATCH * 2 * ctx * hid,
                    &[
                        p(cnn0),
                        n(2 * ctx * hid),
                        n(ctx * hid),
                        p(col1.offset(((frames - 1) * CONV_K + 1) * hid * 4)),
                        n(frames * CONV_K * hid),
                        n(col_rows),
                        n(CFG_BATCH),
                        n(2),
                        n(ctx * hid),
                    ],
                )?;
                self.linear(&blk.conv2, rows, col2, CONV_K * hid, w.att.ptr(), hid)?;
                // x += gate_conv · conv; xn = modulate(norm2(x), shift_mlp, scale_mlp)
                self.gated_norm(rows, w.att.ptr(), m(li, 8), m(li, 3), m(li, 4))?;
                // MLP
                self.lin(&blk.fc1, rows, w.xn.ptr(), w.hidden.ptr())?;
                self.act(w.hidden.ptr(), rows * dc.mlp_hidden, act::GELU_TANH, 0.0)?;
                self.lin(&blk.fc2, rows, w.hidden.ptr(), w.o.ptr())?;
                // x += gate_mlp · mlp; xn = the next block's modulate(norm1(x)) (or the final
                // layer's)
                let (sh, sc) = if li + 1 < dc.depth {
                    (m(li + 1, 0), m(li + 1, 1))
                } else {
                    (fin_shift, fin_scale)
                };
                self.gated_norm(rows, w.o.ptr(), m(li, 5), sh, sc)?;
            }
            // carry write-back for this step (every layer's [new ‖ old] → carry), state rule
            // paper: carry.retain keeps [:retained] ‖ [ℓ−prompt:]; vendor: [:prompt] ‖
            // [ℓ−retained:] of the same prepend-ordered cache
            if io.write_back {
                kept = self.write_back(
                    carry_step,
                    l_cap,
                    ws,
                    work,
                    dc.depth * CFG_BATCH * heads,
                    2 * hd,
                    tk,
                    r.prompt_frames,
                    r.retained_frames,
                    r.order == RetentionOrder::Paper,
                )?;
            }
            // final layer (w.xn = modulate(norm_final(x))), guidance, Euler step
            self.lin(&self.final_linear, rows, w.xn.ptr(), w.vel.ptr())?;
            self.go(
                &elementwise::CFG_EULER,
                frames * mel,
                &[
                    p(w.xs.ptr()),
                    p(w.vel.ptr()),
                    n(frames * mel),
                    Arg::F32(sv.cfg_rate),
                    Arg::F32(dt),
                ],
            )?;
            t += dt;
            if step < sv.n_steps {
                dt = t_span[step + 1] - t;
            }
        }
        if steps.end == sv.n_steps {
            self.go(
                &copy::TRANSPOSE,
                frames * mel,
                &[
                    p(w.mel_out.ptr()),
                    n(frames),
                    p(w.xs.ptr()),
                    n(mel),
                    n(frames),
                    n(mel),
                ],
            )?;
        }
        Ok(kept)
    }

    /// After the callables of one call: under the state rule only the extents advance (the
    /// carries were written back in place); under the stock store the kept frames are
    /// materialized into freshly allocated compact carries (the vendor's `torch.cat`) and the
    /// old ones freed. `tn` tokens were presented.
    pub fn finish_call(
        &self,
        st: &mut DeviceState,
        tn: usize,
        new_tok: usize,
        est_kept: usize,
    ) -> Result<(), FlowError> {
        self.check_owner(st)?;
        let e = &self.cfg.encoder;
        let s = e.up_stride;
        let r = st.retention;
        let l_old = st.est_extent;
        let l_tok = st.t_tok;
        // The stock store sizes its fresh carries from `new_tok`/`est_kept` and reads `tn` new
        // tokens from the workspaces: they must be what the call's callables returned.
        let want_tok = if e.blocks == 0 {
            l_tok + tn
        } else {
            kept_extent(l_tok + tn, r.prompt_frames / s, r.retained_frames / s)
        };
        let want_est = kept_extent(l_old + tn * s, r.prompt_frames, r.retained_frames);
        let work_tok = self.limits.carry_frames / s + self.t_tok_cap;
        let stock = !st.store.is_fixed();
        if l_tok + tn > work_tok
            || (stock && l_old + tn * s > STOCK_FRAMES)
            || new_tok != want_tok
            || est_kept != want_est
        {
            return Err(FlowError::Input(format!(
                "finish_call: {tn} tokens, kept {new_tok} tokens / {est_kept} frames; the call \
                 keeps {want_tok} / {want_est}"
            )));
        }
        if let StateStore::Stock {
            est_carry,
            est_ws,
            conf,
            up,
            ..
        } = &mut st.store
        {
            let be = self.be.as_ref();
            let dk2 = 2 * (e.dim / e.heads);
            // conformer: [carry ‖ new] of every layer → fresh compact carries
            let kept_up = new_tok * s;
            let alloc = |dims: [usize; 4]| {
                be.alloc(dims.iter().product::<usize>().max(1) * 4, AllocKind::Other)
            };
            let (fresh, fresh_up) = (
                alloc(self.conf_dims(new_tok))?,
                alloc(self.up_dims(kept_up))?,
            );
            let (tk_tok, tk_up) = (l_tok + tn, (l_tok + tn) * s);
            let work_tok = self.limits.carry_frames / s + self.t_tok_cap;
            let work_up = self.limits.carry_frames + self.t_up_cap;
            for i in 0..e.blocks {
                let (dst, ws) = self.conf_ptrs(fresh.ptr(), new_tok, false, i);
                self.write_back(
                    dst,
                    new_tok,
                    ws,
                    work_tok,
                    e.heads,
                    dk2,
                    tk_tok,
                    r.prompt_frames / s,
                    r.retained_frames / s,
                    false,
                )?;
            }
            for i in 0..e.up_blocks {
                let (dst, ws) = self.conf_ptrs(fresh_up.ptr(), kept_up, true, i);
                self.write_back(
                    dst,
                    kept_up,
                    ws,
                    work_up,
                    e.heads,
                    dk2,
                    tk_up,
                    r.prompt_frames,
                    r.retained_frames,
                    false,
                )?;
            }
            *conf = fresh;
            *up = fresh_up;
            // estimator: every step's [new ‖ old] → one fresh compact carry
            let d = &self.cfg.dit;
            let n_steps = st.solver.n_steps;
            let tk = l_old + tn * s;
            let fresh = be.alloc(
                (self.est_floats_per_frame(n_steps) * est_kept).max(1) * 4,
                AllocKind::Other,
            )?;
            self.write_back(
                fresh.ptr(),
                est_kept,
                est_ws.ptr(),
                STOCK_FRAMES,
                n_steps * d.depth * CFG_BATCH * d.heads,
                2 * d.head_dim,
                tk,
                r.prompt_frames,
                r.retained_frames,
                r.order == RetentionOrder::Paper,
            )?;
            *est_carry = fresh;
        }
        st.t_tok = new_tok;
        st.est_extent = est_kept;
        Ok(())
    }

    /// Floats of each conv context a session under `st`'s solver uses (its first `n_steps`
    /// steps of the estimator conv cache).
    fn ctx_floats_used(&self, st: &DeviceState) -> [usize; 3] {
        let mut f = st.ctx_floats;
        f[0] = self
            .estimator_conv_dims(st.solver.n_steps.min(st.conv_steps))
            .iter()
            .product();
        f
    }

    /// Zeroes a session's conv contexts and extents in place (addresses unchanged).
    fn reset(&self, st: &mut DeviceState) -> Result<(), FlowError> {
        let c = st.ctx;
        for (p, floats) in [c.est_cnn, c.pre_cnn, c.up_cnn]
            .into_iter()
            .zip(st.ctx_floats)
        {
            self.be.memset_d32(p, 0, floats)?;
        }
        st.est_extent = 0;
        st.t_tok = 0;
        st.primed = false;
        Ok(())
    }

    /// `setup_cache` into `st` (see [`Flow::setup_cache`]): the prompt-priming pass, eager by
    /// construction. Resets `st` in place (its addresses do not change).
    pub fn setup_cache(
        &self,
        st: &mut DeviceState,
        tokens: &[u32],
        mel: &[f32],
        spk: &[f32],
    ) -> Result<(), FlowError> {
        let e = &self.cfg.encoder;
        let frames = tokens.len().saturating_sub(e.pre_lookahead) * e.up_stride;
        if mel.len() != frames * self.cfg.mel {
            return Err(FlowError::Input(format!(
                "prompt mel has {} values, expected {frames} frames",
                mel.len()
            )));
        }
        self.set_inputs(tokens, spk, false)?;
        self.reset(st)?;
        if let StateStore::Stock {
            est_carry,
            conf,
            up,
            ..
        } = &mut st.store
        {
            *est_carry = self.be.alloc(4, AllocKind::Other)?;
            *conf = self.be.alloc(4, AllocKind::Other)?;
            *up = self.be.alloc(4, AllocKind::Other)?;
        }
        self.check_owner(st)?;
        // SAFETY: the I/O is `encoder_io`/`flow_io` of `st`, a state this flow created
        // (`check_owner`): ids/mu/cond/spk are this flow's input buffers, and the carries,
        // workspace and conv contexts are `st`'s buffers (its arena or plain buffers, owned by
        // `st`, borrowed mutably here), allocated with the shapes and capacities `st` records.
        let (frames, new_tok) =
            unsafe { self.encoder_call(&self.encoder_io(st, tokens.len(), false)) }?;
        self.be.upload(self.w.cond.ptr(), mel)?;
        let io = self.flow_io(st, frames);
        // SAFETY: as above.
        let kept = unsafe { self.flow_call(&io, 0..st.solver.n_steps) }?;
        // chunk calls see cond = 0
        self.be
            .memset_d32(self.w.cond.ptr(), 0, self.w.cond.bytes() / 4)?;
        self.finish_call(st, frames / e.up_stride, new_tok, kept)?;
        st.primed = true;
        Ok(())
    }

    /// `inference_chunk` (eager) with the retention of `st` applied; returns `[mel, frames]`.
    pub fn inference_chunk(
        &self,
        st: &mut DeviceState,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<Vec<f32>, FlowError> {
        if !st.primed {
            return Err(FlowError::Input(
                "session not primed (setup_cache first)".into(),
            ));
        }
        self.check_owner(st)?;
        self.set_inputs(tokens, spk, last_chunk)?;
        // SAFETY: as in `setup_cache`: the I/O of `st`, a state this flow created.
        let (frames, new_tok) =
            unsafe { self.encoder_call(&self.encoder_io(st, tokens.len(), last_chunk)) }?;
        // SAFETY: as above.
        let kept = unsafe { self.flow_call(&self.flow_io(st, frames), 0..st.solver.n_steps) }?;
        self.finish_call(st, frames / self.cfg.encoder.up_stride, new_tok, kept)?;
        Ok(self
            .be
            .download(self.w.mel_out.ptr(), self.cfg.mel * frames)?)
    }
}

/// Extent of a prompt + history cache of extent `tk` after retention.
fn kept_extent(tk: usize, prompt: usize, retained: usize) -> usize {
    tk.min(prompt + retained)
}

/// The envelope extent of `info` along its clock axis `axis` (looked up by name).
fn axis_extent(info: &RegionInfo, axis: &str) -> Result<usize, FlowError> {
    info.axis(axis).map(|i| info.dims[i]).ok_or_else(|| {
        FlowError::Config(format!(
            "region `{}` has no `{axis}` axis (dims {:?})",
            info.name, info.dim_names
        ))
    })
}

/// Checks that the contract stores `info` as the port does: `port` (packed, row-major), with
/// each named clock axis at the given position.
fn check_storage(
    info: &RegionInfo,
    axes: &[(&str, usize)],
    port: &[usize],
    what: &str,
) -> Result<(), FlowError> {
    let placed = axes.iter().all(|(a, at)| info.axis(a) == Some(*at));
    if !placed || info.dims != port || info.strides() != dcc_runtime::arena::packed_strides(port) {
        return Err(FlowError::Config(format!(
            "the contract lays `{}` out as {:?} = {:?}, the port stores it as {what} = {port:?}",
            info.name, info.dim_names, info.dims
        )));
    }
    Ok(())
}
