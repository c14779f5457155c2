//! Session states of a [`DeviceFlow`] in either store, the retention after a call, and the
//! eager streaming entry points (`setup_cache`, `inference_chunk`).

use dcc_runtime::arena::Arena;
use dcc_runtime::backend::{AllocKind, DeviceBuffer};
use dcc_runtime::contract::{ArenaLayout, DType, RegionInfo};
use dcc_runtime::ops::{self, RawTensor, Tensor};

use super::FlowError;
use super::dit::{CFG_BATCH, CONV_K};
use super::encoder::CONV2_K;
use super::flow::{DeviceFlow, SolverParams};
use super::half;
use super::state::{
    DeviceState, Keeps, KvRaw, STOCK_FRAMES, STOCK_STEPS, StateStore, StateTensors, StockBuffers,
    Storage, axis_extent, region_shape,
};

/// The regions of a session, as [`Storage`] descriptions of how the port stores them.
struct Regions<'a> {
    carry: Storage<'a>,
    workspace: Storage<'a>,
    conformer: Storage<'a>,
    upsample: Storage<'a>,
    estimator_conv: Storage<'a>,
    pre_lookahead: Storage<'a>,
    up_layer: Storage<'a>,
}

/// The regions a layout of `layout` are checked against, and their infos.
pub(super) struct Infos {
    carry: &'static RegionInfo,
    pub(super) workspace: &'static RegionInfo,
    conformer: &'static RegionInfo,
    upsample: &'static RegionInfo,
    pub(super) estimator_conv: &'static RegionInfo,
    pre_lookahead: &'static RegionInfo,
    up_layer: &'static RegionInfo,
    mask: &'static RegionInfo,
}

fn alloc_f32(
    flow: &DeviceFlow,
    dims: &[usize],
    kind: AllocKind,
) -> Result<(DeviceBuffer, RawTensor), FlowError> {
    let n: usize = dims.iter().product();
    let buf = flow.be.alloc(n.max(1) * 4, kind)?;
    let t = RawTensor::packed(buf.ptr(), dims)?;
    Ok((buf, t))
}

/// A fresh packed buffer of `dims` in `dtype` (an estimator cache: f32, or binary16 at the
/// contract's `half` point).
fn alloc_kv(
    flow: &DeviceFlow,
    dims: &[usize],
    dtype: DType,
    kind: AllocKind,
) -> Result<(DeviceBuffer, KvRaw), FlowError> {
    let n: usize = dims.iter().product();
    let buf = flow.be.alloc(n.max(1) * dtype.size(), kind)?;
    let t = KvRaw::packed(buf.ptr(), dims, dtype)?;
    Ok((buf, t))
}

impl DeviceFlow {
    /// The element type the contract stores the estimator cache in (`carry` and
    /// `solver_workspace` alike): f32, or binary16 (the `half` operating point) on a flow whose
    /// path rounds to f16 ([`half::rounds`]), where it holds the values an f32 cache would.
    fn kv_dtype(&self, i: &Infos) -> Result<DType, FlowError> {
        let (c, w) = (i.carry.dtype, i.workspace.dtype);
        if c != w {
            return Err(FlowError::Config(format!(
                "the contract stores the carry as {} and the solver workspace as {}: the port \
                 moves one into the other",
                c.name(),
                w.name()
            )));
        }
        match c {
            DType::F32 => Ok(c),
            DType::F16 if half::rounds(self.gemm_path()) => Ok(c),
            DType::F16 => Err(FlowError::Config(format!(
                "the contract stores the estimator cache as f16 (the `half` operating point), \
                 the flow runs the {:?} path, which keeps f32 keys and values",
                self.gemm_path()
            ))),
            d => Err(FlowError::Config(format!(
                "the contract stores the estimator cache as {}: the port stores f32 or f16",
                d.name()
            ))),
        }
    }

