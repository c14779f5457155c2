//! The half path's f16 tensor-core attention (`attention.sdpa_f16`, what `ops::attention_f16`
//! launches over a binary16 cache; `attention.sdpa_f16_kv32`, what `ops::attention` launches on
//! `GemmPath::Half` over an f32 cache): within the derived bound of the fp32 twin over the same
//! binary16 values (`dcc_kernels::attention::f16::bound`) on both backends (the Host runs the
//! twin's model of the `mma`, CUDA the tensor-core kernel), at the DiT's shapes (8 heads × 64,
//! 56 queries over 458 keys, batch 2 and 32) among others; on CUDA within the bound of the twin
//! too (the two sides' bounds added), nothing written past the output, each batch entry's bits
//! the same in a launch of 2 and of 32 (`batch_invariant_sdpa_f16mma`; at the DiT's shape
//! `attention::f16::dims` tiles 32 entries by 64 query rows and 2 by 16), the two tilings' bits
//! equal at the same batch, and both kernels' bits equal over the same values.
//!
//! Without a GPU the CUDA tests print their skip reason (and fail under `DCC_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, BackendKind, DeviceBuffer};
use dcc_runtime::kernels::attention::{self, AttnLayout, f16 as fa};
use dcc_runtime::ops::{self, Ctx, Tensor};
use dcc_runtime::{Arg, KernelDef, LaunchDims};
use half::f16;

/// `(batch, heads, tq, tk, d, cap)`.
type Shape = (usize, usize, usize, usize, usize, usize);

/// The DiT at one session (CFG 2) and at sixteen (batch 32, 64-row tiles), its prompt call (302
/// queries over 302 keys), a query tile's tail and an odd head dim (plain staging), one key, the
/// largest head dim over many keys, a partial second 64-row tile; on the Host the DiT's shapes
/// at 2 heads (the twin is slow unoptimized).
fn cases(be: &Arc<dyn Backend>) -> Vec<Shape> {
    let mut c = vec![
        (2, 2, 56, 458, 64, 458),
        (1, 2, 17, 65, 13, 70),
        (3, 1, 3, 1, 32, 4),
        (1, 1, 5, 700, 128, 720),
        (48, 1, 70, 130, 64, 130),
    ];
    if be.kind() == BackendKind::Cuda {
        c.extend([
            (2, 8, 56, 458, 64, 458),
            (32, 8, 56, 458, 64, 458),
            (2, 8, 302, 302, 64, 458),
        ]);
    }
    c
}

/// Binary16 operands of `shape`: `q` (floats holding binary16 values, scaled so that the
/// softmax is far from uniform) and the cache's values.
fn operands(seed: u64, (batch, heads, tq, _, d, cap): Shape) -> (Vec<f32>, Vec<f32>) {
    let rn = |v: f32| f16::from_f32(v).to_f32();
    let q = common::data(seed, batch * tq * heads * d)
        .iter()
        .map(|x| rn(3.0 * x))
        .collect();
    let kv = common::data(seed + 1, batch * heads * cap * 2 * d)
        .iter()
        .map(|x| rn(*x))
        .collect();
    (q, kv)
}

fn up<T: dcc_runtime::backend::Pod>(be: &Arc<dyn Backend>, v: &[T]) -> DeviceBuffer {
    be.alloc_from(v, AllocKind::Other).unwrap()
}

/// `ops::attention_f16` over a binary16 cache of `kv`'s values; the output and 37 floats past it
/// (NaN where nothing wrote).
fn run(be: &Arc<dyn Backend>, shape: Shape, q: &[f32], kv: &[f32]) -> Vec<f32> {
    let (batch, heads, tq, tk, d, cap) = shape;
    let n = batch * tq * heads * d;
    let kv16: Vec<f16> = kv.iter().map(|x| f16::from_f32(*x)).collect();
    let (qb, kvb, ob) = (up(be, q), up(be, &kv16), up(be, &vec![f32::NAN; n + 37]));
    let qd = [batch, tq, heads * d];
    let cx = Ctx::new(be.as_ref(), None);
    ops::attention_f16(
        &cx,
        Tensor::of(&ob)
            .unwrap()
            .narrow(0, 0, n)
            .unwrap()
            .view(&qd)
            .unwrap(),
        Tensor::of(&qb).unwrap().view(&qd).unwrap(),
        Tensor::<f16>::of(&kvb)
            .unwrap()
            .view(&[batch, heads, cap, 2 * d])
            .unwrap(),
        tk,
        (1.0 / (d as f64).sqrt()) as f32,
    )
    .unwrap();
    be.synchronize().unwrap();
    be.download(ob.ptr(), n + 37).unwrap()
}

