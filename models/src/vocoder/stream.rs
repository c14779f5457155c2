//! `BoundedVocoder.stream` and `Token2wav._stream_vocode` of the vendor: one utterance's stream
//! (its regions, the host's view of its class) and the per-chunk bookkeeping (the first
//! chunk's silence prefix, the final flush).
//!
//! Each push is one call of the contract's `vocoder` (a push longer than one call's frames is
//! split at whole 16-frame blocks, which keeps the vendor's block split), and the last push adds
//! a `vocoder_flush` call. A call is stream work only (`call::run` over a `CallPlan`): the stream
//! counters live in device memory (`voc_offsets`, where the source kernel reads its noise row),
//! the histories sit at fixed addresses, and the call's samples land in one output buffer,
//! downloaded once after the call. The host keeps only the call's class: the histories'
//! extents, which decide every step of the next call.

use std::sync::Arc;

use dcc_runtime::backend::Backend;
use dcc_runtime::kernels::signal::COUNTERS;
use dcc_runtime::ops::{Ctx, RawTensor};
use dcc_runtime::replay::EngineReport;

use super::VocoderError;
use super::call::{self, Io};
use super::contract::VocoderContract;
use super::model::CausalHift;
use super::plan::CallPlan;
use super::serve::{Engines, Shared};
use super::work::{Regions, Work};

/// One stream of the vocoder over a shared [`CausalHift`]. All device state is allocated once at
/// construction; a push never allocates on the device.
pub struct StreamingVocoder {
    /// Replay engines (dropped before the regions their graphs address).
    engines: Option<Engines>,
    regions: Regions,
    shared: Arc<Shared>,
    be: Arc<dyn Backend>,
    contract: VocoderContract,
    /// The histories' extents between calls, in frames (the class of the next call).
    mel_len: usize,
    src_len: usize,
    finalized: bool,
    /// No sample was returned yet (`cache['first_chunk']`).
    first_chunk: bool,
}

impl StreamingVocoder {
    /// A fresh stream run eagerly (the state of `Token2wav.set_stream_cache`: empty histories,
    /// zero phase and counters, `first_chunk` set), its buffers at the envelopes of the bundled
    /// contract's regions ([`VocoderContract::token2wav`]).
    pub fn new(be: Arc<dyn Backend>, model: Arc<CausalHift>) -> Result<Self, VocoderError> {
        Self::build(be, model, VocoderContract::token2wav()?, false)
    }

    /// A fresh stream served under `contract`: every `vocoder` and `vocoder_flush` call goes
    /// through an exact-shape replay engine keyed on the contract's catalog (a graph per class,
    /// captured at its first call, eager with a counted reason whenever a premise fails; see
    /// [`StreamingVocoder::replay_reports`]). Its output equals [`StreamingVocoder::new`]'s bit
    /// for bit. The model's noise table must have the contract's `noise_table` rows.
    pub fn with_replay(
        be: Arc<dyn Backend>,
        model: Arc<CausalHift>,
        contract: VocoderContract,
    ) -> Result<Self, VocoderError> {
        if model.noise_rows() != contract.noise_rows {
            return Err(VocoderError::Contract {
                what: format!("`noise_table` rows of contract `{}`", contract.family),
                expected: model.noise_rows().to_string(),
                found: contract.noise_rows.to_string(),
            });
        }
        Self::build(be, model, contract, true)
    }

    fn build(
        be: Arc<dyn Backend>,
        model: Arc<CausalHift>,
        contract: VocoderContract,
        replay: bool,
    ) -> Result<Self, VocoderError> {
        let caps = contract.caps(&model.cfg)?;
        let regions = Regions::new(be.as_ref(), &model.cfg, &caps)?;
        let work = Work::new(be.as_ref(), &model.cfg, &caps)?;
        let shared = Arc::new(Shared { model, work, caps });
        let engines = if replay {
            Some(Engines::new(&be, &contract, &shared)?)
        } else {
            None
        };
        Ok(StreamingVocoder {
            engines,
            regions,
            shared,
            be,
            contract,
            mel_len: 0,
            src_len: 0,
            finalized: false,
            first_chunk: true,
        })
    }

    /// Back to the fresh state for a new utterance (`BoundedVocoder.reset`), keeping the buffers
    /// (and the captured graphs, which the same addresses serve).
    pub fn reset(&mut self) -> Result<(), VocoderError> {
        self.regions
            .reset(self.be.as_ref(), &self.shared.model.cfg)?;
        self.mel_len = 0;
        self.src_len = 0;
        self.finalized = false;
        self.first_chunk = true;
        Ok(())
    }

    pub fn model(&self) -> &CausalHift {
        &self.shared.model
    }

    /// Whether the final chunk was pushed.
    pub fn is_finalized(&self) -> bool {
        self.finalized
    }

    /// The replay engines' counters (`vocoder`, then `vocoder_flush`: classes captured, replays,
    /// eager calls by reason); empty for an eager stream.
    pub fn replay_reports(&self) -> Vec<EngineReport> {
        self.engines
            .as_ref()
            .map_or_else(Vec::new, Engines::reports)
    }

