//! What a half chunk costs in launches against an fp32 chunk, and its bits (tiny model, Host
//! backend, one B0 session each; the second chunk after the prompt, a steady-state chunk, is
//! counted).
//!
//! The half path adds roundings to the fp32 arithmetic. Where a rounding can ride in the launch
//! that produces or consumes its value, it does: the gated residuals and the modulated norms
//! (`norm.gated_add_modulate_f16`, `norm.layer_norm_modulate_f16`: the residual rounded, `1 +
//! scale` rounded), the encoder's pre-lookahead conv (its leaky ReLU in the GEMM's epilogue,
//! which rounds on the half path), the solver's noise at temperature 1 (already f16 values: no
//! scale, no rounding). The rounding launches left are [`half_rounds`]; the half chunk launches
//! no more than the fp32 chunk on [`GemmPath::Invariant`] (whose GEMMs fuse activations as the
//! half GEMMs do) plus those, and its mel keeps its bits ([`HALF_SHA`]).

use dcc_models::token2wav::{FlowConfig, SolverParams};
use dcc_runtime::ops::GemmPath;

mod common;
use common::{b0_chunks, mel_sha};

/// sha256 of the half B0 mel of chunks 0 and 1 (f32 little-endian): the bits the half path gives
/// since its SDPA runs on tensor cores (`attention.sdpa_f16`: f16 `mma`s, the probabilities
/// rounded to binary16 before `P·V`; the fusions of its other launches kept the bits before).
const HALF_SHA: &str = "910698bac40eeae80fa7327ccd1156b6edcf6cefbe3f9449fefe33e73dc43483";
/// The same of the fp32 mel on [`GemmPath::Invariant`] (its encoder and solver launches were
/// fused too).
const FP32_SHA: &str = "7fbd9f221435f942b6388aad47055b1f1503dd446e318927a8a33fd8a683bbf9";

/// The rounding launches a half chunk still runs that the fp32 chunk does not: per solver step
/// and DiT block, `nn::SelfAttention`'s two `elementwise.round_f16` (q after its LayerNorm, the
/// new key frames).
fn half_rounds(cfg: &FlowConfig, steps: usize) -> u64 {
    (2 * cfg.dit.depth * steps) as u64
}

/// `(launches of chunk 1, mel of chunks 0 and 1, the config)` of a B0 session on `path`.
fn chunk(path: GemmPath) -> (u64, Vec<f32>, FlowConfig) {
    b0_chunks(path, |_| {})
}

#[test]
fn a_half_chunk_launches_at_most_the_fp32_chunk_and_its_rounds() {
    let (backend, _, _) = chunk(GemmPath::Backend);
    let (fp32, fp32_mel, cfg) = chunk(GemmPath::Invariant);
    let (half, mel, _) = chunk(GemmPath::Half);
    let rounds = half_rounds(&cfg, SolverParams::default().n_steps);
    let (sha16, sha32) = (mel_sha(&[&mel]), mel_sha(&[&fp32_mel]));
    println!(
        "launches per chunk (tiny, Host): fp32 {fp32} (GemmPath::Backend: {backend}), half \
         {half}; rounding launches left on the half path {rounds}; mel sha256 half {sha16}, \
         fp32 {sha32}"
    );
    assert_eq!(sha16, HALF_SHA, "the half mel changed bits");
    assert_eq!(sha32, FP32_SHA, "the fp32 mel changed bits");
    assert!(
        half <= fp32 + rounds,
        "half {half} > fp32 {fp32} + {rounds} rounding launches"
    );
}
