//! Tokens to 24 kHz audio, end to end: the Token2Wav flow decoder (speech tokens → mel) and the
//! streaming causal HiFT vocoder (mel → PCM), composed per chunk as the vendor's
//! `Token2wav.stream` composes them (minicpmo-utils 1.0.7).
//!
//! [`SpeechModel`] holds what every stream shares: the flow's weights and workspace
//! ([`DeviceFlow`]), the vocoder's weights and noise table ([`CausalHift`]), the contract the
//! flow is served under and the solver's parameters. [`SpeechModel::open`] starts one stream
//! ([`SpeechStream`]) with a speaker prompt, served by one of the six arms ([`Arm`]); every arm
//! gives the same PCM bit for bit, so the arm only chooses how the work runs: the flow eager or
//! replayed, in stock state or the contract's arena, and the vocoder eager (B0, S) or through
//! its contract's replay engines (the replay arms). Each [`SpeechStream::push`] of a chunk of
//! speech tokens runs the flow on it and hands the mel it emits (`[80 mel bins, frames]`,
//! channel-major, the layout both sides use) straight to the vocoder, and returns the chunk's PCM;
//! [`SpeechStream::finish`] ends the utterance and returns the vocoder's tail.
//!
//! **How many samples.** A stream of chunks of `f` frames each (50 in the bundled contracts)
//! returns `f · 480 + 3,840` samples for its first chunk (the vocoder holds back 8 frames of
//! look-ahead and prefixes the first output with as many samples of silence), `f · 480` for each
//! later one, and the final flush returns the 8 held frames, so an utterance of `N` frames is
//! `N · 480 + 3,840` samples at 24 kHz.
//!
//! # Examples
//!
//! Two chunks through the tiny test model on the Host backend (the CPU twin of the CUDA
//! backend; `dcc_runtime::backend::cuda(0)?` runs the same code on a GPU):
//!
//! ```
//! use dcc_models::speech::{Prompt, SpeechModel};
//! use dcc_models::token2wav::serve::{Arm, ContractView, Token2WavTiny};
//!
//! let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/token2wav_tiny");
//! let model = SpeechModel::load(
//!     dcc_runtime::backend::host(),
//!     format!("{dir}/weights.safetensors"),
//!     format!("{dir}/vocoder.safetensors"),
//!     ContractView::of::<Token2WavTiny>()?,
//! )?;
//! // A speaker prompt of the size the contract is laid out for: its speech tokens, its mel
//! // (`[frames, 80]`, frame-major, as the vendor's `_prepare_prompt` makes it) and its speaker
//! // embedding. Real prompts come from the vendor's front end; any valid values will do here.
//! let tokens: Vec<u32> = (0..model.prompt_tokens() as u32).map(|i| i * 37 % 6561).collect();
//! let mel = vec![-4.0f32; model.prompt_frames() * model.mel_bins()];
//! let spk = vec![0.1f32; model.speaker_dim()];
//! let prompt = Prompt { tokens: &tokens, mel: &mel, spk: &spk };
//!
//! let mut stream = model.open(Arm::SRc, &prompt)?;
//! let chunk = model.chunk_tokens() + model.lookahead_tokens(); // 25 new tokens + 3 ahead
//! let speech: Vec<u32> = (0..2 * 25 + 3).map(|i| i * 101 % 6561).collect();
//! let mut pcm = stream.push(&speech[..chunk])?; // 50 frames: 42 · 480 + 3,840 samples
//! pcm.extend(stream.push(&speech[25..25 + chunk])?); // 50 frames · 480
//! pcm.extend(stream.finish(&[])?); // the 8 frames the vocoder held back
//! assert_eq!(pcm.len(), 100 * 480 + 3840);
//! assert_eq!(model.sample_rate(), 24_000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `cargo run -p dcc-models --example stream -- out.wav` writes such a stream, from the vendor's
//! exported prompt and tokens, to a WAV file.

mod error;
mod stream;

use std::path::Path;
use std::sync::Arc;

use dcc_runtime::backend::Backend;

