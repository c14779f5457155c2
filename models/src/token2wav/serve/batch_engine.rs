//! The batched `flow` call of a group of sessions, eager or through graphs.
//!
//! A graph of a batched call bakes its members' addresses (see [`BatchedFlow`]), so the
//! engines are per group: one [`ExactShapeReplay`] engine per member list (the sessions'
//! identities, in row order: a session's addresses are fixed for its life), whose catalog is the contract's `flow` catalog batched: each class
//! of the callable with `mu`, `cond` and `spk` stacked `[n, …]` (the batch's fixed input rows)
//! and the member's `cache` and `conv_cache` once per member, every input aliased (read in
//! place, never staged), keyed by the same scalars. So a graph is captured per (class, batch
//! size, members) and replays while the same sessions batch together; the engine's premises
//! (address stability of every written region, allocation identity of every buffer the graph
//! touches) guard it as they guard one session's graphs. An engine whose graph saw a buffer
//! freed (a member dropped) is discarded, so a later group at the same addresses captures
//! afresh, and so is every engine with a member not among a round's sessions (its graphs would
//! never replay again).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use dcc_runtime::arena::packed_strides;
use dcc_runtime::contract::{CallableInfo, DType, TensorSig, Verdict};
use dcc_runtime::ops;
use dcc_runtime::replay::{
    Call, Catalog, EngineReport, ExactShapeReplay, Fallback, Invocation, Outcome, OwnedSignature,
    OwnedTensorSig, ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;

use super::super::{BatchEncoderIo, BatchIo, BatchedFlow, EncoderMember, FlowError, Member};
use super::adapter::ContractView;
use super::engines::Callable;

/// What a group's replays did, summed over its engines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupReport {
    /// Engines built (one per member list seen) and discarded (a member's buffer freed, or a
    /// member no longer among the sessions served: [`super::Batcher::round`]).
    pub engines: u64,
    pub discarded: u64,
    pub calls: u64,
    pub replays: u64,
    pub classes_captured: u64,
    /// Eager calls by reason (the first call of a class is its `probation`).
    pub fallbacks: BTreeMap<Fallback, u64>,
}

/// The engines of batched calls (see the module docs).
pub struct GroupEngines {
    replay: Option<ContractView>,
    /// By the members' session identities, in row order.
    engines: HashMap<Vec<u64>, ExactShapeReplay<Callable>>,
    report: GroupReport,
    /// The batched encoder calls' engines and report, the same way
    /// ([`GroupEngines::encode`]).
    encoders: HashMap<Vec<u64>, ExactShapeReplay<Callable>>,
    encoder_report: GroupReport,
}

fn rt(e: FlowError) -> dcc_runtime::Error {
    match e {
        FlowError::Device(e) => e,
        e => dcc_runtime::Error::Invalid(e.to_string()),
    }
}

/// A tensor signature in `dtype` (the catalog's: the carry's is the contract point's),
/// aliased (read in place).
fn sig(name: &'static str, dims: Vec<usize>, strides: Vec<usize>, dtype: DType) -> OwnedTensorSig {
    OwnedTensorSig {
        name: Cow::Borrowed(name),
        dims: dims.into(),
        strides: strides.into(),
        dtype,
        aliased: true,
    }
}

/// `[n] ++ dims`, packed.
fn stacked(name: &'static str, n: usize, dims: &[usize], dtype: DType) -> OwnedTensorSig {
    let dims: Vec<usize> = std::iter::once(n).chain(dims.iter().copied()).collect();
    let strides = packed_strides(&dims);
    sig(name, dims, strides, dtype)
}