/// The largest ratio, over every output, of `|got − want|` to the bound of `got` against the
/// fp32 twin's output `fp32`, plus that of `want` where `want` is another attention's (`None`:
/// `want` is the fp32 twin's); asserts it is at most 1.
fn worst(
    shape: Shape,
    (q, kv): (&[f32], &[f32]),
    got: &[f32],
    want: Option<&[f32]>,
    fp32: &[f32],
) -> f64 {
    let (batch, heads, tq, tk, d, cap) = shape;
    let scale = (1.0 / (d as f64).sqrt()) as f32;
    let rows = AttnLayout::rows(tq, heads, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(heads, cap, d, false),
        AttnLayout::kv_cache(heads, cap, d, true),
    );
    let mut worst = 0.0f64;
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
                    let (a, f) = (got[e], fp32[e]);
                    let mut lim = fa::bound(d, tk, scale, t, *vm, a, f);
                    let w = match want {
                        Some(w) => {
                            lim += fa::bound(d, tk, scale, t, *vm, w[e], f);
                            w[e]
                        }
                        None => f,
                    };
                    let dist = (f64::from(a) - f64::from(w)).abs();
                    assert!(
                        dist <= lim,
                        "{shape:?} (b {b}, h {h}, i {i}, c {c}): {a:e} vs {w:e}: {dist:e} above the bound {lim:e}"
                    );
                    worst = worst.max(dist / lim);
                }
            }
        }
    }
    worst
}

/// The fp32 twin (`attention::attention`) over the same values.
fn fp32_twin(shape: Shape, q: &[f32], kv: &[f32]) -> Vec<f32> {
    let (batch, heads, tq, tk, d, cap) = shape;
    let mut want = vec![0.0f32; batch * tq * heads * d];
    let rows = AttnLayout::rows(tq, heads, d);
    let (kl, vl) = (
        AttnLayout::kv_cache(heads, cap, d, false),
        AttnLayout::kv_cache(heads, cap, d, true),
    );
    let scale = (1.0 / (d as f64).sqrt()) as f32;
    attention::attention(
        batch, heads, tq, tk, d, scale, q, rows, kv, kl, kv, vl, &mut want, rows,
    );
    want
}

/// Every output within the bound of the fp32 twin, and (where they can differ: CUDA) of the
/// f16 twin (both sides' bounds added); nothing written past the output.
fn sdpa_f16_is_within_the_bound_of_the_fp32_twin(be: Arc<dyn Backend>) {
    let (mut to_fp32, mut to_twin) = (0.0f64, 0.0f64);
    for (n, shape) in cases(&be).into_iter().enumerate() {
        let (batch, heads, tq, tk, d, cap) = shape;
        let (q, kv) = operands(10 + 2 * n as u64, shape);
        let got = run(&be, shape, &q, &kv);
        let nout = batch * tq * heads * d;
        assert!(
            got[nout..].iter().all(|x| x.is_nan()),
            "{shape:?}: written past the output"
        );
        let got = &got[..nout];
        assert!(got.iter().all(|x| x.is_finite()), "{shape:?}");
        let fp32 = fp32_twin(shape, &q, &kv);
        to_fp32 = to_fp32.max(worst(shape, (&q, &kv), got, None, &fp32));
        let mut twin = vec![0.0f32; nout];
        let scale = (1.0 / (d as f64).sqrt()) as f32;
        fa::attention(batch, heads, tq, tk, d, cap, scale, &q, &kv, &mut twin);
        if be.kind() == BackendKind::Host {
            assert!(
                got.iter()
                    .zip(&twin)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{shape:?}: the Host is not its twin"
            );
        } else {
            to_twin = to_twin.max(worst(shape, (&q, &kv), got, Some(&twin), &fp32));
        }
    }
    println!(
        "sdpa_f16 ({}): every output within the bound of the fp32 twin (the largest error {to_fp32:.3e} of it) and of the f16 twin ({to_twin:.3e} of the two bounds)",
        be.device_name()
    );
}

both!(sdpa_f16_is_within_the_bound_of_the_fp32_twin);

/// Batch invariance: 32 batch entries (16 sessions' CFG pairs) in one launch, then each pair of
/// entries alone in a launch of 2; every pair's output equals its slice of the 32 bit for bit.
/// On CUDA at the DiT's shape (8 heads of 64, 56 queries over 458 keys: 64-row tiles at 32, 16-row
/// tiles at 2) and a tail shape (an odd head dim, plain staging, a partial query tile); on the
/// Host (its twin) at 8 entries of one head.
fn batch_invariant_sdpa_f16mma(be: Arc<dyn Backend>) {
    // (heads, tq, tk, d, cap)
    let (total, shapes) = if be.kind() == BackendKind::Cuda {
        (32, [(8, 56, 458, 64, 458), (2, 17, 65, 13, 70)])
    } else {
        (8, [(1, 56, 458, 32, 458), (2, 17, 65, 13, 70)])
    };
    for (heads, tq, tk, d, cap) in shapes {
        let shape = (total, heads, tq, tk, d, cap);
        let (q, kv) = operands(71, shape);
        let (qs, ks) = (tq * heads * d, heads * cap * 2 * d);
        let all = run(&be, shape, &q, &kv);
        for start in (0..total).step_by(2) {
            let part = (2, heads, tq, tk, d, cap);
            let got = run(
                &be,
                part,
                &q[start * qs..(start + 2) * qs],
                &kv[start * ks..(start + 2) * ks],
            );
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert!(
                bits(&got[..2 * qs]) == bits(&all[start * qs..(start + 2) * qs]),
                "{heads} × {d}, {tq} over {tk}: entries {start}..{} alone differ from the same entries of {total}",
                start + 2
            );
        }
    }
    println!(
        "batch-invariant ({}): attention.sdpa_f16's batch 2 slices equal batch {total}'s",
        be.device_name()
    );
}

