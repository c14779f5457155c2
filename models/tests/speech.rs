//! Tokens to PCM through the public API ([`dcc_models::speech`]) on the tiny model (Host
//! backend): every arm streams B0's PCM bit for bit; the flow's mel reaches the vocoder in the
//! vendor's layout (it matches the vendor's `feat_i`, `[1, 80, 50]`); the sample accounting
//! (leading silence, final flush); a restarted stream repeats its audio; refused calls leave the
//! stream as it was, and a finished stream refuses more chunks. The replay arms serve the
//! vocoder through its contract's replay engines, the eager arms eagerly.

use dcc_models::speech::{Prompt, SpeechError, SpeechModel};
use dcc_models::token2wav::serve::{Arm, ContractView, Token2WavTiny};
use safetensors::SafeTensors;

mod common;
use common::{dir, floats, tokens};

/// Chunks per stream: the tiny vocoder's noise table (101 frames) holds two 50-frame chunks.
const CHUNKS: usize = 2;
/// SHA-256 of B0's PCM (f32 little-endian, both chunks and the flush) of the vendor's exported
/// prompt and tokens: what the port streamed when the API was written.
const B0_PCM_SHA: &str = "ffc766ec361b9a11";

fn model() -> SpeechModel {
    SpeechModel::load(
        dcc_runtime::backend::host(),
        dir().join("weights.safetensors"),
        dir().join("vocoder.safetensors"),
        ContractView::of::<Token2WavTiny>().unwrap(),
    )
    .unwrap()
}

struct Io {
    prompt: Vec<u32>,
    mel: Vec<f32>,
    spk: Vec<f32>,
    stream: Vec<u32>,
    feats: Vec<Vec<f32>>,
}

fn io() -> Io {
    let bytes = std::fs::read(dir().join("io.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    Io {
        prompt: tokens(&st, "prompt_tokens"),
        mel: floats(&st, "prompt_mel"),
        spk: floats(&st, "spk"),
        stream: tokens(&st, "stream_tokens"),
        feats: (0..CHUNKS)
            .map(|i| floats(&st, &format!("feat_{i}")))
            .collect(),
    }
}

impl Io {
    fn prompt(&self) -> Prompt<'_> {
        Prompt {
            tokens: &self.prompt,
            mel: &self.mel,
            spk: &self.spk,
        }
    }

    fn chunk(&self, i: usize) -> &[u32] {
        &self.stream[i * 25..i * 25 + 28]
    }
}

fn sha(pcm: &[f32]) -> String {
    let b: Vec<u8> = pcm.iter().flat_map(|x| x.to_le_bytes()).collect();
    dcc_runtime::sha256_hex(&b)
}

#[test]
fn every_arm_streams_b0s_pcm() {
    let (m, io) = (model(), io());
    let total = CHUNKS * 50 * m.samples_per_frame() + m.leading_silence();
    assert_eq!((m.samples_per_frame(), m.leading_silence()), (480, 3840));
    let mut b0: Option<String> = None;
    for arm in Arm::ALL {
        let mut s = m.open(arm, &io.prompt()).unwrap();
        let mut pcm = Vec::new();
        for i in 0..CHUNKS {
            let c = s.push_chunk(io.chunk(i)).unwrap();
            // the mel the vocoder took, in the vendor's `[80, frames]` layout
            assert_eq!(c.frames, 50);
            let e = dcc_models::token2wav::rel_l2(&c.mel, &io.feats[i]).unwrap();
            assert!(
                e < 1e-4,
                "{arm:?}, chunk {i}: mel rel-L2 {e:.3e} to feat_{i}"
            );
            // the first chunk: its 42 frames after the 8 held back, behind 8 frames of silence
            assert_eq!(c.pcm.len(), 50 * 480, "{arm:?}, chunk {i}");
            if i == 0 {
                assert!(c.pcm[..3840].iter().all(|&x| x == 0.0));
                assert!(c.pcm[3840..].iter().any(|&x| x != 0.0));
            }
            pcm.extend(c.pcm);
        }
        let tail = s.finish(&[]).unwrap();
        assert_eq!(tail.len(), 8 * 480, "{arm:?}: the flush");
        pcm.extend(tail);
        assert_eq!(pcm.len(), total);
        assert!(s.is_finished());
        // a replay arm serves the vocoder through its contract's engines, an eager arm eagerly
        let r = s.vocoder_replay_reports();
        if arm.replay().is_some() {
            let names: Vec<&str> = r.iter().map(|r| r.callable.as_str()).collect();
            assert_eq!(names, ["vocoder", "vocoder_flush"], "{arm:?}");
            let calls: Vec<u64> = r.iter().map(|r| r.calls).collect();
            assert_eq!(calls, [CHUNKS as u64, 1], "{arm:?}: calls per engine");
            for e in &r {
                assert_eq!(e.calls, e.replays + e.eager_calls(), "{arm:?}: {e:?}");
            }
            // each call of one pass is a class of its own: probation, then capture
            let captured: Vec<usize> = r.iter().map(|r| r.classes_captured).collect();
            assert_eq!(captured, [CHUNKS, 1], "{arm:?}: classes captured");
        } else {
            assert!(r.is_empty(), "{arm:?}: an eager arm has no vocoder engines");
        }
        let h = sha(&pcm);
        match &b0 {
            None => {
                assert_eq!(&h[..16], B0_PCM_SHA, "B0's PCM moved");
                b0 = Some(h);
            }
            Some(b) => assert_eq!(&h, b, "{arm:?}'s PCM differs from B0's"),
        }
    }
}

