//! Every Token2Wav kernel (`dcc_kernels::token2wav::defs`) on CUDA against its host twin, bit for
//! bit, at the tiny model's sizes and the full model's (DiT hidden 512, 8 heads × 64, 56 new
//! frames over up to 458 + 56 keys, CFG batch 2; conformer dim 512, 8 heads), and the attention
//! kernels at every rows-per-block choice. GEMMs are not here (cuBLAS and the host loops differ by
//! rounding; `backend.rs` checks the GEMM against float64).
//!
//! Without a GPU the CUDA comparison prints its skip reason (and fails under `DCC_REQUIRE_GPU=1`);
//! the Host test runs every case through the Host backend and checks the launches against the
//! slice functions they wrap, and that malformed launch shapes are refused.
//!
//! `cuda_token2wav_kernel_timings` prints µs per launch at full size (informational, never
//! asserted).

mod common;

use std::sync::Arc;

use common::data;
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::token2wav::{self as t2w, defs as kd};
use dcc_runtime::{Arg, KernelDef, LaunchDims};

/// One launch argument: a buffer of the case (by index), a null pointer, or a scalar.
#[derive(Clone, Copy, Debug)]
enum A {
    B(usize),
    I(usize),
    I32(i32),
    F(f32),
}

struct Case {
    name: String,
    kernel: &'static KernelDef,
    dims: LaunchDims,
    /// Initial contents of every buffer (f32 bits, or u32 ids), all compared after the launch.
    bufs: Vec<Vec<u32>>,
    args: Vec<A>,
    /// A rows-per-block variant of another case (same arithmetic; CUDA only).
    variant: bool,
}

fn f(seed: u64, n: usize) -> Vec<u32> {
    data(seed, n).iter().map(|x| x.to_bits()).collect()
}

fn scaled(seed: u64, n: usize, s: f32, o: f32) -> Vec<u32> {
    data(seed, n)
        .iter()
        .map(|x| (x * s + o).to_bits())
        .collect()
}

fn zeros(n: usize) -> Vec<u32> {
    vec![0; n]
}

fn lin(n: usize) -> LaunchDims {
    LaunchDims::linear(n, 128)
}

fn rows(r: usize) -> LaunchDims {
    LaunchDims::linear(kd::row_threads(r), 128)
}

fn case(
    name: impl Into<String>,
    kernel: &'static KernelDef,
    dims: LaunchDims,
    bufs: Vec<Vec<u32>>,
    args: Vec<A>,
) -> Case {
    Case {
        name: name.into(),
        kernel,
        dims,
        bufs,
        args,
        variant: false,
    }
}

/// DiT self-attention: `q` `[batch, tq, heads·d]`, cache `[batch, heads, cap, 2d]`.
#[allow(clippy::too_many_arguments)]
fn attention(
    tag: &str,
    warps: Option<usize>,
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    cap: usize,
) -> Case {
    let dims = match warps {
        Some(w) => kd::attention_dims_with(w, batch * heads, tq, tk, d),
        None => kd::attention_dims(batch * heads, tq, tk, d),
    }
    .unwrap();
    let scale = 1.0 / (d as f32).sqrt();
    let mut c = case(
        format!(
            "attention {tag} b{batch} h{heads} tq{tq} tk{tk} d{d} ({} rows/block)",
            dims.block.0 / 32
        ),
        &kd::ATTENTION,
        dims,
        vec![
            zeros(batch * tq * heads * d),
            scaled(11, batch * tq * heads * d, 3.0, 0.0),
            scaled(12, batch * heads * cap * 2 * d, 3.0, 0.0),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::I(batch),
            A::I(heads),
            A::I(tq),
            A::I(tk),
            A::I(d),
            A::I(cap),
            A::F(scale),
        ],
    );
    c.variant = warps.is_some_and(|w| w != kd::ATTN_WARPS);
    c
}

