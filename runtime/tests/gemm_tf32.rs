//! The 3xTF32 linear (`gemm.linear_tf32x3`, `GemmPath::InvariantTf32x3`): within the derived
//! bound of the fp32 twin (`dcc_kernels::gemm::tf32::bound`) on both backends (the Host runs the
//! twin's model of the `mma`, CUDA the tensor-core kernel), only its outputs written, a fused
//! activation equal to the linear then `ops::act` bit for bit, and on CUDA the rows of any
//! window of x equal to the same rows of one launch bit for bit (batch invariance).
//!
//! Without a GPU the CUDA tests print their skip reason (and fail under `DCC_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, BackendKind};
use dcc_runtime::kernels::gemm::{self, tf32};
use dcc_runtime::ops::{self, Act, Ctx, GemmPath, Tensor};

/// `(rows, in, out, ldx, ldy, off, bias)`: the full model's shapes at one session, tails in
/// every size, strides above the row widths, operands not 16-byte aligned (`off`).
const CASES: [(usize, usize, usize, usize, usize, usize, bool); 11] = [
    (112, 512, 1536, 512, 1536, 0, true),
    (112, 2048, 512, 2048, 512, 0, true),
    (112, 80, 512, 80, 512, 0, false),
    (1, 512, 80, 512, 80, 0, true),
    (37, 100, 70, 103, 71, 1, true),
    (33, 37, 33, 40, 35, 3, false),
    (5, 3, 7, 3, 7, 0, true),
    (17, 8, 1, 8, 1, 0, true),
    (65, 33, 129, 36, 130, 2, false),
    (16, 64, 32, 64, 32, 0, true),
    (19, 200, 33, 200, 33, 0, true),
];

/// Runs one case through `ops::linear` on `be` with the 3xTF32 path; returns y's whole buffer
/// (NaN where nothing may be written) and the operands (x's buffer from `off`, w, b).
#[allow(clippy::type_complexity)]
fn run(
    be: &Arc<dyn Backend>,
    (rows, k, out, ldx, ldy, off, bias): (usize, usize, usize, usize, usize, usize, bool),
    f: Option<Act>,
) -> (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) {
    let (x, w, b) = (
        common::data(41, off + rows * ldx),
        common::data(42, out * k),
        common::data(43, out),
    );
    let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
    let (xb, wb, bb, yb) = (up(&x), up(&w), up(&b), up(&vec![f32::NAN; rows * ldy]));
    let xt = Tensor::of(&xb).unwrap().narrow(0, off, rows * ldx).unwrap();
    let xt = xt.view(&[rows, ldx]).unwrap().narrow(1, 0, k).unwrap();
    let wt = Tensor::<f32>::of(&wb).unwrap().view(&[out, k]).unwrap();
    let yt = Tensor::of(&yb).unwrap().view(&[rows, ldy]).unwrap();
    let yt = yt.narrow(1, 0, out).unwrap();
    let bt = bias.then(|| Tensor::of(&bb).unwrap());
    let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::InvariantTf32x3);
    match f {
        None => ops::linear(&cx, wt, bt, xt, yt).unwrap(),
        Some(f) => ops::linear_act(&cx, wt, bt, xt, yt, f).unwrap(),
    }
    be.synchronize().unwrap();
    let y = be.download(yb.ptr(), rows * ldy).unwrap();
    (y, x[off..].to_vec(), w, if bias { b } else { Vec::new() })
}

/// Every output within the bound of the fp32 twin (`gemm::linear` on the same operands), and
/// nothing written outside the outputs.
fn tf32x3_is_within_the_bound_of_the_fp32_twin(be: Arc<dyn Backend>) {
    let mut worst = 0.0f64;
    for case in CASES {
        let (rows, k, out, ldx, ldy, _, _) = case;
        let (y, x, w, b) = run(&be, case, None);
        let mut want = vec![f32::NAN; rows * ldy];
        let b = (!b.is_empty()).then_some(&b[..]);
        gemm::linear(&mut want, ldy, &x, ldx, &w, b, rows, k, out, None).unwrap();
        for r in 0..rows {
            for o in 0..ldy {
                let (got, fp32) = (y[r * ldy + o], want[r * ldy + o]);
                if o >= out {
                    assert!(got.is_nan(), "{case:?}: gap ({r}, {o}) written");
                    continue;
                }
                let t: f64 = x[r * ldx..][..k]
                    .iter()
                    .zip(&w[o * k..][..k])
                    .map(|(p, q)| (*p as f64 * *q as f64).abs())
                    .sum();
                let lim = tf32::bound(k, t, got, fp32);
                let d = (got as f64 - fp32 as f64).abs();
                assert!(
                    d <= lim,
                    "{case:?} ({r}, {o}): {got:e} vs fp32 {fp32:e}: {d:e} above the bound {lim:e}"
                );
                worst = worst.max(d / lim);
            }
        }
    }
    println!(
        "tf32x3 ({}): every output within the bound of the fp32 twin; the largest error is {:.3} of it",
        be.device_name(),
        worst
    );
}

