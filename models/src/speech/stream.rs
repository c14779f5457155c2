//! One utterance's stream: a flow [`Session`] and a [`StreamingVocoder`], advanced together.

use std::time::{Duration, Instant};

use dcc_runtime::replay::EngineReport;

use crate::token2wav::serve::{Arm, Session};
use crate::vocoder::StreamingVocoder;

use super::{Prompt, SpeechError};

/// What a stream needs to know of its model to check its inputs.
#[derive(Copy, Clone, Debug)]
pub(super) struct Shape {
    /// The contract's family, for errors.
    pub contract: &'static str,
    /// Tokens of a prompt, and the lookahead the priming call appends.
    pub prompt_tokens: usize,
    pub lookahead: usize,
    /// Mel bins per frame: the flow's output rows, the vocoder's input channels.
    pub mel_bins: usize,
}

impl Shape {
    /// The prompt's token count against the contract's (the flow checks the rest).
    pub fn check_prompt(&self, prompt: &Prompt<'_>) -> Result<(), SpeechError> {
        if prompt.tokens.len() != self.prompt_tokens {
            return Err(SpeechError::Prompt {
                contract: self.contract,
                what: "tokens",
                expected: self.prompt_tokens,
                found: prompt.tokens.len(),
            });
        }
        Ok(())
    }
}

/// Host wall time of one chunk's two stages. Each stage ends by reading its result back to the
/// host (the mel, the PCM), so on CUDA each one includes waiting for its device work.
#[derive(Copy, Clone, Debug, Default, PartialEq)]
pub struct ChunkTiming {
    /// Tokens uploaded, the flow run, the mel read back (zero for a flush without tokens).
    pub flow: Duration,
    /// The mel uploaded, the vocoder run, the PCM read back.
    pub vocoder: Duration,
}

impl ChunkTiming {
    /// Both stages: the chunk's end-to-end latency.
    pub fn total(&self) -> Duration {
        self.flow + self.vocoder
    }
}

/// One chunk's outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct SpeechChunk {
    /// The mel the flow emitted, `[mel bins, frames]` channel-major (empty for a flush).
    pub mel: Vec<f32>,
    /// Mel frames in [`SpeechChunk::mel`].
    pub frames: usize,
    /// The chunk's PCM: 24 kHz mono float samples in `[−audio_limit, audio_limit]`.
    pub pcm: Vec<f32>,
    pub timing: ChunkTiming,
}

/// One stream of speech: tokens in, PCM out, chunk by chunk ([`super::SpeechModel::open`]).
///
/// A chunk is [`push`]ed as the flow's chunk tokens and their lookahead; the utterance ends
/// with [`finish`] (the vendor's `last_chunk=True` call: a final chunk of tokens, or none to
/// flush only). [`restart`] primes the stream again for the next utterance, keeping its
/// buffers and, on a replay arm, the graphs it captured.
///
/// A call the flow refuses for its inputs (a token count it does not take, a token outside the
/// vocabulary) leaves the stream as it was. A failure once a chunk's work has begun fails the
/// stream: the flow and the vocoder may no longer agree on where the utterance is, so every
/// call but [`restart`] is refused with [`SpeechError::Failed`].
///
/// [`push`]: SpeechStream::push
/// [`finish`]: SpeechStream::finish
/// [`restart`]: SpeechStream::restart
pub struct SpeechStream {
    flow: Session,
    vocoder: StreamingVocoder,
    shape: Shape,
    /// The prompt's speaker embedding, which every chunk call takes again.
    spk: Vec<f32>,
    /// Chunks pushed since the stream was primed.
    chunks: usize,
    finished: bool,
    failed: Option<SpeechError>,
}

impl SpeechStream {
    /// An unprimed stream over its two halves ([`SpeechStream::restart`] primes it).
    pub(super) fn new(flow: Session, vocoder: StreamingVocoder, shape: Shape) -> SpeechStream {
        SpeechStream {
            flow,
            vocoder,
            shape,
            spk: Vec::new(),
            chunks: 0,
            finished: false,
            failed: None,
        }
    }

    /// Primes the stream with `prompt` for a new utterance (the vendor's `set_stream_cache`:
    /// the flow's prompt pass, then a fresh vocoder state), keeping every buffer and captured
    /// graph. Clears a finished or failed stream.
    ///
    /// # Errors
    ///
    /// [`SpeechError::Prompt`] for a prompt of another token count than the contract's, and
    /// [`SpeechError::Flow`] for one the flow refuses (mel size, non-finite values, tokens
    /// outside the vocabulary, speaker width): the stream is left as it was. A device error
    /// once the prompt pass has begun fails the stream.
    pub fn restart(&mut self, prompt: &Prompt<'_>) -> Result<(), SpeechError> {
        self.shape.check_prompt(prompt)?;
        let la = self.shape.lookahead.min(prompt.tokens.len());
        let mut tokens = prompt.tokens.to_vec();
        tokens.extend_from_slice(&prompt.tokens[..la]);
        if let Err(e) = self.flow.prime(&tokens, prompt.mel, prompt.spk) {
            // refused inputs leave the session untouched; a failed pass fails it
            let e = SpeechError::from(e);
            if self.flow.failure().is_some() {
                self.failed = Some(e.clone());
            }
            return Err(e);
        }
        if let Err(e) = self.vocoder.reset() {
            let e = SpeechError::from(e);
            self.failed = Some(e.clone());
            return Err(e);
        }
        self.spk = prompt.spk.to_vec();
        self.chunks = 0;
        self.finished = false;
        self.failed = None;
        Ok(())
    }

