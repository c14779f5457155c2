//! The 3xTF32 attention (`attention.sdpa_tf32x3`, what `ops::attention` launches on
//! `GemmPath::InvariantTf32x3`): within the derived bound of the fp32 twin
//! (`dcc_kernels::attention::tf32::bound`) on both backends (the Host runs the twin's model of the
//! `mma`, CUDA the tensor-core kernel), nothing written past the output, the fp32 kernel on every
//! other path, each (batch, head)'s bits the same in a launch of 2 batch entries and of 16
//! (batch invariance; at the DiT's shape `attention::tf32::dims` tiles 16 entries by 64 query
//! rows and 2 by 16), and the two tilings' bits equal at the same batch.
//!
//! Without a GPU the CUDA tests print their skip reason (and fail under `DCC_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend};
use dcc_runtime::kernels::attention::{self, AttnLayout, tf32};
use dcc_runtime::ops::{self, Ctx, GemmPath, Tensor};
use dcc_runtime::{Arg, LaunchDims};

/// `(batch, heads, tq, tk, d, cap, off)`: the DiT's slices at one session (CFG 2 × 8 heads, 56
/// queries over 458 keys of 64), a query tile's tail, one key, an odd head dim (4-byte copies),
/// a cache not 16-byte aligned (`off` floats into its buffer), the largest head dim; then two
/// batches `attention::tf32::dims` launches with 64-row tiles (96 CTAs): a head dim of 30 in
/// 4-byte copies from an unaligned cache, and 70 queries (a second, partial query tile).
const CASES: [(usize, usize, usize, usize, usize, usize, usize); 9] = [
    (2, 8, 56, 458, 64, 460, 0),
    (1, 2, 17, 65, 13, 70, 0),
    (3, 1, 3, 1, 32, 4, 0),
    (1, 3, 16, 130, 64, 130, 1),
    (2, 2, 33, 64, 128, 64, 0),
    (1, 1, 1, 7, 8, 9, 2),
    (1, 2, 20, 200, 100, 201, 0),
    (96, 1, 40, 200, 30, 203, 1),
    (48, 1, 70, 130, 64, 130, 0),
];

/// Runs `ops::attention` on `be` with `path`; returns the output buffer (NaN past the output
/// rows) and the operands `(q, kv)` as the kernel reads them.
#[allow(clippy::type_complexity)]
fn run(
    be: &Arc<dyn Backend>,
    path: GemmPath,
    (batch, heads, tq, tk, d, cap, off): (usize, usize, usize, usize, usize, usize, usize),
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let hd = heads * d;
    let n = batch * tq * hd;
    let q: Vec<f32> = common::data(61, n).iter().map(|x| 2.0 * x).collect();
    let kv: Vec<f32> = common::data(62, off + batch * heads * cap * 2 * d)
        .iter()
        .map(|x| 2.0 * x)
        .collect();
    let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
    let (qb, kvb, ob) = (up(&q), up(&kv), up(&vec![f32::NAN; n + 37]));
    let qt = Tensor::of(&qb).unwrap().view(&[batch, tq, hd]).unwrap();
    let kvt = Tensor::of(&kvb)
        .unwrap()
        .narrow(0, off, batch * heads * cap * 2 * d)
        .unwrap()
        .view(&[batch, heads, cap, 2 * d])
        .unwrap();
    let ot = Tensor::of(&ob)
        .unwrap()
        .narrow(0, 0, n)
        .unwrap()
        .view(&[batch, tq, hd])
        .unwrap();
    let cx = Ctx::new(be.as_ref(), None).with_gemm(path);
    let scale = (1.0 / (d as f64).sqrt()) as f32;
    ops::attention(&cx, ot, qt, kvt, tk, scale).unwrap();
    be.synchronize().unwrap();
    let out = be.download(ob.ptr(), n + 37).unwrap();
    (out, q, kv[off..].to_vec())
}

