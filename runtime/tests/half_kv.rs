//! The binary16 estimator cache of the `half` operating point (`ops::qk_pack_f16`,
//! `attention_f16`, `copy_batched`, and the carry's `write_back` over binary16 views): on each
//! backend, every op equals the bits the half path computes over the same values in f32 storage
//! (`qk_norm_pack` then `round_f16`; `attention` on `GemmPath::Half` over the rounded cache;
//! `copy`; `write_back`), so a flow that stores its cache in f16 changes no bit, and on the Host
//! its kernel's host twin. SDPA is also batch-invariant over a binary16 cache
//! (`batch_invariant_half_sdpa`; `attention_f16.rs` has the tensor-core SDPA's own tests). On
//! Host always, on CUDA
//! where a GPU exists (`SKIP (cuda): ...` otherwise; `DCC_REQUIRE_GPU=1` makes that a failure).

mod common;

use std::sync::Arc;

use common::data;
use dcc_runtime::backend::{AllocKind, Backend, BackendKind, DeviceBuffer, Pod};
use dcc_runtime::contract::Keep;
use dcc_runtime::kernels::attention;
use dcc_runtime::kernels::copy;
use dcc_runtime::kernels::half_kv as hk;
use dcc_runtime::ops::{self, Ctx, GemmPath, Tensor, carry};
use half::f16;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn bits16(v: &[f16]) -> Vec<u16> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn rn16(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| f16::from_f32(x).to_f32()).collect()
}

fn buf<T: Pod>(be: &Arc<dyn Backend>, v: &[T]) -> DeviceBuffer {
    be.alloc_from(v, AllocKind::Other).unwrap()
}

/// `(batch, heads, t, d, cap, t0)` of the q/k pack: the tiny DiT's (CFG 2, 2 heads of 32), a
/// generic head width, heads wider than `half.qk_pack` holds in registers (128; `norm.qk_pack`
/// holds up to 512: the two take different paths to the same sums), and on CUDA the full
/// model's (CFG 2, 8 heads of 64, 56 new frames ahead of a 402-frame history).
fn pack_cases(be: &Arc<dyn Backend>) -> Vec<(usize, usize, usize, usize, usize, usize)> {
    let mut c = vec![
        (2, 2, 56, 32, 458, 0),
        (4, 3, 7, 40, 20, 5),
        (2, 2, 5, 160, 9, 2),
    ];
    if be.kind() == BackendKind::Cuda {
        c.push((2, 8, 56, 64, 458, 0));
    }
    c
}