/// Conformer relative-position attention (batch 1).
fn rel_pos(tag: &str, warps: Option<usize>, heads: usize, tq: usize, tk: usize, d: usize) -> Case {
    let cap = tk + 7;
    let hd = heads * d;
    let dims = match warps {
        Some(w) => kd::attention_dims_with(w, heads, tq, tk, d),
        None => kd::attention_dims(heads, tq, tk, d),
    }
    .unwrap();
    let mut c = case(
        format!(
            "rel_pos_attention {tag} h{heads} tq{tq} tk{tk} d{d} ({} rows/block)",
            dims.block.0 / 32
        ),
        &kd::REL_POS_ATTENTION,
        dims,
        vec![
            zeros(tq * hd),
            scaled(21, tq * hd, 2.0, 0.0),
            scaled(22, hd, 0.5, 0.0),
            scaled(23, hd, 0.5, 0.0),
            scaled(24, heads * cap * 2 * d, 2.0, 0.0),
            scaled(25, (2 * tk - 1) * hd, 2.0, 0.0),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::B(4),
            A::B(5),
            A::I(heads),
            A::I(tq),
            A::I(tk),
            A::I(d),
            A::I(cap),
        ],
    );
    c.variant = warps.is_some_and(|w| w != kd::ATTN_WARPS);
    c
}

#[allow(clippy::too_many_arguments)]
fn layer_norm(
    tag: &str,
    r: usize,
    dim: usize,
    ldx: usize,
    ldy: usize,
    eps: f32,
    offset: f32,
) -> Case {
    case(
        format!("layer_norm {tag} rows{r} dim{dim} ldx{ldx} ldy{ldy}"),
        &kd::LAYER_NORM,
        rows(r),
        vec![
            zeros((r - 1) * ldy + dim),
            scaled(31, (r - 1) * ldx + dim, 4.0, offset),
            scaled(32, dim, 1.0, 1.0),
            f(33, dim),
        ],
        vec![
            A::B(0),
            A::I(ldy),
            A::B(1),
            A::I(ldx),
            A::B(2),
            A::B(3),
            A::I(r),
            A::I(dim),
            A::F(eps),
        ],
    )
}

fn layer_norm_modulate(tag: &str, r: usize, dim: usize) -> Case {
    case(
        format!("layer_norm_modulate {tag} rows{r} dim{dim}"),
        &kd::LAYER_NORM_MODULATE,
        rows(r),
        vec![
            zeros(r * dim),
            scaled(41, r * dim, 5.0, 0.3),
            f(42, dim),
            f(43, dim),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::I(r),
            A::I(dim),
            A::F(1e-6),
        ],
    )
}

fn l2(r: usize, dim: usize) -> Case {
    case(
        format!("l2_normalize rows{r} dim{dim}"),
        &kd::L2_NORMALIZE,
        rows(r),
        vec![zeros(r * dim), scaled(51, r * dim, 7.0, 0.0)],
        vec![A::B(0), A::B(1), A::I(r), A::I(dim), A::F(1e-12)],
    )
}

fn kv_pack(
    tag: &str,
    cap: usize,
    t0: usize,
    batch: usize,
    heads: usize,
    t: usize,
    d: usize,
) -> Case {
    let ld = heads * d + 3;
    let n_in = (batch * t - 1) * ld + heads * d;
    case(
        format!("kv_pack {tag} cap{cap} t0{t0} b{batch} h{heads} t{t} d{d}"),
        &kd::KV_PACK,
        lin(batch * heads * t * d),
        vec![f(61, batch * heads * cap * 2 * d), f(62, n_in), f(63, n_in)],
        vec![
            A::B(0),
            A::I(cap),
            A::I(t0),
            A::B(1),
            A::B(2),
            A::I(ld),
            A::I(batch),
            A::I(heads),
            A::I(t),
            A::I(d),
        ],
    )
}

