//! The flow on a runtime [`Backend`]: every op is a registered kernel launch
//! (`dcc_kernels::token2wav::defs`) or a `Backend::gemm`, over device buffers at fixed addresses.
//!
//! State layout (per session, [`DeviceState`]), all frame axes at a fixed capacity:
//! * estimator carry `[n_steps, depth, 2, heads, L, 2·head_dim]` (prepend-ordered, `L = prompt +
//!   retained`), estimator conv contexts `[n_steps, depth, 2, 4, hidden]`;
//! * conformer carries `[blocks, heads, L / stride, 2·d_k]` and `[up_blocks, heads, L, 2·d_k]`
//!   (append-ordered), pre-lookahead and upsample conv contexts.
//!
//! Per call, each attention layer assembles `[new ‖ carry]` (estimator) or `[carry ‖ new]`
//! (conformer) in a workspace of `L + max call frames` frames and attends over it; right after the
//! layer (conformer) or the solver step (estimator) the carry is written back from the workspace:
//! a plain copy while the extent is `≤ L`, else the runtime's carry kernel (`carry.prepend` for
//! the paper's retention of the prepend-ordered estimator cache, `carry.append` for the vendor's
//! slicing and for the conformer caches). Each region is read only by the layer/step that
//! rewrites it, so writing back inside the call equals the vendor's trim after the call.

use std::sync::Arc;

use dcc_kernels::token2wav::defs::{self as kd, act};
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer, Gemm};
use dcc_runtime::{Arg, DevPtr, KernelDef, LaunchDims};

use super::FlowError;
use super::config::FlowConfig;
use super::dit::{ADALN_EPS, CONV_K, MAX_PERIOD, T_SCALE};
use super::encoder::{CONV2_K, ConformerLayer, Embed};
use super::flow::{Flow, SolverParams, cosine_t_span};
use super::layers::{Conv1d, LayerNorm, Linear};
use super::retention::{Retention, RetentionOrder};

const CFG_BATCH: usize = 2;
const THREADS: u32 = 128;

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
    ada: DLin,
    q: DLin,
    k: DLin,
    v: DLin,
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
    kn: DeviceBuffer,
    att: DeviceBuffer,
    o: DeviceBuffer,
    hidden: DeviceBuffer,
    cat: DeviceBuffer,
    col: DeviceBuffer,
    pos: DeviceBuffer,
    kv: DeviceBuffer,
    mu: DeviceBuffer,
    cond: DeviceBuffer,
    xin: DeviceBuffer,
    xs: DeviceBuffer,
    vel: DeviceBuffer,
    /// `[freq ‖ t hidden ‖ cond ‖ 9 modulations ‖ spare]` then `[spk raw ‖ spk normed ‖ spk proj]`.
    small: DeviceBuffer,
}

/// The flow's weights and workspace on a backend.
pub struct DeviceFlow {
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
    final_ada: DLin,
    final_linear: DLin,
    noise: DeviceBuffer,
    noise_frames: usize,
    /// ESPnet relative positions for size `pe_size` (`2·pe_size − 1` rows).
    pe: DeviceBuffer,
    pe_size: usize,
    w: Work,
}

/// One session's streaming state on the device.
pub struct DeviceState {
    solver: SolverParams,
    retention: Retention,
    est_carry: DeviceBuffer,
    est_cnn: DeviceBuffer,
    est_extent: usize,
    enc_carry: DeviceBuffer,
    up_carry: DeviceBuffer,
    pre_cnn: DeviceBuffer,
    up_cnn: DeviceBuffer,
    t_tok: usize,
    primed: bool,
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
        dcc_kernels::token2wav::espnet_rel_pos_table(pe_size, e.dim, &mut pe);

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
        let kv = (e.heads * (l + t_up_cap) * dk2)
            .max(d.depth * CFG_BATCH * d.heads * (l + t_up_cap) * 2 * d.head_dim);
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
            kn: alloc(rows * wide)?,
            att: alloc(rows * wide)?,
            o: alloc(rows * wide)?,
            hidden: alloc(rows * ff)?,
            cat: alloc((t_up_cap + 2 * kmax) * wide)?,
            col: alloc(rows * kmax * wide)?,
            pos: alloc((2 * pe_size - 1) * e.dim)?,
            kv: alloc(kv)?,
            mu: alloc(t_up_cap * cfg.mel)?,
            cond: alloc(t_up_cap * cfg.mel)?,
            xin: alloc(rows * d.in_channels)?,
            xs: alloc(t_up_cap * cfg.mel)?,
            vel: alloc(rows * cfg.mel)?,
            small: alloc(d.freq_dim + 13 * d.hidden + 2 * cfg.spk_dim + cfg.mel)?,
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
                        ada: lin(&b.ada)?,
                        q: lin(&b.q)?,
                        k: lin(&b.k)?,
                        v: lin(&b.v)?,
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
            final_ada: lin(&dit.final_ada)?,
            final_linear: lin(&dit.final_linear)?,
            noise: up(&flow.noise)?,
            noise_frames: flow.noise_frames,
            pe: up(&pe)?,
            pe_size,
            w,
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

