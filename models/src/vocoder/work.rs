//! The vocoder's device buffers, sized once: the stream's regions (the contract's `voc_mel`,
//! `voc_source`, `voc_phase`, `voc_offsets`, at their envelopes) and the activations of one
//! call (the fresh mel, the trims' scratch, the F0 predictor's float64 activations, the
//! decoder's, the call's PCM output). Nothing grows after construction, and no address changes.

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::signal::COUNTERS;

use super::VocoderError;
use super::config::VocoderConfig;
use super::plan::Caps;

/// A stream's state: the regions a call reads and writes in place.
#[derive(Debug)]
pub struct Regions {
    /// Mel history, channel-major `[in_channels, caps.mel]`.
    pub mel: DeviceBuffer,
    /// Source history, `[caps.src · hop]` samples.
    pub src: DeviceBuffer,
    /// The harmonic phase `[harmonics]` (f64).
    pub phase: DeviceBuffer,
    /// The vendor's counters `[5]` (i64).
    pub offsets: DeviceBuffer,
}

/// One call's activations, shared by the eager path and the captured callables.
#[derive(Debug)]
pub struct Work {
    /// The call's fresh mel, time-major `[caps.input, in_channels]`.
    pub mel_in: DeviceBuffer,
    /// Scratch of the trims: `[in_channels, caps.mel]` and `[caps.src · hop]`.
    pub mel_scratch: DeviceBuffer,
    pub src_scratch: DeviceBuffer,
    /// F0 predictor: widened input `[f0_in, f0_cap]`, two `[f0_cond, f0_cap]` activations, the
    /// classifier's `[1, f0_cap]` (all f64) and the F0 in float `[f0_cap]`.
    pub f0_x: DeviceBuffer,
    pub f0_a: DeviceBuffer,
    pub f0_b: DeviceBuffer,
    pub f0_out: DeviceBuffer,
    pub f0: DeviceBuffer,
    /// `[block, harmonics]` sines of one source block.
    pub sine: DeviceBuffer,
    /// Decoder: the source STFT and the spectra `[n_fft + 2, frames_cap]`, six activation
    /// buffers of `act_cap` floats, and its PCM `[hop · caps.dec]`.
    pub stft: DeviceBuffer,
    pub post: DeviceBuffer,
    pub spec: DeviceBuffer,
    pub acts: [DeviceBuffer; 6],
    /// Scratch of the second and third resblocks of a stage, run beside the first (`act_cap`
    /// floats each).
    pub group: [DeviceBuffer; 4],
    pub pcm: DeviceBuffer,
    /// The call's output `[hop · caps.out]`: every step's samples, downloaded once per call.
    pub out: DeviceBuffer,
}

fn f32s(be: &dyn Backend, n: usize) -> Result<DeviceBuffer, VocoderError> {
    Ok(be.alloc(4 * n.max(1), AllocKind::Other)?)
}

fn f64s(be: &dyn Backend, n: usize) -> Result<DeviceBuffer, VocoderError> {
    Ok(be.alloc(8 * n.max(1), AllocKind::Other)?)
}

impl Regions {
    /// Fresh regions (empty histories, zero phase and counters).
    pub fn new(be: &dyn Backend, c: &VocoderConfig, caps: &Caps) -> Result<Self, VocoderError> {
        let r = Regions {
            mel: f32s(be, c.in_channels * caps.mel)?,
            src: f32s(be, caps.src * c.hop())?,
            phase: f64s(be, c.harmonics)?,
            offsets: f64s(be, COUNTERS)?,
        };
        r.reset(be, c)?;
        Ok(r)
    }

    /// Zero phase and counters (the histories' contents are dead at extent 0).
    pub fn reset(&self, be: &dyn Backend, c: &VocoderConfig) -> Result<(), VocoderError> {
        be.memset_d32(self.phase.ptr(), 0, 2 * c.harmonics)?;
        be.memset_d32(self.offsets.ptr(), 0, 2 * COUNTERS)?;
        Ok(())
    }
}

impl Work {
    pub fn new(be: &dyn Backend, c: &VocoderConfig, caps: &Caps) -> Result<Self, VocoderError> {
        let hop = c.hop();
        let dmax = caps.dec;
        let frames_cap = c.rate() * dmax + 1;
        let mut act_cap = c.base_channels * dmax;
        let mut n = dmax;
        for (i, s) in c.stages.iter().enumerate() {
            n *= s.rate;
            let extra = usize::from(i + 1 == c.stages.len());
            act_cap = act_cap.max(s.c_out * (n + extra)).max(s.c_in * n / s.rate);
        }
        let f0_cap = caps.f0;
        Ok(Work {
            mel_in: f32s(be, caps.input * c.in_channels)?,
            mel_scratch: f32s(be, c.in_channels * caps.mel)?,
            src_scratch: f32s(be, caps.src * hop)?,
            f0_x: f64s(be, c.f0_in * f0_cap)?,
            f0_a: f64s(be, c.f0_cond * f0_cap)?,
            f0_b: f64s(be, c.f0_cond * f0_cap)?,
            f0_out: f64s(be, f0_cap)?,
            f0: f32s(be, f0_cap)?,
            sine: f32s(be, c.block_frames * c.harmonics)?,
            stft: f32s(be, (c.n_fft + 2) * frames_cap)?,
            post: f32s(be, (c.n_fft + 2) * frames_cap)?,
            spec: f32s(be, (c.n_fft + 2) * frames_cap)?,
            acts: [
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
            ],
            group: [
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
                f32s(be, act_cap)?,
            ],
            pcm: f32s(be, hop * dmax)?,
            out: f32s(be, hop * caps.out)?,
        })
    }
}