/// Every output within the bound of the fp32 twin (`attention::attention` on the same operands),
/// nothing written past the output.
fn sdpa_tf32x3_is_within_the_bound_of_the_fp32_twin(be: Arc<dyn Backend>) {
    let mut worst = 0.0f64;
    for case in CASES {
        let (batch, heads, tq, tk, d, cap, _) = case;
        let (got, q, kv) = run(&be, GemmPath::InvariantTf32x3, case);
        let n = batch * tq * heads * d;
        assert!(
            got[n..].iter().all(|x| x.is_nan()),
            "{case:?}: written past the output"
        );
        let mut want = vec![0.0f32; n];
        let rows = AttnLayout::rows(tq, heads, d);
        let (kl, vl) = (
            AttnLayout::kv_cache(heads, cap, d, false),
            AttnLayout::kv_cache(heads, cap, d, true),
        );
        let scale = (1.0 / (d as f64).sqrt()) as f32;
        attention::attention(
            batch, heads, tq, tk, d, scale, &q, rows, &kv, kl, &kv, vl, &mut want, rows,
        );
        for b in 0..batch {
            for h in 0..heads {
                let vmax: Vec<f64> = (0..d)
                    .map(|c| {
                        (0..tk)
                            .map(|j| f64::from(kv[vl.at(b, h, j) + c]).abs())
                            .fold(0.0, f64::max)
                    })
                    .collect();
                for i in 0..tq {
                    let qi = &q[rows.at(b, h, i)..][..d];
                    let t = (0..tk)
                        .map(|j| {
                            qi.iter()
                                .zip(&kv[kl.at(b, h, j)..][..d])
                                .map(|(x, y)| (f64::from(*x) * f64::from(*y)).abs())
                                .sum::<f64>()
                        })
                        .fold(0.0, f64::max);
                    for (c, vm) in vmax.iter().enumerate() {
                        let e = rows.at(b, h, i) + c;
                        let (a, f) = (got[e], want[e]);
                        let lim = tf32::bound(d, tk, scale, t, *vm, a, f);
                        let dist = (f64::from(a) - f64::from(f)).abs();
                        assert!(
                            dist <= lim,
                            "{case:?} (b {b}, h {h}, i {i}, c {c}): {a:e} vs fp32 {f:e}: {dist:e} above the bound {lim:e}"
                        );
                        worst = worst.max(dist / lim);
                    }
                }
            }
        }
    }
    println!(
        "sdpa_tf32x3 ({}): every output within the bound of the fp32 twin; the largest error is {worst:.3e} of it",
        be.device_name()
    );
}

/// The other GEMM paths keep the fp32 kernel: its output equals the fp32 twin bit for bit on
/// Host and CUDA alike (the twin is bit-faithful), which the 3xTF32 kernel's need not.
fn other_paths_run_the_fp32_kernel(be: Arc<dyn Backend>) {
    let case = CASES[1];
    let (batch, heads, tq, tk, d, cap, _) = case;
    let n = batch * tq * heads * d;
    let (rows, kl, vl) = (
        AttnLayout::rows(tq, heads, d),
        AttnLayout::kv_cache(heads, cap, d, false),
        AttnLayout::kv_cache(heads, cap, d, true),
    );
    let scale = (1.0 / (d as f64).sqrt()) as f32;
    for path in [GemmPath::Backend, GemmPath::Invariant] {
        let (got, q, kv) = run(&be, path, case);
        let mut want = vec![0.0f32; n];
        attention::attention(
            batch, heads, tq, tk, d, scale, &q, rows, &kv, kl, &kv, vl, &mut want, rows,
        );
        assert!(
            got[..n]
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits()),
            "{path:?}: not the fp32 kernel's bits"
        );
    }
}

both!(
    sdpa_tf32x3_is_within_the_bound_of_the_fp32_twin,
    other_paths_run_the_fp32_kernel
);

