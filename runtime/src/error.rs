//! The runtime's typed error.
//!
//! Failures of the CUDA libraries keep the libraries' own values — the driver's `CUresult`
//! ([`DriverError`]), NVRTC's `nvrtcResult` with its log ([`CompileError`]), cuBLAS's and
//! cuBLASLt's `cublasStatus_t` — so a caller can match on the code instead of parsing text. Each
//! variant's message already includes the wrapped error (the binaries and `SKIP` lines print
//! `{e}` only), so `source()` does not return it a second time: an error-chain reporter prints
//! every fact once.

use cudarc::driver::DriverError;
use cudarc::nvrtc::CompileError;
use dcc_kernels::KernelError;

/// A cuBLAS status (`cublasStatus_t`).
pub type CublasStatus = cudarc::cublas::result::CublasError;
/// A cuBLASLt status (`cublasStatus_t`, from the cuBLASLt library).
pub type CublasLtStatus = cudarc::cublaslt::result::CublasError;

/// Everything that can go wrong in the runtime. No path panics on bad input; every CUDA call's
/// status ends up here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// No usable device: the driver library is absent, there is no GPU, or the ordinal is out of
    /// range. GPU tests print this as their skip reason.
    #[error("no CUDA device: {0}")]
    NoDevice(NoDevice),
    /// A CUDA driver call failed.
    #[error("CUDA driver: {0}")]
    Driver(DriverError),
    /// NVRTC failed to compile a module; `error` holds NVRTC's status and, for a compile
    /// failure, the compiler's log.
    #[error("NVRTC failed on module `{module}`:\n{}", nvrtc_message(.error))]
    Nvrtc { module: String, error: CompileError },
    /// A cuBLAS or cuBLASLt call failed, or the library is unavailable.
    #[error("cuBLAS: {0}")]
    Cublas(BlasError),
    /// A kernel launch was refused (argument kinds, impossible geometry).
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// The operation is not allowed while the stream is capturing (allocation, host copies,
    /// synchronization).
    #[error("{0} is not allowed during capture")]
    Capturing(&'static str),
    /// Capture was not in progress, or was already.
    #[error("capture: {0}")]
    Capture(String),
    /// The driver refused to end a capture or to instantiate the captured graph.
    #[error("capture: end capture / instantiate: {0}")]
    EndCapture(DriverError),
    /// An operation or a graph replay names an address that no live buffer owns (for a replay:
    /// the buffer was freed after capture): both backends refuse instead of writing through a
    /// dangling pointer.
    #[error("replay touches {0:#x}, which no live buffer owns")]
    Dangling(u64),
    /// A graph replay names memory whose buffer was freed after capture and another buffer now
    /// holds the address (the allocation identity differs): refused like [`Error::Dangling`].
    #[error("replay touches {0:#x}, whose buffer was freed and reallocated since capture")]
    Reallocated(u64),
    /// A buffer access is outside the allocation.
    #[error("out of bounds: {0}")]
    OutOfBounds(String),
    /// An arena layout or a region lookup is inconsistent.
    #[error("layout: {0}")]
    Layout(String),
    /// A carry was configured or driven inconsistently.
    #[error("carry: {0}")]
    Carry(String),
    /// Invalid argument to a runtime API.
    #[error("invalid: {0}")]
    Invalid(String),
}

/// Why no CUDA device could be opened.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoDevice {
    /// A library the backend loads at run time is absent (named with its file, e.g. "the CUDA
    /// driver library (libcuda)").
    #[error("{0} is not installed")]
    Missing(&'static str),
    /// `cuInit` or `cuDeviceGetCount` failed.
    #[error("cuInit/cuDeviceGetCount: {0}")]
    Init(DriverError),
    /// The ordinal asked for is not below the device count.
    #[error("device {requested} requested, {present} present")]
    Ordinal { requested: usize, present: i32 },
    /// The device's primary context could not be retained.
    #[error("context on device {ordinal}: {error}")]
    Context { ordinal: usize, error: DriverError },
}

/// A cuBLAS or cuBLASLt failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlasError {
    /// The library is absent (`libcublas`, `libcublasLt`).
    #[error("{0} is not installed")]
    Missing(&'static str),
    /// A cuBLAS call returned this status.
    #[error("{0}")]
    Status(CublasStatus),
    /// A cuBLASLt call returned this status.
    #[error("cuBLASLt: {0}")]
    Lt(CublasLtStatus),
    /// Setting the library up failed when the backend was opened (the backend still opens:
    /// only GEMMs need it); every GEMM reports that first error.
    #[error("unavailable: {0}")]
    Unavailable(Box<Error>),
}