    /// The port's storage of each region, by axis name (see [`super::state`]).
    pub(super) fn infos(&self, layout: &ArenaLayout) -> Result<Infos, FlowError> {
        let (e, d) = (&self.cfg.encoder, &self.cfg.dit);
        let est = [
            None,
            Some(d.depth),
            Some(CFG_BATCH),
            Some(d.heads),
            None,
            Some(2 * d.head_dim),
        ];
        let est_axes = [("step", 0), ("frame", 4)];
        let dk2 = 2 * (e.dim / e.heads);
        let (conf, up) = (
            [Some(e.blocks), Some(e.heads), None, Some(dk2)],
            [Some(e.up_blocks), Some(e.heads), None, Some(dk2)],
        );
        let cnn = [
            None,
            Some(d.depth),
            Some(CFG_BATCH),
            Some(2),
            Some(CONV_K - 1),
            Some(d.hidden),
        ];
        let (pre, upc) = (
            [Some(CONV2_K - 1), Some(e.dim)],
            [Some(2 * e.up_stride), Some(e.dim)],
        );
        let est_what = "[step, layer, cfg, head, frame, k‖v]";
        let r = Regions {
            carry: Storage {
                name: "carry",
                dims: &est,
                axes: &est_axes,
                what: est_what,
            },
            workspace: Storage {
                name: "solver_workspace",
                dims: &est,
                axes: &est_axes,
                what: est_what,
            },
            conformer: Storage {
                name: "conformer_cache",
                dims: &conf,
                axes: &[("token", 2)],
                what: "[block, head, token, k‖v]",
            },
            upsample: Storage {
                name: "upsample_cache",
                dims: &up,
                axes: &[("frame", 2)],
                what: "[up_block, head, frame, k‖v]",
            },
            estimator_conv: Storage {
                name: "estimator_conv_cache",
                dims: &cnn,
                axes: &est_axes,
                what: "[step, layer, cfg, conv, frame, hidden]",
            },
            pre_lookahead: Storage {
                name: "pre_lookahead_cache",
                dims: &pre,
                axes: &[("token", 0)],
                what: "[token, dim]",
            },
            up_layer: Storage {
                name: "up_layer_cache",
                dims: &upc,
                axes: &[("frame", 0)],
                what: "[frame, dim]",
            },
        };
        Ok(Infos {
            carry: r.carry.region(layout)?,
            workspace: r.workspace.region(layout)?,
            conformer: r.conformer.region(layout)?,
            upsample: r.upsample.region(layout)?,
            estimator_conv: r.estimator_conv.region(layout)?,
            pre_lookahead: r.pre_lookahead.region(layout)?,
            up_layer: r.up_layer.region(layout)?,
            mask: layout.region("attention_mask").ok_or_else(|| {
                FlowError::Config("the contract has no `attention_mask` region".into())
            })?,
        })
    }

    /// The contract's keeps, checked against this flow: both conformer caches keep the same
    /// frames on their clocks (the up-blocks' cache is `stride ×` the blocks'), and every
    /// cache's kept frames fit the [`super::DeviceLimits`] capacity.
    fn keeps(&self, layout: &ArenaLayout) -> Result<Keeps, FlowError> {
        let k = Keeps::of(layout)?;
        let s = self.cfg.encoder.up_stride;
        let (c, u) = (k.conformer, k.upsample);
        if (c.head * s, c.tail * s) != (u.head, u.tail) {
            return Err(FlowError::Config(format!(
                "the conformer cache keeps {} ‖ {} tokens, the upsample cache {} ‖ {} frames: the \
                 port advances both on one trajectory ({s} frames a token)",
                c.head, c.tail, u.head, u.tail
            )));
        }
        let l = self.limits.carry_frames;
        if k.carry.bound().max(u.bound()) > l {
            return Err(FlowError::Input(format!(
                "the contract keeps {} / {} frames, the flow's caches hold {l}",
                k.carry.bound(),
                u.bound()
            )));
        }
        Ok(k)
    }