use crate::nn::WeightStore;
use crate::token2wav::serve::{Arm, ContractView, Session};
use crate::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, FlowError, SolverParams};
use crate::vocoder::{CausalHift, StreamingVocoder, VocoderContract, VocoderError, VocoderWeights};

pub use error::SpeechError;
pub use stream::{ChunkTiming, SpeechChunk, SpeechStream};

/// A speaker prompt: what the vendor's `Token2wav.set_stream_cache` primes a stream with.
#[derive(Copy, Clone, Debug)]
pub struct Prompt<'a> {
    /// The prompt's speech tokens ([`SpeechModel::prompt_tokens`] of them). The stream appends
    /// their first `lookahead` tokens as the priming call's lookahead, as the vendor does
    /// (`torch.cat([prompt_tokens, prompt_tokens[:, :3]])`).
    pub tokens: &'a [u32],
    /// The prompt's mel, `[frames, mel bins]` frame-major ([`SpeechModel::prompt_frames`] ×
    /// [`SpeechModel::mel_bins`] values).
    pub mel: &'a [f32],
    /// The speaker embedding ([`SpeechModel::speaker_dim`] values).
    pub spk: &'a [f32],
}

/// The flow and the vocoder on one backend, under one contract: what every stream shares.
/// Streams ([`SpeechModel::open`]) hold their own state and share these weights.
pub struct SpeechModel {
    flow: Arc<DeviceFlow>,
    vocoder: Arc<CausalHift>,
    contract: ContractView,
    /// The vocoder's declarations in the same contract: the replay arms serve the vocoder
    /// through its engines.
    vocoder_contract: VocoderContract,
    solver: SolverParams,
    prompt_tokens: usize,
}

impl SpeechModel {
    /// Loads the flow's weights (`flow_weights`: the vendor's `flow.pt` state_dict names and
    /// its CFM noise table `decoder.rand_noise`) and the vocoder's (`vocoder_weights`: the
    /// vendor's `hift.pt` names, weight norm folded, and the `noise_table` its `SineGen2` drew)
    /// onto `backend`, with the flow's workspace sized for `contract`'s prompt and chunks, and
    /// compiles the modules of every kernel the two may launch now ([`DeviceFlow::kernels`],
    /// [`CausalHift::kernels`]) so that no compilation lands in a stream's first chunk.
    /// `scripts/convert_checkpoint.py` makes both files from the vendor's released checkpoints.
    ///
    /// # Errors
    ///
    /// [`SpeechError::Flow`] or [`SpeechError::Vocoder`] when a file cannot be read, lacks a
    /// tensor or holds one of another shape or dtype (the message names the file and the
    /// tensor), or describes an unsupported configuration; [`SpeechError::MelBins`] when the
    /// two files are not one model; [`SpeechError::Flow`] when the backend refuses an
    /// allocation or a module.
    pub fn load(
        backend: Arc<dyn Backend>,
        flow_weights: impl AsRef<Path>,
        vocoder_weights: impl AsRef<Path>,
        contract: ContractView,
    ) -> Result<SpeechModel, SpeechError> {
        let ws = WeightStore::load(flow_weights.as_ref()).map_err(FlowError::from)?;
        let cfg = FlowConfig::from_weights(&ws)?;
        let limits = SpeechModel::flow_limits(&cfg, &contract)?;
        let flow = DeviceFlow::new(backend.clone(), &ws, &cfg, limits)?;
        let vw = VocoderWeights::load(vocoder_weights)?;
        let vocoder = CausalHift::load(backend.as_ref(), &vw)?;
        let mut kernels = flow.kernels();
        kernels.extend(vocoder.kernels());
        backend.preload(&kernels).map_err(FlowError::from)?;
        SpeechModel::from_parts(Arc::new(flow), Arc::new(vocoder), contract)
    }