    /// The stream counters in device memory (the vendor's `mel_offset`, `source_offset`,
    /// `source_end`, `speech_offset`, `finalized`), read back (synchronizes).
    pub fn counters(&self) -> Result<[i64; COUNTERS], VocoderError> {
        self.be.synchronize()?;
        let v: Vec<i64> = self.be.download(self.regions.offsets.ptr(), COUNTERS)?;
        let mut c = [0; COUNTERS];
        c.copy_from_slice(&v);
        Ok(c)
    }

    /// Samples the first non-empty output is prefixed with (`Token2wav.source_cache_len`: the
    /// delay in samples, so the stream's total length is frames · hop).
    pub fn source_cache_len(&self) -> usize {
        let m = &self.shared.model;
        m.limits.delay * m.cfg.hop()
    }

    /// Vocodes one chunk of fresh mel, `mel` channel-major `[channels, frames]` (the vendor's
    /// `[1, 80, frames]` without the batch), and returns its PCM (24 kHz, float in
    /// `[−audio_limit, audio_limit]`). `last` flushes every pending sample; after it, only an
    /// empty `last` push is accepted (it returns nothing). The first chunk that yields samples
    /// is prefixed with [`StreamingVocoder::source_cache_len`] zeros unless it is the last.
    ///
    /// Errors: a chunk whose channel count is not the model's (or whose length is not a whole
    /// number of frames) is refused before any state changes, as is a push after the final
    /// chunk; a non-finite sample is an error (the vendor raises too). A device error during a
    /// call leaves the stream to be [`reset`](StreamingVocoder::reset).
    pub fn push(
        &mut self,
        mel: &[f32],
        channels: usize,
        last: bool,
    ) -> Result<Vec<f32>, VocoderError> {
        let m = Arc::clone(&self.shared.model);
        let c_in = m.cfg.in_channels;
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
        // one call per push; longer pushes split at whole blocks (the vendor's block split
        // restarts at every call, so a split elsewhere would change the steps)
        let block = m.cfg.block_frames;
        let input = self.shared.caps.input;
        let piece = if frames <= input {
            frames.max(1)
        } else {
            input / block * block
        };
        let mut out = Vec::new();
        let mut start = 0;
        while start < frames {
            let n = piece.min(frames - start);
            // time-major [n, channels], as the contract's `mel` input
            let part: Vec<f32> = (start..start + n)
                .flat_map(|t| (0..c_in).map(move |ch| mel[ch * frames + t]))
                .collect();
            self.be.upload(self.shared.work.mel_in.ptr(), &part)?;
            out.extend(self.call(Some(n))?);
            start += n;
        }
        if last {
            out.extend(self.call(None)?);
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

    /// One call: `Some(frames)` fresh frames (already in `work.mel_in`) or the flush. Its plan
    /// is made from the class alone; its samples are downloaded once, after the call.
    fn call(&mut self, frames: Option<usize>) -> Result<Vec<f32>, VocoderError> {
        let s = &self.shared;
        let m = &s.model;
        let c = &m.cfg;
        let plan = CallPlan::new(
            &m.limits,
            c.block_frames,
            &s.caps,
            self.mel_len,
            self.src_len,
            frames.unwrap_or(0),
            frames.is_none(),
        )?;
        match self.engines.as_mut() {
            Some(e) => {
                e.invoke(
                    &self.contract,
                    s,
                    &self.regions,
                    (self.mel_len, self.src_len),
                    frames,
                )?;
            }
            None => {
                let hop = c.hop();
                let io = Io {
                    mel: frames
                        .map(|n| RawTensor::packed(s.work.mel_in.ptr(), &[n, c.in_channels]))
                        .transpose()?,
                    mel_history: RawTensor::packed(
                        self.regions.mel.ptr(),
                        &[c.in_channels * s.caps.mel],
                    )?,
                    source_history: RawTensor::packed(self.regions.src.ptr(), &[s.caps.src * hop])?,
                    phase: RawTensor::packed(self.regions.phase.ptr(), &[c.harmonics])?,
                    offsets: RawTensor::packed(self.regions.offsets.ptr(), &[COUNTERS])?,
                    noise: RawTensor::packed(m.noise_ptr(), &[m.noise_rows(), c.harmonics])?,
                    window: RawTensor::packed(m.window_ptr(), &[c.n_fft])?,
                };
                let cx = Ctx::new(self.be.as_ref(), None);
                // SAFETY: the regions are this stream's buffers (allocated at the capacities
                // the views span), the fresh mel is `work.mel_in` (holding `caps.input` frames,
                // at least the plan's), the constants are the model's; all outlive the
                // synchronize below, and none overlaps another.
                unsafe { call::run(&cx, m, &s.work, &s.caps, &io, &plan)? };
            }
        }
        self.mel_len = plan.mel_len;
        self.src_len = plan.src_len;
        if plan.out == 0 {
            return Ok(Vec::new());
        }
        self.be.synchronize()?;
        Ok(self
            .be
            .download::<f32>(s.work.out.ptr(), plan.out * c.hop())?)
    }
}
