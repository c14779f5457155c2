//! The audio half of `token2wav` and `check`: the vocoder's flags, the stream each arm runs
//! (the flow alone, or tokens to PCM through [`dcc_models::speech`]), and the PCM's figures.
//!
//! With the vocoder (the default), each arm streams through a [`SpeechStream`]: the same code a
//! Rust application calls, on either backend. Its weights are `vocoder.safetensors` beside
//! `--weights` unless `--vocoder-weights` names them; `--no-vocoder` times the flow alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Args, ValueEnum};
use dcc_models::speech::{
    ChunkTiming, Prompt, SpeechChunk, SpeechError, SpeechModel, SpeechStream,
};
use dcc_models::token2wav::serve::{Arm, Session};
use dcc_models::token2wav::{DeviceFlow, SolverParams};
use dcc_models::vocoder::WavFormat;
use dcc_runtime::replay::EngineReport;

use super::Res;
use super::error::BenchError;
use super::inputs::Inputs;

/// The vocoder's flags (both commands).
#[derive(Args, Debug, Clone)]
pub struct VocoderArgs {
    /// Vocoder weights (safetensors: the vendor's `hift.pt` names, weight norm folded, and its
    /// `noise_table`). Default: `vocoder.safetensors` in the folder of --weights.
    #[arg(long, value_name = "FILE", conflicts_with = "no_vocoder")]
    pub vocoder_weights: Option<PathBuf>,

    /// Run the flow alone (tokens to mel): no vocoder weights needed, no audio columns.
    #[arg(long)]
    pub no_vocoder: bool,
}

impl VocoderArgs {
    /// The vocoder weights a run reads: `None` with --no-vocoder, else the named file or
    /// `vocoder.safetensors` beside `weights`.
    pub fn resolve(&self, weights: &Path) -> Option<VocoderFile> {
        if self.no_vocoder {
            return None;
        }
        Some(match &self.vocoder_weights {
            Some(p) => VocoderFile {
                path: p.clone(),
                explicit: true,
            },
            None => VocoderFile {
                path: dcc_models::fsio::parent_dir(weights).join("vocoder.safetensors"),
                explicit: false,
            },
        })
    }
}

/// Where the vocoder's weights are read from, and whether a flag named them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VocoderFile {
    pub path: PathBuf,
    pub explicit: bool,
}

impl VocoderFile {
    /// Refuses a file that does not exist before anything is loaded, naming the path and how
    /// it was found.
    pub fn check_exists(&self) -> Res<()> {
        if self.path.exists() {
            return Ok(());
        }
        Err(BenchError::NoVocoder {
            path: self.path.clone(),
            explicit: self.explicit,
        })
    }
}

/// `--wav`: which arm's stream is written, and how.
#[derive(Args, Debug, Clone)]
pub struct WavArgs {
    /// Write the measured pass's audio (every chunk and the final flush) to FILE: RIFF/WAVE,
    /// 24 kHz mono (written to a temporary file beside it, then renamed).
    #[arg(long, value_name = "FILE", conflicts_with = "no_vocoder")]
    pub wav: Option<PathBuf>,

    /// The arm whose stream --wav writes (default: the first of --arms). Every arm's PCM must
    /// equal B0's, so this matters only when one does not.
    #[arg(long, value_name = "ARM", requires = "wav", value_parser = super::cli::arm)]
    pub wav_arm: Option<Arm>,

    /// The WAV sample format: 16-bit PCM (clipped and scaled as the vendor's
    /// `Token2wav.stream` bytes) or 32-bit float (the samples as they are).
    #[arg(long, value_enum, value_name = "FORMAT", requires = "wav",
          default_value_t = WavChoice::Pcm16)]
    pub wav_format: WavChoice,
}