/// A callable's catalog batched over `n` members, named `callable`: per class, the inputs
/// `shared` builds from the class's inputs (looked up by name: the batch's stacked rows), then
/// each member's `per_member` inputs as the class declares them (aliased), the same class,
/// extent and scalars.
fn batched_catalog(
    info: &CallableInfo,
    callable: &str,
    n: usize,
    shared: impl Fn(&dyn Fn(&str) -> Option<&'static TensorSig>) -> Vec<OwnedTensorSig>,
    per_member: &[&str],
) -> Vec<OwnedSignature> {
    info.catalog
        .iter()
        .map(|s| {
            let input = |name: &str| s.inputs.iter().find(|t| t.name == name);
            let mut inputs = shared(&input);
            for _ in 0..n {
                for t in per_member.iter().filter_map(|name| input(name)) {
                    inputs.push(sig(t.name, t.dims.to_vec(), t.strides.to_vec(), t.dtype));
                }
            }
            OwnedSignature {
                callable: Cow::Owned(callable.to_string()),
                class: s.class,
                attended: s.attended,
                inputs: inputs.into(),
                scalars: s.scalars.into(),
            }
        })
        .collect()
}

impl GroupEngines {
    /// `replay`: the contract whose `flow` catalog the graphs are keyed on; `None`: every
    /// batched call eager.
    pub(super) fn new(replay: Option<ContractView>) -> GroupEngines {
        GroupEngines {
            replay,
            engines: HashMap::new(),
            report: GroupReport::default(),
            encoders: HashMap::new(),
            encoder_report: GroupReport::default(),
        }
    }

    /// Whether batched calls go through graphs.
    pub fn replays(&self) -> bool {
        self.replay.is_some()
    }

    /// What the batched flow calls' engines did so far (discarded engines included).
    pub fn report(&self) -> GroupReport {
        let mut r = self.report.clone();
        for e in self.engines.values() {
            add(&mut r, &e.report());
        }
        r
    }

    /// What the batched encoder calls' engines did so far (discarded engines included).
    pub fn encoder_report(&self) -> GroupReport {
        let mut r = self.encoder_report.clone();
        for e in self.encoders.values() {
            add(&mut r, &e.report());
        }
        r
    }

    /// Device bytes of the live engines' staging buffers and graphs.
    pub fn bytes(&self) -> usize {
        self.engines
            .values()
            .chain(self.encoders.values())
            .map(|e| {
                let (staging, graphs) = e.device_bytes();
                staging + graphs
            })
            .sum()
    }

    /// Drops the engines of groups with a member not in `live` (session identities: a session
    /// dropped, or not served any more): their graphs hold device memory and would never
    /// replay again.
    pub(super) fn retain_live(&mut self, live: &[u64]) {
        for (engines, report) in [
            (&mut self.engines, &mut self.report),
            (&mut self.encoders, &mut self.encoder_report),
        ] {
            let dead: Vec<Vec<u64>> = engines
                .keys()
                .filter(|k| k.iter().any(|p| !live.contains(p)))
                .cloned()
                .collect();
            for k in dead {
                if let Some(e) = engines.remove(&k) {
                    add(report, &e.report());
                    report.discarded += 1;
                }
            }
        }
    }

    /// The batched call over every solver step of `io`'s members; returns the estimator extent
    /// after retention.
    /// `ids` are the members' session identities, in row order.
    pub(super) fn call(
        &mut self,
        flow: &Arc<BatchedFlow>,
        io: &BatchIo<'_>,
        ids: &[u64],
    ) -> Result<usize, FlowError> {
        let Some(contract) = self.replay else {
            // SAFETY: the members are states of sessions of `flow`'s device (the batcher checks
            // the flow), borrowed by the caller for the call; their tensors lie in their arenas.
            return unsafe { flow.call(io, 0..io.solver.n_steps) };
        };
        let n = io.members.len();
        let key = ids.to_vec();
        if !self.engines.contains_key(&key) {
            let e = self.engine(flow, &contract, io)?;
            self.report.engines += 1;
            self.engines.insert(key.clone(), e);
        }
        // the invocation: the batch's input rows, then each member's carry (the contract region
        // at its extent, as one session's call is keyed) and conv contexts
        let inputs = flow.inputs(n, io.frames)?;
        let carry_view = contract
            .carry
            .view("frame", io.l_old, &[])
            .ok_or_else(|| FlowError::Config("region `carry` has no `frame` axis".into()))?;
        let mut args: Vec<TensorArg<'_>> = inputs
            .iter()
            .map(|t| TensorArg {
                ptr: t.ptr(),
                dims: t.dims(),
                strides: t.strides(),
                dtype: DType::F32,
            })
            .collect();
        for m in io.members {
            args.push(TensorArg {
                ptr: m.carry.ptr(),
                dims: &carry_view.0,
                strides: &carry_view.1,
                dtype: m.carry.dtype(),
            });
            args.push(TensorArg {
                ptr: m.est_cnn.ptr(),
                dims: m.est_cnn.dims(),
                strides: m.est_cnn.strides(),
                dtype: DType::F32,
            });
        }
        let mut writes: Vec<WriteArg> = flow
            .writes()
            .iter()
            .map(|&(ptr, bytes)| WriteArg { ptr, bytes })
            .collect();
        for m in io.members {
            for (ptr, bytes) in [
                (m.carry.ptr(), contract.carry.bytes),
                (m.est_cnn.ptr(), contract.estimator_conv.bytes),
            ] {
                writes.push(WriteArg { ptr, bytes });
            }
        }
        let inv = Invocation {
            inputs: &args,
            writes: &writes,
            scalars: &[io.l_old as i64],
        };
        let engine = self
            .engines
            .get_mut(&key)
            .ok_or_else(|| FlowError::Input("no engine".into()))?;
        let outcome = engine.call(&inv)?;
        if outcome == Outcome::Eager(Fallback::BufferFreed) {
            // a member's buffer was freed since capture: start afresh next time
            if let Some(e) = self.engines.remove(&key) {
                add(&mut self.report, &e.report());
                self.report.discarded += 1;
            }
        }
        Ok(ops::carry::kept(&io.keep, io.l_old + io.frames))
    }

    /// The engine of `io`'s members (see the module docs).
    fn engine(
        &self,
        flow: &Arc<BatchedFlow>,
        contract: &ContractView,
        io: &BatchIo<'_>,
    ) -> Result<ExactShapeReplay<Callable>, FlowError> {
        let n = io.members.len();
        let info = contract.flow;
        let catalog = batched_catalog(
            info,
            &format!("flow.batch{n}"),
            n,
            |t| {
                ["mu", "cond", "spk"]
                    .into_iter()
                    .filter_map(t)
                    .map(|t| stacked(t.name, n, t.dims, t.dtype))
                    .collect()
            },
            &["cache", "conv_cache"],
        );
        let mut spec = ReplaySpec::from_callable(info, 0);
        spec.name = Cow::Owned(format!("flow.batch{n}"));
        spec.catalog = Catalog::from(catalog);
        spec.writes = 2 + 2 * n;
        if !contract.capture_flow {
            spec.verdict = Verdict::OutWidth;
        }
        let templates: Vec<Member> = io.members.to_vec();
        let (keep, solver) = (io.keep, io.solver);
        let fl = flow.clone();
        let f: Callable = Box::new(move |call: &mut Call<'_>| {
            let frames = call.dims(0)?.get(1).copied().unwrap_or(0);
            let l_old = call.scalar(0)? as usize;
            let members = templates
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    Ok(Member {
                        carry: m.carry.with_ptr(call.input(3 + 2 * i)?),
                        est_cnn: m.est_cnn.with_ptr(call.input(4 + 2 * i)?),
                    })
                })
                .collect::<dcc_runtime::Result<Vec<_>>>()?;
            let io = BatchIo {
                l_old,
                frames,
                members: &members,
                keep,
                solver,
            };
            // SAFETY: the batcher is the only caller of this engine: it binds every member's
            // `cache` and `conv_cache` to the carry and contexts of a live session of the
            // batch's flow (the group this engine was built for: the same addresses), and the
            // batch's inputs to its own rows; the graph's premises (address stability,
            // allocation identity) are the engine's to check before any replay.
            unsafe { fl.call(&io, 0..solver.n_steps) }
                .map(|_| ())
                .map_err(rt)
        });
        let be = flow.device().backend().clone();
        Ok(ExactShapeReplay::new(
            be,
            spec,
            Arc::new(HostRng::new(0)),
            None,
            f,
        )?)
    }
}

