//! `CausalHiFTGenerator.decode`: mel and source in, PCM out, over the layers of [`CausalHift`].

use dcc_runtime::ops::{self, Act, ConvGeom, Ctx, Residual, Tensor};

use super::VocoderError;
use super::model::CausalHift;
use super::work::Work;
use crate::nn::{ResBlock, ResBlockRun, causal_padding};

/// The `[c, n]` packed view of the first `c·n` floats of `buf`.
fn view<'a>(
    buf: &'a dcc_runtime::backend::DeviceBuffer,
    dims: &[usize],
) -> Result<Tensor<'a>, VocoderError> {
    Ok(Tensor::<f32>::of(buf)?.view(dims)?)
}

impl CausalHift {
    /// `decode(x = mel, s = source, finalize)` of the vendor: `mel` `[in_channels, t]` (a view
    /// of the mel history), `source` packed `[t · hop]`, `win` the STFT window `[n_fft]`. Writes
    /// the PCM into `w.pcm` and returns its length: `hop · t` when finalizing, else `hop · (t −
    /// look_right − 1)` (the vendor drops the conv_pre look-ahead and the last frame of the
    /// ISTFT).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn decode(
        &self,
        cx: &Ctx<'_>,
        w: &Work,
        mel: Tensor<'_>,
        source: Tensor<'_>,
        win: Tensor<'_>,
        t: usize,
        finalize: bool,
    ) -> Result<usize, VocoderError> {
        let c = &self.cfg;
        let tx = if finalize { t } else { t - c.look_right };
        let frames = c.rate() * tx + 1;
        let spec_rows = c.n_fft + 2;
        let stft = view(&w.stft, &[spec_rows, frames])?;
        let tw = Tensor::<f64>::of(&self.twiddles)?.view(&[2 * c.n_fft])?;
        ops::stft(cx, stft, source, win, tw, c.hop_len)?;

        let [p, u, t1, t2, s1, s2] = &w.acts;
        let x = view(p, &[c.base_channels, tx])?;
        self.conv_pre
            .forward(cx, x, mel, Residual::None, ConvGeom::PLAIN)?;
        let (mut ch, mut n) = (c.base_channels, tx);
        let nk = c.resblock_kernels.len();
        let last = c.stages.len() - 1;
        for (i, st) in c.stages.iter().enumerate() {
            ops::act(cx, view(p, &[ch * n])?, Act::LeakyRelu(c.lrelu_slope))?;
            let x = view(p, &[ch, n])?;
            let up = n * st.rate;
            let n_out = up + usize::from(i == last);
            let out = view(u, &[st.c_out, n_out])?;
            let ups_out = if i == last {
                out.narrow(1, 1, up)?
            } else {
                out
            };
            let g = ConvGeom {
                pad: st.kernel - 1,
                up: st.rate,
                ..ConvGeom::PLAIN
            };
            self.ups[i].forward(cx, ups_out, x, Residual::None, g)?;
            if i == last {
                // ReflectionPad1d((1, 0)): column 0 repeats output frame 1, computed again by the
                // same taps in the same order (the padding shifted by one frame)
                let g1 = ConvGeom {
                    pad: st.kernel - 2,
                    ..g
                };
                self.ups[i].forward(cx, out.narrow(1, 0, 1)?, x, Residual::None, g1)?;
            }
            // fusion with the downsampled source spectrum
            let pad = if st.down_stride == 1 {
                causal_padding(st.down_kernel, 1)
            } else {
                st.down_stride - 1
            };
            let down_frames = (frames + pad - st.down_kernel) / st.down_stride + 1;
            if down_frames != n_out {
                return Err(VocoderError::Unsupported {
                    what: format!("source_downs.{i} frames"),
                    expected: n_out.to_string(),
                    found: down_frames.to_string(),
                });
            }
            let si_in = view(t2, &[st.c_out, n_out])?;
            let g = ConvGeom {
                stride: st.down_stride,
                pad,
                ..ConvGeom::PLAIN
            };
            self.source_downs[i].forward(cx, si_in, stft, Residual::None, g)?;
            let si = view(t1, &[st.c_out, n_out])?;
            let (sa, sb) = (view(s1, &[st.c_out, n_out])?, view(s2, &[st.c_out, n_out])?);
            self.source_resblocks[i].forward(cx, si, si_in, sa, sb)?;
            ops::add(cx, out, si)?;
            // the stage's resblocks, averaged: ((r0 + r1) + r2) / nk, into p. Up to three run in
            // lock-step, their convolutions grouped in one launch each (the same bits: each
            // output's arithmetic is the block's own), into p, t1 and t2 (the source branch is
            // done with t2), with scratch s1, s2 and the group buffers
            let acc = view(p, &[st.c_out, n_out])?;
            let dims = [st.c_out, n_out];
            if nk <= 3 {
                let [g0, g1, g2, g3] = &w.group;
                let outs = [acc, si, view(t2, &dims)?];
                let scratch = [
                    (sa, sb),
                    (view(g0, &dims)?, view(g1, &dims)?),
                    (view(g2, &dims)?, view(g3, &dims)?),
                ];
                let runs: Vec<ResBlockRun<'_>> = (0..nk)
                    .map(|j| ResBlockRun {
                        block: &self.resblocks[i * nk + j],
                        y: outs[j],
                        s1: scratch[j].0,
                        s2: scratch[j].1,
                    })
                    .collect();
                ResBlock::forward_group(cx, &runs, out)?;
                for o in &outs[1..nk] {
                    ops::add(cx, acc, *o)?;
                }
            } else {
                self.resblocks[i * nk].forward(cx, acc, out, sa, sb)?;
                for j in 1..nk {
                    self.resblocks[i * nk + j].forward(cx, si, out, sa, sb)?;
                    ops::add(cx, acc, si)?;
                }
            }
            ops::div(cx, view(p, &[st.c_out * n_out])?, nk as f32)?;
            ch = st.c_out;
            n = n_out;
        }
        ops::act(cx, view(p, &[ch * n])?, Act::LeakyRelu(0.01))?;
        let post = view(&w.post, &[spec_rows, n])?;
        let pad = causal_padding(c.post_kernel, 1);
        let g = ConvGeom {
            pad,
            ..ConvGeom::PLAIN
        };
        self.conv_post
            .forward(cx, post, view(p, &[ch, n])?, Residual::None, g)?;
        let spec = view(&w.spec, &[spec_rows, n])?;
        ops::polar(cx, spec, post, 100.0)?;
        let full = c.hop_len * (n - 1);
        let n_pcm = if finalize { full } else { full - c.hop() };
        let pcm = view(&w.pcm, &[n_pcm])?;
        ops::istft(cx, pcm, spec, win, tw, c.hop_len, c.audio_limit)?;
        Ok(n_pcm)
    }
}