fn qk_pack_f16_is_qk_norm_pack_rounded(be: Arc<dyn Backend>) {
    let cx = Ctx::new(be.as_ref(), None);
    for (case, (batch, heads, t, d, cap, t0)) in pack_cases(&be).into_iter().enumerate() {
        let inner = heads * d;
        let (rows, ld) = (batch * t, 3 * inner + 8);
        // the vendor's v is a linear's f16 output: its values are binary16 values
        let mut qkv = data(10 + case as u64, rows * ld);
        for r in 0..rows {
            let v = &mut qkv[r * ld + 2 * inner..r * ld + 3 * inner];
            v.copy_from_slice(&rn16(v));
        }
        let p: Vec<Vec<f32>> = (0..4).map(|i| data(20 + i, d)).collect();
        let eps = 1e-6;
        let (qkv_b, pb): (DeviceBuffer, Vec<DeviceBuffer>) =
            (buf(&be, &qkv), p.iter().map(|v| buf(&be, v)).collect());
        let pt = |i: usize| Tensor::of(&pb[i]).unwrap();
        let qkv_t = Tensor::of(&qkv_b).unwrap().view(&[rows, ld]).unwrap();
        let cache_dims = [batch, heads, cap, 2 * d];
        let n_cache = batch * heads * cap * 2 * d;

        // fp32: qk_norm_pack, then round_f16 over qn and the new frames
        let qn32 = buf(&be, &vec![0f32; rows * inner]);
        let c32 = buf(&be, &vec![0.5f32; n_cache]);
        let c32_t = Tensor::of(&c32).unwrap().view(&cache_dims).unwrap();
        let qn32_t = Tensor::of(&qn32).unwrap().view(&[rows, inner]).unwrap();
        ops::qk_norm_pack(
            &cx,
            qn32_t,
            c32_t,
            t0,
            qkv_t,
            (pt(0), pt(1)),
            (pt(2), pt(3)),
            eps,
        )
        .unwrap();
        ops::round_f16(&cx, qn32_t).unwrap();
        let new = c32_t.narrow(2, t0, t).unwrap().flatten(0, 1).unwrap();
        ops::round_f16(&cx, new.flatten(1, 2).unwrap()).unwrap();

        // binary16 cache
        let qn = buf(&be, &vec![0f32; rows * inner]);
        let c16 = buf(&be, &vec![f16::from_f32(0.5); n_cache]);
        let c16_t = Tensor::<f16>::of(&c16).unwrap().view(&cache_dims).unwrap();
        let qn_t = Tensor::of(&qn).unwrap().view(&[rows, inner]).unwrap();
        ops::qk_pack_f16(
            &cx,
            qn_t,
            c16_t,
            t0,
            qkv_t,
            (pt(0), pt(1)),
            (pt(2), pt(3)),
            eps,
        )
        .unwrap();
        be.synchronize().unwrap();
        let (qn32, c32): (Vec<f32>, Vec<f32>) = (
            be.download(qn32.ptr(), rows * inner).unwrap(),
            be.download(c32.ptr(), n_cache).unwrap(),
        );
        let (qn, c16): (Vec<f32>, Vec<f16>) = (
            be.download(qn.ptr(), rows * inner).unwrap(),
            be.download(c16.ptr(), n_cache).unwrap(),
        );
        assert_eq!(bits(&qn), bits(&qn32), "case {case}: qn");
        let widened: Vec<f32> = c16.iter().map(|h| h.to_f32()).collect();
        assert_eq!(bits(&widened), bits(&c32), "case {case}: cache");

        // the host twin
        let mut want_qn = vec![0f32; rows * inner];
        let mut want_c = vec![f16::from_f32(0.5); n_cache];
        hk::qk_pack_f16(
            &mut want_qn,
            &mut want_c,
            cap,
            t0,
            &qkv,
            ld,
            (&p[0], &p[1]),
            (&p[2], &p[3]),
            batch,
            heads,
            t,
            d,
            eps,
        );
        assert_eq!(bits(&qn), bits(&want_qn), "case {case}: qn vs twin");
        assert_eq!(bits16(&c16), bits16(&want_c), "case {case}: cache vs twin");
    }
}

/// `(batch, heads, tq, tk, d, cap)`: the tiny DiT's, a generic head width (plain staging), a
/// long cache of the largest head width and, on CUDA, the full model's prompt and steady calls.
fn sdpa_cases(be: &Arc<dyn Backend>) -> Vec<(usize, usize, usize, usize, usize, usize)> {
    let mut c = vec![
        (2, 2, 56, 458, 32, 458),
        (2, 3, 9, 37, 40, 50),
        (1, 1, 5, 2500, 128, 2600),
    ];
    if be.kind() == BackendKind::Cuda {
        c.extend([(2, 8, 56, 458, 64, 458), (2, 8, 302, 302, 64, 458)]);
    }
    c
}

