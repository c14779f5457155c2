//! The runtime's typed error.

use std::fmt;

use dcc_kernels::KernelError;

/// Everything that can go wrong in the runtime. No path panics on bad input; every CUDA call's
/// status ends up here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// No usable device: the driver library is absent, there is no GPU, or the ordinal is out of
    /// range. GPU tests print this as their skip reason.
    NoDevice(String),
    /// A CUDA driver call failed.
    Driver(String),
    /// NVRTC failed to compile a module; `log` is the compiler's log.
    Nvrtc { module: String, log: String },
    /// A cuBLAS call failed.
    Cublas(String),
    /// A kernel launch was refused (argument kinds, impossible geometry).
    Kernel(KernelError),
    /// The operation is not allowed while the stream is capturing (allocation, host copies,
    /// synchronization).
    Capturing(&'static str),
    /// Capture was not in progress, or ended badly.
    Capture(String),
    /// An operation or a graph replay names an address that no live buffer owns (for a replay:
    /// the buffer was freed after capture): both backends refuse instead of writing through a
    /// dangling pointer.
    Dangling(u64),
    /// A graph replay names memory whose buffer was freed after capture and another buffer now
    /// holds the address (the allocation identity differs): refused like [`Error::Dangling`].
    Reallocated(u64),
    /// A buffer access is outside the allocation.
    OutOfBounds(String),
    /// An arena layout or a region lookup is inconsistent.
    Layout(String),
    /// A carry was configured or driven inconsistently.
    Carry(String),
    /// Invalid argument to a runtime API.
    Invalid(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDevice(m) => write!(f, "no CUDA device: {m}"),
            Error::Driver(m) => write!(f, "CUDA driver: {m}"),
            Error::Nvrtc { module, log } => write!(f, "NVRTC failed on module `{module}`:\n{log}"),
            Error::Cublas(m) => write!(f, "cuBLAS: {m}"),
            Error::Kernel(e) => write!(f, "{e}"),
            Error::Capturing(what) => write!(f, "{what} is not allowed during capture"),
            Error::Capture(m) => write!(f, "capture: {m}"),
            Error::Dangling(a) => write!(f, "replay touches {a:#x}, which no live buffer owns"),
            Error::Reallocated(a) => write!(
                f,
                "replay touches {a:#x}, whose buffer was freed and reallocated since capture"
            ),
            Error::OutOfBounds(m) => write!(f, "out of bounds: {m}"),
            Error::Layout(m) => write!(f, "layout: {m}"),
            Error::Carry(m) => write!(f, "carry: {m}"),
            Error::Invalid(m) => write!(f, "invalid: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<KernelError> for Error {
    fn from(e: KernelError) -> Error {
        Error::Kernel(e)
    }
}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Error {
        Error::Driver(format!("{e:?}"))
    }
}

impl From<cudarc::cublas::result::CublasError> for Error {
    fn from(e: cudarc::cublas::result::CublasError) -> Error {
        Error::Cublas(format!("{e:?}"))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
