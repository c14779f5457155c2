//! Serving the flow under its native-clock contract: the `#[native_clock]` adapters, the six
//! arms of the paper's Table 5 factorial and a streaming [`Session`] that runs one arm.
//!
//! * **State rule** (arms S, SR, SRc): the carries, the solver workspace, the conformer caches,
//!   the conv contexts (`estimator_conv_cache`, `pre_lookahead_cache`, `up_layer_cache`) and the
//!   attention mask live in one region arena laid out by the contract ([`ArenaLayout`] of the
//!   adapter); addresses never change, carries are written back in place.
//! * **Stock** (arms B0, R, Rc): the vendor's 16 × 1000 estimator envelope; after every call the
//!   kept frames are materialized into fresh buffers (`torch.cat`), so carry addresses drift and
//!   replay must stage them: the catalog is the contract's with every carry input staged
//!   (`aliased: false`) and described by its real compact layout, so the staging copy is exact;
//!   the conv contexts stay in fixed session buffers (aliased, as the contract declares).
//! * **Replay** (R, SR: step clock, one engine per solver step; Rc, SRc: chunk clock, one engine
//!   for the whole loop): the contract's `encoder` and `flow` callables are wrapped by
//!   [`ExactShapeReplay`]; the closures take every tensor address from the [`Call`]. The
//!   prompt-priming pass and `last_chunk` calls run eager by construction.
//!
//! Retention is read from the contract: each cache region's storage order and kept slices
//! ([`Keeps`]: the `carry` region's `head ‖ tail` of its prepend storage — paper eq. 2 keeps
//! `head = retained, tail = prompt`, minicpmo-utils 1.0.7 `head = prompt, tail = retained` —
//! and the conformer caches' on their own clocks), handed to the carry as declared.
//!
//! Signature keys are built from the contract's regions as the port stores them (the spec's
//! `layout:`, e.g. `carry` = `[step, layer, cfg, head, frame, k‖v]`) and from the tensors the
//! callables really read (`tokens`; `mu`, `cond` as `[frames, mel]`; `spk` as `[1, spk_dim]`),
//! so they equal the generated catalog's with no special case.

use std::sync::Arc;

