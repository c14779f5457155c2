//! The excitation path: the float64 F0 predictor (`CausalConvRNNF0Predictor.forward` after the
//! vendor's `.double()`) and the harmonic source of one block (`BoundedVocoder._source`).

use dcc_runtime::backend::DeviceBuffer;
use dcc_runtime::ops::{self, ConvGeom, Ctx, Residual, SourceArgs, Tensor};

use super::VocoderError;
use super::model::CausalHift;
use super::work::Work;

fn view64<'a>(buf: &'a DeviceBuffer, dims: &[usize]) -> Result<Tensor<'a, f64>, VocoderError> {
    Ok(Tensor::<f64>::of(buf)?.view(dims)?)
}

fn view32<'a>(buf: &'a DeviceBuffer, dims: &[usize]) -> Result<Tensor<'a>, VocoderError> {
    Ok(Tensor::<f32>::of(buf)?.view(dims)?)
}

impl CausalHift {
    /// F0 of `mel` (`[f0_in, t]`, a view of the mel history) into `w.f0` as float (`|·|` of the
    /// float64 predictor, cast as the vendor's `.to(features)`): `t` frames when finalizing (the
    /// first convolution's right context is zeros), else `t − f0_right` (the last `f0_right`
    /// frames are its look-ahead). Returns the frame count.
    pub(super) fn predict_f0(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        mel: Tensor<'_>,
        t: usize,
        finalize: bool,
    ) -> Result<usize, VocoderError> {
        let c = &self.cfg;
        let x = view64(&w.f0_x, &[c.f0_in, t])?;
        ops::widen(cx, x, mel)?;
        let t0 = if finalize {
            t
        } else {
            t - self.limits.f0_right
        };
        let mut a = view64(&w.f0_a, &[c.f0_cond, t0])?;
        let mut b = view64(&w.f0_b, &[c.f0_cond, t0])?;
        self.f0_convs[0].forward(cx, a, x, Residual::None, ConvGeom::PLAIN)?;
        ops::elu_f64(cx, a)?;
        for conv in &self.f0_convs[1..] {
            conv.causal_left(cx, b, a, Residual::None, 1)?;
            ops::elu_f64(cx, b)?;
            std::mem::swap(&mut a, &mut b);
        }
        let out = view64(&w.f0_out, &[1, t0])?;
        self.f0_classifier
            .forward(cx, out, a, Residual::None, ConvGeom::PLAIN)?;
        ops::abs_narrow(cx, view32(&w.f0, &[t0])?, view64(&w.f0_out, &[t0])?)?;
        Ok(t0)
    }

    /// The merged excitation of the `n` frames of `f0` (a view of `w.f0`) into `y` (`[n · hop]`),
    /// starting at the source frame `frame` holds (`[1]` int64, the stream's `source_end` in
    /// device memory): the harmonic phase advances in `phase` (`[harmonics]` f64), the noise
    /// comes from `table` (`[rows, harmonics]`) at rows `(frame · hop + i) mod rows`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn source_block(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        f0: Tensor<'_>,
        y: Tensor<'_>,
        phase: Tensor<'_, f64>,
        table: Tensor<'_>,
        frame: Tensor<'_, i64>,
    ) -> Result<(), VocoderError> {
        let c = &self.cfg;
        let n = f0.dims()[0];
        let h = c.harmonics;
        let sine = view32(&w.sine, &[n, h])?;
        ops::harmonic_phase(cx, sine, phase, f0, c.sampling_rate as f32, c.hop())?;
        let lw = view32(&self.l_linear_w, &[h])?;
        let lb = view32(&self.l_linear_b, &[1])?;
        let args = SourceArgs {
            hop: c.hop(),
            sine_amp: c.nsf_alpha,
            noise_std: c.nsf_sigma,
            threshold: c.nsf_voiced_threshold,
        };
        ops::harmonic_source(cx, y, sine, f0, table, lw, lb, frame, &args)?;
        Ok(())
    }
}
