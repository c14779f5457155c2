//! The carry write-back of a prompt + history cache, as the model calls it among its ops: the
//! slices a region's contract keeps ([`Keep`](crate::contract::Keep): `H[0:head] ‖
//! H[ℓ−tail:ℓ]` of its storage order, paper eq. 2), written from the cache as a call left it into
//! the cache the next call reads. Defined in [`crate::carry`], beside the one function that
//! launches `carry.retain` and `carry.retain_layers`.

pub use crate::carry::{
    Staged, kept, write_back, write_back_layers, write_back_layers_staged, write_back_staged,
};
