//! `CausalMaskedDiffWithXvec.setup_cache` / `inference_chunk` and the CFM Euler solver.

use std::path::Path;

use dcc_kernels as k;

use super::FlowError;
use super::config::FlowConfig;
use super::dit::{Dit, StepCache};
use super::encoder::{ConformerCache, Encoder};
use super::layers::Linear;
use super::retention::Retention;
use super::weights::WeightStore;

/// Batch rows of the classifier-free-guidance estimator call (conditional, unconditional).
const CFG_BATCH: usize = 2;

/// Solver settings of `CausalConditionalCFM.forward_chunk`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SolverParams {
    /// Euler steps (the vendor's `n_timesteps`).
    pub n_steps: usize,
    /// `inference_cfg_rate`.
    pub cfg_rate: f32,
    /// Noise temperature.
    pub temperature: f32,
}

impl Default for SolverParams {
    fn default() -> Self {
        Self {
            n_steps: 10,
            cfg_rate: 0.7,
            temperature: 1.0,
        }
    }
}

/// The cosine time grid `1 − cos(linspace(0, 1, n + 1) · π/2)` in float32, evaluated as torch
/// does (`linspace` fills the first half from the start and the second half from the end).
pub fn cosine_t_span(n_steps: usize) -> Vec<f32> {
    let steps = n_steps + 1;
    let step = 1.0f32 / n_steps as f32;
    let halfway = steps / 2;
    let pi = std::f64::consts::PI as f32;
    (0..steps)
        .map(|i| {
            let lin = if i < halfway {
                step * i as f32
            } else {
                1.0 - step * (steps - i - 1) as f32
            };
            1.0 - k::math::cos_f32(lin * 0.5 * pi)
        })
        .collect()
}

/// The estimator's streaming state for every solver step (the vendor's `estimator_att_cache`
/// `[n_steps, depth, 2, heads, extent, 2·head_dim]`, prepend-ordered, and
/// `estimator_cnn_cache`).
#[derive(Clone, Debug, PartialEq)]
pub struct EstimatorCache {
    pub n_steps: usize,
    /// Attended frames per step and layer (`att_cache.shape[4]`; also the noise offset).
    pub extent: usize,
    /// `[n_steps, depth, 2, heads, extent, 2·head_dim]`.
    pub att: Vec<f32>,
    /// `[n_steps, depth, 2, 2·(CONV_K − 1), hidden]` (per batch row: conv1 context, conv2 context).
    pub cnn: Vec<f32>,
}

/// The flow's whole streaming state after `setup_cache` / each `inference_chunk`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowCache {
    pub conformer: ConformerCache,
    pub estimator: EstimatorCache,
}

impl FlowCache {
    /// Applies the retention rule after a chunk (the peer script's `trim()`).
    pub fn retain(&mut self, cfg: &FlowConfig, r: &Retention) {
        let e = &mut self.estimator;
        if let Some(segs) = r.estimator_segments(e.extent) {
            let d = &cfg.dit;
            let outer = e.n_steps * d.depth * CFG_BATCH * d.heads;
            let kept: usize = segs.iter().map(|s| s.len()).sum();
            let mut att = vec![0.0f32; outer * kept * 2 * d.head_dim];
            k::copy::gather_time_segments(outer, e.extent, 2 * d.head_dim, &segs, &e.att, &mut att);
            e.att = att;
            e.extent = kept;
        }
        let c = &cfg.encoder;
        if let Some((tok, up)) = r.conformer_segments(self.conformer.extent(c), c.up_stride) {
            self.conformer.retain(c, &tok, &up);
        }
    }
}

/// The loaded flow.
#[derive(Clone, Debug)]
pub struct Flow {
    pub(crate) cfg: FlowConfig,
    pub(crate) embedding: Vec<f32>,
    pub(crate) spk_affine: Linear,
    pub(crate) encoder: Encoder,
    pub(crate) encoder_proj: Linear,
    pub(crate) dit: Dit,
    /// `decoder.rand_noise` `[mel, noise_frames]`.
    pub(crate) noise: Vec<f32>,
    pub(crate) noise_frames: usize,
}

