//! Serving many sessions with exact cross-session batching: each round, every session brings
//! one chunk; sessions of one catalog class are grouped into the contract's batch sizes (the
//! fewest calls, then the most even: [`crate::token2wav::BatchSizes::split`]), and each
//! group's flow runs as one batched call ([`BatchedFlow`]); a session that cannot join a group
//! runs alone, as [`Session::chunk`] would, counted by reason
//! ([`NotBatchable`]). Every session's mel equals the same session's alone on the same flow,
//! bit for bit (see [`crate::token2wav::BatchedFlow`] for why).
//!
//! A group's members stage their inputs (token ids, speaker) into their rows of the batch and
//! run their `encoder` calls as one batched call ([`BatchedFlow::encode`]; counted in
//! [`BatchStats::encoder_batches`]), which leaves every member's `mu` in its row; then one
//! batched flow call; both through the group's engines on a replay arm (graphs per (class,
//! batch size, members), [`super::batch_engine`]); then each member's
//! extents advance and its mel is read from its row. A class fixes the encoder's host values
//! too (the call's tokens, the conformer extent, what its caches keep), so a group's encoders
//! always batch. A session's refusal (bad input, a failed or unprimed session) refuses that
//! session only; a failure once its work has begun fails it (and, for a batched call, every
//! member of the group), never the others of the round.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use dcc_runtime::backend::Marker;

use super::super::{
    BatchEncoderIo, BatchIo, BatchedFlow, DeviceFlow, EncoderMember, FlowError, Member,
};
use super::adapter::ContractView;
use super::batch_engine::GroupEngines;
use super::session::Session;

/// Why a session's chunk ran alone instead of in a batch.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NotBatchable {
    /// No other session of the round was in its catalog class (another estimator or conformer
    /// extent, solver or retention).
    ClassMismatch,
    /// Its turn was reset (primed) since its last chunk, and no other session of the round was
    /// in the class that leaves it in.
    Reset,
    /// Its class had other sessions, but their count split into the batch sizes left it over.
    Remainder,
    /// A last chunk (the vendor's `last_chunk` call: eager by construction).
    LastChunk,
    /// A call outside the contract's admission (another width than a chunk's).
    NotAdmitted,
    /// Its arm keeps the stock store (its carry moves after every call).
    Stock,
    /// Its session runs on another flow than the batch's.
    OtherFlow,
}

impl NotBatchable {
    /// Every reason, in order.
    pub const ALL: [NotBatchable; 7] = [
        NotBatchable::ClassMismatch,
        NotBatchable::Reset,
        NotBatchable::Remainder,
        NotBatchable::LastChunk,
        NotBatchable::NotAdmitted,
        NotBatchable::Stock,
        NotBatchable::OtherFlow,
    ];

    /// The reason's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            NotBatchable::ClassMismatch => "class_mismatch",
            NotBatchable::Reset => "reset",
            NotBatchable::Remainder => "remainder",
            NotBatchable::LastChunk => "last_chunk",
            NotBatchable::NotAdmitted => "not_admitted",
            NotBatchable::Stock => "stock",
            NotBatchable::OtherFlow => "other_flow",
        }
    }
}

impl fmt::Display for NotBatchable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One session's chunk in a round.
#[derive(Copy, Clone, Debug)]
pub struct Request<'a> {
    pub tokens: &'a [u32],
    pub spk: &'a [f32],
    pub last_chunk: bool,
}

/// What a [`Batcher`] did so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Batched calls by member count.
    pub batches: BTreeMap<usize, u64>,
    /// Chunks run in a batched call.
    pub batched_chunks: u64,
    /// Chunks run alone, by reason.
    pub alone: BTreeMap<NotBatchable, u64>,
    /// Batched encoder calls by member count: a group's members run their encoders as one
    /// call ([`BatchedFlow::encode`]) before its batched flow call.
    pub encoder_batches: BTreeMap<usize, u64>,
}

