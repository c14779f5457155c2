//! The vocoder served by exact-shape replay under the tiny contract (`token2wav_tiny`): the
//! `vocoder` and `vocoder_flush` engines capture one graph per class the stream reaches (the
//! first chunk, every later chunk, the flush) and replay them with zero steady-state
//! fallbacks, bit for bit equal to the eager stream, far past the tiny noise table's 48,480 rows
//! (101 frames), where the rows wrap.

use std::sync::Arc;

use dcc_models::vocoder::{
    CausalHift, StreamingVocoder, VocoderContract, VocoderError, VocoderWeights,
};
use dcc_runtime::backend::{self, Backend};
use dcc_runtime::replay::Fallback;
use safetensors::SafeTensors;

fn dir() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

fn model(be: &Arc<dyn Backend>) -> Arc<CausalHift> {
    let w = VocoderWeights::load(dir().join("vocoder.safetensors")).unwrap();
    Arc::new(CausalHift::load(be.as_ref(), &w).unwrap())
}

/// The golden mel, channel-major `[80, 100]`.
fn golden_mel() -> Vec<f32> {
    let bytes = std::fs::read(dir().join("vocoder_golden.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    st.tensor("mel")
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Frames `at..at + n` of a `[80, frames]` mel that repeats the golden one (read modulo its 100
/// frames, each repeat scaled so no two chunks are equal).
fn chunk(mel: &[f32], at: usize, n: usize) -> Vec<f32> {
    let total = mel.len() / 80;
    (0..80)
        .flat_map(|ch| {
            (at..at + n)
                .map(move |t| mel[ch * total + t % total] * (1.0 + 0.01 * (t / total) as f32))
        })
        .collect()
}

/// Pushes `sizes` (the last one `last`), then an empty final push unless the last was final;
/// returns every push's samples.
fn run(voc: &mut StreamingVocoder, mel: &[f32], sizes: &[usize], last: bool) -> Vec<Vec<f32>> {
    let mut out = Vec::new();
    let mut at = 0;
    for (i, &n) in sizes.iter().enumerate() {
        let fin = last && i + 1 == sizes.len();
        out.push(voc.push(&chunk(mel, at, n), 80, fin).unwrap());
        at += n;
    }
    if !last {
        out.push(voc.push(&[], 80, true).unwrap());
    }
    out
}

fn bits(v: &[Vec<f32>]) -> Vec<u32> {
    v.iter().flatten().map(|x| x.to_bits()).collect()
}

fn tiny() -> VocoderContract {
    VocoderContract::of::<dcc_generated::token2wav_tiny::Contract>().unwrap()
}

/// The golden stream's PCM (50 + 50 frames, then the flush) on the eager path, by SHA-256 of its
/// little-endian floats: the bits the port gave before the capturable restructuring.
#[test]
fn eager_pcm_bits_are_unchanged() {
    let be = backend::host();
    let mut voc = StreamingVocoder::new(be.clone(), model(&be)).unwrap();
    let out = run(&mut voc, &golden_mel(), &[50, 50], false);
    let bytes: Vec<u8> = out.iter().flatten().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(bytes.len(), 51_840 * 4);
    assert_eq!(
        dcc_runtime::sha256_hex(&bytes),
        "c137d402ab68e6461f58605e616da226941f113cc2209de0d4ca5a7f50d160e4"
    );
}

/// Nine chunks of 50 frames (450 frames: the noise rows wrap after 101) and the flush: replay
/// equals eager bit for bit, every class the walk reaches is captured (the first chunk, every
/// later chunk: the contract's 2 chunk classes; the flush after a full chunk), the only eager
/// calls are their probes, and the device counters end where the vendor's do.
#[test]
fn replay_equals_eager_with_zero_steady_state_fallbacks() {
    replay_equals_eager(backend::host());
}

/// The same on the GPU (skipped without one; `DCC_REQUIRE_GPU=1` makes a missing GPU a
/// failure): the captured graphs are CUDA graphs there.
#[test]
fn cuda_replay_equals_eager_with_zero_steady_state_fallbacks() {
    match backend::cuda(0) {
        Ok(be) => replay_equals_eager(be),
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
        }
    }
}

fn replay_equals_eager(be: Arc<dyn Backend>) {
    let m = model(&be);
    let mel = golden_mel();
    let sizes = [50; 9];
    let mut eager = StreamingVocoder::new(be.clone(), m.clone()).unwrap();
    let want = run(&mut eager, &mel, &sizes, false);
    let mut voc = StreamingVocoder::with_replay(be.clone(), m, tiny()).unwrap();
    let got = run(&mut voc, &mel, &sizes, false);
    assert_eq!(got.iter().map(Vec::len).sum::<usize>(), 450 * 480 + 3840);
    assert_eq!(bits(&got), bits(&want));
    let r = voc.replay_reports();
    let (v, f) = (&r[0], &r[1]);
    println!("{v}\n{f}");
    assert_eq!(
        (v.callable.as_str(), f.callable.as_str()),
        ("vocoder", "vocoder_flush")
    );
    let contract = tiny();
    assert_eq!(v.catalog_classes, contract.vocoder.catalog.len());
    assert_eq!((v.classes_captured, f.classes_captured), (2, 1));
    assert_eq!((v.calls, v.replays), (9, 7));
    assert_eq!(
        v.fallbacks.iter().collect::<Vec<_>>(),
        [(&Fallback::Probation, &2)]
    );
    assert_eq!((f.calls, f.replays, f.eager_calls()), (1, 0, 1));
    assert_eq!(f.fallback(Fallback::Probation), 1);
    assert!(v.rejected.is_none() && f.rejected.is_none());
    // the vendor's counters after 450 frames and the flush: mel_offset = source_offset =
    // min(450 - 31, 450 - 8), source_end = emitted = 450, finalized
    assert_eq!(voc.counters().unwrap(), [419, 419, 450, 450, 1]);
    assert_eq!(eager.counters().unwrap(), [419, 419, 450, 450, 1]);

    // a second utterance on the same stream: the captured graphs serve it, the flush too
    voc.reset().unwrap();
    eager.reset().unwrap();
    let again = run(&mut voc, &mel, &sizes, false);
    assert_eq!(bits(&again), bits(&run(&mut eager, &mel, &sizes, false)));
    let r = voc.replay_reports();
    assert_eq!((r[0].calls, r[0].replays, r[0].eager_calls()), (18, 16, 2));
    assert_eq!((r[1].calls, r[1].replays, r[1].eager_calls()), (2, 1, 1));
}

/// Chunks the catalog does not hold (a short last chunk, an uneven first one, a push longer than
/// a call) run eager, counted as signature misses, with the eager stream's bits; the flush of a
/// stream with no frames is its empty-history class.
#[test]
fn off_catalog_calls_fall_back_counted_with_the_same_bits() {
    let be = backend::host();
    let m = model(&be);
    let mel = golden_mel();
    for (sizes, last) in [
        (&[50, 50, 50, 23][..], true),
        (&[7, 50, 120, 50][..], false),
        (&[][..], false),
    ] {
        let mut eager = StreamingVocoder::new(be.clone(), m.clone()).unwrap();
        let mut voc = StreamingVocoder::with_replay(be.clone(), m.clone(), tiny()).unwrap();
        let want = run(&mut eager, &mel, sizes, last);
        let got = run(&mut voc, &mel, sizes, last);
        assert_eq!(bits(&got), bits(&want), "{sizes:?}");
        let r = voc.replay_reports();
        println!("{sizes:?}: {}\n{}", r[0], r[1]);
        let misses = r[0].fallback(Fallback::SignatureMiss);
        let expect = match sizes {
            [_, _, _, 23] => 1,
            // 7 (an uneven first chunk), 50 after it (a 7-frame history), 48 + 48 + 24 of
            // the 120; the last 50 meets the steady class
            [7, ..] => 5,
            _ => 0,
        };
        assert_eq!(misses, expect, "{sizes:?}");
        assert_eq!(r[1].calls, 1);
        assert_eq!(r[1].eager_calls(), 1, "{sizes:?}: the flush's probe");
    }
}

/// A contract whose noise table has other rows than the model's is refused, naming both.
#[test]
fn a_contract_of_another_noise_table_is_refused() {
    let be = backend::host();
    let full = VocoderContract::token2wav().unwrap();
    match StreamingVocoder::with_replay(be.clone(), model(&be), full) {
        Err(VocoderError::Contract {
            expected, found, ..
        }) => assert_eq!((expected.as_str(), found.as_str()), ("48480", "7200000")),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("accepted a contract of 7,200,000 noise rows"),
    }
}
