//! A streaming Token2Wav session: one stream served by one arm.
//!
//! What a session owns is held by the runtime's session type,
//! [`dcc_runtime::session::Session`]: the stream's [`DeviceState`] (the contract's arena under
//! the state rule, the stock store's buffers otherwise) and the replay engines bound to it
//! (none for the eager arms). That type, not this one, fixes the ownership rules every model
//! shares: engines are built on the session's backend and observe one host generator; they are
//! dropped before the state they were captured against; dropping a session frees everything it
//! allocated (arena or stock buffers, staging buffers, graphs, derived catalogs) and never
//! panics; and it reports the device bytes it holds ([`Session::bytes`]), the rest of the
//! ledger (weights, the [`DeviceFlow`]'s workspace and its per-process arena part) being
//! per-process.
//!
//! Many sessions share one [`DeviceFlow`]: under the state rule a session's state is only the
//! arena's per-session part (the regions of lifetime `turn` / `session`), its call-lifetime
//! regions (the solver workspace, the mask) the flow's ([`DeviceFlow::process_arena`]), sound
//! because the flow's sessions run on its one stream, one call at a time. Each session still
//! captures its own graphs, against its own per-session addresses and the shared ones: a graph
//! bakes in every pointer it was captured with, so one set of graphs for all sessions would
//! need address indirection (state copied into one bound arena per switch, or region addresses
//! read from a device table). The runtime's other
//! shape, [`dcc_runtime::session::SessionPool`] (N streams time-sharing one bound arena by
//! snapshot), does not fit here: the stock arms' state is not an arena, and each stream of the
//! factorial is measured alone.
//!
//! This type adds what is Token2Wav's: the arm, the contract, the per-call invocations (built
//! by name with the contract's typed I/O structs) and the counters beyond the engines'.

use std::collections::BTreeMap;
use std::sync::Arc;

use dcc_runtime::DevPtr;
use dcc_runtime::contract::{DType, RegionInfo};
use dcc_runtime::ops::RawTensor;
use dcc_runtime::replay::{
    ClassStatus, EngineReport, Fallback, Invocation, Outcome, TensorArg, WriteArg,
};
use dcc_runtime::session::{EngineId, SessionBytes, SessionState};

use super::super::state::StateStore;
use super::super::{DeviceFlow, DeviceState, FlowError, SolverParams};
use super::adapter::{ContractView, EncoderInputs, EncoderWrites, FlowInputs, FlowWrites};
use super::arms::Arm;
use super::engines::{self, Engines, Run, StockEncoderWrites, StockFlowWrites};

impl SessionState for DeviceState {
    /// The arena (state rule) or every buffer of the stock store, at its current size.
    fn device_bytes(&self) -> usize {
        match self.store() {
            StateStore::Fixed { arena, .. } => arena.bytes(),
            StateStore::Stock(b) => [&b.carry, &b.workspace, &b.conformer, &b.upsample, &b.mask]
                .into_iter()
                .chain(&b.contexts)
                .map(|b| b.bytes())
                .sum(),
        }
    }
}

/// Per-session counters beyond the engines'.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionStats {
    /// Calls run eagerly by construction (the prompt pass, last chunks).
    pub eager_by_construction: u64,
    /// Graph launches (replays) so far.
    pub graph_launches: u64,
    /// Graph nodes executed by replays so far.
    pub graph_nodes: u64,
    /// Staging copies issued before replays so far.
    pub staging_copies: u64,
}

/// One stream served by one arm.
pub struct Session {
    pub(super) dev: Arc<DeviceFlow>,
    pub(super) arm: Arm,
    pub(super) contract: ContractView,
    /// The state and the engines.
    pub(super) run: Run,
    /// The engines of a replay arm.
    pub(super) engines: Option<Engines>,
    pub(super) stats: SessionStats,
    /// Why the session failed, once a call failed after its device work had begun: the state
    /// may be half-written, so every call but `prime` is refused until `prime` succeeds.
    pub(super) failed: Option<FlowError>,
    /// A fault to raise in the next chunk call between its encoder and flow work
    /// ([`Session::inject_fault_after_encoder`]).
    pub(super) fault_after_encoder: bool,
    /// Chunks emitted since the last prime.
    pub(super) since_prime: u64,
    /// This session's identity, unique in the process ([`Session::id`]).
    pub(super) id: u64,
}

