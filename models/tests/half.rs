//! The half arm of the flow (a flow on `GemmPath::Half`: the vendor's fp16 cast points,
//! `token2wav::half`) on the Host backend, against the vendor's fp16 mode on the tiny model
//! (`testdata/token2wav_tiny/io_half.safetensors`, made by `scripts/half_peer.py`).
//!
//! - Every chunk's mel sits no further from the vendor fp16 mel than the vendor fp16 mel sits
//!   from the vendor fp32 mel (the golden's `rel_l2_fp32`), and within [`TOLERANCE`]; both
//!   distances are printed side by side.
//! - Every arm (replay or not, state rule or stock) emits the half B0's mel bit for bit, and the
//!   replay arms replay every call in steady state.
//! - A batched half call (four sessions) gives each session the mel it gets alone.
//!
//! The weights are `weights.safetensors`, which a flow on the half path rounds to f16 as it
//! loads them (what `flow.half()` does to them).

use std::sync::Arc;

use dcc_models::token2wav::serve::{
    Arm, Batcher, ContractView, Request, Session, StreamInputs, Token2WavTiny,
};
use dcc_models::token2wav::{BatchSizes, BatchedFlow, DeviceFlow, DeviceLimits, SolverParams};
use dcc_runtime::ops::GemmPath;
use safetensors::SafeTensors;
use safetensors::tensor::Dtype;

mod common;
use common::{Inputs, dir, floats, mel_sha, weights};

const CHUNKS: usize = 6;
/// The largest relative L2 of a chunk's mel to the vendor fp16 mel (measured: see the test's
/// output; the vendor's own fp16 drift from fp32 is 1.13e-3..1.20e-3 per chunk).
const TOLERANCE: f64 = 6e-4;

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    dcc_models::token2wav::rel_l2(got, want).unwrap_or_else(|e| panic!("{e}"))
}

struct Golden {
    prompt: Vec<u32>,
    mel: Vec<f32>,
    spk: Vec<f32>,
    stream: Vec<u32>,
    feats: Vec<Vec<f32>>,
    vendor_drift: Vec<f64>,
}

fn golden() -> Golden {
    let bytes = std::fs::read(dir().join("io_half.safetensors")).unwrap();
    let io = SafeTensors::deserialize(&bytes).unwrap();
    let Inputs {
        prompt,
        mel,
        spk,
        stream,
    } = Inputs::of(&io);
    let drift = io.tensor("rel_l2_fp32").unwrap();
    assert_eq!(drift.dtype(), Dtype::F64);
    Golden {
        prompt,
        mel,
        spk,
        stream,
        feats: (0..CHUNKS)
            .map(|i| floats(&io, &format!("feat_{i}")))
            .collect(),
        vendor_drift: drift
            .data()
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect(),
    }
}

fn half_flow(contract: &ContractView, g: &Golden) -> Arc<DeviceFlow> {
    let (ws, cfg) = weights();
    let limits = DeviceLimits {
        max_call_tokens: g.prompt.len(),
        carry_frames: contract.keeps.carry.bound(),
    };
    let be = dcc_runtime::backend::host();
    Arc::new(DeviceFlow::new_on_path(be, &ws, &cfg, limits, GemmPath::Half).unwrap())
}

#[test]
fn half_arm_sits_nearer_vendor_fp16_than_vendor_fp16_to_fp32() {
    let g = golden();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let dev = half_flow(&contract, &g);
    let mut s = Session::new(dev, contract, Arm::B0, SolverParams::default()).unwrap();
    s.prime(&g.prompt, &g.mel, &g.spk).unwrap();
    let fp32 = std::fs::read(dir().join("io.safetensors")).unwrap();
    let fp32 = SafeTensors::deserialize(&fp32).unwrap();
    let mut worst = 0.0f64;
    for i in 0..CHUNKS {
        let toks = &g.stream[i * 25..i * 25 + 28];
        let mel = s.chunk(toks, &g.spk, false).unwrap();
        let e = rel_l2(&mel, &g.feats[i]);
        let to32 = rel_l2(&mel, &floats(&fp32, &format!("feat_{i}")));
        println!(
            "chunk {i}: half arm vs vendor fp16 {e:.3e}; vendor fp16 vs vendor fp32 {:.3e}; \
             half arm vs vendor fp32 {to32:.3e}",
            g.vendor_drift[i]
        );
        assert!(
            e <= g.vendor_drift[i],
            "chunk {i}: {e:.3e} from vendor fp16, further than vendor fp16 from fp32 ({:.3e})",
            g.vendor_drift[i]
        );
        worst = worst.max(e);
    }
    println!("half arm: max rel-L2 to vendor fp16 {worst:.3e} (tolerance {TOLERANCE:e})");
    assert!(worst < TOLERANCE, "{worst:.3e} ≥ {TOLERANCE:e}");
}