impl GroupEngines {
    /// The batched encoder call of `io`'s members (the batch's staged token rows), eager or
    /// through the group's engine: its catalog is the contract's `encoder` catalog batched
    /// (each class with `tokens` stacked `[n, tokens]`, the batch's fixed rows, and each
    /// member's `cache`, `up_cache`, `pre_cache` and `up_ctx`, every input aliased), keyed by
    /// the same scalars (the two conformer extents). Returns `(frames, conformer extent on the
    /// token clock after retention)`. `ids` are the members' session identities, in row order.
    pub(super) fn encode(
        &mut self,
        flow: &Arc<BatchedFlow>,
        io: &BatchEncoderIo<'_>,
        ids: &[u64],
    ) -> Result<(usize, usize), FlowError> {
        let Some(contract) = self.replay else {
            // SAFETY: the members are states of sessions of `flow`'s device (the batcher checks
            // the flow), borrowed by the caller for the call; their tensors lie in their arenas.
            return unsafe { flow.encode(io) };
        };
        let e = &flow.device().config().encoder;
        let (n, t, s) = (io.members.len(), io.tokens, e.up_stride);
        let tn = t.saturating_sub(e.pre_lookahead);
        let key = ids.to_vec();
        if !self.encoders.contains_key(&key) {
            let engine = encoder_engine(flow, &contract, io)?;
            self.encoder_report.engines += 1;
            self.encoders.insert(key.clone(), engine);
        }
        let ext_up = io.t_tok * s;
        let views = [
            (contract.conformer, "token", io.t_tok),
            (contract.upsample, "frame", ext_up),
        ]
        .map(|(r, axis, extent)| {
            r.view(axis, extent, &[]).ok_or_else(|| {
                FlowError::Config(format!("a conformer cache region has no `{axis}` axis"))
            })
        });
        let [cache, up_cache] = views;
        let (cache, up_cache) = (cache?, up_cache?);
        let tok = flow.token_rows(n, t)?;
        let tok_dims = [n, t];
        let tok_strides = [t, 1];
        let mut args: Vec<TensorArg<'_>> = vec![TensorArg {
            ptr: tok,
            dims: &tok_dims,
            strides: &tok_strides,
            dtype: DType::I32,
        }];
        let mut writes: Vec<WriteArg> = Vec::with_capacity(4 * n);
        for m in io.members {
            for (r, (dims, strides)) in [
                (&m.conformer, (&cache.0[..], &cache.1[..])),
                (&m.upsample, (&up_cache.0[..], &up_cache.1[..])),
                (&m.pre_cnn, (m.pre_cnn.dims(), m.pre_cnn.strides())),
                (&m.up_cnn, (m.up_cnn.dims(), m.up_cnn.strides())),
            ] {
                args.push(TensorArg {
                    ptr: r.ptr(),
                    dims,
                    strides,
                    dtype: DType::F32,
                });
            }
            for (ptr, info) in [
                (m.conformer.ptr(), contract.conformer),
                (m.upsample.ptr(), contract.upsample),
                (m.pre_cnn.ptr(), contract.pre_lookahead),
                (m.up_cnn.ptr(), contract.up_layer),
            ] {
                writes.push(WriteArg {
                    ptr,
                    bytes: info.bytes,
                });
            }
        }
        let inv = Invocation {
            inputs: &args,
            writes: &writes,
            scalars: &[io.t_tok as i64, ext_up as i64],
        };
        let engine = self
            .encoders
            .get_mut(&key)
            .ok_or_else(|| FlowError::Input("no engine".into()))?;
        let outcome = engine.call(&inv)?;
        if outcome == Outcome::Eager(Fallback::BufferFreed)
            && let Some(e) = self.encoders.remove(&key)
        {
            add(&mut self.encoder_report, &e.report());
            self.encoder_report.discarded += 1;
        }
        Ok((tn * s, ops::carry::kept(&io.keeps.conformer, io.t_tok + tn)))
    }
}