impl WavArgs {
    /// What `--wav` writes, if given: the `--wav-arm` stream, or that of the first of `arms`.
    pub fn resolve(&self, arms: &[Arm]) -> Option<WavOut> {
        let path = self.wav.clone()?;
        Some(WavOut {
            path,
            arm: self.wav_arm.or(arms.first().copied()).unwrap_or(Arm::B0),
            format: self.wav_format,
        })
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum WavChoice {
    /// 16-bit integer PCM.
    Pcm16,
    /// 32-bit IEEE float.
    Float,
}

impl WavChoice {
    pub fn format(self) -> WavFormat {
        match self {
            WavChoice::Pcm16 => WavFormat::Pcm16,
            WavChoice::Float => WavFormat::Float32,
        }
    }
}

/// What `--wav` resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WavOut {
    pub path: PathBuf,
    pub arm: Arm,
    pub format: WavChoice,
}

/// One arm's stream: the flow alone, or tokens to PCM.
pub enum Stream {
    Flow { ses: Box<Session>, spk: Vec<f32> },
    Speech(Box<SpeechStream>),
}

impl Stream {
    /// A stream of `arm`, primed with `io`'s prompt (`prompt` is it with the priming call's
    /// lookahead appended, which the flow alone is primed with; the speech stream appends it
    /// itself).
    pub fn open(
        dev: &std::sync::Arc<DeviceFlow>,
        speech: Option<&SpeechModel>,
        contract: dcc_models::token2wav::serve::ContractView,
        arm: Arm,
        io: &Inputs,
        prompt: &[u32],
    ) -> Res<Stream> {
        let e = |error| BenchError::Flow {
            arm: Some(arm.name()),
            error,
        };
        let mut s = match speech {
            Some(m) => Stream::Speech(Box::new(
                m.open(arm, &speech_prompt(io))
                    .map_err(|error| speech_error(arm, error))?,
            )),
            None => Stream::Flow {
                ses: Box::new(
                    Session::new(dev.clone(), contract, arm, SolverParams::default()).map_err(e)?,
                ),
                spk: io.spk.clone(),
            },
        };
        if let Stream::Flow { ses, .. } = &mut s {
            ses.prime(prompt, &io.mel, &io.spk).map_err(e)?;
        }
        Ok(s)
    }

    /// Primes the stream again for a new pass.
    pub fn restart(&mut self, arm: Arm, io: &Inputs, prompt: &[u32]) -> Res<()> {
        match self {
            Stream::Flow { ses, .. } => {
                ses.prime(prompt, &io.mel, &io.spk)
                    .map_err(|error| BenchError::Flow {
                        arm: Some(arm.name()),
                        error,
                    })
            }
            Stream::Speech(s) => s
                .restart(&speech_prompt(io))
                .map_err(|error| speech_error(arm, error)),
        }
    }

    /// One chunk: its mel, and its PCM with the vocoder.
    pub fn chunk(&mut self, arm: Arm, tokens: &[u32]) -> Res<SpeechChunk> {
        match self {
            Stream::Flow { ses, spk } => {
                let t = Instant::now();
                let mel = ses
                    .chunk(tokens, spk, false)
                    .map_err(|error| BenchError::Flow {
                        arm: Some(arm.name()),
                        error,
                    })?;
                let timing = ChunkTiming {
                    flow: t.elapsed(),
                    ..Default::default()
                };
                Ok(SpeechChunk {
                    frames: 0,
                    mel,
                    pcm: Vec::new(),
                    timing,
                })
            }
            Stream::Speech(s) => s.push_chunk(tokens).map_err(|e| speech_error(arm, e)),
        }
    }

    /// Ends the pass: the vocoder's final flush (an empty final chunk), `None` for the flow
    /// alone.
    pub fn finish(&mut self, arm: Arm) -> Res<Option<SpeechChunk>> {
        match self {
            Stream::Flow { .. } => Ok(None),
            Stream::Speech(s) => s
                .finish_chunk(&[])
                .map(Some)
                .map_err(|e| speech_error(arm, e)),
        }
    }

    pub fn session(&self) -> &Session {
        match self {
            Stream::Flow { ses, .. } => ses,
            Stream::Speech(s) => s.flow(),
        }
    }

    /// The vocoder's replay engines' counters (empty for an eager arm or the flow alone).
    pub fn vocoder_reports(&self) -> Vec<EngineReport> {
        match self {
            Stream::Flow { .. } => Vec::new(),
            Stream::Speech(s) => s.vocoder_replay_reports(),
        }
    }

    /// The flow's session, for driving it alone (device-busy repetitions).
    pub fn into_session(self) -> Session {
        match self {
            Stream::Flow { ses, .. } => *ses,
            Stream::Speech(s) => s.into_parts().0,
        }
    }
}

/// `io`'s prompt as the speech API takes it (without the priming call's lookahead).
fn speech_prompt(io: &Inputs) -> Prompt<'_> {
    Prompt {
        tokens: &io.prompt,
        mel: &io.mel,
        spk: &io.spk,
    }
}

fn speech_error(arm: Arm, error: SpeechError) -> BenchError {
    BenchError::Speech {
        arm: arm.name(),
        error: Box::new(error),
    }
}

/// One arm's audio figures (empty for the flow alone).
#[derive(Default)]
pub struct ArmAudio {
    /// Vocoder and end-to-end (flow + vocoder, each with its read-back) ms per chunk.
    pub vocoder_ms: Vec<f64>,
    pub e2e_ms: Vec<f64>,
    /// From the first chunk call's start to the return of the first non-empty PCM.
    pub ttfa_ms: Option<f64>,
    /// The final flush (vocoder only).
    pub flush_ms: Option<f64>,
    /// The whole stream's PCM, final flush included.
    pub pcm: Vec<f32>,
    /// Where each chunk's PCM starts in `pcm` (the flush's start last).
    pub starts: Vec<usize>,
    /// The vocoder's replay catalog (`None` on an eager arm).
    pub catalog: Option<VocoderCatalog>,
}

