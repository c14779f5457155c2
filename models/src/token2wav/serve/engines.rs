//! The replay engines of a session: the contract's `encoder` and `flow` callables as closures
//! over [`DeviceFlow::encoder_call`] / [`DeviceFlow::flow_call`], each wrapped by an
//! [`ExactShapeReplay`] engine the session owns.
//!
//! A closure takes every address from the [`Call`], by name through the contract's typed I/O
//! structs, and every layout from the state it was built over (the state's tensors, whose
//! shapes do not change; the stock store's compact caches from the dims the call is keyed on).
//!
//! [`ExactShapeReplay`]: dcc_runtime::replay::ExactShapeReplay

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;

use dcc_runtime::DevPtr;
use dcc_runtime::arena::packed_strides;
use dcc_runtime::contract::{Granularity, Signature, Verdict};
use dcc_runtime::ops::RawTensor;
use dcc_runtime::replay::{Call, Catalog, OwnedSignature, ReplaySpec};
use dcc_runtime::session::EngineId;

use super::super::{DeviceFlow, DeviceState, EncoderIo, FlowError, FlowIo, KvRaw, region_shape};
use super::adapter::{ContractView, EncoderInputs, FlowInputs, FlowWrites};

/// A wrapped callable: what the session's engines run.
pub type Callable = Box<dyn Fn(&mut Call<'_>) -> dcc_runtime::Result<()> + Send>;

/// The runtime session a Token2Wav session runs on: its state and its engines.
pub(super) type Run = dcc_runtime::session::Session<DeviceState, Callable>;

/// The regions the stock store's encoder writes, by name: the conformer workspace (where it
/// leaves `[cache ‖ new]` of both conformer caches for `DeviceFlow::finish_call`) and the two
/// conv contexts, written in place. The state rule writes the contract's regions instead
/// ([`super::EncoderWrites`]).
pub(super) struct StockEncoderWrites<T> {
    pub conformer_workspace: T,
    pub pre_lookahead_cache: T,
    pub up_layer_cache: T,
}

impl<T> StockEncoderWrites<T> {
    /// The fields in the engine's positional order.
    pub fn into_array(self) -> [T; 3] {
        [
            self.conformer_workspace,
            self.pre_lookahead_cache,
            self.up_layer_cache,
        ]
    }
}

/// The regions the stock store's flow writes, by name: the solver workspace and the estimator
/// conv context, in place (the carry is materialized afterwards, by `finish_call`). The state
/// rule writes the contract's regions instead ([`FlowWrites`]).
pub(super) struct StockFlowWrites<T> {
    pub solver_workspace: T,
    pub estimator_conv_cache: T,
}

impl<T> StockFlowWrites<T> {
    /// The fields in the engine's positional order.
    pub fn into_array(self) -> [T; 2] {
        [self.solver_workspace, self.estimator_conv_cache]
    }

    /// Each field from its position (e.g. `|i| call.write(i)`); the first error stops.
    pub fn try_from_fn<E>(mut f: impl FnMut(usize) -> Result<T, E>) -> Result<Self, E> {
        Ok(StockFlowWrites {
            solver_workspace: f(0)?,
            estimator_conv_cache: f(1)?,
        })
    }
}

/// The engines of one session, in the order they were added to its [`Run`].
pub(super) struct Engines {
    pub encoder: EngineId,
    /// The whole solver loop (chunk clock), or one engine per solver step (step clock).
    pub flow: Vec<EngineId>,
}

fn rt(e: FlowError) -> dcc_runtime::Error {
    match e {
        FlowError::Device(e) => e,
        e => dcc_runtime::Error::Invalid(e.to_string()),
    }
}

/// A packed tensor of `dims` at `ptr` (a stock cache, or a caller tensor, as the call is keyed).
fn packed(ptr: DevPtr, dims: &[usize]) -> dcc_runtime::Result<RawTensor> {
    RawTensor::packed(ptr, dims).map_err(|e| rt(e.into()))
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
                    t.strides = packed_strides(&dims).into();
                    t.dims = dims.into();
                    t.aliased = false;
                }
            }
            o
        })
        .collect::<Vec<_>>()
        .into()
}

