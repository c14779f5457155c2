//! The CFM Euler solver of the `flow` callable over `n` sessions of one catalog class at once:
//! one session ([`DeviceFlow::flow_call`]) or a batch ([`super::batch`]).
//!
//! A batch's sessions share everything a class fixes: the estimator extent (so the noise
//! offset, `l_old`, and the attended frames), the frames of the call, the solver's time grid.
//! Their rows are stacked, session-major: solver row `s` is session `s`'s `x`, estimator batch
//! row `cfg·s + c` its CFG row `c`. Every arithmetic launch covers all rows at once; each row's
//! result is the same whatever rows share the launch when the kernels are batch-invariant (the
//! invariant GEMM path and every other op family: `runtime/tests/batch_invariant.rs`). What is
//! each session's own — its carry at its own addresses — is read and written by copies of its
//! own (the history copy into the workspace, the write-back), the only launches that come once
//! per session.

use std::ops::Range;

use dcc_runtime::contract::Keep;
use dcc_runtime::ops::{self, Act, Ctx, Elem, Tensor};

use dcc_runtime::kernels::elementwise::rn16;

use super::FlowError;
use super::dit::{CFG_BATCH, StepState};
use super::flow::{DeviceFlow, SolverParams};
use super::half;
use super::work::{Work, v};
use crate::nn::KvElem;

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
            1.0 - ops::host::cos_f32(lin * 0.5 * pi)
        })
        .collect()
}

/// `t` and `dt` of solver step `si` (0-based), accumulated exactly as the loop does, each sum
/// and difference through `round` (the identity in f32; rounding to f16 in the vendor's fp16
/// mode, where `t` and `dt` are f16 tensors).
fn step_time(t_span: &[f32], si: usize, round: fn(f32) -> f32) -> (f32, f32) {
    let mut t = t_span[0];
    let mut dt = round(t_span[1] - t_span[0]);
    for step in 1..=si {
        t = round(t + dt);
        dt = round(t_span[step + 1] - t);
    }
    (t, dt)
}

fn exact(x: f32) -> f32 {
    x
}

/// Every step's `t` of an `n_steps` solve ([`step_time`] of each step on the cosine grid; in
/// the vendor's fp16 mode, `half`, the f16 grid and sums): what the loop of [`DeviceFlow::solve`]
/// hands the estimator, step by step.
pub(super) fn step_times(n_steps: usize, half: bool) -> Vec<f32> {
    let (t_span, round) = if half {
        (half::cosine_t_span_f16(n_steps), rn16 as fn(f32) -> f32)
    } else {
        (cosine_t_span(n_steps), exact as fn(f32) -> f32)
    };
    (0..n_steps)
        .map(|si| step_time(&t_span, si, round).0)
        .collect()
}

/// The history frames a step copies into its workspace (`dit::StepState::staged`): all
/// `l_old`, but where the cache's element type lets the attention read the rest from the
/// carries ([`KvElem::READS_CARRIES`]) and the write-back needs no more. That is the steady
/// state of a prepend cache: the extent is at the bound (`head + tail`), so the tail the
/// write-back keeps is where it already lies in the carry, and the `frames` new frames fit the
/// head, so the head it keeps is the new frames and the history's first `head − frames`: only
/// those are staged (at the full config, which keeps the newest 100 frames at the head, 44
/// frames of 402). Anywhere else the whole history is staged, as the write-back may move any
/// of it; so is it where the solver does not write back (the stock store's caller copies the
/// whole workspace into its cache after the call).
fn staged_history<K: KvElem>(keep: &Keep, l_old: usize, frames: usize, sessions: usize) -> usize {
    let steady = l_old == keep.bound() && keep.head >= frames && frames > 0;
    let fits = (1..=dcc_runtime::kernels::attention::f16::MAX_HISTORIES).contains(&sessions);
    if K::READS_CARRIES && steady && fits {
        keep.head - frames
    } else {
        l_old
    }
}

