//! The `linear` op's `gemm.linear_*` kernels on CUDA against their host twin, bit for bit, over
//! every tile variant and a spread of shapes: the full model's, the tiny model's, tails in rows,
//! outputs and k (not multiples of the tiles, of 32 or of 4), leading dimensions above the row
//! width and below it (overlapping convolution windows), operands at addresses that are not
//! 16-byte aligned (the kernels' scalar-load path), with and without a bias. The output
//! buffers start as NaN and are compared whole, gaps between rows included, so a kernel writing
//! outside its outputs fails too.
//!
//! Without a GPU the test prints its skip reason (and fails under `DCC_REQUIRE_GPU=1`).

mod common;

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend};
use dcc_runtime::kernels::gemm::{VARIANTS, Variant, pick};
use dcc_runtime::ops::{self, Act, Ctx, GemmPath, OpError, Tensor};

/// One linear launch: `rows × in → out`, x rows at stride `ldx` (a `windows(taps)` view when
/// `taps > 1`: ldx = in / taps), y rows at stride `ldy`, x and w starting `off` floats into their
/// buffers (x's and y's buffers hold `rows` whole strides).
#[derive(Clone, Copy, Debug)]
struct Case {
    rows: usize,
    k: usize,
    out: usize,
    ldx: usize,
    ldy: usize,
    off: usize,
    taps: usize,
    bias: bool,
    /// A fused activation.
    act: Option<Act>,
}

fn cases() -> Vec<Case> {
    let c = |rows, k, out, ldx, ldy, off, bias| Case {
        rows,
        k,
        out,
        ldx,
        ldy,
        off,
        taps: 1,
        bias,
        act: None,
    };
    let mut v = vec![
        // The full model at one session (112 rows) and eight (896).
        c(112, 512, 1536, 512, 1536, 0, true),
        c(112, 512, 512, 512, 512, 0, true),
        c(112, 512, 2048, 512, 2048, 0, true),
        c(112, 2048, 512, 2048, 512, 0, true),
        c(112, 1536, 512, 1536, 512, 0, true),
        c(112, 80, 512, 80, 512, 0, true),
        c(896, 512, 512, 512, 512, 0, true),
        c(1, 512, 3072, 512, 3072, 0, true),
        // The tiny model.
        c(112, 64, 128, 64, 128, 0, true),
        c(112, 128, 64, 128, 64, 0, false),
        // Tails, strides, misaligned operands.
        c(37, 100, 70, 103, 71, 1, true),
        c(33, 37, 33, 40, 35, 3, false),
        c(5, 3, 7, 3, 7, 0, true),
        c(9, 45, 65, 45, 65, 2, true),
        c(17, 4, 1, 4, 1, 0, true),
        c(65, 33, 129, 36, 130, 0, false),
    ];
    // The conv's overlapping windows: 3 taps of 512 channels over 58 frames (ldx = 512).
    v.push(Case {
        rows: 56,
        k: 3 * 512,
        out: 512,
        ldx: 512,
        ldy: 512,
        off: 0,
        taps: 3,
        bias: true,
        act: None,
    });
    // Fused activations: the DiT MLP's GELU-tanh at the full shape, each other one on a tail.
    let mut act = |case: Case, f: Act| {
        v.push(Case {
            act: Some(f),
            ..case
        })
    };
    act(c(112, 512, 2048, 512, 2048, 0, true), Act::GeluTanh);
    act(c(1, 80, 512, 80, 512, 0, true), Act::Silu);
    act(c(37, 100, 70, 103, 71, 1, true), Act::Mish);
    act(c(33, 37, 33, 40, 35, 3, false), Act::LeakyRelu(0.01));
    act(c(9, 45, 65, 45, 65, 2, true), Act::Scale(22.627417));
    // Pseudo-random shapes.
    let r = common::data(77, 60);
    for p in r.chunks(5) {
        let u = |x: f32, n: usize| ((x + 1.0) * 0.5 * n as f32) as usize + 1;
        let (rows, k, out) = (u(p[0], 130), u(p[1], 300), u(p[2], 200));
        let ldx = k + u(p[3], 8) - 1;
        v.push(c(
            rows,
            k,
            out,
            ldx,
            out + u(p[4], 4) - 1,
            u(p[3], 4) - 1,
            p[4] > 0.0,
        ));
    }
    v
}

