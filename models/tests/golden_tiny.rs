//! Golden test: the tiny Token2Wav flow (the nn layer stack on the Host backend) against the
//! vendor's PyTorch outputs (testdata/token2wav_tiny, made by the vendor's decoder on CPU).
//!
//! Primes with the 151-token prompt (+3 lookahead), streams six 25-token chunks (+3 lookahead)
//! in a state-rule session of each tiny contract — the paper's retention
//! (`specs/token2wav_tiny.yaml`) and the vendor's slicing (`specs/token2wav_tiny_vendor.yaml`) —
//! and compares every chunk's mel with the vendor's: relative L2 error < 1e-4. The mel stream of
//! each retention is also pinned bit for bit (SHA-256) to what the port emitted before it was
//! restructured onto the nn layers (then checked bit-identical to a separate CPU port).

use std::path::PathBuf;

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{ContractView, Token2WavTiny, Token2WavTinyVendor};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, SolverParams};
use dcc_runtime::contract::Keep;
use safetensors::{Dtype, SafeTensors};

// The stream's sizes are the contract's (both tiny contracts declare the same ones); the golden
// files' shapes are checked against them when they are read.
use dcc_generated::token2wav_tiny::{
    CHUNK_TOKENS as CHUNK, F_PROMPT as PROMPT_FRAMES, F_RETAINED as RETAINED,
    LOOKAHEAD_TOKENS as LOOKAHEAD, PROMPT_TOKENS,
};
const CHUNKS: usize = 6;
const TOLERANCE: f64 = 1e-4;
/// SHA-256 of the six chunks' mels (f32 little-endian, in order) under each retention.
const PAPER_SHA: &str = "71d9f5b34788568aa27c37dfd54b3c2e5d698e88743b9c49913f3dfde89f981c";
const VENDOR_SHA: &str = "fe7c95d1bf4317f6ec41b4b5c5db31b72bfc241107ed42dde20e271c0f44950b";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

struct Io {
    prompt_tokens: Vec<u32>,
    prompt_mel: Vec<f32>,
    spk: Vec<f32>,
    stream_tokens: Vec<u32>,
    feats: Vec<Vec<f32>>,
    extents: Vec<usize>,
}

