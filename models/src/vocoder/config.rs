//! The vocoder's configuration: channel counts and kernel sizes from the weight shapes, rates,
//! dilations and scalars from the file's `config` metadata (the constructor values of the
//! vendor's `CausalHiFTGenerator`), and the bounded-stream sizes the vendor derives from them
//! (`context_sizes`, `BoundedVocoder.limits`).

use serde_json::Value;

use super::VocoderError;
use super::weights::VocoderWeights;
use crate::nn::causal_padding;

/// One upsampling stage: `ups[i]` (nearest upsampling by `rate`, then a causal convolution of
/// `kernel`), `source_downs[i]` and `source_resblocks[i]`, and its `num_kernels` resblocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Stage {
    pub c_in: usize,
    pub c_out: usize,
    pub rate: usize,
    pub kernel: usize,
    /// `source_downs[i]`: kernel and stride (`CausalConv1dDownSample(k = 2u, stride u)`, or a
    /// 1×1 left-causal convolution for `u = 1`).
    pub down_kernel: usize,
    pub down_stride: usize,
    pub source_kernel: usize,
    pub source_dilations: Vec<usize>,
}

/// The configuration of a streaming causal HiFT vocoder.
#[derive(Clone, Debug, PartialEq)]
pub struct VocoderConfig {
    pub in_channels: usize,
    pub base_channels: usize,
    /// `conv_pre_look_right` (the right context of `conv_pre`, kernel `look_right + 1`).
    pub look_right: usize,
    pub stages: Vec<Stage>,
    pub resblock_kernels: Vec<usize>,
    pub resblock_dilations: Vec<Vec<usize>>,
    /// `conv_post`'s kernel (left-causal).
    pub post_kernel: usize,
    pub n_fft: usize,
    pub hop_len: usize,
    /// Harmonics including the fundamental (`nb_harmonics + 1`).
    pub harmonics: usize,
    pub sampling_rate: usize,
    pub nsf_alpha: f32,
    pub nsf_sigma: f32,
    pub nsf_voiced_threshold: f32,
    pub lrelu_slope: f32,
    pub audio_limit: f32,
    /// The F0 predictor: input and condition channels, and the kernel of each `condnet` conv
    /// (the first right-causal, the rest left-causal).
    pub f0_in: usize,
    pub f0_cond: usize,
    pub f0_kernels: Vec<usize>,
    /// `BoundedVocoder(block_frames=...)`.
    pub block_frames: usize,
}

/// The streaming sizes (`context_sizes`, `BoundedVocoder.limits`), in mel frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    pub f0_left: usize,
    pub f0_right: usize,
    pub history: usize,
    pub decoder_right: usize,
    pub delay: usize,
    pub mel_buffer: usize,
    pub source_buffer: usize,
    pub f0_input: usize,
    pub decoder_input: usize,
}

fn config_err(w: &VocoderWeights, key: &str, detail: impl Into<String>) -> VocoderError {
    VocoderError::Config {
        file: w.file().into(),
        key: key.into(),
        detail: detail.into(),
    }
}

struct Json<'a> {
    w: &'a VocoderWeights,
    v: Value,
}

impl Json<'_> {
    fn get(&self, key: &str) -> Result<&Value, VocoderError> {
        let mut v = &self.v;
        for part in key.split('.') {
            v = v
                .get(part)
                .ok_or_else(|| config_err(self.w, key, "absent from the `config` metadata"))?;
        }
        Ok(v)
    }

    fn usize(&self, key: &str) -> Result<usize, VocoderError> {
        self.get(key)?
            .as_u64()
            .map(|v| v as usize)
            .ok_or_else(|| config_err(self.w, key, "not a non-negative integer"))
    }

    fn f32(&self, key: &str) -> Result<f32, VocoderError> {
        self.get(key)?
            .as_f64()
            .map(|v| v as f32)
            .ok_or_else(|| config_err(self.w, key, "not a number"))
    }

    fn list(&self, key: &str) -> Result<Vec<usize>, VocoderError> {
        let bad = || config_err(self.w, key, "not a list of non-negative integers");
        self.get(key)?
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|v| v.as_u64().map(|v| v as usize).ok_or_else(bad))
            .collect()
    }

    fn lists(&self, key: &str) -> Result<Vec<Vec<usize>>, VocoderError> {
        let bad = || config_err(self.w, key, "not a list of lists of non-negative integers");
        self.get(key)?
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|l| {
                l.as_array()
                    .ok_or_else(bad)?
                    .iter()
                    .map(|v| v.as_u64().map(|v| v as usize).ok_or_else(bad))
                    .collect()
            })
            .collect()
    }
}

