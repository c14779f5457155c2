//! A session at the contract's `half` operating point (`operating_points::half::ARENA`: the
//! carry and the solver workspace stored as binary16) on a flow on the half path, against a
//! session of the same flow whose cache is f32 (the base arena, holding the same f16 values in
//! f32 storage): the same mel bit for bit, chunk by chunk, under the state rule and the stock
//! store alike, with the carry and the workspace in binary16 and the arena ledger at the half
//! point's bytes per session (`dcc check`'s, half the carry's f32 bytes less). A half arena on a
//! path that keeps f32 keys and values is refused. A batched pair of half-point sessions (their
//! carries and the batch's solver workspace binary16) gives each session the mel it gets alone,
//! which is the f32-cache session's. Host backend, tiny model, the vendor's fp16 golden inputs
//! (`io_half.safetensors`).

use std::sync::Arc;

use dcc_generated::token2wav_tiny as tiny;
use dcc_models::token2wav::serve::{
    Arm, Batcher, ContractView, Request, Session, StreamInputs, Token2WavTiny,
};
use dcc_models::token2wav::{
    BatchSizes, BatchedFlow, DeviceFlow, DeviceLimits, DeviceState, KvRaw, SolverParams,
};
use dcc_runtime::backend::AllocKind;
use dcc_runtime::contract::{ArenaLayout, DType};
use dcc_runtime::ops::GemmPath;
use safetensors::SafeTensors;

mod common;
use common::{Inputs, dir, floats, tokens, weights};

const CHUNKS: usize = 4;

fn flow(contract: &ContractView, prompt: usize, path: GemmPath) -> Arc<DeviceFlow> {
    let (ws, cfg) = weights();
    let limits = DeviceLimits {
        max_call_tokens: prompt,
        carry_frames: contract.keeps.carry.bound(),
    };
    let be = dcc_runtime::backend::host();
    Arc::new(DeviceFlow::new_on_path(be, &ws, &cfg, limits, path).unwrap())
}

fn bits(v: &[Vec<f32>]) -> Vec<u32> {
    v.iter().flatten().map(|x| x.to_bits()).collect()
}

#[test]
fn half_point_session_equals_f32_cache_session() {
    let Inputs {
        prompt,
        mel,
        spk,
        stream,
    } = Inputs::load("io_half.safetensors");
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let dev = flow(&contract, prompt.len(), GemmPath::Half);
    let half: &ArenaLayout = &ContractView::at_point::<Token2WavTiny>("half")
        .unwrap()
        .arena;
    assert_eq!(*half, tiny::operating_points::half::ARENA);
    let s = SolverParams::default();

    // the per-process parts first, so that a state's arena delta is its per-session part
    dev.process_arena(&contract.arena).unwrap();
    dev.process_arena(half).unwrap();
    let be = dev.backend().clone();
    let arena_now = || be.memory().live(AllocKind::Arena);
    let before = arena_now();
    let base_state = dev.new_state_in_arena(s, &contract.arena).unwrap();
    let base_bytes = arena_now() - before;
    let before = arena_now();
    let half_state = dev.new_state_in_arena(s, half).unwrap();
    let half_bytes = arena_now() - before;
    assert_eq!(base_bytes, tiny::SESSION_BYTES);
    assert_eq!(half_bytes, tiny::operating_points::half::SESSION_BYTES);
    assert_eq!(base_bytes - half_bytes, tiny::Carry::BYTES / 2);
    let t = half_state.tensors();
    assert!(matches!(t.carry, KvRaw::F16(_)) && matches!(t.workspace, KvRaw::F16(_)));
    assert_eq!(t.carry.dtype(), DType::F16);
    assert!(matches!(base_state.tensors().carry, KvRaw::F32(_)));
    println!(
        "per session: f32 cache {base_bytes} B, half point {half_bytes} B (carry {} B → {} B)",
        tiny::Carry::BYTES,
        tiny::operating_points::half::CARRY_BYTES
    );

    let run = |mut st: DeviceState| -> Vec<Vec<f32>> {
        dev.setup_cache(&mut st, &prompt, &mel, &spk).unwrap();
        (0..CHUNKS)
            .map(|i| {
                let toks = &stream[i * 25..i * 25 + 28];
                dev.inference_chunk(&mut st, toks, &spk, false).unwrap()
            })
            .collect()
    };
    let want = run(base_state);
    assert!(want.iter().flatten().all(|v| v.is_finite()));
    assert_eq!(bits(&run(half_state)), bits(&want), "state rule");
    let stock = dev.new_state_stock(s, half).unwrap();
    assert!(matches!(stock.tensors().carry, KvRaw::F16(_)));
    assert_eq!(bits(&run(stock)), bits(&want), "stock store");

    // a flow that keeps f32 keys and values refuses the half point
    let f32_dev = flow(&contract, prompt.len(), GemmPath::Invariant);
    assert!(f32_dev.new_state_in_arena(s, half).is_err());
    assert!(f32_dev.new_state_stock(s, half).is_err());
}

#[test]
fn half_point_batched_pair_equals_alone() {
    const SESSIONS: usize = 2;
    let bytes = std::fs::read(dir().join("io_half.safetensors")).unwrap();
    let io = SafeTensors::deserialize(&bytes).unwrap();
    let base = StreamInputs {
        prompt_tokens: tokens(&io, "prompt_tokens"),
        prompt_mel: floats(&io, "prompt_mel"),
        spk: floats(&io, "spk"),
        stream: tokens(&io, "stream_tokens"),
    };
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    // the same contract at the half point: its arena and its catalogs
    let half = ContractView::at_point::<Token2WavTiny>("half").unwrap();
    assert_eq!(half.arena, tiny::operating_points::half::ARENA);
    let dev = flow(&contract, base.prompt_tokens.len() + 3, GemmPath::Half);
    let vocab = dev.config().vocab;
    let streams: Vec<StreamInputs> = (0..SESSIONS)
        .map(|k| base.variant(k, vocab).unwrap())
        .collect();
    let session = |c: ContractView| Session::new(dev.clone(), c, Arm::S, SolverParams::default());
    let alone = |c: ContractView| -> Vec<Vec<Vec<f32>>> {
        streams
            .iter()
            .map(|x| {
                let mut s = session(c).unwrap();
                s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
                (0..2)
                    .map(|i| s.chunk(x.chunk(i, 25, 3).unwrap(), &x.spk, false).unwrap())
                    .collect()
            })
            .collect()
    };
    let want = alone(contract);
    assert_eq!(
        alone(half),
        want,
        "half-point sessions alone ≠ f32-cache sessions"
    );
    assert_ne!(want[1], want[0], "stream 1 emits stream 0's mel");
    let frames = dev.call_frames(28, false);
    let sizes = BatchSizes::new(&[1, 2]).unwrap();
    let batched = BatchedFlow::new(dev.clone(), &half.arena, sizes, frames).unwrap();
    let mut batcher = Batcher::new(batched, None);
    let mut ses: Vec<Session> = (0..SESSIONS).map(|_| session(half).unwrap()).collect();
    for (s, x) in ses.iter_mut().zip(&streams) {
        s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
    }
    // `i` is the chunk index of every stream and of each session's expected mels
    #[allow(clippy::needless_range_loop)]
    for i in 0..2 {
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
                want[k][i],
                "session {k}, chunk {i}: batched ≠ alone"
            );
        }
    }
    assert_eq!(
        batcher.stats().batches.get(&2),
        Some(&2),
        "{:?}",
        batcher.stats()
    );
}
