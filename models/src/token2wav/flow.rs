//! `CausalMaskedDiffWithXvec` on a runtime [`Backend`]: the contract's callables — `encoder`
//! (token embedding, [`super::encoder`], `encoder_proj`) and `flow` (a range of steps of the CFM
//! Euler solver over the [`super::dit`] estimator, classifier-free guidance as a batch of two,
//! noise from the fixed table at the cache offset) — over the nn layers.
//!
//! Both callables take every per-call address and layout from an explicit I/O description
//! ([`EncoderIo`], [`FlowIo`]) and only queue stream work (no allocation, no host copy), so they
//! can be recorded into a graph. Host inputs are uploaded into fixed input buffers first
//! ([`DeviceFlow::set_inputs`]); the mel lands in a fixed output buffer
//! ([`DeviceFlow::mel_out`]).

use std::ops::Range;
use std::sync::Arc;

use dcc_runtime::DevPtr;
use dcc_runtime::backend::{Backend, DeviceBuffer};
use dcc_runtime::ops::{self, Ctx, GemmPath, ProfileRow, Profiler, RawTensor, Tensor};

use super::FlowError;
use super::config::FlowConfig;
use super::dit::{CFG_BATCH, CONV_K, Dit};
use super::encoder::{CONV2_K, Encoder, EncoderState};
use super::io::{EncoderIo, FlowIo};
use super::solver::Solve;
use super::state::{DeviceState, KvRaw};
use super::work::{Caps, DeviceLimits, Work, v};
use crate::nn::{Embedding, Linear, Loader, WeightStore};

/// Solver settings of `CausalConditionalCFM.forward_chunk`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolverParams {
    /// Euler steps (the vendor's `n_timesteps`).
    pub n_steps: usize,
    /// `inference_cfg_rate`.
    pub cfg_rate: f32,
    /// Noise temperature.
    pub temperature: f32,
}

impl Default for SolverParams {
    fn default() -> Self {
        Self {
            n_steps: 10,
            cfg_rate: 0.7,
            temperature: 1.0,
        }
    }
}

/// Identities of [`DeviceFlow`]s, so a [`DeviceState`] is only ever used with the flow (and so
/// the backend, config and limits) it was sized for.
static NEXT_FLOW_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The flow's weights and workspace on a backend.
pub struct DeviceFlow {
    pub(super) id: u64,
    pub(super) be: Arc<dyn Backend>,
    pub(super) cfg: FlowConfig,
    pub(super) limits: DeviceLimits,
    pub(super) caps: Caps,
    pub(super) embedding: Embedding,
    spk_affine: Linear,
    pub(super) encoder: Encoder,
    pub(super) encoder_proj: Linear,
    dit: Dit,
    /// `decoder.rand_noise` `[mel, noise_frames]`.
    noise: DeviceBuffer,
    noise_frames: usize,
    /// ESPnet relative positions for size `caps.pe_size` (`2·pe_size − 1` rows).
    pub(super) pe: DeviceBuffer,
    pub(super) w: Work,
    /// The per-process parts of the arenas placed so far, one per layout served
    /// ([`DeviceFlow::process_arena`]).
    pub(super) process: std::sync::Mutex<Vec<Arc<dcc_runtime::ProcessArena>>>,
    prof: Profiler,
    /// The GEMM path of every linear ([`DeviceFlow::with_gemm`]).
    gemm: GemmPath,
    /// Every solver step's time condition, per GEMM path and step count prepared
    /// ([`DeviceFlow::prepare_time_conditions`]).
    time_tables: std::sync::Mutex<Vec<Arc<TimeTable>>>,
}

/// The time conditions of every step of an `n_steps` solve on one GEMM path: step `si`'s row
/// is what `Dit::time_condition` writes at the `t` of step `si`, rows [`TimeTable::STRIDE`]-
/// aligned as `Work::mods` is (so a GEMM choosing its kernel by the output's alignment writes
/// every row as it writes `Work::mods`).
pub(super) struct TimeTable {
    gemm: GemmPath,
    n_steps: usize,
    /// Floats of one step's condition (`Dit::mods_len`).
    len: usize,
    mods: DeviceBuffer,
}

