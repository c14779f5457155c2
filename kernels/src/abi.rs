//! The launch ABI shared by the CUDA backend and the host twins: raw device addresses, scalar
//! arguments and launch dimensions. Everything here is plain data (integers), so a launch can be
//! recorded on a tape and replayed bit for bit.

use std::fmt;

/// A raw device address. On the CUDA backend it is a `CUdeviceptr`; on the Host backend it is
/// the address of host memory the Host backend allocated. It is an integer: copying it never
/// borrows the buffer, and comparing two of them is how address stability is checked.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct DevPtr(pub u64);

impl DevPtr {
    pub const NULL: DevPtr = DevPtr(0);

    /// The address `bytes` past this one.
    #[inline]
    pub const fn offset(self, bytes: usize) -> DevPtr {
        DevPtr(self.0 + bytes as u64)
    }

    #[inline]
    pub const fn addr(self) -> u64 {
        self.0
    }

    #[inline]
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for DevPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DevPtr({:#x})", self.0)
    }
}

impl fmt::Display for DevPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Kind of one kernel parameter, as the CUDA C signature declares it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// Any pointer (`float*`, `const unsigned*`, ...): passed as a 64-bit device address.
    Ptr,
    I32,
    U32,
    I64,
    U64,
    F32,
}

/// One kernel argument. Pointers are raw addresses (see [`DevPtr`]).
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Arg {
    Ptr(DevPtr),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
}

impl Arg {
    pub const fn param(&self) -> Param {
        match self {
            Arg::Ptr(_) => Param::Ptr,
            Arg::I32(_) => Param::I32,
            Arg::U32(_) => Param::U32,
            Arg::I64(_) => Param::I64,
            Arg::U64(_) => Param::U64,
            Arg::F32(_) => Param::F32,
        }
    }
}

impl From<DevPtr> for Arg {
    fn from(p: DevPtr) -> Arg {
        Arg::Ptr(p)
    }
}
impl From<i32> for Arg {
    fn from(v: i32) -> Arg {
        Arg::I32(v)
    }
}
impl From<u32> for Arg {
    fn from(v: u32) -> Arg {
        Arg::U32(v)
    }
}
impl From<i64> for Arg {
    fn from(v: i64) -> Arg {
        Arg::I64(v)
    }
}
impl From<u64> for Arg {
    fn from(v: u64) -> Arg {
        Arg::U64(v)
    }
}
impl From<f32> for Arg {
    fn from(v: f32) -> Arg {
        Arg::F32(v)
    }
}

/// Grid and block dimensions of a launch plus dynamic shared memory, as in CUDA.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub block: (u32, u32, u32),
    pub shared_bytes: u32,
}

impl LaunchDims {
    /// A 1-D launch with `block` threads per block covering `n` threads.
    pub fn linear(n: usize, block: u32) -> LaunchDims {
        let blocks = n.div_ceil(block as usize).max(1);
        LaunchDims {
            grid: (blocks.min(u32::MAX as usize) as u32, 1, 1),
            block: (block, 1, 1),
            shared_bytes: 0,
        }
    }

    /// `grid` blocks of `block` threads.
    pub const fn blocks(grid: u32, block: u32) -> LaunchDims {
        LaunchDims {
            grid: (grid, 1, 1),
            block: (block, 1, 1),
            shared_bytes: 0,
        }
    }
}

/// Why a host twin refused a launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelError {
    /// The argument list does not match the kernel's declared parameters.
    Args(String),
    /// The arguments are well-typed but describe an impossible launch (negative size, overlap...).
    Invalid(String),
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::Args(m) => write!(f, "bad kernel arguments: {m}"),
            KernelError::Invalid(m) => write!(f, "invalid launch: {m}"),
        }
    }
}

impl std::error::Error for KernelError {}

/// Typed access to an argument list, for host twins.
pub trait Args {
    fn ptr(&self, i: usize) -> Result<DevPtr, KernelError>;
    fn i32(&self, i: usize) -> Result<i32, KernelError>;
    fn u32(&self, i: usize) -> Result<u32, KernelError>;
    fn i64(&self, i: usize) -> Result<i64, KernelError>;
    fn u64(&self, i: usize) -> Result<u64, KernelError>;
    fn f32(&self, i: usize) -> Result<f32, KernelError>;
    /// A non-negative `i64` argument as `usize`.
    fn usize(&self, i: usize) -> Result<usize, KernelError> {
        let v = self.i64(i)?;
        usize::try_from(v)
            .map_err(|_| KernelError::Invalid(format!("argument {i} is negative: {v}")))
    }
}

macro_rules! getter {
    ($name:ident, $variant:ident, $ty:ty) => {
        fn $name(&self, i: usize) -> Result<$ty, KernelError> {
            match self.get(i) {
                Some(Arg::$variant(v)) => Ok(*v),
                other => Err(KernelError::Args(format!(
                    "argument {i}: expected {}, got {other:?}",
                    stringify!($variant)
                ))),
            }
        }
    };
}

impl Args for [Arg] {
    getter!(ptr, Ptr, DevPtr);
    getter!(i32, I32, i32);
    getter!(u32, U32, u32);
    getter!(i64, I64, i64);
    getter!(u64, U64, u64);
    getter!(f32, F32, f32);
}