fn attention_f16_is_attention_over_the_rounded_cache(be: Arc<dyn Backend>) {
    // the half path's SDPA over an f32 cache holding the binary16 values
    let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Half);
    for (case, (batch, heads, tq, tk, d, cap)) in sdpa_cases(&be).into_iter().enumerate() {
        let n = batch * tq * heads * d;
        let q = rn16(&data(30 + case as u64, n));
        let kv = rn16(&data(40 + case as u64, batch * heads * cap * 2 * d));
        let kv16: Vec<f16> = kv.iter().map(|&x| f16::from_f32(x)).collect();
        let (qb, kvb, kv16b) = (buf(&be, &q), buf(&be, &kv), buf(&be, &kv16));
        let (o32, o16) = (buf(&be, &vec![0f32; n]), buf(&be, &vec![0f32; n]));
        let qd = [batch, tq, heads * d];
        let cd = [batch, heads, cap, 2 * d];
        let q_t = Tensor::of(&qb).unwrap().view(&qd).unwrap();
        ops::attention(
            &cx,
            Tensor::of(&o32).unwrap().view(&qd).unwrap(),
            q_t,
            Tensor::of(&kvb).unwrap().view(&cd).unwrap(),
            tk,
            0.125,
        )
        .unwrap();
        ops::attention_f16(
            &cx,
            Tensor::of(&o16).unwrap().view(&qd).unwrap(),
            q_t,
            Tensor::<f16>::of(&kv16b).unwrap().view(&cd).unwrap(),
            tk,
            0.125,
        )
        .unwrap();
        be.synchronize().unwrap();
        let (a, b): (Vec<f32>, Vec<f32>) = (
            be.download(o32.ptr(), n).unwrap(),
            be.download(o16.ptr(), n).unwrap(),
        );
        assert_eq!(bits(&b), bits(&a), "case {case}");
        assert!(b.iter().all(|v| v.is_finite()), "case {case}");
        if be.kind() == BackendKind::Host {
            let mut want = vec![0f32; n];
            attention::f16::attention(batch, heads, tq, tk, d, cap, 0.125, &q, &kv, &mut want);
            assert_eq!(bits(&b), bits(&want), "case {case}: twin");
        }
    }
}

/// The rows of one (batch) entry equal alone and among 7 others, at positions 0, 3 and 7.
fn batch_invariant_half_sdpa(be: Arc<dyn Backend>) {
    let cx = Ctx::new(be.as_ref(), None);
    let (heads, tq, tk, d, cap) = if be.kind() == BackendKind::Cuda {
        (8, 56, 458, 64, 458)
    } else {
        (2, 56, 458, 32, 458)
    };
    let unit_q = heads * tq * d;
    let unit_kv = heads * cap * 2 * d;
    let q1 = rn16(&data(50, unit_q));
    let kv1: Vec<f16> = data(51, unit_kv)
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let run = |batch: usize, q: &[f32], kv: &[f16]| -> Vec<f32> {
        let (qb, kvb, ob) = (
            buf(&be, q),
            buf(&be, kv),
            buf(&be, &vec![0f32; batch * unit_q]),
        );
        let qd = [batch, tq, heads * d];
        ops::attention_f16(
            &cx,
            Tensor::of(&ob).unwrap().view(&qd).unwrap(),
            Tensor::of(&qb).unwrap().view(&qd).unwrap(),
            Tensor::<f16>::of(&kvb)
                .unwrap()
                .view(&[batch, heads, cap, 2 * d])
                .unwrap(),
            tk,
            0.125,
        )
        .unwrap();
        be.synchronize().unwrap();
        be.download(ob.ptr(), batch * unit_q).unwrap()
    };
    let alone = run(1, &q1, &kv1);
    for at in [0, 3, 7] {
        let mut q = rn16(&data(52 + at as u64, 8 * unit_q));
        let mut kv: Vec<f16> = data(62 + at as u64, 8 * unit_kv)
            .iter()
            .map(|&x| f16::from_f32(x))
            .collect();
        q[at * unit_q..(at + 1) * unit_q].copy_from_slice(&q1);
        kv[at * unit_kv..(at + 1) * unit_kv].copy_from_slice(&kv1);
        let out = run(8, &q, &kv);
        assert_eq!(
            bits(&out[at * unit_q..(at + 1) * unit_q]),
            bits(&alone),
            "unit at {at}"
        );
    }
}