    /// A fresh (unprimed) session state under the state rule, in a region arena laid out by a
    /// contract (see [`super::state`]): every region's storage checked by axis name, its
    /// capacities from the contract. The state owns the arena's per-session part; its
    /// per-process regions are the flow's ([`DeviceFlow::process_arena`]).
    pub fn new_state_in_arena(
        &self,
        solver: SolverParams,
        layout: &ArenaLayout,
    ) -> Result<DeviceState, FlowError> {
        let keeps = self.keeps(layout)?;
        let i = self.infos(layout)?;
        let kv_dtype = self.kv_dtype(&i)?;
        let steps = [i.carry, i.estimator_conv]
            .iter()
            .map(|r| axis_extent(r, "step"))
            .collect::<Result<Vec<_>, _>>()?;
        if steps.iter().any(|&n| n < solver.n_steps) {
            return Err(FlowError::Config(format!(
                "the contract's carry and estimator contexts hold {steps:?} solver steps, the \
                 solver takes {}",
                solver.n_steps
            )));
        }
        // the workspace holds a slice per step, or one that every step reuses (the contract's
        // `iteration` lifetime: each step writes it back into the carry before the next)
        let ws_steps = axis_extent(i.workspace, "step")?;
        if ws_steps != 1 && ws_steps < solver.n_steps {
            return Err(FlowError::Config(format!(
                "the contract's solver workspace holds {ws_steps} solver steps: the solver takes \
                 {} (or one step's slice, reused by every step)",
                solver.n_steps
            )));
        }
        self.prepare_time_conditions(solver.n_steps)?;
        let (est_cap, conf_cap, up_cap) = (
            axis_extent(i.carry, "frame")?,
            axis_extent(i.conformer, "token")?,
            axis_extent(i.upsample, "frame")?,
        );
        if est_cap < keeps.carry.bound()
            || conf_cap < keeps.conformer.bound()
            || up_cap < keeps.upsample.bound()
        {
            return Err(FlowError::Config(format!(
                "the contract's caches hold {est_cap} / {conf_cap} / {up_cap}, they keep {} / {} \
                 / {}",
                keeps.carry.bound(),
                keeps.conformer.bound(),
                keeps.upsample.bound()
            )));
        }
        // the per-session part is this state's; the per-process part (the solver workspace and
        // the mask: one call's lifetime) is the flow's, shared by its sessions
        let process = self.process_arena(layout)?;
        let arena = Arena::in_process(self.be.clone(), layout, &process)?;
        let region = |r: &RegionInfo| -> Result<RawTensor, FlowError> {
            Ok(Tensor::<f32>::region(&arena, r.name)?.raw())
        };
        // the estimator cache in the contract's dtype: `Tensor::region` checks it against the
        // region's
        let kv = |r: &RegionInfo| -> Result<KvRaw, FlowError> {
            Ok(match kv_dtype {
                DType::F16 => KvRaw::F16(Tensor::<::half::f16>::region(&arena, r.name)?.raw()),
                _ => KvRaw::F32(Tensor::<f32>::region(&arena, r.name)?.raw()),
            })
        };
        let tensors = StateTensors {
            carry: kv(i.carry)?,
            workspace: kv(i.workspace)?,
            conformer: region(i.conformer)?,
            upsample: region(i.upsample)?,
            estimator_conv: region(i.estimator_conv)?,
            pre_lookahead: region(i.pre_lookahead)?,
            up_layer: region(i.up_layer)?,
        };
        let mask = arena.ptr(i.mask.name)?;
        Ok(self.state(solver, keeps, tensors, StateStore::Fixed { arena, mask }))
    }

