//! The ops on the Host backend: results against plain loops, typed refusals, profiles and
//! capture.

use std::sync::Arc;

use super::*;
use crate::backend::{AllocKind, Backend, DeviceBuffer, host};
use crate::contract::{CacheOrder, Keep};

fn buf(be: &Arc<dyn Backend>, v: &[f32]) -> DeviceBuffer {
    be.alloc_from(v, AllocKind::Other).unwrap()
}

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

fn read(be: &Arc<dyn Backend>, b: &DeviceBuffer) -> Vec<f32> {
    be.download(b.ptr(), b.bytes() / 4).unwrap()
}

#[test]
fn copies_concatenate_broadcast_window_and_repeat() {
    let be = host();
    let cx = Ctx::new(be.as_ref(), None);
    let src = buf(&be, &seq(12)); // [4, 3]
    let dst = buf(&be, &[0.0; 24]); // [4, 6]
    let (s, d) = (Tensor::of(&src).unwrap(), Tensor::of(&dst).unwrap());
    let s43 = s.view(&[4, 3]).unwrap();
    let d46 = d.view(&[4, 6]).unwrap();
    // concatenation into columns 3..6
    copy(&cx, d46.narrow(1, 3, 3).unwrap(), s43).unwrap();
    // row 1 broadcast into columns 0..3
    let row = s43.index(0, 1).unwrap().broadcast(0, 4).unwrap();
    copy(&cx, d46.narrow(1, 0, 3).unwrap(), row).unwrap();
    let want: Vec<f32> = (0..4)
        .flat_map(|r| {
            [
                3.0,
                4.0,
                5.0,
                3.0 * r as f32,
                3.0 * r as f32 + 1.0,
                3.0 * r as f32 + 2.0,
            ]
        })
        .collect();
    assert_eq!(read(&be, &dst), want);
    // im2col rows of a kernel-2 conv over [4, 3]: [3, 6] overlapping windows
    let col = buf(&be, &[0.0; 18]);
    let c = Tensor::of(&col).unwrap().view(&[3, 6]).unwrap();
    copy(&cx, c, s43.windows(2).unwrap()).unwrap();
    let want: Vec<f32> = (0..3)
        .flat_map(|r| (3 * r..3 * r + 6).map(|v| v as f32))
        .collect();
    assert_eq!(read(&be, &col), want);
    // nearest upsampling ×2
    let up = buf(&be, &[0.0; 24]);
    repeat_rows(&cx, Tensor::of(&up).unwrap().view(&[8, 3]).unwrap(), s43, 2).unwrap();
    let want: Vec<f32> = (0..8)
        .flat_map(|r| (0..3).map(move |c| (3 * (r / 2) + c) as f32))
        .collect();
    assert_eq!(read(&be, &up), want);
    // shapes that do not match are refused before anything runs
    let e = copy(&cx, d46, s43).unwrap_err();
    assert!(
        matches!(
            e,
            OpError::Shape {
                op: "copy",
                view: "src",
                ..
            }
        ),
        "{e}"
    );
    assert!(repeat_rows(&cx, d46, s43, 0).is_err());
    // a copy onto itself is refused
    let e = copy(
        &cx,
        d46.narrow(1, 0, 3).unwrap(),
        d46.narrow(1, 1, 3).unwrap(),
    )
    .unwrap_err();
    assert!(matches!(e, OpError::Overlap { op: "copy", .. }), "{e}");
}