impl Flow {
    /// Loads a vendor state_dict (plus `decoder.rand_noise` `[1, mel, N]`) from safetensors,
    /// inferring the configuration from the weight shapes.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, FlowError> {
        Self::from_store(&WeightStore::load(path)?)
    }

    pub fn from_store(ws: &WeightStore) -> Result<Self, FlowError> {
        let cfg = FlowConfig::from_weights(ws)?;
        Self::from_store_with(ws, cfg)
    }

    /// Loads with an explicit configuration (every shape is checked against it).
    pub fn from_store_with(ws: &WeightStore, cfg: FlowConfig) -> Result<Self, FlowError> {
        let e = &cfg.encoder;
        let noise_shape = ws.shape("decoder.rand_noise")?.to_vec();
        let noise_frames = match noise_shape.as_slice() {
            [1, m, n] if *m == cfg.mel => *n,
            _ => {
                return Err(FlowError::Config(format!(
                    "decoder.rand_noise: shape {noise_shape:?}"
                )));
            }
        };
        Ok(Self {
            embedding: ws.get("input_embedding.weight", &[cfg.vocab, e.dim])?,
            spk_affine: Linear::load(ws, "spk_embed_affine_layer", cfg.spk_dim, cfg.mel, true)?,
            encoder: Encoder::load(ws, e)?,
            encoder_proj: Linear::load(ws, "encoder_proj", e.dim, cfg.mel, true)?,
            dit: Dit::load(ws, &cfg.dit)?,
            noise: ws.get("decoder.rand_noise", &noise_shape)?,
            noise_frames,
            cfg,
        })
    }

    pub fn config(&self) -> &FlowConfig {
        &self.cfg
    }

    /// `F.normalize` + `spk_embed_affine_layer`.
    fn speaker(&self, spk: &[f32]) -> Result<Vec<f32>, FlowError> {
        if spk.len() != self.cfg.spk_dim {
            return Err(FlowError::Input(format!(
                "speaker embedding has {} values, expected {}",
                spk.len(),
                self.cfg.spk_dim
            )));
        }
        let mut n = vec![0.0f32; spk.len()];
        k::norm::l2_normalize(1, spk.len(), spk, 1e-12, &mut n);
        Ok(self.spk_affine.apply(1, &n))
    }

    /// Token embedding + encoder + `encoder_proj`: `(frames, mu [frames, mel])`.
    fn encode(
        &self,
        tokens: &[u32],
        last_chunk: bool,
        cache: &mut ConformerCache,
    ) -> Result<(usize, Vec<f32>), FlowError> {
        let d = self.cfg.encoder.dim;
        let la = self.cfg.encoder.pre_lookahead;
        let min = if last_chunk { 2 } else { la + 2 };
        if tokens.len() < min {
            return Err(FlowError::Input(format!(
                "{} tokens: at least {min} needed",
                tokens.len()
            )));
        }
        let mut emb = vec![0.0f32; tokens.len() * d];
        k::embed::embedding_gather(&self.embedding, d, tokens, &mut emb).map_err(|id| {
            FlowError::Input(format!(
                "token {id} outside the vocabulary of {}",
                self.cfg.vocab
            ))
        })?;
        let (frames, h) = self
            .encoder
            .forward_chunk(tokens.len(), &emb, last_chunk, cache);
        Ok((frames, self.encoder_proj.apply(frames, &h)))
    }

    /// `setup_cache`: primes every cache with the prompt. `tokens` include the `pre_lookahead`
    /// lookahead tokens, `mel` is the prompt mel `[frames, mel]` (time-major, as the vendor's
    /// `(b, t, c)`), `frames = stride · (tokens − lookahead)`.
    pub fn setup_cache(
        &self,
        tokens: &[u32],
        mel: &[f32],
        spk: &[f32],
        solver: &SolverParams,
    ) -> Result<FlowCache, FlowError> {
        let e = &self.cfg.encoder;
        let frames = tokens.len().saturating_sub(e.pre_lookahead) * e.up_stride;
        if mel.len() != frames * self.cfg.mel {
            return Err(FlowError::Input(format!(
                "prompt mel has {} values, expected {frames} frames × {} bins",
                mel.len(),
                self.cfg.mel
            )));
        }
        let spk = self.speaker(spk)?;
        let mut conformer = ConformerCache::empty(e);
        let (frames, mu) = self.encode(tokens, false, &mut conformer)?;
        let mut estimator = self.empty_estimator(solver.n_steps);
        self.solve(frames, &mu, &spk, Some(mel), &mut estimator, solver)?;
        Ok(FlowCache {
            conformer,
            estimator,
        })
    }

    /// `inference_chunk`: one streaming chunk (`tokens` include the lookahead unless
    /// `last_chunk`). Returns the mel `[mel, frames]` (channel-major, as the vendor's `feat[0]`).
    /// Retention is a separate step: [`FlowCache::retain`].
    pub fn inference_chunk(
        &self,
        tokens: &[u32],
        spk: &[f32],
        cache: &mut FlowCache,
        last_chunk: bool,
        solver: &SolverParams,
    ) -> Result<Vec<f32>, FlowError> {
        if cache.estimator.n_steps != solver.n_steps {
            return Err(FlowError::Input(format!(
                "cache primed for {} solver steps, called with {}",
                cache.estimator.n_steps, solver.n_steps
            )));
        }
        let spk = self.speaker(spk)?;
        let (frames, mu) = self.encode(tokens, last_chunk, &mut cache.conformer)?;
        let x = self.solve(frames, &mu, &spk, None, &mut cache.estimator, solver)?;
        let mel = self.cfg.mel;
        let mut feat = vec![0.0f32; mel * frames];
        k::copy::transpose(frames, mel, &x, mel, &mut feat, frames);
        Ok(feat)
    }

    fn empty_estimator(&self, n_steps: usize) -> EstimatorCache {
        let per_step = self.cfg.dit.depth * self.dit.cnn_elems(CFG_BATCH);
        EstimatorCache {
            n_steps,
            extent: 0,
            att: Vec::new(),
            cnn: vec![0.0; n_steps * per_step],
        }
    }

    /// `CausalConditionalCFM.forward_chunk` + `solve_euler_chunk`: returns `x` `[frames, mel]`
    /// (time-major) and advances the estimator cache by `frames`.
    fn solve(
        &self,
        frames: usize,
        mu: &[f32],
        spk: &[f32],
        cond: Option<&[f32]>,
        est: &mut EstimatorCache,
        solver: &SolverParams,
    ) -> Result<Vec<f32>, FlowError> {
        let mel = self.cfg.mel;
        let dc = &self.cfg.dit;
        let (depth, cin) = (dc.depth, dc.in_channels);
        if solver.n_steps == 0 {
            return Err(FlowError::Input("zero solver steps".into()));
        }
        let offset = est.extent;
        if offset + frames > self.noise_frames {
            return Err(FlowError::Input(format!(
                "noise table has {} frames, the call needs [{offset}, {})",
                self.noise_frames,
                offset + frames
            )));
        }
        // z = rand_noise[:, :, offset : offset + frames] · temperature, time-major
        let mut x = vec![0.0f32; frames * mel];
        k::copy::transpose(
            mel,
            frames,
            &self.noise[offset..],
            self.noise_frames,
            &mut x,
            mel,
        );
        k::act::scale_inplace(&mut x, solver.temperature);

        // x_in = [x ‖ mu ‖ spk ‖ cond] for the conditional row, [x ‖ 0 ‖ 0 ‖ 0] for the other
        let rows = CFG_BATCH * frames;
        let mut x_in = vec![0.0f32; rows * cin];
        k::copy::copy_block(frames, mel, mu, mel, &mut x_in[mel..], cin);
        k::copy::broadcast_row(frames, mel, spk, &mut x_in[2 * mel..], cin);
        if let Some(c) = cond {
            k::copy::copy_block(frames, mel, c, mel, &mut x_in[3 * mel..], cin);
        }

        let t_span = cosine_t_span(solver.n_steps);
        let mut t = t_span[0];
        let mut dt = t_span[1] - t_span[0];
        let l_old = est.extent;
        let l_new = l_old + frames;
        let att_old = CFG_BATCH * dc.heads * l_old * 2 * dc.head_dim;
        let att_new = CFG_BATCH * dc.heads * l_new * 2 * dc.head_dim;
        let cnn_len = self.dit.cnn_elems(CFG_BATCH);
        let mut new_att_all = Vec::with_capacity(solver.n_steps * depth * att_new);
        let mut new_cnn_all = Vec::with_capacity(solver.n_steps * depth * cnn_len);
        let mut new_att = vec![Vec::new(); depth];
        let mut new_cnn = vec![Vec::new(); depth];
        for step in 1..=solver.n_steps {
            for b in 0..CFG_BATCH {
                k::copy::copy_block(frames, mel, &x, mel, &mut x_in[b * frames * cin..], cin);
            }
            let s = step - 1;
            let caches: Vec<StepCache<'_>> = (0..depth)
                .map(|l| {
                    let i = s * depth + l;
                    StepCache {
                        att: &est.att[i * att_old..(i + 1) * att_old],
                        cnn: &est.cnn[i * cnn_len..(i + 1) * cnn_len],
                        t_cache: l_old,
                    }
                })
                .collect();
            let cond_act = self.dit.time_condition(t);
            let v = self.dit.forward_chunk(
                CFG_BATCH,
                frames,
                &x_in,
                &cond_act,
                &caches,
                &mut new_att,
                &mut new_cnn,
            );
            let n = frames * mel;
            k::elementwise::cfg_euler_step(&mut x, &v[..n], &v[n..2 * n], solver.cfg_rate, dt);
            t += dt;
            if step < solver.n_steps {
                dt = t_span[step + 1] - t;
            }
            for l in 0..depth {
                new_att_all.extend_from_slice(&new_att[l]);
                new_cnn_all.extend_from_slice(&new_cnn[l]);
            }
        }
        est.att = new_att_all;
        est.cnn = new_cnn_all;
        est.extent = l_new;
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_span_is_cosine() {
        let ts = cosine_t_span(10);
        assert_eq!(ts.len(), 11);
        assert_eq!(ts[0], 0.0);
        assert!((ts[10] - 1.0).abs() < 1e-7);
        for (i, t) in ts.iter().enumerate() {
            let want = 1.0 - (i as f64 / 10.0 * std::f64::consts::FRAC_PI_2).cos();
            assert!((*t as f64 - want).abs() < 1e-6);
        }
    }
}