    /// A fresh (unprimed) session state streaming under `retention`.
    pub fn new_state(
        &self,
        solver: SolverParams,
        retention: Retention,
    ) -> Result<DeviceState, FlowError> {
        let (e, d) = (&self.cfg.encoder, &self.cfg.dit);
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
        let dk2 = 2 * (e.dim / e.heads);
        let be = self.be.as_ref();
        let alloc = |floats: usize| -> Result<DeviceBuffer, FlowError> {
            Ok(be.alloc(floats.max(1) * 4, AllocKind::Arena)?)
        };
        Ok(DeviceState {
            solver,
            retention,
            est_carry: alloc(solver.n_steps * d.depth * CFG_BATCH * d.heads * l * 2 * d.head_dim)?,
            est_cnn: alloc(solver.n_steps * d.depth * CFG_BATCH * 2 * (CONV_K - 1) * d.hidden)?,
            est_extent: 0,
            enc_carry: alloc(e.blocks * e.heads * (l / e.up_stride) * dk2)?,
            up_carry: alloc(e.up_blocks * e.heads * l * dk2)?,
            pre_cnn: alloc((CONV2_K - 1) * e.dim)?,
            up_cnn: alloc(2 * e.up_stride * e.dim)?,
            t_tok: 0,
            primed: false,
        })
    }

    /// A copy of `src` (device to device) that continues under `retention` (a session
    /// snapshot; the retention must be valid for `src`'s current extents).
    pub fn clone_state(
        &self,
        src: &DeviceState,
        retention: Retention,
    ) -> Result<DeviceState, FlowError> {
        let mut st = self.new_state(src.solver, retention)?;
        for (d, s) in [
            (&st.est_carry, &src.est_carry),
            (&st.est_cnn, &src.est_cnn),
            (&st.enc_carry, &src.enc_carry),
            (&st.up_carry, &src.up_carry),
            (&st.pre_cnn, &src.pre_cnn),
            (&st.up_cnn, &src.up_cnn),
        ] {
            self.be.dtod(d.ptr(), s.ptr(), s.bytes())?;
        }
        st.est_extent = src.est_extent;
        st.t_tok = src.t_tok;
        st.primed = src.primed;
        Ok(st)
    }

    // ---- launch helpers ------------------------------------------------------------------

    fn go(&self, k: &'static KernelDef, threads: usize, args: &[Arg]) -> Result<(), FlowError> {
        self.be
            .launch(k, LaunchDims::linear(threads, THREADS), args)?;
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
            &kd::COPY_BLOCK,
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
        if let Some(b) = &l.b {
            self.copy(y, ldy, b.ptr(), 0, rows, l.o, 1)?;
        }
        self.be.gemm(&Gemm {
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
            beta: if l.b.is_some() { 1.0 } else { 0.0 },
            c: y,
            ldc: ldy,
            stride_c: 0,
            batch: 1,
        })?;
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
        self.go(&kd::LAYER_NORM, rows, &args)
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
            &kd::LAYER_NORM_MODULATE,
            rows,
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

    fn act(&self, x: DevPtr, count: usize, op: i32, alpha: f32) -> Result<(), FlowError> {
        self.go(
            &kd::ACT,
            count,
            &[p(x), n(count), Arg::I32(op), Arg::F32(alpha)],
        )
    }

    fn add(&self, x: DevPtr, y: DevPtr, count: usize) -> Result<(), FlowError> {
        self.go(&kd::ADD, count, &[p(x), p(y), n(count)])
    }

    fn gated(
        &self,
        x: DevPtr,
        gate: DevPtr,
        y: DevPtr,
        rows: usize,
        dim: usize,
    ) -> Result<(), FlowError> {
        self.go(
            &kd::GATED_ADD,
            rows * dim,
            &[p(x), p(gate), p(y), n(rows), n(dim)],
        )
    }

    /// Writes a cache back from a workspace: plain copy while `extent ≤ L`, else the carry
    /// kernel of `order` (rows of `inner` floats per frame; `prompt`/`retained` on this clock).
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
        let k = if prepend {
            &dcc_kernels::carry::PREPEND
        } else {
            &dcc_kernels::carry::APPEND
        };
        let args = [
            p(dst),
            p(src),
            n(outer),
            n(dst_frames * inner),
            n(src_frames * inner),
            n(inner),
            n(prompt),
            n(retained),
            n(extent),
        ];
        self.be
            .launch(k, LaunchDims::blocks(outer.max(1) as u32, THREADS), &args)?;
        Ok(prompt + retained)
    }