both!(batch_invariant_sdpa_f16mma);

/// Launches `kernel` directly at `dims` (`rows` query rows per CTA) over a cache already on the
/// device; the output's bits (asserting nothing was written past it).
fn launch(
    be: &Arc<dyn Backend>,
    kernel: &'static KernelDef,
    dims: LaunchDims,
    rows: usize,
    shape: Shape,
    qb: &DeviceBuffer,
    kvb: &DeviceBuffer,
) -> Vec<u32> {
    let (batch, heads, tq, tk, d, cap) = shape;
    let n = batch * tq * heads * d;
    let ob = up(be, &vec![f32::NAN; n + 37]);
    let args = [
        Arg::Ptr(ob.ptr()),
        Arg::Ptr(qb.ptr()),
        Arg::Ptr(kvb.ptr()),
        Arg::I64(batch as i64),
        Arg::I64(heads as i64),
        Arg::I64(tq as i64),
        Arg::I64(tk as i64),
        Arg::I64(d as i64),
        Arg::I64(cap as i64),
        Arg::F32((1.0 / (d as f64).sqrt()) as f32),
        Arg::I64(rows as i64),
    ];
    // SAFETY: q holds batch·tq rows of heads·d floats, the cache batch·heads·cap frames of 2d
    // elements of the kernel's type (the callers upload them so), out n floats and 37 more:
    // what the kernel reads and writes at these arguments; the buffers live until the download.
    unsafe { be.launch(kernel, dims, &args) }.unwrap();
    be.synchronize().unwrap();
    let got = be.download::<f32>(ob.ptr(), n + 37).unwrap();
    assert!(
        got[n..].iter().all(|x| x.is_nan()),
        "{shape:?} {dims:?}: written past the output"
    );
    got[..n].iter().map(|x| x.to_bits()).collect()
}

/// The two tilings (`f16::Tiling`: 16 or 64 query rows per CTA) give the same bits at the same
/// batch, and the f32-cache kernel those of the binary16 one over the same values (on CUDA the
/// kernels' own claim; the Host runs one twin for all), at the DiT's shape and tails.
fn tilings_and_caches_give_the_same_bits(be: Arc<dyn Backend>) {
    be.preload(fa::KERNELS).unwrap();
    let mut shapes = vec![(2, 2, 56, 458, 32, 458), (3, 1, 70, 130, 40, 131)];
    if be.kind() == BackendKind::Cuda {
        shapes.extend([(2, 8, 56, 458, 64, 458), (32, 8, 56, 458, 64, 458)]);
    }
    for shape in shapes {
        let (batch, heads, tq, tk, d, _) = shape;
        let (q, kv) = operands(81, shape);
        let kv16: Vec<f16> = kv.iter().map(|x| f16::from_f32(*x)).collect();
        let (qb, kvb, kv32b) = (up(&be, &q), up(&be, &kv16), up(&be, &kv));
        let outer = batch * heads;
        let rows16 = fa::dims_with(fa::Tiling::Rows16, outer, tq, tk, d).unwrap();
        let rows64 = fa::dims_with(fa::Tiling::Rows64, outer, tq, tk, d).unwrap();
        let a = launch(&be, &fa::SDPA_F16, rows16, 16, shape, &qb, &kvb);
        let b = launch(&be, &fa::SDPA_F16, rows64, 64, shape, &qb, &kvb);
        let c = launch(&be, &fa::SDPA_F16_KV32, rows16, 16, shape, &qb, &kv32b);
        let e = launch(&be, &fa::SDPA_F16_KV32, rows64, 64, shape, &qb, &kv32b);
        assert!(a == b, "{shape:?}: the 64-row tiling's bits differ");
        assert!(a == c, "{shape:?}: the f32 cache's bits differ (16 rows)");
        assert!(a == e, "{shape:?}: the f32 cache's bits differ (64 rows)");
    }
    println!(
        "tilings ({}): attention.sdpa_f16 in 64-row tiles equals 16-row tiles, and sdpa_f16_kv32 equals both, bit for bit",
        be.device_name()
    );
}

both!(tilings_and_caches_give_the_same_bits);