#[test]
fn batched_copies_transposes_and_memsets() {
    let be = host();
    let cx = Ctx::new(be.as_ref(), None);
    let x = buf(&be, &seq(6)); // [2, 3]
    let out = buf(&be, &[0.0; 24]);
    let xt = Tensor::of(&x).unwrap().view(&[2, 3]).unwrap();
    // [2 batches, 2 rows, 3 cols] from a batch-broadcast source into rows of 6
    let o = Tensor::of(&out).unwrap().view(&[2, 2, 6]).unwrap();
    copy_batched(&cx, o.narrow(2, 3, 3).unwrap(), xt.broadcast(0, 2).unwrap()).unwrap();
    let got = read(&be, &out);
    assert_eq!(&got[3..6], &[0.0, 1.0, 2.0]);
    assert_eq!(&got[21..24], &[3.0, 4.0, 5.0]);
    assert_eq!(got[0], 0.0);
    let t = buf(&be, &[0.0; 6]);
    transpose(&cx, Tensor::of(&t).unwrap().view(&[3, 2]).unwrap(), xt).unwrap();
    assert_eq!(read(&be, &t), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    // a batch of two [1, 3] → [3, 1] in one launch
    let tb = buf(&be, &[0.0; 6]);
    let xb = xt.view(&[2, 1, 3]).unwrap();
    transpose(&cx, Tensor::of(&tb).unwrap().view(&[2, 3, 1]).unwrap(), xb).unwrap();
    assert_eq!(read(&be, &tb), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    let e = transpose(&cx, Tensor::of(&tb).unwrap().view(&[3, 2]).unwrap(), xb).unwrap_err();
    assert!(matches!(e, OpError::Shape { .. }));
    memset(
        &cx,
        Tensor::of(&t).unwrap().view(&[4]).unwrap(),
        1.5f32.to_bits(),
    )
    .unwrap();
    assert_eq!(read(&be, &t), [1.5, 1.5, 1.5, 1.5, 2.0, 5.0]);
    let e = transpose(&cx, Tensor::of(&t).unwrap().view(&[2, 3]).unwrap(), xt).unwrap_err();
    assert!(matches!(
        e,
        OpError::Shape {
            op: "transpose",
            view: "out",
            ..
        }
    ));
    assert!(memset(&cx, o.narrow(2, 0, 3).unwrap(), 0).is_err());
}

#[test]
fn linear_norm_and_elementwise_match_plain_loops() {
    let be = host();
    let cx = Ctx::new(be.as_ref(), None);
    let (rows, i, o) = (3, 4, 2);
    let xv: Vec<f32> = (0..rows * i).map(|v| (v as f32 * 0.37).sin()).collect();
    let wv: Vec<f32> = (0..o * i).map(|v| (v as f32 * 0.11).cos()).collect();
    let bv = [0.5f32, -0.25];
    let (x, w, b, y) = (
        buf(&be, &xv),
        buf(&be, &wv),
        buf(&be, &bv),
        buf(&be, &[0.0; 6]),
    );
    let xt = Tensor::of(&x).unwrap().view(&[rows, i]).unwrap();
    let wt = Tensor::<f32>::of(&w).unwrap().view(&[o, i]).unwrap();
    let yt = Tensor::of(&y).unwrap().view(&[rows, o]).unwrap();
    linear(&cx, wt, Some(Tensor::of(&b).unwrap()), xt, yt).unwrap();
    let got = read(&be, &y);
    for r in 0..rows {
        for c in 0..o {
            let want: f32 = (0..i).map(|p| xv[r * i + p] * wv[c * i + p]).sum::<f32>() + bv[c];
            assert!((got[r * o + c] - want).abs() < 1e-5, "{r},{c}");
        }
    }
    let e = linear(&cx, wt, None, yt, xt).unwrap_err();
    assert!(
        matches!(
            e,
            OpError::Shape {
                op: "linear",
                view: "x",
                ..
            }
        ),
        "{e}"
    );
    // LayerNorm with unit gain and zero bias: zero mean, unit variance per row
    let (g, z) = (buf(&be, &[1.0; 4]), buf(&be, &[0.0; 4]));
    let n = buf(&be, &[0.0; 12]);
    let nt = Tensor::of(&n).unwrap().view(&[rows, i]).unwrap();
    layer_norm(
        &cx,
        nt,
        xt,
        Tensor::of(&g).unwrap(),
        Tensor::of(&z).unwrap(),
        1e-5,
    )
    .unwrap();
    for r in read(&be, &n).chunks(4) {
        let mean: f32 = r.iter().sum::<f32>() / 4.0;
        let var: f32 = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 4.0;
        assert!(mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-3, "{r:?}");
    }
    // elementwise: x ← 2x, x += y, guided Euler step
    let a = buf(&be, &[1.0, 2.0]);
    let at = Tensor::of(&a).unwrap();
    act(&cx, at, Act::Scale(2.0)).unwrap();
    add(&cx, at, Tensor::of(&b).unwrap()).unwrap();
    assert_eq!(read(&be, &a), [2.5, 3.75]);
    let v = buf(&be, &[1.0, 1.0, 3.0, 3.0]);
    let vt = Tensor::of(&v).unwrap().view(&[1, 2, 2]).unwrap();
    cfg_euler(&cx, at.view(&[1, 2]).unwrap(), vt, 0.5, 0.1).unwrap();
    let got = read(&be, &a);
    assert!((got[0] - (2.5 + 0.1 * (1.5 - 1.5))).abs() < 1e-6);
    assert!(matches!(add(&cx, at, at), Err(OpError::Overlap { .. })));
    assert!(cfg_euler(&cx, at, at, 0.5, 0.1).is_err());
    // the velocities of one session beside x of two: refused
    let two = at.view(&[2, 1]).unwrap();
    assert!(matches!(
        cfg_euler(&cx, two, vt.view(&[1, 2, 2]).unwrap(), 0.5, 0.1),
        Err(OpError::Shape { .. })
    ));
}

#[test]
fn attention_over_a_packed_cache_is_softmax_weighted_values() {
    let be = host();
    let cx = Ctx::new(be.as_ref(), None);
    // batch 1, 1 head, d = 2, 2 frames: keys equal, so the output is the mean of the values
    let k = buf(&be, &[1.0, 0.0, 1.0, 0.0]);
    let v = buf(&be, &[2.0, 4.0, 6.0, 8.0]);
    let cache = buf(&be, &[0.0; 12]); // cap 3
    let c = Tensor::of(&cache).unwrap().view(&[1, 1, 3, 4]).unwrap();
    let (kt, vt) = (
        Tensor::of(&k).unwrap().view(&[2, 2]).unwrap(),
        Tensor::of(&v).unwrap().view(&[2, 2]).unwrap(),
    );
    kv_pack(&cx, c, 0, kt, vt).unwrap();
    assert_eq!(
        &read(&be, &cache)[..8],
        &[1.0, 0.0, 2.0, 4.0, 1.0, 0.0, 6.0, 8.0]
    );
    let q = buf(&be, &[0.3, 0.7]);
    let out = buf(&be, &[0.0; 2]);
    let qt = Tensor::of(&q).unwrap().view(&[1, 1, 2]).unwrap();
    let ot = Tensor::of(&out).unwrap().view(&[1, 1, 2]).unwrap();
    attention(&cx, ot, qt, c, 2, 0.5).unwrap();
    let got = read(&be, &out);
    assert!(
        (got[0] - 4.0).abs() < 1e-5 && (got[1] - 6.0).abs() < 1e-5,
        "{got:?}"
    );
    assert!(matches!(
        attention(&cx, ot, qt, c, 4, 0.5),
        Err(OpError::Arg { arg: "tk", .. })
    ));
    assert!(matches!(
        kv_pack(&cx, c, 2, kt, vt),
        Err(OpError::Arg { arg: "t0", .. })
    ));
}

#[test]
fn write_back_keeps_the_declared_head_and_tail() {
    let be = host();
    let cx = Ctx::new(be.as_ref(), None);
    // 2 rows of 6 frames of 1 word; keep head 1 ‖ tail 2 (prepend storage, paper: retained 1,
    // prompt 2)
    let keep = Keep::natural(CacheOrder::Prepend, 2, 1);
    let src = buf(&be, &seq(12));
    let dst = buf(&be, &[-1.0; 8]);
    let s = Tensor::<f32>::of(&src).unwrap().view(&[2, 6, 1]).unwrap();
    let d = Tensor::of(&dst).unwrap().view(&[2, 4, 1]).unwrap();
    assert_eq!(carry::write_back(&cx, d, s, 5, &keep).unwrap(), 3);
    assert_eq!(read(&be, &dst), [0.0, 3.0, 4.0, -1.0, 6.0, 9.0, 10.0, -1.0]);
    // within the bound every frame is copied
    assert_eq!(carry::write_back(&cx, d, s, 2, &keep).unwrap(), 2);
    assert_eq!(&read(&be, &dst)[4..6], &[6.0, 7.0]);
    assert_eq!(carry::kept(&keep, 9), 3);
    // a destination without room for head + tail is refused
    let small = Tensor::of(&dst).unwrap().view(&[2, 2, 1]).unwrap();
    assert!(matches!(
        carry::write_back(&cx, small, s, 5, &keep),
        Err(OpError::Shape {
            op: "write_back",
            view: "dst",
            ..
        })
    ));
}

#[test]
fn a_linear_declares_its_multiply_adds_and_operand_bytes() {
    let be = host();
    let prof = Profiler::new();
    let cx = Ctx::new(be.as_ref(), Some(&prof));
    let (rows, i, o) = (3, 4, 5);
    let (x, w, b, y) = (
        buf(&be, &seq(rows * i)),
        buf(&be, &seq(o * i)),
        buf(&be, &seq(o)),
        buf(&be, &vec![0.0; rows * o]),
    );
    fn t<'a>(d: &'a DeviceBuffer, dims: &[usize]) -> Tensor<'a> {
        Tensor::of(d).unwrap().view(dims).unwrap()
    }
    prof.begin();
    linear(
        &cx,
        t(&w, &[o, i]),
        Some(t(&b, &[o])),
        t(&x, &[rows, i]),
        t(&y, &[rows, o]),
    )
    .unwrap();
    let r = prof.end(be.as_ref()).unwrap();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].flops, (2 * rows * i * o) as f64);
    assert_eq!(r[0].bytes, (4 * (rows * i + o * i + rows * o + o)) as f64);
}

