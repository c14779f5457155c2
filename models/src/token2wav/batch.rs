//! Exact cross-session batching of the `flow` callable: `n` sessions of one catalog class run
//! their solver loop as one call ([`BatchedFlow::call`]), every session's mel byte-identical to
//! the same session run alone on the same flow.
//!
//! **Why it is exact.** A class fixes everything a call's host values depend on (the estimator
//! extent, so the noise offset and the attended frames; the frames; the solver's grid), so the
//! sessions of one class differ only in their rows. The solver stacks them ([`super::solver`])
//! and every launch but the copies of each session's own state covers all rows; a row's bits
//! are the same whatever rows share a launch when every kernel is batch-invariant. All op
//! families are but the backend GEMM (cuBLAS picks kernels and split-k by the row count), so a
//! batched flow exists only over a flow on a batch-invariant path
//! ([`GemmPath::batch_invariant`]: `Invariant`, `InvariantTf32x3`), and "alone" means alone on
//! that path.
//!
//! [`GemmPath::batch_invariant`]: dcc_runtime::ops::GemmPath::batch_invariant
//!
//! **Per-row addressing.** Each session's per-session state stays in its own arena, at the
//! addresses it has for its whole life; nothing is moved or gathered through a table. What a
//! call reads and writes of a session's state is reached by launches of its own that take its
//! addresses as arguments: the history copy into the batched workspace and the carry
//! write-back (the carry, hundreds of MB per session at full size, is never copied whole; at the
//! half point's steady state the attention reads most of the history from the carries
//! themselves, every member's address one argument of its launch, and the copy stages only
//! what the write-back moves: `solver::staged_history`), and
//! one gather and one scatter of its estimator conv contexts (a few MB) into and out of the
//! batch's context buffer, so the conv launches see one evenly strided `[n·cfg, …]` batch. A
//! graph of a batch therefore bakes its members' addresses: it is captured per (class, batch
//! size, members) and replays while the same sessions batch together, as they do in steady
//! state. Everything call-lifetime is per process and sized for the largest batch: the
//! activations, the solver workspace (`n·cfg` rows instead of `cfg`), the context buffer, the
//! inputs `mu`, `cond`, `spk` and the output mel, one row per session.

use std::ops::Range;
use std::sync::Arc;

use dcc_runtime::DevPtr;
use dcc_runtime::arena::packed_strides;
use dcc_runtime::backend::{AllocKind, DeviceBuffer};
use dcc_runtime::contract::{ArenaLayout, DType, Keep};
use dcc_runtime::ops::{self, RawTensor, Tensor};

use super::dit::{CFG_BATCH, CONV_K};
use super::flow::{DeviceFlow, SolverParams};
use super::io::FlowIo;
use super::solver::Solve;
use super::state::{KvRaw, axis_extent};
use super::work::{Caps, Sizing, Work};
use super::{DeviceState, FlowError};

/// The batch sizes a batched flow serves, checked in one place: non-empty, strictly
/// increasing, starting at 1 (so every session count splits into them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchSizes(Vec<usize>);

