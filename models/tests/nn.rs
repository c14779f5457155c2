//! The nn layers on the Host backend: weights from safetensors names, forward passes against
//! plain loops, streaming causal convolutions equal to one pass, typed refusals.

use std::sync::Arc;

use dcc_models::nn::{
    Act, CausalConv1d, Conv1d, Ctx, Embedding, LayerNorm, Linear, LoadError, Loader, Mlp, OpError,
    Tensor, WeightError, WeightStore,
};
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer, host};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, serialize};

/// A deterministic pseudo-random vector.
fn vals(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 / 500.0 - 1.0)
        .collect()
}

/// A state_dict of `(name, shape)` filled with [`vals`].
fn store(entries: &[(&str, &[usize])]) -> WeightStore {
    let data: Vec<(String, Vec<usize>, Vec<u8>)> = entries
        .iter()
        .enumerate()
        .map(|(i, (n, s))| {
            let v = vals(s.iter().product(), i as u32 * 7919);
            let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (n.to_string(), s.to_vec(), bytes)
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = data
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    WeightStore::from_bytes(&serialize(views, None).unwrap()).unwrap()
}

fn host_f32(ws: &WeightStore, name: &str, shape: &[usize]) -> Vec<f32> {
    ws.get(name, shape).unwrap()
}

fn upload(be: &Arc<dyn Backend>, v: &[f32]) -> DeviceBuffer {
    be.alloc_from(v, AllocKind::Other).unwrap()
}

fn zeros(be: &Arc<dyn Backend>, n: usize) -> DeviceBuffer {
    be.alloc(n * 4, AllocKind::Other).unwrap()
}

fn read(be: &Arc<dyn Backend>, b: &DeviceBuffer, n: usize) -> Vec<f32> {
    be.download(b.ptr(), n).unwrap()
}

fn t<'a>(b: &'a DeviceBuffer, dims: &[usize]) -> Tensor<'a> {
    Tensor::of(b).unwrap().view(dims).unwrap()
}

#[test]
fn linears_stack_and_match_a_plain_loop() {
    let (i, o) = (5, 3);
    let ws = store(&[
        ("a.weight", &[o, i]),
        ("a.bias", &[o]),
        ("b.weight", &[2, i]),
        ("b.bias", &[2]),
    ]);
    let be = host();
    let ld = Loader::new(be.as_ref(), &ws);
    let cx = Ctx::new(be.as_ref(), None);
    let a = Linear::load(&ld, "a", i, o, true).unwrap();
    let b = Linear::load(&ld, "b", i, 2, true).unwrap();
    let ab = Linear::stacked(&ld, &[("a", o), ("b", 2)], i, true).unwrap();
    let rows = 4;
    let xv = vals(rows * i, 1);
    let x = upload(&be, &xv);
    let (ya, yb, yab) = (
        zeros(&be, rows * o),
        zeros(&be, rows * 2),
        zeros(&be, rows * 5),
    );
    a.forward(&cx, t(&x, &[rows, i]), t(&ya, &[rows, o]))
        .unwrap();
    b.forward(&cx, t(&x, &[rows, i]), t(&yb, &[rows, 2]))
        .unwrap();
    ab.forward(&cx, t(&x, &[rows, i]), t(&yab, &[rows, 5]))
        .unwrap();
    let (ga, gb, gab) = (
        read(&be, &ya, rows * o),
        read(&be, &yb, rows * 2),
        read(&be, &yab, rows * 5),
    );
    let (w, bias) = (
        host_f32(&ws, "a.weight", &[o, i]),
        host_f32(&ws, "a.bias", &[o]),
    );
    for r in 0..rows {
        // the stacked GEMM computes every output row as its own linear does, bit for bit
        assert_eq!(&gab[r * 5..r * 5 + o], &ga[r * o..r * o + o]);
        assert_eq!(&gab[r * 5 + o..r * 5 + 5], &gb[r * 2..r * 2 + 2]);
        for c in 0..o {
            let want: f32 = (0..i).map(|p| xv[r * i + p] * w[c * i + p]).sum::<f32>() + bias[c];
            assert!((ga[r * o + c] - want).abs() < 1e-5);
        }
    }
    // a weight of another shape, an absent bias
    assert!(matches!(
        Linear::load(&ld, "a", i + 1, o, true),
        Err(LoadError::Weight(WeightError::Shape { .. }))
    ));
    assert!(matches!(
        Linear::load(&ld, "c", i, o, false),
        Err(LoadError::Weight(WeightError::Missing { .. }))
    ));
    // an input of the wrong width is refused before anything is queued
    let n = be.eager_launches();
    let e = a
        .forward(&cx, t(&x, &[rows, 4]), t(&ya, &[rows, o]))
        .unwrap_err();
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
    assert_eq!(be.eager_launches(), n);
}