impl TimeTable {
    /// Floats between the starts of two rows: a multiple of 64 (256 bytes, the allocation
    /// alignment).
    const STRIDE: usize = 64;

    fn stride(len: usize) -> usize {
        len.div_ceil(Self::STRIDE) * Self::STRIDE
    }

    /// Step `si`'s condition as `[1, len]`.
    pub fn row(&self, si: usize) -> Result<Tensor<'_>, FlowError> {
        Ok(Tensor::of(&self.mods)?
            .view(&[self.n_steps, Self::stride(self.len)])?
            .index(0, si)?
            .narrow(0, 0, self.len)?
            .view(&[1, self.len])?)
    }
}

/// Checks an I/O tensor's dims: `Some(n)` must be `n`, `None` is a clock axis.
fn expect<T: ops::Elem>(
    name: &str,
    t: &RawTensor<T>,
    want: &[Option<usize>],
) -> Result<(), FlowError> {
    expect_dims(name, t.dims(), want)
}

fn expect_dims(name: &str, dims: &[usize], want: &[Option<usize>]) -> Result<(), FlowError> {
    let ok = dims.len() == want.len()
        && dims
            .iter()
            .zip(want)
            .all(|(d, w)| w.is_none_or(|w| w == *d));
    if !ok {
        return Err(FlowError::Input(format!(
            "`{name}` has dims {dims:?}, the call needs {want:?}"
        )));
    }
    Ok(())
}

impl DeviceFlow {
    /// Loads the flow's weights from `ws` (checked against `cfg`) to `be`, with buffers sized
    /// by `limits`, its linears on [`GemmPath::Backend`] ([`DeviceFlow::new_on_path`]).
    pub fn new(
        be: Arc<dyn Backend>,
        ws: &WeightStore,
        cfg: &FlowConfig,
        limits: DeviceLimits,
    ) -> Result<Self, FlowError> {
        Self::new_on_path(be, ws, cfg, limits, GemmPath::default())
    }

    /// [`DeviceFlow::new`] with every linear on `gemm`, its weights loaded in the path's element
    /// type (binary16 on [`GemmPath::Half`]: `Loader::with_gemm`).
    pub fn new_on_path(
        be: Arc<dyn Backend>,
        ws: &WeightStore,
        cfg: &FlowConfig,
        limits: DeviceLimits,
        gemm: GemmPath,
    ) -> Result<Self, FlowError> {
        let (e, d) = (&cfg.encoder, &cfg.dit);
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
        let noise_shape = ws.shape("decoder.rand_noise")?.to_vec();
        let noise_frames = match noise_shape.as_slice() {
            [1, m, n] if *m == cfg.mel => *n,
            _ => {
                return Err(FlowError::Config(format!(
                    "decoder.rand_noise: shape {noise_shape:?}"
                )));
            }
        };
        let caps = Caps::new(cfg, &limits);
        let ld = Loader::new(be.as_ref(), ws).with_gemm(gemm);
        let pe = ops::host::rel_pos_table(caps.pe_size, e.dim);
        let flow = DeviceFlow {
            embedding: Embedding::load(&ld, "input_embedding.weight", cfg.vocab, e.dim)?,
            spk_affine: Linear::load(&ld, "spk_embed_affine_layer", cfg.spk_dim, cfg.mel, true)?,
            encoder: Encoder::load(&ld, e)?,
            encoder_proj: Linear::load(&ld, "encoder_proj", e.dim, cfg.mel, true)?,
            dit: Dit::load(&ld, d)?,
            noise: ld.tensor("decoder.rand_noise", &noise_shape)?,
            noise_frames,
            pe: ld.upload(&pe)?,
            w: Work::new(be.as_ref(), cfg, &caps)?,
            process: Default::default(),
            prof: Profiler::new(),
            gemm,
            time_tables: Default::default(),
            id: NEXT_FLOW_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            be,
            cfg: cfg.clone(),
            limits,
            caps,
        };
        // the default solve's time conditions, held by the process like the weights (a state
        // of another step count prepares its own)
        flow.prepare_time_conditions(SolverParams::default().n_steps)?;
        Ok(flow)
    }