    /// A fresh session state with the stock store (see [`super::state`]): the solver workspace
    /// is the vendor's [`STOCK_STEPS`] × [`STOCK_FRAMES`] envelope, caches are materialized
    /// into fresh compact buffers after every call; shapes and keeps from the contract.
    pub fn new_state_stock(
        &self,
        solver: SolverParams,
        layout: &ArenaLayout,
    ) -> Result<DeviceState, FlowError> {
        let keeps = self.keeps(layout)?;
        let i = self.infos(layout)?;
        if solver.n_steps > STOCK_STEPS {
            return Err(FlowError::Input(format!(
                "the stock envelope holds {STOCK_STEPS} solver steps"
            )));
        }
        self.prepare_time_conditions(solver.n_steps)?;
        let n = solver.n_steps;
        let other = AllocKind::Other;
        // the vendor's fp16 mode keeps its cache buffers in f16 too
        let kv_dtype = self.kv_dtype(&i)?;
        let (carry, carry_t) = alloc_kv(
            self,
            &region_shape(i.carry, &[("step", n), ("frame", 0)])?,
            kv_dtype,
            other,
        )?;
        let ws_dims = region_shape(
            i.workspace,
            &[("step", STOCK_STEPS), ("frame", STOCK_FRAMES)],
        )?;
        let (workspace, ws_t) = alloc_kv(self, &ws_dims, kv_dtype, other)?;
        let (conformer, conf_t) =
            alloc_f32(self, &region_shape(i.conformer, &[("token", 0)])?, other)?;
        let (upsample, up_t) = alloc_f32(self, &region_shape(i.upsample, &[("frame", 0)])?, other)?;
        let mask_dims = region_shape(i.mask, &[("frame", STOCK_FRAMES)])?;
        let mask_bytes = mask_dims.iter().product::<usize>() * i.mask.dtype.size();
        let mask = self.be.alloc(mask_bytes, other)?;
        let session = AllocKind::Session;
        let (est_cnn, est_cnn_t) = alloc_f32(
            self,
            &region_shape(i.estimator_conv, &[("step", n)])?,
            session,
        )?;
        let (pre, pre_t) = alloc_f32(self, i.pre_lookahead.dims, session)?;
        let (upc, upc_t) = alloc_f32(self, i.up_layer.dims, session)?;
        let tensors = StateTensors {
            carry: carry_t,
            workspace: ws_t,
            conformer: conf_t,
            upsample: up_t,
            estimator_conv: est_cnn_t,
            pre_lookahead: pre_t,
            up_layer: upc_t,
        };
        let store = StateStore::Stock(Box::new(StockBuffers {
            carry,
            workspace,
            conformer,
            upsample,
            mask,
            contexts: [est_cnn, pre, upc],
        }));
        Ok(self.state(solver, keeps, tensors, store))
    }

    /// An unprimed state over `store` (`setup_cache` zeroes the contexts, the vendor's
    /// `new_zeros`, before use).
    fn state(
        &self,
        solver: SolverParams,
        keeps: Keeps,
        tensors: StateTensors,
        store: StateStore,
    ) -> DeviceState {
        DeviceState {
            flow: self.id,
            solver,
            keeps,
            tensors,
            store,
            est_extent: 0,
            t_tok: 0,
            primed: false,
        }
    }

    /// The extents of `st`'s caches after a call presenting `frames` frames: `(conformer
    /// tokens, estimator frames)`, each [`ops::carry::kept`] under its cache's keep.
    pub fn extents_after(&self, st: &DeviceState, frames: usize) -> (usize, usize) {
        let e = &self.cfg.encoder;
        let tokens = st.t_tok + frames / e.up_stride;
        let tokens = if e.blocks == 0 {
            tokens
        } else {
            ops::carry::kept(&st.keeps.conformer, tokens)
        };
        (
            tokens,
            ops::carry::kept(&st.keeps.carry, st.est_extent + frames),
        )
    }