    /// A model over a flow and a vocoder already on one backend (say, a flow built with
    /// [`DeviceFlow::with_gemm`] or with larger [`DeviceLimits`]). The flow's workspace must
    /// take the contract's calls ([`SpeechModel::flow_limits`]).
    ///
    /// # Errors
    ///
    /// [`SpeechError::MelBins`] when the flow emits another number of mel bins than the vocoder
    /// reads; [`SpeechError::Flow`] when the contract's prompt is not a whole number of tokens;
    /// [`SpeechError::Vocoder`] when the contract is not one of the bundled Token2Wav contracts
    /// (the vocoder's declarations are read from the generated module of its family).
    pub fn from_parts(
        flow: Arc<DeviceFlow>,
        vocoder: Arc<CausalHift>,
        contract: ContractView,
    ) -> Result<SpeechModel, SpeechError> {
        let (mel, c_in) = (flow.config().mel, vocoder.cfg.in_channels);
        if mel != c_in {
            return Err(SpeechError::MelBins {
                flow: mel,
                vocoder: c_in,
            });
        }
        let prompt_tokens = prompt_tokens(flow.config(), &contract)?;
        let vocoder_contract = vocoder_contract(&contract)?;
        Ok(SpeechModel {
            flow,
            vocoder,
            contract,
            vocoder_contract,
            solver: SolverParams::default(),
            prompt_tokens,
        })
    }

    /// The same model with other solver parameters for the streams it opens (the vendor's
    /// defaults otherwise: 10 Euler steps, CFG rate 0.7, temperature 1).
    pub fn with_solver(mut self, solver: SolverParams) -> SpeechModel {
        self.solver = solver;
        self
    }

    /// The flow workspace's sizes `contract` needs: its priming call (the prompt and its
    /// lookahead) and its chunk calls, and its caches' kept frames.
    ///
    /// # Errors
    ///
    /// [`SpeechError::Flow`] when the contract's prompt frames are not a whole number of
    /// tokens at the flow's upsampling rate.
    pub fn flow_limits(
        cfg: &FlowConfig,
        contract: &ContractView,
    ) -> Result<DeviceLimits, SpeechError> {
        let prompt_call = prompt_tokens(cfg, contract)? + contract.lookahead_tokens;
        let k = contract.keeps;
        Ok(DeviceLimits {
            max_call_tokens: prompt_call.max(contract.call_tokens()),
            carry_frames: k.carry.bound().max(k.upsample.bound()),
        })
    }

    /// Opens a stream served by `arm` and primes it with `prompt`. The stream holds its own
    /// flow state (and, for a replay arm, its replay engines) and its own vocoder state. A
    /// replay arm ([`Arm::replay`] is `Some`) serves the vocoder through the contract's replay
    /// engines too ([`StreamingVocoder::with_replay`]); an eager arm runs it eagerly
    /// ([`StreamingVocoder::new`]). Both give the same PCM bit for bit.
    ///
    /// # Errors
    ///
    /// [`SpeechError::Prompt`] when the prompt's token count is not the contract's;
    /// [`SpeechError::Flow`] when the flow refuses the prompt (a mel of another size, a
    /// non-finite value, a token outside the vocabulary, a speaker embedding of another width)
    /// or the backend refuses the stream's buffers; [`SpeechError::Vocoder`] likewise for the
    /// vocoder's buffers, or (a replay arm) when the vocoder's noise table has another number
    /// of rows than the contract declares.
    pub fn open(&self, arm: Arm, prompt: &Prompt<'_>) -> Result<SpeechStream, SpeechError> {
        let shape = stream::Shape {
            contract: self.contract.family,
            prompt_tokens: self.prompt_tokens,
            lookahead: self.lookahead_tokens(),
            mel_bins: self.mel_bins(),
        };
        shape.check_prompt(prompt)?;
        let flow = Session::new(self.flow.clone(), self.contract, arm, self.solver)?;
        let be = self.flow.backend().clone();
        let vocoder = match arm.replay() {
            Some(_) => {
                StreamingVocoder::with_replay(be, self.vocoder.clone(), self.vocoder_contract)?
            }
            None => StreamingVocoder::new(be, self.vocoder.clone())?,
        };
        let mut s = SpeechStream::new(flow, vocoder, shape);
        s.restart(prompt)?;
        Ok(s)
    }