    /// The same flow with every linear on `gemm` (default [`GemmPath::Backend`]). The paths give
    /// different bits, so sessions compared bit for bit must share it. The weights stay as
    /// loaded: switch only between paths of one weight type ([`GemmPath::weight_dtype`]); a flow
    /// for [`GemmPath::Half`] is built by [`DeviceFlow::new_on_path`] (a linear on a path that
    /// reads the other type is refused, nothing queued).
    pub fn with_gemm(mut self, gemm: GemmPath) -> Self {
        if gemm != self.gemm {
            // the time conditions are the old path's bits: states created from here on prepare
            // the new path's
            if let Ok(tables) = self.time_tables.get_mut() {
                tables.clear();
            }
        }
        self.gemm = gemm;
        self
    }

    /// Computes every solver step's time condition for `n_steps` steps on this flow's GEMM path
    /// once (if not yet), into a table the solver reads instead of computing it at each step
    /// (four launches a step, the widest linear of the estimator among them: every block's
    /// modulations, from `hidden` to `(9·depth + 2)·hidden`). The time condition depends on
    /// the step's `t` alone, a function of the step count and the path's rounding, so it is a
    /// constant of the process; the table holds what the same launches write at those `t`, so
    /// a solve reads the bits it would have computed. Queues work on the flow's stream: call it
    /// outside a capture (building the flow does for the default step count, creating a state
    /// for its own, [`DeviceFlow::new_state_in_arena`]); a solve without a table for its path
    /// and step count computes the condition itself.
    pub fn prepare_time_conditions(&self, n_steps: usize) -> Result<(), FlowError> {
        let mut tables = self
            .time_tables
            .lock()
            .map_err(|_| FlowError::Config("a time-condition table lock was poisoned".into()))?;
        if tables
            .iter()
            .any(|t| t.gemm == self.gemm && t.n_steps == n_steps)
        {
            return Ok(());
        }
        let dit = self.dit();
        let len = dit.mods_len();
        let floats = n_steps
            .checked_mul(TimeTable::stride(len))
            .ok_or_else(|| FlowError::Config("a time-condition table past usize".into()))?;
        let table = TimeTable {
            gemm: self.gemm,
            n_steps,
            len,
            mods: self
                .be
                .alloc(floats.max(1) * 4, dcc_runtime::backend::AllocKind::Other)?,
        };
        let cx = self.cx();
        let half = super::half::rounds(self.gemm);
        for (si, t) in super::solver::step_times(n_steps, half)
            .into_iter()
            .enumerate()
        {
            dit.time_condition(&cx, &self.w, t, table.row(si)?)?;
        }
        tables.push(Arc::new(table));
        Ok(())
    }

    /// Frees every time-condition table: solves compute each step's condition themselves again
    /// (four launches a step more, the same bits), until a state's creation prepares one.
    pub fn forget_time_conditions(&self) {
        if let Ok(mut tables) = self.time_tables.lock() {
            tables.clear();
        }
    }

    /// The time-condition table of this flow's path for `n_steps` steps, if prepared.
    pub(super) fn time_conditions(&self, n_steps: usize) -> Option<Arc<TimeTable>> {
        let tables = self.time_tables.lock().ok()?;
        tables
            .iter()
            .find(|t| t.gemm == self.gemm && t.n_steps == n_steps)
            .cloned()
    }

    /// The GEMM path of this flow's linears.
    pub fn gemm_path(&self) -> GemmPath {
        self.gemm
    }

