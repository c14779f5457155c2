//! `BoundedVocoder.stream` and `Token2wav._stream_vocode` of the vendor: one utterance's stream
//! state (bounded mel and source histories at fixed capacity, the float64 harmonic phase, the
//! frame counters) and the per-chunk bookkeeping (16-frame internal blocks, the delay, the
//! first chunk's silence prefix, the final flush).

use std::sync::Arc;

use dcc_runtime::backend::Backend;
use dcc_runtime::ops::{self, Ctx, Tensor};

use super::VocoderError;
use super::model::CausalHift;
use super::work::Work;

/// One stream of the vocoder over a shared [`CausalHift`]. All device state is allocated once in
/// [`StreamingVocoder::new`]; [`StreamingVocoder::push`] never allocates on the device.
pub struct StreamingVocoder {
    be: Arc<dyn Backend>,
    model: Arc<CausalHift>,
    w: Work,
    /// Which of the two mel / source buffers holds the history.
    mel_cur: usize,
    src_cur: usize,
    /// Frames held in the mel history, and the absolute frame of its first column.
    mel_len: usize,
    mel_offset: usize,
    /// The absolute frame of the source history's first sample / hop, and one past its last.
    src_offset: usize,
    source_end: usize,
    /// Frames whose samples were returned.
    emitted: usize,
    finalized: bool,
    /// No sample was returned yet (`cache['first_chunk']`).
    first_chunk: bool,
}

impl StreamingVocoder {
    /// A fresh stream (the state of `Token2wav.set_stream_cache`: empty histories, zero phase,
    /// `first_chunk` set).
    pub fn new(be: Arc<dyn Backend>, model: Arc<CausalHift>) -> Result<Self, VocoderError> {
        let w = Work::new(be.as_ref(), &model.cfg)?;
        Ok(StreamingVocoder {
            be,
            model,
            w,
            mel_cur: 0,
            src_cur: 0,
            mel_len: 0,
            mel_offset: 0,
            src_offset: 0,
            source_end: 0,
            emitted: 0,
            finalized: false,
            first_chunk: true,
        })
    }

    /// Back to the fresh state for a new utterance (`BoundedVocoder.reset`), keeping the buffers.
    pub fn reset(&mut self) -> Result<(), VocoderError> {
        let h = self.model.cfg.harmonics;
        self.be.memset_d32(self.w.phase.ptr(), 0, 2 * h)?;
        self.mel_cur = 0;
        self.src_cur = 0;
        self.mel_len = 0;
        self.mel_offset = 0;
        self.src_offset = 0;
        self.source_end = 0;
        self.emitted = 0;
        self.finalized = false;
        self.first_chunk = true;
        Ok(())
    }

    pub fn model(&self) -> &CausalHift {
        &self.model
    }

    /// Whether the final chunk was pushed.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// Samples the first non-empty output is prefixed with (`Token2wav.source_cache_len`: the
    /// delay in samples, so the stream's total length is frames · hop).
    pub fn source_cache_len(&self) -> usize {
        self.model.limits.delay * self.model.cfg.hop()
    }

