//! The half-precision ops (`ops::round_f16`, `round_f16_shifted`, `gated_add_f16`,
//! `cfg_euler_f16`, `timestep_embedding_f16`) through a backend against the kernels' slice functions, bit for
//! bit: on Host always, on CUDA where a GPU exists (`SKIP (cuda): ...` otherwise;
//! `DCC_REQUIRE_GPU=1` makes that a failure). The kernels themselves are compared with their
//! twins case by case in `kernels.rs`; this checks the ops' views and arguments, and overflow.

mod common;

use std::sync::Arc;

use common::data;
use dcc_runtime::backend::{AllocKind, Backend};
use dcc_runtime::kernels::elementwise as ew;
use dcc_runtime::ops::{self, Ctx, Tensor};

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn half_ops_match_slice_functions(be: Arc<dyn Backend>) {
    let cx = Ctx::new(be.as_ref(), None);
    // values across the f16 range: overflow (±7e4 → ±inf), normal, subnormal, zero, signs
    let mut x: Vec<f32> = data(1, 4096).iter().map(|v| v * 7e4).collect();
    x.extend(data(2, 4096).iter().map(|v| v * 1e-6));
    x.extend(data(3, 4096));
    x.extend([0.0, -0.0, 65504.0, 65519.99, 65520.0, f32::INFINITY]);
    let buf = be.alloc_from(&x, AllocKind::Other).unwrap();
    ops::round_f16(&cx, Tensor::of(&buf).unwrap()).unwrap();
    let mut want = x.clone();
    ew::round_f16(&mut want);
    be.synchronize().unwrap();
    let got: Vec<f32> = be.download(buf.ptr(), x.len()).unwrap();
    assert_eq!(bits(&got), bits(&want), "round_f16");
    assert!(
        got.iter().any(|v| v.is_infinite()) && got.iter().any(|v| *v != 0.0 && v.abs() < 6.1e-5)
    );

    // strided rows: every third row of 16 × 64 (the modulations' scale rows), the others kept
    let s: Vec<f32> = data(4, 16 * 64).iter().map(|v| v * 0.3).collect();
    let buf = be.alloc_from(&s, AllocKind::Other).unwrap();
    let every_third = Tensor::of(&buf).unwrap().view(&[16, 64]).unwrap();
    let rows = every_third.narrow(0, 1, 15).unwrap();
    let rows = rows.view(&[5, 3, 64]).unwrap().index(1, 0).unwrap();
    ops::round_f16_shifted(&cx, rows, 1.0).unwrap();
    let mut want = s.clone();
    for r in (1..16).step_by(3) {
        ew::round_f16_shifted(&mut want[r * 64..(r + 1) * 64], 1.0);
    }
    be.synchronize().unwrap();
    let got: Vec<f32> = be.download(buf.ptr(), s.len()).unwrap();
    assert_eq!(bits(&got), bits(&want), "round_f16_shifted");
    assert_ne!(bits(&got), bits(&s));
    // a view that is neither packed nor rows with unit column stride is refused
    let t = Tensor::of(&buf)
        .unwrap()
        .view(&[16, 64])
        .unwrap()
        .transpose(0, 1);
    assert!(ops::round_f16(&cx, t.unwrap()).is_err());

    let (x, g, y) = (data(7, 6 * 32), data(8, 32), data(9, 6 * 32));
    let (xb, gb, yb) = (
        be.alloc_from(&x, AllocKind::Other).unwrap(),
        be.alloc_from(&g, AllocKind::Other).unwrap(),
        be.alloc_from(&y, AllocKind::Other).unwrap(),
    );
    let v = |b| Tensor::of(b).unwrap();
    let xv = v(&xb).view(&[6, 32]).unwrap();
    ops::gated_add_f16(&cx, xv, v(&gb), v(&yb).view(&[6, 32]).unwrap()).unwrap();
    let mut want = x.clone();
    ew::gated_add_f16(6, 32, &mut want, &g, &y);
    be.synchronize().unwrap();
    let got: Vec<f32> = be.download(xb.ptr(), x.len()).unwrap();
    assert_eq!(bits(&got), bits(&want), "gated_add_f16");

    // three sessions' rows in one launch, each session's step its own
    let (s, m) = (3, 80 * 50);
    let n = s * m;
    let (xs, v) = (data(5, n), data(6, 2 * n));
    let (xb, vb) = (
        be.alloc_from(&xs, AllocKind::Other).unwrap(),
        be.alloc_from(&v, AllocKind::Other).unwrap(),
    );
    let xt = Tensor::of(&xb).unwrap().view(&[s, 50, 80]).unwrap();
    let vt = Tensor::of(&vb).unwrap().view(&[s, 2, 50, 80]).unwrap();
    ops::cfg_euler_f16(&cx, xt, vt, 0.7, 0.0913).unwrap();
    let mut want = xs.clone();
    for (x, v) in want.chunks_mut(m).zip(v.chunks(2 * m)) {
        ew::cfg_euler_step_f16(x, &v[..m], &v[m..], 0.7, 0.0913);
    }
    be.synchronize().unwrap();
    let got: Vec<f32> = be.download(xb.ptr(), n).unwrap();
    assert_eq!(bits(&got), bits(&want), "cfg_euler_f16");

    let out = be.alloc_from(&vec![0f32; 256], AllocKind::Other).unwrap();
    ops::timestep_embedding_f16(&cx, Tensor::of(&out).unwrap(), 0.0123, 1000.0, 1e4).unwrap();
    let mut want = vec![0f32; 256];
    ew::timestep_embedding_f16(0.0123, 1000.0, 256, 1e4, &mut want);
    be.synchronize().unwrap();
    let got: Vec<f32> = be.download(out.ptr(), 256).unwrap();
    assert_eq!(bits(&got), bits(&want), "timestep_embedding_f16");
    // the rounded features differ from the float32 ones (the cast point is real)
    let mut f32s = vec![0f32; 256];
    dcc_runtime::kernels::embed::timestep_embedding(0.0123, 1000.0, 256, 1e4, &mut f32s);
    assert_ne!(bits(&got), bits(&f32s));
}

both!(half_ops_match_slice_functions);
