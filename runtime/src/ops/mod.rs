//! Typed, capture-safe ops: one function per kernel launch or GEMM, over [`Tensor`] views.
//!
//! Each op checks its operands (dims, the layout the kernel addresses, that every view's span
//! lies in the memory it was made from, that what it writes overlaps no other operand), derives
//! the kernel's positional arguments and launch geometry from the views, then queues one stream
//! operation on the [`Ctx`]'s backend. An op never allocates device memory and never
//! synchronizes, so ops may be recorded into a graph; it never panics: a bad operand is an
//! [`OpError`] naming the op, the operand, what was expected and what was found, and nothing is
//! queued. The `unsafe` of [`Backend::launch`] lives here, one block per op, sound because the
//! kernel reaches exactly the checked views.
//!
//! Launch geometry is part of each op's contract (a reduction's order follows from it, and
//! CUDA graphs key on it): elementwise kernels run one thread per element in blocks of
//! [`THREADS`], warp-per-row kernels `row_threads(rows)` threads, attention
//! `attention_dims` (with more shared memory: `sdpa_dims`, `rel_pos_dims`), the fused
//! LayerNorm im2col one block of `LN_ACT_BLOCK` threads per row, the carry one block of
//! [`THREADS`] per row. `linear` runs on the context's [`GemmPath`]: the
//! backend's GEMM (cuBLAS picks its algorithm by shape and leading dimension), or the
//! `gemm.linear_*` variant `dcc_kernels::gemm::pick` chooses (every variant computes the same
//! bits), or the 3xTF32 `gemm.linear_tf32x3`, or the half-precision `gemm.linear_f16_*` over
//! binary16 weights.
//!
//! While a [`Profiler`] is open, every op records a stream marker for its category first (the
//! kernel's name, `gemm`, `gemv (rows = 1)`, `memset`).

mod attention;
pub mod carry;
mod conv;
mod conv1d;
mod copy;
mod elementwise;
mod error;
mod half_kv;
pub mod host;
mod linear;
mod norm;
mod profile;
mod signal;
mod tensor;
#[cfg(test)]
mod tests;

pub use attention::{attention, kv_pack, qk_norm_pack, rel_pos_attention};
pub use conv::{conv_im2col, layer_norm_act_im2col};
pub use conv1d::{Conv, ConvElem, ConvGeom, Residual, conv1d, conv1d_group};
pub use copy::{CopyElem, copy, copy_batched, embedding, memset, repeat_rows, transpose};
pub use elementwise::{
    Act, act, add, cfg_euler, cfg_euler_f16, gated_add_f16, round_f16, round_f16_shifted,
    timestep_embedding, timestep_embedding_f16,
};
pub use error::OpError;
pub use half_kv::{attention_f16, attention_f16_split, qk_pack_f16};
pub use linear::{
    GemmPath, LinearWeights, WeightElem, linear, linear_act, linear_f16, linear_f16_with,
    linear_tf32x3, linear_tf32x3_with, linear_with,
};
pub use norm::{
    gated_norm_modulate, gated_norm_modulate_f16, l2_normalize, layer_norm, layer_norm_modulate,
    layer_norm_modulate_f16,
};
pub use profile::{ProfileRow, Profiler, Work};
pub use signal::{
    SourceArgs, abs_narrow, counters_add, div, elu_f64, harmonic_phase, harmonic_source, istft,
    polar, snake, stft, widen,
};
pub use tensor::{Elem, MAX_RANK, RawTensor, Tensor};

use dcc_kernels::{Arg, KernelDef, LaunchDims};

use crate::backend::Backend;

/// Threads per block of the elementwise kernels and of the carry.
pub const THREADS: u32 = 128;

/// Where ops are queued: a backend's stream, and the profiler that marks them.
#[derive(Copy, Clone)]
pub struct Ctx<'a> {
    be: &'a dyn Backend,
    prof: Option<&'a Profiler>,
    gemm: GemmPath,
}