    /// Vocodes one chunk of fresh mel, `mel` channel-major `[channels, frames]` (the vendor's
    /// `[1, 80, frames]` without the batch), and returns its PCM (24 kHz, float in
    /// `[−audio_limit, audio_limit]`). `last` flushes every pending sample; after it, only an
    /// empty `last` push is accepted (it returns nothing). The first chunk that yields samples
    /// is prefixed with [`StreamingVocoder::source_cache_len`] zeros unless it is the last.
    ///
    /// Errors: a chunk whose channel count is not the model's (or whose length is not a whole
    /// number of frames) is refused before any state changes, as is a push after the final
    /// chunk; a non-finite sample is an error (the vendor raises too).
    pub fn push(
        &mut self,
        mel: &[f32],
        channels: usize,
        last: bool,
    ) -> Result<Vec<f32>, VocoderError> {
        let c_in = self.model.cfg.in_channels;
        if channels != c_in {
            return Err(VocoderError::MelWidth {
                expected: c_in,
                found: channels.to_string(),
            });
        }
        if !mel.len().is_multiple_of(c_in) {
            return Err(VocoderError::MelWidth {
                expected: c_in,
                found: format!("{} values (not a whole number of frames)", mel.len()),
            });
        }
        let frames = mel.len() / c_in;
        if self.finalized {
            if frames > 0 || !last {
                return Err(VocoderError::Finalized);
            }
            return Ok(Vec::new());
        }
        let block = self.model.cfg.block_frames;
        let mut out = Vec::new();
        let mut start = 0;
        while start < frames {
            let n = block.min(frames - start);
            self.append(mel, frames, start, n)?;
            out.extend(self.process(false)?);
            start += n;
        }
        if last {
            out.extend(self.process(true)?);
            self.finalized = true;
        }
        if let Some((index, &value)) = out.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(VocoderError::NonFinite { index, value });
        }
        if !out.is_empty() && self.first_chunk {
            self.first_chunk = false;
            if !last {
                let mut v = vec![0.0f32; self.source_cache_len()];
                v.extend(out);
                out = v;
            }
        }
        Ok(out)
    }

    fn mel_view(&self, buf: usize) -> Result<Tensor<'_>, VocoderError> {
        let c = self.model.cfg.in_channels;
        Ok(Tensor::<f32>::of(&self.w.mel[buf])?.view(&[c, self.w.mel_cap])?)
    }

    fn src_view(&self, buf: usize) -> Result<Tensor<'_>, VocoderError> {
        let n = self.w.src_cap * self.model.cfg.hop();
        Ok(Tensor::<f32>::of(&self.w.src[buf])?.view(&[n])?)
    }

    /// Appends frames `start..start + n` of the chunk to the mel history.
    fn append(
        &mut self,
        mel: &[f32],
        frames: usize,
        start: usize,
        n: usize,
    ) -> Result<(), VocoderError> {
        let c = self.model.cfg.in_channels;
        if self.mel_len + n > self.w.mel_cap {
            return Err(VocoderError::Capacity {
                what: "mel history",
                needed: self.mel_len + n,
                capacity: self.w.mel_cap,
            });
        }
        let part: Vec<f32> = (0..c)
            .flat_map(|ch| {
                mel[ch * frames + start..ch * frames + start + n]
                    .iter()
                    .copied()
            })
            .collect();
        // the staging buffer may still be read by the previous block's copy
        self.be.synchronize()?;
        self.be.upload(self.w.mel_stage.ptr(), &part)?;
        let cx = Ctx::new(self.be.as_ref(), None);
        let stage = Tensor::<f32>::of(&self.w.mel_stage)?.view(&[c, n])?;
        ops::copy(
            &cx,
            self.mel_view(self.mel_cur)?.narrow(1, self.mel_len, n)?,
            stage,
        )?;
        self.mel_len += n;
        Ok(())
    }

    /// `BoundedVocoder._process(finalize)`: new F0 and source where the look-ahead allows, then
    /// the samples the decoder's look-ahead allows, then the histories trimmed to their bounds.
    fn process(&mut self, finalize: bool) -> Result<Vec<f32>, VocoderError> {
        let m = Arc::clone(&self.model);
        let (l, c) = (&m.limits, &m.cfg);
        let hop = c.hop();
        let cx = Ctx::new(self.be.as_ref(), None);
        let received = self.mel_offset + self.mel_len;
        let avail_src = received.saturating_sub(if finalize { 0 } else { l.f0_right });
        if avail_src > self.source_end {
            let start = self.source_end.saturating_sub(l.f0_left);
            let tf = received - start;
            if tf > self.w.f0_cap {
                return Err(VocoderError::Capacity {
                    what: "F0 input",
                    needed: tf,
                    capacity: self.w.f0_cap,
                });
            }
            let mel = self
                .mel_view(self.mel_cur)?
                .narrow(1, start - self.mel_offset, tf)?;
            let t0 = m.predict_f0(&cx, &self.w, mel, tf, finalize)?;
            let skip = self.source_end - start;
            let f0 = Tensor::<f32>::of(&self.w.f0)?.view(&[t0])?;
            let mut at = skip;
            while at < t0 {
                let n = c.block_frames.min(t0 - at);
                let held = self.source_end - self.src_offset;
                if held + n > self.w.src_cap {
                    return Err(VocoderError::Capacity {
                        what: "source history",
                        needed: held + n,
                        capacity: self.w.src_cap,
                    });
                }
                let y = self
                    .src_view(self.src_cur)?
                    .narrow(0, held * hop, n * hop)?;
                m.source_block(&cx, &self.w, f0.narrow(0, at, n)?, y, self.source_end)?;
                self.source_end += n;
                at += n;
            }
        }
        let avail_speech =
            self.source_end
                .saturating_sub(if finalize { 0 } else { l.decoder_right });
        let mut speech = Vec::new();
        if avail_speech > self.emitted {
            let start = self.emitted.saturating_sub(l.history);
            let t = self.source_end - start;
            if t > self.w.dec_cap {
                return Err(VocoderError::Capacity {
                    what: "decoder input",
                    needed: t,
                    capacity: self.w.dec_cap,
                });
            }
            let mel = self
                .mel_view(self.mel_cur)?
                .narrow(1, start - self.mel_offset, t)?;
            let src =
                self.src_view(self.src_cur)?
                    .narrow(0, (start - self.src_offset) * hop, t * hop)?;
            let n_pcm = m.decode(&cx, &self.w, mel, src, t, finalize)?;
            let skip = (self.emitted - start) * hop;
            let want = (avail_speech - self.emitted) * hop;
            if n_pcm < skip || n_pcm - skip != want {
                return Err(VocoderError::Unsupported {
                    what: "decoded samples".into(),
                    expected: want.to_string(),
                    found: n_pcm.saturating_sub(skip).to_string(),
                });
            }
            self.be.synchronize()?;
            speech = self
                .be
                .download::<f32>(self.w.pcm.ptr().offset(4 * skip), want)?;
            self.emitted = avail_speech;
        }
        let keep_mel = self
            .emitted
            .saturating_sub(l.history)
            .min(self.source_end.saturating_sub(l.f0_left));
        let keep_src = self.emitted.saturating_sub(l.history);
        if keep_mel > self.mel_offset {
            let drop = keep_mel - self.mel_offset;
            let rest = self.mel_len - drop;
            let next = 1 - self.mel_cur;
            ops::copy(
                &cx,
                self.mel_view(next)?.narrow(1, 0, rest)?,
                self.mel_view(self.mel_cur)?.narrow(1, drop, rest)?,
            )?;
            self.mel_cur = next;
            self.mel_len = rest;
            self.mel_offset = keep_mel;
        }
        if keep_src > self.src_offset {
            let drop = (keep_src - self.src_offset) * hop;
            let rest = (self.source_end - keep_src) * hop;
            let next = 1 - self.src_cur;
            let cap = self.w.src_cap * hop;
            let dst = Tensor::<f32>::of(&self.w.src[next])?
                .view(&[cap])?
                .narrow(0, 0, rest)?;
            let src = Tensor::<f32>::of(&self.w.src[self.src_cur])?
                .view(&[cap])?
                .narrow(0, drop, rest)?;
            ops::copy(&cx, dst.view(&[1, rest])?, src.view(&[1, rest])?)?;
            self.src_cur = next;
            self.src_offset = keep_src;
        }
        Ok(speech)
    }
}
