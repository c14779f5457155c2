//! dcc-runtime: backends (CUDA via cudarc, Host twin), region arena, carry, exact-shape replay.
//!
//! This crate never depends on `dcc-compiler`.

pub mod contract;