/// The fused activation's bits are those of the linear followed by `ops::act`.
fn tf32x3_fused_activation_equals_linear_then_act(be: Arc<dyn Backend>) {
    let acts = [
        Act::Silu,
        Act::Mish,
        Act::GeluTanh,
        Act::LeakyRelu(0.01),
        Act::Scale(22.627417),
    ];
    for case in [
        (112, 512, 2048, 512, 2048, 0, true),
        (37, 100, 70, 100, 70, 0, true),
    ] {
        let (plain, ..) = run(&be, case, None);
        for f in acts {
            let (fused, ..) = run(&be, case, Some(f));
            let yb = be.alloc_from(&plain, AllocKind::Other).unwrap();
            let cx = Ctx::new(be.as_ref(), None);
            ops::act(&cx, Tensor::of(&yb).unwrap(), f).unwrap();
            let then = be.download::<f32>(yb.ptr(), plain.len()).unwrap();
            let same = fused
                .iter()
                .zip(&then)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{f:?} {case:?}: fused differs from linear + act");
        }
    }
}

both!(
    tf32x3_is_within_the_bound_of_the_fp32_twin,
    tf32x3_fused_activation_equals_linear_then_act
);

/// M-slicing invariance of the tensor-core path: the rows of a window of x (any start, any
/// length, so the CTA tiles fall elsewhere, and `tf32_tiles::pick` may choose another variant
/// for the window than for the whole) give the bits of the same rows of one launch over all
/// 8 × 112 rows, at the full model's shapes and a tail, with aligned and unaligned
/// operands. Only the GPU runs the kernel; the Host runs the twin's model, whose rows are
/// computed one by one, so the test is a CUDA test only.
#[test]
fn batch_invariant_linear_tf32x3_row_windows() {
    let Some(be) = common::cuda() else {
        println!(
            "SKIP (host): the M-slicing invariance of gemm.linear_tf32x3 is a property of the \
             tensor-core kernel; the Host runs a model of it (checked within the bound instead)"
        );
        return;
    };
    assert_eq!(be.kind(), BackendKind::Cuda);
    let total = 8 * 112;
    for (k, out, ldx, off) in [(512, 1536, 512, 0), (2048, 512, 2048, 0), (100, 70, 103, 1)] {
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
        let xb = up(&common::data(51, off + total * ldx));
        let wb = up(&common::data(52, out * k));
        let bb = up(&common::data(53, out));
        let w = Tensor::<f32>::of(&wb).unwrap().view(&[out, k]).unwrap();
        let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::InvariantTf32x3);
        let rows = |start: usize, len: usize| -> Vec<u32> {
            let yb = up(&vec![f32::NAN; len * out]);
            let x = Tensor::of(&xb)
                .unwrap()
                .narrow(0, off, total * ldx)
                .unwrap();
            let x = x.view(&[total, ldx]).unwrap().narrow(1, 0, k).unwrap();
            let x = x.rows(start, len).unwrap();
            let y = Tensor::of(&yb).unwrap().view(&[len, out]).unwrap();
            ops::linear(&cx, w, Some(Tensor::of(&bb).unwrap()), x, y).unwrap();
            be.synchronize().unwrap();
            be.download(yb.ptr(), len * out).unwrap()
        };
        let all = rows(0, total);
        for (start, len) in [(0, 112), (112, 112), (5, 37), (337, 112), (0, 1), (895, 1)] {
            assert!(
                rows(start, len) == all[start * out..(start + len) * out],
                "{k} → {out}: rows {start}..{} alone differ from the same rows of {total}",
                start + len
            );
        }
    }
    println!(
        "batch-invariant ({}): gemm.linear_tf32x3's row windows equal the rows of one launch",
        be.device_name()
    );
}
