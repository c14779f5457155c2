//! Host twins of the Token2Wav flow kernels (token embedding, UpsampleConformerEncoderV2,
//! CausalConditionalCFM + DiT estimator).
//!
//! Every function here is the CPU twin of one future CUDA kernel in
//! `kernels/cuda/token2wav*.cu`: it works on flat `f32` buffers with explicit dimensions and
//! leading dimensions (row strides, in elements), and it performs exactly the per-element
//! arithmetic a straightforward CUDA kernel would: one output element (or one row) per thread
//! (block), every reduction summed sequentially in a fixed order, no atomics. The doc comment of
//! each op names its launch shape.
//!
//! Layout conventions: activations are row-major `[rows, cols]` ("time-major": one row per frame,
//! channels contiguous); a `torch.nn.Linear` weight is `[out, in]` row-major, exactly as stored
//! in the vendor state_dict; convolution weights are re-laid out once at load time from torch's
//! `[out, in, k]` to `[out, k, in]` (see [`conv::conv_weight_okc`]) so that a 1-D convolution over
//! a time-major input is a plain `gemm_nt` over overlapping rows.
#![allow(clippy::too_many_arguments)]

pub mod attn;
pub mod conv;
pub mod defs;
pub mod elementwise;
pub mod fused;
pub mod gemm;
pub mod math;
pub mod norm;
pub mod pos;

pub use attn::{AttnLayout, attention, rel_pos_attention};
pub use conv::conv_weight_okc;
pub use defs::{KERNELS, SOURCE};
pub use elementwise::*;
pub use gemm::{gemm, linear};
pub use norm::{l2_normalize, layer_norm, layer_norm_modulate};
pub use pos::{espnet_rel_pos_table, timestep_embedding};