impl BatchSizes {
    pub fn new(sizes: &[usize]) -> Result<BatchSizes, FlowError> {
        if sizes.first() != Some(&1) || sizes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(FlowError::Config(format!(
                "batch sizes {sizes:?}: they must start at 1 and increase strictly"
            )));
        }
        Ok(BatchSizes(sizes.to_vec()))
    }

    /// The sizes, increasing.
    pub fn sizes(&self) -> &[usize] {
        &self.0
    }

    /// The largest size.
    pub fn max(&self) -> usize {
        self.0[self.0.len() - 1]
    }

    /// `n` sessions split into sizes, largest first: the fewest calls, then the most even
    /// ones (`[8, 4, 1]` for 13 of `[1, 2, 4, 8]`; 250 of the full contract's sizes as
    /// `2 × 32 + 6 × 31`, where the powers of two to 32 take 10 calls, `7 × 32 + 16 + 8 + 2`).
    ///
    /// Why the fewest: a batched call's time grows far slower than its members (a call of 32
    /// half sessions takes about 7 of one alone), so a round of `n` sessions costs about its
    /// call count times a fixed part plus `n` times a per-member part; once the count is
    /// fixed, the most even split keeps the longest call (the round's latency) shortest.
    ///
    /// How: `calls[m]`, the fewest calls for `m` sessions, by dynamic programming over the
    /// sizes (1 is one of them, so every `m` splits); then, call by call, the smallest size at
    /// least the even share (`⌈rest / calls left⌉`) whose remainder still splits into one call
    /// fewer (the largest part of a fewest split qualifies, so one always does).
    pub fn split(&self, n: usize) -> Vec<usize> {
        let mut calls = vec![0usize; n + 1];
        for m in 1..=n {
            calls[m] = self
                .0
                .iter()
                .take_while(|&&b| b <= m)
                .map(|&b| calls[m - b].saturating_add(1))
                .min()
                .unwrap_or(usize::MAX);
        }
        let mut out = Vec::with_capacity(calls[n]);
        let mut rest = n;
        while rest > 0 {
            let left = calls[rest];
            let share = rest.div_ceil(left);
            let b = self
                .0
                .iter()
                .copied()
                .find(|&b| b >= share && b <= rest && calls[rest - b] + 1 == left)
                .expect("the largest part of a fewest split is at least the even share");
            out.push(b);
            rest -= b;
        }
        out.sort_unstable_by(|a, b| b.cmp(a));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::BatchSizes;

    /// The fewest calls for `n` of `sizes`, by trying every count of the largest size first
    /// (a second way to the same number).
    fn fewest(sizes: &[usize], n: usize) -> usize {
        match sizes.split_last() {
            None => usize::MAX,
            Some((_, [])) => n,
            Some((&b, rest)) => (0..=n / b)
                .map(|k| fewest(rest, n - k * b).saturating_add(k))
                .min()
                .unwrap(),
        }
    }

    #[test]
    fn a_split_is_the_fewest_calls_of_declared_sizes_largest_first() {
        let sets: [&[usize]; 5] = [
            &[1],
            &[1, 2, 4, 8, 16, 32],
            &[1, 3, 4],
            &[1, 2, 4, 8, 16, 24, 28, 30, 32],
            &[1, 5, 6, 9],
        ];
        for sizes in sets {
            let s = BatchSizes::new(sizes).unwrap();
            for n in 0..=200 {
                let parts = s.split(n);
                assert_eq!(parts.iter().sum::<usize>(), n, "{sizes:?} {n}: {parts:?}");
                assert!(
                    parts.iter().all(|b| sizes.contains(b)),
                    "{sizes:?} {n}: {parts:?}"
                );
                assert!(
                    parts.windows(2).all(|w| w[0] >= w[1]),
                    "{sizes:?} {n}: {parts:?}"
                );
                assert_eq!(parts.len(), fewest(sizes, n), "{sizes:?} {n}: {parts:?}");
            }
        }
    }

    #[test]
    fn the_contract_sizes_take_the_fewest_calls_and_powers_of_two_split_as_before() {
        // the full contract's flow: every class of 54 sessions or more in ⌈n / 32⌉ calls
        let s = BatchSizes::new(dcc_generated::token2wav::FLOW_BATCH).unwrap();
        for n in 54..=600 {
            assert_eq!(s.split(n).len(), n.div_ceil(32), "{n}: {:?}", s.split(n));
        }
        assert_eq!(s.split(250), [32, 32, 31, 31, 31, 31, 31, 31]);
        assert_eq!(s.split(240), [30; 8]);
        assert_eq!(s.split(13), [8, 4, 1]);
        // every size from 16 to 32: the calls differ by at most one session
        let dense: Vec<usize> = [1, 2, 4, 8].into_iter().chain(16..=32).collect();
        let d = BatchSizes::new(&dense).unwrap();
        for n in 17..=600 {
            let parts = d.split(n);
            assert_eq!(parts.len(), n.div_ceil(32), "{n}: {parts:?}");
            assert!(parts[0] - parts[parts.len() - 1] <= 1, "{n}: {parts:?}");
        }
        // the powers of two split as the greedy largest-first split did
        let pow = BatchSizes::new(&[1, 2, 4, 8, 16, 32]).unwrap();
        assert_eq!(pow.split(250), [32, 32, 32, 32, 32, 32, 32, 16, 8, 2]);
    }
}