/// Runs `case` with variant `v` on `be`; returns y's whole buffer (as bits).
fn run(be: &Arc<dyn Backend>, case: &Case, v: &'static Variant) -> Result<Vec<u32>, OpError> {
    let Case {
        rows,
        k,
        out,
        ldx,
        ldy,
        off,
        taps,
        bias,
        act,
    } = *case;
    let x_elems = if taps > 1 {
        (rows + taps - 1) * ldx
    } else {
        rows * ldx
    };
    let y_elems = rows * ldy;
    let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
    let xb = up(&common::data(1, off + x_elems));
    let wb = up(&common::data(2, off + out * k));
    let bb = up(&common::data(3, out));
    let yb = up(&vec![f32::NAN; y_elems]);
    let xt = Tensor::of(&xb)?.narrow(0, off, x_elems)?;
    let x = if taps > 1 {
        xt.view(&[rows + taps - 1, ldx])?.windows(taps)?
    } else {
        xt.view(&[rows, ldx])?.narrow(1, 0, k)?
    };
    let w = Tensor::of(&wb)?.narrow(0, off, out * k)?.view(&[out, k])?;
    let y = Tensor::of(&yb)?.view(&[rows, ldy])?.narrow(1, 0, out)?;
    let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Invariant);
    let b = if bias { Some(Tensor::of(&bb)?) } else { None };
    ops::linear_with(&cx, v, w, b, x, y, act)?;
    be.synchronize().unwrap();
    Ok(be.download(yb.ptr(), y_elems).unwrap())
}

#[test]
fn cuda_linear_kernels_match_the_host_twin() {
    let Some(cuda) = common::cuda() else { return };
    let host = common::host();
    let mut bad = Vec::new();
    let mut n = 0;
    for case in cases() {
        let want = run(&host, &case, pick(case.rows, case.out)).unwrap();
        for v in VARIANTS {
            n += 1;
            let got =
                run(&cuda, &case, v).unwrap_or_else(|e| panic!("{case:?} {}: {e}", v.kernel.name));
            let diff = got.iter().zip(&want).filter(|(a, b)| a != b).count();
            if diff == 0 {
                println!("bit-equal  {} {case:?}", v.kernel.name);
            } else {
                let i = (0..got.len()).find(|&i| got[i] != want[i]).unwrap_or(0);
                let msg = format!(
                    "{} {case:?}: {diff} of {} words differ, first at {i}: cuda {:e} vs host {:e}",
                    v.kernel.name,
                    got.len(),
                    f32::from_bits(got[i]),
                    f32::from_bits(want[i])
                );
                println!("MISMATCH   {msg}");
                bad.push(msg);
            }
        }
    }
    println!(
        "{}: {} of {n} linear launches bit-equal to the host twin",
        cuda.device_name(),
        n - bad.len()
    );
    assert!(bad.is_empty(), "{} differ:\n{}", bad.len(), bad.join("\n"));
}

/// On Host: every case runs through every variant with the same bits (the variants only spread
/// the work), y's gaps between rows stay untouched, and each output is the k-grouped dot
/// product of the twin (`gemm::dot`) plus the bias. Full-model shapes are left to the CUDA test.
#[test]
fn host_linear_variants_agree_and_write_only_outputs() {
    let host = common::host();
    for case in cases()
        .into_iter()
        .filter(|c| c.rows * c.k * c.out < 8_000_000)
    {
        let first = run(&host, &case, VARIANTS[0]).unwrap();
        for v in &VARIANTS[1..] {
            assert!(
                run(&host, &case, v).unwrap() == first,
                "{} {case:?}",
                v.kernel.name
            );
        }
        let (x, w, b) = (
            common::data(1, case.off + (case.rows + case.taps - 1) * case.ldx),
            common::data(2, case.off + case.out * case.k),
            common::data(3, case.out),
        );
        for r in 0..case.rows {
            for o in 0..case.ldy {
                let got = f32::from_bits(first[r * case.ldy + o]);
                if o >= case.out {
                    assert!(got.is_nan(), "{case:?}: gap ({r}, {o}) written");
                    continue;
                }
                let xr = &x[case.off + r * case.ldx..][..case.k];
                let wr = &w[case.off + o * case.k..][..case.k];
                let mut want = dcc_runtime::kernels::gemm::dot(xr, wr, case.k);
                if case.bias {
                    want += b[o];
                }
                if let Some(f) = case.act {
                    let mut one = [want];
                    let (op, alpha) = act_code(f);
                    dcc_runtime::kernels::act::act_inplace(&mut one, op, alpha).unwrap();
                    want = one[0];
                }
                assert_eq!(got.to_bits(), want.to_bits(), "{case:?} ({r}, {o})");
            }
        }
    }
}