#[test]
fn profiles_mark_every_op_and_captures_replay_the_same_work() {
    let be = host();
    let prof = Profiler::new();
    let cx = Ctx::new(be.as_ref(), Some(&prof));
    let a = buf(&be, &[1.0, 2.0]);
    let at = Tensor::of(&a).unwrap();
    prof.begin();
    act(&cx, at, Act::Scale(3.0)).unwrap();
    act(&cx, at, Act::Scale(3.0)).unwrap();
    memset(&cx, at.view(&[1]).unwrap(), 0).unwrap();
    let rows = prof.end(be.as_ref()).unwrap();
    let mut cats: Vec<(&str, usize)> = rows.iter().map(|r| (r.category, r.launches)).collect();
    cats.sort();
    assert_eq!(cats, [("act.apply", 2), ("memset", 1)]);
    // each op's declared work is summed per category: act 1 flop and 8 bytes per element
    let act_row = rows.iter().find(|r| r.category == "act.apply").unwrap();
    assert_eq!((act_row.flops, act_row.bytes), (4.0, 32.0));
    let set = rows.iter().find(|r| r.category == "memset").unwrap();
    assert_eq!((set.flops, set.bytes), (0.0, 4.0));
    // closed: nothing is recorded
    act(&cx, at, Act::Scale(1.0)).unwrap();
    assert!(prof.end(be.as_ref()).unwrap().is_empty());
    // recorded into a graph, then replayed: the same op twice
    be.begin_capture().unwrap();
    act(&cx, at, Act::Scale(2.0)).unwrap();
    let g = be.end_capture().unwrap();
    assert_eq!(g.nodes(), 1);
    be.launch_graph(&g).unwrap();
    be.launch_graph(&g).unwrap();
    assert_eq!(read(&be, &a), [0.0, 72.0]);
}

