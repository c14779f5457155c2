//! Batch invariance of every op family the Token2Wav model uses: a row's (a session's) result
//! must not depend on how many rows (sessions) share the launch, so batching sessions later
//! cannot change a bit. Each test runs a layer on one unit — 112 rows (CFG 2 × 56 frames), or
//! one session's CFG pair of batch entries for the ops with a batch axis (attention, caches,
//! convolution contexts, the carry) — then on 8 units with that unit at positions 0, 3 and 7
//! among random ones, and compares the unit's slice of every buffer bit for bit
//! (`batch_invariant/harness.rs`). On Host always; on CUDA when a GPU exists (otherwise the CUDA
//! variant prints `SKIP (cuda): ...`; `DCC_REQUIRE_GPU=1` makes that a failure).
//!
//! Covered: `linear` (the `gemm.linear_*` kernels; 112 and 896 rows pick different tile
//! variants, which must not matter) and `linear_act`, `layer_norm`, `layer_norm_modulate`,
//! `layer_norm_modulate_f16`, `gated_norm_modulate`, `gated_norm_modulate_f16`,
//! `l2_normalize`, `qk_norm_pack`, `act` (every activation), `add`, `cfg_euler`, `attention`,
//! `kv_pack`, `conv_im2col`, `layer_norm_act_im2col`, `copy`, `repeat_rows`, `copy_batched` (of
//! floats and of binary16 values), `transpose`, `embedding`, `rel_pos_attention` (one session a
//! unit: its queries and cache, the positions shared) and the carry's `write_back` (both of its
//! paths). Not covered, for
//! want of a batch axis: `timestep_embedding` (one vector).
//! Host shapes are the tiny model's (64/128 wide, plus tails); CUDA adds the full model's.

mod common;
#[path = "batch_invariant/harness.rs"]
mod harness;
#[path = "batch_invariant/layers.rs"]
mod layers;

use std::sync::Arc;

use dcc_runtime::backend::{Backend, BackendKind};
use dcc_runtime::ops::{self, Tensor};

use harness::{Layer, check, per_unit};

/// Rows of one unit of the row-wise ops: CFG 2 × 56 frames.
pub const ROWS: usize = 112;

fn full(be: &Arc<dyn Backend>) -> bool {
    be.kind() == BackendKind::Cuda
}

/// `(in, out, ldx)` of the linear shapes: the tiny model's and tails on Host; on CUDA also the
/// full model's (512 → 1536 / 512 / 2048, 2048 → 512, the 3-tap conv's 1536 → 512, 80 → 512).
fn linear_shapes(be: &Arc<dyn Backend>) -> Vec<(usize, usize, usize)> {
    let mut s = vec![(64, 128, 64), (128, 64, 128), (100, 70, 103), (80, 64, 80)];
    if full(be) {
        s.extend([
            (512, 1536, 512),
            (512, 512, 512),
            (512, 2048, 512),
            (2048, 512, 2048),
            (1536, 512, 1536),
            (80, 512, 80),
        ]);
    }
    s
}

fn batch_invariant_linear(be: Arc<dyn Backend>) {
    for (i, o, ldx) in linear_shapes(&be) {
        for bias in [true, false] {
            let run = move |cx: &ops::Ctx<'_>,
                            b: &[dcc_runtime::DeviceBuffer],
                            s: &[dcc_runtime::DeviceBuffer],
                            units: usize| {
                let r = units * ROWS;
                let x = Tensor::of(&b[0])?.view(&[r, ldx])?.narrow(1, 0, i)?;
                let y = Tensor::of(&b[1])?.view(&[r, o])?;
                let w = Tensor::<f32>::of(&s[0])?.view(&[o, i])?;
                let bt = if bias { Some(Tensor::of(&s[1])?) } else { None };
                ops::linear(cx, w, bt, x, y)
            };
            check(
                &be,
                &Layer {
                    name: format!("linear {i} → {o} (ldx {ldx}, bias {bias})"),
                    batched: vec![per_unit(ROWS * ldx), per_unit(ROWS * o)],
                    shared: vec![common::data(11, o * i), common::data(12, o)],
                    run: &run,
                },
            );
        }
    }
}