use dcc_runtime::DevPtr;
use dcc_runtime::contract::{
    ArenaLayout, CallableInfo, DType, Granularity, NativeClock, NativeClockAdapter, RegionBuf,
    RegionInfo, Signature,
};
use dcc_runtime::replay::{
    Call, Catalog, EngineReport, ExactShapeReplay, Fallback, Invocation, Outcome, OwnedSignature,
    ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;

use super::{
    DeviceFlow, DeviceState, EncoderIo, FlowError, FlowIo, Keeps, SolverParams, region_shape,
};
use dcc_runtime::ops::RawTensor;

macro_rules! adapter {
    ($(#[$m:meta])* $name:ident, $spec:literal, $carry:literal, $ws:literal, $conf:literal, $up:literal,
     $est_cnn:literal, $pre_cnn:literal, $up_cnn:literal) => {
        $(#[$m])*
        #[dcc_macros::native_clock(spec = $spec)]
        pub struct $name {
            #[region(carry)]
            pub carry: RegionBuf<f32, $carry>,
            #[region(solver_workspace)]
            pub solver_workspace: RegionBuf<f32, $ws>,
            #[region(attention_mask)]
            pub attention_mask: RegionBuf<bool, 112>,
            #[region(conformer_cache)]
            pub conformer_cache: RegionBuf<f32, $conf>,
            #[region(upsample_cache)]
            pub upsample_cache: RegionBuf<f32, $up>,
            /// The estimator's causal-conv contexts `[step, layer, cfg, conv, frame, hidden]`.
            #[region(estimator_conv_cache)]
            pub estimator_conv_cache: RegionBuf<f32, $est_cnn>,
            /// The pre-lookahead layer's conv context `[token, dim]`.
            #[region(pre_lookahead_cache)]
            pub pre_lookahead_cache: RegionBuf<f32, $pre_cnn>,
            /// The upsampling conv's context `[frame, dim]`.
            #[region(up_layer_cache)]
            pub up_layer_cache: RegionBuf<f32, $up_cnn>,
            /// `UpsampleConformerEncoderV2.forward_chunk` ([`DeviceFlow::encoder_call`]).
            #[callable(encoder)]
            pub encoder: (),
            /// The CFM solver loop ([`DeviceFlow::flow_call`]).
            #[callable(flow)]
            pub flow: (),
            /// HiFT (a later issue): bound, never captured here.
            #[callable(vocoder, eager)]
            pub vocoder: (),
        }

        impl $name {
            /// The region handles of a state-rule session's arena, checked against the layout.
            pub fn bind(arena: &dcc_runtime::Arena) -> dcc_runtime::Result<Self> {
                Ok(Self {
                    carry: RegionBuf::bind(arena, "carry")?,
                    solver_workspace: RegionBuf::bind(arena, "solver_workspace")?,
                    attention_mask: RegionBuf::bind(arena, "attention_mask")?,
                    conformer_cache: RegionBuf::bind(arena, "conformer_cache")?,
                    upsample_cache: RegionBuf::bind(arena, "upsample_cache")?,
                    estimator_conv_cache: RegionBuf::bind(arena, "estimator_conv_cache")?,
                    pre_lookahead_cache: RegionBuf::bind(arena, "pre_lookahead_cache")?,
                    up_layer_cache: RegionBuf::bind(arena, "up_layer_cache")?,
                    encoder: (),
                    flow: (),
                    vocoder: (),
                })
            }
        }
    };
}

adapter!(
    /// The full model's contract (`specs/token2wav.yaml`, paper retention).
    Token2Wav,
    "specs/token2wav.yaml",
    131_727_360,
    150_077_440,
    1_234_944,
    1_646_592,
    655_360,
    1024,
    2048
);
adapter!(
    /// The tiny golden model's contract (`specs/token2wav_tiny.yaml`, paper retention).
    Token2WavTiny,
    "specs/token2wav_tiny.yaml",
    2_058_240,
    2_344_960,
    51_456,
    51_456,
    10_240,
    128,
    256
);
adapter!(
    /// The tiny golden model under the vendor's slicing (`specs/token2wav_tiny_vendor.yaml`).
    Token2WavTinyVendor,
    "specs/token2wav_tiny_vendor.yaml",
    2_058_240,
    2_344_960,
    51_456,
    51_456,
    10_240,
    128,
    256
);

/// What a session needs from a contract, as data.
#[derive(Copy, Clone, Debug)]
pub struct ContractView {
    pub family: &'static str,
    pub arena: ArenaLayout,
    /// The regions the signatures are keyed on, as the contract lays them out.
    pub carry: &'static RegionInfo,
    /// The encoder blocks' cache (token clock) and the up-blocks' cache (frame clock).
    pub conformer: &'static RegionInfo,
    pub upsample: &'static RegionInfo,
    /// The conv contexts: the estimator's (solver clock), the pre-lookahead layer's (token
    /// clock) and the upsampling conv's (frame clock), all pinned.
    pub estimator_conv: &'static RegionInfo,
    pub pre_lookahead: &'static RegionInfo,
    pub up_layer: &'static RegionInfo,
    pub encoder: &'static CallableInfo,
    pub flow: &'static CallableInfo,
    /// Whether the adapter asks for capture of each (`#[callable(x, eager)]` → false).
    pub capture_encoder: bool,
    pub capture_flow: bool,
    /// What each cache keeps (the regions' declared `keep`).
    pub keeps: Keeps,
    /// The generated admission predicates (`NativeClock::admit`).
    pub admit: fn(&str, usize) -> Option<bool>,
}

impl ContractView {
    /// From a `#[native_clock]` adapter.
    pub fn of<A: NativeClockAdapter>() -> Result<Self, FlowError> {
        let bad = |m: &str| FlowError::Config(format!("contract of the adapter: {m}"));
        let callable = |name: &str| {
            A::CALLABLE_FIELDS
                .iter()
                .find(|b| b.callable.name == name)
                .ok_or_else(|| bad(&format!("no callable `{name}`")))
        };
        let (enc, flow) = (callable("encoder")?, callable("flow")?);
        let arena = A::arena();
        let region = |name: &str| {
            arena
                .region(name)
                .ok_or_else(|| bad(&format!("no region `{name}`")))
        };
        Ok(ContractView {
            family: A::Contract::FAMILY,
            arena,
            carry: region("carry")?,
            conformer: region("conformer_cache")?,
            upsample: region("upsample_cache")?,
            estimator_conv: region("estimator_conv_cache")?,
            pre_lookahead: region("pre_lookahead_cache")?,
            up_layer: region("up_layer_cache")?,
            encoder: enc.callable,
            flow: flow.callable,
            capture_encoder: enc.capture,
            capture_flow: flow.capture,
            keeps: Keeps::of(&arena)?,
            admit: <A::Contract as NativeClock>::admit,
        })
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

/// The six arms of Table 5.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Arm {
    /// Stock: `torch.cat` retention into fresh buffers, the 16 × 1000 envelope, eager.
    B0,
    /// State rule only (arena, in-place carry), eager.
    S,
    /// Replay at the step clock without the state rule (carries staged).
    R,
    /// Replay at the chunk clock without the state rule (carries staged).
    Rc,
    /// State rule + replay at the step clock.
    SR,
    /// State rule + replay at the chunk clock.
    SRc,
}

impl Arm {
    pub const ALL: [Arm; 6] = [Arm::B0, Arm::S, Arm::R, Arm::Rc, Arm::SR, Arm::SRc];

    pub fn name(self) -> &'static str {
        match self {
            Arm::B0 => "B0",
            Arm::S => "S",
            Arm::R => "R",
            Arm::Rc => "Rc",
            Arm::SR => "SR",
            Arm::SRc => "SRc",
        }
    }

    pub fn parse(s: &str) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether the arm places state by the contract (arena, in-place carry).
    pub fn state_rule(self) -> bool {
        matches!(self, Arm::S | Arm::SR | Arm::SRc)
    }

    /// The capture granularity of the arm's flow, `None` for eager arms.
    pub fn replay(self) -> Option<Granularity> {
        match self {
            Arm::B0 | Arm::S => None,
            Arm::R | Arm::SR => Some(Granularity::Step),
            Arm::Rc | Arm::SRc => Some(Granularity::Chunk),
        }
    }
}

type Callable = Box<dyn Fn(&mut Call<'_>) -> dcc_runtime::Result<()> + Send>;
type Engine = ExactShapeReplay<Callable>;

fn rt(e: FlowError) -> dcc_runtime::Error {
    match e {
        FlowError::Device(s) => dcc_runtime::Error::Invalid(format!("device: {s}")),
        e => dcc_runtime::Error::Invalid(e.to_string()),
    }
}

/// The contract's catalog with every region input staged and described by the stock store's
/// real compact layout (`region_dims(input, signature)`, packed): what replay without the state
/// rule keys on and copies. Other inputs and constants stay as declared. Owned by the engines
/// built from it.
fn staged_catalog(
    cat: &'static [Signature],
    region_dims: impl Fn(&str, &Signature) -> Option<Vec<usize>>,
) -> Catalog {
    cat.iter()
        .map(|s| {
            let mut o = OwnedSignature::from(s);
            for (t, declared) in o.inputs.iter_mut().zip(s.inputs) {
                if let Some(dims) = region_dims(declared.name, s) {
                    t.strides = dcc_runtime::arena::packed_strides(&dims).into();
                    t.dims = dims.into();
                    t.aliased = false;
                }
            }
            o
        })
        .collect::<Vec<_>>()
        .into()
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
    dev: Arc<DeviceFlow>,
    arm: Arm,
    contract: ContractView,
    st: DeviceState,
    encoder: Option<Engine>,
    flow: Vec<Engine>,
    chunk_tokens: usize,
    stats: SessionStats,
}

impl Session {
    /// A fresh session of `arm` under `contract` (retention from the contract).
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
        let chunk_tokens = contract
            .encoder
            .catalog
            .first()
            .and_then(|s| s.inputs.first())
            .map(|t| t.dims.iter().product())
            .unwrap_or(0);
        let mut s = Session {
            dev,
            arm,
            contract,
            st,
            encoder: None,
            flow: Vec::new(),
            chunk_tokens,
            stats: SessionStats::default(),
        };
        if let Some(g) = arm.replay() {
            s.build_engines(g)?;
        }
        Ok(s)
    }

    pub fn arm(&self) -> Arm {
        self.arm
    }

    pub fn state(&self) -> &DeviceState {
        &self.st
    }

    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    pub fn device(&self) -> &Arc<DeviceFlow> {
        &self.dev
    }

    /// Engine reports: the encoder's, then the flow's (one per step at step granularity).
    pub fn reports(&self) -> Vec<EngineReport> {
        self.encoder
            .iter()
            .chain(&self.flow)
            .map(|e| e.report())
            .collect()
    }

    fn build_engines(&mut self, g: Granularity) -> Result<(), FlowError> {
        let dev = &self.dev;
        let rule = self.arm.state_rule();
        let be = dev.backend().clone();
        let rng = Arc::new(HostRng::new(0));
        let keeps = self.contract.keeps;
        let solver = self.st.solver();
        // the state's layouts; replay substitutes the addresses (staging copies of the same
        // shapes), and the stock store's caches are compact at the extents the call sees
        let st = *self.st.tensors();
        let packed = |call: &Call<'_>, i: usize| -> dcc_runtime::Result<RawTensor> {
            let dims = call.dims(i)?;
            RawTensor::packed(call.input(i)?, dims).map_err(|e| rt(e.into()))
        };
        let (conformer, upsample) = (self.contract.conformer, self.contract.upsample);
        let carry = self.contract.carry;

        // encoder: scalars = the extents of `conformer_cache` (tokens) and `upsample_cache`
        // (frames), in read order (the pinned conv contexts add none)
        let enc_info = self.contract.encoder;
        let mut spec = ReplaySpec::from_callable(enc_info, 0);
        if !rule {
            let ext = |sig: &Signature, i: usize| sig.scalars.get(i).map(|&v| v as usize);
            spec.catalog = staged_catalog(enc_info.catalog, |name, sig| match name {
                "cache" => ext(sig, 0).and_then(|t| region_shape(conformer, &[("token", t)]).ok()),
                "up_cache" => {
                    ext(sig, 1).and_then(|f| region_shape(upsample, &[("frame", f)]).ok())
                }
                _ => None,
            });
            // the stock store leaves [carry ‖ new] in the conformer workspace; the conv contexts
            // are written in place
            spec.writes = 3;
        }
        if !self.contract.capture_encoder {
            spec.verdict = dcc_runtime::contract::Verdict::OutWidth;
        }
        let devc = dev.clone();
        let f: Callable = Box::new(move |call: &mut Call<'_>| {
            let t_tok = call.scalar(0)? as usize;
            let n_tokens = call.dims(0)?.iter().product::<usize>();
            let io = EncoderIo {
                ids: RawTensor::packed(call.input(0)?, &[n_tokens]).map_err(|e| rt(e.into()))?,
                last_chunk: false,
                t_tok,
                carry: if rule {
                    st.conformer.with_ptr(call.input(1)?)
                } else {
                    packed(call, 1)?
                },
                up_carry: if rule {
                    st.upsample.with_ptr(call.input(2)?)
                } else {
                    packed(call, 2)?
                },
                write_back: rule,
                pre_cnn: st.pre_lookahead.with_ptr(call.input(3)?),
                up_cnn: st.up_layer.with_ptr(call.input(4)?),
                keeps,
            };
            // SAFETY: `enqueue_chunk` is the only caller of this engine: it binds input 0 to
            // the flow's id buffer ([1, n_tokens]), inputs 1-4 and the writes to this
            // session's conformer caches (the state's layouts under the state rule; the stock
            // store's compact caches, of the dims the call is keyed on) and conv contexts
            // (the state's layouts), all buffers of `self.st`, a state of `dev`, which the
            // session owns for the engine's life; during capture the engine may bind staging
            // copies of the same shapes instead.
            unsafe { devc.encoder_call(&io) }.map(|_| ()).map_err(rt)
        });
        self.encoder = Some(ExactShapeReplay::new(
            be.clone(),
            spec,
            rng.clone(),
            None,
            f,
        )?);

        // flow: the whole loop, or one engine per solver step
        let flow_info = self.contract.flow;
        let ranges: Vec<std::ops::Range<usize>> = match g {
            Granularity::Chunk => std::iter::once(0..solver.n_steps).collect(),
            Granularity::Step => (0..solver.n_steps).map(|i| i..i + 1).collect(),
        };
        let step_clock = g == Granularity::Step;
        let catalog = if rule {
            Catalog::Static(flow_info.catalog)
        } else {
            staged_catalog(flow_info.catalog, |name, sig| {
                let l = sig.attended;
                (name == "cache")
                    .then(|| {
                        if step_clock {
                            carry.view("frame", l, &["step"]).map(|v| v.0)
                        } else {
                            region_shape(carry, &[("step", solver.n_steps), ("frame", l)]).ok()
                        }
                    })
                    .flatten()
            })
        };
        for range in ranges {
            let mut spec = ReplaySpec::from_callable(flow_info, 0);
            spec.granularity = g;
            spec.catalog = catalog.clone();
            if !rule {
                // the solver workspace and the conv cache (written in place)
                spec.writes = 2;
            }
            if step_clock {
                spec.name = std::borrow::Cow::Owned(format!("flow.step{}", range.start));
            }
            if !self.contract.capture_flow {
                spec.verdict = dcc_runtime::contract::Verdict::OutWidth;
            }
            let devc = dev.clone();
            let f: Callable = Box::new(move |call: &mut Call<'_>| {
                let io = FlowIo {
                    l_old: call.scalar(0)? as usize,
                    mu: packed(call, 0)?,
                    cond: packed(call, 1)?,
                    spk: packed(call, 2)?,
                    carry: if rule {
                        st.carry.with_ptr(call.input(3)?)
                    } else {
                        packed(call, 3)?
                    },
                    ws: st.workspace.with_ptr(call.write(0)?),
                    write_back: rule,
                    est_cnn: st.estimator_conv.with_ptr(call.input(4)?),
                    keep: keeps.carry,
                    solver,
                };
                // SAFETY: `enqueue_chunk` is the only caller of these engines: it binds mu,
                // cond and spk to the flow's input buffers ([frames, mel], [1, spk_dim]), the
                // carry to this session's estimator carry (the state's layout under the state
                // rule; the stock store's compact carry of the dims the call is keyed on, one
                // step's slice at the step clock), input 4 to its estimator conv cache and the
                // writes to its solver workspace and contexts (the state's layouts), all
                // buffers of `self.st`, a state of `dev`, owned by the session for the engines'
                // life; during capture the engine may bind staging copies of the same shapes
                // instead.
                unsafe { devc.flow_call(&io, range.clone()) }
                    .map(|_| ())
                    .map_err(rt)
            });
            self.flow.push(ExactShapeReplay::new(
                be.clone(),
                spec,
                rng.clone(),
                None,
                f,
            )?);
        }
        Ok(())
    }

    /// The prompt-priming pass (eager by construction; resets the session in place).
    pub fn prime(&mut self, tokens: &[u32], mel: &[f32], spk: &[f32]) -> Result<(), FlowError> {
        self.dev.setup_cache(&mut self.st, tokens, mel, spk)?;
        self.stats.eager_by_construction += 1;
        Ok(())
    }

    /// Queues one chunk's work (inputs uploaded first); the mel lands in
    /// [`DeviceFlow::mel_out`]. Returns the frames emitted.
    pub fn enqueue_chunk(
        &mut self,
        tokens: &[u32],
        spk: &[f32],
        last_chunk: bool,
    ) -> Result<usize, FlowError> {
        self.dev.set_inputs(tokens, spk, last_chunk)?;
        self.enqueue_uploaded(tokens.len(), last_chunk)
    }

    /// Queues one chunk's work over inputs already uploaded by [`DeviceFlow::set_inputs`]
    /// (`n_tokens` tokens). Returns the frames emitted.
    pub fn enqueue_uploaded(
        &mut self,
        n_tokens: usize,
        last_chunk: bool,
    ) -> Result<usize, FlowError> {
        let dev = self.dev.clone();
        let s = dev.config().encoder.up_stride;
        let frames = dev.call_frames(n_tokens, last_chunk);
        let tn = frames / s;
        let (new_tok, est_kept) = dev.extents_after(&self.st, frames);
        let admitted = !last_chunk
            && n_tokens == self.chunk_tokens
            && (self.contract.admit)("flow", frames) == Some(true)
            && (self.contract.admit)("encoder", frames) == Some(true);
        if self.encoder.is_none() || !admitted {
            // eager arms, or eager by construction (last chunk / outside the admission predicate)
            if self.encoder.is_some() {
                self.stats.eager_by_construction += 1;
            }
            // SAFETY: `encoder_io`/`flow_io` of `self.st`, a state `dev` created (the session
            // builds both together): the flow's input buffers and the state's own buffers,
            // with the capacities they were allocated with.
            let (f, nt) =
                unsafe { dev.encoder_call(&dev.encoder_io(&self.st, n_tokens, last_chunk)?) }?;
            let io = dev.flow_io(&self.st, f)?;
            // SAFETY: as above.
            let kept = unsafe { dev.flow_call(&io, 0..self.st.solver().n_steps) }?;
            debug_assert_eq!((f, nt, kept), (frames, new_tok, est_kept));
            dev.finish_call(&mut self.st, tn, nt, kept)?;
            return Ok(f);
        }
        let t_tok = self.st.conformer_tokens();
        let ext_up = t_tok * s;
        let l_old = self.st.estimator_extent();
        let rule = self.arm.state_rule();
        // encoder
        let tok_dims = [1, n_tokens];
        let tok_strides = [n_tokens, 1];
        // the conformer caches: the contract regions at their extents (state rule), or the
        // stock store's compact caches (the state's tensors, at these extents)
        let tensors = *self.st.tensors();
        let layout = |r: &RawTensor| (r.dims().to_vec(), r.strides().to_vec());
        let ((cdims, cstrides), (udims, ustrides)) = if rule {
            (
                region_view(self.contract.conformer, "token", t_tok)?,
                region_view(self.contract.upsample, "frame", ext_up)?,
            )
        } else {
            (layout(&tensors.conformer), layout(&tensors.upsample))
        };
        // the conv contexts: the contract regions (state rule) or the session's plain buffers,
        // pinned extents, at fixed addresses in both stores (aliased): the state's tensors
        let ctx = self.st.contexts();
        let ((pdims, pstrides), (xdims, xstrides), (edims, estrides)) = (
            layout(&tensors.pre_lookahead),
            layout(&tensors.up_layer),
            layout(&tensors.estimator_conv),
        );
        let enc_inputs = [
            TensorArg {
                ptr: dev.ids(),
                dims: &tok_dims,
                strides: &tok_strides,
                dtype: DType::I32,
            },
            TensorArg {
                ptr: self.st.conformer_carry(),
                dims: &cdims,
                strides: &cstrides,
                dtype: DType::F32,
            },
            TensorArg {
                ptr: self.st.upsample_carry(),
                dims: &udims,
                strides: &ustrides,
                dtype: DType::F32,
            },
            TensorArg {
                ptr: ctx.pre_cnn,
                dims: &pdims,
                strides: &pstrides,
                dtype: DType::F32,
            },
            TensorArg {
                ptr: ctx.up_cnn,
                dims: &xdims,
                strides: &xstrides,
                dtype: DType::F32,
            },
        ];
        // written regions with their extents: the contract regions (state rule) or whole
        // buffers of their own (stock)
        let region = |ptr: DevPtr, info: &RegionInfo| WriteArg {
            ptr,
            bytes: info.bytes,
        };
        let whole = |ptr| WriteArg::to_end_of_buffer(&**dev.backend(), ptr);
        let c = &self.contract;
        let writes_rule = [
            region(self.st.conformer_carry(), c.conformer),
            region(self.st.upsample_carry(), c.upsample),
            region(ctx.pre_cnn, c.pre_lookahead),
            region(ctx.up_cnn, c.up_layer),
        ];
        let writes_stock = if rule {
            Vec::new()
        } else {
            vec![
                whole(dev.conformer_workspace())?,
                whole(ctx.pre_cnn)?,
                whole(ctx.up_cnn)?,
            ]
        };
        let enc_writes: &[WriteArg] = if rule { &writes_rule } else { &writes_stock };
        let enc = self.encoder.as_mut().expect("replay arm");
        let o = enc.call(&Invocation {
            inputs: &enc_inputs,
            writes: enc_writes,
            scalars: &[t_tok as i64, ext_up as i64],
        })?;
        Self::count(&mut self.stats, enc, o, &enc_inputs);
        // flow: `mu` and `cond` as `[frames, mel]`; the carry as the contract region at its extent
        // (state rule: the whole step-major carry, also at the step clock) or the stock store's
        // compact carry (one step's slice at the step clock)
        let step_clock = self.flow.len() > 1;
        let (est_dims, est_strides) = if rule {
            region_view(self.contract.carry, "frame", l_old)?
        } else {
            // the compact carry `[step, ...]`, or one step's slice of it
            let all = tensors.carry.dims();
            let dims = if step_clock { &all[1..] } else { all }.to_vec();
            let strides = dcc_runtime::arena::packed_strides(&dims);
            (dims, strides)
        };
        let io_dims = [frames, dev.config().mel];
        let io_strides = [dev.config().mel, 1];
        let spk_dims = [1, dev.config().spk_dim];
        let spk_strides = [dev.config().spk_dim, 1];
        let ws_region = c
            .arena
            .region("solver_workspace")
            .ok_or_else(|| FlowError::Config("the contract has no `solver_workspace`".into()))?;
        let writes_rule = [
            region(self.st.solver_workspace(), ws_region),
            region(self.st.estimator_carry(), c.carry),
            region(ctx.est_cnn, c.estimator_conv),
        ];
        let writes_stock = if rule {
            Vec::new()
        } else {
            vec![whole(self.st.solver_workspace())?, whole(ctx.est_cnn)?]
        };
        for si in 0..self.flow.len() {
            let carry = if !rule && step_clock {
                self.st.estimator_carry_step(si)?
            } else {
                self.st.estimator_carry()
            };
            fn t<'a>(
                ptr: DevPtr,
                dims: &'a [usize],
                strides: &'a [usize],
                dtype: DType,
            ) -> TensorArg<'a> {
                TensorArg {
                    ptr,
                    dims,
                    strides,
                    dtype,
                }
            }
            let inputs = [
                t(dev.mu(), &io_dims, &io_strides, DType::F32),
                t(dev.cond(), &io_dims, &io_strides, DType::F32),
                t(dev.spk(), &spk_dims, &spk_strides, DType::F32),
                t(carry, &est_dims, &est_strides, DType::F32),
                t(ctx.est_cnn, &edims, &estrides, DType::F32),
            ];
            let writes: &[WriteArg] = if rule { &writes_rule } else { &writes_stock };
            let eng = &mut self.flow[si];
            let o = eng.call(&Invocation {
                inputs: &inputs,
                writes,
                scalars: &[l_old as i64],
            })?;
            Self::count(&mut self.stats, eng, o, &inputs);
        }
        dev.finish_call(&mut self.st, tn, new_tok, est_kept)?;
        Ok(frames)
    }

    fn count(stats: &mut SessionStats, e: &Engine, o: Outcome, inputs: &[TensorArg<'_>]) {
        if let Outcome::Replayed { class } = o {
            stats.graph_launches += 1;
            if let Some(dcc_runtime::replay::ClassStatus::Captured { nodes }) =
                e.classes().get(class as usize)
            {
                stats.graph_nodes += *nodes as u64;
            }
            if let Some(sig) = e.spec().catalog.get(class as usize) {
                stats.staging_copies += sig
                    .inputs
                    .iter()
                    .zip(inputs)
                    .filter(|(s, _)| !s.aliased)
                    .count() as u64;
            }
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
        Ok(self
            .dev
            .backend()
            .download(self.dev.mel_out(), mel * frames)?)
    }

    /// Eager fallbacks of all engines, by reason.
    pub fn fallbacks(&self) -> std::collections::BTreeMap<Fallback, u64> {
        let mut m = std::collections::BTreeMap::new();
        for r in self.reports() {
            for (k, v) in r.fallbacks {
                *m.entry(k).or_insert(0) += v;
            }
        }
        m
    }
}