fn copy_and_write_back_move_halves(be: Arc<dyn Backend>) {
    let cx = Ctx::new(be.as_ref(), None);
    // the history copy: 2·2 rows of 402 frames × 64 into a 458-frame workspace after 56 new ones
    let (rows, frames, w, cap, t) = (4, 402, 64, 458, 56);
    let src: Vec<f16> = data(70, rows * frames * w)
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let sb = buf(&be, &src);
    let db = buf(&be, &vec![f16::from_f32(2.0); rows * cap * w]);
    let dst = Tensor::<f16>::of(&db)
        .unwrap()
        .view(&[rows, cap, w])
        .unwrap();
    let hist = Tensor::<f16>::of(&sb)
        .unwrap()
        .view(&[rows, frames * w])
        .unwrap();
    ops::copy_batched(
        &cx,
        dst.narrow(1, t, frames)
            .unwrap()
            .flatten(1, 2)
            .unwrap()
            .broadcast(0, 1)
            .unwrap(),
        hist.broadcast(0, 1).unwrap(),
    )
    .unwrap();
    be.synchronize().unwrap();
    let got: Vec<f16> = be.download(db.ptr(), rows * cap * w).unwrap();
    let mut want = vec![f16::from_f32(2.0); rows * cap * w];
    copy::copy_batched(
        &mut want[t * w..],
        0,
        cap * w,
        &src,
        0,
        frames * w,
        1,
        rows,
        frames * w,
    );
    assert_eq!(bits16(&got), bits16(&want), "copy_batched");

    // the write-back keeps head 100 ‖ tail 302 of 458 frames: the same moves as over f32 values
    let keep = Keep {
        head: 100,
        tail: 302,
        prompt: 302,
        retained: 100,
    };
    let ws16: Vec<f16> = data(71, rows * cap * w)
        .iter()
        .map(|&x| f16::from_f32(x))
        .collect();
    let ws32: Vec<f32> = ws16.iter().map(|h| h.to_f32()).collect();
    let (w16, w32) = (buf(&be, &ws16), buf(&be, &ws32));
    let (c16, c32) = (
        buf(&be, &vec![f16::ZERO; rows * frames * w]),
        buf(&be, &vec![0f32; rows * frames * w]),
    );
    fn v16(b: &DeviceBuffer, dims: [usize; 3]) -> Tensor<'_, f16> {
        Tensor::<f16>::of(b).unwrap().view(&dims).unwrap()
    }
    fn v32(b: &DeviceBuffer, dims: [usize; 3]) -> Tensor<'_> {
        Tensor::<f32>::of(b).unwrap().view(&dims).unwrap()
    }
    let (cd, wd) = ([rows, frames, w], [rows, cap, w]);
    for extent in [458, 352] {
        let a = carry::write_back(&cx, v16(&c16, cd), v16(&w16, wd), extent, &keep).unwrap();
        let b = carry::write_back(&cx, v32(&c32, cd), v32(&w32, wd), extent, &keep).unwrap();
        assert_eq!(a, b);
        be.synchronize().unwrap();
        let (g16, g32): (Vec<f16>, Vec<f32>) = (
            be.download(c16.ptr(), rows * frames * w).unwrap(),
            be.download(c32.ptr(), rows * frames * w).unwrap(),
        );
        let widened: Vec<f32> = g16.iter().map(|h| h.to_f32()).collect();
        assert_eq!(bits(&widened), bits(&g32), "write_back at {extent}");
    }
    // a frame of an odd count of halves is not whole words: refused
    let odd = Tensor::<f16>::of(&c16)
        .unwrap()
        .view(&[rows, 2, 3])
        .unwrap();
    let odd_src = Tensor::<f16>::of(&w16)
        .unwrap()
        .view(&[rows, 2, 3])
        .unwrap();
    assert!(carry::write_back(&cx, odd, odd_src, 2, &keep).is_err());
}

both!(
    qk_pack_f16_is_qk_norm_pack_rounded,
    attention_f16_is_attention_over_the_rounded_cache,
    batch_invariant_half_sdpa,
    copy_and_write_back_move_halves,
);
