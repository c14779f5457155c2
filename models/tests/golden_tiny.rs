//! Golden test: the tiny Token2Wav flow against the vendor's PyTorch outputs
//! (testdata/token2wav_tiny, made by shared/peers/token2wav_stock.py on CPU).
//!
//! Primes with the 151-token prompt (+3 lookahead), streams six 25-token chunks (+3 lookahead),
//! retains 302 prompt + 100 frames after each chunk, and compares every chunk's mel with the
//! vendor's: relative L2 error < 1e-4, for both the paper's and the vendor's retention. Two
//! implementations: the slice port (`Flow`, host-twin functions called directly) and the runtime
//! port (`DeviceFlow` on the Host backend: registered kernel launches, `Backend::gemm`, carries in
//! fixed device buffers written back by the carry kernels), which must also agree bit for bit.
//! One test, so that the prompt is primed once per implementation (debug builds are slow).

use std::path::PathBuf;

use dcc_models::token2wav::serve::{ContractView, Token2WavTiny, Token2WavTinyVendor};
use dcc_models::token2wav::{
    DeviceFlow, DeviceLimits, DeviceState, Flow, FlowCache, FlowConfig, Retention, RetentionOrder,
    SolverParams, WeightStore,
};
use safetensors::{Dtype, SafeTensors};

const PROMPT_TOKENS: usize = 151;
const CHUNK: usize = 25;
const LOOKAHEAD: usize = 3;
const PROMPT_FRAMES: usize = 302;
const RETAINED: usize = 100;
const CHUNKS: usize = 6;
const TOLERANCE: f64 = 1e-4;

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
    assert_eq!(got.len(), want.len());
    dcc_models::token2wav::rel_l2(got, want)
}

/// Streams the six chunks of `io` on both implementations from primed states; returns the slice
/// port's mels.
fn stream(
    flow: &Flow,
    dev: &DeviceFlow,
    io: &Io,
    mut cache: FlowCache,
    mut st: DeviceState,
    retention: Retention,
) -> Vec<Vec<f32>> {
    let solver = SolverParams::default();
    let mut feats = Vec::new();
    for i in 0..CHUNKS {
        let toks = &io.stream_tokens[i * CHUNK..i * CHUNK + CHUNK + LOOKAHEAD];
        let feat = flow
            .inference_chunk(toks, &io.spk, &mut cache, false, &solver)
            .unwrap();
        cache.retain(flow.config(), &retention);
        let dfeat = dev.inference_chunk(&mut st, toks, &io.spk, false).unwrap();
        assert_eq!(
            cache.estimator.extent, io.extents[i],
            "chunk {i}: estimator extent"
        );
        assert_eq!(
            st.estimator_extent(),
            io.extents[i],
            "chunk {i}: device estimator extent"
        );
        let e = rel_l2(&feat, &io.feats[i]);
        let de = rel_l2(&dfeat, &io.feats[i]);
        let same = feat
            .iter()
            .zip(&dfeat)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        println!(
            "{:?} retention, chunk {i}: rel-L2 {e:.3e} (slice port), {de:.3e} (Host backend), bit-identical: {same}, extent {}",
            retention.order, cache.estimator.extent
        );
        assert!(
            e < TOLERANCE,
            "{:?} retention, chunk {i}: rel-L2 {e:.3e} ≥ {TOLERANCE:e}",
            retention.order
        );
        assert!(
            de < TOLERANCE,
            "{:?} retention, chunk {i}: Host backend rel-L2 {de:.3e}",
            retention.order
        );
        assert!(
            same,
            "{:?} retention, chunk {i}: Host backend differs from the slice port",
            retention.order
        );
        feats.push(feat);
    }
    feats
}

#[test]
fn golden_tiny_both_retentions() {
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    assert_eq!(FlowConfig::from_weights(&ws).unwrap(), FlowConfig::tiny());
    let flow = Flow::from_store(&ws).unwrap();
    let paper = load_io("io.safetensors");
    let vendor = load_io("io_vendor_retention.safetensors");
    // both files share the inputs
    assert_eq!(paper.prompt_tokens, vendor.prompt_tokens);
    assert_eq!(paper.stream_tokens, vendor.stream_tokens);
    assert_eq!(paper.spk, vendor.spk);
    assert_eq!(paper.prompt_mel, vendor.prompt_mel);
    assert_eq!(paper.prompt_tokens.len(), PROMPT_TOKENS);
    // Retention is selected by the contract: the tiny spec declares the paper's order, the
    // vendor variant the vendor's slicing.
    let (r_paper, r_vendor) = (
        ContractView::of::<Token2WavTiny>().unwrap().retention,
        ContractView::of::<Token2WavTinyVendor>().unwrap().retention,
    );
    assert_eq!(r_paper, Retention::paper(PROMPT_FRAMES, RETAINED));
    assert_eq!(r_vendor, Retention::vendor(PROMPT_FRAMES, RETAINED));
    let solver = SolverParams::default();

    let mut prompt = paper.prompt_tokens.clone();
    prompt.extend_from_slice(&paper.prompt_tokens[..LOOKAHEAD]);
    let t0 = std::time::Instant::now();
    let cache = flow
        .setup_cache(&prompt, &paper.prompt_mel, &paper.spk, &solver)
        .unwrap();
    assert_eq!(cache.estimator.extent, PROMPT_FRAMES);
    let limits = DeviceLimits {
        max_call_tokens: PROMPT_TOKENS + LOOKAHEAD,
        carry_frames: PROMPT_FRAMES + RETAINED,
    };
    let dev = DeviceFlow::new(dcc_runtime::backend::host(), &flow, limits).unwrap();
    let mut st = dev.new_state(solver, r_paper).unwrap();
    dev.setup_cache(&mut st, &prompt, &paper.prompt_mel, &paper.spk)
        .unwrap();
    assert_eq!(st.estimator_extent(), PROMPT_FRAMES);
    let st_vendor = dev.clone_state(&st, r_vendor).unwrap();
    println!(
        "setup_cache (both implementations): {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    let t0 = std::time::Instant::now();
    let f_paper = stream(&flow, &dev, &paper, cache.clone(), st, r_paper);
    let f_vendor = stream(&flow, &dev, &vendor, cache, st_vendor, r_vendor);
    println!(
        "2 x 6 chunks (both implementations): {:.1} s",
        t0.elapsed().as_secs_f64()
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
    assert_eq!(r_vendor.order, RetentionOrder::Vendor);
}