    /// Streams one chunk of speech tokens (the chunk's new tokens and the lookahead after
    /// them; the bundled contracts take 25 + 3) and returns its PCM. The first chunk's PCM
    /// starts with [`super::SpeechModel::leading_silence`] samples of silence.
    ///
    /// # Errors
    ///
    /// As [`SpeechStream::push_chunk`].
    pub fn push(&mut self, tokens: &[u32]) -> Result<Vec<f32>, SpeechError> {
        self.push_chunk(tokens).map(|c| c.pcm)
    }

    /// [`SpeechStream::push`], with the chunk's mel and the time each stage took.
    ///
    /// # Errors
    ///
    /// [`SpeechError::Finished`] after [`SpeechStream::finish`], [`SpeechError::Failed`] on a
    /// failed stream, and [`SpeechError::Flow`] for tokens the flow refuses (a count it does
    /// not take, an id outside the vocabulary), all with the stream untouched. A device error
    /// ([`SpeechError::Flow`], [`SpeechError::Vocoder`]) or a non-finite mel
    /// ([`SpeechError::NonFiniteMel`]) once the chunk's work has begun fails the stream.
    pub fn push_chunk(&mut self, tokens: &[u32]) -> Result<SpeechChunk, SpeechError> {
        self.step(tokens, false)
    }

    /// Ends the utterance: the vendor's final call (`last_chunk=True`). `tokens` is the final
    /// chunk (at least 2 tokens, no lookahead needed), or empty to flush only. Returns the PCM
    /// of the final chunk and of every frame the vocoder held back (8 frames, 3,840 samples,
    /// after an empty final chunk).
    ///
    /// # Errors
    ///
    /// As [`SpeechStream::push_chunk`].
    pub fn finish(&mut self, tokens: &[u32]) -> Result<Vec<f32>, SpeechError> {
        self.finish_chunk(tokens).map(|c| c.pcm)
    }

    /// [`SpeechStream::finish`], with the final chunk's mel and the time each stage took.
    ///
    /// # Errors
    ///
    /// As [`SpeechStream::push_chunk`].
    pub fn finish_chunk(&mut self, tokens: &[u32]) -> Result<SpeechChunk, SpeechError> {
        self.step(tokens, true)
    }

    /// One chunk through the flow (none for an empty final chunk), its mel through the
    /// vocoder.
    fn step(&mut self, tokens: &[u32], last: bool) -> Result<SpeechChunk, SpeechError> {
        if let Some(e) = &self.failed {
            return Err(SpeechError::Failed(Box::new(e.clone())));
        }
        if self.finished {
            return Err(SpeechError::Finished);
        }
        let t = Instant::now();
        let mel = if tokens.is_empty() && last {
            Vec::new()
        } else {
            match self.flow.chunk(tokens, &self.spk, last) {
                Ok(mel) => mel,
                Err(e) => {
                    // a refusal leaves the flow untouched; a failure after its work began
                    // leaves it (and so the stream) failed
                    let e = SpeechError::from(e);
                    if self.flow.failure().is_some() {
                        self.failed = Some(e.clone());
                    }
                    return Err(e);
                }
            }
        };
        let flow = t.elapsed();
        let r = self.vocode(&mel, last);
        let pcm = self.settle(r)?;
        let vocoder = t.elapsed() - flow;
        self.chunks += 1;
        self.finished = last;
        Ok(SpeechChunk {
            frames: mel.len() / self.shape.mel_bins,
            mel,
            pcm,
            timing: ChunkTiming { flow, vocoder },
        })
    }

    /// The flow's mel of this chunk (`[mel bins, frames]`, the layout the vocoder reads)
    /// through the vocoder, once it is known to be finite.
    fn vocode(&mut self, mel: &[f32], last: bool) -> Result<Vec<f32>, SpeechError> {
        if let Some(index) = mel.iter().position(|v| !v.is_finite()) {
            return Err(SpeechError::NonFiniteMel {
                chunk: self.chunks,
                count: mel.iter().filter(|v| !v.is_finite()).count(),
                len: mel.len(),
                index,
                value: mel[index],
            });
        }
        Ok(self.vocoder.push(mel, self.shape.mel_bins, last)?)
    }

    /// The result of work that has begun: an error fails the stream.
    fn settle<T>(&mut self, r: Result<T, SpeechError>) -> Result<T, SpeechError> {
        if let Err(e) = &r {
            self.failed = Some(e.clone());
        }
        r
    }

    /// The arm serving the flow.
    pub fn arm(&self) -> Arm {
        self.flow.arm()
    }

    /// Chunks streamed since the stream was primed (the final one included).
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// Whether the utterance was ended by [`SpeechStream::finish`].
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Why the stream failed, if it did (cleared by a successful [`SpeechStream::restart`]).
    pub fn failure(&self) -> Option<&SpeechError> {
        self.failed.as_ref()
    }

    /// The flow's session: its counters, replay reports, eager fallbacks and device bytes.
    pub fn flow(&self) -> &Session {
        &self.flow
    }

    /// The vocoder's stream.
    pub fn vocoder(&self) -> &StreamingVocoder {
        &self.vocoder
    }

    /// The vocoder's replay engines' counters (`vocoder`, then `vocoder_flush`: classes
    /// captured, replays, eager calls by reason); empty on an eager arm.
    pub fn vocoder_replay_reports(&self) -> Vec<EngineReport> {
        self.vocoder.replay_reports()
    }

    /// The two halves, for driving them apart (a benchmark timing the flow alone).
    pub fn into_parts(self) -> (Session, StreamingVocoder) {
        (self.flow, self.vocoder)
    }
}