#[test]
fn convolutions_match_a_plain_loop_and_stream_causally() {
    let (c_in, c_out, k) = (3, 2, 3);
    let ws = store(&[("conv.weight", &[c_out, c_in, k]), ("conv.bias", &[c_out])]);
    let be = host();
    let ld = Loader::new(be.as_ref(), &ws);
    let cx = Ctx::new(be.as_ref(), None);
    let conv = Conv1d::load(&ld, "conv", c_in, c_out, k).unwrap();
    let (w, bias) = (
        host_f32(&ws, "conv.weight", &[c_out, c_in, k]),
        host_f32(&ws, "conv.bias", &[c_out]),
    );
    // a valid convolution over [6, c_in] against torch's definition
    let t_in = 6;
    let xv = vals(t_in * c_in, 3);
    let x = upload(&be, &xv);
    let (col, y) = (zeros(&be, 64), zeros(&be, (t_in - k + 1) * c_out));
    conv.forward(
        &cx,
        t(&x, &[t_in, c_in]),
        Tensor::of(&col).unwrap(),
        t(&y, &[t_in - k + 1, c_out]),
    )
    .unwrap();
    let got = read(&be, &y, (t_in - k + 1) * c_out);
    for r in 0..t_in - k + 1 {
        for o in 0..c_out {
            let mut want = bias[o];
            for c in 0..c_in {
                for j in 0..k {
                    want += w[(o * c_in + c) * k + j] * xv[(r + j) * c_in + c];
                }
            }
            assert!((got[r * c_out + o] - want).abs() < 1e-5, "{r} {o}");
        }
    }
    // causal: [zeros ‖ x] in one pass equals two chunks carrying the context
    let causal = CausalConv1d { conv };
    let ctx_len = causal.context();
    let run = |chunks: &[usize]| -> Vec<f32> {
        let ctx = zeros(&be, ctx_len * c_in);
        let mut out = Vec::new();
        let mut at = 0;
        for &n in chunks {
            let cat = zeros(&be, (ctx_len + n) * c_in);
            let catt = t(&cat, &[ctx_len + n, c_in]);
            causal
                .load_context(&cx, t(&ctx, &[ctx_len, c_in]), catt)
                .unwrap();
            be.upload(
                catt.rows(ctx_len, n).unwrap().ptr(),
                &xv[at * c_in..(at + n) * c_in],
            )
            .unwrap();
            let y = zeros(&be, n * c_out);
            causal
                .forward(
                    &cx,
                    catt,
                    t(&ctx, &[ctx_len, c_in]),
                    Tensor::of(&col).unwrap(),
                    t(&y, &[n, c_out]),
                )
                .unwrap();
            out.extend(read(&be, &y, n * c_out));
            at += n;
        }
        out
    };
    assert_eq!(run(&[6]), run(&[2, 4]));
    assert_eq!(run(&[6]), run(&[3, 1, 2]));
}

#[test]
fn norms_embeddings_and_mlps() {
    let (d, h, vocab) = (4, 6, 5);
    let ws = store(&[
        ("ln.weight", &[d]),
        ("ln.bias", &[d]),
        ("emb", &[vocab, d]),
        ("fc1.weight", &[h, d]),
        ("fc1.bias", &[h]),
        ("fc2.weight", &[d, h]),
        ("fc2.bias", &[d]),
    ]);
    let be = host();
    let ld = Loader::new(be.as_ref(), &ws);
    let cx = Ctx::new(be.as_ref(), None);
    let rows = 3;
    let xv = vals(rows * d, 5);
    let x = upload(&be, &xv);
    // LayerNorm against its definition
    let ln = LayerNorm::load(&ld, "ln", d, 1e-5).unwrap();
    let y = zeros(&be, rows * d);
    ln.forward(&cx, t(&x, &[rows, d]), t(&y, &[rows, d]))
        .unwrap();
    let (g, b) = (
        host_f32(&ws, "ln.weight", &[d]),
        host_f32(&ws, "ln.bias", &[d]),
    );
    let got = read(&be, &y, rows * d);
    for r in 0..rows {
        let row = &xv[r * d..(r + 1) * d];
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        for j in 0..d {
            let want = (row[j] - mean) / (var + 1e-5).sqrt() * g[j] + b[j];
            assert!((got[r * d + j] - want).abs() < 1e-4, "{r} {j}");
        }
    }
    // the embedding gathers rows
    let emb = Embedding::load(&ld, "emb", vocab, d).unwrap();
    let ids = be.alloc_from(&[4u32, 0, 2], AllocKind::Other).unwrap();
    let out = zeros(&be, 3 * d);
    let idt = Tensor::<u32>::of(&ids).unwrap();
    emb.forward(&cx, idt, t(&out, &[3, d])).unwrap();
    let table = host_f32(&ws, "emb", &[vocab, d]);
    let got = read(&be, &out, 3 * d);
    for (r, id) in [4usize, 0, 2].into_iter().enumerate() {
        assert_eq!(&got[r * d..(r + 1) * d], &table[id * d..(id + 1) * d]);
    }
    // the MLP is fc2(act(fc1(x)))
    let mlp = Mlp::load(&ld, ("fc1", "fc2"), d, h, Act::Scale(2.0)).unwrap();
    let (hid, o) = (zeros(&be, rows * h), zeros(&be, rows * d));
    mlp.forward(
        &cx,
        t(&x, &[rows, d]),
        t(&hid, &[rows, h]),
        t(&o, &[rows, d]),
    )
    .unwrap();
    let (w1, b1) = (
        host_f32(&ws, "fc1.weight", &[h, d]),
        host_f32(&ws, "fc1.bias", &[h]),
    );
    let (w2, b2) = (
        host_f32(&ws, "fc2.weight", &[d, h]),
        host_f32(&ws, "fc2.bias", &[d]),
    );
    let got = read(&be, &o, rows * d);
    for r in 0..rows {
        let hv: Vec<f32> = (0..h)
            .map(|j| 2.0 * ((0..d).map(|p| xv[r * d + p] * w1[j * d + p]).sum::<f32>() + b1[j]))
            .collect();
        for j in 0..d {
            let want = (0..h).map(|p| hv[p] * w2[j * h + p]).sum::<f32>() + b2[j];
            assert!((got[r * d + j] - want).abs() < 1e-4, "{r} {j}");
        }
    }
    // the hidden scratch must hold the hidden width
    let e = mlp
        .forward(
            &cx,
            t(&x, &[rows, d]),
            t(&hid, &[rows, d]),
            t(&o, &[rows, d]),
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            OpError::Shape {
                op: "linear",
                view: "y",
                ..
            }
        ),
        "{e}"
    );
}
