//! dcc-runtime: backends (CUDA via cudarc, Host twin), region arena, carry, exact-shape replay.
//!
//! This crate never depends on `dcc-compiler`; generated code and this crate meet in
//! [`contract`].
//!
//! * [`backend`]: the [`Backend`] trait, [`backend::HostBackend`] (CPU twin, launch tapes as
//!   graphs) and [`backend::CudaBackend`] (cudarc: driver, NVRTC, cuBLAS), the memory ledger.
//! * [`arena`]: one allocation per session laid out by an [`contract::ArenaLayout`].
//! * [`carry`]: retention written back in place (paper eq. 2) and the shadow auditor.
//! * [`replay`]: `ExactShapeReplay`, one graph per exact catalog signature, fail-closed.
//! * [`ops`]: typed, capture-safe ops over [`ops::Tensor`] views: one function per kernel
//!   launch or GEMM, each checking its operands before it queues anything.
//! * [`rng`]: device Philox state in device memory; observable host randomness.
//! * [`session`]: N sessions over one binding; switching restores state into bound addresses.
//! * [`stats`]: the percentile and max every benchmark binary reports (one definition).
//!
//! Kernels (CUDA C + host twins) live in `dcc-kernels`, re-exported as [`kernels`].

pub mod arena;
pub mod backend;
pub mod carry;
pub mod contract;
pub mod error;
pub mod ops;
pub mod replay;
pub mod rng;
pub mod session;
pub mod stats;

pub use arena::{Arena, ProcessArena, Region};
pub use backend::{AllocKind, Backend, BackendKind, DeviceBuffer, Gemm, Graph, MemoryReport, Pod};
pub use dcc_kernels::{self as kernels, Arg, DevPtr, KernelDef, LaunchDims};
pub use error::{Error, Result};

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Includes the module a build script generated with `dcc_compiler::Config` for the spec of
/// family `$family` (`$OUT_DIR/dcc/$family.rs`), like `prost`'s `include_proto!`:
///
/// ```ignore
/// pub mod token2wav {
///     dcc_runtime::include_contracts!("token2wav");
/// }
/// ```
///
/// The items land in a hidden child module and are re-exported, so `token2wav::Carry`,
/// `token2wav::FlowInputs` etc. are where they would be with a plain `include!`. That child
/// module allows `dead_code` (and the re-export `unused_imports`): a contract module describes
/// the whole contract — every quantity, region, callable and operating point — and a crate
/// typically reads a few of its items, so in a private module or a binary the rest would
/// otherwise each be a warning. Invoke it once per module.
#[macro_export]
macro_rules! include_contracts {
    ($family:literal) => {
        #[doc(hidden)]
        #[allow(dead_code)]
        mod __dcc_contract {
            include!(concat!(env!("OUT_DIR"), "/dcc/", $family, ".rs"));
        }
        #[allow(unused_imports)]
        pub use self::__dcc_contract::*;
    };
}