fn dim(w: &VocoderWeights, name: &str, axis: usize) -> Result<usize, VocoderError> {
    let s = w.shape(name)?;
    s.get(axis).copied().ok_or_else(|| VocoderError::Shape {
        file: w.file().into(),
        name: name.into(),
        expected: vec![0; axis + 1],
        found: s.to_vec(),
    })
}

fn unsupported(what: &str, expected: impl ToString, found: impl ToString) -> VocoderError {
    VocoderError::Unsupported {
        what: what.into(),
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

impl VocoderConfig {
    /// Reads the configuration of `w`: shapes for channels and kernels, the `config` metadata for
    /// the rest, then checks it is the vendor's streaming path (24 kHz, 480 samples per frame,
    /// the 8-frame delay).
    pub fn from_weights(w: &VocoderWeights) -> Result<Self, VocoderError> {
        let raw = w
            .meta("config")
            .ok_or_else(|| config_err(w, "config", "the file has no `config` metadata"))?;
        let v = serde_json::from_str(raw).map_err(|e| config_err(w, "config", e.to_string()))?;
        let j = Json { w, v };
        let base_channels = dim(w, "conv_pre.weight", 0)?;
        let in_channels = dim(w, "conv_pre.weight", 1)?;
        let look_right = dim(w, "conv_pre.weight", 2)?.saturating_sub(1);
        let rates = j.list("upsample_rates")?;
        let n_stages = (0..)
            .take_while(|i| w.contains(&format!("ups.{i}.weight")))
            .count();
        if n_stages != rates.len() || n_stages == 0 {
            return Err(unsupported(
                "upsampling stages (ups.*)",
                rates.len(),
                n_stages,
            ));
        }
        let source_dil = j.lists("source_resblock_dilation_sizes")?;
        let resblock_dilations = j.lists("resblock_dilation_sizes")?;
        let nk = resblock_dilations.len();
        let resblock_kernels = (0..nk)
            .map(|k| dim(w, &format!("resblocks.{k}.convs1.0.weight"), 2))
            .collect::<Result<Vec<_>, _>>()?;
        // downsample_cum_rates[::-1] of the vendor: cumprod([1] + rates[::-1][:-1]) reversed
        let mut cum = vec![1usize];
        for r in rates.iter().rev().take(n_stages - 1) {
            cum.push(cum.last().unwrap_or(&1) * r);
        }
        cum.reverse();
        let mut stages = Vec::with_capacity(n_stages);
        for i in 0..n_stages {
            let name = format!("ups.{i}.weight");
            let u = cum[i];
            stages.push(Stage {
                c_out: dim(w, &name, 0)?,
                c_in: dim(w, &name, 1)?,
                kernel: dim(w, &name, 2)?,
                rate: rates[i],
                down_kernel: if u == 1 { 1 } else { 2 * u },
                down_stride: u,
                source_kernel: dim(w, &format!("source_resblocks.{i}.convs1.0.weight"), 2)?,
                source_dilations: source_dil.get(i).cloned().ok_or_else(|| {
                    config_err(
                        w,
                        "source_resblock_dilation_sizes",
                        format!("no entry for stage {i}"),
                    )
                })?,
            });
        }
        let n_fft = dim(w, "conv_post.weight", 0)?.saturating_sub(2);
        let f0_layers = (0..)
            .take_while(|i| w.contains(&format!("f0_predictor.condnet.{}.weight", 2 * i)))
            .count();
        let f0_kernels = (0..f0_layers)
            .map(|i| dim(w, &format!("f0_predictor.condnet.{}.weight", 2 * i), 2))
            .collect::<Result<Vec<_>, _>>()?;
        let c = VocoderConfig {
            in_channels,
            base_channels,
            look_right,
            stages,
            resblock_kernels,
            resblock_dilations,
            post_kernel: dim(w, "conv_post.weight", 2)?,
            n_fft,
            hop_len: j.usize("istft_params.hop_len")?,
            harmonics: dim(w, "m_source.l_linear.weight", 1)?,
            sampling_rate: j.usize("sampling_rate")?,
            nsf_alpha: j.f32("nsf_alpha")?,
            nsf_sigma: j.f32("nsf_sigma")?,
            nsf_voiced_threshold: j.f32("nsf_voiced_threshold")?,
            lrelu_slope: j.f32("lrelu_slope")?,
            audio_limit: j.f32("audio_limit")?,
            f0_in: dim(w, "f0_predictor.condnet.0.weight", 1)?,
            f0_cond: dim(w, "f0_predictor.condnet.0.weight", 0)?,
            f0_kernels,
            block_frames: j.usize("block_frames")?,
        };
        c.check()?;
        Ok(c)
    }

    /// The vendor's `load_causal_vocoder` and `Token2wav` checks, and what the port assumes.
    fn check(&self) -> Result<(), VocoderError> {
        if self.sampling_rate != 24000 {
            return Err(unsupported("sampling_rate", 24000, self.sampling_rate));
        }
        if self.hop() != 480 {
            return Err(unsupported("samples per mel frame", 480, self.hop()));
        }
        if self.n_fft < 2 || !self.n_fft.is_multiple_of(2) || self.hop_len == 0 {
            return Err(unsupported(
                "ISTFT n_fft (even) / hop",
                "16 / 4",
                format!("{} / {}", self.n_fft, self.hop_len),
            ));
        }
        if self.f0_kernels.len() < 2 || self.in_channels != self.f0_in {
            return Err(unsupported(
                "F0 predictor condnet",
                "a right-causal conv then left-causal convs over the mel",
                format!(
                    "{} convs over {} channels",
                    self.f0_kernels.len(),
                    self.f0_in
                ),
            ));
        }
        let kernels_ok = self.stages.iter().all(|s| {
            s.rate >= 1
                && s.kernel >= 2
                && s.down_kernel >= 1
                && s.down_stride >= 1
                && s.source_kernel >= 1
        }) && self.resblock_kernels.iter().all(|&k| k >= 1)
            && self.post_kernel >= 1
            && self.f0_kernels.iter().all(|&k| k >= 1)
            && !self.stages.is_empty();
        if !kernels_ok {
            return Err(unsupported(
                "kernels and rates",
                "upsampling kernels of at least 2 and positive rates and kernels elsewhere",
                format!("{:?}", self.stages),
            ));
        }
        if self.block_frames == 0 {
            return Err(unsupported("block_frames", "positive", self.block_frames));
        }
        let l = self.limits();
        if l.delay != 8 {
            return Err(unsupported("vocoder delay frames", 8, l.delay));
        }
        Ok(())
    }

    /// Samples per mel frame (`prod(upsample_rates) · hop_len`).
    pub fn hop(&self) -> usize {
        self.rate() * self.hop_len
    }

    /// The upsampling product (`prod(upsample_rates)`).
    pub fn rate(&self) -> usize {
        self.stages.iter().map(|s| s.rate).product()
    }

    /// `context_sizes(model)` and `BoundedVocoder.limits` of the vendor, in exact rational
    /// arithmetic over the common denominator `hop` (every fraction there has a denominator
    /// dividing it).
    pub fn limits(&self) -> Limits {
        // saturating and zero-guarded throughout: a configuration built by hand may hold zeros
        // (`from_weights` refuses those), and this must not panic on it
        let hop = (self.hop() as u64).max(1);
        let rate = (self.rate() as u64).max(1);
        let f0_left: usize = self
            .f0_kernels
            .iter()
            .skip(1)
            .map(|&k| causal_padding(k, 1))
            .sum();
        let f0_right = self.f0_kernels.first().map_or(0, |&k| causal_padding(k, 1));
        let residual = |k: usize, dils: &[usize]| -> u64 {
            dils.iter()
                .map(|&d| (causal_padding(k, d) + causal_padding(k, 1)) as u64)
                .sum()
        };
        // numerators over `hop`
        let transform = self.n_fft as u64;
        let res = self
            .resblock_kernels
            .iter()
            .zip(&self.resblock_dilations)
            .map(|(&k, d)| residual(k, d))
            .max()
            .unwrap_or(0);
        let (mut history, mut scale) = (0u64, 1u64);
        for s in &self.stages {
            scale *= s.rate.max(1) as u64;
            history += (s.kernel as u64).saturating_sub(1) * (hop / scale);
            let source = transform
                + (s.down_kernel as u64).saturating_sub(1) * (hop / rate)
                + residual(s.source_kernel, &s.source_dilations) * (hop / scale);
            history = history.max(source) + res * (hop / scale);
        }
        history += (causal_padding(self.post_kernel, 1) as u64 + 1) * (hop / rate) + transform;
        let history = history.div_ceil(hop) as usize + 2;
        let decoder_right = self.look_right + 1;
        let delay = f0_right + decoder_right;
        let mel_history = history.max(f0_left.saturating_sub(decoder_right));
        Limits {
            f0_left,
            f0_right,
            history,
            decoder_right,
            delay,
            mel_buffer: mel_history + delay + self.block_frames,
            source_buffer: history + decoder_right + self.block_frames,
            f0_input: f0_left + f0_right + self.block_frames,
            decoder_input: history + decoder_right + self.block_frames,
        }
    }
}