/// What the vocoder's replay engines (`vocoder` and `vocoder_flush`, summed) did: in total
/// (since the stream opened, the warm-up pass included, as the flow's `fallbacks_total`), and
/// in the steady state: the measured pass after its first chunk (whose class, an empty
/// history, no later chunk of a pass meets), its flush included.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VocoderCatalog {
    pub classes_captured: usize,
    pub replays: u64,
    pub eager_calls: u64,
    pub fallbacks_total: BTreeMap<String, u64>,
    pub replays_steady: u64,
    pub eager_steady: u64,
    pub fallbacks_steady: BTreeMap<String, u64>,
}

impl VocoderCatalog {
    /// From the engines' reports after the pass's first chunk (`first`) and at its end (`end`):
    /// `None` when there are no engines (an eager arm).
    pub fn between(first: &[EngineReport], end: &[EngineReport]) -> Option<VocoderCatalog> {
        if end.is_empty() {
            return None;
        }
        let sum = |rs: &[EngineReport]| {
            let replays: u64 = rs.iter().map(|r| r.replays).sum();
            let eager: u64 = rs.iter().map(EngineReport::eager_calls).sum();
            let mut fallbacks: BTreeMap<String, u64> = BTreeMap::new();
            for (k, v) in rs.iter().flat_map(|r| &r.fallbacks) {
                *fallbacks.entry(k.name().into()).or_default() += v;
            }
            (replays, eager, fallbacks)
        };
        let (r0, e0, before) = sum(first);
        let (replays, eager_calls, fallbacks_total) = sum(end);
        // the counters only grow over a pass
        let mut c = VocoderCatalog {
            classes_captured: end.iter().map(|r| r.classes_captured).sum(),
            replays,
            eager_calls,
            replays_steady: replays.saturating_sub(r0),
            eager_steady: eager_calls.saturating_sub(e0),
            fallbacks_total,
            fallbacks_steady: BTreeMap::new(),
        };
        for (k, v) in &c.fallbacks_total {
            let d = v.saturating_sub(before.get(k).copied().unwrap_or(0));
            if d > 0 {
                c.fallbacks_steady.insert(k.clone(), d);
            }
        }
        Some(c)
    }
}

impl ArmAudio {
    /// Records chunk `c`, which began `since_first` ms after the first chunk call began.
    pub fn chunk(&mut self, c: &SpeechChunk, since_first_ms: f64) {
        self.vocoder_ms.push(ms(c.timing.vocoder));
        self.e2e_ms.push(ms(c.timing.total()));
        self.add(&c.pcm, since_first_ms + ms(c.timing.total()));
    }

    /// Records the final flush, which returned `at_ms` after the first chunk call began.
    pub fn flush(&mut self, c: &SpeechChunk, at_ms: f64) {
        self.flush_ms = Some(ms(c.timing.total()));
        self.add(&c.pcm, at_ms);
    }

    fn add(&mut self, pcm: &[f32], returned_at_ms: f64) {
        if self.ttfa_ms.is_none() && !pcm.is_empty() {
            self.ttfa_ms = Some(returned_at_ms);
        }
        self.starts.push(self.pcm.len());
        self.pcm.extend_from_slice(pcm);
    }

    /// Chunk `i`'s PCM (the flush is the chunk after the last).
    pub fn part(&self, i: usize) -> &[f32] {
        let start = self.starts.get(i).copied().unwrap_or(self.pcm.len());
        let end = self.starts.get(i + 1).copied().unwrap_or(self.pcm.len());
        &self.pcm[start..end]
    }

    /// SHA-256 of the whole stream's f32 little-endian bytes.
    pub fn sha256(&self) -> String {
        let bytes: Vec<u8> = self.pcm.iter().flat_map(|x| x.to_le_bytes()).collect();
        dcc_runtime::sha256_hex(&bytes)
    }
}

/// Writes `--wav`: the stream of its arm (`audio`; nothing when that arm did not run).
pub fn write_wav(w: &WavOut, audio: Option<&ArmAudio>, sample_rate: u32) -> Res<()> {
    let Some(a) = audio else {
        return Ok(());
    };
    dcc_models::vocoder::write_wav_file(&w.path, &a.pcm, sample_rate, w.format.format()).map_err(
        |error| BenchError::Write {
            path: w.path.clone(),
            error,
        },
    )?;
    eprintln!(
        "dcc-bench: wrote {}: {} samples at {sample_rate} Hz, arm {}",
        w.path.display(),
        a.pcm.len(),
        w.arm.name()
    );
    Ok(())
}

pub fn ms(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