/// The linear with a fused activation (the DiT MLP's fc1: GELU-tanh).
fn batch_invariant_linear_act(be: Arc<dyn Backend>) {
    let (i, o) = if full(&be) { (512, 2048) } else { (64, 256) };
    let run = move |cx: &ops::Ctx<'_>,
                    b: &[dcc_runtime::DeviceBuffer],
                    s: &[dcc_runtime::DeviceBuffer],
                    units: usize| {
        let r = units * ROWS;
        let (x, y) = (
            Tensor::of(&b[0])?.view(&[r, i])?,
            Tensor::of(&b[1])?.view(&[r, o])?,
        );
        let (w, bias) = (Tensor::<f32>::of(&s[0])?.view(&[o, i])?, Tensor::of(&s[1])?);
        ops::linear_act(cx, w, Some(bias), x, y, ops::Act::GeluTanh)
    };
    check(
        &be,
        &Layer {
            name: format!("linear_act GeluTanh {i} → {o}"),
            batched: vec![per_unit(ROWS * i), per_unit(ROWS * o)],
            shared: vec![common::data(13, o * i), common::data(14, o)],
            run: &run,
        },
    );
}

both!(batch_invariant_linear, batch_invariant_linear_act);

/// Every tile variant of the linear kernel, chosen explicitly, at one unit and at 8: the same
/// bits as the variant `pick` chooses alone (so no variant and no row count changes a bit).
fn batch_invariant_linear_every_variant(be: Arc<dyn Backend>) {
    let (i, o) = if full(&be) { (512, 512) } else { (72, 40) };
    let x = common::data(21, UNITS_ROWS * i);
    let w = common::data(22, o * i);
    let bias = common::data(23, o);
    let up = |v: &[f32]| be.alloc_from(v, dcc_runtime::AllocKind::Other).unwrap();
    let (xb, wb, bb) = (up(&x), up(&w), up(&bias));
    let cx = ops::Ctx::new(be.as_ref(), None).with_gemm(ops::GemmPath::Invariant);
    let mut reference: Option<Vec<u32>> = None;
    for rows in [ROWS, UNITS_ROWS] {
        for v in dcc_runtime::kernels::gemm::VARIANTS {
            let yb = up(&vec![f32::NAN; rows * o]);
            let xt = Tensor::of(&xb).unwrap().view(&[rows, i]).unwrap();
            let wt = Tensor::of(&wb).unwrap().view(&[o, i]).unwrap();
            let yt = Tensor::of(&yb).unwrap().view(&[rows, o]).unwrap();
            ops::linear_with(&cx, v, wt, Some(Tensor::of(&bb).unwrap()), xt, yt, None).unwrap();
            let got: Vec<u32> = be.download(yb.ptr(), ROWS * o).unwrap();
            match &reference {
                None => reference = Some(got),
                Some(r) => assert!(
                    r == &got,
                    "{} at {rows} rows differs from the first variant at {ROWS} rows",
                    v.kernel.name
                ),
            }
        }
    }
    println!(
        "batch-invariant ({}): every linear variant at {ROWS} and {UNITS_ROWS} rows gives the same bits",
        be.device_name()
    );
}

/// Rows of the batched run.
const UNITS_ROWS: usize = harness::UNITS * ROWS;

both!(batch_invariant_linear_every_variant);

use layers::{
    batch_invariant_attention, batch_invariant_carry, batch_invariant_conv, batch_invariant_copies,
    batch_invariant_elementwise, batch_invariant_norms,
};

both!(
    batch_invariant_norms,
    batch_invariant_elementwise,
    batch_invariant_attention,
    batch_invariant_conv,
    batch_invariant_copies,
    batch_invariant_carry,
);

/// The check can fail: a "layer" whose rows read the rows of the next unit (`x[r] += y[r + 112]`
/// over all but the last unit) is caught.
#[test]
#[should_panic(expected = "differ from the unit alone")]
fn batch_invariant_check_catches_a_dependent_layer() {
    let be = common::host();
    let d = 8;
    let run = |cx: &ops::Ctx<'_>,
               b: &[dcc_runtime::DeviceBuffer],
               _: &[dcc_runtime::DeviceBuffer],
               units: usize| {
        let r = units * ROWS;
        let (x, y) = (
            Tensor::of(&b[0])?.view(&[r, d])?,
            Tensor::of(&b[1])?.view(&[r, d])?,
        );
        let shift = usize::from(units > 1) * ROWS;
        ops::add(cx, x.rows(0, r - shift)?, y.rows(shift, r - shift)?)
    };
    check(
        &be,
        &Layer {
            name: "reads the next unit".into(),
            batched: vec![per_unit(ROWS * d), per_unit(ROWS * d)],
            shared: vec![],
            run: &run,
        },
    );
}