    /// Every kernel this flow's calls may launch: the ops' kernels on its GEMM path
    /// ([`GemmPath::op_kernels`]). What a process preloads before it serves the flow (a CUDA
    /// backend compiles their modules then, never inside a stream's first chunk), and no more:
    /// on [`GemmPath::Backend`] the invariant linear is never compiled.
    pub fn kernels(&self) -> Vec<&'static dcc_runtime::KernelDef> {
        self.gemm.op_kernels()
    }

    /// Frames of the noise table (a stream's estimator extent plus a call's frames at most).
    pub(super) fn noise_frames(&self) -> usize {
        self.noise_frames
    }

    pub fn config(&self) -> &FlowConfig {
        &self.cfg
    }

    /// Frames of one call at most (`stride · (max_call_tokens + lookahead)`).
    pub fn max_call_frames(&self) -> usize {
        self.caps.t_up
    }

    pub fn limits(&self) -> DeviceLimits {
        self.limits
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.be
    }

    /// Where this flow's ops are queued (marked while a profile is open).
    pub(super) fn cx(&self) -> Ctx<'_> {
        Ctx::new(self.be.as_ref(), Some(&self.prof)).with_gemm(self.gemm)
    }

    /// Refuses a state another flow created (its buffers are sized for that flow's config,
    /// limits and backend, which this flow's launches would assume).
    pub(super) fn check_owner(&self, st: &DeviceState) -> Result<(), FlowError> {
        if st.flow != self.id {
            return Err(FlowError::Input(
                "a session state of another DeviceFlow".into(),
            ));
        }
        Ok(())
    }

    /// Starts an eager op profile: until [`DeviceFlow::profile_end`], every op this flow
    /// enqueues outside a capture is preceded by a stream marker. Queue the profiled work behind
    /// a long kernel so that the gaps between markers are device time, not host launch time.
    pub fn profile_begin(&self) {
        self.prof.begin();
    }

    /// Ends the profile: device ms per op category, largest first. Waits for the stream.
    pub fn profile_end(&self) -> Result<Vec<ProfileRow>, FlowError> {
        Ok(self.prof.end(self.be.as_ref())?)
    }

    /// The fixed token-id input buffer (`u32`, `max_call_tokens + lookahead`).
    pub fn ids(&self) -> DevPtr {
        self.w.ids.ptr()
    }

    /// Bytes of the fixed token-id buffer.
    pub fn ids_bytes(&self) -> usize {
        self.w.ids.bytes()
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

    /// The per-layer conformer workspace (written by every encoder call).
    pub fn conformer_workspace(&self) -> DevPtr {
        self.w.conf_ws.ptr()
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

    /// Encoder I/O of `st` for a call of `n_tokens` tokens from the fixed id buffer.
    pub fn encoder_io(
        &self,
        st: &DeviceState,
        n_tokens: usize,
        last_chunk: bool,
    ) -> Result<EncoderIo, FlowError> {
        let t = &st.tensors;
        Ok(EncoderIo {
            ids: RawTensor::packed(self.w.ids.ptr(), &[n_tokens])?,
            last_chunk,
            t_tok: st.t_tok,
            carry: t.conformer,
            up_carry: t.upsample,
            pre_cnn: t.pre_lookahead,
            up_cnn: t.up_layer,
            write_back: st.store.is_fixed(),
            keeps: st.keeps,
        })
    }

    /// Flow I/O of `st` for a call presenting `frames` frames (mu/cond/spk from the fixed
    /// buffers).
    pub fn flow_io(&self, st: &DeviceState, frames: usize) -> Result<FlowIo, FlowError> {
        let c = &self.cfg;
        let t = &st.tensors;
        Ok(FlowIo {
            l_old: st.est_extent,
            mu: RawTensor::packed(self.w.mu.ptr(), &[frames, c.mel])?,
            cond: RawTensor::packed(self.w.cond.ptr(), &[frames, c.mel])?,
            spk: RawTensor::packed(self.w.spk.ptr(), &[1, c.spk_dim])?,
            carry: t.carry,
            ws: t.workspace,
            est_cnn: t.estimator_conv,
            write_back: st.store.is_fixed(),
            keep: st.keeps.carry,
            solver: st.solver,
        })
    }

    /// The `encoder` callable: embedding, encoder and `encoder_proj` of the tokens in `io.ids`
    /// (mu lands in [`DeviceFlow::mu`]). Stream work only. Returns `(frames, conformer extent on
    /// the token clock after retention)`.
    ///
    /// Token counts, extents, capacities and the I/O tensors' dims are checked against this
    /// flow (an [`FlowError::Input`] otherwise, before anything is queued); the memory `io`
    /// names cannot be.
    ///
    /// # Safety
    /// Every tensor in `io` lies, over its span, inside a live buffer of this flow's backend
    /// that stays alive until the call's work completes (every replay of a graph it is captured
    /// into, too); these regions do not overlap each other or this flow's buffers, except `ids`
    /// being [`DeviceFlow::ids`]. An [`DeviceFlow::encoder_io`] of a [`DeviceState`] this flow
    /// created satisfies it (so do staging copies of the same shapes).
    pub unsafe fn encoder_call(&self, io: &EncoderIo) -> Result<(usize, usize), FlowError> {
        self.check_encoder(io)?;
        let c = &self.cfg;
        let e = &c.encoder;
        let d = e.dim;
        let t = io.ids.dims()[0];
        let caps = &self.caps;
        let cx = self.cx();
        let w = &self.w;
        // SAFETY: the caller's promise (`# Safety`): every tensor of `io` lies in live memory
        // of this backend for as long as the call's work may run.
        let (ids, conformer, upsample, pre_lookahead, up_layer) = unsafe {
            (
                io.ids.bind(),
                io.carry.bind(),
                io.up_carry.bind(),
                io.pre_cnn.bind(),
                io.up_cnn.bind(),
            )
        };
        self.embedding.forward(&cx, ids, v(&w.a, &[t, d])?)?;
        let st = EncoderState {
            conformer,
            tokens: io.t_tok,
            upsample,
            pre_lookahead,
            up_layer,
            write_back: io.write_back,
            keep_conformer: &io.keeps.conformer,
            keep_upsample: &io.keeps.upsample,
        };
        let pe = v(&self.pe, &[2 * caps.pe_size - 1, d])?;
        let (tu, kept) = self
            .encoder
            .forward(&cx, w, caps, pe, (t, io.last_chunk), st)?;
        self.encoder_proj
            .forward(&cx, v(&w.a, &[tu, d])?, v(&w.mu, &[tu, c.mel])?)?;
        Ok((tu, kept))
    }

    /// Checks an `encoder` call's I/O against this flow (what [`DeviceFlow::encoder_call`]
    /// refuses before anything is queued), queueing nothing: token counts, extents, capacities
    /// and the I/O tensors' dims.
    pub(super) fn check_encoder(&self, io: &EncoderIo) -> Result<(), FlowError> {
        let c = &self.cfg;
        let e = &c.encoder;
        let (d, la, s) = (e.dim, e.pre_lookahead, e.up_stride);
        let dk2 = 2 * (d / e.heads);
        let caps = &self.caps;
        expect(
            "carry",
            &io.carry,
            &[Some(e.blocks), Some(e.heads), None, Some(dk2)],
        )?;
        let up_dims = [Some(e.up_blocks), Some(e.heads), None, Some(dk2)];
        expect("up_carry", &io.up_carry, &up_dims)?;
        expect("pre_cnn", &io.pre_cnn, &[Some(CONV2_K - 1), Some(d)])?;
        expect("up_cnn", &io.up_cnn, &[Some(2 * s), Some(d)])?;
        expect("ids", &io.ids, &[None])?;
        let t = io.ids.dims()[0];
        let (cap_tok, cap_up) = (io.carry.dims()[2], io.up_carry.dims()[2]);
        if io.t_tok > cap_tok || io.t_tok * s > cap_up || t > self.limits.max_call_tokens {
            return Err(FlowError::Input(format!(
                "encoder call: {t} tokens over a conformer extent of {} tokens (capacity \
                 {cap_tok} tokens, {cap_up} frames)",
                io.t_tok
            )));
        }
        // The conformer workspaces hold `work_tok` tokens / `work_up` frames per layer (and the
        // position table `pe_size` = `work_up` frames): the cache plus the call's new frames
        // must fit, as must the kept frames in the caches written back.
        let tn_max = if io.last_chunk {
            Some(t)
        } else {
            t.checked_sub(la)
        };
        let (kept_tok, kept_up) = (io.keeps.conformer.bound(), io.keeps.upsample.bound());
        if tn_max.is_none_or(|tn| {
            io.t_tok + tn > caps.work_tok
                || (io.t_tok + tn) * s > caps.work_up
                || (io.write_back && (kept_tok > cap_tok || kept_up > cap_up))
        }) {
            return Err(FlowError::Input(format!(
                "encoder call: {t} tokens over a conformer extent of {} tokens exceed the \
                 workspace ({} tokens) or the caches ({cap_tok} tokens, {cap_up} frames) the \
                 contract keeps {kept_tok} tokens / {kept_up} frames in",
                io.t_tok, caps.work_tok
            )));
        }
        Ok(())
    }

    /// The `flow` callable: solver steps `steps` of the CFM Euler loop over the DiT estimator.
    /// The first step also normalizes and projects the speaker (`io.spk`), draws `x` from the
    /// noise table at offset `io.l_old` and assembles `[x ‖ mu ‖ spk ‖ cond]`; the last step
    /// also writes the mel to [`DeviceFlow::mel_out`]. Stream work only. Returns the estimator
    /// extent after retention.
    ///
    /// Steps, frame counts, extents, capacities and the I/O tensors' dims are checked against
    /// this flow (an [`FlowError::Input`] otherwise, before anything is queued); the memory
    /// `io` names cannot be.
    ///
    /// # Safety
    /// Every tensor in `io` lies, over its span, inside a live buffer of this flow's backend
    /// that stays alive until the call's work completes (every replay of a graph it is captured
    /// into, too); these regions do not overlap each other or this flow's buffers, except `mu`,
    /// `cond` and `spk` being this flow's input buffers. A [`DeviceFlow::flow_io`] of a
    /// [`DeviceState`] this flow created satisfies it (so do staging copies of the same shapes).
    pub unsafe fn flow_call(&self, io: &FlowIo, steps: Range<usize>) -> Result<usize, FlowError> {
        let carry_slice = self.check_flow(io, &steps, 1)?;
        let cx = self.cx();
        let w = &self.w;
        let (mel, frames) = (self.cfg.mel, io.mu.dims()[0]);
        // SAFETY: the caller's promise (`# Safety`): every tensor of `io` lies in live memory
        // of this backend for as long as the call's work may run.
        let (mu, cond, spk, est) = unsafe {
            (
                io.mu.bind(),
                io.cond.bind(),
                io.spk.bind(),
                io.est_cnn.bind(),
            )
        };
        let (mu, cond) = (mu.view(&[1, frames, mel])?, cond.view(&[1, frames, mel])?);
        // the estimator cache in the contract's dtype (check_flow: the carry's and the
        // workspace's agree)
        macro_rules! solve {
            ($carry:expr, $ws:expr) => {
                self.solve(
                    &cx,
                    Solve {
                        w,
                        mu,
                        cond,
                        spk,
                        carries: &[$carry],
                        carry_slice,
                        ws: $ws,
                        est,
                        l_old: io.l_old,
                        frames,
                        steps,
                        write_back: io.write_back,
                        keep: io.keep,
                        solver: io.solver,
                    },
                )
            };
        }
        // SAFETY: as above (the caller's promise covers the carry and the workspace).
        match (io.carry, io.ws) {
            (KvRaw::F32(c), KvRaw::F32(ws)) => unsafe { solve!(c.bind(), ws.bind()) },
            (KvRaw::F16(c), KvRaw::F16(ws)) => unsafe { solve!(c.bind(), ws.bind()) },
            _ => Err(FlowError::Input(
                "the carry and the solver workspace hold different dtypes".into(),
            )),
        }
    }

    /// Checks a `flow` call's I/O against this flow for a call over `n` sessions (`io.ws` and
    /// `io.est_cnn` hold `n·cfg` batch rows, the rest is one session's), queueing nothing:
    /// steps, frame counts, extents, capacities and dims. Returns whether `io.carry` is one
    /// step's slice.
    pub(super) fn check_flow(
        &self,
        io: &FlowIo,
        steps: &Range<usize>,
        n: usize,
    ) -> Result<bool, FlowError> {
        let c = &self.cfg;
        let dc = &c.dit;
        let (mel, hid) = (c.mel, dc.hidden);
        let per_step = [Some(dc.depth), Some(CFG_BATCH), Some(dc.heads), None];
        let batched = [Some(dc.depth), Some(n * CFG_BATCH), Some(dc.heads), None];
        let kv = Some(2 * dc.head_dim);
        let stepped = |x: &[Option<usize>]| -> Vec<Option<usize>> {
            std::iter::once(None).chain(x.iter().copied()).collect()
        };
        expect("mu", &io.mu, &[None, Some(mel)])?;
        let frames = io.mu.dims()[0];
        expect("cond", &io.cond, &[Some(frames), Some(mel)])?;
        expect("spk", &io.spk, &[Some(1), Some(c.spk_dim)])?;
        let one_step: Vec<_> = per_step.iter().copied().chain([kv]).collect();
        let carry_slice = io.carry.dims().len() == one_step.len();
        if carry_slice {
            expect_dims("carry", io.carry.dims(), &one_step)?;
        } else {
            expect_dims("carry", io.carry.dims(), &stepped(&one_step))?;
        }
        let ws_step: Vec<_> = batched.iter().copied().chain([kv]).collect();
        expect_dims("ws", io.ws.dims(), &stepped(&ws_step))?;
        if io.ws.dtype() != io.carry.dtype() {
            return Err(FlowError::Input(format!(
                "the carry holds {}, the solver workspace {}",
                io.carry.dtype().name(),
                io.ws.dtype().name()
            )));
        }
        let cnn = [
            Some(dc.depth),
            Some(n * CFG_BATCH),
            Some(2),
            Some(CONV_K - 1),
            Some(hid),
        ];
        expect("est_cnn", &io.est_cnn, &stepped(&cnn))?;
        let sv = io.solver;
        let l_old = io.l_old;
        let tk = l_old + frames;
        if tk > self.noise_frames {
            return Err(FlowError::Input(format!(
                "noise table has {} frames, the call needs {tk}",
                self.noise_frames
            )));
        }
        let carry_steps = if carry_slice { 1 } else { io.carry.dims()[0] };
        // the workspace holds a slice per step, or (where every step is written back before
        // the next) one slice that every step reuses
        let ws_steps = io.ws.dims()[0];
        let ws_fits = steps.end <= ws_steps || (ws_steps == 1 && io.write_back);
        if sv.n_steps == 0
            || steps.end > sv.n_steps
            || steps.start >= steps.end
            || (carry_slice && steps.len() != 1)
            || (!carry_slice && steps.end > carry_steps)
            || !ws_fits
        {
            return Err(FlowError::Input(format!(
                "solver steps {steps:?} of {} (the carry holds {carry_steps}, the workspace \
                 {ws_steps}{})",
                sv.n_steps,
                if ws_steps == 1 && !io.write_back {
                    ": one slice serves every step only where each step is written back"
                } else {
                    ""
                }
            )));
        }
        let conv_steps = io.est_cnn.dims()[0];
        if steps.end > conv_steps {
            return Err(FlowError::Input(format!(
                "solver steps {steps:?}: the estimator conv cache holds {conv_steps} steps"
            )));
        }
        // frame capacities: the carry's frame axis is its 4th (one step) or 5th (step-major)
        let cap = io.carry.dims()[if carry_slice { 3 } else { 4 }];
        let work = io.ws.dims()[4];
        if io.write_back && io.keep.bound() > cap {
            return Err(FlowError::Input(format!(
                "flow call: the carry keeps {} frames, it holds {cap}",
                io.keep.bound()
            )));
        }
        if tk > work || l_old > cap || frames > self.caps.t_up {
            return Err(FlowError::Input(format!(
                "flow call: {l_old} + {frames} frames exceed the workspace ({work}) or carry \
                 ({cap})"
            )));
        }
        Ok(carry_slice)
    }

    /// The estimator.
    pub(super) fn dit(&self) -> &Dit {
        &self.dit
    }

    /// `spk_embed_affine_layer`.
    pub(super) fn spk_affine(&self) -> &Linear {
        &self.spk_affine
    }

    /// `decoder.rand_noise` as `[mel, noise_frames]`.
    pub(super) fn noise(&self) -> Result<Tensor<'_>, FlowError> {
        Ok(v(&self.noise, &[self.cfg.mel, self.noise_frames])?)
    }
}
