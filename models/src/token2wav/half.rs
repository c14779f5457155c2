//! The vendor's half-precision mode and where it rounds to f16.
//!
//! `Token2wav(float16=True)` (minicpmo-utils 1.0.7, `token2wav.py`) calls `self.flow.half()` —
//! every parameter and floating buffer of the flow rounded to f16, the noise table
//! `decoder.rand_noise` and the estimator's cache buffers included — and runs every flow call
//! under `torch.amp.autocast('cuda', dtype=torch.float16)`. Autocast casts the inputs of the ops
//! on its lower-precision list (linear, conv1d, matmul, scaled_dot_product_attention) to f16 and
//! those of its fp32 list (layer_norm, softmax, linalg_vector_norm, exp, …) to f32; every other
//! op runs in the dtype its inputs promote to, and an f16 op rounds its result to f16 (round to
//! nearest even). So the vendor rounds to f16 exactly where a tensor's dtype is f16, and that
//! is what the table below lists.
//!
//! It was read off a per-op dtype trace of one streaming chunk (`scripts/half_trace.py`: the
//! tiny flow, half weights, `setup_cache` then `inference_chunk`, every aten op's input and
//! output dtypes under a `TorchDispatchMode`, with the module path from forward hooks), run on
//! fake CUDA tensors under CUDA autocast (dtypes only, no GPU needed). CPU autocast fp16 does
//! NOT cast the same way: its lower-precision list covers the same GEMM-like ops, but it has no
//! fp32 list for these ops, so on CPU every LayerNorm, the encoder's softmax and `F.normalize`
//! run in f16 and round, and with them the modulations, Mish, the encoder's residual stream
//! and the conv caches' inputs, all of which stay f32 on CUDA. The tiny fp16 golden is
//! therefore made on the CPU with CPU autocast plus `scripts/half_casts.py`'s dispatch mode,
//! which runs CUDA's fp32-list ops in f32; `half_trace.py --mode emulated` shows that it casts
//! as CUDA does for every op of the chunk.
//!
//! `rn16(·)` is rounding to f16 (RNE, overflow to ±inf); `A·B` of a linear or conv is an f16 ×
//! f16 product accumulated in f32, `rn16(acc + bias)` stored.
//!
//! | tensor | vendor (CUDA autocast fp16) |
//! |---|---|
//! | weights, norm scales and biases, `pos_bias_u/v`, embedding table, `rand_noise` | f16 (`flow.half()`) |
//! | speaker: `F.normalize(spk)` | f32 (`linalg_vector_norm` is on the fp32 list), then rn16 as the linear's input |
//! | `spk_embed_affine_layer`, `input_embedding` | rn16 output |
//! | **encoder** `embed.out.0` linear | rn16 |
//! | `embed.out.1` LayerNorm, `· √dim` (pos_enc) | f32 |
//! | pre-lookahead conv1 → leaky ReLU | rn16 (input rn16), leaky ReLU in f16 |
//! | pre-lookahead conv2 (causal context ‖ h) | rn16; the residual `+ embed` in f32 |
//! | conformer residual stream `x` (both stacks) | **f32** throughout (LayerNorm output promotes every add) |
//! | `norm_mha`, `norm_ff`, `after_norm`, `up_embed` LayerNorm | f32 |
//! | q, k, v, `linear_pos` | rn16 (input rn16); the k/v cache holds f16 |
//! | `q + pos_bias_u/v`, `matrix_ac + matrix_bd`, `/ √d_k` | f16, each rounded |
//! | scores → softmax | softmax in f32 (fp32 list), probabilities rn16 for the matmul with v |
//! | attention output, `linear_out`, FFN `w_1` → SiLU → `w_2`, `· ff_scale` | rn16 each |
//! | upsample (nearest) of the f32 stream, `up_layer` conv | conv rn16 |
//! | `encoder_proj` → `mu` | rn16 |
//! | **solver** time grid `t_span = 1 − cos(linspace(0, 1, n+1) · 0.5 · π)` | f16 (`dtype=mu.dtype`): linspace, `· 0.5`, `· π`, cos, `1 −` each rn16 |
//! | `t`, `dt` (`t + dt`, `t_span[s+1] − t`) | f16 |
//! | Euler state `x` (noise · temperature) | f16 |
//! | **estimator** `t · 1000`, `args = t·freqs` (freqs f32 then rn16), cos, sin | f16, each rounded |
//! | `t_embedder` mlp.0 → SiLU → mlp.2, adaLN SiLU → linear (all 9 modulations) | rn16 each |
//! | `in_proj` over `[x ‖ mu ‖ spk ‖ cond]` → residual stream `x` | rn16; the DiT residual stream is **f16** |
//! | norm1/2/3, norm_final (LayerNorm) | f32 |
//! | modulate `n · (1 + scale) + shift` | `1 + scale` rn16, the products and sums f32 |
//! | `to_q/k/v` | rn16 (input rn16) |
//! | `q_norm`, `k_norm` (LayerNorm) | f32; rn16 as SDPA's inputs; the cache stores rn16(k_norm), v |
//! | SDPA over `[new ‖ cache]` | f16 inputs, f16 output (softmax inside the fused kernel) |
//! | `proj`; `gate · proj`; `x + …` | rn16 each (gate product and residual add both round) |
//! | conv block: conv1 (input: cache ‖ modulated f32, rn16), LayerNorm, Mish | conv rn16; LayerNorm and Mish f32 |
//! | conv2 (input rn16), `gate · conv`, `x + …` | rn16 each; both conv caches stored f16 |
//! | MLP fc1 → GELU-tanh → fc2, `gate · mlp`, `x + …` | rn16 each |
//! | final layer: modulate (as above), linear → velocity | rn16 output |
//! | **guidance + Euler** `(1 + cfg) · v_c`, `cfg · v_u`, their difference, `dt · d`, `x + …` | f16, each rounded |
//! | output mel | f16 (the Euler state) |
//!
//! ## The half arm
//!
//! A flow on [`GemmPath::Half`] runs these cast points; every other path keeps its bits. The
//! GEMM path gives f16 weights and `rn16(acc + bias)` outputs with the activations fused after
//! a linear rounded again, and rounds a linear's f32 input to f16 as autocast does. The rest is
//! here and in the layers, each behind [`rounds`], read from the path (one predicate, no second
//! copy of the layers):
//!
//! - every weight the loader reads rounded to an f16 value (`nn::Loader::host` on the half path:
//!   `flow.half()` on norm scales and biases, position biases, the embedding and noise tables;
//!   the linears keep binary16 weights);
//! - the solver's time grid, `t` and `dt` in f16 ([`cosine_t_span_f16`]); guidance and the
//!   Euler step with every op rounded (`ops::cfg_euler_f16`); the scaled noise rounded
//!   (`ops::round_f16`), except at temperature 1, where the noise table's f16 values are the
//!   Euler state as they are (no scale, no rounding launched);
//! - the timestep features rounded op by op (`ops::timestep_embedding_f16`);
//! - every modulation's `1 + scale` rounded, and the DiT's gated residuals `x = rn16(x +
//!   rn16(gate · y))` (the residual stream holds f16 values): the modulated norms compute `n ·
//!   rn16(1 + scale) + shift` in f32, each in one launch with the residual before it
//!   (`ops::gated_norm_modulate_f16`) or alone (`ops::layer_norm_modulate_f16`, a step's first);
//!   the bits of `ops::round_f16_shifted` over the scale rows, `ops::gated_add_f16` and
//!   `ops::layer_norm_modulate`, in as many launches as the fp32 path;
//! - the DiT's q/k after their LayerNorms rounded, and so the keys the cache keeps;
//! - the encoder's leaky ReLU output rounded (the pre-lookahead conv's GEMM epilogue).
//!
//! - the DiT's SDPA on f16 tensor cores (`ops::attention_f16`, `attention.sdpa_f16`): f16 q, k
//!   and v, scores and the softmax in f32, the unnormalized probabilities rounded to f16 before
//!   `P·V` and the sum divided out after it, as the vendor's fused FlashAttention-style kernel
//!   computes it.
//!
//! Not reproduced: the rounding inside the encoder's relative-position attention (the biased
//! queries, both score matmuls, their sum and scale, the probabilities), computed in f32 over
//! f16 inputs, and the fused kernel's own blocking of its softmax. The half arm sits
//! 4.66e-4..5.05e-4 from the vendor fp16 mel (`models/tests/half.rs`, tiny model), against the
//! vendor's own 1.13e-3..1.20e-3 from fp32.
//!
//! Activations stay in f32 storage holding f16 values; the contract's `half` operating point
//! stores the estimator cache (`carry`, `solver_workspace`) as binary16, which gives the same
//! bits as an f32 cache holding the rounded values (`--point base`).

use dcc_runtime::kernels::elementwise::rn16;
use dcc_runtime::ops::{GemmPath, host};

/// Whether a flow on `path` runs the vendor's fp16 cast points (the module docs).
pub fn rounds(path: GemmPath) -> bool {
    path == GemmPath::Half
}

/// The cosine time grid as the vendor's fp16 mode makes it (`torch.linspace(0, 1, n + 1,
/// dtype=float16)`, then `· 0.5`, `· π`, `cos` and `1 −`, each an f16 op): the last point is
/// `rn16(1 − rn16(cos(rn16(π/2))))` = 0.99951171875, not 1.
pub fn cosine_t_span_f16(n_steps: usize) -> Vec<f32> {
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
            let a = rn16(rn16(rn16(lin) * 0.5) * pi);
            rn16(1.0 - rn16(host::cos_f32(a)))
        })
        .collect()
}