    /// Output samples per second (24,000).
    pub fn sample_rate(&self) -> u32 {
        self.vocoder.cfg.sampling_rate as u32
    }

    /// Output samples per mel frame (480).
    pub fn samples_per_frame(&self) -> usize {
        self.vocoder.cfg.hop()
    }

    /// Samples of silence the first chunk's audio starts with (3,840: the vocoder's 8-frame
    /// look-ahead, returned by the final flush).
    pub fn leading_silence(&self) -> usize {
        self.vocoder.limits.delay * self.vocoder.cfg.hop()
    }

    /// Speech tokens of a prompt (the contract's prompt frames over the upsampling rate).
    pub fn prompt_tokens(&self) -> usize {
        self.prompt_tokens
    }

    /// Mel frames of a prompt.
    pub fn prompt_frames(&self) -> usize {
        self.contract.keeps.carry.prompt
    }

    /// New speech tokens per chunk (the contract's `chunk_tokens`; a chunk call also reads
    /// the [`SpeechModel::lookahead_tokens`] after them).
    pub fn chunk_tokens(&self) -> usize {
        self.contract.chunk_tokens
    }

    /// Tokens after a chunk the flow's encoder looks ahead at.
    pub fn lookahead_tokens(&self) -> usize {
        self.contract.lookahead_tokens
    }

    /// Mel bins per frame (80).
    pub fn mel_bins(&self) -> usize {
        self.flow.config().mel
    }

    /// Width of the speaker embedding (192).
    pub fn speaker_dim(&self) -> usize {
        self.flow.config().spk_dim
    }

    /// The flow decoder: its configuration, backend and workspace limits.
    pub fn flow(&self) -> &Arc<DeviceFlow> {
        &self.flow
    }

    /// The vocoder: its configuration, stream limits and noise table's SHA-256 (which the PCM
    /// depends on: record it with any result you compare).
    pub fn vocoder(&self) -> &Arc<CausalHift> {
        &self.vocoder
    }

    /// The contract the flow's streams are laid out by.
    pub fn contract(&self) -> &ContractView {
        &self.contract
    }

    /// The vocoder's declarations in the same contract (what the replay arms' vocoder engines
    /// key on).
    pub fn vocoder_contract(&self) -> &VocoderContract {
        &self.vocoder_contract
    }
}

/// The vocoder's declarations in `contract`: read from the generated module of its family
/// (the flow's view carries only the flow's callables and regions).
fn vocoder_contract(contract: &ContractView) -> Result<VocoderContract, SpeechError> {
    use dcc_generated::{token2wav, token2wav_tiny, token2wav_tiny_vendor};
    let family = contract.family;
    let c = if family == token2wav::FAMILY {
        VocoderContract::of::<token2wav::Contract>()?
    } else if family == token2wav_tiny::FAMILY {
        VocoderContract::of::<token2wav_tiny::Contract>()?
    } else if family == token2wav_tiny_vendor::FAMILY {
        VocoderContract::of::<token2wav_tiny_vendor::Contract>()?
    } else {
        return Err(VocoderError::Contract {
            what: format!("the vocoder's declarations of contract `{family}`"),
            expected: format!(
                "a bundled Token2Wav contract (`{}`, `{}` or `{}`)",
                token2wav::FAMILY,
                token2wav_tiny::FAMILY,
                token2wav_tiny_vendor::FAMILY
            ),
            found: family.to_string(),
        }
        .into());
    };
    Ok(c)
}

/// The contract's prompt in tokens: its kept prompt frames over the upsampling rate.
fn prompt_tokens(cfg: &FlowConfig, contract: &ContractView) -> Result<usize, SpeechError> {
    let (frames, up) = (contract.keeps.carry.prompt, cfg.encoder.up_stride);
    if up == 0 || !frames.is_multiple_of(up) {
        return Err(FlowError::Config(format!(
            "contract `{}`: {frames} prompt frames are not a whole number of tokens at {up} \
             frames per token",
            contract.family
        ))
        .into());
    }
    Ok(frames / up)
}