/// NVRTC's status, then its log as text (cudarc keeps it as a C string).
impl Error {
    /// Whether the device ran out of memory: the driver's `CUDA_ERROR_OUT_OF_MEMORY`, or a CUDA
    /// library's allocation failure (`CUBLAS_STATUS_ALLOC_FAILED`). A caller that places many
    /// sessions stops there and keeps what the smaller counts measured.
    pub fn is_out_of_memory(&self) -> bool {
        use cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED;
        use cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY;
        match self {
            Error::Driver(e) | Error::EndCapture(e) => e.0 == CUDA_ERROR_OUT_OF_MEMORY,
            Error::Cublas(BlasError::Status(s)) => s.0 == CUBLAS_STATUS_ALLOC_FAILED,
            Error::Cublas(BlasError::Lt(s)) => {
                s.0 == cudarc::cublaslt::sys::cublasStatus_t::CUBLAS_STATUS_ALLOC_FAILED
            }
            Error::Cublas(BlasError::Unavailable(e)) => e.is_out_of_memory(),
            _ => false,
        }
    }
}

fn nvrtc_message(e: &CompileError) -> String {
    match e {
        CompileError::CompileError { nvrtc, log, .. } => {
            format!("{nvrtc}\n{}", log.to_string_lossy())
        }
        other => other.to_string(),
    }
}

// `From` by hand rather than `#[from]`: `#[from]` would also make the wrapped error the
// `source()`, and the message already includes it (module docs).
impl From<DriverError> for Error {
    fn from(e: DriverError) -> Error {
        Error::Driver(e)
    }
}

impl From<CublasStatus> for Error {
    fn from(e: CublasStatus) -> Error {
        Error::Cublas(BlasError::Status(e))
    }
}

impl From<CublasLtStatus> for Error {
    fn from(e: CublasLtStatus) -> Error {
        Error::Cublas(BlasError::Lt(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use cudarc::driver::sys::CUresult;

    use super::*;

    #[test]
    fn cuda_codes_stay_matchable_and_are_printed_once() {
        // A `DriverError` is formatted through `cuGetErrorString`, which needs libcuda (absent
        // on CI machines; a real `DriverError` only comes from a loaded driver): match only.
        let e: Error = DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY).into();
        assert!(matches!(
            e,
            Error::Driver(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY))
        ));
        assert!(e.source().is_none());
        assert!(e.is_out_of_memory());
        assert!(!Error::Driver(DriverError(CUresult::CUDA_ERROR_INVALID_VALUE)).is_out_of_memory());

        let s = cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED;
        let e: Error = cudarc::cublas::result::CublasError(s).into();
        assert!(matches!(&e, Error::Cublas(BlasError::Status(x)) if x.0 == s));
        assert!(
            e.to_string().contains("CUBLAS_STATUS_EXECUTION_FAILED"),
            "{e}"
        );
        assert!(e.source().is_none());

        let s = cudarc::cublaslt::sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED;
        let e: Error = cudarc::cublaslt::result::CublasError(s).into();
        assert!(matches!(&e, Error::Cublas(BlasError::Lt(x)) if x.0 == s));
        assert_eq!(
            e.to_string(),
            "cuBLAS: cuBLASLt: CublasError(CUBLAS_STATUS_NOT_SUPPORTED)"
        );
    }

    #[test]
    fn messages_keep_their_wording() {
        let e = Error::NoDevice(NoDevice::Missing("the CUDA driver library (libcuda)"));
        assert_eq!(
            e.to_string(),
            "no CUDA device: the CUDA driver library (libcuda) is not installed"
        );
        let e = Error::NoDevice(NoDevice::Ordinal {
            requested: 1,
            present: 1,
        });
        assert_eq!(
            e.to_string(),
            "no CUDA device: device 1 requested, 1 present"
        );
        assert_eq!(
            Error::Capturing("alloc").to_string(),
            "alloc is not allowed during capture"
        );
        assert_eq!(
            Error::Dangling(0x100).to_string(),
            "replay touches 0x100, which no live buffer owns"
        );
        let k = KernelError::Args("two".into());
        assert_eq!(Error::from(k.clone()).to_string(), k.to_string());
    }

    #[test]
    fn nvrtc_log_is_printed_as_text() {
        let e = Error::Nvrtc {
            module: "m".into(),
            error: CompileError::CompileError {
                nvrtc: cudarc::nvrtc::result::NvrtcError(
                    cudarc::nvrtc::sys::nvrtcResult::NVRTC_ERROR_COMPILATION,
                ),
                options: vec![],
                log: std::ffi::CString::new("m.cu(3): error: \"x\" is undefined").unwrap(),
            },
        };
        let s = e.to_string();
        assert!(s.starts_with("NVRTC failed on module `m`:\n"), "{s}");
        assert!(s.contains("NVRTC_ERROR_COMPILATION"), "{s}");
        assert!(s.ends_with("m.cu(3): error: \"x\" is undefined"), "{s}");
    }
}
