//! The non-GEMM op families of the batch-invariance tests (see `batch_invariant.rs`).

use std::sync::Arc;

use dcc_runtime::DeviceBuffer;
use dcc_runtime::backend::Backend;
use dcc_runtime::contract::Keep;
use dcc_runtime::ops::{self, Act, Ctx, OpError, Tensor};
use half::f16;

use super::common::data;
use super::harness::{Batched, Init, Layer, check, per_unit};
use super::{ROWS, full};

/// Batch entries of one unit for the ops with a batch axis: one session's CFG pair.
const PAIR: usize = 2;
/// Frames per batch entry (56 new frames per chunk).
const FRAMES: usize = 56;

fn t<'a>(b: &'a DeviceBuffer, dims: &[usize]) -> Result<Tensor<'a>, OpError> {
    Tensor::of(b)?.view(dims)
}

/// The model width: 512 on CUDA (full model), 64 on Host (tiny model).
fn width(be: &Arc<dyn Backend>) -> usize {
    if full(be) { 512 } else { 64 }
}

fn lay<F>(be: &Arc<dyn Backend>, name: String, batched: Vec<Batched>, shared: Vec<Vec<f32>>, f: F)
where
    F: Fn(&Ctx<'_>, &[DeviceBuffer], &[DeviceBuffer], usize) -> Result<(), OpError>,
{
    check(
        be,
        &Layer {
            name,
            batched,
            shared,
            run: &f,
        },
    );
}

pub fn batch_invariant_norms(be: Arc<dyn Backend>) {
    let d = width(&be);
    let rows = |u: usize| u * ROWS;
    let two = vec![per_unit(ROWS * d), per_unit(ROWS * d)];
    let vecs = |n: usize| (0..n).map(|i| data(100 + i as u64, d)).collect::<Vec<_>>();
    lay(
        &be,
        format!("layer_norm {d}"),
        two.clone(),
        vecs(2),
        |cx, b, s, u| {
            let (y, x) = (t(&b[1], &[rows(u), d])?, t(&b[0], &[rows(u), d])?);
            ops::layer_norm(cx, y, x, t(&s[0], &[d])?, t(&s[1], &[d])?, 1e-5)
        },
    );
    for f16 in [false, true] {
        let modulate = if f16 {
            ops::layer_norm_modulate_f16
        } else {
            ops::layer_norm_modulate
        };
        let f16 = if f16 { "_f16" } else { "" };
        lay(
            &be,
            format!("layer_norm_modulate{f16} {d}"),
            two.clone(),
            vecs(2),
            |cx, b, s, u| {
                let (y, x) = (t(&b[1], &[rows(u), d])?, t(&b[0], &[rows(u), d])?);
                modulate(cx, y, x, t(&s[0], &[d])?, t(&s[1], &[d])?, 1e-6)
            },
        );
    }
    lay(
        &be,
        format!("l2_normalize {d}"),
        two,
        vec![],
        |cx, b, _, u| {
            let (y, x) = (t(&b[1], &[rows(u), d])?, t(&b[0], &[rows(u), d])?);
            ops::l2_normalize(cx, y, x, 1e-12)
        },
    );
    let three = vec![per_unit(ROWS * d); 3];
    for f16 in [false, true] {
        let gated = if f16 {
            ops::gated_norm_modulate_f16
        } else {
            ops::gated_norm_modulate
        };
        let f16 = if f16 { "_f16" } else { "" };
        lay(
            &be,
            format!("gated_norm_modulate{f16} {d}"),
            three.clone(),
            vecs(3),
            |cx, b, s, u| {
                let v = |i: usize| t(&b[i], &[rows(u), d]);
                let p = |i: usize| t(&s[i], &[d]);
                gated(cx, v(0)?, p(0)?, v(1)?, v(2)?, p(1)?, p(2)?, 1e-6)
            },
        );
    }
}

pub fn batch_invariant_elementwise(be: Arc<dyn Backend>) {
    let d = width(&be);
    let n = |u: usize| u * ROWS;
    for f in [
        Act::Silu,
        Act::Mish,
        Act::GeluTanh,
        Act::LeakyRelu(0.2),
        Act::Scale(0.5),
    ] {
        lay(
            &be,
            format!("act {f:?} {d}"),
            vec![per_unit(ROWS * d)],
            vec![],
            |cx, b, _, u| ops::act(cx, t(&b[0], &[n(u), d])?, f),
        );
    }
    let two = vec![per_unit(ROWS * d); 2];
    lay(&be, format!("add {d}"), two, vec![], |cx, b, _, u| {
        ops::add(cx, t(&b[0], &[n(u), d])?, t(&b[1], &[n(u), d])?)
    });
    // one session a unit: x [units, rows, dim], v [units, 2, rows, dim]
    lay(
        &be,
        format!("cfg_euler {d}"),
        vec![per_unit(ROWS * d), per_unit(2 * ROWS * d)],
        vec![],
        |cx, b, _, u| {
            ops::cfg_euler(
                cx,
                t(&b[0], &[u, ROWS, d])?,
                t(&b[1], &[u, 2, ROWS, d])?,
                0.7,
                0.1,
            )
        },
    );
}

/// `(heads, head dim, cache capacity, keys)`: the DiT's 8 × 64 over 458 + 56 keys on CUDA.
fn attn_dims(be: &Arc<dyn Backend>) -> (usize, usize, usize, usize) {
    if full(be) {
        (8, 64, 520, 514)
    } else {
        (2, 32, 130, 120)
    }
}

pub fn batch_invariant_attention(be: Arc<dyn Backend>) {
    let (h, d, cap, tk) = attn_dims(&be);
    let (hd, tq) = (h * d, FRAMES);
    let bufs = vec![
        per_unit(PAIR * tq * hd),
        per_unit(PAIR * tq * hd),
        per_unit(PAIR * h * cap * 2 * d),
    ];
    let name = format!("attention {h} × {d}, {tq} queries over {tk} keys");
    lay(&be, name, bufs, vec![], |cx, b, _, u| {
        let bt = u * PAIR;
        let (out, q) = (t(&b[0], &[bt, tq, hd])?, t(&b[1], &[bt, tq, hd])?);
        let kv = t(&b[2], &[bt, h, cap, 2 * d])?;
        ops::attention(cx, out, q, kv, tk, 1.0 / (d as f32).sqrt())
    });
    // the conformer's relative-position attention: one session per unit (its queries and
    // cache), the projected positions and biases shared
    let bufs = vec![
        per_unit(tq * hd),
        per_unit(tq * hd),
        per_unit(h * cap * 2 * d),
    ];
    let shared = vec![data(210, hd), data(211, hd), data(212, (2 * tk - 1) * hd)];
    let name = format!("rel_pos_attention {h} × {d}, {tq} queries over {tk} keys");
    lay(&be, name, bufs, shared, |cx, b, s, u| {
        let (out, q) = (t(&b[0], &[u * tq, hd])?, t(&b[1], &[u * tq, hd])?);
        let kv = t(&b[2], &[u, h, cap, 2 * d])?;
        let (pu, pv) = (t(&s[0], &[h, d])?, t(&s[1], &[h, d])?);
        let pos = t(&s[2], &[2 * tk - 1, hd])?;
        ops::rel_pos_attention(cx, out, q, pu, pv, kv, pos, tk)
    });
    let t0 = cap - tq - 3;
    // qkv rows are [batch·t, 3·h·d], qn [batch·t, h·d], the cache [batch, h, cap, 2d].
    let bufs = vec![
        per_unit(PAIR * tq * hd),
        per_unit(PAIR * h * cap * 2 * d),
        per_unit(PAIR * tq * 3 * hd),
    ];
    let params = (0..4).map(|i| data(200 + i, d)).collect();
    lay(
        &be,
        format!("qk_norm_pack {h} × {d}"),
        bufs,
        params,
        |cx, b, s, u| {
            let bt = u * PAIR;
            let p = |i: usize| t(&s[i], &[d]);
            ops::qk_norm_pack(
                cx,
                t(&b[0], &[bt * tq, hd])?,
                t(&b[1], &[bt, h, cap, 2 * d])?,
                t0,
                t(&b[2], &[bt * tq, 3 * hd])?,
                (p(0)?, p(1)?),
                (p(2)?, p(3)?),
                1e-6,
            )
        },
    );
    let bufs = vec![
        per_unit(PAIR * h * cap * 2 * d),
        per_unit(PAIR * tq * hd),
        per_unit(PAIR * tq * hd),
    ];
    lay(
        &be,
        format!("kv_pack {h} × {d}"),
        bufs,
        vec![],
        |cx, b, _, u| {
            let bt = u * PAIR;
            let (k, v) = (t(&b[1], &[bt * tq, hd])?, t(&b[2], &[bt * tq, hd])?);
            ops::kv_pack(cx, t(&b[0], &[bt, h, cap, 2 * d])?, t0, k, v)
        },
    );
}

pub fn batch_invariant_conv(be: Arc<dyn Backend>) {
    let (d, k, f) = (width(&be), 3, FRAMES);
    // col [batch, frames, k·dim], src/x [batch, frames, dim], ctx [batch, k − 1, dim].
    let bufs = vec![
        per_unit(PAIR * f * k * d),
        per_unit(PAIR * f * d),
        per_unit(PAIR * (k - 1) * d),
    ];
    lay(
        &be,
        format!("conv_im2col k {k} × {d}"),
        bufs.clone(),
        vec![],
        |cx, b, _, u| {
            let bt = u * PAIR;
            let col = t(&b[0], &[bt, f, k * d])?;
            ops::conv_im2col(
                cx,
                col,
                t(&b[1], &[bt, f, d])?,
                t(&b[2], &[bt, k - 1, d])?,
                k,
            )
        },
    );
    let params = vec![data(300, d), data(301, d)];
    let name = format!("layer_norm_act_im2col Mish k {k} × {d}");
    lay(&be, name, bufs, params, |cx, b, s, u| {
        let bt = u * PAIR;
        ops::layer_norm_act_im2col(
            cx,
            t(&b[0], &[bt, f, k * d])?,
            t(&b[1], &[bt, f, d])?,
            (t(&s[0], &[d])?, t(&s[1], &[d])?),
            1e-5,
            Act::Mish,
            t(&b[2], &[bt, k - 1, d])?,
            k,
        )
    });
}

pub fn batch_invariant_copies(be: Arc<dyn Backend>) {
    let d = width(&be);
    let n = |u: usize| u * ROWS;
    let lds = d + 5;
    let bufs = vec![per_unit(ROWS * d), per_unit(ROWS * lds)];
    lay(
        &be,
        format!("copy {d} (source ld {lds})"),
        bufs,
        vec![],
        |cx, b, _, u| {
            let src = t(&b[1], &[n(u), lds])?.narrow(1, 0, d)?;
            ops::copy(cx, t(&b[0], &[n(u), d])?, src)
        },
    );
    let bufs = vec![per_unit(2 * ROWS * d), per_unit(ROWS * d)];
    lay(
        &be,
        format!("repeat_rows ×2 {d}"),
        bufs,
        vec![],
        |cx, b, _, u| ops::repeat_rows(cx, t(&b[0], &[2 * n(u), d])?, t(&b[1], &[n(u), d])?, 2),
    );
    let bufs = vec![per_unit(PAIR * FRAMES * d); 2];
    lay(
        &be,
        format!("copy_batched {d}"),
        bufs,
        vec![],
        |cx, b, _, u| {
            let v = |i: usize| t(&b[i], &[u * PAIR, FRAMES, d]);
            ops::copy_batched(cx, v(0)?, v(1)?)
        },
    );
    // the same bytes as binary16 values (the half point's cache): twice the columns
    let bufs = vec![per_unit(PAIR * FRAMES * d); 2];
    lay(
        &be,
        format!("copy_batched_f16 {}", 2 * d),
        bufs,
        vec![],
        |cx, b, _, u| {
            let v = |i: usize| Tensor::<f16>::of(&b[i])?.view(&[u * PAIR, FRAMES, 2 * d]);
            ops::copy_batched(cx, v(0)?, v(1)?)
        },
    );
    // The transpose's output has the unit's rows as columns: [dim, units·112].
    let out = Batched {
        outer: d,
        inner: ROWS,
        init: Init::F32,
    };
    lay(
        &be,
        format!("transpose {d}"),
        vec![out, per_unit(ROWS * d)],
        vec![],
        |cx, b, _, u| ops::transpose(cx, t(&b[0], &[d, n(u)])?, t(&b[1], &[n(u), d])?),
    );
    let vocab = 97;
    let ids = Batched {
        outer: 1,
        inner: ROWS,
        init: Init::Ids(vocab as u32),
    };
    let table = vec![data(400, vocab * d)];
    let bufs = vec![ids, per_unit(ROWS * d)];
    lay(
        &be,
        format!("embedding {vocab} × {d}"),
        bufs,
        table,
        |cx, b, s, u| {
            let ids = Tensor::<u32>::of(&b[0])?.view(&[n(u)])?;
            ops::embedding(cx, t(&b[1], &[n(u), d])?, ids, t(&s[0], &[vocab, d])?)
        },
    );
}

pub fn batch_invariant_carry(be: Arc<dyn Backend>) {
    let d = width(&be);
    let keep = Keep {
        head: 8,
        tail: 16,
        prompt: 16,
        retained: 8,
    };
    let (dcap, scap) = (30, 48);
    // extent 40 > head + tail: `carry.retain`; 20 <= head + tail: the block copy.
    for extent in [40, 20] {
        let bufs = vec![per_unit(PAIR * dcap * d), per_unit(PAIR * scap * d)];
        let name = format!("carry write_back extent {extent} keep 8 ‖ 16, {d} wide");
        lay(&be, name, bufs, vec![], |cx, b, _, u| {
            let dst = t(&b[0], &[u * PAIR, dcap, d])?;
            let src = t(&b[1], &[u * PAIR, scap, d])?;
            ops::carry::write_back(cx, dst, src, extent, &keep).map(|_| ())
        });
    }
}