/// One solver call over `n = carries.len()` sessions of one class, every view checked by the
/// caller against the flow's shapes. `K`: the element type of the carries and the workspace
/// (f32, or binary16 at the contract's `half` point; [`KvElem`]).
pub(super) struct Solve<'a, 'b, K: KvElem = f32> {
    /// The activations (rows for `n` sessions).
    pub w: &'a Work,
    /// `[n, frames, mel]` each.
    pub mu: Tensor<'a>,
    pub cond: Tensor<'a>,
    /// The raw speaker embeddings `[n, spk_dim]`.
    pub spk: Tensor<'a>,
    /// Each session's estimator carry: step-major `[step, depth, cfg, heads, cap, 2·hd]`, or one
    /// step's slice (`carry_slice`).
    pub carries: &'b [Tensor<'a, K>],
    pub carry_slice: bool,
    /// The solver workspace `[step, depth, n·cfg, heads, work, 2·hd]`: a slice per step, or
    /// one slice every step reuses (step extent 1: the contract's `iteration` lifetime; only
    /// where the solver writes each step back, `write_back`).
    pub ws: Tensor<'a, K>,
    /// The estimator conv contexts `[step, depth, n·cfg, conv, CONV_K − 1, hidden]`.
    pub est: Tensor<'a>,
    pub l_old: usize,
    pub frames: usize,
    pub steps: Range<usize>,
    pub write_back: bool,
    pub keep: Keep,
    pub solver: SolverParams,
}

