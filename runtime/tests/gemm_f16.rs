//! The half-precision linear (`gemm.linear_f16_*`, `GemmPath::Half`): binary16 weights and bias,
//! every output a binary16 value, within the derived bound of its host twin
//! (`dcc_kernels::gemm::f16::bound`) on CUDA and equal to it on the Host (which runs the twin),
//! only its outputs written, every tile variant the same bits, a fused activation equal to
//! `rn16` of the linear then `ops::act` bit for bit, and the rows of any window of x equal to the
//! same rows of one launch over 8 × 112 rows bit for bit (batch invariance, on both backends).
//! Weights of the other element type are refused on either side.
//!
//! Without a GPU the CUDA tests print their skip reason (and fail under `DCC_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, BackendKind, DeviceBuffer};
use dcc_runtime::kernels::gemm::f16::{self as h16, F16Variant, rn16};
use dcc_runtime::ops::{self, Act, Ctx, GemmPath, OpError, Tensor};
use half::f16;

/// `(rows, in, out, ldx, ldy, off, bias)`: the full model's shapes at one session, tails in
/// every size, strides above the row widths, operands not 16-byte aligned (`off`), K not a
/// multiple of 8 (the plain-load staging).
const CASES: [(usize, usize, usize, usize, usize, usize, bool); 12] = [
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
    (300, 256, 200, 256, 200, 0, true),
    (130, 96, 70, 100, 70, 4, true),
];

/// The GPU also runs the many-rows model shapes (the host twin is their reference), with rows
/// past a multiple of 64 at K = 512, 1,536 and 2,048 and 80 and 1,536 outputs (a partial
/// 128-output tile), a strided and an unaligned x.
const CUDA_CASES: [(usize, usize, usize, usize, usize, usize, bool); 4] = [
    (1600, 512, 1536, 512, 1536, 0, true),
    (930, 2048, 512, 2048, 512, 0, true),
    (1001, 1536, 80, 1540, 83, 0, false),
    (333, 512, 1536, 516, 1536, 2, true),
];

fn cases(be: &Arc<dyn Backend>) -> Vec<(usize, usize, usize, usize, usize, usize, bool)> {
    let mut c = CASES.to_vec();
    if be.kind() == BackendKind::Cuda {
        c.extend(CUDA_CASES);
    }
    c
}

/// Binary16 values of `v` (round to nearest even).
fn halves(v: &[f32]) -> Vec<f16> {
    v.iter().map(|&x| f16::from_f32(x)).collect()
}

/// One case's operands on `be`: x (from `off`), the binary16 weight and bias, and y filled with
/// NaN; plus their host values.
struct Case {
    rows: usize,
    k: usize,
    out: usize,
    ldx: usize,
    ldy: usize,
    off: usize,
    xb: DeviceBuffer,
    wb: DeviceBuffer,
    bb: Option<DeviceBuffer>,
    x: Vec<f32>,
    w: Vec<f16>,
    b: Option<Vec<f16>>,
}

impl Case {
    fn new(
        be: &Arc<dyn Backend>,
        (rows, k, out, ldx, ldy, off, bias): (usize, usize, usize, usize, usize, usize, bool),
    ) -> Case {
        let x = common::data(41, off + rows * ldx);
        let w = halves(&common::data(42, out * k));
        let b = bias.then(|| halves(&common::data(43, out)));
        let xb = be.alloc_from(&x, AllocKind::Other).unwrap();
        let wb = be.alloc_from(&w, AllocKind::Other).unwrap();
        let bb = b
            .as_ref()
            .map(|b| be.alloc_from(b, AllocKind::Other).unwrap());
        Case {
            rows,
            k,
            out,
            ldx,
            ldy,
            off,
            xb,
            wb,
            bb,
            x: x[off..].to_vec(),
            w,
            b,
        }
    }