/// One member of a batched call: the session's estimator carry (step-major, the contract
/// region's layout) and its estimator conv contexts, at the session's own addresses.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// In the contract region's dtype (f32, or binary16 at the `half` point).
    pub carry: KvRaw,
    pub est_cnn: RawTensor,
}

impl Member {
    /// The member `st` is: its state's tensors (fixed addresses under the state rule).
    pub fn of(st: &DeviceState) -> Member {
        let t = st.tensors();
        Member {
            carry: t.carry,
            est_cnn: t.estimator_conv,
        }
    }
}

/// The I/O of a batched `flow` call: the class's extent and frames, the members in row order.
#[derive(Clone, Debug)]
pub struct BatchIo<'a> {
    /// The estimator extent every member has (the class).
    pub l_old: usize,
    pub frames: usize,
    pub members: &'a [Member],
    /// What every member's carry keeps (the contract's, one for all).
    pub keep: Keep,
    pub solver: SolverParams,
}

/// The per-process buffers of batched `flow` calls on one [`DeviceFlow`] (see the module docs).
pub struct BatchedFlow {
    pub(super) dev: Arc<DeviceFlow>,
    pub(super) sizes: BatchSizes,
    /// Frames of one member's call at most.
    pub(super) frames: usize,
    pub(super) w: Work,
    /// The solver workspace for `max · cfg` rows, `[step, depth, max·cfg, heads, work, 2·hd]`
    /// (the contract's steps: one, reused by every step, at `lifetime: iteration`).
    ws: DeviceBuffer,
    ws_dims: [usize; 6],
    /// Solver steps the conv contexts hold (the contract's `estimator_conv_cache`).
    est_steps: usize,
    /// The contract's element type of `solver_workspace` (f32, or binary16 at `half`).
    ws_dtype: DType,
    /// The members' estimator conv contexts, `[step, depth, max·cfg, conv, CONV_K − 1,
    /// hidden]`.
    est: DeviceBuffer,
}

