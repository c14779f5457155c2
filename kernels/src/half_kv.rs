//! The estimator's key/value cache stored as IEEE binary16 (`kernels/cuda/half_kv.cu`): the
//! contract's `half` operating point stores `carry` and `solver_workspace` as f16, as the vendor's
//! fp16 mode does (its cache holds `rn16(LN_k(k))` and `v`, a linear's f16 output). Each kernel
//! computes what the fp32 kernels plus `elementwise.round_f16` compute on the same values, so the
//! half path's bits do not change:
//!
//! - [`QK_PACK`] ([`qk_pack_f16`]): `norm.qk_pack`'s LayerNorms ([`crate::norm::layer_norm`],
//!   the same arithmetic), then `qn = rn16(LN_q(q))` in f32 storage and `LN_k(k) ‖ v` as binary16
//!   into the cache.
//!
//! SDPA over a binary16 cache is the half path's tensor-core attention,
//! [`crate::attention::f16`] (`attention.sdpa_f16`), which reads either cache.
//!
//! The copies of the cache need no kernel here: the history into the solver workspace is
//! `copy.batched_f16` ([`crate::copy::BATCHED_F16`], one launch per session over every layer), and
//! the carry's write-back `carry.retain`, which moves 32-bit words (a frame of `2d` binary16
//! values is `d` words).

#![allow(clippy::too_many_arguments)]

use half::f16;

use crate::CudaSource;
use crate::abi::{Arg, KernelError, LaunchDims};
use crate::elementwise::rn16;
use crate::norm::{layer_norm, qk_pack_args};
use crate::twin::{kdef, wr16};

use crate::abi::Param::{F32, I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "half",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/rows.cuh"),
        include_str!("../cuda/attention_body.cuh"),
        include_str!("../cuda/half_kv.cu")
    ),
};

kdef!(
    QK_PACK,
    "half",
    "qk_pack",
    [
        Ptr, Ptr, I64, I64, Ptr, I64, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, F32
    ],
    host_qk_pack,
    "`(qn, cache, cap, t0, qkv, ld, gamma_q, beta_q, gamma_k, beta_k, batch, heads, t, d, eps)`: `norm.qk_pack` into a binary16 cache ([`qk_pack_f16`]): `qn` `[batch·t, heads·d]` f32 holding `rn16(LN_q(q))`, `LN_k(k) ‖ v` as binary16 into frames `t0..t0+t` of a `[batch, heads, cap, 2d]` binary16 cache; one warp per (row, head) of q then of k."
);
pub static KERNELS: &[&crate::KernelDef] = &[&QK_PACK];

/// `norm.qk_pack` into a binary16 cache: `qkv` is `[batch·t, ld]` with `q ‖ k ‖ v` at columns
/// `0`, `heads·d`, `2·heads·d`. Writes `qn[(b·t + i), h·d + c] = rn16(LN_q(q))`
/// (`[batch·t, heads·d]`, f32 storage: the query stays f32) and, at frame `t0 + i` of the
/// `[batch, heads, cap, 2d]` binary16 cache, `f16(LN_k(k)) ‖ f16(v)` (round to nearest even).
pub fn qk_pack_f16(
    qn: &mut [f32],
    cache: &mut [f16],
    cap: usize,
    t0: usize,
    qkv: &[f32],
    ld: usize,
    (gq, bq): (&[f32], &[f32]),
    (gk, bk): (&[f32], &[f32]),
    batch: usize,
    heads: usize,
    t: usize,
    d: usize,
    eps: f32,
) {
    let inner = heads * d;
    let mut kn = vec![0.0f32; d];
    for b in 0..batch {
        for i in 0..t {
            let row = b * t + i;
            let src = &qkv[row * ld..];
            for h in 0..heads {
                let qo = row * inner + h * d;
                let q = &mut qn[qo..qo + d];
                layer_norm(
                    1,
                    d,
                    &src[h * d..h * d + d],
                    d,
                    Some(gq),
                    Some(bq),
                    eps,
                    q,
                    d,
                );
                q.iter_mut().for_each(|v| *v = rn16(*v));
                let ks = inner + h * d;
                layer_norm(
                    1,
                    d,
                    &src[ks..ks + d],
                    d,
                    Some(gk),
                    Some(bk),
                    eps,
                    &mut kn,
                    d,
                );
                let co = ((b * heads + h) * cap + t0 + i) * 2 * d;
                let vs = 2 * inner + h * d;
                let (kc, vc) = cache[co..co + 2 * d].split_at_mut(d);
                for (c, k) in kc.iter_mut().zip(&kn) {
                    *c = f16::from_f32(*k);
                }
                for (c, v) in vc.iter_mut().zip(&src[vs..vs + d]) {
                    *c = f16::from_f32(*v);
                }
            }
        }
    }
}

unsafe fn host_qk_pack(dims: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    // SAFETY: HostFn contract; the cache is binary16.
    let l = unsafe { qk_pack_args("half.qk_pack", dims, a, wr16)? };
    qk_pack_f16(
        l.qn, l.cache, l.cap, l.t0, l.qkv, l.ld, l.q, l.k, l.batch, l.heads, l.t, l.d, l.eps,
    );
    Ok(())
}

#[cfg(test)]
#[path = "half_kv_tests.rs"]
mod tests;
