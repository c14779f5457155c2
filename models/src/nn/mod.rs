//! Layers written once, over the runtime's typed ops ([`dcc_runtime::ops`]): each holds its
//! weights in device buffers and queues its forward pass on an [`ops::Ctx`] over [`Tensor`]
//! views the caller provides (activations and scratch alike), so a forward pass allocates
//! nothing and may be recorded into a graph. The host reference is the Host backend running the
//! same calls.
//!
//! [`Loader`] turns the names of a safetensors state_dict ([`WeightStore`]) into these layers.

mod attention;
mod conv;
mod direct;
mod embedding;
mod linear;
mod load;
mod mlp;
mod norm;
pub mod weights;

pub use attention::{History, KvElem, RelPosAttention, RelPosScratch, SelfAttention};
pub use conv::{CausalConv1d, Conv1d};
pub use direct::{DirectConv1d, ResBlock, ResBlockRun, Snake, causal_padding};
pub use embedding::Embedding;
pub use linear::Linear;
pub use load::{LoadError, Loader};
pub use mlp::Mlp;
pub use norm::{AdaNorm, LayerNorm};
pub use weights::{HostTensor, WeightError, WeightStore};

pub use dcc_runtime::ops::{self, Act, Ctx, OpError, Tensor};
