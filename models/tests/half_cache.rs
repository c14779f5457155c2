//! The DiT attention layer over a binary16 cache (the contract's `half` operating point) against
//! the same layer over an f32 cache holding the same values, on the half path: the output, the
//! queries' attention and every frame of the workspace are the same bits (the f16 cache stores
//! the values the f32 one holds after its `round_f16` launches, and SDPA widens them exactly).
//! On any other path a binary16 cache is refused. Two sessions of CFG rows (a batched pair), a
//! 402-frame history each, 56 new frames. On Host always; on CUDA where a GPU exists (`SKIP
//! (cuda): ...` otherwise; `DCC_REQUIRE_GPU=1` makes that a failure).

use std::sync::Arc;

use dcc_models::nn::{Ctx, History, Loader, SelfAttention, Tensor, WeightStore};
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer, Pod};
use dcc_runtime::ops::{self, GemmPath};
use half::f16;
use safetensors::tensor::TensorView;
use safetensors::{Dtype, serialize};

const HIDDEN: usize = 64;
const HEADS: usize = 2;
const HEAD_DIM: usize = 32;
const SESSIONS: usize = 2;
const BATCH: usize = 2 * SESSIONS;
const T: usize = 56;
const L: usize = 402;
const CAP: usize = T + L;

/// Deterministic values in [-1, 1).
fn vals(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

fn weights() -> WeightStore {
    let inner = HEADS * HEAD_DIM;
    let entries: [(&str, Vec<usize>); 10] = [
        ("a.to_q.weight", vec![inner, HIDDEN]),
        ("a.to_q.bias", vec![inner]),
        ("a.to_k.weight", vec![inner, HIDDEN]),
        ("a.to_k.bias", vec![inner]),
        ("a.to_v.weight", vec![inner, HIDDEN]),
        ("a.to_v.bias", vec![inner]),
        ("a.q_norm.weight", vec![HEAD_DIM]),
        ("a.q_norm.bias", vec![HEAD_DIM]),
        ("a.k_norm.weight", vec![HEAD_DIM]),
        ("a.k_norm.bias", vec![HEAD_DIM]),
    ];
    let mut data: Vec<(String, Vec<usize>, Vec<u8>)> = entries
        .iter()
        .enumerate()
        .map(|(i, (n, s))| {
            let v: Vec<f32> = vals(s.iter().product(), 100 + i as u64)
                .iter()
                .map(|x| x * 0.3)
                .collect();
            let bytes = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (n.to_string(), s.clone(), bytes)
        })
        .collect();
    let proj: Vec<u8> = vals(HIDDEN * inner, 7)
        .iter()
        .flat_map(|x| (x * 0.3).to_le_bytes())
        .collect();
    let pb: Vec<u8> = vals(HIDDEN, 8)
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    data.push(("a.proj.weight".into(), vec![HIDDEN, inner], proj));
    data.push(("a.proj.bias".into(), vec![HIDDEN], pb));
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

fn buf<T: Pod>(be: &Arc<dyn Backend>, v: &[T]) -> DeviceBuffer {
    be.alloc_from(v, AllocKind::Other).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// One forward of the layer over `SESSIONS` histories: its output, `qn`, and the workspace
/// widened to f32.
struct Run {
    out: Vec<f32>,
    qn: Vec<f32>,
    work: Vec<f32>,
}

/// `staged`: the history frames copied into the workspace; the attention reads the rest from
/// the histories themselves (`nn::History`).
fn run<K: dcc_models::nn::KvElem + Pod>(
    be: &Arc<dyn Backend>,
    path: GemmPath,
    attn: &SelfAttention,
    histories: &[Vec<K>],
    widen: fn(&K) -> f32,
    staged: usize,
) -> Result<Run, dcc_models::nn::OpError> {
    let cx = Ctx::new(be.as_ref(), None).with_gemm(path);
    let inner = HEADS * HEAD_DIM;
    let rows = BATCH * T;
    let xn = buf(be, &vals(rows * HIDDEN, 3));
    let hb: Vec<DeviceBuffer> = histories.iter().map(|h| buf(be, h)).collect();
    let work_len = BATCH * HEADS * CAP * 2 * HEAD_DIM;
    let wb = buf(be, &vec![K::default(); work_len]);
    let (qkv, qn, att, out) = (
        buf(be, &vec![0f32; rows * 3 * inner]),
        buf(be, &vec![0f32; rows * inner]),
        buf(be, &vec![0f32; rows * inner]),
        buf(be, &vec![0f32; rows * HIDDEN]),
    );
    let hist: Vec<Tensor<'_, K>> = hb
        .iter()
        .map(|b| {
            Tensor::<K>::of(b)
                .unwrap()
                .view(&[2, HEADS, L, 2 * HEAD_DIM])
                .unwrap()
        })
        .collect();
    let work = Tensor::<K>::of(&wb)
        .unwrap()
        .view(&[BATCH, HEADS, CAP, 2 * HEAD_DIM])
        .unwrap();
    let x = Tensor::of(&xn).unwrap().view(&[rows, HIDDEN]).unwrap();
    let scratch = (
        Tensor::of(&qkv).unwrap(),
        Tensor::of(&qn).unwrap(),
        Tensor::of(&att).unwrap(),
    );
    let o = Tensor::of(&out).unwrap().view(&[rows, HIDDEN]).unwrap();
    // each session's history staged behind the new frames of its rows, as the DiT's step does
    // (one copy over every layer of a session: here one layer)
    for (i, h) in hist.iter().enumerate().filter(|_| staged > 0) {
        let dst = work.narrow(0, i * 2, 2)?.narrow(2, T, staged)?;
        let dst = dst.flatten(0, 1)?.flatten(1, 2)?.broadcast(0, 1)?;
        let src = h.narrow(2, 0, staged)?.flatten(0, 1)?.flatten(1, 2)?;
        ops::copy_batched(&cx, dst, src.broadcast(0, 1)?)?;
    }
    let history = History {
        extent: L,
        staged,
        carries: &hist,
    };
    attn.forward(&cx, x, &history, work, scratch, o)?;
    be.synchronize().unwrap();
    let work: Vec<K> = be.download(wb.ptr(), work_len).unwrap();
    Ok(Run {
        out: be.download(out.ptr(), rows * HIDDEN).unwrap(),
        qn: be.download(qn.ptr(), rows * inner).unwrap(),
        work: work.iter().map(widen).collect(),
    })
}

fn f16_cache_equals_f32_cache_on_the_half_path(be: Arc<dyn Backend>) {
    let ws = weights();
    let ld = Loader::new(be.as_ref(), &ws).with_gemm(GemmPath::Half);
    let attn = SelfAttention::load(&ld, "a", HIDDEN, (HEADS, HEAD_DIM), 1e-6).unwrap();
    // a half cache holds binary16 values
    let h32: Vec<Vec<f32>> = (0..SESSIONS)
        .map(|s| {
            vals(2 * HEADS * L * 2 * HEAD_DIM, 20 + s as u64)
                .iter()
                .map(|&x| f16::from_f32(x * 3.0).to_f32())
                .collect()
        })
        .collect();
    let h16: Vec<Vec<f16>> = h32
        .iter()
        .map(|h| h.iter().map(|&x| f16::from_f32(x)).collect())
        .collect();
    let a = run(&be, GemmPath::Half, &attn, &h32, |x: &f32| *x, L).unwrap();
    let b = run(&be, GemmPath::Half, &attn, &h16, |x: &f16| x.to_f32(), L).unwrap();
    assert_eq!(bits(&b.qn), bits(&a.qn), "qn");
    assert_eq!(bits(&b.work), bits(&a.work), "workspace");
    assert_eq!(bits(&b.out), bits(&a.out), "output");
    assert!(b.out.iter().all(|v| v.is_finite()));
    // the history landed after the new frames of every row
    assert!(a.work.iter().any(|v| *v != 0.0));

    // elsewhere an f16 cache would change bits: refused
    let ld = Loader::new(be.as_ref(), &ws).with_gemm(GemmPath::Invariant);
    let attn = SelfAttention::load(&ld, "a", HIDDEN, (HEADS, HEAD_DIM), 1e-6).unwrap();
    assert!(
        run(
            &be,
            GemmPath::Invariant,
            &attn,
            &h16,
            |x: &f16| x.to_f32(),
            L
        )
        .is_err()
    );
    // an f32 cache is read from the workspace only
    assert!(run(&be, GemmPath::Half, &attn, &h32, |x: &f32| *x, 44).is_err());
}

/// The histories read where they lie (`attention.sdpa_f16_split`) give the bits of the same
/// histories staged whole into the workspace, whatever part is staged: none, the steady state's
/// 44 frames, all but one frame, and a part that ends inside a 64-frame key tile.
fn split_history_equals_staged(be: Arc<dyn Backend>) {
    let ws = weights();
    let ld = Loader::new(be.as_ref(), &ws).with_gemm(GemmPath::Half);
    let attn = SelfAttention::load(&ld, "a", HIDDEN, (HEADS, HEAD_DIM), 1e-6).unwrap();
    let h16: Vec<Vec<f16>> = (0..SESSIONS)
        .map(|s| {
            vals(2 * HEADS * L * 2 * HEAD_DIM, 40 + s as u64)
                .iter()
                .map(|&x| f16::from_f32(x * 3.0))
                .collect()
        })
        .collect();
    let whole = run(&be, GemmPath::Half, &attn, &h16, |x: &f16| x.to_f32(), L).unwrap();
    assert!(whole.out.iter().all(|v| v.is_finite()));
    for staged in [0, 44, 100, L - 1] {
        let split = run(
            &be,
            GemmPath::Half,
            &attn,
            &h16,
            |x: &f16| x.to_f32(),
            staged,
        )
        .unwrap();
        assert_eq!(bits(&split.qn), bits(&whole.qn), "qn, {staged} staged");
        assert_eq!(
            bits(&split.out),
            bits(&whole.out),
            "output, {staged} staged"
        );
    }
    // a session's history that is not the one staged changes the output: the split launch
    // really reads the carries
    let mut other = h16.clone();
    other[1][(HEADS * L - 1) * 2 * HEAD_DIM] = f16::from_f32(7.5);
    let moved = run(&be, GemmPath::Half, &attn, &other, |x: &f16| x.to_f32(), 44).unwrap();
    assert_ne!(bits(&moved.out), bits(&whole.out));
}

#[test]
fn host_split_history_equals_staged() {
    split_history_equals_staged(dcc_runtime::backend::host());
}

#[test]
fn cuda_split_history_equals_staged() {
    match dcc_runtime::backend::cuda(0) {
        Ok(be) => split_history_equals_staged(be),
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
        }
    }
}

#[test]
fn host_f16_cache_equals_f32_cache_on_the_half_path() {
    f16_cache_equals_f32_cache_on_the_half_path(dcc_runtime::backend::host());
}

#[test]
fn cuda_f16_cache_equals_f32_cache_on_the_half_path() {
    match dcc_runtime::backend::cuda(0) {
        Ok(be) => f16_cache_equals_f32_cache_on_the_half_path(be),
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
        }
    }
}
