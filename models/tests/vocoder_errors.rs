//! The vocoder's bad inputs give typed errors naming what was wrong, expected and found: a mel
//! chunk of the wrong width, use after the final chunk, a weights file missing a tensor or with
//! a noise table of the wrong shape, non-finite output. And the stream sizes the port derives
//! equal the vendor's (`context_sizes`, `limits`, recorded in the file's `config` metadata).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use dcc_models::vocoder::{CausalHift, StreamingVocoder, VocoderError, VocoderWeights};
use dcc_runtime::backend;
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny/vocoder.safetensors")
}

/// The tiny vocoder file with `edit` applied to each tensor (`None` drops it).
fn rewrite(
    edit: impl Fn(&str, Dtype, &[usize], &[u8]) -> Option<(Dtype, Vec<usize>, Vec<u8>)>,
) -> Vec<u8> {
    let bytes = std::fs::read(path()).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let metadata: HashMap<String, String> = meta.metadata().clone().unwrap();
    let kept: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = st
        .tensors()
        .into_iter()
        .filter_map(|(name, v)| {
            edit(&name, v.dtype(), v.shape(), v.data()).map(|(d, s, b)| (name, d, s, b))
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = kept
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize(views, Some(metadata)).unwrap()
}

fn same(_: &str, d: Dtype, s: &[usize], b: &[u8]) -> Option<(Dtype, Vec<usize>, Vec<u8>)> {
    Some((d, s.to_vec(), b.to_vec()))
}

fn load(bytes: &[u8]) -> Result<CausalHift, VocoderError> {
    let w = VocoderWeights::from_bytes(bytes, "edited.safetensors")?;
    CausalHift::load(backend::host().as_ref(), &w)
}

#[test]
fn a_missing_tensor_is_named() {
    let bytes = rewrite(|n, d, s, b| {
        (n != "resblocks.4.convs2.1.weight").then(|| (d, s.to_vec(), b.to_vec()))
    });
    let e = load(&bytes).unwrap_err();
    assert_eq!(
        e,
        VocoderError::Missing {
            file: "edited.safetensors".into(),
            name: "resblocks.4.convs2.1.weight".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "edited.safetensors: missing vocoder tensor `resblocks.4.convs2.1.weight`"
    );
}

#[test]
fn a_noise_table_of_the_wrong_shape_is_named_with_both_shapes() {
    let bytes = rewrite(|n, d, s, b| {
        if n == "noise_table" {
            // 8 values per row instead of the 9 harmonics
            let rows = b.len() / 4 / 8;
            Some((d, vec![1, rows, 8], b[..rows * 8 * 4].to_vec()))
        } else {
            same(n, d, s, b)
        }
    });
    let e = load(&bytes).unwrap_err();
    match &e {
        VocoderError::NoiseTable {
            harmonics, found, ..
        } => {
            assert_eq!(*harmonics, 9);
            assert_eq!((found.len(), found[0], found[2]), (3, 1, 8));
            assert_eq!(
                e.to_string(),
                format!(
                    "edited.safetensors: vocoder tensor `noise_table`: expected shape [1, rows > 0, 9], found {found:?}"
                )
            );
        }
        e => panic!("{e}"),
    }
    // a weight of the wrong shape names it too
    let bytes = rewrite(|n, d, s, b| {
        if n == "conv_post.bias" {
            Some((d, vec![s[0] - 1], b[4..].to_vec()))
        } else {
            same(n, d, s, b)
        }
    });
    let e = load(&bytes).unwrap_err().to_string();
    assert_eq!(
        e,
        "edited.safetensors: vocoder tensor `conv_post.bias`: expected shape [18], found [17]"
    );
}

fn stream() -> StreamingVocoder {
    let be = backend::host();
    let w = VocoderWeights::load(path()).unwrap();
    let model = Arc::new(CausalHift::load(be.as_ref(), &w).unwrap());
    StreamingVocoder::new(be, model).unwrap()
}

#[test]
fn wrong_mel_width_and_use_after_the_final_chunk() {
    let mut v = stream();
    let e = v.push(&vec![0.0; 79 * 4], 79, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "mel chunk: expected 80 mel bins per frame, found 79"
    );
    let e = v.push(&vec![0.0; 81], 80, false).unwrap_err();
    assert!(
        matches!(e, VocoderError::MelWidth { expected: 80, .. }),
        "{e}"
    );
    // a refused chunk leaves the stream untouched: 20 frames then the flush give 20 frames of
    // samples (the flush drains the 8-frame delay; the first output carries 8 frames of silence
    // unless it is the last)
    let first = v.push(&vec![-4.0; 80 * 20], 80, false).unwrap();
    let last = v.push(&[], 80, true).unwrap();
    assert_eq!(first.len(), (20 - 8 + 8) * 480);
    assert_eq!(last.len(), 8 * 480);
    assert!(v.is_finalized());
    assert_eq!(
        v.push(&vec![0.0; 80], 80, false).unwrap_err(),
        VocoderError::Finalized
    );
    assert_eq!(
        v.push(&vec![0.0; 80], 80, true).unwrap_err(),
        VocoderError::Finalized
    );
    assert_eq!(v.push(&[], 80, true).unwrap(), Vec::<f32>::new());
    // reset opens a new utterance with the same buffers, and gives the same audio
    v.reset().unwrap();
    let again = v.push(&vec![-4.0; 80 * 20], 80, false).unwrap();
    assert_eq!(again, first);
}

#[test]
fn non_finite_output_is_an_error() {
    let bytes = rewrite(|n, d, s, b| {
        if n == "conv_post.bias" {
            let mut b = b.to_vec();
            b[..4].copy_from_slice(&f32::NAN.to_le_bytes());
            Some((d, s.to_vec(), b))
        } else {
            same(n, d, s, b)
        }
    });
    let be = backend::host();
    let w = VocoderWeights::from_bytes(&bytes, "nan.safetensors").unwrap();
    let model = Arc::new(CausalHift::load(be.as_ref(), &w).unwrap());
    let mut v = StreamingVocoder::new(be, model).unwrap();
    let e = v.push(&vec![-4.0; 80 * 20], 80, false).unwrap_err();
    assert!(matches!(e, VocoderError::NonFinite { index: 0, .. }), "{e}");
}

/// The sizes the port derives from the weights equal those the vendor computed
/// (`context_sizes` and `BoundedVocoder.limits`, in the file's `config` metadata).
#[test]
fn limits_match_the_vendor() {
    let w = VocoderWeights::load(path()).unwrap();
    let cfg = dcc_models::vocoder::VocoderConfig::from_weights(&w).unwrap();
    let l = cfg.limits();
    let meta: serde_json::Value = serde_json::from_str(w.meta("config").unwrap()).unwrap();
    let want = |k: &str| meta["limits"][k].as_u64().unwrap() as usize;
    assert_eq!(
        (l.f0_left, l.f0_right, l.history, l.delay),
        (
            want("f0_left_frames"),
            want("f0_right_frames"),
            want("decoder_history_frames"),
            want("delay_frames")
        )
    );
    assert_eq!(l.mel_buffer, want("mel_buffer_frames"));
    assert_eq!(l.source_buffer, want("source_buffer_frames"));
    assert_eq!(l.f0_input, want("f0_input_frames"));
    assert_eq!(l.decoder_input, want("decoder_input_frames"));
    assert_eq!((l.delay, cfg.hop(), cfg.harmonics), (8, 480, 9));
    assert_eq!(
        meta["source_cache_len"].as_u64().unwrap() as usize,
        l.delay * cfg.hop()
    );
}
