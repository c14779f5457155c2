//! Sessions at the contract's `half` operating point (`ContractView::at_point("half")`: the
//! point's arena, the carry and the solver workspace in binary16, and the point's catalogs, whose
//! `cache` signatures are f16) on a flow on the half path replay:
//!
//! - on every replay arm (R, Rc, SR, SRc) a half-point session emits the mel of the same session
//!   on S (eager) bit for bit, over two passes (the first captures every class, the second is
//!   steady state with no eager call), and its engines replay, with no fallback but each class's
//!   first call (`probation`): a catalog keyed on the base's f32 carry would miss every call
//!   (`signature_miss`);
//! - a batched pair of half-point SRc sessions (the batch engine's catalog the point's flow
//!   catalog stacked) replays and gives each session the mel it gets alone.
//!
//! Host backend, tiny model, the vendor's fp16 golden inputs (`io_half.safetensors`); both tests
//! on CUDA too when a GPU exists (otherwise `SKIP (cuda): ...`; `DCC_REQUIRE_GPU=1`
//! makes that a failure).

use std::sync::Arc;

use dcc_generated::token2wav_tiny as tiny;
use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{
    Arm, Batcher, ContractView, Request, Session, StreamInputs, Token2WavTiny,
};
use dcc_models::token2wav::{
    BatchSizes, BatchedFlow, DeviceFlow, DeviceLimits, FlowConfig, SolverParams,
};
use dcc_runtime::backend::Backend;
use dcc_runtime::contract::DType;
use dcc_runtime::ops::GemmPath;
use dcc_runtime::replay::Fallback;
use safetensors::SafeTensors;

mod common;
use common::{dir, floats, tokens};

/// Chunks per pass: the carry's three classes (302, 352, 402), then 402 again.
const CHUNKS: usize = 4;

/// The golden half stream: its prompt (with the prompt call's 3 lookahead tokens appended by
/// `prompt_call`), speaker and tokens.
fn inputs() -> StreamInputs {
    let bytes = std::fs::read(dir().join("io_half.safetensors")).unwrap();
    let io = SafeTensors::deserialize(&bytes).unwrap();
    StreamInputs {
        prompt_tokens: tokens(&io, "prompt_tokens"),
        prompt_mel: floats(&io, "prompt_mel"),
        spk: floats(&io, "spk"),
        stream: tokens(&io, "stream_tokens"),
    }
}

/// The tiny contract at its `half` point.
fn half() -> ContractView {
    ContractView::at_point::<Token2WavTiny>("half").unwrap()
}

/// A flow on the half path over the tiny golden weights.
fn flow(be: Arc<dyn Backend>, contract: &ContractView, x: &StreamInputs) -> Arc<DeviceFlow> {
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    let limits = DeviceLimits {
        max_call_tokens: x.prompt_tokens.len() + 3,
        carry_frames: contract.keeps.carry.bound(),
    };
    Arc::new(DeviceFlow::new_on_path(be, &ws, &cfg, limits, GemmPath::Half).unwrap())
}

fn bits(passes: &[Vec<Vec<f32>>]) -> Vec<u32> {
    passes
        .iter()
        .flatten()
        .flatten()
        .map(|x| x.to_bits())
        .collect()
}

/// The point's catalogs are what the session keys on: the flow's `cache` is f16 there.
#[test]
fn the_half_view_holds_the_points_arena_and_catalogs() {
    let c = half();
    assert_eq!(c.point, "half");
    assert_eq!(c.arena, tiny::operating_points::half::ARENA);
    assert_eq!(c.carry.dtype, DType::F16);
    assert_eq!(c.solver_workspace.dtype, DType::F16);
    // the adapter's expansion of the spec: equal to the committed module's half catalog
    assert_eq!(
        c.flow.catalog,
        &tiny::operating_points::half::FLOW_CATALOG[..]
    );
    assert_ne!(c.flow.catalog, &tiny::FLOW_CATALOG[..]);
    for sig in c.flow.catalog {
        let cache = sig.inputs.iter().find(|t| t.name == "cache").unwrap();
        assert_eq!(cache.dtype, DType::F16, "class {}", sig.class);
    }
    // the encoder reads no region the point changes: the base's catalog, re-exported
    assert_eq!(c.encoder.catalog, &tiny::ENCODER_CATALOG[..]);
}

/// Two passes of `CHUNKS` chunks of one session of `arm` at the half point; asserts, on a replay
/// arm, that the second pass runs no call eagerly and that the engines replayed with no fallback
/// but each class's probation.
fn passes(
    dev: &Arc<DeviceFlow>,
    c: ContractView,
    arm: Arm,
    x: &StreamInputs,
) -> Vec<Vec<Vec<f32>>> {
    let mut s = Session::new(dev.clone(), c, arm, SolverParams::default()).unwrap();
    assert_eq!(s.state().tensors().carry.dtype(), DType::F16, "{arm:?}");
    let mut out = Vec::new();
    for pass in 0..2 {
        s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
        let before: u64 = s.fallbacks().values().sum();
        let mels: Vec<Vec<f32>> = (0..CHUNKS)
            .map(|i| s.chunk(x.chunk(i, 25, 3).unwrap(), &x.spk, false).unwrap())
            .collect();
        let eager = s.fallbacks().values().sum::<u64>() - before;
        if arm.replay().is_some() && pass == 1 {
            assert_eq!(
                eager,
                0,
                "{arm:?}: eager calls in steady state: {:?}",
                s.fallbacks()
            );
        }
        out.push(mels);
    }
    if arm.replay().is_some() {
        let reports = s.reports();
        assert!(!reports.is_empty(), "{arm:?}");
        for rep in &reports {
            assert_eq!(rep.classes_captured, 3, "{arm:?}: {rep}");
            assert_eq!(rep.classes_dropped, 0, "{arm:?}: {rep}");
            assert!(rep.replays > 0, "{arm:?}: {rep}");
            assert_eq!(rep.replays as usize, 2 * CHUNKS - 3, "{arm:?}: {rep}");
            let other: u64 = rep
                .fallbacks
                .iter()
                .filter(|(k, _)| **k != Fallback::Probation)
                .map(|(_, v)| v)
                .sum();
            assert_eq!(other, 0, "{arm:?}: fallbacks {rep}");
        }
    }
    out
}

