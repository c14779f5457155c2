//! The 3xTF32 tile variants (`dcc_kernels::gemm::tf32_tiles::TILES`: `t64x64r`, `t64x128w`,
//! `t64x64w`, and the small-row `t16x32s8`, `t16x32w8`, `t16x32k128`, `t16x32s4`, `t16x64s4`,
//! `t32x32s6`, `t32x64s4`):
//! every variant gives the bits of `gemm.linear_tf32x3` (`tf32_tiles::BASE`) for every output,
//! at the full model's shapes at 1, 7, 112, 224, 1,600, 1,650 and 1,792 rows and at odd
//! shapes (outputs not a multiple of any tile, K not a multiple of a k tile nor of 4, unaligned
//! and strided operands, row tails past the 64-row tiles at the model's K and at 80 and 1,536
//! outputs, a fused activation), writes nothing but its outputs, and the rows of any window of x
//! equal the same rows of one launch over 8 × 112 rows (batch invariance across variants: the
//! window and the whole may run on different variants).
//!
//! On the Host every variant runs the twin's model (`tf32::dot`), so there the test checks the
//! plumbing (launch geometry, strides, untouched gaps); the bits of the tensor-core kernels are a
//! CUDA test. Without a GPU the CUDA tests print their skip reason (and fail under
//! `DCC_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, BackendKind};
use dcc_runtime::kernels::gemm::tf32_tiles::{self, BASE, Tf32Variant};
use dcc_runtime::ops::{self, Act, Ctx, Tensor};

/// The full model's linear shapes `(in, out)` (`dcc-bench kernels`' list and the DiT's convs).
const MODEL: [(usize, usize); 7] = [
    (512, 1536),
    (512, 512),
    (1536, 512),
    (512, 2048),
    (2048, 512),
    (320, 512),
    (512, 80),
];

/// `(rows, in, out, ldx, ldy, off, bias)` beyond the model's: K past no k tile and not a
/// multiple of 4 (the 4-byte staging), outputs past no tile, strides above the row widths,
/// operands not 16-byte aligned (`off`), a single k step, K below one step.
const ODD: [(usize, usize, usize, usize, usize, usize, bool); 9] = [
    (37, 100, 70, 103, 71, 1, true),
    (33, 37, 33, 40, 35, 3, false),
    (5, 3, 7, 3, 7, 0, true),
    (17, 8, 1, 8, 1, 0, true),
    (65, 33, 129, 36, 130, 2, false),
    (19, 200, 33, 200, 33, 0, true),
    (7, 260, 97, 260, 97, 0, true),
    (1, 1000, 130, 1000, 130, 0, false),
    (129, 516, 65, 520, 65, 0, true),
];

/// Odd shapes at the model's K and outputs, on the GPU only (the Host's model would take minutes
/// on them): rows past a multiple of every tile's (64, and 16 for the base), 80 outputs (a
/// partial n tile of every variant), 1,536 outputs, K = 512, 1,536 and 2,048, a strided and an
/// unaligned x.
const ODD_LARGE: [(usize, usize, usize, usize, usize, usize, bool); 4] = [
    (130, 512, 1536, 512, 1536, 0, true),
    (70, 2048, 80, 2052, 80, 1, true),
    (1001, 1536, 80, 1536, 83, 0, false),
    (333, 2048, 1536, 2048, 1536, 0, true),
];

type Case = (usize, usize, usize, usize, usize, usize, bool);

/// Every case: the model's shapes at `rows` (packed, with a bias), then [`ODD`].
fn cases(rows: &[usize]) -> Vec<Case> {
    let mut v: Vec<Case> = rows
        .iter()
        .flat_map(|&m| MODEL.map(|(k, o)| (m, k, o, k, o, 0, true)))
        .collect();
    v.extend(ODD);
    v
}

