//! The vendor's stream bookkeeping (`BoundedVocoder.stream`'s 16-frame blocks and `_process`)
//! in integer arithmetic, as a plan of one call: which frames each step appends, feeds to the F0
//! predictor and the decoder, where its samples land in the call's output, what it trims, and
//! how far it advances the stream counters.
//!
//! A plan depends on the *class* of the call only — the extents of the two histories at its
//! start and its fresh frames — never on the stream's absolute position, so a graph captured for
//! a class is valid at every position. That holds because the vendor's state after `R` frames
//! of non-final steps is a function of `R` alone (`source_end = R − f0_right`, `emitted =
//! source_end − decoder_right`, both offsets `max(0, R − window)`), and once `R` reaches the mel
//! window every step is the same up to a shift: [`Counters::canonical`] rebuilds the state from
//! the history extents (exact below the window, the window's representative at it) and checks
//! the extents are ones the vendor reaches. The absolute position lives in device memory only
//! (`voc_offsets`), where the source kernel reads its noise row.

use super::VocoderError;
use super::config::Limits;
use dcc_runtime::kernels::signal::COUNTERS;

/// Indices of the device counters (`voc_offsets`, the vendor's `cache` order).
pub(crate) const SOURCE_END: usize = 2;

/// The vendor's stream counters (`BoundedVocoder.cache`), in frames.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub received: usize,
    pub mel_offset: usize,
    pub src_offset: usize,
    pub source_end: usize,
    pub emitted: usize,
}

/// Capacities of the fixed buffers a call works in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Caps {
    /// Mel history and source history, in frames.
    pub mel: usize,
    pub src: usize,
    /// F0 predictor and decoder inputs, in frames.
    pub f0: usize,
    pub dec: usize,
    /// Fresh frames one call takes, and frames one call returns.
    pub input: usize,
    pub out: usize,
}

/// Frames `row..row + n` of the call's mel land at history column `col`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Append {
    pub row: usize,
    pub n: usize,
    pub col: usize,
}

/// One `_source` block: F0 frames `f0_at..f0_at + n` excite source frames `y_at..y_at + n` of
/// the history (relative to its first frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SourceBlock {
    pub f0_at: usize,
    pub n: usize,
    pub y_at: usize,
}

/// The F0 predictor over history columns `mel_at..mel_at + frames`, `t0` frames out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct F0Step {
    pub mel_at: usize,
    pub frames: usize,
    pub t0: usize,
    pub blocks: Vec<SourceBlock>,
}

/// `decode` over history columns (and source frames) from `mel_at` (`src_at`), `frames` of
/// them; the samples of its frames `skip..skip + want` land at frame `out_at` of the call's
/// output (all in frames of `hop` samples).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DecodeStep {
    pub mel_at: usize,
    pub src_at: usize,
    pub frames: usize,
    pub skip: usize,
    pub want: usize,
    pub out_at: usize,
}

/// One `_process` (after the append of its block, if any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    pub append: Option<Append>,
    pub finalize: bool,
    pub f0: Option<F0Step>,
    pub decode: Option<DecodeStep>,
    /// `(drop, rest)` frames of each history: the first `drop` go, the next `rest` move down.
    pub trim_mel: Option<(usize, usize)>,
    pub trim_src: Option<(usize, usize)>,
    /// The counters' advance after the step, except `source_end` (advanced per source block).
    pub deltas: [i64; COUNTERS],
}

/// The steps of one call and what it leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallPlan {
    pub steps: Vec<Step>,
    /// Frames the call writes to its output (`hop` samples each).
    pub out: usize,
    /// History extents after the call (frames).
    pub mel_len: usize,
    pub src_len: usize,
}

/// Refuses `needed` past `capacity` ([`VocoderError::Capacity`] naming `what`).
pub(super) fn capacity(
    what: &'static str,
    needed: usize,
    capacity: usize,
) -> Result<(), VocoderError> {
    if needed > capacity {
        return Err(VocoderError::Capacity {
            what,
            needed,
            capacity,
        });
    }
    Ok(())
}

fn delta(after: usize, before: usize) -> i64 {
    (after - before) as i64
}

impl Counters {
    pub fn mel_len(&self) -> usize {
        self.received - self.mel_offset
    }

    pub fn src_len(&self) -> usize {
        self.source_end - self.src_offset
    }

    /// The state a stream is in when its histories hold `mel_len` and `src_len` frames between
    /// calls, up to a shift of every counter (module docs). Histories the vendor's stream never
    /// holds together (e.g. after its final step) are refused.
    pub fn canonical(l: &Limits, mel_len: usize, src_len: usize) -> Result<Counters, VocoderError> {
        let mut c = Counters {
            received: mel_len,
            ..Counters::default()
        };
        c.process(l, None, usize::MAX, false, 0)?;
        if (c.mel_len(), c.src_len()) != (mel_len, src_len) {
            return Err(VocoderError::State {
                mel: mel_len,
                src: src_len,
            });
        }
        Ok(c)
    }