/// Where the batched groups' wall time went, summed over the groups run so far: the host's
/// phases of [`Batcher::round`]'s group (each from its start to its end on the host) and the
/// device's time between stream markers around the two batched calls. A host phase much longer
/// than its call's device time is host work the device waited for; a call whose host phase is
/// long although its launch is asynchronous waited on the device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupPhases {
    /// Groups timed.
    pub groups: u64,
    /// Host: the members' inputs staged into their rows (uploads).
    pub stage_ms: f64,
    /// Host: the batched encoder call, from its start until it returned.
    pub encode_host_ms: f64,
    /// Device: from the marker before the encoder call to the one after it.
    pub encode_device_ms: f64,
    /// Host: after the encoder call, the members' faults taken and their rows closed up.
    pub between_ms: f64,
    /// Host: the batched flow call, from reading its members until it returned.
    pub flow_host_ms: f64,
    /// Device: from the marker before the flow call to the one after it.
    pub flow_device_ms: f64,
    /// Host: every member's extents advanced and its mel downloaded (waits for the device).
    pub finish_ms: f64,
}

impl GroupPhases {
    /// Each phase's sum minus `before`'s (the phases of the groups run since `before`).
    pub fn since(&self, before: &GroupPhases) -> GroupPhases {
        self.zip(before, self.groups - before.groups, |a, b| a - b)
    }

    /// Each phase per group: its sum over [`GroupPhases::groups`] (`groups` kept as it is;
    /// zero groups leave the sums, which are then zero too).
    pub fn mean(&self) -> GroupPhases {
        let n = self.groups.max(1) as f64;
        self.zip(self, self.groups, |a, _| a / n)
    }

    /// `f` over each phase of `self` and `o`, with `groups`.
    fn zip(&self, o: &GroupPhases, groups: u64, f: impl Fn(f64, f64) -> f64) -> GroupPhases {
        GroupPhases {
            groups,
            stage_ms: f(self.stage_ms, o.stage_ms),
            encode_host_ms: f(self.encode_host_ms, o.encode_host_ms),
            encode_device_ms: f(self.encode_device_ms, o.encode_device_ms),
            between_ms: f(self.between_ms, o.between_ms),
            flow_host_ms: f(self.flow_host_ms, o.flow_host_ms),
            flow_device_ms: f(self.flow_device_ms, o.flow_device_ms),
            finish_ms: f(self.finish_ms, o.finish_ms),
        }
    }
}

/// A catalog class of the flow as far as a batch is concerned: what fixes a call's host values
/// (the estimator extent, the conformer extent the encoder left, the solver, the retention of
/// every cache, the call's tokens): the members of a group run one batched encoder call and
/// one batched flow call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ClassKey {
    l_old: usize,
    t_tok: usize,
    steps: usize,
    cfg_rate: u32,
    temperature: u32,
    keep: (usize, usize),
    /// What the conformer and upsample caches keep (their batched encoder call's retention).
    encoder_keeps: [(usize, usize); 2],
    /// Tokens of the call, lookahead included (the rows the batched encoder stacks).
    tokens: usize,
}

/// Runs rounds of chunks over many sessions of one flow, batching (see the module docs).
pub struct Batcher {
    flow: Arc<BatchedFlow>,
    engines: GroupEngines,
    stats: BatchStats,
    phases: GroupPhases,
    /// Per session of the last round: the wall time of the call that produced its chunk (its
    /// group's batched call, its own chunk when alone; zero when refused).
    call_times: Vec<std::time::Duration>,
}

impl Batcher {
    /// Batches over `flow`'s buffers; `replay`: batched calls through graphs captured per
    /// (class, batch size, members), keyed on that contract's `flow` catalog; `None`: eager.
    pub fn new(flow: BatchedFlow, replay: Option<&ContractView>) -> Batcher {
        Batcher {
            engines: GroupEngines::new(replay.copied()),
            flow: Arc::new(flow),
            stats: BatchStats::default(),
            phases: GroupPhases::default(),
            call_times: Vec::new(),
        }
    }

    /// Per session of the last [`Batcher::round`] (in its order): the wall time of the call
    /// that produced the session's chunk, from its inputs' upload to its mel on the host; a
    /// batched call's time is each of its members'. The latency a session sees, as a
    /// time-multiplexed session's is its own call's.
    pub fn call_times(&self) -> &[std::time::Duration] {
        &self.call_times
    }

    pub fn flow(&self) -> &BatchedFlow {
        &self.flow
    }