/// Every replay arm at the half point equals S at the half point, bit for bit, and replays.
fn replay_arms_equal_eager(be: Arc<dyn Backend>) {
    let x = inputs();
    let c = half();
    let dev = flow(be, &c, &x);
    let want = passes(&dev, c, Arm::S, &x);
    assert!(want.iter().flatten().flatten().all(|v| v.is_finite()));
    assert_eq!(bits(&want[..1]), bits(&want[1..]), "S: passes differ");
    for arm in [Arm::R, Arm::Rc, Arm::SR, Arm::SRc] {
        let got = passes(&dev, c, arm, &x);
        assert_eq!(bits(&got), bits(&want), "{arm:?} at the half point ≠ S");
    }
}

#[test]
fn half_point_replay_arms_equal_eager_and_replay() {
    replay_arms_equal_eager(dcc_runtime::backend::host());
}

#[test]
fn cuda_half_point_replay_arms_equal_eager_and_replay() {
    match dcc_runtime::backend::cuda(0) {
        Ok(be) => replay_arms_equal_eager(be),
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
        }
    }
}

/// A batched pair of half-point SRc sessions, its batched calls replayed through graphs keyed
/// on the point's flow catalog, gives each session the mel it gets alone.
fn batched_pair_replays_and_equals_alone(be: Arc<dyn Backend>) {
    const SESSIONS: usize = 2;
    /// Rounds: the three classes captured, then two replays of class 402.
    const ROUNDS: usize = 5;
    let base = inputs();
    let c = half();
    let dev = flow(be, &c, &base);
    let vocab = dev.config().vocab;
    let streams: Vec<StreamInputs> = (0..SESSIONS)
        .map(|k| base.variant(k, vocab).unwrap())
        .collect();
    let session = || Session::new(dev.clone(), c, Arm::SRc, SolverParams::default()).unwrap();
    let alone: Vec<Vec<Vec<f32>>> = streams
        .iter()
        .map(|x| {
            let mut s = session();
            s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
            (0..ROUNDS)
                .map(|i| s.chunk(x.chunk(i, 25, 3).unwrap(), &x.spk, false).unwrap())
                .collect()
        })
        .collect();
    assert_ne!(alone[1], alone[0], "stream 1 emits stream 0's mel");
    let frames = dev.call_frames(28, false);
    let sizes = BatchSizes::new(&[1, 2]).unwrap();
    let batched = BatchedFlow::new(dev.clone(), &c.arena, sizes, frames).unwrap();
    let mut batcher = Batcher::new(batched, Some(&c));
    let mut ses: Vec<Session> = (0..SESSIONS).map(|_| session()).collect();
    for (s, x) in ses.iter_mut().zip(&streams) {
        s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
    }
    // `i` is the round of every stream and indexes each session's mels alone
    #[allow(clippy::needless_range_loop)]
    for i in 0..ROUNDS {
        let reqs: Vec<Request<'_>> = streams
            .iter()
            .map(|x| Request {
                tokens: x.chunk(i, 25, 3).unwrap(),
                spk: &x.spk,
                last_chunk: false,
            })
            .collect();
        for (k, mel) in batcher.round(&mut ses, &reqs).into_iter().enumerate() {
            assert_eq!(
                mel.unwrap(),
                alone[k][i],
                "session {k}, round {i}: batched ≠ alone"
            );
        }
    }
    let st = batcher.stats();
    assert_eq!(st.batches.get(&2), Some(&(ROUNDS as u64)), "{st:?}");
    let rep = batcher.engines().report();
    assert_eq!(rep.classes_captured, 3, "{rep:?}");
    assert_eq!(rep.replays, (ROUNDS - 3) as u64, "{rep:?}");
    let other: u64 = rep
        .fallbacks
        .iter()
        .filter(|(k, _)| **k != Fallback::Probation)
        .map(|(_, v)| v)
        .sum();
    assert_eq!(other, 0, "{rep:?}");
}

#[test]
fn half_point_batched_pair_replays_and_equals_alone() {
    batched_pair_replays_and_equals_alone(dcc_runtime::backend::host());
}

#[test]
fn cuda_half_point_batched_pair_replays_and_equals_alone() {
    match dcc_runtime::backend::cuda(0) {
        Ok(be) => batched_pair_replays_and_equals_alone(be),
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
        }
    }
}