impl DeviceFlow {
    /// Solver steps `s.steps` over the sessions of `s` (see the module docs); the last step
    /// writes every session's mel to `s.w.mel_out` (`[n, mel, frames]`). Returns the estimator
    /// extent after retention.
    pub(super) fn solve<K: KvElem>(
        &self,
        cx: &Ctx<'_>,
        s: Solve<'_, '_, K>,
    ) -> Result<usize, FlowError> {
        let c = self.config();
        let mel = c.mel;
        let (w, n, frames) = (s.w, s.carries.len(), s.frames);
        let (sv, l_old) = (s.solver, s.l_old);
        let half = half::rounds(self.gemm_path());
        let tk = l_old + frames;
        let cin = c.dit.in_channels;
        let xs = v(&w.xs, &[n, frames, mel])?;
        // x_in `[n, cfg, frames, in_channels]`
        let xin = v(&w.xin, &[n, CFG_BATCH, frames, cin])?;
        if s.steps.start == 0 {
            let proj = self.speaker(cx, w, s.spk)?;
            // z = noise[:, l_old : l_old + frames]ᵀ · temperature, the same for every session
            // of the class (one noise offset)
            let noise = self.noise()?.narrow(1, l_old, frames)?;
            let x0 = xs.index(0, 0)?;
            ops::transpose(cx, x0, noise)?;
            // at temperature 1 the product is the noise itself (exact), and on the half path
            // the noise table already holds f16 values: no scale and no rounding to launch
            if sv.temperature != 1.0 {
                ops::act(cx, x0, Act::Scale(sv.temperature))?;
                if half {
                    ops::round_f16(cx, x0)?;
                }
            }
            if n > 1 {
                ops::copy_batched(cx, xs.narrow(0, 1, n - 1)?, x0.broadcast(0, n - 1)?)?;
            }
            // x_in = [x ‖ mu ‖ spk ‖ cond] / [x ‖ 0 ‖ 0 ‖ 0]
            ops::memset(cx, xin, 0)?;
            let first = xin.index(1, 0)?;
            ops::copy_batched(cx, first.narrow(2, mel, mel)?, s.mu)?;
            let spk_rows = first.narrow(2, 2 * mel, mel)?;
            ops::copy_batched(cx, spk_rows, proj.broadcast(1, frames)?)?;
            ops::copy_batched(cx, first.narrow(2, 3 * mel, mel)?, s.cond)?;
        }
        let (t_span, round) = if half {
            (half::cosine_t_span_f16(sv.n_steps), rn16 as fn(f32) -> f32)
        } else {
            (cosine_t_span(sv.n_steps), exact as fn(f32) -> f32)
        };
        let (mut t, mut dt) = step_time(&t_span, s.steps.start, round);
        let mut kept = ops::carry::kept(&s.keep, tk);
        let staged = if s.write_back {
            staged_history::<K>(&s.keep, l_old, frames, n)
        } else {
            // the caller writes the workspace back itself (the stock store): all of it
            l_old
        };
        let x_rows = xin.narrow(3, 0, mel)?;
        let vel = v(&w.vel, &[n, CFG_BATCH, frames, mel])?;
        // every step's time condition, computed once per process for this path and step count
        // (the same launches: the same bits), else computed step by step into `w.mods`
        let table = self.time_conditions(sv.n_steps);
        let n_mods = self.dit().mods_len();
        for step in s.steps.start + 1..=s.steps.end {
            let si = step - 1;
            let ws_step = s.ws.index(0, if s.ws.dims()[0] == 1 { 0 } else { si })?;
            let carry_steps = s
                .carries
                .iter()
                .map(|c| {
                    if s.carry_slice {
                        Ok(*c)
                    } else {
                        c.index(0, si)
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            // x_in[s, c] ← x[s] for both CFG rows of every session
            if n == 1 {
                let x = xs.index(0, 0)?;
                ops::copy_batched(cx, x_rows.index(0, 0)?, x.broadcast(0, CFG_BATCH)?)?;
            } else {
                for cr in 0..CFG_BATCH {
                    ops::copy_batched(cx, x_rows.index(1, cr)?, xs)?;
                }
            }
            let st = StepState {
                carries: &carry_steps,
                extent: l_old,
                staged,
                work: ws_step,
                conv: s.est.index(0, si)?,
            };
            let mods = match &table {
                Some(tab) => tab.row(si)?,
                None => {
                    let mods = v(&w.mods, &[1, n_mods])?;
                    self.dit().time_condition(cx, w, t, mods)?;
                    mods
                }
            };
            self.dit().forward(cx, w, mods, frames, st)?;
            // carry write-back for this step (every layer's [new ‖ old] → carry), state rule:
            // the frames the contract's keep names, head ‖ tail of the prepend storage
            if s.write_back {
                let st = ops::carry::Staged {
                    at: frames,
                    frames: staged,
                    partial: staged < l_old,
                };
                kept = self.write_back(cx, &carry_steps, ws_step, tk, st, &s.keep)?;
            }
            // final layer (w.xn = modulate(norm_final(x))), guidance, Euler step
            self.dit().output(cx, w, frames, n)?;
            let euler = if half {
                ops::cfg_euler_f16
            } else {
                ops::cfg_euler
            };
            // every session's rows in one launch: x `[n, frames, mel]`, its velocities `[n, cfg,
            // frames, mel]`
            euler(cx, xs, vel, sv.cfg_rate, dt)?;
            t = round(t + dt);
            if step < sv.n_steps {
                dt = round(t_span[step + 1] - t);
            }
        }
        if s.steps.end == sv.n_steps {
            // every session's mel `[mel, frames]` from its rows `[frames, mel]`, one launch
            let out = v(&w.mel_out, &[n, mel, frames])?;
            ops::transpose(cx, out, xs)?;
        }
        Ok(kept)
    }

    /// Writes one step's workspace back into each session's carry step slice (`[depth, cfg,
    /// heads, cap, 2·hd]`): one launch over every layer's rows for a session alone; for a batch,
    /// per session, one launch over its rows of every layer of the batched workspace `[depth,
    /// n·cfg, heads, work, 2·hd]`, copied as they are or retained
    /// (`ops::carry::write_back_layers`). The workspace rows are `[new ‖ history]`, the
    /// history (all of it, or its first `staged.frames` frames: [`staged_history`]) the step
    /// staged from these very carries behind its `frames` new frames
    /// (`dit::stage_histories`; nothing writes either side of it during the step), so the
    /// kept frames that copy already puts in place, or that never left the carry, are not
    /// moved again (`ops::carry::Staged`: at the steady state, the prompt's frames).
    fn write_back<K: Elem>(
        &self,
        cx: &Ctx<'_>,
        carries: &[Tensor<'_, K>],
        ws: Tensor<'_, K>,
        tk: usize,
        staged: ops::carry::Staged,
        keep: &Keep,
    ) -> Result<usize, FlowError> {
        let mut kept = ops::carry::kept(keep, tk);
        let staged = Some(staged);
        if let [carry] = carries {
            let (dst, src) = (carry.flatten(0, 2)?, ws.flatten(0, 2)?);
            return Ok(ops::carry::write_back_staged(
                cx, dst, src, tk, keep, staged,
            )?);
        }
        for (i, carry) in carries.iter().enumerate() {
            // [depth, cfg·heads, frames, 2·hd] on both sides
            let dst = carry.flatten(1, 2)?;
            let src = ws.narrow(1, i * CFG_BATCH, CFG_BATCH)?.flatten(1, 2)?;
            kept = ops::carry::write_back_layers_staged(cx, dst, src, tk, keep, staged)?;
        }
        Ok(kept)
    }

    /// `F.normalize` and `spk_embed_affine_layer` of the raw embeddings `raw` (`[n, spk_dim]`)
    /// into `w.small`; returns the projections (`[n, mel]`).
    fn speaker<'a>(
        &self,
        cx: &Ctx<'_>,
        w: &'a Work,
        raw: Tensor<'_>,
    ) -> Result<Tensor<'a>, FlowError> {
        let c = self.config();
        let n = raw.dims()[0];
        let base = c.dit.freq_dim + 13 * c.dit.hidden;
        let small = Tensor::of(&w.small)?;
        let normed = small.narrow(0, base, n * c.spk_dim)?;
        let normed = normed.view(&[n, c.spk_dim])?;
        let proj = small.narrow(0, base + n * c.spk_dim, n * c.mel)?;
        let proj = proj.view(&[n, c.mel])?;
        ops::l2_normalize(cx, normed, raw, 1e-12)?;
        self.spk_affine().forward(cx, normed, proj)?;
        Ok(proj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dcc_runtime::contract::CacheOrder;

    /// The full config's keep: the newest 100 frames at the head, the prompt's 302 at the tail.
    fn keep() -> Keep {
        Keep::natural(CacheOrder::Prepend, 302, 100)
    }

    #[test]
    fn a_binary16_cache_at_the_bound_stages_what_the_write_back_moves() {
        let k = keep();
        // the steady state: 402 frames before the call, 50 (or the last chunk's 56) new
        assert_eq!(staged_history::<::half::f16>(&k, 402, 50, 32), 50);
        assert_eq!(staged_history::<::half::f16>(&k, 402, 56, 1), 44);
        // new frames filling the head: nothing of the history is moved, nothing staged
        assert_eq!(staged_history::<::half::f16>(&k, 402, 100, 2), 0);
    }

    #[test]
    fn elsewhere_the_whole_history_is_staged() {
        let k = keep();
        // below the bound (the write-back may move any frame)
        for l_old in [0, 302, 352] {
            assert_eq!(staged_history::<::half::f16>(&k, l_old, 50, 32), l_old);
        }
        // more new frames than the head keeps, no frames, more sessions than one launch reads
        assert_eq!(staged_history::<::half::f16>(&k, 402, 101, 32), 402);
        assert_eq!(staged_history::<::half::f16>(&k, 402, 0, 32), 402);
        assert_eq!(staged_history::<::half::f16>(&k, 402, 50, 33), 402);
        assert_eq!(staged_history::<::half::f16>(&k, 402, 50, 0), 402);
        // an f32 cache is read from the workspace only
        assert_eq!(staged_history::<f32>(&k, 402, 50, 32), 402);
    }
}