/// Runs variant `v` over one case on `be` (operands from fixed seeds); returns y's whole
/// buffer, NaN where nothing may be written.
fn run(be: &Arc<dyn Backend>, v: &'static Tf32Variant, case: Case, f: Option<Act>) -> Vec<f32> {
    let (rows, k, out, ldx, ldy, off, bias) = case;
    let up = |d: &[f32]| be.alloc_from(d, AllocKind::Other).unwrap();
    let xb = up(&common::data(61, off + rows * ldx));
    let wb = up(&common::data(62, out * k));
    let bb = up(&common::data(63, out));
    let yb = up(&vec![f32::NAN; rows * ldy]);
    let xt = Tensor::of(&xb).unwrap().narrow(0, off, rows * ldx).unwrap();
    let xt = xt.view(&[rows, ldx]).unwrap().narrow(1, 0, k).unwrap();
    let wt = Tensor::of(&wb).unwrap().view(&[out, k]).unwrap();
    let yt = Tensor::of(&yb).unwrap().view(&[rows, ldy]).unwrap();
    let yt = yt.narrow(1, 0, out).unwrap();
    let bt = bias.then(|| Tensor::of(&bb).unwrap());
    let cx = Ctx::new(be.as_ref(), None);
    ops::linear_tf32x3_with(&cx, v, wt, bt, xt, yt, f).unwrap();
    be.synchronize().unwrap();
    be.download(yb.ptr(), rows * ldy).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every tile variant equals `gemm.linear_tf32x3` bit for bit on every case (gaps between rows
/// of y stay NaN in both): so `ops::linear_tf32x3`, whichever variant `pick` chooses, does.
fn tiles_equal_linear_tf32x3_bit_for_bit(be: Arc<dyn Backend>) {
    // The Host runs the twin's model for every variant (its plumbing is what is checked
    // there); the model's shapes at 1,600 rows only on the GPU.
    let cuda = be.kind() == BackendKind::Cuda;
    let rows: &[usize] = if cuda {
        &[1, 7, 112, 224, 1600, 1650, 1792]
    } else {
        &[1]
    };
    let large: &[Case] = if cuda { &ODD_LARGE } else { &[] };
    let mut n = 0;
    for case in cases(rows).into_iter().chain(large.iter().copied()) {
        let (_, _, out, _, ldy, _, _) = case;
        let want = bits(&run(&be, &BASE, case, None));
        for (r, row) in want.chunks(ldy).enumerate() {
            for (o, y) in row.iter().enumerate() {
                assert_eq!(
                    f32::from_bits(*y).is_nan(),
                    o >= out,
                    "{case:?}: base at ({r}, {o})"
                );
            }
        }
        for v in tf32_tiles::TILES {
            let got = bits(&run(&be, v, case, None));
            if let Some(e) = (0..want.len()).find(|&e| got[e] != want[e]) {
                panic!(
                    "{} {case:?}: ({}, {}) is {:e}, gemm.linear_tf32x3 gives {:e}",
                    v.kernel.name,
                    e / ldy,
                    e % ldy,
                    f32::from_bits(got[e]),
                    f32::from_bits(want[e])
                );
            }
            n += 1;
        }
    }
    // A fused activation: the same bits on every variant.
    for case in [
        (112, 512, 2048, 512, 2048, 0, true),
        (37, 100, 70, 103, 71, 1, true),
        (130, 100, 130, 103, 131, 1, true),
    ] {
        let want = bits(&run(&be, &BASE, case, Some(Act::Mish)));
        for v in tf32_tiles::TILES {
            assert!(
                bits(&run(&be, v, case, Some(Act::Mish))) == want,
                "{} {case:?}: fused Mish differs from gemm.linear_tf32x3's",
                v.kernel.name
            );
        }
    }
    println!(
        "tf32 tiles ({}): {n} launches of {} variants bit-equal to gemm.linear_tf32x3",
        be.device_name(),
        tf32_tiles::TILES.len()
    );
}

both!(tiles_equal_linear_tf32x3_bit_for_bit);

/// M-slicing invariance across variants: for every variant and the base, the rows of a window
/// of x (any start, any length) equal the same rows of the base's launch over all 8 × 112 rows,
/// bit for bit, at the full model's shapes and a tail, aligned and not. Only the GPU runs the
/// tensor-core kernels (the Host's model computes rows one by one), so a CUDA test only.
#[test]
fn batch_invariant_tf32_tiles_row_windows() {
    let Some(be) = common::cuda() else {
        println!(
            "SKIP (host): the M-slicing invariance of the 3xTF32 tiles is a property of the \
             tensor-core kernels; the Host runs a model of them"
        );
        return;
    };
    assert_eq!(be.kind(), BackendKind::Cuda);
    let total = 8 * 112;
    let variants: Vec<&'static Tf32Variant> = std::iter::once(&BASE)
        .chain(tf32_tiles::TILES.iter().copied())
        .collect();
    for (k, out, ldx, off) in [
        (512, 1536, 512, 0),
        (2048, 512, 2048, 0),
        (1536, 512, 1536, 0),
        (100, 70, 103, 1),
    ] {
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
        let xb = up(&common::data(71, off + total * ldx));
        let wb = up(&common::data(72, out * k));
        let bb = up(&common::data(73, out));
        let w = Tensor::of(&wb).unwrap().view(&[out, k]).unwrap();
        let cx = Ctx::new(be.as_ref(), None);
        let rows = |v: &'static Tf32Variant, start: usize, len: usize| -> Vec<u32> {
            let yb = up(&vec![f32::NAN; len * out]);
            let x = Tensor::of(&xb)
                .unwrap()
                .narrow(0, off, total * ldx)
                .unwrap();
            let x = x.view(&[total, ldx]).unwrap().narrow(1, 0, k).unwrap();
            let x = x.rows(start, len).unwrap();
            let y = Tensor::of(&yb).unwrap().view(&[len, out]).unwrap();
            let b = Some(Tensor::of(&bb).unwrap());
            ops::linear_tf32x3_with(&cx, v, w, b, x, y, None).unwrap();
            be.synchronize().unwrap();
            bits(&be.download::<f32>(yb.ptr(), len * out).unwrap())
        };
        let all = rows(&BASE, 0, total);
        for &v in &variants {
            for (start, len) in [
                (0, total),
                (0, 112),
                (112, 112),
                (5, 37),
                (337, 112),
                (0, 1),
                (895, 1),
            ] {
                assert!(
                    rows(v, start, len) == all[start * out..(start + len) * out],
                    "{} {k} → {out}: rows {start}..{} differ from the same rows of \
                     gemm.linear_tf32x3 over {total}",
                    v.kernel.name,
                    start + len
                );
            }
        }
    }
    println!(
        "batch-invariant ({}): every 3xTF32 variant's row windows equal the rows of one launch",
        be.device_name()
    );
}
