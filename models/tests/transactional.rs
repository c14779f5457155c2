//! Nothing lost, nothing falsely passed: a session call that is refused leaves the session
//! exactly as it was (a corrected retry emits the clean stream's mel bit for bit), and a call
//! that fails once its device work has begun fails the session until it is primed again,
//! without touching any other session on the same flow. Tiny model, Host backend, an eager arm
//! (B0), the state rule's eager arm (S) and a chunk-clock replay arm (SRc).
//!
//! A mid-call failure is provoked with the session's hidden test hook
//! (`Session::inject_fault_after_encoder`): the next chunk call returns a device error after
//! its encoder has written the session's caches and before the flow runs, the half-written
//! state a real device fault would leave.

use std::sync::Arc;

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{Arm, ContractView, Session, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, FlowError, SolverParams};
use safetensors::SafeTensors;

mod common;
use common::{dir, floats, tokens};

const CHUNKS: usize = 4;
const ARMS: [Arm; 3] = [Arm::B0, Arm::S, Arm::SRc];

/// The tiny model's stream and a flow on the Host backend.
struct Fixture {
    dev: Arc<DeviceFlow>,
    contract: ContractView,
    prompt: Vec<u32>,
    mel: Vec<f32>,
    spk: Vec<f32>,
    stream: Vec<u32>,
}

impl Fixture {
    fn new() -> Fixture {
        let bytes = std::fs::read(dir().join("io.safetensors")).unwrap();
        let io = SafeTensors::deserialize(&bytes).unwrap();
        let mut prompt = tokens(&io, "prompt_tokens");
        prompt.extend_from_within(..3);
        let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
        let cfg = FlowConfig::from_weights(&ws).unwrap();
        let contract = ContractView::of::<Token2WavTiny>().unwrap();
        let limits = DeviceLimits {
            max_call_tokens: prompt.len(),
            carry_frames: contract.keeps.carry.bound(),
        };
        let dev =
            Arc::new(DeviceFlow::new(dcc_runtime::backend::host(), &ws, &cfg, limits).unwrap());
        Fixture {
            dev,
            contract,
            prompt,
            mel: floats(&io, "prompt_mel"),
            spk: floats(&io, "spk"),
            stream: tokens(&io, "stream_tokens"),
        }
    }

    fn session(&self, arm: Arm) -> Session {
        Session::new(
            self.dev.clone(),
            self.contract,
            arm,
            SolverParams::default(),
        )
        .unwrap()
    }

    fn chunk_tokens(&self, i: usize) -> &[u32] {
        &self.stream[i * 25..i * 25 + 28]
    }

    fn prime(&self, s: &mut Session) {
        s.prime(&self.prompt, &self.mel, &self.spk).unwrap();
    }

    fn chunk(&self, s: &mut Session, i: usize) -> Vec<f32> {
        s.chunk(self.chunk_tokens(i), &self.spk, false).unwrap()
    }

    /// A clean stream: prime, then every chunk.
    fn clean(&self, arm: Arm) -> Vec<Vec<f32>> {
        let mut s = self.session(arm);
        self.prime(&mut s);
        (0..CHUNKS).map(|i| self.chunk(&mut s, i)).collect()
    }
}

fn bits(m: &[Vec<f32>]) -> Vec<Vec<u32>> {
    m.iter()
        .map(|c| c.iter().map(|x| x.to_bits()).collect())
        .collect()
}

fn is_input<T>(r: Result<T, FlowError>) {
    assert!(matches!(r, Err(FlowError::Input(_))), "{:?}", r.err());
}

fn is_failed<T>(r: Result<T, FlowError>) {
    assert!(
        matches!(r, Err(FlowError::SessionFailed(_))),
        "{:?}",
        r.err()
    );
}

