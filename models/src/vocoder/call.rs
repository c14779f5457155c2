//! One call of the vocoder (the contract's `vocoder` or `vocoder_flush`) as stream work only:
//! every step of a [`CallPlan`] over the regions and constants an [`Io`] names. Nothing here
//! synchronizes, downloads, allocates or reads a host value the plan does not fix, so the same
//! function runs eagerly and under capture.

use dcc_runtime::kernels::signal::COUNTERS;
use dcc_runtime::ops::{self, Ctx, RawTensor, Tensor};

use super::VocoderError;
use super::model::CausalHift;
use super::plan::{CallPlan, Caps, SOURCE_END};
use super::work::Work;

/// The addresses one call reads and writes (the callable's inputs and written regions), each at
/// its full storage layout.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Io {
    /// The fresh mel, time-major `[frames, in_channels]` (absent for the flush).
    pub mel: Option<RawTensor>,
    /// `voc_mel` `[in_channels, caps.mel]`, `voc_source` `[caps.src · hop]`, `voc_phase`
    /// `[harmonics]` f64, `voc_offsets` `[5]` i64.
    pub mel_history: RawTensor,
    pub source_history: RawTensor,
    pub phase: RawTensor<f64>,
    pub offsets: RawTensor<i64>,
    /// `noise_table` `[rows, harmonics]`, `stft_window` `[n_fft]`.
    pub noise: RawTensor,
    pub window: RawTensor,
}

/// `[1, n]` of a packed 1-D view (the copy kernel's row form).
fn row<'a>(t: Tensor<'a>, at: usize, n: usize) -> Result<Tensor<'a>, VocoderError> {
    Ok(t.narrow(0, at, n)?.view(&[1, n])?)
}

/// Queues `plan` on `cx`.
///
/// # Safety
/// Every tensor of `io` lies in live memory of `cx`'s backend that stays alive until the work
/// (or a graph recorded from it) last runs; the regions do not overlap each other, the
/// constants or `work`.
pub(crate) unsafe fn run(
    cx: &Ctx<'_>,
    m: &CausalHift,
    w: &Work,
    caps: &Caps,
    io: &Io,
    plan: &CallPlan,
) -> Result<(), VocoderError> {
    let c = &m.cfg;
    let hop = c.hop();
    // SAFETY: the caller's contract.
    let (mel_in, hist, src, phase, offsets, noise, window) = unsafe {
        (
            io.mel.map(|t| t.bind()),
            io.mel_history.bind(),
            io.source_history.bind(),
            io.phase.bind(),
            io.offsets.bind(),
            io.noise.bind(),
            io.window.bind(),
        )
    };
    let cm = c.in_channels;
    let hist = hist.view(&[cm, caps.mel])?;
    let src = src.view(&[caps.src * hop])?;
    let offsets = offsets.view(&[COUNTERS])?;
    let frame = offsets.narrow(0, SOURCE_END, 1)?;
    let out = Tensor::<f32>::of(&w.out)?;
    let pcm = Tensor::<f32>::of(&w.pcm)?;
    let mel_scratch = Tensor::<f32>::of(&w.mel_scratch)?.view(&[cm, caps.mel])?;
    let src_scratch = Tensor::<f32>::of(&w.src_scratch)?;
    for step in &plan.steps {
        if let Some(a) = step.append {
            let Some(mel_in) = mel_in else {
                return Err(VocoderError::Unsupported {
                    what: "a call's fresh mel".into(),
                    expected: format!("{} frames", a.row + a.n),
                    found: "none".into(),
                });
            };
            ops::transpose(
                cx,
                hist.narrow(1, a.col, a.n)?,
                mel_in.narrow(0, a.row, a.n)?,
            )?;
        }
        if let Some(f) = &step.f0 {
            let t0 = m.predict_f0(
                cx,
                w,
                hist.narrow(1, f.mel_at, f.frames)?,
                f.frames,
                step.finalize,
            )?;
            if t0 != f.t0 {
                return Err(VocoderError::Unsupported {
                    what: "F0 frames".into(),
                    expected: f.t0.to_string(),
                    found: t0.to_string(),
                });
            }
            let f0 = Tensor::<f32>::of(&w.f0)?.view(&[t0])?;
            for b in &f.blocks {
                m.source_block(
                    cx,
                    w,
                    f0.narrow(0, b.f0_at, b.n)?,
                    src.narrow(0, b.y_at * hop, b.n * hop)?,
                    phase,
                    noise,
                    frame,
                )?;
                let mut d = [0i64; COUNTERS];
                d[SOURCE_END] = b.n as i64;
                ops::counters_add(cx, offsets, &d)?;
            }
        }
        if let Some(d) = step.decode {
            let n_pcm = m.decode(
                cx,
                w,
                hist.narrow(1, d.mel_at, d.frames)?,
                src.narrow(0, d.src_at * hop, d.frames * hop)?,
                window,
                d.frames,
                step.finalize,
            )?;
            let (skip, want) = (d.skip * hop, d.want * hop);
            if n_pcm < skip || n_pcm - skip != want {
                return Err(VocoderError::Unsupported {
                    what: "decoded samples".into(),
                    expected: want.to_string(),
                    found: n_pcm.saturating_sub(skip).to_string(),
                });
            }
            ops::copy(cx, row(out, d.out_at * hop, want)?, row(pcm, skip, want)?)?;
        }
        // trims at fixed addresses: the kept frames move down through the scratch buffer
        if let Some((drop, rest)) = step.trim_mel {
            let tmp = mel_scratch.narrow(1, 0, rest)?;
            ops::copy(cx, tmp, hist.narrow(1, drop, rest)?)?;
            ops::copy(cx, hist.narrow(1, 0, rest)?, tmp)?;
        }
        if let Some((drop, rest)) = step.trim_src {
            let tmp = row(src_scratch, 0, rest * hop)?;
            ops::copy(cx, tmp, row(src, drop * hop, rest * hop)?)?;
            ops::copy(cx, row(src, 0, rest * hop)?, tmp)?;
        }
        if step.deltas != [0; COUNTERS] {
            ops::counters_add(cx, offsets, &step.deltas)?;
        }
    }
    Ok(())
}
