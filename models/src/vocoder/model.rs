//! The vocoder's layers, loaded from a [`VocoderWeights`] by the vendor's state_dict names
//! (weight norm folded), and its device constants (noise table, STFT window, DFT twiddles).

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::signal::twiddles;

use super::VocoderError;
use super::config::{Limits, VocoderConfig};
use super::weights::VocoderWeights;
use crate::nn::{DirectConv1d, ResBlock, Snake};

/// The streaming causal HiFT generator (`CausalHiFTGenerator` with its
/// `CausalConvRNNF0Predictor` and `SourceModuleHnNSF`), on one backend.
#[derive(Debug)]
pub struct CausalHift {
    pub cfg: VocoderConfig,
    pub limits: Limits,
    pub(super) conv_pre: DirectConv1d<f32>,
    pub(super) ups: Vec<DirectConv1d<f32>>,
    pub(super) source_downs: Vec<DirectConv1d<f32>>,
    pub(super) source_resblocks: Vec<ResBlock>,
    pub(super) resblocks: Vec<ResBlock>,
    pub(super) conv_post: DirectConv1d<f32>,
    /// `f0_predictor.condnet.{0,2,4,...}` in float64.
    pub(super) f0_convs: Vec<DirectConv1d<f64>>,
    /// `f0_predictor.classifier` as a 1×1 convolution in float64.
    pub(super) f0_classifier: DirectConv1d<f64>,
    pub(super) l_linear_w: DeviceBuffer,
    pub(super) l_linear_b: DeviceBuffer,
    /// The noise table `[rows, harmonics]` (the vendor's `SineGen2.sine_waves`).
    pub(super) noise: DeviceBuffer,
    pub(super) noise_rows: usize,
    noise_sha256: String,
    /// The periodic Hann window of `n_fft` points in float (scipy's `get_window("hann", n,
    /// fftbins=True)`).
    pub(super) window: DeviceBuffer,
    /// `dcc_kernels::signal::twiddles(n_fft)`.
    pub(super) twiddles: DeviceBuffer,
}

/// scipy's `get_window("hann", n, fftbins=True)` rounded to float: `0.5 + 0.5 · cos(f)` over
/// `f = linspace(−π, π, n + 1)[:n]`, in double.
pub fn hann_window(n: usize) -> Vec<f32> {
    let pi = std::f64::consts::PI;
    let step = 2.0 * pi / n as f64;
    (0..n)
        .map(|i| (0.5 + 0.5 * (-pi + i as f64 * step).cos()) as f32)
        .collect()
}

fn conv32(
    be: &dyn Backend,
    w: &VocoderWeights,
    prefix: &str,
    c_out: usize,
    c_in: usize,
    k: usize,
) -> Result<DirectConv1d<f32>, VocoderError> {
    let wt = w.f32(&format!("{prefix}.weight"), &[c_out, c_in, k])?;
    let b = w.f32(&format!("{prefix}.bias"), &[c_out])?;
    Ok(DirectConv1d::from_host(be, wt, b, c_out, c_in, k)?)
}

fn resblock(
    be: &dyn Backend,
    w: &VocoderWeights,
    prefix: &str,
    c: usize,
    k: usize,
    dilations: &[usize],
) -> Result<ResBlock, VocoderError> {
    let n = dilations.len();
    let mut b = ResBlock {
        convs1: Vec::with_capacity(n),
        convs2: Vec::with_capacity(n),
        acts1: Vec::with_capacity(n),
        acts2: Vec::with_capacity(n),
        dilations: dilations.to_vec(),
    };
    for i in 0..n {
        b.convs1
            .push(conv32(be, w, &format!("{prefix}.convs1.{i}"), c, c, k)?);
        b.convs2
            .push(conv32(be, w, &format!("{prefix}.convs2.{i}"), c, c, k)?);
        for (acts, which) in [(&mut b.acts1, 1), (&mut b.acts2, 2)] {
            let a = w.f32(&format!("{prefix}.activations{which}.{i}.alpha"), &[c])?;
            acts.push(Snake::from_host(be, a)?);
        }
    }
    Ok(b)
}

