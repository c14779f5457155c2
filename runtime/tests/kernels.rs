//! Every model kernel (families norm, act, elementwise, attention, copy, embed) on CUDA against
//! its host twin, bit for bit, at the tiny model's sizes and the full model's (DiT hidden 512, 8 heads × 64, 56 new
//! frames over up to 458 + 56 keys, CFG batch 2; conformer dim 512, 8 heads), and the attention
//! kernels at every rows-per-block choice. GEMMs are not here (cuBLAS and the host loops differ by
//! rounding; `backend.rs` checks the GEMM against float64).
//!
//! Without a GPU the CUDA comparison prints its skip reason (and fails under `DCC_REQUIRE_GPU=1`);
//! the Host test runs every case through the Host backend and checks the launches against the
//! slice functions they wrap, and that malformed launch shapes are refused.
//!
//! `cuda_kernel_timings` prints µs per launch at full size (informational, never
//! asserted).

mod common;
mod kernel_cases;

use std::sync::Arc;

use common::data;
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::{attention, elementwise, norm};
use dcc_runtime::{Arg, LaunchDims};
use kernel_cases::{
    A, Case, ENCODER_REL_POS, attention, attention_resident, case, cases, f, layer_norm,
    layer_norm_modulate, lin, model_kernels, rel_pos, rel_pos_batch, rel_pos_global,
};

/// Allocates the case's buffers on `b` (uploaded from `c.bufs`) and binds its arguments to them.
fn upload(b: &dyn Backend, c: &Case) -> (Vec<DeviceBuffer>, Vec<Arg>) {
    let bufs: Vec<_> = c
        .bufs
        .iter()
        .map(|v| b.alloc_from(v, AllocKind::Other).unwrap())
        .collect();
    let args: Vec<Arg> = c
        .args
        .iter()
        .map(|a| match *a {
            A::B(i) => Arg::Ptr(bufs[i].ptr()),
            A::I(v) => Arg::I64(v as i64),
            A::I32(v) => Arg::I32(v),
            A::F(v) => Arg::F32(v),
        })
        .collect();
    (bufs, args)
}

/// Runs a case on `b`; returns every buffer's words after the launch.
fn run(b: &dyn Backend, c: &Case) -> Result<Vec<Vec<u32>>, String> {
    let (bufs, args) = upload(b, c);
    // SAFETY: the buffers were just allocated from `c.bufs`, and every `Case` builder (`cases()`,
    // `attention`, `rel_pos`, `layer_norm`, `kv_pack`, ...) sizes each buffer from the same shape
    // parameters it passes as the kernel's counts and strides (e.g. attention: out and q hold
    // batch·tq·heads·d floats, the cache batch·heads·cap·2d with tk <= cap), outputs distinct
    // from inputs. The malformed cases of `malformed_launch_shapes_are_refused` change only the
    // launch dims, which the twin refuses before touching memory. The buffers live until after
    // the synchronize below.
    unsafe { b.launch(c.kernel, c.dims, &args) }.map_err(|e| e.to_string())?;
    b.synchronize().map_err(|e| e.to_string())?;
    Ok(bufs
        .iter()
        .zip(&c.bufs)
        .map(|(d, v)| b.download::<u32>(d.ptr(), v.len()).unwrap())
        .collect())
}

fn diff(a: &[Vec<u32>], b: &[Vec<u32>]) -> Option<String> {
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        let bad: Vec<usize> = (0..x.len()).filter(|&i| x[i] != y[i]).collect();
        if let Some(&i) = bad.first() {
            let max_rel = bad
                .iter()
                .map(|&i| {
                    let (p, q) = (f32::from_bits(x[i]), f32::from_bits(y[i]));
                    ((p - q).abs() / q.abs().max(1e-30)) as f64
                })
                .fold(0.0f64, f64::max);
            return Some(format!(
                "buffer {k}: {} of {} words differ, first at {i}: cuda {:e} ({:#010x}) vs host {:e} ({:#010x}), max rel {max_rel:.2e}",
                bad.len(),
                x.len(),
                f32::from_bits(x[i]),
                x[i],
                f32::from_bits(y[i]),
                y[i]
            ));
        }
    }
    None
}