    /// Runs the case through `ops::linear(_act)` on the half path (or the variant `v`); returns
    /// y's whole buffer (NaN where nothing may be written).
    fn run(
        &self,
        be: &Arc<dyn Backend>,
        v: Option<&'static F16Variant>,
        f: Option<Act>,
    ) -> Vec<f32> {
        let (rows, k, out, ldx, ldy) = (self.rows, self.k, self.out, self.ldx, self.ldy);
        let yb = be
            .alloc_from(&vec![f32::NAN; rows * ldy], AllocKind::Other)
            .unwrap();
        let xt = Tensor::of(&self.xb).unwrap();
        let xt = xt.narrow(0, self.off, rows * ldx).unwrap();
        let xt = xt.view(&[rows, ldx]).unwrap().narrow(1, 0, k).unwrap();
        let wt = Tensor::<f16>::of(&self.wb)
            .unwrap()
            .view(&[out, k])
            .unwrap();
        let bt = self.bb.as_ref().map(|b| Tensor::<f16>::of(b).unwrap());
        let yt = Tensor::of(&yb).unwrap().view(&[rows, ldy]).unwrap();
        let yt = yt.narrow(1, 0, out).unwrap();
        let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Half);
        match (v, f) {
            (Some(v), f) => ops::linear_f16_with(&cx, v, wt, bt, xt, yt, f).unwrap(),
            (None, None) => ops::linear(&cx, wt, bt, xt, yt).unwrap(),
            (None, Some(f)) => ops::linear_act(&cx, wt, bt, xt, yt, f).unwrap(),
        }
        be.synchronize().unwrap();
        be.download(yb.ptr(), rows * ldy).unwrap()
    }

    /// The host twin's y (the same layout).
    fn twin(&self) -> Vec<f32> {
        let mut y = vec![f32::NAN; self.rows * self.ldy];
        let b = self.b.as_deref();
        let (rows, k, out, ldx, ldy) = (self.rows, self.k, self.out, self.ldx, self.ldy);
        h16::linear(&mut y, ldy, &self.x, ldx, &self.w, b, rows, k, out, None).unwrap();
        y
    }

    /// `Σ_k |rn16(x_k)·w_k|` of output `(r, o)`.
    fn t(&self, r: usize, o: usize) -> f64 {
        self.x[r * self.ldx..][..self.k]
            .iter()
            .zip(&self.w[o * self.k..][..self.k])
            .map(|(p, q)| (rn16(*p) as f64 * q.to_f64()).abs())
            .sum()
    }
}

/// Every output a binary16 value within the bound of the twin (equal to it on the Host, which
/// runs the twin), nothing written outside the outputs, and every tile variant the same bits.
fn f16_is_within_the_bound_of_its_twin(be: Arc<dyn Backend>) {
    let mut worst = 0.0f64;
    let (mut equal, mut total) = (0usize, 0usize);
    for case in cases(&be) {
        let c = Case::new(&be, case);
        let y = c.run(&be, None, None);
        let want = c.twin();
        for r in 0..c.rows {
            for o in 0..c.ldy {
                let (got, twin) = (y[r * c.ldy + o], want[r * c.ldy + o]);
                if o >= c.out {
                    assert!(got.is_nan(), "{case:?}: gap ({r}, {o}) written");
                    continue;
                }
                assert_eq!(rn16(got).to_bits(), got.to_bits(), "{case:?}: not binary16");
                if be.kind() == BackendKind::Host {
                    assert_eq!(got.to_bits(), twin.to_bits(), "{case:?} ({r}, {o})");
                }
                let lim = h16::bound(c.k, c.t(r, o), got, twin);
                let d = (got as f64 - twin as f64).abs();
                assert!(
                    d <= lim,
                    "{case:?} ({r}, {o}): {got:e} vs twin {twin:e}: {d:e} above the bound {lim:e}"
                );
                worst = worst.max(d / lim);
                equal += usize::from(got.to_bits() == twin.to_bits());
                total += 1;
            }
        }
        for v in h16::VARIANTS {
            let yv = c.run(&be, Some(v), None);
            let same = yv.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same,
                "{case:?}: {} differs from the picked variant",
                v.kernel.name
            );
        }
    }
    println!(
        "f16 ({}): every output within the bound of the twin (the largest error {worst:.3} of \
         it), {equal} of {total} equal to the twin bit for bit; all {} variants the same bits",
        be.device_name(),
        h16::VARIANTS.len()
    );
}

/// The fused activation's bits are `rn16` of the linear followed by `ops::act`.
fn f16_fused_activation_equals_rn16_of_linear_then_act(be: Arc<dyn Backend>) {
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
        (300, 64, 96, 64, 96, 0, false),
    ] {
        let c = Case::new(&be, case);
        let plain = c.run(&be, None, None);
        for f in acts {
            let fused = c.run(&be, None, Some(f));
            let yb = be.alloc_from(&plain, AllocKind::Other).unwrap();
            let cx = Ctx::new(be.as_ref(), None);
            ops::act(&cx, Tensor::of(&yb).unwrap(), f).unwrap();
            let then = be.download::<f32>(yb.ptr(), plain.len()).unwrap();
            let same = fused
                .iter()
                .zip(&then)
                .all(|(a, b)| a.to_bits() == rn16(*b).to_bits());
            assert!(
                same,
                "{f:?} {case:?}: fused differs from rn16(linear + act)"
            );
        }
    }
}

