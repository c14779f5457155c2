//! The vocoder's device buffers, sized once from the configuration's bounds (`Limits`): the
//! bounded mel and source histories (two of each, so compaction copies into the other instead of
//! onto itself), the F0 predictor's float64 activations, the harmonic phase, and the decoder's
//! activations. Nothing grows after construction.

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};

use super::VocoderError;
use super::config::VocoderConfig;

#[derive(Debug)]
pub struct Work {
    /// Mel history, channel-major `[in_channels, mel_cap]` (two, alternating).
    pub mel: [DeviceBuffer; 2],
    pub mel_cap: usize,
    /// One incoming block of mel, packed `[in_channels, block]`.
    pub mel_stage: DeviceBuffer,
    /// Source history, `[src_cap · hop]` samples (two, alternating).
    pub src: [DeviceBuffer; 2],
    pub src_cap: usize,
    /// F0 predictor: widened input `[f0_in, f0_cap]`, two `[f0_cond, f0_cap]` activations, the
    /// classifier's `[1, f0_cap]` (all f64) and the F0 in float `[f0_cap]`.
    pub f0_x: DeviceBuffer,
    pub f0_a: DeviceBuffer,
    pub f0_b: DeviceBuffer,
    pub f0_out: DeviceBuffer,
    pub f0: DeviceBuffer,
    pub f0_cap: usize,
    /// `[block, harmonics]` sines of one block, and the phase `[harmonics]` (f64).
    pub sine: DeviceBuffer,
    pub phase: DeviceBuffer,
    /// Decoder: the source STFT and the spectra `[n_fft + 2, frames_cap]`, six activation
    /// buffers of `act_cap` floats, and the PCM `[pcm_cap]`.
    pub stft: DeviceBuffer,
    pub post: DeviceBuffer,
    pub spec: DeviceBuffer,
    pub acts: [DeviceBuffer; 6],
    pub pcm: DeviceBuffer,
    pub dec_cap: usize,
}

fn f32s(be: &dyn Backend, n: usize) -> Result<DeviceBuffer, VocoderError> {
    Ok(be.alloc(4 * n.max(1), AllocKind::Other)?)
}

fn f64s(be: &dyn Backend, n: usize) -> Result<DeviceBuffer, VocoderError> {
    Ok(be.alloc(8 * n.max(1), AllocKind::Other)?)
}

impl Work {
    pub fn new(be: &dyn Backend, c: &VocoderConfig) -> Result<Self, VocoderError> {
        let l = c.limits();
        let hop = c.hop();
        let dmax = l.decoder_input;
        let frames_cap = c.rate() * dmax + 1;
        let mut act_cap = c.base_channels * dmax;
        let mut n = dmax;
        for (i, s) in c.stages.iter().enumerate() {
            n *= s.rate;
            let extra = usize::from(i + 1 == c.stages.len());
            act_cap = act_cap.max(s.c_out * (n + extra)).max(s.c_in * n / s.rate);
        }
        let f0_cap = l.f0_input;
        let phase = f64s(be, c.harmonics)?;
        be.memset_d32(phase.ptr(), 0, 2 * c.harmonics)?;
        Ok(Work {
            mel: [
                f32s(be, c.in_channels * l.mel_buffer)?,
                f32s(be, c.in_channels * l.mel_buffer)?,
            ],
            mel_cap: l.mel_buffer,
            mel_stage: f32s(be, c.in_channels * c.block_frames)?,
            src: [
                f32s(be, l.source_buffer * hop)?,
                f32s(be, l.source_buffer * hop)?,
            ],
            src_cap: l.source_buffer,
            f0_x: f64s(be, c.f0_in * f0_cap)?,
            f0_a: f64s(be, c.f0_cond * f0_cap)?,
            f0_b: f64s(be, c.f0_cond * f0_cap)?,
            f0_out: f64s(be, f0_cap)?,
            f0: f32s(be, f0_cap)?,
            f0_cap,
            sine: f32s(be, c.block_frames * c.harmonics)?,
            phase,
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
            pcm: f32s(be, hop * dmax)?,
            dec_cap: dmax,
        })
    }
}