    /// `_process(finalize)` on the counters (`bounded_vocoder.py:126-168`, minicpmo-utils 1.0.7): what it computes and
    /// trims, new source in blocks of at most `block` frames, every extent checked against
    /// `caps` (unchecked without).
    fn process(
        &mut self,
        l: &Limits,
        caps: Option<&Caps>,
        block: usize,
        finalize: bool,
        out_at: usize,
    ) -> Result<Step, VocoderError> {
        let big = Caps {
            mel: usize::MAX,
            src: usize::MAX,
            f0: usize::MAX,
            dec: usize::MAX,
            input: usize::MAX,
            out: usize::MAX,
        };
        let caps = caps.unwrap_or(&big);
        let block = block.max(1);
        let mut step = Step {
            append: None,
            finalize,
            f0: None,
            decode: None,
            trim_mel: None,
            trim_src: None,
            deltas: [0; COUNTERS],
        };
        let before = *self;
        let avail_src = self
            .received
            .saturating_sub(if finalize { 0 } else { l.f0_right });
        if avail_src > self.source_end {
            let start = self.source_end.saturating_sub(l.f0_left);
            let tf = self.received - start;
            capacity("F0 input", tf, caps.f0)?;
            let t0 = if finalize {
                tf
            } else {
                tf.checked_sub(l.f0_right).ok_or(VocoderError::State {
                    mel: self.mel_len(),
                    src: self.src_len(),
                })?
            };
            let mut f0 = F0Step {
                mel_at: start - self.mel_offset,
                frames: tf,
                t0,
                blocks: Vec::new(),
            };
            let mut at = self.source_end - start;
            while at < t0 {
                let n = block.min(t0 - at);
                let held = self.source_end - self.src_offset;
                capacity("source history", held + n, caps.src)?;
                f0.blocks.push(SourceBlock {
                    f0_at: at,
                    n,
                    y_at: held,
                });
                self.source_end += n;
                at += n;
            }
            step.f0 = Some(f0);
        }
        let avail_speech =
            self.source_end
                .saturating_sub(if finalize { 0 } else { l.decoder_right });
        if avail_speech > self.emitted {
            let start = self.emitted.saturating_sub(l.history);
            let t = self.source_end - start;
            capacity("decoder input", t, caps.dec)?;
            let want = avail_speech - self.emitted;
            capacity("call output", out_at + want, caps.out)?;
            step.decode = Some(DecodeStep {
                mel_at: start - self.mel_offset,
                src_at: start - self.src_offset,
                frames: t,
                skip: self.emitted - start,
                want,
                out_at,
            });
            self.emitted = avail_speech;
        }
        let keep_mel = self
            .emitted
            .saturating_sub(l.history)
            .min(self.source_end.saturating_sub(l.f0_left));
        let keep_src = self.emitted.saturating_sub(l.history);
        if keep_mel > self.mel_offset {
            let drop = keep_mel - self.mel_offset;
            step.trim_mel = Some((drop, self.mel_len() - drop));
            self.mel_offset = keep_mel;
        }
        if keep_src > self.src_offset {
            let drop = keep_src - self.src_offset;
            step.trim_src = Some((drop, self.source_end - keep_src));
            self.src_offset = keep_src;
        }
        step.deltas = [
            delta(self.mel_offset, before.mel_offset),
            delta(self.src_offset, before.src_offset),
            0,
            delta(self.emitted, before.emitted),
            i64::from(finalize),
        ];
        Ok(step)
    }
}

impl CallPlan {
    /// The plan of a call starting from histories of `mel_len` and `src_len` frames: `frames`
    /// fresh frames in blocks of `block` from the call's own start, one non-final step each
    /// (`BoundedVocoder.stream`, `bounded_vocoder.py:170-189`), or, with `finalize`, the final
    /// step alone (the vendor's `_process(True)` after the last chunk's blocks, which a caller
    /// runs as a call of their own first).
    pub fn new(
        l: &Limits,
        block: usize,
        caps: &Caps,
        mel_len: usize,
        src_len: usize,
        frames: usize,
        finalize: bool,
    ) -> Result<CallPlan, VocoderError> {
        capacity("call input", frames, caps.input)?;
        let mut c = Counters::canonical(l, mel_len, src_len)?;
        let mut steps = Vec::new();
        let mut out = 0;
        let mut start = 0;
        while start < frames {
            let n = block.min(frames - start);
            capacity("mel history", c.mel_len() + n, caps.mel)?;
            let append = Append {
                row: start,
                n,
                col: c.mel_len(),
            };
            c.received += n;
            let mut step = c.process(l, Some(caps), block, false, out)?;
            step.append = Some(append);
            out += step.decode.map_or(0, |d| d.want);
            steps.push(step);
            start += n;
        }
        if finalize {
            let step = c.process(l, Some(caps), block, true, out)?;
            out += step.decode.map_or(0, |d| d.want);
            steps.push(step);
        }
        Ok(CallPlan {
            steps,
            out,
            mel_len: c.mel_len(),
            src_len: c.src_len(),
        })
    }
}

#[cfg(test)]
mod tests;