/// Every refused call between the clean stream's calls: the mel of every chunk is the clean
/// stream's, bit for bit.
#[test]
fn refused_calls_leave_the_session_as_it_was() {
    let fx = Fixture::new();
    let vocab = fx.dev.config().vocab as u32;
    for arm in ARMS {
        let clean = fx.clean(arm);
        let mut s = fx.session(arm);
        // before prime: no audio, a typed error, for either entry point
        assert!(matches!(
            s.chunk(fx.chunk_tokens(0), &fx.spk, false),
            Err(FlowError::NotPrimed)
        ));
        assert!(matches!(
            s.enqueue_uploaded(28, false),
            Err(FlowError::NotPrimed)
        ));
        // a poisoned prompt is refused (and the session stays unprimed)
        let mut nan_mel = fx.mel.clone();
        nan_mel[17] = f32::NAN;
        is_input(s.prime(&fx.prompt, &nan_mel, &fx.spk));
        let mut inf_spk = fx.spk.clone();
        inf_spk[3] = f32::INFINITY;
        is_input(s.prime(&fx.prompt, &fx.mel, &inf_spk));
        assert!(!s.state().primed());
        fx.prime(&mut s);
        let mut got = Vec::new();
        for i in 0..CHUNKS {
            let toks = fx.chunk_tokens(i);
            let mut out_of_vocab = toks.to_vec();
            out_of_vocab[20] = vocab;
            is_input(s.chunk(&out_of_vocab, &fx.spk, false));
            let mut nan_spk = fx.spk.clone();
            nan_spk[0] = f32::NAN;
            is_input(s.chunk(toks, &nan_spk, false));
            is_input(s.chunk(toks, &fx.spk[1..], false));
            is_input(s.chunk(&toks[..4], &fx.spk, false));
            is_input(s.enqueue_uploaded(1, true));
            let too_many = vec![1; fx.prompt.len() + 1];
            is_input(s.chunk(&too_many, &fx.spk, false));
            // a bad re-prime in mid-stream does not reset the stream
            is_input(s.prime(&fx.prompt, &nan_mel, &fx.spk));
            is_input(s.prime(&fx.prompt, &fx.mel[80..], &fx.spk));
            got.push(fx.chunk(&mut s, i));
        }
        assert!(s.failure().is_none());
        assert!(
            bits(&got) == bits(&clean),
            "{arm:?}: a refused call moved the stream"
        );
    }
}

/// A failure after the encoder ran fails the session: every later call is refused with
/// `SessionFailed` (a bad prime too, which leaves it failed) until `prime` succeeds, after
/// which the stream is the clean one.
#[test]
fn a_failure_mid_call_fails_the_session_until_prime() {
    let fx = Fixture::new();
    for arm in ARMS {
        let clean = fx.clean(arm);
        let mut s = fx.session(arm);
        fx.prime(&mut s);
        assert!(bits(&[fx.chunk(&mut s, 0)]) == bits(&clean[..1]), "{arm:?}");
        s.inject_fault_after_encoder();
        let r = s.chunk(fx.chunk_tokens(1), &fx.spk, false).err();
        assert!(matches!(r, Some(FlowError::Device(_))), "{arm:?}: {r:?}");
        assert!(s.failure().is_some());
        // never continues from the half-written state
        is_failed(s.chunk(fx.chunk_tokens(1), &fx.spk, false));
        is_failed(s.chunk(fx.chunk_tokens(2), &fx.spk, true));
        is_failed(s.enqueue_uploaded(28, false));
        let mut nan_mel = fx.mel.clone();
        nan_mel[0] = f32::NAN;
        is_input(s.prime(&fx.prompt, &nan_mel, &fx.spk));
        is_failed(s.chunk(fx.chunk_tokens(1), &fx.spk, false));
        fx.prime(&mut s);
        assert!(s.failure().is_none());
        let again: Vec<_> = (0..CHUNKS).map(|i| fx.chunk(&mut s, i)).collect();
        assert!(
            bits(&again) == bits(&clean),
            "{arm:?}: re-primed stream differs"
        );
    }
}

/// Two sessions on one flow, calls interleaved: one fails mid-call and stays failed, the
/// other's mel is bit for bit the mel it emits alone.
#[test]
fn a_failed_session_leaves_another_alone() {
    let fx = Fixture::new();
    for arm in ARMS {
        let alone = fx.clean(arm);
        let (mut a, mut b) = (fx.session(arm), fx.session(Arm::SRc));
        fx.prime(&mut a);
        fx.prime(&mut b);
        let mut got = Vec::new();
        for i in 0..CHUNKS {
            if i == 1 {
                b.inject_fault_after_encoder();
                assert!(b.chunk(fx.chunk_tokens(i), &fx.spk, false).is_err());
            } else if i > 1 {
                is_failed(b.chunk(fx.chunk_tokens(i), &fx.spk, false));
            } else {
                fx.chunk(&mut b, i);
            }
            got.push(fx.chunk(&mut a, i));
        }
        assert!(
            bits(&got) == bits(&alone),
            "{arm:?}: the other session moved"
        );
    }
}