impl<'a> Ctx<'a> {
    /// A context on `be`'s stream, marked into `prof` while it is open, its linears on
    /// [`GemmPath::Backend`].
    pub fn new(be: &'a dyn Backend, prof: Option<&'a Profiler>) -> Ctx<'a> {
        Ctx {
            be,
            prof,
            gemm: GemmPath::default(),
        }
    }

    /// The same context with its linears on `gemm`.
    pub fn with_gemm(self, gemm: GemmPath) -> Ctx<'a> {
        Ctx { gemm, ..self }
    }

    /// The GEMM path of this context's linears.
    pub fn gemm_path(&self) -> GemmPath {
        self.gemm
    }

    pub fn backend(&self) -> &'a dyn Backend {
        self.be
    }

    /// The profiler that marks this context's ops (`None`: unprofiled).
    pub fn profiler(&self) -> Option<&'a Profiler> {
        self.prof
    }

    /// Declares the [`Work`] of the op this context queues next (kept only while a profile is
    /// open; the op's marker takes it).
    pub fn work(&self, w: Work) {
        if let Some(p) = self.prof {
            p.declare(w);
        }
    }

    /// Records a profile marker for `category` (when a profile is open).
    fn mark(&self, op: &'static str, category: &'static str) -> Result<(), OpError> {
        match self.prof {
            Some(p) => p
                .mark(self.be, category)
                .map_err(|error| OpError::Backend { op, error }),
            None => Ok(()),
        }
    }

    /// Marks and launches `k`.
    ///
    /// # Safety
    /// As [`Backend::launch`]: every pointer in `args`, with the counts and `dims`, reaches only
    /// the checked views of the calling op.
    unsafe fn launch(
        &self,
        k: &'static KernelDef,
        dims: LaunchDims,
        args: &[Arg],
    ) -> Result<(), OpError> {
        self.mark(k.name, k.name)?;
        // SAFETY: forwarded from the caller.
        unsafe { self.be.launch(k, dims, args) }
            .map_err(|error| OpError::Backend { op: k.name, error })
    }

    /// Marks and launches `k` over `threads` threads in blocks of [`THREADS`].
    ///
    /// # Safety
    /// As [`Ctx::launch`].
    unsafe fn launch_linear(
        &self,
        k: &'static KernelDef,
        threads: usize,
        args: &[Arg],
    ) -> Result<(), OpError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch(k, LaunchDims::linear(threads, THREADS), args) }
    }
}

fn ptr<T: Elem>(t: &Tensor<'_, T>) -> Arg {
    Arg::Ptr(t.ptr())
}

fn int(v: usize) -> Arg {
    Arg::I64(v as i64)
}

/// Checks that `t` has exactly `dims`.
fn dims<T: Elem>(
    op: &'static str,
    view: &'static str,
    t: &Tensor<'_, T>,
    dims: &[usize],
) -> Result<(), OpError> {
    if t.dims() != dims {
        return Err(OpError::shape(op, view, format!("{dims:?}"), t.dims()));
    }
    Ok(())
}

/// Checks that `t` is 2-D with unit column stride: `(rows, cols, ld)`.
fn matrix<T: Elem>(
    op: &'static str,
    view: &'static str,
    t: &Tensor<'_, T>,
) -> Result<(usize, usize, usize), OpError> {
    match (t.dims(), t.strides()) {
        (&[r, c], &[ld, 1]) => Ok((r, c, ld)),
        (&[_, _], s) => Err(OpError::layout(op, view, "[ld, 1]", s)),
        (d, _) => Err(OpError::shape(op, view, "[rows, cols]", d)),
    }
}

/// Checks that `t` is packed row-major (what kernels without a leading dimension address).
fn packed<T: Elem>(op: &'static str, view: &'static str, t: &Tensor<'_, T>) -> Result<(), OpError> {
    if !t.is_packed() {
        return Err(OpError::layout(op, view, "packed row-major", t.strides()));
    }
    Ok(())
}

/// Checks that no written operand overlaps another operand (byte ranges of the spans; empty
/// views overlap nothing).
fn disjoint(
    op: &'static str,
    operands: &[(&'static str, (u64, u64), bool)],
) -> Result<(), OpError> {
    for (i, &(wn, (ws, we), written)) in operands.iter().enumerate() {
        if !written || ws == we {
            continue;
        }
        for (j, &(on, (os, oe), _)) in operands.iter().enumerate() {
            if i != j && os != oe && ws < oe && os < we {
                return Err(OpError::Overlap {
                    op,
                    written: wn,
                    other: on,
                });
            }
        }
    }
    Ok(())
}

/// `(name, byte range, written)` of an operand for [`disjoint`].
fn operand<T: Elem>(
    name: &'static str,
    t: &Tensor<'_, T>,
    written: bool,
) -> (&'static str, (u64, u64), bool) {
    (name, t.byte_range(), written)
}