fn f32s(st: &SafeTensors<'_>, name: &str, shape: &[usize]) -> Vec<f32> {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(t.dtype(), Dtype::F32, "{name}");
    assert_eq!(t.shape(), shape, "{name}");
    t.data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn i32s(st: &SafeTensors<'_>, name: &str) -> Vec<i32> {
    let t = st.tensor(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(t.dtype(), Dtype::I32, "{name}");
    t.data()
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn load_io(file: &str) -> Io {
    let bytes = std::fs::read(dir().join(file)).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let tokens = |n: &str| {
        i32s(&st, n)
            .into_iter()
            .map(|v| u32::try_from(v).unwrap())
            .collect::<Vec<_>>()
    };
    Io {
        prompt_tokens: tokens("prompt_tokens"),
        prompt_mel: f32s(&st, "prompt_mel", &[1, PROMPT_FRAMES, 80]),
        spk: f32s(&st, "spk", &[1, 192]),
        stream_tokens: tokens("stream_tokens"),
        feats: (0..CHUNKS)
            .map(|i| f32s(&st, &format!("feat_{i}"), &[1, 80, 2 * CHUNK]))
            .collect(),
        extents: (0..CHUNKS)
            .map(|i| i32s(&st, &format!("att_extent_{i}"))[0] as usize)
            .collect(),
    }
}

fn rel_l2(got: &[f32], want: &[f32]) -> f64 {
    dcc_models::token2wav::rel_l2(got, want).unwrap_or_else(|e| panic!("{e}"))
}

fn sha(mels: &[Vec<f32>]) -> String {
    let bytes: Vec<u8> = mels
        .iter()
        .flatten()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    dcc_runtime::sha256_hex(&bytes)
}

/// Primes a state-rule session of `contract` and streams the six chunks of `io`; returns the
/// mels.
fn stream(dev: &DeviceFlow, contract: &ContractView, io: &Io, name: &str) -> Vec<Vec<f32>> {
    let mut st = dev
        .new_state_in_arena(SolverParams::default(), &contract.arena)
        .unwrap();
    let mut prompt = io.prompt_tokens.clone();
    prompt.extend_from_slice(&io.prompt_tokens[..LOOKAHEAD]);
    dev.setup_cache(&mut st, &prompt, &io.prompt_mel, &io.spk)
        .unwrap();
    assert_eq!(st.estimator_extent(), PROMPT_FRAMES);
    let mut feats = Vec::new();
    let mut max = 0.0f64;
    for i in 0..CHUNKS {
        let toks = &io.stream_tokens[i * CHUNK..i * CHUNK + CHUNK + LOOKAHEAD];
        let feat = dev.inference_chunk(&mut st, toks, &io.spk, false).unwrap();
        assert_eq!(
            st.estimator_extent(),
            io.extents[i],
            "{name}, chunk {i}: estimator extent"
        );
        let e = rel_l2(&feat, &io.feats[i]);
        max = max.max(e);
        println!(
            "{name} retention, chunk {i}: rel-L2 {e:.3e}, extent {}",
            st.estimator_extent()
        );
        assert!(
            e < TOLERANCE,
            "{name}, chunk {i}: rel-L2 {e:.3e} ≥ {TOLERANCE:e}"
        );
        feats.push(feat);
    }
    println!("{name} retention: max rel-L2 {max:.3e}");
    feats
}

#[test]
fn golden_tiny_both_retentions() {
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    assert_eq!(cfg, FlowConfig::tiny());
    let paper = load_io("io.safetensors");
    let vendor = load_io("io_vendor_retention.safetensors");
    // both files share the inputs
    assert_eq!(paper.prompt_tokens, vendor.prompt_tokens);
    assert_eq!(paper.stream_tokens, vendor.stream_tokens);
    assert_eq!(paper.spk, vendor.spk);
    assert_eq!(paper.prompt_mel, vendor.prompt_mel);
    assert_eq!(paper.prompt_tokens.len(), PROMPT_TOKENS);
    // Retention is what each contract declares for the estimator carry (prepend storage):
    // the paper keeps the newest `retained` frames at the head and the prompt at the tail, the
    // vendor the other way round.
    let (cp, cv) = (
        ContractView::of::<Token2WavTiny>().unwrap(),
        ContractView::of::<Token2WavTinyVendor>().unwrap(),
    );
    let keep = |head, tail| Keep {
        head,
        tail,
        prompt: PROMPT_FRAMES,
        retained: RETAINED,
    };
    assert_eq!(cp.keeps.carry, keep(RETAINED, PROMPT_FRAMES));
    assert_eq!(cv.keeps.carry, keep(PROMPT_FRAMES, RETAINED));
    assert_eq!(cp.keeps.upsample, cv.keeps.upsample);
    let limits = DeviceLimits {
        max_call_tokens: PROMPT_TOKENS + LOOKAHEAD,
        carry_frames: PROMPT_FRAMES + RETAINED,
    };
    let dev = DeviceFlow::new(dcc_runtime::backend::host(), &ws, &cfg, limits).unwrap();

    let t0 = std::time::Instant::now();
    let f_paper = stream(&dev, &cp, &paper, "paper");
    let f_vendor = stream(&dev, &cv, &vendor, "vendor");
    println!(
        "2 x (prompt + 6 chunks): {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(
        sha(&f_paper),
        PAPER_SHA,
        "paper retention: the mel stream moved"
    );
    assert_eq!(
        sha(&f_vendor),
        VENDOR_SHA,
        "vendor retention: the mel stream moved"
    );

    // The tolerance tells the two retentions apart: from chunk 3 on, each retention's output
    // misses the other retention's golden data (the comparison above can fail).
    for i in 0..CHUNKS {
        let cross = [
            rel_l2(&f_paper[i], &vendor.feats[i]),
            rel_l2(&f_vendor[i], &paper.feats[i]),
        ];
        println!(
            "chunk {i}: paper port vs vendor golden {:.3e}, vendor port vs paper golden {:.3e}",
            cross[0], cross[1]
        );
        if i < 3 {
            assert!(cross.iter().all(|e| *e < TOLERANCE));
        } else {
            assert!(cross.iter().all(|e| *e > TOLERANCE));
        }
    }
}
