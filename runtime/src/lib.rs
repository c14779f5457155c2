//! dcc-runtime: backends (CUDA via cudarc, Host twin), region arena, carry, exact-shape replay.
//!
//! This crate never depends on `dcc-compiler`.

pub mod arena;
pub mod backend;
pub mod carry;
pub mod contract;
pub mod error;
pub mod replay;
pub mod rng;
pub mod session;

pub use arena::{Arena, Region};
pub use backend::{AllocKind, Backend, BackendKind, DeviceBuffer, Gemm, Graph, MemoryReport, Pod};
pub use dcc_kernels::{self as kernels, Arg, DevPtr, KernelDef, LaunchDims};
pub use error::{Error, Result};

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}