/// `Act`'s `act.apply` op code and alpha.
fn act_code(f: Act) -> (i32, f32) {
    use dcc_runtime::kernels::act as a;
    match f {
        Act::Silu => (a::SILU, 0.0),
        Act::Mish => (a::MISH, 0.0),
        Act::GeluTanh => (a::GELU_TANH, 0.0),
        Act::LeakyRelu(s) => (a::LEAKY_RELU, s),
        Act::Scale(s) => (a::SCALE, s),
    }
}

/// On CUDA, a linear with a fused activation gives the bits of the linear followed by
/// `ops::act`, for every activation, at the DiT MLP's shape and a tail.
#[test]
fn cuda_fused_activation_equals_linear_then_act() {
    let Some(cuda) = common::cuda() else { return };
    let acts = [
        Act::Silu,
        Act::Mish,
        Act::GeluTanh,
        Act::LeakyRelu(0.01),
        Act::Scale(22.627417),
    ];
    for (rows, k, out) in [(112, 512, 2048), (37, 100, 70)] {
        for f in acts {
            let case = Case {
                rows,
                k,
                out,
                ldx: k,
                ldy: out,
                off: 0,
                taps: 1,
                bias: true,
                act: Some(f),
            };
            let fused = run(&cuda, &case, pick(rows, out)).unwrap();
            let plain = run_then_act(&cuda, &case, f).unwrap();
            assert!(
                fused == plain,
                "{f:?} {case:?}: fused differs from linear + act"
            );
        }
    }
    println!(
        "{}: fused activations bit-equal to linear + act",
        cuda.device_name()
    );
}

/// `case` without its activation, then `ops::act(f)` over y (packed cases only).
fn run_then_act(be: &Arc<dyn Backend>, case: &Case, f: Act) -> Result<Vec<u32>, OpError> {
    let plain = Case { act: None, ..*case };
    let y = run(be, &plain, pick(case.rows, case.out))?;
    let yb = be
        .alloc_from(&y, AllocKind::Other)
        .map_err(|error| OpError::Backend {
            op: "upload",
            error,
        })?;
    let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Invariant);
    ops::act(&cx, Tensor::of(&yb)?, f)?;
    be.synchronize().unwrap();
    Ok(be.download(yb.ptr(), y.len()).unwrap())
}

/// M-slicing invariance of every variant: the rows of a window of x (any start, any length,
/// so the CTA row tiles fall elsewhere) give the bits of the same rows in one launch over all of
/// x, on Host and on CUDA, with operands at aligned and unaligned addresses. Shapes: a tail on
/// Host; on CUDA also the full model's 2048 → 512 and 512 → 1536.
fn batch_invariant_linear_row_windows(be: Arc<dyn Backend>) {
    let mut shapes = vec![(100, 70, 103, 0), (64, 40, 64, 1)];
    if be.kind() == dcc_runtime::backend::BackendKind::Cuda {
        shapes.extend([(2048, 512, 2048, 0), (512, 1536, 512, 0)]);
    }
    let total = 300;
    for (k, out, ldx, off) in shapes {
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other).unwrap();
        let xb = up(&common::data(31, off + total * ldx));
        let wb = up(&common::data(32, off + out * k));
        let bb = up(&common::data(33, out));
        let w = Tensor::of(&wb)
            .unwrap()
            .narrow(0, off, out * k)
            .unwrap()
            .view(&[out, k])
            .unwrap();
        let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Invariant);
        // y for rows [start, start + len) of x, with variant v.
        let rows = |v: &'static Variant, start: usize, len: usize| -> Vec<u32> {
            let yb = up(&vec![f32::NAN; len * out]);
            let x = Tensor::of(&xb)
                .unwrap()
                .narrow(0, off, total * ldx)
                .unwrap()
                .view(&[total, ldx])
                .unwrap()
                .narrow(1, 0, k)
                .unwrap()
                .rows(start, len)
                .unwrap();
            let y = Tensor::of(&yb).unwrap().view(&[len, out]).unwrap();
            let b = Some(Tensor::of(&bb).unwrap());
            ops::linear_with(&cx, v, w, b, x, y, None).unwrap();
            be.synchronize().unwrap();
            be.download(yb.ptr(), len * out).unwrap()
        };
        for v in VARIANTS {
            let all = rows(v, 0, total);
            for (start, len) in [(0, 1), (5, 37), (37, 112), (150, 150), (299, 1)] {
                assert!(
                    rows(v, start, len) == all[start * out..(start + len) * out],
                    "{} {k} → {out}: rows {start}..{} alone differ from the same rows of {total}",
                    v.kernel.name,
                    start + len
                );
            }
        }
    }
    println!(
        "batch-invariant ({}): every linear variant's row windows equal the rows of one launch",
        be.device_name()
    );
}

both!(batch_invariant_linear_row_windows);