#[test]
fn half_replay_is_bit_identical_to_half_eager() {
    let g = golden();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let dev = half_flow(&contract, &g);
    let mut b0: Option<String> = None;
    for arm in Arm::ALL {
        let mut s = Session::new(dev.clone(), contract, arm, SolverParams::default()).unwrap();
        let mut passes = Vec::new();
        // pass 1 captures every class; pass 2 is steady state
        for pass in 0..2 {
            s.prime(&g.prompt, &g.mel, &g.spk).unwrap();
            let before: u64 = s.fallbacks().values().sum();
            let mels: Vec<Vec<f32>> = (0..4)
                .map(|i| {
                    s.chunk(&g.stream[i * 25..i * 25 + 28], &g.spk, false)
                        .unwrap()
                })
                .collect();
            let eager = s.fallbacks().values().sum::<u64>() - before;
            if arm.replay().is_some() && pass == 1 {
                assert_eq!(eager, 0, "{arm:?}: eager calls in steady state");
            }
            passes.push(mels);
        }
        let h = mel_sha(&passes[1]);
        assert_eq!(mel_sha(&passes[0]), h, "{arm:?}: passes differ");
        match &b0 {
            None => b0 = Some(h.clone()),
            Some(b) => assert_eq!(&h, b, "{arm:?} differs from the half B0"),
        }
        println!("{:>3}: half mel sha256 {h}", arm.name());
    }
}

/// A batched call on the half path: four sessions (own prompt, speaker and tokens) in one batch
/// of four, eager, each emits exactly the mel it emits alone, chunk by chunk (the half GEMM and
/// every rounding kernel compute each row alone).
#[test]
fn batch_invariant_half_batched_flow() {
    const SESSIONS: usize = 4;
    let g = golden();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let dev = half_flow(&contract, &g);
    let base = StreamInputs {
        prompt_tokens: g.prompt[..g.prompt.len() - 3].to_vec(),
        prompt_mel: g.mel.clone(),
        spk: g.spk.clone(),
        stream: g.stream.clone(),
    };
    let vocab = dev.config().vocab;
    let streams: Vec<StreamInputs> = (0..SESSIONS)
        .map(|k| base.variant(k, vocab).unwrap())
        .collect();
    let session = || Session::new(dev.clone(), contract, Arm::S, SolverParams::default());
    let mut alone = Vec::new();
    for x in &streams {
        let mut s = session().unwrap();
        s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
        let mels: Vec<Vec<f32>> = (0..2)
            .map(|i| s.chunk(x.chunk(i, 25, 3).unwrap(), &x.spk, false).unwrap())
            .collect();
        alone.push(mels);
    }
    assert_ne!(alone[1], alone[0], "stream 1 emits stream 0's mel");
    let frames = dev.call_frames(28, false);
    let sizes = BatchSizes::new(&[1, 2, 4]).unwrap();
    let flow = BatchedFlow::new(dev.clone(), &contract.arena, sizes, frames).unwrap();
    let mut batcher = Batcher::new(flow, None);
    let mut ses: Vec<Session> = (0..SESSIONS).map(|_| session().unwrap()).collect();
    for (s, x) in ses.iter_mut().zip(&streams) {
        s.prime(&x.prompt_call(3), &x.prompt_mel, &x.spk).unwrap();
    }
    let per_chunk: Vec<Vec<&Vec<f32>>> = (0..2)
        .map(|i| alone.iter().map(|m| &m[i]).collect())
        .collect();
    for (i, want) in per_chunk.iter().enumerate() {
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
                &mel.unwrap(),
                want[k],
                "session {k}, chunk {i}: batched ≠ alone"
            );
        }
    }
    assert_eq!(
        batcher.stats().batches.get(&4),
        Some(&2),
        "{:?}",
        batcher.stats()
    );
}