/// Batch invariance: 16 batch entries (8 sessions' CFG pairs) in one launch, then each pair of
/// entries alone in a launch of 2; every pair's output equals its slice of the 16 bit for bit.
/// At the DiT's shape (8 heads, 56 queries over 458 keys of 64) and a tail shape (a 4-byte
/// staged, odd head dim and a partial query tile).
fn batch_invariant_sdpa_tf32x3(be: Arc<dyn Backend>) {
    for (heads, tq, tk, d, cap) in [(8, 56, 458, 64, 460), (2, 17, 65, 13, 70)] {
        let total = 16;
        let hd = heads * d;
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
        let qb = up(&common::data(71, total * tq * hd));
        let kvb = up(&common::data(72, total * heads * cap * 2 * d));
        let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::InvariantTf32x3);
        let scale = (1.0 / (d as f64).sqrt()) as f32;
        let launch = |start: usize, len: usize| -> Vec<u32> {
            let ob = up(&vec![f32::NAN; len * tq * hd]);
            let q = Tensor::of(&qb)
                .unwrap()
                .narrow(0, start * tq * hd, len * tq * hd)
                .unwrap()
                .view(&[len, tq, hd])
                .unwrap();
            let slice = heads * cap * 2 * d;
            let kv = Tensor::of(&kvb)
                .unwrap()
                .narrow(0, start * slice, len * slice)
                .unwrap()
                .view(&[len, heads, cap, 2 * d])
                .unwrap();
            let o = Tensor::of(&ob).unwrap().view(&[len, tq, hd]).unwrap();
            ops::attention(&cx, o, q, kv, tk, scale).unwrap();
            be.synchronize().unwrap();
            be.download::<f32>(ob.ptr(), len * tq * hd)
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect()
        };
        let all = launch(0, total);
        let per = tq * hd;
        for start in (0..total).step_by(2) {
            assert!(
                launch(start, 2) == all[start * per..(start + 2) * per],
                "{heads} × {d}, {tq} over {tk}: entries {start}..{} alone differ from the same entries of {total}",
                start + 2
            );
        }
    }
    println!(
        "batch-invariant ({}): attention.sdpa_tf32x3's batch 2 slices equal batch 16's",
        be.device_name()
    );
}

both!(batch_invariant_sdpa_tf32x3);

/// The two tilings of `attention.sdpa_tf32x3` (`tf32::Tiling`: 16 or 64 query rows per CTA)
/// give the same bits at the same batch (on CUDA the kernel's own claim: each score and output
/// is one warp's, in the same `mma` chains and order; the Host runs one twin for both), at the
/// DiT's shape and the 64-row cases of [`CASES`], nothing written past the output either way.
fn tilings_give_the_same_bits(be: Arc<dyn Backend>) {
    be.preload(&[&tf32::SDPA_TF32X3]).unwrap();
    for (batch, heads, tq, tk, d, cap, off) in [(2, 8, 56, 458, 64, 460, 0), CASES[7], CASES[8]] {
        let n = batch * tq * heads * d;
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
        let qb = up(&common::data(81, n));
        let kvb = up(&common::data(82, off + batch * heads * cap * 2 * d));
        let scale = (1.0 / (d as f64).sqrt()) as f32;
        let launch = |dims: LaunchDims| -> Vec<u32> {
            let ob = up(&vec![f32::NAN; n + 37]);
            let args = [
                Arg::Ptr(ob.ptr()),
                Arg::Ptr(qb.ptr()),
                Arg::Ptr(kvb.ptr().offset(4 * off)),
                Arg::I64(batch as i64),
                Arg::I64(heads as i64),
                Arg::I64(tq as i64),
                Arg::I64(tk as i64),
                Arg::I64(d as i64),
                Arg::I64(cap as i64),
                Arg::F32(scale),
            ];
            // SAFETY: q holds batch·tq rows of heads·d, the cache (off floats into its buffer)
            // batch·heads·cap frames of 2d, out n floats and 37 more: what the kernel reads and
            // writes at these arguments; the buffers live until the download below.
            unsafe { be.launch(&tf32::SDPA_TF32X3, dims, &args) }.unwrap();
            be.synchronize().unwrap();
            let got = be.download::<f32>(ob.ptr(), n + 37).unwrap();
            assert!(
                got[n..].iter().all(|x| x.is_nan()),
                "{dims:?}: written past the output"
            );
            got[..n].iter().map(|x| x.to_bits()).collect()
        };
        let outer = batch * heads;
        let rows16 = tf32::dims_with(tf32::Tiling::Rows16, outer, tq, tk, d).unwrap();
        let rows64 = tf32::dims_with(tf32::Tiling::Rows64, outer, tq, tk, d).unwrap();
        assert!(
            launch(rows16) == launch(rows64),
            "{batch} × {heads} × {d}, {tq} over {tk}: the 64-row tiling's bits differ from the 16-row one's"
        );
    }
    println!(
        "tilings ({}): attention.sdpa_tf32x3 in 64-row tiles equals 16-row tiles bit for bit",
        be.device_name()
    );
}

both!(tilings_give_the_same_bits);
