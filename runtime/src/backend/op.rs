//! [`StreamOp`]: one stream operation with every argument, as the Host twin records it on its
//! tape and as both backends report it in a trace ([`super::Backend::begin_trace`]).

use dcc_kernels::{Arg, DevPtr, KernelDef, LaunchDims};

use super::Gemm;
use super::bounds::Access;

/// One stream operation as issued.
#[derive(Clone, Debug)]
pub enum StreamOp {
    Launch {
        kernel: &'static KernelDef,
        dims: LaunchDims,
        args: Vec<Arg>,
    },
    Dtod {
        dst: DevPtr,
        src: DevPtr,
        bytes: usize,
    },
    Memset32 {
        dst: DevPtr,
        value: u32,
        count: usize,
    },
    Gemm(Gemm),
    /// A GEMM with a bias epilogue, and the bias.
    GemmBias(Gemm, DevPtr),
}

fn same_f32(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits()
}

fn same_gemm(a: &Gemm, b: &Gemm) -> bool {
    let ints = |g: &Gemm| Gemm {
        alpha: 0.0,
        beta: 0.0,
        ..*g
    };
    same_f32(a.alpha, b.alpha) && same_f32(a.beta, b.beta) && ints(a) == ints(b)
}

impl StreamOp {
    /// The same operation, bit for bit: kernel (by its unique name), geometry, every argument
    /// (floats compared by their bits, so `-0.0` differs from `0.0` and a NaN equals itself).
    pub fn same_as(&self, other: &StreamOp) -> bool {
        use StreamOp as S;
        match (self, other) {
            (
                S::Launch { kernel, dims, args },
                S::Launch {
                    kernel: k2,
                    dims: d2,
                    args: a2,
                },
            ) => {
                kernel.name == k2.name
                    && dims == d2
                    && args.len() == a2.len()
                    && args.iter().zip(a2).all(|(a, b)| match (a, b) {
                        (Arg::F32(x), Arg::F32(y)) => same_f32(*x, *y),
                        _ => a == b,
                    })
            }
            (
                S::Dtod { dst, src, bytes },
                S::Dtod {
                    dst: d2,
                    src: s2,
                    bytes: b2,
                },
            ) => (dst, src, bytes) == (d2, s2, b2),
            (
                S::Memset32 { dst, value, count },
                S::Memset32 {
                    dst: d2,
                    value: v2,
                    count: c2,
                },
            ) => (dst, value, count) == (d2, v2, c2),
            (S::Gemm(a), S::Gemm(b)) => same_gemm(a, b),
            (S::GemmBias(a, x), S::GemmBias(b, y)) => same_gemm(a, b) && x == y,
            _ => false,
        }
    }

    /// Rewrites every device address the operation names through `f`.
    pub fn map_ptrs(&mut self, f: impl Fn(DevPtr) -> DevPtr) {
        match self {
            StreamOp::Launch { args, .. } => {
                for a in args {
                    if let Arg::Ptr(p) = a {
                        *p = f(*p);
                    }
                }
            }
            StreamOp::Dtod { dst, src, .. } => {
                *dst = f(*dst);
                *src = f(*src);
            }
            StreamOp::Memset32 { dst, .. } => *dst = f(*dst),
            StreamOp::Gemm(g) => {
                (g.a, g.b, g.c) = (f(g.a), f(g.b), f(g.c));
            }
            StreamOp::GemmBias(g, bias) => {
                (g.a, g.b, g.c) = (f(g.a), f(g.b), f(g.c));
                *bias = f(*bias);
            }
        }
    }

    /// What the bounds checks see of it.
    pub(crate) fn access(&self) -> Access<'_> {
        match self {
            StreamOp::Launch { kernel, args, .. } => Access::Launch(kernel, args),
            StreamOp::Dtod { dst, src, bytes } => Access::Dtod {
                dst: *dst,
                src: *src,
                bytes: *bytes,
            },
            StreamOp::Memset32 { dst, count, .. } => Access::Memset32 {
                dst: *dst,
                count: *count,
            },
            StreamOp::Gemm(g) => Access::Gemm(g, None),
            StreamOp::GemmBias(g, bias) => Access::Gemm(g, Some(*bias)),
        }
    }

    /// Whether it counts as a launch ([`super::Backend::eager_launches`]: kernels and GEMMs).
    pub(crate) fn is_launch(&self) -> bool {
        matches!(
            self,
            StreamOp::Launch { .. } | StreamOp::Gemm(_) | StreamOp::GemmBias(..)
        )
    }
}