impl BatchedFlow {
    /// Buffers on `dev` for batches of `sizes` of calls of up to `frames` frames per member,
    /// the solver workspace shaped by `layout`'s `solver_workspace` region. Refused unless
    /// `dev` runs every linear on a batch-invariant path
    /// ([`dcc_runtime::ops::GemmPath::batch_invariant`]: a row's bits do not depend on the rows
    /// beside it).
    pub fn new(
        dev: Arc<DeviceFlow>,
        layout: &ArenaLayout,
        sizes: BatchSizes,
        frames: usize,
    ) -> Result<BatchedFlow, FlowError> {
        if !dev.gemm_path().batch_invariant() {
            return Err(FlowError::Config(
                "batched flow calls are exact only on a batch-invariant GEMM path (a flow built \
                 with GemmPath::Invariant or InvariantTf32x3)"
                    .into(),
            ));
        }
        if frames == 0 || frames > dev.max_call_frames() {
            return Err(FlowError::Config(format!(
                "a batched call of {frames} frames per member (the flow takes 1..={})",
                dev.max_call_frames()
            )));
        }
        let cfg = dev.config().clone();
        let d = &cfg.dit;
        let max = sizes.max();
        let infos = dev.infos(layout)?;
        let info = infos.workspace;
        let mut ws_dims: [usize; 6] = info
            .dims
            .try_into()
            .map_err(|_| FlowError::Config("solver_workspace is not 6-dimensional".into()))?;
        ws_dims[2] = max * CFG_BATCH;
        let bytes = |dims: &[usize], size: usize| -> Result<usize, FlowError> {
            dims.iter()
                .try_fold(size, |a, &d| a.checked_mul(d))
                .ok_or_else(|| FlowError::Config(format!("a buffer of {dims:?} overflows")))
        };
        let ws_dtype = info.dtype;
        let est_steps = axis_extent(infos.estimator_conv, "step")?;
        let est_dims = [est_steps, d.depth, max * CFG_BATCH, 2, CONV_K - 1, d.hidden];
        let be = dev.backend().clone();
        // the members' encoders run batched too: their buffers for `max` calls of `frames`
        // frames (tokens: `frames / stride` plus the lookahead)
        let e = &cfg.encoder;
        let sizing = Sizing {
            encoder: max,
            encoder_frames: frames + e.pre_lookahead * e.up_stride,
            sessions: max,
            frames,
        };
        let caps = Caps::new(&cfg, &dev.limits());
        Ok(BatchedFlow {
            w: Work::sized(be.as_ref(), &cfg, &caps, sizing)?,
            ws: be.alloc(bytes(&ws_dims, ws_dtype.size())?, AllocKind::Other)?,
            est: be.alloc(bytes(&est_dims, 4)?, AllocKind::Other)?,
            ws_dims,
            est_steps,
            ws_dtype,
            dev,
            sizes,
            frames,
        })
    }

    pub fn device(&self) -> &Arc<DeviceFlow> {
        &self.dev
    }

    pub fn sizes(&self) -> &BatchSizes {
        &self.sizes
    }

    /// Frames of one member's call at most.
    pub fn frames(&self) -> usize {
        self.frames
    }

    /// Device bytes of the batched solver workspace: one `solver_workspace` region per batch
    /// slot, the largest batch's.
    pub fn workspace_bytes(&self) -> usize {
        self.ws.bytes()
    }

    /// Device bytes of these buffers (per process, beside the flow's own).
    pub fn bytes(&self) -> usize {
        let w = &self.w;
        [
            &w.ids, &w.a, &w.b, &w.x, &w.xn, &w.q, &w.k, &w.v, &w.qn, &w.qkv, &w.mods, &w.ccol,
            &w.att, &w.o, &w.hidden, &w.cat, &w.col, &w.pos, &w.conf_ws, &w.mu, &w.cond, &w.xin,
            &w.xs, &w.vel, &w.mel_out, &w.spk, &w.small, &self.ws, &self.est,
        ]
        .iter()
        .map(|b| b.bytes())
        .sum()
    }

    /// The batched call's inputs over `n` members of `frames` frames: `mu`, `cond` (`[n,
    /// frames, mel]`) and `spk` (`[n, 1, spk_dim]`), packed in this batch's buffers (what a
    /// graph of the call reads: fixed addresses).
    pub(crate) fn inputs(&self, n: usize, frames: usize) -> Result<[RawTensor; 3], FlowError> {
        let c = self.dev.config();
        Ok([
            part(&self.w.mu, 0, &[n, frames, c.mel])?.raw(),
            part(&self.w.cond, 0, &[n, frames, c.mel])?.raw(),
            part(&self.w.spk, 0, &[n, 1, c.spk_dim])?.raw(),
        ])
    }

    /// What a batched call writes of this batch's own besides its activations: the solver
    /// workspace and the gathered contexts, `(address, bytes)` each.
    pub(crate) fn writes(&self) -> [(DevPtr, usize); 2] {
        [
            (self.ws.ptr(), self.ws.bytes()),
            (self.est.ptr(), self.est.bytes()),
        ]
    }