/// The engine of batched encoder calls over `io`'s members (see [`GroupEngines::encode`]).
fn encoder_engine(
    flow: &Arc<BatchedFlow>,
    contract: &ContractView,
    io: &BatchEncoderIo<'_>,
) -> Result<ExactShapeReplay<Callable>, FlowError> {
    let n = io.members.len();
    let info = contract.encoder;
    let names = ["cache", "up_cache", "pre_cache", "up_ctx"];
    let catalog = batched_catalog(
        info,
        &format!("encoder.batch{n}"),
        n,
        |t| {
            t("tokens")
                .map(|t| {
                    let dims = [n, t.dims.last().copied().unwrap_or(0)];
                    sig(t.name, dims.to_vec(), packed_strides(&dims), t.dtype)
                })
                .into_iter()
                .collect()
        },
        &names,
    );
    let mut spec = ReplaySpec::from_callable(info, 0);
    spec.name = Cow::Owned(format!("encoder.batch{n}"));
    spec.catalog = Catalog::from(catalog);
    spec.writes = 4 * n;
    if !contract.capture_encoder {
        spec.verdict = Verdict::OutWidth;
    }
    let templates: Vec<EncoderMember> = io.members.to_vec();
    let keeps = io.keeps;
    let fl = flow.clone();
    let f: Callable = Box::new(move |call: &mut Call<'_>| {
        let tokens = call.dims(0)?.get(1).copied().unwrap_or(0);
        let t_tok = call.scalar(0)? as usize;
        let members = templates
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let at = |j: usize| call.input(1 + 4 * i + j);
                Ok(EncoderMember {
                    conformer: m.conformer.with_ptr(at(0)?),
                    upsample: m.upsample.with_ptr(at(1)?),
                    pre_cnn: m.pre_cnn.with_ptr(at(2)?),
                    up_cnn: m.up_cnn.with_ptr(at(3)?),
                })
            })
            .collect::<dcc_runtime::Result<Vec<_>>>()?;
        let io = BatchEncoderIo {
            t_tok,
            tokens,
            members: &members,
            keeps,
        };
        // SAFETY: the batcher is the only caller of this engine: it binds every member's
        // caches and contexts to those of a live session of the batch's flow (the group this
        // engine was built for: the same addresses), and the tokens to the batch's own rows;
        // the graph's premises (address stability, allocation identity) are the engine's to
        // check before any replay.
        unsafe { fl.encode(&io) }.map(|_| ()).map_err(rt)
    });
    let be = flow.device().backend().clone();
    Ok(ExactShapeReplay::new(
        be,
        spec,
        Arc::new(HostRng::new(0)),
        None,
        f,
    )?)
}

/// Adds engine report `e` to `r`.
fn add(r: &mut GroupReport, e: &EngineReport) {
    r.calls += e.calls;
    r.replays += e.replays;
    r.classes_captured += e.classes_captured as u64;
    for (k, v) in &e.fallbacks {
        *r.fallbacks.entry(*k).or_default() += v;
    }
}