/// Weights of the element type the path does not read are refused, nothing queued.
fn f16_weights_follow_the_path(be: Arc<dyn Backend>) {
    let c = Case::new(&be, (4, 8, 3, 8, 3, 0, true));
    let w32 = be
        .alloc_from(&common::data(1, 24), AllocKind::Other)
        .unwrap();
    let yb = be.alloc_from(&[f32::NAN; 12], AllocKind::Other).unwrap();
    let x = Tensor::of(&c.xb).unwrap().view(&[4, 8]).unwrap();
    let y = Tensor::of(&yb).unwrap().view(&[4, 3]).unwrap();
    let w16 = Tensor::<f16>::of(&c.wb).unwrap().view(&[3, 8]).unwrap();
    let w32 = Tensor::<f32>::of(&w32).unwrap().view(&[3, 8]).unwrap();
    let cx = Ctx::new(be.as_ref(), None);
    for path in [
        GemmPath::Backend,
        GemmPath::Invariant,
        GemmPath::InvariantTf32x3,
    ] {
        let e = ops::linear(&cx.with_gemm(path), w16, None, x, y).unwrap_err();
        assert!(matches!(e, OpError::Arg { arg: "w", .. }), "{path:?}: {e}");
    }
    let e = ops::linear(&cx.with_gemm(GemmPath::Half), w32, None, x, y).unwrap_err();
    assert!(
        e.to_string().contains("f32 weights on GemmPath::Half"),
        "{e}"
    );
    be.synchronize().unwrap();
    let untouched: Vec<f32> = be.download(yb.ptr(), 12).unwrap();
    assert!(untouched.iter().all(|v| v.is_nan()));
    assert_eq!(GemmPath::Half.weight_dtype().name(), "f16");
    assert!(GemmPath::Half.batch_invariant());
    let names = |v: &[&dcc_runtime::KernelDef]| v.iter().map(|k| k.name).collect::<Vec<_>>();
    assert_eq!(names(&GemmPath::Half.linear_kernels()), names(h16::KERNELS));
}

both!(
    f16_is_within_the_bound_of_its_twin,
    f16_fused_activation_equals_rn16_of_linear_then_act,
    f16_weights_follow_the_path
);

/// M-slicing invariance: the rows of a window of x (one session's 112 rows, any start, any
/// length, so the CTA tiles fall elsewhere and the picked variant changes: 16 × 32 below 256
/// rows, 64 × 64 from there, 64 × 128 for the whole at 896 rows and 512 outputs and more) give
/// the bits of the same rows of one launch over all 8 × 112
/// rows, at the full model's shapes and a tail, with aligned and unaligned operands. On the
/// Host (the twin) as on CUDA (the tensor-core kernel).
fn batch_invariant_linear_f16_row_windows(be: Arc<dyn Backend>) {
    let total = 8 * 112;
    for (k, out, ldx, off) in [(512, 1536, 512, 0), (2048, 512, 2048, 0), (100, 70, 103, 1)] {
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
        let xb = up(&common::data(51, off + total * ldx));
        let wb = be
            .alloc_from(&halves(&common::data(52, out * k)), AllocKind::Other)
            .unwrap();
        let bb = be
            .alloc_from(&halves(&common::data(53, out)), AllocKind::Other)
            .unwrap();
        let w = Tensor::<f16>::of(&wb).unwrap().view(&[out, k]).unwrap();
        let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Half);
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
        let windows: &[(usize, usize)] = if be.kind() == BackendKind::Cuda {
            &[
                (0, 112),
                (112, 112),
                (784, 112),
                (5, 37),
                (337, 112),
                (0, 300),
                (0, 1),
                (895, 1),
            ]
        } else {
            &[(0, 112), (337, 112), (895, 1)]
        };
        for &(start, len) in windows {
            assert!(
                rows(start, len) == all[start * out..(start + len) * out],
                "{k} → {out}: rows {start}..{} alone differ from the same rows of {total}",
                start + len
            );
        }
    }
    println!(
        "batch-invariant ({}): gemm.linear_f16's row windows equal the rows of one launch",
        be.device_name()
    );
}

both!(batch_invariant_linear_f16_row_windows);