    pub fn stats(&self) -> &BatchStats {
        &self.stats
    }

    /// Where the batched groups' time went so far.
    pub fn phases(&self) -> &GroupPhases {
        &self.phases
    }

    /// The group engines' replay counters (graphs captured and replayed, eager fallbacks).
    pub fn engines(&self) -> &GroupEngines {
        &self.engines
    }

    /// Device bytes the batch holds per process: its buffers and its captured graphs.
    pub fn bytes(&self) -> usize {
        self.flow.bytes() + self.engines.bytes()
    }

    /// One chunk per session (`reqs[i]` is `sessions[i]`'s): each session's mel `[mel, frames]`,
    /// or why its chunk was refused or failed. The batch's graphs of groups with a member not
    /// among `sessions` are dropped first.
    pub fn round(
        &mut self,
        sessions: &mut [Session],
        reqs: &[Request<'_>],
    ) -> Vec<Result<Vec<f32>, FlowError>> {
        let mut out: Vec<Option<Result<Vec<f32>, FlowError>>> = vec![None; sessions.len()];
        self.call_times = vec![std::time::Duration::ZERO; sessions.len()];
        if reqs.len() != sessions.len() {
            let e = FlowError::Input(format!(
                "{} requests for {} sessions",
                reqs.len(),
                sessions.len()
            ));
            return vec![Err(e); sessions.len()];
        }
        let live: Vec<u64> = sessions.iter().map(|s| s.id()).collect();
        self.engines.retain_live(&live);
        let mut classes: BTreeMap<ClassKey, Vec<usize>> = BTreeMap::new();
        let mut alone: Vec<(usize, NotBatchable)> = Vec::new();
        for (i, (s, r)) in sessions.iter().zip(reqs).enumerate() {
            match self.class_of(s, r) {
                Ok(Ok(k)) => classes.entry(k).or_default().push(i),
                Ok(Err(why)) => alone.push((i, why)),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        for members in classes.values() {
            let mut rest = &members[..];
            for size in self.flow.sizes().split(members.len()) {
                let (group, tail) = rest.split_at(size);
                rest = tail;
                if let [i] = group {
                    let why = if members.len() > 1 {
                        NotBatchable::Remainder
                    } else if sessions[*i].chunks_since_prime() == 0 {
                        NotBatchable::Reset
                    } else {
                        NotBatchable::ClassMismatch
                    };
                    alone.push((*i, why));
                } else {
                    self.group(sessions, reqs, group, &mut out);
                }
            }
        }
        alone.sort_unstable();
        for (i, why) in alone {
            let r = &reqs[i];
            let t = std::time::Instant::now();
            out[i] = Some(sessions[i].chunk(r.tokens, r.spk, r.last_chunk));
            self.call_times[i] = t.elapsed();
            *self.stats.alone.entry(why).or_default() += 1;
        }
        out.into_iter()
            .map(|r| r.unwrap_or_else(|| Err(FlowError::Input("no result".into()))))
            .collect()
    }

    /// Checks `s`'s chunk (an error: refused, nothing run) and finds its class, or why it runs
    /// alone.
    fn class_of(
        &self,
        s: &Session,
        r: &Request<'_>,
    ) -> Result<Result<ClassKey, NotBatchable>, FlowError> {
        let dev: &DeviceFlow = &s.dev;
        s.usable()?;
        dev.check_inputs(r.tokens, r.spk, r.last_chunk)?;
        s.check_width(r.tokens.len(), r.last_chunk)?;
        dev.check_call(s.state(), r.tokens.len(), r.last_chunk)?;
        let frames = dev.call_frames(r.tokens.len(), r.last_chunk);
        let c = &s.contract;
        Ok(if !std::sync::Arc::ptr_eq(&s.dev, self.flow.device()) {
            Err(NotBatchable::OtherFlow)
        } else if !s.arm.state_rule() {
            Err(NotBatchable::Stock)
        } else if r.last_chunk {
            Err(NotBatchable::LastChunk)
        } else if r.tokens.len() != c.call_tokens()
            || (c.admit)("flow", frames) != Some(true)
            || (c.admit)("encoder", frames) != Some(true)
            || frames > self.flow.frames()
        {
            Err(NotBatchable::NotAdmitted)
        } else {
            let st = s.state();
            let (sv, keeps) = (st.solver(), st.keeps());
            let (keep, ek) = (keeps.carry, [keeps.conformer, keeps.upsample]);
            Ok(ClassKey {
                l_old: st.estimator_extent(),
                t_tok: st.conformer_tokens(),
                steps: sv.n_steps,
                cfg_rate: sv.cfg_rate.to_bits(),
                temperature: sv.temperature.to_bits(),
                keep: (keep.head, keep.tail),
                encoder_keeps: ek.map(|k| (k.head, k.tail)),
                tokens: r.tokens.len(),
            })
        })
    }

    /// One group's chunks: the members' inputs staged into their rows, one batched encoder
    /// call, one batched flow call, their extents and mels (see the module docs).
    fn group(
        &mut self,
        sessions: &mut [Session],
        reqs: &[Request<'_>],
        group: &[usize],
        out: &mut [Option<Result<Vec<f32>, FlowError>>],
    ) {
        let t = Instant::now();
        let mut rows: Vec<usize> = Vec::with_capacity(group.len());
        for &i in group {
            let r = &reqs[i];
            let staged = self.flow.stage_inputs(rows.len(), r.tokens, r.spk);
            match sessions[i].settle(staged) {
                Ok(()) => rows.push(i),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        self.phases.stage_ms += ms(t);
        let (frames, encode_marks) = self.encode(sessions, reqs, &mut rows, out);
        let flow_marks = frames.and_then(|frames| self.flow_call(sessions, &rows, frames, out));
        let took = t.elapsed();
        for &i in group {
            self.call_times[i] = took;
        }
        self.phases.groups += 1;
        // after the members' downloads, so the markers' events have completed
        let be = self.flow.device().backend().clone();
        let device = [encode_marks, flow_marks].map(|m| {
            m.and_then(|(a, b)| be.elapsed_ms(&a, &b).ok())
                .unwrap_or(0.0)
        });
        self.phases.encode_device_ms += device[0];
        self.phases.flow_device_ms += device[1];
    }

    /// A stream marker for [`GroupPhases`]: timing only, so a marker the backend cannot record
    /// leaves its phase's device time out (0) and fails nothing.
    fn marker(&self) -> Option<Marker> {
        self.flow.device().backend().marker().ok()
    }

    /// The batched encoder call of the staged `rows`; a member that fails after it (or every
    /// member, when it fails) leaves `rows`, the rows behind it closing up. Returns the frames
    /// the flow presents, unless no member is left, and the markers around the call.
    fn encode(
        &mut self,
        sessions: &mut [Session],
        reqs: &[Request<'_>],
        rows: &mut Vec<usize>,
        out: &mut [Option<Result<Vec<f32>, FlowError>>],
    ) -> (Option<usize>, Marks) {
        let Some(&first) = rows.first() else {
            return (None, None);
        };
        let members: Vec<EncoderMember> = rows
            .iter()
            .map(|&i| EncoderMember::of(sessions[i].state()))
            .collect();
        let st = sessions[first].state();
        let io = BatchEncoderIo {
            t_tok: st.conformer_tokens(),
            tokens: reqs[first].tokens.len(),
            members: &members,
            keeps: st.keeps(),
        };
        let ids: Vec<u64> = rows.iter().map(|&i| sessions[i].id()).collect();
        let (t0, m0) = (Instant::now(), self.marker());
        let encoded = self.engines.encode(&self.flow, &io, &ids);
        let marks = m0.zip(self.marker());
        self.phases.encode_host_ms += ms(t0);
        let t1 = Instant::now();
        *self.stats.encoder_batches.entry(rows.len()).or_default() += 1;
        let frames = match encoded {
            Ok((frames, _)) => frames,
            Err(e) => {
                for &i in rows.iter() {
                    out[i] = Some(sessions[i].settle(Err(e.clone())));
                }
                rows.clear();
                return (None, marks);
            }
        };
        let mut left = Vec::with_capacity(rows.len());
        for (row, &i) in rows.iter().enumerate() {
            let r = sessions[i].take_fault().and_then(|()| {
                if left.len() == row {
                    Ok(())
                } else {
                    self.flow.move_row(row, left.len(), frames)
                }
            });
            match sessions[i].settle(r) {
                Ok(()) => left.push(i),
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        *rows = left;
        self.phases.between_ms += ms(t1);
        ((!rows.is_empty()).then_some(frames), marks)
    }

    /// The batched flow call of `rows` (encoded, their flow inputs in rows `0..`), then each
    /// member's extents and mel. Returns the markers around the call.
    fn flow_call(
        &mut self,
        sessions: &mut [Session],
        rows: &[usize],
        frames: usize,
        out: &mut [Option<Result<Vec<f32>, FlowError>>],
    ) -> Marks {
        let t0 = Instant::now();
        let members: Vec<Member> = rows
            .iter()
            .map(|&i| Member::of(sessions[i].state()))
            .collect();
        let st = sessions[rows[0]].state();
        let io = BatchIo {
            l_old: st.estimator_extent(),
            frames,
            members: &members,
            keep: st.keeps().carry,
            solver: st.solver(),
        };
        let ids: Vec<u64> = rows.iter().map(|&i| sessions[i].id()).collect();
        let m0 = self.marker();
        let r = self.engines.call(&self.flow, &io, &ids);
        let marks = m0.zip(self.marker());
        self.phases.flow_host_ms += ms(t0);
        let t1 = Instant::now();
        *self.stats.batches.entry(rows.len()).or_default() += 1;
        self.stats.batched_chunks += rows.len() as u64;
        let mel = self.flow.device().config().mel;
        for (row, &i) in rows.iter().enumerate() {
            let s = &mut sessions[i];
            let done = r.clone().and_then(|kept| {
                s.finish_batched(frames, kept)?;
                let at = self.flow.mel_out(row, frames)?;
                Ok(self.flow.device().backend().download(at, mel * frames)?)
            });
            out[i] = Some(s.settle(done));
        }
        self.phases.finish_ms += ms(t1);
        marks
    }
}

/// Stream markers before and after a batched call (`None` where one could not be recorded).
type Marks = Option<(Marker, Marker)>;

/// Milliseconds since `t`.
fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

impl Session {
    /// A batched chunk's end, after the batched encoder and flow calls: the extents advance
    /// (the flow kept `est_kept` frames). A failure fails the session.
    pub(super) fn finish_batched(
        &mut self,
        frames: usize,
        est_kept: usize,
    ) -> Result<(), FlowError> {
        let dev = self.dev.clone();
        let st = self.run.state_mut();
        let tn = frames / dev.config().encoder.up_stride;
        let (new_tok, _) = dev.extents_after(st, frames);
        dev.finish_call(st, tn, new_tok, est_kept)?;
        self.since_prime += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::GroupPhases;

    fn phases(groups: u64, base: f64) -> GroupPhases {
        GroupPhases {
            groups,
            stage_ms: base,
            encode_host_ms: base + 1.0,
            encode_device_ms: base + 2.0,
            between_ms: base + 3.0,
            flow_host_ms: base + 4.0,
            flow_device_ms: base + 5.0,
            finish_ms: base + 6.0,
        }
    }

    /// `since` subtracts every phase and the group count; `mean` divides every phase by the
    /// groups, and leaves a zero-group record as it is.
    #[test]
    fn since_and_mean_cover_every_phase() {
        // every phase grew by 16 ms over 4 groups
        let d = phases(6, 20.0).since(&phases(2, 4.0));
        let grown = GroupPhases {
            groups: 4,
            stage_ms: 16.0,
            encode_host_ms: 16.0,
            encode_device_ms: 16.0,
            between_ms: 16.0,
            flow_host_ms: 16.0,
            flow_device_ms: 16.0,
            finish_ms: 16.0,
        };
        assert_eq!(d, grown);
        let m = phases(4, 16.0).mean();
        assert_eq!(m.groups, 4);
        assert_eq!(
            [m.stage_ms, m.encode_host_ms, m.finish_ms],
            [4.0, 17.0 / 4.0, 22.0 / 4.0]
        );
        assert_eq!(GroupPhases::default().mean(), GroupPhases::default());
    }
}