impl CausalHift {
    /// Every kernel the vocoder's calls may launch: its layers are direct convolutions, the
    /// source module's and the STFT's signal kernels and elementwise ops, all of the fixed
    /// families ([`dcc_runtime::kernels::fixed`]; it has no linear, so no GEMM path). What a
    /// process preloads before it serves the vocoder.
    pub fn kernels(&self) -> Vec<&'static dcc_runtime::KernelDef> {
        dcc_runtime::kernels::fixed()
    }

    /// Every layer of `w` onto `be`. A missing tensor or a tensor of another shape is an error
    /// naming it (with the expected and the found shape); so is a noise table whose shape is not
    /// `[1, rows, harmonics]`.
    pub fn load(be: &dyn Backend, w: &VocoderWeights) -> Result<Self, VocoderError> {
        let cfg = VocoderConfig::from_weights(w)?;
        let limits = cfg.limits();
        let conv_pre = conv32(
            be,
            w,
            "conv_pre",
            cfg.base_channels,
            cfg.in_channels,
            cfg.look_right + 1,
        )?;
        let mut ups = Vec::new();
        let mut source_downs = Vec::new();
        let mut source_resblocks = Vec::new();
        let mut resblocks = Vec::new();
        let nk = cfg.resblock_kernels.len();
        for (i, s) in cfg.stages.iter().enumerate() {
            ups.push(conv32(
                be,
                w,
                &format!("ups.{i}"),
                s.c_out,
                s.c_in,
                s.kernel,
            )?);
            source_downs.push(conv32(
                be,
                w,
                &format!("source_downs.{i}"),
                s.c_out,
                cfg.n_fft + 2,
                s.down_kernel,
            )?);
            source_resblocks.push(resblock(
                be,
                w,
                &format!("source_resblocks.{i}"),
                s.c_out,
                s.source_kernel,
                &s.source_dilations,
            )?);
            for j in 0..nk {
                resblocks.push(resblock(
                    be,
                    w,
                    &format!("resblocks.{}", i * nk + j),
                    s.c_out,
                    cfg.resblock_kernels[j],
                    &cfg.resblock_dilations[j],
                )?);
            }
        }
        let last = cfg
            .stages
            .last()
            .map(|s| s.c_out)
            .unwrap_or(cfg.base_channels);
        let conv_post = conv32(be, w, "conv_post", cfg.n_fft + 2, last, cfg.post_kernel)?;
        let mut f0_convs = Vec::new();
        let mut c_in = cfg.f0_in;
        for (i, &k) in cfg.f0_kernels.iter().enumerate() {
            let p = format!("f0_predictor.condnet.{}", 2 * i);
            let wt = w.f64(&format!("{p}.weight"), &[cfg.f0_cond, c_in, k])?;
            let b = w.f64(&format!("{p}.bias"), &[cfg.f0_cond])?;
            f0_convs.push(DirectConv1d::from_host(be, &wt, &b, cfg.f0_cond, c_in, k)?);
            c_in = cfg.f0_cond;
        }
        let cw = w.f64("f0_predictor.classifier.weight", &[1, cfg.f0_cond])?;
        let cb = w.f64("f0_predictor.classifier.bias", &[1])?;
        let f0_classifier = DirectConv1d::from_host(be, &cw, &cb, 1, cfg.f0_cond, 1)?;
        let h = cfg.harmonics;
        let lw = w.f32("m_source.l_linear.weight", &[1, h])?;
        let lb = w.f32("m_source.l_linear.bias", &[1])?;
        let shape = w.shape("noise_table")?.to_vec();
        let noise_rows = match shape[..] {
            [1, rows, hh] if hh == h && rows > 0 => rows,
            _ => {
                return Err(VocoderError::NoiseTable {
                    file: w.file().into(),
                    harmonics: h,
                    found: shape,
                });
            }
        };
        let table = w.f32("noise_table", &shape)?;
        let bytes: Vec<u8> = table.iter().flat_map(|v| v.to_le_bytes()).collect();
        let noise_sha256 = dcc_runtime::sha256_hex(&bytes);
        Ok(CausalHift {
            limits,
            conv_pre,
            ups,
            source_downs,
            source_resblocks,
            resblocks,
            conv_post,
            f0_convs,
            f0_classifier,
            l_linear_w: be.alloc_from(lw, AllocKind::Other)?,
            l_linear_b: be.alloc_from(lb, AllocKind::Other)?,
            noise: be.alloc_from(table, AllocKind::Other)?,
            noise_rows,
            noise_sha256,
            window: be.alloc_from(&hann_window(cfg.n_fft), AllocKind::Other)?,
            twiddles: be.alloc_from(&twiddles(cfg.n_fft), AllocKind::Other)?,
            cfg,
        })
    }

    /// SHA-256 (hex) of the noise table's little-endian float32 bytes, as loaded: the table is
    /// the one input of the vendor's stream that no seed determines, so it belongs in the
    /// exactness ledger of every output.
    pub fn noise_sha256(&self) -> &str {
        &self.noise_sha256
    }

    /// Rows of the noise table held: the absolute sample position wraps modulo them (the
    /// vendor's table is 300 s of samples, 7,200,000 rows; a smaller one wraps sooner).
    pub fn noise_rows(&self) -> usize {
        self.noise_rows
    }

    /// Address of the noise table `[rows, harmonics]` (the contract's `noise_table`).
    pub fn noise_ptr(&self) -> dcc_runtime::DevPtr {
        self.noise.ptr()
    }

    /// Address of the STFT window `[n_fft]` (the contract's `stft_window`).
    pub fn window_ptr(&self) -> dcc_runtime::DevPtr {
        self.window.ptr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bits of `scipy.signal.get_window("hann", 16, fftbins=True).astype(np.float32)`, the
    /// vendor's `stft_window`.
    #[test]
    fn hann_window_is_scipys() {
        let want: [u32; 16] = [
            0x0, 0x3d1be50c, 0x3e15f61a, 0x3e9e0875, 0x3f000000, 0x3f30fbc5, 0x3f5a827a,
            0x3f7641af, 0x3f800000, 0x3f7641af, 0x3f5a827a, 0x3f30fbc5, 0x3f000000, 0x3e9e0875,
            0x3e15f61a, 0x3d1be50c,
        ];
        let got: Vec<u32> = hann_window(16).iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want);
    }
}