    /// After the callables of one call: under the state rule only the extents advance (the
    /// caches were written back in place); under the stock store the kept frames are
    /// materialized into freshly allocated compact caches (the vendor's `torch.cat`) and the
    /// old ones freed. `tn` tokens were presented; `new_tok`, `est_kept` are what the callables
    /// returned.
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
        let (l_tok, l_old) = (st.t_tok, st.est_extent);
        // The stock store sizes its fresh caches from `new_tok`/`est_kept` and reads `tn` new
        // tokens from the workspaces: they must be what the call's callables returned.
        let want = self.extents_after(st, tn * s);
        let stock = !st.store.is_fixed();
        if l_tok + tn > self.caps.work_tok
            || (stock && l_old + tn * s > STOCK_FRAMES)
            || (new_tok, est_kept) != want
        {
            return Err(FlowError::Input(format!(
                "finish_call: {tn} tokens, kept {new_tok} tokens / {est_kept} frames; the call \
                 keeps {} / {}",
                want.0, want.1
            )));
        }
        if let StateStore::Stock(b) = &mut st.store {
            let cx = self.cx();
            let t = &mut st.tensors;
            let k = &st.keeps;
            // conformer: [cache ‖ new] of every layer → fresh compact caches
            let (ws_tok, ws_up) = self.w.conformer()?;
            let dims = |r: &RawTensor, n: usize| {
                let mut d = r.dims().to_vec();
                d[2] = n;
                d
            };
            let (fresh, fresh_t) = alloc_f32(self, &dims(&t.conformer, new_tok), AllocKind::Other)?;
            let (fresh_up, fresh_up_t) =
                alloc_f32(self, &dims(&t.upsample, new_tok * s), AllocKind::Other)?;
            let (ft, fu) = (
                Tensor::of(&fresh)?.view(fresh_t.dims())?,
                Tensor::of(&fresh_up)?.view(fresh_up_t.dims())?,
            );
            for i in 0..e.blocks {
                let (dst, src) = (ft.index(0, i)?, ws_tok.index(0, i)?);
                ops::carry::write_back(&cx, dst, src, l_tok + tn, &k.conformer)?;
            }
            for i in 0..e.up_blocks {
                let (dst, src) = (fu.index(0, i)?, ws_up.index(0, i)?);
                ops::carry::write_back(&cx, dst, src, (l_tok + tn) * s, &k.upsample)?;
            }
            b.conformer = fresh;
            b.upsample = fresh_up;
            t.conformer = fresh_t;
            t.upsample = fresh_up_t;
            // estimator: every step's [new ‖ old] → one fresh compact carry
            let n = st.solver.n_steps;
            let mut cd = t.carry.dims().to_vec();
            cd[4] = est_kept;
            let (fresh, fresh_t) = alloc_kv(self, &cd, t.carry.dtype(), AllocKind::Other)?;
            fn retain<T: ops::Elem>(
                cx: &ops::Ctx<'_>,
                (fresh, cd): (&DeviceBuffer, &[usize]),
                (ws, ws_dims): (&DeviceBuffer, &[usize]),
                n: usize,
                extent: usize,
                keep: &dcc_runtime::contract::Keep,
            ) -> Result<usize, FlowError> {
                let dst = Tensor::<T>::of(fresh)?.view(cd)?.flatten(0, 3)?;
                let src = Tensor::<T>::of(ws)?
                    .view(ws_dims)?
                    .narrow(0, 0, n)?
                    .flatten(0, 3)?;
                Ok(ops::carry::write_back(cx, dst, src, extent, keep)?)
            }
            let (f, w) = ((&fresh, &cd[..]), (&b.workspace, t.workspace.dims()));
            let extent = l_old + tn * s;
            match t.carry {
                KvRaw::F32(_) => retain::<f32>(&cx, f, w, n, extent, &k.carry)?,
                KvRaw::F16(_) => retain::<::half::f16>(&cx, f, w, n, extent, &k.carry)?,
            };
            b.carry = fresh;
            t.carry = fresh_t;
        }
        st.t_tok = new_tok;
        st.est_extent = est_kept;
        Ok(())
    }

    /// Zeroes a session's conv contexts and extents in place (addresses unchanged).
    fn reset(&self, st: &mut DeviceState) -> Result<(), FlowError> {
        let cx = self.cx();
        let t = &st.tensors;
        for ctx in [t.estimator_conv, t.pre_lookahead, t.up_layer] {
            // SAFETY: a state's tensors lie in its own store (its arena or its buffers), which
            // `st` owns and which lives while `st` is borrowed.
            ops::memset(&cx, unsafe { ctx.bind() }, 0)?;
        }
        st.est_extent = 0;
        st.t_tok = 0;
        st.primed = false;
        Ok(())
    }

    /// Validates one call's host inputs (lengths, token range, finite speaker values: a NaN
    /// would poison every later call of the stream) and uploads them into the fixed input
    /// buffers (token ids, speaker embedding). Nothing is uploaded unless every check passes.
    /// Host copies: never inside a capture.
    pub fn set_inputs(
        &self,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<(), FlowError> {
        self.check_inputs(tokens, spk, last_chunk)?;
        self.be.upload(self.w.spk.ptr(), spk)?;
        self.be.upload(self.w.ids.ptr(), tokens)?;
        Ok(())
    }

    /// The checks of [`DeviceFlow::set_inputs`], touching nothing: a caller that must not
    /// change any device state on bad input runs them first.
    pub fn check_inputs(
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
        if let Some(i) = spk.iter().position(|v| !v.is_finite()) {
            return Err(FlowError::Input(format!(
                "speaker embedding value {i} is {}",
                spk[i]
            )));
        }
        Ok(())
    }

    /// The checks of [`DeviceFlow::setup_cache`], touching nothing: the prompt mel's length
    /// and finiteness, the state's owner, and the inputs' ([`DeviceFlow::check_inputs`]).
    pub fn check_prime(
        &self,
        st: &DeviceState,
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
        if let Some(i) = mel.iter().position(|v| !v.is_finite()) {
            return Err(FlowError::Input(format!(
                "prompt mel value {i} is {}",
                mel[i]
            )));
        }
        self.check_owner(st)?;
        self.check_inputs(tokens, spk, false)
    }

    /// `setup_cache` into `st`: the prompt-priming pass (`tokens` include the lookahead, `mel`
    /// is the prompt mel `[frames, mel]`, `frames = stride · (tokens − lookahead)`), eager by
    /// construction. Resets `st` in place (its addresses do not change under the state rule).
    /// Every input is checked ([`DeviceFlow::check_prime`]) before `st` is touched.
    pub fn setup_cache(
        &self,
        st: &mut DeviceState,
        tokens: &[u32],
        mel: &[f32],
        spk: &[f32],
    ) -> Result<(), FlowError> {
        self.check_prime(st, tokens, mel, spk)?;
        let e = &self.cfg.encoder;
        self.set_inputs(tokens, spk, false)?;
        self.reset(st)?;
        if let StateStore::Stock(b) = &mut st.store {
            let t = &mut st.tensors;
            let empty = |r: &RawTensor, axis: usize| {
                let mut d = r.dims().to_vec();
                d[axis] = 0;
                d
            };
            let mut carry = t.carry.dims().to_vec();
            carry[4] = 0;
            (b.carry, t.carry) = alloc_kv(self, &carry, t.carry.dtype(), AllocKind::Other)?;
            (b.conformer, t.conformer) =
                alloc_f32(self, &empty(&t.conformer, 2), AllocKind::Other)?;
            (b.upsample, t.upsample) = alloc_f32(self, &empty(&t.upsample, 2), AllocKind::Other)?;
        }
        // SAFETY: the I/O is `encoder_io`/`flow_io` of `st`, a state this flow created
        // (`check_owner`): ids/mu/cond/spk are this flow's input buffers, and the caches,
        // workspace and conv contexts are `st`'s (its arena or buffers, owned by `st`, borrowed
        // mutably here), with the layouts `st` records.
        let (frames, new_tok) =
            unsafe { self.encoder_call(&self.encoder_io(st, tokens.len(), false)?) }?;
        let flow = || {
            self.be.upload(self.w.cond.ptr(), mel)?;
            let io = self.flow_io(st, frames)?;
            // SAFETY: as above.
            unsafe { self.flow_call(&io, 0..st.solver.n_steps) }
        };
        let kept = flow();
        // chunk calls see cond = 0: the prompt mel is cleared even when the flow failed, so a
        // failed prime never leaks into another session's calls on this flow (the flow's
        // error, if any, is the one reported)
        let cleared = Tensor::of(&self.w.cond).and_then(|c| ops::memset(&self.cx(), c, 0));
        let kept = kept?;
        cleared?;
        self.finish_call(st, frames / e.up_stride, new_tok, kept)?;
        st.primed = true;
        Ok(())
    }

    /// `inference_chunk` (eager) with the contract's retention applied; returns `[mel,
    /// frames]` (channel-major, as the vendor's `feat[0]`).
    pub fn inference_chunk(
        &self,
        st: &mut DeviceState,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<Vec<f32>, FlowError> {
        if !st.primed {
            return Err(FlowError::NotPrimed);
        }
        self.check_owner(st)?;
        self.set_inputs(tokens, spk, last_chunk)?;
        // SAFETY: as in `setup_cache`: the I/O of `st`, a state this flow created.
        let (frames, new_tok) =
            unsafe { self.encoder_call(&self.encoder_io(st, tokens.len(), last_chunk)?) }?;
        let io = self.flow_io(st, frames)?;
        // SAFETY: as above.
        let kept = unsafe { self.flow_call(&io, 0..st.solver.n_steps) }?;
        self.finish_call(st, frames / self.cfg.encoder.up_stride, new_tok, kept)?;
        Ok(self
            .be
            .download(self.w.mel_out.ptr(), self.cfg.mel * frames)?)
    }
}