    /// Row `row`'s mel `[mel, frames]` of the last call over `frames` frames per member that
    /// ran the final step.
    pub fn mel_out(&self, row: usize, frames: usize) -> Result<DevPtr, FlowError> {
        let mel = self.dev.config().mel;
        Ok(part(&self.w.mel_out, row * mel * frames, &[mel, frames])?.ptr())
    }

    /// Solver steps `steps` of the `flow` callable over the members of `io`, each reading its
    /// staged row ([`BatchedFlow::stage`]) and its own carry and contexts; every member's mel
    /// lands in its row ([`BatchedFlow::mel_out`]). Stream work only. Returns the estimator
    /// extent after retention (every member's).
    ///
    /// Checked before anything is queued, as one session's call is ([`DeviceFlow::flow_call`]),
    /// for every member: 1 to the largest batch size of members, of disjoint memory, each
    /// member's carry and contexts of the contract's layouts, the frames within what the batch
    /// holds. The contract's batch sizes are a matter of its catalog (the graphs captured),
    /// not of exactness: any member count up to the largest runs.
    ///
    /// # Safety
    /// Every tensor of every member lies, over its span, inside a live buffer of the flow's
    /// backend that stays alive until the call's work completes (every replay of a graph it is
    /// captured into, too), and overlaps no buffer of the flow's or of this batch's. A
    /// [`Member::of`] a state of this flow satisfies it.
    pub unsafe fn call(&self, io: &BatchIo<'_>, steps: Range<usize>) -> Result<usize, FlowError> {
        let n = io.members.len();
        let (c, frames) = (self.dev.config(), io.frames);
        if n == 0 || n > self.sizes.max() || frames == 0 || frames > self.frames {
            return Err(FlowError::Input(format!(
                "a batched call of {n} members of {frames} frames (the batch holds 1..={} \
                 members of up to {} frames)",
                self.sizes.max(),
                self.frames
            )));
        }
        let spans: Vec<(u64, u64)> = io
            .members
            .iter()
            .flat_map(|m| {
                [
                    (m.carry.ptr(), m.carry.span_bytes()),
                    (m.est_cnn.ptr(), 4 * m.est_cnn.span()),
                ]
            })
            .map(|(p, bytes)| (p.0, p.0 + bytes as u64))
            .collect();
        for (i, a) in spans.iter().enumerate() {
            if spans[i + 1..].iter().any(|b| a.0 < b.1 && b.0 < a.1) {
                return Err(FlowError::Input(
                    "the members of a batched call overlap in memory".into(),
                ));
            }
        }
        let mut ws_dims = self.ws_dims;
        ws_dims[2] = n * CFG_BATCH;
        let ws = KvRaw::packed(self.ws.ptr(), &ws_dims, self.ws_dtype)?;
        let d = &c.dit;
        let est_dims = [
            self.est_steps,
            d.depth,
            n * CFG_BATCH,
            2,
            CONV_K - 1,
            d.hidden,
        ];
        let est = RawTensor::packed(self.est.ptr(), &est_dims)?;
        let (mel, spk) = (c.mel, c.spk_dim);
        let row = |b: &DeviceBuffer, i: usize, dims: &[usize]| -> Result<RawTensor, FlowError> {
            let words: usize = dims.iter().product();
            Ok(part(b, i * words, dims)?.raw())
        };
        let one_step = [d.depth, CFG_BATCH, 2, CONV_K - 1, d.hidden];
        for (i, m) in io.members.iter().enumerate() {
            let member = FlowIo {
                l_old: io.l_old,
                mu: row(&self.w.mu, i, &[frames, mel])?,
                cond: row(&self.w.cond, i, &[frames, mel])?,
                spk: row(&self.w.spk, i, &[1, spk])?,
                carry: m.carry,
                ws,
                est_cnn: est,
                write_back: true,
                keep: io.keep,
                solver: io.solver,
            };
            if self.dev.check_flow(&member, &steps, n)? {
                return Err(FlowError::Input(
                    "a batched call takes step-major carries".into(),
                ));
            }
            let e = &m.est_cnn;
            if e.dims().len() != 6
                || e.dims()[1..] != one_step
                || e.dims()[0] < steps.end
                || e.strides() != packed_strides(e.dims())
            {
                return Err(FlowError::Input(format!(
                    "member {i}: estimator contexts {:?}, a batched call takes packed [≥ {}, \
                     {one_step:?}]",
                    e.dims(),
                    steps.end
                )));
            }
        }
        let cx = self.dev.cx();
        // SAFETY: `est` is a packed view inside this batch's own buffer (its dims at `n ≤ max`
        // members).
        let est = unsafe { est.bind() };
        // the members' contexts of these steps, gathered: member i's `[cfg, conv, k − 1,
        // hidden]` of each (step, layer) into columns i of the batch's
        let per = CFG_BATCH * 2 * (CONV_K - 1) * d.hidden;
        let layers = steps.start * d.depth..steps.end * d.depth;
        let batch_rows = est.view(&[self.est_steps * d.depth, n * per])?;
        let batch_rows = batch_rows.narrow(0, layers.start, layers.len())?;
        let member_rows = io
            .members
            .iter()
            .map(|m| {
                // SAFETY: the caller's promise (`# Safety`).
                let e = unsafe { m.est_cnn.bind() };
                e.view(&[e.dims()[0] * d.depth, per])?
                    .narrow(0, layers.start, layers.len())
            })
            .collect::<Result<Vec<_>, _>>()?;
        for (i, m) in member_rows.iter().enumerate() {
            ops::copy(&cx, batch_rows.narrow(1, i * per, per)?, *m)?;
        }
        let w = &self.w;
        let (mu, cond, spk) = (
            part(&w.mu, 0, &[n, frames, mel])?,
            part(&w.cond, 0, &[n, frames, mel])?,
            part(&w.spk, 0, &[n, spk])?,
        );
        // the members' carries and the workspace in the contract's dtype (check_flow: every
        // member's carry agrees with the workspace)
        macro_rules! solve {
            ($variant:path) => {{
                let $variant(ws) = ws else {
                    return Err(FlowError::Input(
                        "the carries and the solver workspace hold different dtypes".into(),
                    ));
                };
                let mut carries = Vec::with_capacity(n);
                for m in io.members {
                    let $variant(c) = m.carry else {
                        return Err(FlowError::Input(
                            "the carries and the solver workspace hold different dtypes".into(),
                        ));
                    };
                    // SAFETY: the caller's promise (`# Safety`).
                    carries.push(unsafe { c.bind() });
                }
                // SAFETY: `ws` is a packed view inside this batch's own buffer (its dims at
                // `n ≤ max` members).
                let ws = unsafe { ws.bind() };
                self.dev.solve(
                    &cx,
                    Solve {
                        w,
                        mu,
                        cond,
                        spk,
                        carries: &carries,
                        carry_slice: false,
                        ws,
                        est,
                        l_old: io.l_old,
                        frames,
                        steps,
                        write_back: true,
                        keep: io.keep,
                        solver: io.solver,
                    },
                )?
            }};
        }
        let kept = match ws {
            KvRaw::F32(_) => solve!(KvRaw::F32),
            KvRaw::F16(_) => solve!(KvRaw::F16),
        };
        for (i, m) in member_rows.iter().enumerate() {
            ops::copy(&cx, *m, batch_rows.narrow(1, i * per, per)?)?;
        }
        Ok(kept)
    }
}

/// The packed `dims` view of `b` from float `start` on.
pub(super) fn part<'a>(
    b: &'a DeviceBuffer,
    start: usize,
    dims: &[usize],
) -> Result<Tensor<'a>, FlowError> {
    let n = dims.iter().product();
    Ok(Tensor::of(b)?.narrow(0, start, n)?.view(dims)?)
}