#[test]
fn a_restarted_stream_repeats_its_audio_and_refused_calls_change_nothing() {
    let (m, io) = (model(), io());
    let mut s = m.open(Arm::SRc, &io.prompt()).unwrap();
    let run = |s: &mut dcc_models::speech::SpeechStream| {
        let mut pcm = Vec::new();
        for i in 0..CHUNKS {
            // a non-final chunk too short for its lookahead is refused with the stream untouched
            let Err(e) = s.push(&io.chunk(i)[..4]) else {
                panic!("a 4-token chunk was accepted");
            };
            assert!(matches!(e, SpeechError::Flow(_)), "{e}");
            assert!(s.failure().is_none());
            pcm.extend(s.push(io.chunk(i)).unwrap());
        }
        pcm.extend(s.finish(&[]).unwrap());
        pcm
    };
    let first = run(&mut s);
    assert_eq!(s.chunks(), CHUNKS + 1);
    // finished: no more chunks until a restart
    assert_eq!(s.push(io.chunk(0)).err(), Some(SpeechError::Finished));
    assert_eq!(s.finish(&[]).err(), Some(SpeechError::Finished));
    s.restart(&io.prompt()).unwrap();
    assert_eq!(s.chunks(), 0);
    let second = run(&mut s);
    assert_eq!(
        sha(&first),
        sha(&second),
        "the restarted stream's audio differs"
    );
    assert_eq!(&sha(&first)[..16], B0_PCM_SHA);
    // the restarted pass met the classes the first captured: every vocoder call replayed
    let replays: Vec<u64> = s
        .vocoder_replay_reports()
        .iter()
        .map(|r| r.replays)
        .collect();
    assert_eq!(
        replays,
        [CHUNKS as u64, 1],
        "the second pass's vocoder replays"
    );
}

#[test]
fn a_prompt_of_another_size_is_refused_naming_the_contract() {
    let (m, io) = (model(), io());
    let short = Prompt {
        tokens: &io.prompt[1..],
        ..io.prompt()
    };
    let e = m.open(Arm::B0, &short).err().unwrap();
    assert_eq!(
        e,
        SpeechError::Prompt {
            contract: "token2wav_tiny",
            what: "tokens",
            expected: 151,
            found: 150,
        }
    );
    assert!(e.to_string().contains("expects 151, found 150"), "{e}");
    // a mel of another size: the flow's refusal
    let mel = &io.mel[80..];
    let e = m
        .open(Arm::B0, &Prompt { mel, ..io.prompt() })
        .err()
        .unwrap();
    assert!(
        matches!(&e, SpeechError::Flow(_)) && e.to_string().contains("prompt mel"),
        "{e}"
    );
}