#[test]
fn cuda_kernels_match_host_twins() {
    let Some(cuda) = common::cuda() else { return };
    let host = dcc_runtime::backend::host();
    cuda.preload(&model_kernels()).unwrap();
    let mut bad = Vec::new();
    // per kernel: (cases, cases bit-equal)
    let mut tally: Vec<(&str, usize, usize)> =
        model_kernels().iter().map(|k| (k.name, 0, 0)).collect();
    for c in cases() {
        let t = tally.iter_mut().find(|t| t.0 == c.kernel.name).unwrap();
        t.1 += 1;
        let g = run(&**cuda, &c).unwrap_or_else(|e| panic!("{}: cuda: {e}", c.name));
        let h = run(&*host, &c).unwrap_or_else(|e| panic!("{}: host: {e}", c.name));
        match diff(&g, &h) {
            None => {
                println!("bit-equal  {}", c.name);
                t.2 += 1;
            }
            Some(d) => {
                println!("MISMATCH   {}: {d}", c.name);
                bad.push(format!("{}: {d}", c.name));
            }
        }
    }
    for (k, n, eq) in &tally {
        println!("{k}: {eq} of {n} cases bit-equal");
    }
    println!(
        "{}: {} of {} kernels bit-equal to their twins in every case",
        cuda.device_name(),
        tally.iter().filter(|t| t.1 > 0 && t.1 == t.2).count(),
        tally.len()
    );
    assert!(
        bad.is_empty(),
        "{} cases differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The encoder's relative-position attention at its real shapes (a steady chunk's blocks and
/// up-blocks, and the prompt call's 151 tokens and 302 frames), one session and sixteen batched,
/// on CUDA: the staged launch (`rel_pos_dims`, position rows in shared memory) and the
/// global-memory one (`attention_dims`) each bit for bit equal to the host twin.
#[test]
fn cuda_rel_pos_encoder_shapes_match_twin() {
    let Some(cuda) = common::cuda() else { return };
    let host = dcc_runtime::backend::host();
    cuda.preload(&[&attention::REL_POS]).unwrap();
    let shapes = ENCODER_REL_POS.into_iter().chain([
        ("encoder prompt", 151, 151),
        ("encoder prompt up", 302, 302),
    ]);
    let mut bad = Vec::new();
    for (tag, tq, tk) in shapes {
        for batch in [1, 16] {
            let staged = rel_pos_batch(tag, None, batch, 8, tq, tk, 64);
            let w = staged.dims.block.0 as usize / 32;
            assert_eq!(
                staged.dims.shared_bytes as usize,
                attention::rel_pos_staged_bytes(w, tk, 64),
                "{}",
                staged.name
            );
            let want = run(&*host, &staged).unwrap();
            for c in [staged, rel_pos_global(tag, batch, 8, tq, tk, 64)] {
                let got = run(&**cuda, &c).unwrap_or_else(|e| panic!("{}: cuda: {e}", c.name));
                match diff(&got, &want) {
                    None => println!("bit-equal  {} ({} B shared)", c.name, c.dims.shared_bytes),
                    Some(d) => bad.push(format!("{}: {d}", c.name)),
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} cases differ:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn host_launches_run_the_slice_functions() {
    let host = dcc_runtime::backend::host();
    let cs = cases();
    assert!(
        model_kernels()
            .iter()
            .all(|k| cs.iter().any(|c| std::ptr::eq(c.kernel, *k)))
    );
    for c in cs.iter().filter(|c| !c.variant) {
        let out = run(&*host, c).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert!(
            out[0].iter().all(|w| f32::from_bits(*w).is_finite()),
            "{}: non-finite output",
            c.name
        );
        if c.name.contains("rows/block") {
            assert_ne!(out[0], c.bufs[0], "{}: output untouched", c.name);
        }
    }
    // the launch equals the slice function (full-size DiT attention, LayerNorm)
    let c = attention("full", None, 2, 8, 56, 514, 64, 520);
    let out = run(&*host, &c).unwrap();
    let fl = |v: &Vec<u32>| v.iter().map(|w| f32::from_bits(*w)).collect::<Vec<f32>>();
    let (q, kv) = (fl(&c.bufs[1]), fl(&c.bufs[2]));
    let mut want = vec![0.0f32; q.len()];
    let rl = attention::AttnLayout::rows(56, 8, 64);
    attention::attention(
        2,
        8,
        56,
        514,
        64,
        0.125,
        &q,
        rl,
        &kv,
        attention::AttnLayout::kv_cache(8, 520, 64, false),
        &kv,
        attention::AttnLayout::kv_cache(8, 520, 64, true),
        &mut want,
        rl,
    );
    assert_eq!(fl(&out[0]), want);
    let c = layer_norm("full", 112, 512, 512, 512, 1e-6, 0.5);
    let out = run(&*host, &c).unwrap();
    let mut want = vec![0.0f32; 112 * 512];
    let (x, g, b) = (fl(&c.bufs[1]), fl(&c.bufs[2]), fl(&c.bufs[3]));
    norm::layer_norm(112, 512, &x, 512, Some(&g), Some(&b), 1e-6, &mut want, 512);
    assert_eq!(fl(&out[0]), want);
}

#[test]
fn malformed_launch_shapes_are_refused() {
    let host = dcc_runtime::backend::host();
    // blocks that are not whole warps
    let mut c = layer_norm("bad", 4, 64, 64, 64, 1e-5, 0.0);
    c.dims = LaunchDims::linear(4 * 32, 48);
    assert!(run(&*host, &c).unwrap_err().contains("multiple of 32"));
    // too little shared memory for the score rows
    let mut c = attention("bad", Some(4), 1, 2, 8, 100, 32, 100);
    c.dims.shared_bytes -= 4;
    assert!(run(&*host, &c).unwrap_err().contains("shared memory"));
    // head dim and key count bounds of the launch helper
    assert!(attention::attention_dims(2, 56, 514, 129).is_err());
    assert!(attention::attention_dims(2, 56, 20_000, 64).is_err());
    assert_eq!(
        attention::attention_dims(16, 56, 514, 64).unwrap().block.0,
        256
    );
    assert_eq!(
        attention::attention_dims(16, 56, 3000, 64).unwrap().block.0,
        64
    );
    assert_eq!(
        attention::attention_dims(8, 56, 514, 64).unwrap().block.0,
        128
    );
    // resident SDPA: the SRc chunk's 458 keys fit (8 rows, 512 frames of 65 floats + 8 score
    // rows + queries); 3,000 keys do not, and keep the tiled launch
    let r = attention::sdpa_dims(16, 56, 458, 64).unwrap();
    assert_eq!(r.block.0, 256);
    assert_eq!(r.shared_bytes, (2 * 8 * 64 + 8 * 458 + 512 * 65) * 4);
    assert!(r.shared_bytes as usize <= attention::RESIDENT_MAX_SHARED_BYTES);
    assert_eq!(
        attention::sdpa_dims(16, 56, 3000, 64).unwrap(),
        attention::attention_dims(16, 56, 3000, 64).unwrap()
    );
    // staged rel-pos: attention_dims's rows per block and grid, the position rows of one key
    // tile (rows + 63 of d + 1 floats) added; the Host accepts both launches alike
    for (outer, tq, tk, d) in [(128, 50, 452, 64), (8, 25, 226, 64), (2, 9, 40, 128)] {
        let base = attention::attention_dims(outer, tq, tk, d).unwrap();
        let r = attention::rel_pos_dims(outer, tq, tk, d).unwrap();
        let w = base.block.0 as usize / 32;
        assert_eq!((r.grid, r.block), (base.grid, base.block));
        assert_eq!(
            r.shared_bytes as usize,
            base.shared_bytes as usize + (w + 63) * (d + 1) * 4
        );
        assert!(r.shared_bytes as usize <= attention::REL_POS_MAX_SHARED_BYTES);
    }
    let staged = rel_pos_batch("staged", None, 2, 2, 9, 70, 32);
    let global = rel_pos_global("staged", 2, 2, 9, 70, 32);
    assert!(staged.dims.shared_bytes > global.dims.shared_bytes);
    assert_eq!(run(&*host, &staged).unwrap(), run(&*host, &global).unwrap());
    assert!(attention::rel_pos_dims(2, 56, 514, 129).is_err());
    assert!(attention::rel_pos_dims_with(9, 2, 56, 514, 64).is_err());
}

/// µs per launch of the hot kernels at full size (printed, never asserted).
#[test]
fn cuda_kernel_timings() {
    let Some(cuda) = common::cuda() else { return };
    cuda.preload(&model_kernels()).unwrap();
    let reps = 50;
    let mut timed: Vec<Case> = Vec::new();
    for w in [1, 2, 4, 8] {
        timed.push(attention("full", Some(w), 2, 8, 56, 514, 64, 520));
    }
    timed.push(attention("full prompt", None, 2, 8, 308, 308, 64, 320));
    timed.push(attention_resident("full", 2, 8, 56, 458, 64, 520));
    timed.push(attention("full 458", None, 2, 8, 56, 458, 64, 520));
    for w in [2, 4, 8] {
        timed.push(rel_pos("full up", Some(w), 8, 56, 514, 64));
    }
    timed.push(rel_pos("full prompt", None, 8, 154, 154, 64));
    for (tag, tq, tk) in ENCODER_REL_POS {
        timed.push(rel_pos(tag, None, 8, tq, tk, 64));
        timed.push(rel_pos_batch(tag, None, 16, 8, tq, tk, 64));
        timed.push(rel_pos_global(tag, 16, 8, tq, tk, 64));
    }
    timed.push(layer_norm("full dit", 112, 512, 512, 512, 1e-6, 0.5));
    timed.push(layer_norm("full qk", 896, 64, 64, 64, 1e-6, 0.0));
    timed.push(layer_norm_modulate("full", 112, 512));
    let fused = cases();
    for name in [
        "act.apply op1 n229381",
        "act.apply op2 n229381",
        "norm.qk_pack full",
        "norm.gated_add_modulate rows112 dim512",
        "copy.im2col b2 frames56 k3 dim512",
        "norm.layer_norm_act_im2col op1 b2 frames56 k3 dim512 (block per row)",
    ] {
        if let Some(c) = fused.iter().find(|c| c.name.starts_with(name)) {
            timed.push(case(
                c.name.clone(),
                c.kernel,
                c.dims,
                c.bufs.clone(),
                c.args.clone(),
            ));
        }
    }
    timed.push(case(
        "elementwise.add n1 (launch floor)",
        &elementwise::ADD,
        lin(1),
        vec![f(1, 1), f(2, 1)],
        vec![A::B(0), A::B(1), A::I(1)],
    ));
    for c in &timed {
        println!("{}: {:.2} µs/launch", c.name, time(&cuda, c, reps));
    }
}

/// µs per DiT GEMM at full size (`Linear` layout, 112 rows = 2 × 56 frames): cuBLAS `gemm`
/// without bias and cuBLASLt `gemm_bias` (printed, never asserted).
#[test]
fn cuda_gemm_timings() {
    let Some(cuda) = common::cuda() else { return };
    let rows = 112;
    for (name, o, i) in [
        ("qkv", 1536usize, 512usize),
        ("proj", 512, 512),
        ("conv", 512, 1536),
        ("fc1", 2048, 512),
        ("fc2", 512, 2048),
        ("ada_all", 16 * 9 * 512 + 1024, 512),
    ] {
        let n = if name == "ada_all" { 1 } else { rows };
        let w = cuda.alloc_from(&data(1, o * i), AllocKind::Other).unwrap();
        let x = cuda.alloc_from(&data(2, n * i), AllocKind::Other).unwrap();
        let bias = cuda.alloc_from(&data(3, o), AllocKind::Other).unwrap();
        let y = cuda.alloc(n * o * 4, AllocKind::Other).unwrap();
        let g = dcc_runtime::backend::Gemm {
            trans_a: true,
            trans_b: false,
            m: o,
            n,
            k: i,
            alpha: 1.0,
            a: w.ptr(),
            lda: i,
            stride_a: 0,
            b: x.ptr(),
            ldb: i,
            stride_b: 0,
            beta: 0.0,
            c: y.ptr(),
            ldc: o,
            stride_c: 0,
            batch: 1,
        };
        let reps = 50;
        let mut us = [0.0f64; 2];
        for (v, u) in us.iter_mut().enumerate() {
            let run = || {
                if v == 0 {
                    cuda.gemm(&g).unwrap()
                } else {
                    cuda.gemm_bias(&g, bias.ptr()).unwrap()
                }
            };
            for _ in 0..3 {
                run();
            }
            cuda.synchronize().unwrap();
            let m0 = cuda.marker().unwrap();
            for _ in 0..reps {
                run();
            }
            let m1 = cuda.marker().unwrap();
            *u = cuda.elapsed_ms(&m0, &m1).unwrap() * 1e3 / reps as f64;
        }
        let gflop = 2.0 * (o * n * i) as f64 / 1e9;
        println!(
            "gemm {name} m{o} n{n} k{i}: cublas {:.2} µs, cublasLt+bias {:.2} µs ({:.1} TFLOP/s)",
            us[0],
            us[1],
            gflop / us[1] * 1e3
        );
    }
}

fn time(b: &Arc<dyn Backend>, c: &Case, reps: usize) -> f64 {
    // `_bufs` (not `_`): the buffers stay alive until the end of the function.
    let (_bufs, args) = upload(b.as_ref(), c);
    for _ in 0..3 {
        // SAFETY: as in `run`: buffers allocated just above from the case's sized vectors, alive
        // until after the synchronize and the timed loop.
        unsafe { b.launch(c.kernel, c.dims, &args) }.unwrap();
    }
    b.synchronize().unwrap();
    let m0 = b.marker().unwrap();
    for _ in 0..reps {
        // SAFETY: as above.
        unsafe { b.launch(c.kernel, c.dims, &args) }.unwrap();
    }
    let m1 = b.marker().unwrap();
    b.elapsed_ms(&m0, &m1).unwrap() * 1e3 / reps as f64
}