/// Every kernel at tiny and full sizes.
fn cases() -> Vec<Case> {
    let mut c = Vec::new();
    // embedding: 56 tokens of the full model (one id past the vocabulary: zero row), tiny
    for (tag, n, dim) in [("full", 56usize, 512usize), ("tiny", 28, 64)] {
        let mut ids: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) % 6561)
            .collect();
        ids[3] = 7000;
        c.push(case(
            format!("embedding {tag} n{n} dim{dim}"),
            &kd::EMBEDDING,
            lin(n * dim),
            vec![zeros(n * dim), ids, f(1, 6561 * dim)],
            vec![A::B(0), A::B(1), A::B(2), A::I(n), A::I(dim), A::I(6561)],
        ));
    }
    // copy_block: concat into an offset with repeat, bias broadcast (lds = 0), im2col rows
    c.push(case(
        "copy_block rep2 rows112 cols512",
        &kd::COPY_BLOCK,
        lin(112 * 512),
        vec![f(2, 111 * 1024 + 512), f(3, 55 * 512 + 512)],
        vec![
            A::B(0),
            A::I(1024),
            A::B(1),
            A::I(512),
            A::I(112),
            A::I(512),
            A::I(2),
        ],
    ));
    c.push(case(
        "copy_block broadcast rows56 cols2048",
        &kd::COPY_BLOCK,
        lin(56 * 2048),
        vec![zeros(56 * 2048), f(4, 2048)],
        vec![
            A::B(0),
            A::I(2048),
            A::B(1),
            A::I(0),
            A::I(56),
            A::I(2048),
            A::I(1),
        ],
    ));
    c.push(case(
        "copy_block im2col rows56 cols2048 lds512",
        &kd::COPY_BLOCK,
        lin(56 * 2048),
        vec![zeros(56 * 2048), f(5, 59 * 512)],
        vec![
            A::B(0),
            A::I(2048),
            A::B(1),
            A::I(512),
            A::I(56),
            A::I(2048),
            A::I(1),
        ],
    ));
    c.push(case(
        "transpose rows80 cols514",
        &kd::TRANSPOSE,
        lin(80 * 514),
        vec![zeros(513 * 96 + 80), f(6, 79 * 520 + 514)],
        vec![A::B(0), A::I(96), A::B(1), A::I(520), A::I(80), A::I(514)],
    ));
    // norms
    c.push(layer_norm("full dit", 112, 512, 512, 512, 1e-6, 0.5));
    c.push(layer_norm("full qk", 896, 64, 64, 64, 1e-6, 0.0));
    c.push(layer_norm("full strided", 56, 512, 1024, 600, 1e-5, -2.0));
    c.push(layer_norm("full prompt", 308, 512, 512, 512, 1e-5, 1.0));
    c.push(layer_norm("tiny", 50, 64, 64, 64, 1e-5, 0.0));
    c.push(layer_norm("odd", 7, 100, 101, 100, 1e-5, 3.0));
    c.push(layer_norm_modulate("full", 112, 512));
    c.push(layer_norm_modulate("tiny", 100, 64));
    c.push(layer_norm_modulate("odd", 3, 33));
    c.push(layer_norm("wide", 5, 1030, 1030, 1031, 1e-5, 0.1));
    c.push(layer_norm_modulate("wide", 3, 700));
    c.push(l2(1, 192));
    c.push(l2(5, 80));
    // elementwise
    for op in 0..5 {
        let n = 112 * 2048 + 5;
        c.push(case(
            format!("act op{op} n{n}"),
            &kd::ACT,
            lin(n),
            vec![scaled(70 + op as u64, n, 12.0, 0.0)],
            vec![A::B(0), A::I(n), A::I32(op), A::F(0.1)],
        ));
    }
    // SiLU and Mish over the whole range of the single-precision exp (overflow, the subnormal
    // results, the cut-offs at −103.97 / 88.72 and Mish's at 20), densely
    for op in [0, 1] {
        let n = 1 << 20;
        let xs: Vec<u32> = (0..n)
            .map(|i| (-110.0f32 + 200.0 * (i as f32 / n as f32)).to_bits())
            .collect();
        c.push(case(
            format!("act op{op} sweep [-110, 90) n{n}"),
            &kd::ACT,
            lin(n),
            vec![xs],
            vec![A::B(0), A::I(n), A::I32(op), A::F(0.1)],
        ));
    }
    c.push(case(
        "add n57344",
        &kd::ADD,
        lin(112 * 512),
        vec![f(8, 112 * 512), f(9, 112 * 512)],
        vec![A::B(0), A::B(1), A::I(112 * 512)],
    ));
    c.push(case(
        "gated_add rows112 dim512",
        &kd::GATED_ADD,
        lin(112 * 512),
        vec![f(10, 112 * 512), f(11, 512), f(12, 112 * 512)],
        vec![A::B(0), A::B(1), A::B(2), A::I(112), A::I(512)],
    ));
    c.push(case(
        "cfg_euler n4480",
        &kd::CFG_EULER,
        lin(56 * 80),
        vec![f(13, 56 * 80), f(14, 2 * 56 * 80)],
        vec![A::B(0), A::B(1), A::I(56 * 80), A::F(0.7), A::F(0.0913)],
    ));
    for (dim, t) in [(256usize, 0.37f32), (255, 0.999), (16, 0.0)] {
        c.push(case(
            format!("timestep_embedding dim{dim} t{t}"),
            &kd::TIMESTEP_EMBEDDING,
            lin(dim / 2),
            vec![f(15, dim)],
            vec![A::B(0), A::I(dim), A::F(t), A::F(1000.0), A::F(10000.0)],
        ));
    }
    c.push(kv_pack("dit", 520, 0, 2, 8, 56, 64));
    c.push(kv_pack("conformer", 300, 229, 1, 8, 28, 64));
    c.push(kv_pack("tiny", 460, 0, 2, 2, 50, 32));
    // attention: full chunk (56 new frames over 458 + 56 keys) at every rows-per-block choice,
    // the full prompt call, tiny
    for w in [1, 2, 4, 8] {
        c.push(attention("full", Some(w), 2, 8, 56, 514, 64, 520));
    }
    c.push(attention("full prompt", None, 2, 8, 308, 308, 64, 320));
    c.push(attention("full 1-key", None, 2, 8, 5, 1, 64, 4));
    c.push(attention("tiny", None, 2, 2, 50, 452, 32, 460));
    c.push(attention("d128 odd", None, 1, 3, 9, 70, 128, 70));
    c.push(attention("d40 generic", None, 1, 3, 9, 70, 40, 75));
    for w in [1, 2, 4, 8] {
        c.push(rel_pos("full up", Some(w), 8, 56, 514, 64));
    }
    c.push(rel_pos("full blocks", None, 8, 28, 257, 64));
    c.push(rel_pos("full prompt", None, 8, 154, 154, 64));
    c.push(rel_pos("tiny", None, 2, 50, 250, 32));
    c.push(rel_pos("d40 odd", None, 3, 5, 33, 40));
    c.push(rel_pos("d128", None, 2, 9, 40, 128));
    // fused DiT ops
    for (tag, batch, heads, t, d, cap, t0) in [
        ("full", 2usize, 8usize, 56usize, 64usize, 520usize, 0usize),
        ("tiny", 2, 2, 50, 32, 460, 3),
    ] {
        let inner = heads * d;
        let ld = 3 * inner + 5;
        c.push(case(
            format!("qk_norm_pack {tag} b{batch} h{heads} t{t} d{d} cap{cap} t0{t0}"),
            &kd::QK_NORM_PACK,
            rows(2 * batch * t * heads),
            vec![
                zeros(batch * t * inner),
                f(81, batch * heads * cap * 2 * d),
                scaled(82, (batch * t - 1) * ld + 3 * inner, 4.0, 0.5),
                scaled(83, d, 1.0, 1.0),
                f(84, d),
                scaled(85, d, 1.0, 1.0),
                f(86, d),
            ],
            vec![
                A::B(0),
                A::B(1),
                A::I(cap),
                A::I(t0),
                A::B(2),
                A::I(ld),
                A::B(3),
                A::B(4),
                A::B(5),
                A::B(6),
                A::I(batch),
                A::I(heads),
                A::I(t),
                A::I(d),
                A::F(1e-5),
            ],
        ));
    }
    for (r, dim) in [(112usize, 512usize), (100, 64), (3, 700)] {
        c.push(case(
            format!("gated_norm_modulate rows{r} dim{dim}"),
            &kd::GATED_NORM_MODULATE,
            rows(r),
            vec![
                scaled(91, r * dim, 3.0, 0.2),
                f(92, dim),
                scaled(93, r * dim, 2.0, 0.0),
                zeros(r * dim),
                f(94, dim),
                f(95, dim),
            ],
            vec![
                A::B(0),
                A::B(1),
                A::B(2),
                A::B(3),
                A::B(4),
                A::B(5),
                A::I(r),
                A::I(dim),
                A::F(1e-6),
            ],
        ));
    }
    for (frames, k, dim) in [(56usize, 3usize, 512usize), (1, 3, 64), (50, 5, 32)] {
        let (batch, src_b, ctx_b) = (2, frames * dim + 7, 2 * (k - 1) * dim);
        c.push(case(
            format!("conv_im2col b{batch} frames{frames} k{k} dim{dim}"),
            &kd::CONV_IM2COL,
            lin(batch * frames * k * dim),
            vec![
                zeros(batch * frames * k * dim),
                f(101, src_b + frames * dim),
                f(102, ctx_b + (k - 1) * dim),
            ],
            vec![
                A::B(0),
                A::B(1),
                A::I(src_b),
                A::B(2),
                A::I(ctx_b),
                A::I(batch),
                A::I(frames),
                A::I(k),
                A::I(dim),
            ],
        ));
        for op in [1, 0] {
            c.push(case(
                format!("layer_norm_act_im2col op{op} b{batch} frames{frames} k{k} dim{dim}"),
                &kd::LAYER_NORM_ACT_IM2COL,
                rows(batch * (frames + k - 1)),
                vec![
                    zeros(batch * frames * k * dim),
                    scaled(103, batch * frames * dim, 5.0, 0.1),
                    scaled(104, dim, 1.0, 1.0),
                    f(105, dim),
                    f(106, ctx_b + (k - 1) * dim),
                ],
                vec![
                    A::B(0),
                    A::B(1),
                    A::B(2),
                    A::B(3),
                    A::F(1e-5),
                    A::I32(op),
                    A::F(0.0),
                    A::B(4),
                    A::I(ctx_b),
                    A::I(batch),
                    A::I(frames),
                    A::I(k),
                    A::I(dim),
                ],
            ));
        }
    }
    // the launch DeviceFlow uses: one 256-thread block per row
    for (frames, k, dim) in [(56usize, 3usize, 512usize), (50, 3, 64)] {
        let (batch, ctx_b) = (2usize, 2 * (k - 1) * dim);
        let mut x = case(
            format!(
                "layer_norm_act_im2col op1 b{batch} frames{frames} k{k} dim{dim} (block per row)"
            ),
            &kd::LAYER_NORM_ACT_IM2COL,
            LaunchDims::blocks((batch * (frames + k - 1)) as u32, kd::LN_ACT_BLOCK),
            vec![
                zeros(batch * frames * k * dim),
                scaled(113, batch * frames * dim, 5.0, 0.1),
                scaled(114, dim, 1.0, 1.0),
                f(115, dim),
                f(116, ctx_b + (k - 1) * dim),
            ],
            vec![
                A::B(0),
                A::B(1),
                A::B(2),
                A::B(3),
                A::F(1e-5),
                A::I32(1),
                A::F(0.0),
                A::B(4),
                A::I(ctx_b),
                A::I(batch),
                A::I(frames),
                A::I(k),
                A::I(dim),
            ],
        );
        x.variant = true;
        c.push(x);
    }
    c.push(case(
        "layer_norm_act_im2col wide b1 frames3 k3 dim700",
        &kd::LAYER_NORM_ACT_IM2COL,
        rows(5),
        vec![
            zeros(3 * 3 * 700),
            scaled(107, 3 * 700, 5.0, 0.1),
            scaled(108, 700, 1.0, 1.0),
            f(109, 700),
            f(110, 2 * 700),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::F(1e-5),
            A::I32(1),
            A::F(0.0),
            A::B(4),
            A::I(0),
            A::I(1),
            A::I(3),
            A::I(3),
            A::I(700),
        ],
    ));
    c.push(case(
        "copy_batched b2 rows2 cols1024",
        &kd::COPY_BATCHED,
        lin(2 * 2 * 1024),
        vec![f(111, 2 * 2048 + 1024), f(112, 3 * 4000)],
        vec![
            A::B(0),
            A::I(2048),
            A::I(1024),
            A::B(1),
            A::I(1500),
            A::I(4000),
            A::I(2),
            A::I(2),
            A::I(1024),
        ],
    ));
    c
}

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
fn cuda_token2wav_kernels_match_host_twins() {
    let Some(cuda) = common::cuda() else { return };
    let host = dcc_runtime::backend::host();
    cuda.preload(kd::KERNELS).unwrap();
    let mut bad = Vec::new();
    // per kernel: (cases, cases bit-equal)
    let mut tally: Vec<(&str, usize, usize)> = kd::KERNELS.iter().map(|k| (k.name, 0, 0)).collect();
    for c in cases() {
        let t = tally.iter_mut().find(|t| t.0 == c.kernel.name).unwrap();
        t.1 += 1;
        let g = run(&*cuda, &c).unwrap_or_else(|e| panic!("{}: cuda: {e}", c.name));
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

#[test]
fn host_launches_run_the_slice_functions() {
    let host = dcc_runtime::backend::host();
    let cs = cases();
    assert!(
        kd::KERNELS
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
    let rl = t2w::AttnLayout::rows(56, 8, 64);
    t2w::attention(
        2,
        8,
        56,
        514,
        64,
        0.125,
        &q,
        rl,
        &kv,
        t2w::AttnLayout::kv_cache(8, 520, 64, false),
        &kv,
        t2w::AttnLayout::kv_cache(8, 520, 64, true),
        &mut want,
        rl,
    );
    assert_eq!(fl(&out[0]), want);
    let c = layer_norm("full", 112, 512, 512, 512, 1e-6, 0.5);
    let out = run(&*host, &c).unwrap();
    let mut want = vec![0.0f32; 112 * 512];
    let (x, g, b) = (fl(&c.bufs[1]), fl(&c.bufs[2]), fl(&c.bufs[3]));
    t2w::layer_norm(112, 512, &x, 512, Some(&g), Some(&b), 1e-6, &mut want, 512);
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
    assert!(kd::attention_dims(2, 56, 514, 129).is_err());
    assert!(kd::attention_dims(2, 56, 20_000, 64).is_err());
    assert_eq!(kd::attention_dims(16, 56, 514, 64).unwrap().block.0, 256);
    assert_eq!(kd::attention_dims(16, 56, 3000, 64).unwrap().block.0, 64);
    assert_eq!(kd::attention_dims(8, 56, 514, 64).unwrap().block.0, 128);
}

/// µs per launch of the hot kernels at full size (printed, never asserted).
#[test]
fn cuda_token2wav_kernel_timings() {
    let Some(cuda) = common::cuda() else { return };
    cuda.preload(kd::KERNELS).unwrap();
    let reps = 50;
    let mut timed: Vec<Case> = Vec::new();
    for w in [1, 2, 4, 8] {
        timed.push(attention("full", Some(w), 2, 8, 56, 514, 64, 520));
    }
    timed.push(attention("full prompt", None, 2, 8, 308, 308, 64, 320));
    for w in [2, 4, 8] {
        timed.push(rel_pos("full up", Some(w), 8, 56, 514, 64));
    }
    timed.push(rel_pos("full prompt", None, 8, 154, 154, 64));
    timed.push(layer_norm("full dit", 112, 512, 512, 512, 1e-6, 0.5));
    timed.push(layer_norm("full qk", 896, 64, 64, 64, 1e-6, 0.0));
    timed.push(layer_norm_modulate("full", 112, 512));
    let fused = cases();
    for name in [
        "act op1 n229381",
        "act op2 n229381",
        "qk_norm_pack full",
        "gated_norm_modulate rows112 dim512",
        "conv_im2col b2 frames56 k3 dim512",
        "layer_norm_act_im2col op1 b2 frames56 k3 dim512 (block per row)",
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
        "add n1 (launch floor)",
        &kd::ADD,
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
fn cuda_token2wav_gemm_timings() {
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