/// Builds the engines of a replay arm (`rule`: the state rule; `g`: the flow's clock) on `run`,
/// over the state it owns.
pub(super) fn build(
    run: &mut Run,
    dev: &Arc<DeviceFlow>,
    contract: &ContractView,
    rule: bool,
    g: Granularity,
) -> Result<Engines, FlowError> {
    let keeps = contract.keeps;
    let solver = run.state().solver();
    // the state's layouts; replay substitutes the addresses (staging copies of the same
    // shapes), and the stock store's caches are compact at the extents the call sees
    let st = *run.state().tensors();
    let (conformer, upsample) = (contract.conformer, contract.upsample);
    let carry = contract.carry;

    // encoder: scalars = the extents of `conformer_cache` (tokens) and `upsample_cache`
    // (frames), in read order (the pinned conv contexts add none)
    let enc_info = contract.encoder;
    let mut spec = ReplaySpec::from_callable(enc_info, 0);
    if !rule {
        let ext = |sig: &Signature, i: usize| sig.scalars.get(i).map(|&v| v as usize);
        spec.catalog = staged_catalog(enc_info.catalog, |name, sig| match name {
            "cache" => ext(sig, 0).and_then(|t| region_shape(conformer, &[("token", t)]).ok()),
            "up_cache" => ext(sig, 1).and_then(|f| region_shape(upsample, &[("frame", f)]).ok()),
            _ => None,
        });
        // the stock store's writes (`StockEncoderWrites`)
        spec.writes = 3;
    }
    if !contract.capture_encoder {
        spec.verdict = Verdict::OutWidth;
    }
    let devc = dev.clone();
    let f: Callable = Box::new(move |call: &mut Call<'_>| {
        let at = EncoderInputs::try_from_fn(|i| call.input(i))?;
        let dims = EncoderInputs::try_from_fn(|i| call.dims(i))?;
        let n_tokens = dims.tokens.iter().product::<usize>();
        let io = EncoderIo {
            ids: RawTensor::packed(at.tokens, &[n_tokens]).map_err(|e| rt(e.into()))?,
            last_chunk: false,
            t_tok: call.scalar(0)? as usize,
            carry: if rule {
                st.conformer.with_ptr(at.cache)
            } else {
                packed(at.cache, dims.cache)?
            },
            up_carry: if rule {
                st.upsample.with_ptr(at.up_cache)
            } else {
                packed(at.up_cache, dims.up_cache)?
            },
            write_back: rule,
            pre_cnn: st.pre_lookahead.with_ptr(at.pre_cache),
            up_cnn: st.up_layer.with_ptr(at.up_ctx),
            keeps,
        };
        // SAFETY: the session's `enqueue_uploaded` is the only caller of this engine: it binds
        // `tokens` to the flow's id buffer ([1, n_tokens]), `cache`, `up_cache`, `pre_cache`,
        // `up_ctx` and the writes to this session's conformer caches (the state's layouts under
        // the state rule; the stock store's compact caches, of the dims the call is keyed on)
        // and conv contexts (the state's layouts), all buffers of the state the session owns
        // (a state of `dev`), which outlives the engine (the runtime session drops its engines
        // first); during capture the engine may bind staging copies of the same shapes instead.
        unsafe { devc.encoder_call(&io) }.map(|_| ()).map_err(rt)
    });
    let encoder = run.add_engine(spec, None, f)?;

    // flow: the whole loop, or one engine per solver step
    let flow_info = contract.flow;
    let ranges: Vec<Range<usize>> = match g {
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
    let mut flow = Vec::with_capacity(ranges.len());
    for range in ranges {
        let mut spec = ReplaySpec::from_callable(flow_info, 0);
        spec.granularity = g;
        spec.catalog = catalog.clone();
        if !rule {
            // the stock store's writes (`StockFlowWrites`)
            spec.writes = 2;
        }
        if step_clock {
            spec.name = Cow::Owned(format!("flow.step{}", range.start));
        }
        if !contract.capture_flow {
            spec.verdict = Verdict::OutWidth;
        }
        let devc = dev.clone();
        let f: Callable = Box::new(move |call: &mut Call<'_>| {
            let at = FlowInputs::try_from_fn(|i| call.input(i))?;
            let dims = FlowInputs::try_from_fn(|i| call.dims(i))?;
            let ws = if rule {
                FlowWrites::try_from_fn(|i| call.write(i))?.solver_workspace
            } else {
                StockFlowWrites::try_from_fn(|i| call.write(i))?.solver_workspace
            };
            let io = FlowIo {
                l_old: call.scalar(0)? as usize,
                mu: packed(at.mu, dims.mu)?,
                cond: packed(at.cond, dims.cond)?,
                spk: packed(at.spk, dims.spk)?,
                carry: if rule {
                    st.carry.with_ptr(at.cache)
                } else {
                    KvRaw::packed(at.cache, dims.cache, st.carry.dtype()).map_err(rt)?
                },
                ws: st.workspace.with_ptr(ws),
                write_back: rule,
                est_cnn: st.estimator_conv.with_ptr(at.conv_cache),
                keep: keeps.carry,
                solver,
            };
            // SAFETY: the session's `enqueue_uploaded` is the only caller of these engines: it
            // binds `mu`, `cond` and `spk` to the flow's input buffers ([frames, mel],
            // [1, spk_dim]), `cache` to this session's estimator carry (the state's layout
            // under the state rule; the stock store's compact carry of the dims the call is
            // keyed on, one step's slice at the step clock), `conv_cache` to its estimator conv
            // cache and the writes to its solver workspace and contexts (the state's layouts),
            // all buffers of the state the session owns (a state of `dev`), which outlives the
            // engines (the runtime session drops its engines first); during capture the engine
            // may bind staging copies of the same shapes instead.
            unsafe { devc.flow_call(&io, range.clone()) }
                .map(|_| ())
                .map_err(rt)
        });
        flow.push(run.add_engine(spec, None, f)?);
    }
    Ok(Engines { encoder, flow })
}