/// Identities of sessions.
static NEXT_SESSION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Session {
    /// A fresh session of `arm` under `contract` (retention from the contract). Builds the
    /// state and, for a replay arm, the engines; runs nothing.
    pub fn new(
        dev: Arc<DeviceFlow>,
        contract: ContractView,
        arm: Arm,
        solver: SolverParams,
    ) -> Result<Session, FlowError> {
        let st = if arm.state_rule() {
            dev.new_state_in_arena(solver, &contract.arena)?
        } else {
            dev.new_state_stock(solver, &contract.arena)?
        };
        let mut run = Run::new(dev.backend().clone(), st);
        let engines = match arm.replay() {
            Some(g) => Some(engines::build(
                &mut run,
                &dev,
                &contract,
                arm.state_rule(),
                g,
            )?),
            None => None,
        };
        Ok(Session {
            dev,
            arm,
            contract,
            run,
            engines,
            stats: SessionStats::default(),
            failed: None,
            fault_after_encoder: false,
            since_prime: 0,
            id: NEXT_SESSION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    pub fn arm(&self) -> Arm {
        self.arm
    }

    pub fn state(&self) -> &DeviceState {
        self.run.state()
    }

    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    pub fn device(&self) -> &Arc<DeviceFlow> {
        &self.dev
    }

    /// Device bytes this session holds (its state, its engines' staging buffers and graphs).
    pub fn bytes(&self) -> SessionBytes {
        self.run.bytes()
    }

    /// Engine reports: the encoder's, then the flow's (one per step at step granularity).
    pub fn reports(&self) -> Vec<EngineReport> {
        self.run.reports()
    }

    /// Eager fallbacks of all engines, by reason.
    pub fn fallbacks(&self) -> BTreeMap<Fallback, u64> {
        self.run.fallbacks()
    }

    /// Why the session failed, if a call failed after its device work had begun (cleared by
    /// a successful [`Session::prime`]).
    pub fn failure(&self) -> Option<&FlowError> {
        self.failed.as_ref()
    }

    /// Test hook: the next chunk call fails between its encoder and its flow work, as a device
    /// error would (the encoder has written the session's caches, the flow has not run).
    /// Integration tests use it to show that such a failure fails the session and nothing else.
    #[doc(hidden)]
    pub fn inject_fault_after_encoder(&mut self) {
        self.fault_after_encoder = true;
    }

    /// The prompt-priming pass (eager by construction; resets the session in place). Inputs
    /// are checked first: bad ones are refused with the session untouched (a failed session
    /// stays failed). A failure once the pass has begun leaves the session failed; success
    /// clears a failure.
    pub fn prime(&mut self, tokens: &[u32], mel: &[f32], spk: &[f32]) -> Result<(), FlowError> {
        self.dev.check_prime(self.run.state(), tokens, mel, spk)?;
        let r = self.dev.setup_cache(self.run.state_mut(), tokens, mel, spk);
        self.settle(r)?;
        self.failed = None;
        self.since_prime = 0;
        self.stats.eager_by_construction += 1;
        Ok(())
    }

    /// This session's identity: unique among the sessions of the process, never reused (what
    /// a batch's graphs are kept by: a dropped session's addresses may be handed to a new one).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Chunks emitted since the last [`Session::prime`] (0: a fresh turn).
    pub fn chunks_since_prime(&self) -> u64 {
        self.since_prime
    }

    /// Refuses a call on a failed or unprimed session (nothing run).
    pub(super) fn usable(&self) -> Result<(), FlowError> {
        if let Some(e) = &self.failed {
            return Err(FlowError::SessionFailed(Box::new(e.clone())));
        }
        if !self.run.state().primed() {
            return Err(FlowError::NotPrimed);
        }
        Ok(())
    }

    /// The result of a call whose device work has begun: an error fails the session.
    pub(super) fn settle<T>(&mut self, r: Result<T, FlowError>) -> Result<T, FlowError> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// Checks a chunk call's token count against what the session admits, touching nothing: a
    /// call reads its chunk and the encoder's lookahead, so a non-final call takes at least
    /// `lookahead + 2` tokens and a final one at least 2, and none more than the flow's input
    /// buffer holds.
    pub(super) fn check_width(&self, n_tokens: usize, last_chunk: bool) -> Result<(), FlowError> {
        let la = self.dev.config().encoder.pre_lookahead;
        let max = self.dev.limits().max_call_tokens;
        let min = if last_chunk { 2 } else { la + 2 };
        if n_tokens < min || n_tokens > max {
            return Err(FlowError::Input(format!(
                "{n_tokens} tokens: a call takes {min}..={max} tokens"
            )));
        }
        Ok(())
    }

    /// Queues one chunk's work (inputs uploaded first); the mel lands in
    /// [`DeviceFlow::mel_out`]. Returns the frames emitted.
    ///
    /// Refused with the session untouched, so that a corrected retry emits what a clean stream
    /// would: a failed session ([`FlowError::SessionFailed`]), an unprimed one
    /// ([`FlowError::NotPrimed`]), and bad inputs ([`FlowError::Input`]: token count, token
    /// outside the vocabulary, speaker embedding of the wrong width or not finite, a call the
    /// state's capacities cannot take: [`DeviceFlow::check_call`]). An error once the work has
    /// begun fails the session.
    pub fn enqueue_chunk(
        &mut self,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<usize, FlowError> {
        self.usable()?;
        self.dev.check_inputs(tokens, spk, last_chunk)?;
        self.check_width(tokens.len(), last_chunk)?;
        self.dev
            .check_call(self.run.state(), tokens.len(), last_chunk)?;
        let r = self.dev.set_inputs(tokens, spk, last_chunk);
        self.settle(r)?;
        self.enqueue_uploaded(tokens.len(), last_chunk)
    }

    /// Queues one chunk's work over inputs already uploaded by [`DeviceFlow::set_inputs`]
    /// (`n_tokens` tokens). Returns the frames emitted. Refuses a failed or unprimed session
    /// and a token count the call does not take with the session untouched; an error once the
    /// work has begun fails the session.
    pub fn enqueue_uploaded(
        &mut self,
        n_tokens: usize,
        last_chunk: bool,
    ) -> Result<usize, FlowError> {
        self.usable()?;
        self.check_width(n_tokens, last_chunk)?;
        self.dev
            .check_call(self.run.state(), n_tokens, last_chunk)?;
        let r = self.enqueue_checked(n_tokens, last_chunk);
        let r = self.settle(r);
        if r.is_ok() {
            self.since_prime += 1;
        }
        r
    }

    /// [`Session::enqueue_uploaded`] past its checks.
    fn enqueue_checked(&mut self, n_tokens: usize, last_chunk: bool) -> Result<usize, FlowError> {
        let dev = self.dev.clone();
        let frames = dev.call_frames(n_tokens, last_chunk);
        let admitted = !last_chunk
            && n_tokens == self.contract.call_tokens()
            && (self.contract.admit)("flow", frames) == Some(true)
            && (self.contract.admit)("encoder", frames) == Some(true);
        match self.engines.take() {
            Some(e) if admitted => {
                let r = self.replayed(&dev, &e, n_tokens, frames);
                self.engines = Some(e);
                r
            }
            engines => {
                // eager arms, or eager by construction (last chunk / outside the admission
                // predicate)
                if engines.is_some() {
                    self.stats.eager_by_construction += 1;
                }
                self.engines = engines;
                self.eager(&dev, n_tokens, last_chunk, frames)
            }
        }
    }

    /// One call run eagerly, outside the engines.
    fn eager(
        &mut self,
        dev: &DeviceFlow,
        n_tokens: usize,
        last_chunk: bool,
        frames: usize,
    ) -> Result<usize, FlowError> {
        let st = self.run.state_mut();
        let tn = frames / dev.config().encoder.up_stride;
        let (new_tok, est_kept) = dev.extents_after(st, frames);
        // SAFETY: `encoder_io`/`flow_io` of `st`, a state `dev` created (the session builds
        // both together): the flow's input buffers and the state's own buffers, with the
        // capacities they were allocated with.
        let (f, nt) = unsafe { dev.encoder_call(&dev.encoder_io(st, n_tokens, last_chunk)?) }?;
        self.take_fault()?;
        let st = self.run.state_mut();
        let io = dev.flow_io(st, f)?;
        // SAFETY: as above.
        let kept = unsafe { dev.flow_call(&io, 0..st.solver().n_steps) }?;
        debug_assert_eq!((f, nt, kept), (frames, new_tok, est_kept));
        dev.finish_call(st, tn, nt, kept)?;
        Ok(f)
    }

    /// A chunk's `encoder` call through its engine (admitted: a full chunk inside the
    /// admission predicates), then the fault hook.
    pub(super) fn replay_encoder(
        &mut self,
        dev: &DeviceFlow,
        engines: &Engines,
        n_tokens: usize,
    ) -> Result<(), FlowError> {
        let s = dev.config().encoder.up_stride;
        let st = self.run.state();
        let t_tok = st.conformer_tokens();
        let ext_up = t_tok * s;
        let rule = self.arm.state_rule();
        let c = &self.contract;
        let tok_dims = [1, n_tokens];
        let tok_strides = [n_tokens, 1];
        // the conformer caches: the contract regions at their extents (state rule), or the
        // stock store's compact caches (the state's tensors, at these extents)
        let tensors = *st.tensors();
        let layout = |r: &RawTensor| (r.dims().to_vec(), r.strides().to_vec());
        let ((cdims, cstrides), (udims, ustrides)) = if rule {
            (
                region_view(c.conformer, "token", t_tok)?,
                region_view(c.upsample, "frame", ext_up)?,
            )
        } else {
            (layout(&tensors.conformer), layout(&tensors.upsample))
        };
        // the conv contexts: the contract regions (state rule) or the session's plain buffers,
        // pinned extents, at fixed addresses in both stores (aliased): the state's tensors
        let ctx = st.contexts();
        let ((pdims, pstrides), (xdims, xstrides)) =
            (layout(&tensors.pre_lookahead), layout(&tensors.up_layer));
        let enc_inputs = EncoderInputs {
            tokens: tensor(dev.ids(), &tok_dims, &tok_strides, DType::I32),
            cache: tensor(st.conformer_carry(), &cdims, &cstrides, c.conformer.dtype),
            up_cache: tensor(st.upsample_carry(), &udims, &ustrides, c.upsample.dtype),
            pre_cache: tensor(ctx.pre_cnn, &pdims, &pstrides, c.pre_lookahead.dtype),
            up_ctx: tensor(ctx.up_cnn, &xdims, &xstrides, c.up_layer.dtype),
        }
        .into_array();
        // written regions with their extents: the contract regions (state rule) or whole
        // buffers of their own (stock)
        let region = |ptr: DevPtr, info: &RegionInfo| WriteArg {
            ptr,
            bytes: info.bytes,
        };
        let whole = |ptr| WriteArg::to_end_of_buffer(&**dev.backend(), ptr);
        let (by_rule, stock);
        let enc_writes: &[WriteArg] = if rule {
            by_rule = EncoderWrites {
                conformer_cache: region(st.conformer_carry(), c.conformer),
                upsample_cache: region(st.upsample_carry(), c.upsample),
                pre_lookahead_cache: region(ctx.pre_cnn, c.pre_lookahead),
                up_layer_cache: region(ctx.up_cnn, c.up_layer),
            }
            .into_array();
            &by_rule
        } else {
            stock = StockEncoderWrites {
                conformer_workspace: whole(dev.conformer_workspace())?,
                pre_lookahead_cache: whole(ctx.pre_cnn)?,
                up_layer_cache: whole(ctx.up_cnn)?,
            }
            .into_array();
            &stock
        };
        let o = self.run.call(
            engines.encoder,
            &Invocation {
                inputs: &enc_inputs,
                writes: enc_writes,
                scalars: &[t_tok as i64, ext_up as i64],
            },
        )?;
        self.count(engines.encoder, o, &enc_inputs);
        self.take_fault()?;
        Ok(())
    }

    /// One call through the engines (admitted: a full chunk inside the admission predicates).
    fn replayed(
        &mut self,
        dev: &DeviceFlow,
        engines: &Engines,
        n_tokens: usize,
        frames: usize,
    ) -> Result<usize, FlowError> {
        let tn = frames / dev.config().encoder.up_stride;
        let (new_tok, est_kept) = dev.extents_after(self.run.state(), frames);
        self.replay_encoder(dev, engines, n_tokens)?;
        let st = self.run.state();
        let l_old = st.estimator_extent();
        let rule = self.arm.state_rule();
        let c = &self.contract;
        let tensors = *st.tensors();
        let layout = |r: &RawTensor| (r.dims().to_vec(), r.strides().to_vec());
        let ctx = st.contexts();
        let (edims, estrides) = layout(&tensors.estimator_conv);
        let conv_dtype = c.estimator_conv.dtype;
        let region = |ptr: DevPtr, info: &RegionInfo| WriteArg {
            ptr,
            bytes: info.bytes,
        };
        let whole = |ptr| WriteArg::to_end_of_buffer(&**dev.backend(), ptr);
        // flow: `mu` and `cond` as `[frames, mel]`; the carry as the contract region at its extent
        // (state rule: the whole step-major carry, also at the step clock) or the stock store's
        // compact carry (one step's slice at the step clock)
        let step_clock = engines.flow.len() > 1;
        let (est_dims, est_strides) = if rule {
            region_view(c.carry, "frame", l_old)?
        } else {
            // the compact carry `[step, ...]`, or one step's slice of it
            let all = tensors.carry.dims();
            let dims = if step_clock { &all[1..] } else { all }.to_vec();
            let strides = dcc_runtime::arena::packed_strides(&dims);
            (dims, strides)
        };
        let mel = dev.config().mel;
        let io_dims = [frames, mel];
        let io_strides = [mel, 1];
        let spk_dims = [1, dev.config().spk_dim];
        let spk_strides = [dev.config().spk_dim, 1];
        let (flow_by_rule, flow_stock);
        let flow_writes: &[WriteArg] = if rule {
            flow_by_rule = FlowWrites {
                solver_workspace: region(st.solver_workspace(), c.solver_workspace),
                carry: region(st.estimator_carry(), c.carry),
                estimator_conv_cache: region(ctx.est_cnn, c.estimator_conv),
            }
            .into_array();
            &flow_by_rule
        } else {
            flow_stock = StockFlowWrites {
                solver_workspace: whole(st.solver_workspace())?,
                estimator_conv_cache: whole(ctx.est_cnn)?,
            }
            .into_array();
            &flow_stock
        };

        for (si, &id) in engines.flow.iter().enumerate() {
            let st = self.run.state();
            let carry = if !rule && step_clock {
                st.estimator_carry_step(si)?
            } else {
                st.estimator_carry()
            };
            let inputs = FlowInputs {
                mu: tensor(dev.mu(), &io_dims, &io_strides, DType::F32),
                cond: tensor(dev.cond(), &io_dims, &io_strides, DType::F32),
                spk: tensor(dev.spk(), &spk_dims, &spk_strides, DType::F32),
                // the carry's element type at the contract's point (f16 at `half`), as the
                // point's catalog keys it
                cache: tensor(carry, &est_dims, &est_strides, tensors.carry.dtype()),
                conv_cache: tensor(ctx.est_cnn, &edims, &estrides, conv_dtype),
            }
            .into_array();
            let o = self.run.call(
                id,
                &Invocation {
                    inputs: &inputs,
                    writes: flow_writes,
                    scalars: &[l_old as i64],
                },
            )?;
            self.count(id, o, &inputs);
        }
        dev.finish_call(self.run.state_mut(), tn, new_tok, est_kept)?;
        Ok(frames)
    }

    /// Raises the fault [`Session::inject_fault_after_encoder`] armed, once.
    pub(super) fn take_fault(&mut self) -> Result<(), FlowError> {
        if std::mem::take(&mut self.fault_after_encoder) {
            return Err(FlowError::Device(dcc_runtime::Error::Invalid(
                "fault injected between the encoder and the flow".into(),
            )));
        }
        Ok(())
    }

    /// Counts a replay of engine `id`: one graph launch, its nodes, its staging copies.
    fn count(&mut self, id: EngineId, o: Outcome, inputs: &[TensorArg<'_>]) {
        let (Outcome::Replayed { class }, Some(e)) = (o, self.run.engine(id)) else {
            return;
        };
        self.stats.graph_launches += 1;
        if let Some(ClassStatus::Captured { nodes }) = e.classes().get(class as usize) {
            self.stats.graph_nodes += *nodes as u64;
        }
        if let Some(sig) = e.spec().catalog.get(class as usize) {
            self.stats.staging_copies += sig
                .inputs
                .iter()
                .zip(inputs)
                .filter(|(s, _)| !s.aliased)
                .count() as u64;
        }
    }

    /// One chunk: queue it and read the mel `[mel, frames]` back.
    pub fn chunk(
        &mut self,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<Vec<f32>, FlowError> {
        let frames = self.enqueue_chunk(tokens, spk, last_chunk)?;
        let mel = self.dev.config().mel;
        // the state has advanced past this chunk: losing its audio fails the session too
        let r = self
            .dev
            .backend()
            .download(self.dev.mel_out(), mel * frames)
            .map_err(FlowError::from);
        self.settle(r)
    }
}

/// A tensor argument of an invocation.
fn tensor<'a>(ptr: DevPtr, dims: &'a [usize], strides: &'a [usize], dtype: DType) -> TensorArg<'a> {
    TensorArg {
        ptr,
        dims,
        strides,
        dtype,
    }
}

/// A view of `region` at extent `extent` along its clock axis `axis` (`frame`, `token`), in
/// storage order with the envelope's strides (what the contract's catalog keys on).
fn region_view(
    region: &RegionInfo,
    axis: &str,
    extent: usize,
) -> Result<(Vec<usize>, Vec<usize>), FlowError> {
    region
        .view(axis, extent, &[])
        .ok_or_else(|| FlowError::Config(format!("region `{}` has no `{axis}` axis", region.name)))
}