    // ---- the model -----------------------------------------------------------------------

    fn speaker(&self, spk: &[f32]) -> Result<DevPtr, FlowError> {
        let c = &self.cfg;
        if spk.len() != c.spk_dim {
            return Err(FlowError::Input(format!(
                "speaker embedding has {} values, expected {}",
                spk.len(),
                c.spk_dim
            )));
        }
        let s = &self.w.small;
        let base = c.dit.freq_dim + 13 * c.dit.hidden;
        let (raw, normed, proj) = (
            at(s, base),
            at(s, base + c.spk_dim),
            at(s, base + 2 * c.spk_dim),
        );
        self.be.upload(raw, spk)?;
        self.go(
            &kd::L2_NORMALIZE,
            1,
            &[p(normed), p(raw), n(1), n(c.spk_dim), Arg::F32(1e-12)],
        )?;
        self.lin(&self.spk_affine, 1, normed, proj)?;
        Ok(proj)
    }

    /// Embedding, encoder and `encoder_proj`; returns the frame count (mu in `w.mu`).
    fn encode(
        &self,
        st: &mut DeviceState,
        tokens: &[u32],
        last_chunk: bool,
    ) -> Result<usize, FlowError> {
        let c = &self.cfg;
        let e = &c.encoder;
        let (d, la, s) = (e.dim, e.pre_lookahead, e.up_stride);
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
        let r = st.retention;
        let w = &self.w;
        let t = tokens.len();
        self.be.upload(w.ids.ptr(), tokens)?;
        self.go(
            &kd::EMBEDDING,
            t * d,
            &[
                p(w.a.ptr()),
                p(w.ids.ptr()),
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
        let t = if last_chunk {
            self.be.memset_d32(at(&w.b, t * d), 0, la * d)?;
            t + la
        } else {
            t
        };
        let tn = t - la;
        // pre-lookahead: conv1 (k = la+1) into cat after the 2-row context, leaky ReLU, conv2
        let ctx = CONV2_K - 1;
        self.copy(w.cat.ptr(), d, st.pre_cnn.ptr(), d, ctx, d, 1)?;
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
        self.copy(st.pre_cnn.ptr(), d, at(&w.cat, tn * d), d, ctx, d, 1)?;
        self.copy(w.col.ptr(), CONV2_K * d, w.cat.ptr(), d, tn, CONV2_K * d, 1)?;
        self.lin(&self.pre_conv2, tn, w.col.ptr(), w.x.ptr())?;
        self.add(w.x.ptr(), w.b.ptr(), tn * d)?;

        // first conformer stack (token clock)
        let l_tok = st.t_tok;
        let cap_tok = self.limits.carry_frames / s;
        let work_tok = cap_tok + self.t_tok_cap;
        let mut kept = 0;
        for (i, layer) in self.encoders.iter().enumerate() {
            let carry = at(&st.enc_carry, i * e.heads * cap_tok * 2 * (d / e.heads));
            kept = self.conformer_layer(layer, tn, l_tok, carry, cap_tok, work_tok, s, &r)?;
        }
        let new_tok = if self.encoders.is_empty() {
            l_tok + tn
        } else {
            kept
        };

        // upsample ×s (nearest) after the 2s-row context, conv k = 2s + 1
        let tu = tn * s;
        let uctx = 2 * s;
        self.copy(w.cat.ptr(), d, st.up_cnn.ptr(), d, uctx, d, 1)?;
        self.copy(at(&w.cat, uctx * d), d, w.x.ptr(), d, tu, d, s)?;
        self.copy(st.up_cnn.ptr(), d, at(&w.cat, tu * d), d, uctx, d, 1)?;
        let ku = 2 * s + 1;
        self.copy(w.col.ptr(), ku * d, w.cat.ptr(), d, tu, ku * d, 1)?;
        self.lin(&self.up_conv, tu, w.col.ptr(), w.a.ptr())?;
        self.lin(&self.up_embed.lin, tu, w.a.ptr(), w.b.ptr())?;
        self.norm(&self.up_embed.norm, tu, d, w.b.ptr(), w.x.ptr())?;
        self.act(w.x.ptr(), tu * d, act::SCALE, self.up_embed.xscale)?;

        // second conformer stack (frame clock)
        let cap_up = self.limits.carry_frames;
        let work_up = cap_up + self.t_up_cap;
        for (i, layer) in self.up_encoders.iter().enumerate() {
            let carry = at(&st.up_carry, i * e.heads * cap_up * 2 * (d / e.heads));
            self.conformer_layer(layer, tu, l_tok * s, carry, cap_up, work_up, 1, &r)?;
        }
        st.t_tok = new_tok;
        self.norm(&self.after_norm, tu, d, w.x.ptr(), w.a.ptr())?;
        self.lin(&self.encoder_proj, tu, w.a.ptr(), w.mu.ptr())?;
        Ok(tu)
    }

    /// One conformer layer over `t` rows in `w.x` (in place), cache `carry` (`[heads, cap, 2dk]`,
    /// extent `l`), workspace frames `work`. `div` converts the retention's frames to this clock.
    /// Returns the extent after write-back.
    #[allow(clippy::too_many_arguments)]
    fn conformer_layer(
        &self,
        ly: &DConf,
        t: usize,
        l: usize,
        carry: DevPtr,
        cap: usize,
        work: usize,
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
        self.copy(
            w.kv.ptr(),
            work * 2 * dk,
            carry,
            cap * 2 * dk,
            h,
            l * 2 * dk,
            1,
        )?;
        let kv_args = [
            p(w.kv.ptr()),
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
        self.go(&kd::KV_PACK, h * t * dk, &kv_args)?;
        // relative positions for size tk: the centre 2tk − 1 rows of the stored table
        let pe = at(&self.pe, (self.pe_size - tk) * d);
        self.lin(&ly.pos, 2 * tk - 1, pe, w.pos.ptr())?;
        let args = [
            p(w.att.ptr()),
            p(w.q.ptr()),
            p(ly.u.ptr()),
            p(ly.w.ptr()),
            p(w.kv.ptr()),
            p(w.pos.ptr()),
            n(h),
            n(t),
            n(tk),
            n(dk),
            n(work),
        ];
        self.go(&kd::REL_POS_ATTENTION, h * t, &args)?;
        self.lin(&ly.out, t, w.att.ptr(), w.o.ptr())?;
        self.add(w.x.ptr(), w.o.ptr(), t * d)?;
        self.norm(&ly.norm_ff, t, d, w.x.ptr(), w.xn.ptr())?;
        self.lin(&ly.w1, t, w.xn.ptr(), w.hidden.ptr())?;
        self.act(w.hidden.ptr(), t * ly.w1.o, act::SILU, 0.0)?;
        self.lin(&ly.w2, t, w.hidden.ptr(), w.o.ptr())?;
        self.add(w.x.ptr(), w.o.ptr(), t * d)?;
        // the conformer caches are append-ordered under both retentions
        self.write_back(
            carry,
            cap,
            w.kv.ptr(),
            work,
            h,
            2 * dk,
            tk,
            r.prompt_frames / div,
            r.retained_frames / div,
            false,
        )
    }

    /// `setup_cache` into `st` (see [`Flow::setup_cache`]).
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
        let fresh = self.new_state(st.solver, st.retention)?;
        *st = fresh;
        let spk = self.speaker(spk)?;
        let frames = self.encode(st, tokens, false)?;
        self.be.upload(self.w.cond.ptr(), mel)?;
        self.solve(st, frames, spk, true)?;
        st.primed = true;
        Ok(())
    }

    /// `inference_chunk` with the retention of [`DeviceLimits`] applied; returns `[mel, frames]`.
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
        let spk = self.speaker(spk)?;
        let frames = self.encode(st, tokens, last_chunk)?;
        self.solve(st, frames, spk, false)?;
        let mel = self.cfg.mel;
        self.go(
            &kd::TRANSPOSE,
            frames * mel,
            &[
                p(self.w.cond.ptr()),
                n(frames),
                p(self.w.xs.ptr()),
                n(mel),
                n(frames),
                n(mel),
            ],
        )?;
        Ok(self.be.download(self.w.cond.ptr(), mel * frames)?)
    }

    /// The CFM Euler solver over the DiT estimator; `x` ends in `w.xs` (`[frames, mel]`).
    fn solve(
        &self,
        st: &mut DeviceState,
        frames: usize,
        spk: DevPtr,
        with_cond: bool,
    ) -> Result<(), FlowError> {
        let c = &self.cfg;
        let dc = &c.dit;
        let (mel, cin, hid, heads, hd) = (c.mel, dc.in_channels, dc.hidden, dc.heads, dc.head_dim);
        let inner = dc.inner();
        let w = &self.w;
        let sv = st.solver;
        let r = st.retention;
        let l_cap = self.limits.carry_frames;
        let work = l_cap + self.t_up_cap;
        let l_old = st.est_extent;
        let tk = l_old + frames;
        if l_old + frames > self.noise_frames {
            return Err(FlowError::Input(format!(
                "noise table has {} frames, the call needs {}",
                self.noise_frames, tk
            )));
        }
        if sv.n_steps == 0 {
            return Err(FlowError::Input("zero solver steps".into()));
        }
        let rows = CFG_BATCH * frames;
        // z = noise[:, l_old : l_old + frames]ᵀ · temperature
        self.go(
            &kd::TRANSPOSE,
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
        self.be.memset_d32(w.xin.ptr(), 0, rows * cin)?;
        self.copy(at(&w.xin, mel), cin, w.mu.ptr(), mel, frames, mel, 1)?;
        self.copy(at(&w.xin, 2 * mel), cin, spk, 0, frames, mel, 1)?;
        if with_cond {
            self.copy(at(&w.xin, 3 * mel), cin, w.cond.ptr(), mel, frames, mel, 1)?;
        }
        let s = &w.small;
        let (freq, th, cact, mods) = (
            at(s, 0),
            at(s, dc.freq_dim),
            at(s, dc.freq_dim + hid),
            at(s, dc.freq_dim + 2 * hid),
        );
        let t_span = cosine_t_span(sv.n_steps);
        let mut t = t_span[0];
        let mut dt = t_span[1] - t_span[0];
        let per_layer_work = CFG_BATCH * heads * work * 2 * hd;
        let per_layer_carry = CFG_BATCH * heads * l_cap * 2 * hd;
        let ctx = CONV_K - 1;
        let cnn_per_layer = CFG_BATCH * 2 * ctx * hid;
        let scale = (1.0 / (hd as f64).sqrt()) as f32;
        let mut kept = tk;
        for step in 1..=sv.n_steps {
            let si = step - 1;
            for b in 0..CFG_BATCH {
                self.copy(
                    at(&w.xin, b * frames * cin),
                    cin,
                    w.xs.ptr(),
                    mel,
                    frames,
                    mel,
                    1,
                )?;
            }
            self.go(
                &kd::TIMESTEP_EMBEDDING,
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
            self.lin(&self.in_proj, rows, w.xin.ptr(), w.x.ptr())?;
            for (li, blk) in self.blocks.iter().enumerate() {
                let m = |i: usize| at(s, dc.freq_dim + 2 * hid + i * hid);
                self.lin(&blk.ada, 1, cact, mods)?;
                // attention over [new ‖ carry]
                let kvw = at(&w.kv, li * per_layer_work);
                let carry = at(&st.est_carry, (si * dc.depth + li) * per_layer_carry);
                self.norm_mod(rows, hid, w.x.ptr(), m(0), m(1), w.xn.ptr())?;
                self.lin(&blk.q, rows, w.xn.ptr(), w.q.ptr())?;
                self.lin(&blk.k, rows, w.xn.ptr(), w.k.ptr())?;
                self.lin(&blk.v, rows, w.xn.ptr(), w.v.ptr())?;
                self.norm(&blk.q_norm, rows * heads, hd, w.q.ptr(), w.qn.ptr())?;
                self.norm(&blk.k_norm, rows * heads, hd, w.k.ptr(), w.kn.ptr())?;
                let kv_args = [
                    p(kvw),
                    n(work),
                    n(0),
                    p(w.kn.ptr()),
                    p(w.v.ptr()),
                    n(inner),
                    n(CFG_BATCH),
                    n(heads),
                    n(frames),
                    n(hd),
                ];
                self.go(&kd::KV_PACK, rows * inner, &kv_args)?;
                self.copy(
                    at(&w.kv, li * per_layer_work + frames * 2 * hd),
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
                self.go(&kd::ATTENTION, CFG_BATCH * heads * frames, &args)?;
                self.lin(&blk.proj, rows, w.att.ptr(), w.o.ptr())?;
                self.gated(w.x.ptr(), m(2), w.o.ptr(), rows, hid)?;
                // causal conv block
                self.norm_mod(rows, hid, w.x.ptr(), m(6), m(7), w.xn.ptr())?;
                let cnn = |b: usize, which: usize| {
                    at(
                        &st.est_cnn,
                        (si * dc.depth + li) * cnn_per_layer + (b * 2 + which) * ctx * hid,
                    )
                };
                for (src, which) in [(w.xn.ptr(), 0usize), (w.o.ptr(), 1)] {
                    if which == 1 {
                        // LayerNorm + Mish of conv1's output (in w.q) into w.o
                        self.norm(&blk.conv_norm, rows, hid, w.q.ptr(), w.o.ptr())?;
                        self.act(w.o.ptr(), rows * hid, act::MISH, 0.0)?;
                    }
                    for b in 0..CFG_BATCH {
                        self.copy(w.cat.ptr(), hid, cnn(b, which), hid, ctx, hid, 1)?;
                        self.copy(
                            at(&w.cat, ctx * hid),
                            hid,
                            src.offset(b * frames * hid * 4),
                            hid,
                            frames,
                            hid,
                            1,
                        )?;
                        self.copy(
                            cnn(b, which),
                            hid,
                            at(&w.cat, frames * hid),
                            hid,
                            ctx,
                            hid,
                            1,
                        )?;
                        self.copy(
                            at(&w.col, b * frames * CONV_K * hid),
                            CONV_K * hid,
                            w.cat.ptr(),
                            hid,
                            frames,
                            CONV_K * hid,
                            1,
                        )?;
                    }
                    let conv = if which == 0 { &blk.conv1 } else { &blk.conv2 };
                    let dst = if which == 0 { w.q.ptr() } else { w.att.ptr() };
                    self.lin(conv, rows, w.col.ptr(), dst)?;
                }
                self.gated(w.x.ptr(), m(8), w.att.ptr(), rows, hid)?;
                // MLP
                self.norm_mod(rows, hid, w.x.ptr(), m(3), m(4), w.xn.ptr())?;
                self.lin(&blk.fc1, rows, w.xn.ptr(), w.hidden.ptr())?;
                self.act(w.hidden.ptr(), rows * dc.mlp_hidden, act::GELU_TANH, 0.0)?;
                self.lin(&blk.fc2, rows, w.hidden.ptr(), w.o.ptr())?;
                self.gated(w.x.ptr(), m(5), w.o.ptr(), rows, hid)?;
            }
            // carry write-back for this step (every layer's [new ‖ old] → carry)
            // paper: carry.prepend keeps [:retained] ‖ [ℓ−prompt:]; vendor: carry.append keeps
            // [:prompt] ‖ [ℓ−retained:] of the same prepend-ordered cache
            let prepend = r.order == RetentionOrder::Paper;
            kept = self.write_back(
                at(&st.est_carry, si * dc.depth * per_layer_carry),
                l_cap,
                w.kv.ptr(),
                work,
                dc.depth * CFG_BATCH * heads,
                2 * hd,
                tk,
                r.prompt_frames,
                r.retained_frames,
                prepend,
            )?;
            // final layer, guidance, Euler step
            self.lin(&self.final_ada, 1, cact, mods)?;
            self.norm_mod(
                rows,
                hid,
                w.x.ptr(),
                mods,
                at(s, dc.freq_dim + 3 * hid),
                w.xn.ptr(),
            )?;
            self.lin(&self.final_linear, rows, w.xn.ptr(), w.vel.ptr())?;
            self.go(
                &kd::CFG_EULER,
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
        st.est_extent = kept;
        Ok(())
    }
}