/// A grouped launch gives each convolution what it gives alone, and refuses a group whose
/// problems touch each other's outputs.
#[test]
fn conv1d_group_equals_each_alone_and_refuses_overlap() {
    let be = host();
    let cx = Ctx::new(be.as_ref(), None);
    let (c, t) = (4usize, 40usize);
    let vals = |n: usize, s: f32| -> Vec<f32> {
        (0..n).map(|i| ((i * 37 % 23) as f32 - 11.0) * s).collect()
    };
    let x = buf(&be, &vals(c * t, 0.1));
    let ws: Vec<(DeviceBuffer, DeviceBuffer, usize)> = [3usize, 7, 11]
        .iter()
        .map(|&k| (buf(&be, &vals(c * c * k, 0.05)), buf(&be, &vals(c, 0.2)), k))
        .collect();
    let grouped: Vec<DeviceBuffer> = (0..3).map(|_| buf(&be, &vec![0.0; c * t])).collect();
    let alone: Vec<DeviceBuffer> = (0..3).map(|_| buf(&be, &vec![0.0; c * t])).collect();
    let xt = Tensor::of(&x).unwrap().view(&[c, t]).unwrap();
    fn conv<'a>(
        y: &'a DeviceBuffer,
        x: Tensor<'a, f32>,
        (w, b, k): &'a (DeviceBuffer, DeviceBuffer, usize),
        d: usize,
    ) -> Conv<'a, f32> {
        let (c, t) = (x.dims()[0], x.dims()[1]);
        Conv {
            y: Tensor::of(y).unwrap().view(&[c, t]).unwrap(),
            x,
            w: Tensor::of(w).unwrap().view(&[c, c, *k]).unwrap(),
            bias: Tensor::of(b).unwrap().view(&[c]).unwrap(),
            res: Residual::Add(x),
            geom: ConvGeom {
                dil: d,
                pad: (k - 1) * d,
                ..ConvGeom::PLAIN
            },
        }
    }
    let convs: Vec<Conv<'_, f32>> = (0..3)
        .map(|i| conv(&grouped[i], xt, &ws[i], 2 * i + 1))
        .collect();
    conv1d_group(&cx, &convs).unwrap();
    for i in 0..3 {
        let a = conv(&alone[i], xt, &ws[i], 2 * i + 1);
        conv1d(&cx, a.y, a.x, a.w, a.bias, a.res, a.geom).unwrap();
        assert_eq!(read(&be, &grouped[i]), read(&be, &alone[i]), "problem {i}");
        assert!(read(&be, &grouped[i]).iter().any(|v| *v != 0.0));
    }
    // problem 1 writes what problem 0 reads
    let mut bad = convs.clone();
    bad[1].y = xt;
    let e = conv1d_group(&cx, &bad).unwrap_err();
    assert!(matches!(e, OpError::Overlap { .. }), "{e}");
    // four problems: two launches, the same outputs
    let four: Vec<Conv<'_, f32>> = (0..3)
        .map(|i| conv(&grouped[i], xt, &ws[i], 1))
        .chain(std::iter::once(conv(&alone[0], xt, &ws[0], 2)))
        .collect();
    conv1d_group(&cx, &four).unwrap();
    let a = conv(&alone[1], xt, &ws[0], 2);
    conv1d(&cx, a.y, a.x, a.w, a.bias, a.res, a.geom).unwrap();
    assert_eq!(read(&be, &alone[0]), read(&be, &alone[1]));
}
