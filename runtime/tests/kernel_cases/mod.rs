//! The launch cases of `kernels.rs`: every model kernel (families norm, act, elementwise,
//! attention, copy, embed) at the tiny model's sizes and the full model's, each buffer sized from
//! the same shape parameters it passes as the kernel's counts and strides.

use dcc_runtime::kernels::{act, attention, conv, copy, elementwise, embed, norm, signal};
use dcc_runtime::{KernelDef, LaunchDims};

use super::common::data;

mod shapes;
mod vocoder;

pub use shapes::{
    attention, attention_resident, layer_norm, layer_norm_modulate, rel_pos, rel_pos_batch,
    rel_pos_global,
};
use shapes::{kv_pack, l2};

/// Every kernel of the model families.
pub fn model_kernels() -> Vec<&'static KernelDef> {
    [
        norm::KERNELS,
        act::KERNELS,
        elementwise::KERNELS,
        attention::KERNELS,
        copy::KERNELS,
        embed::KERNELS,
        conv::KERNELS,
        signal::KERNELS,
    ]
    .concat()
}

/// One launch argument: a buffer of the case (by index), a null pointer, or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum A {
    B(usize),
    I(usize),
    I32(i32),
    F(f32),
}

pub struct Case {
    pub name: String,
    pub kernel: &'static KernelDef,
    pub dims: LaunchDims,
    /// Initial contents of every buffer (f32 bits, or u32 ids), all compared after the launch.
    pub bufs: Vec<Vec<u32>>,
    pub args: Vec<A>,
    /// A launch variant of another case (rows per block, or the rel-pos kernel's global-memory
    /// positions; same arithmetic; CUDA only).
    pub variant: bool,
}

pub fn f(seed: u64, n: usize) -> Vec<u32> {
    data(seed, n).iter().map(|x| x.to_bits()).collect()
}

pub(crate) fn scaled(seed: u64, n: usize, s: f32, o: f32) -> Vec<u32> {
    data(seed, n)
        .iter()
        .map(|x| (x * s + o).to_bits())
        .collect()
}

pub(crate) fn zeros(n: usize) -> Vec<u32> {
    vec![0; n]
}

/// The encoder's rel-pos shapes `(tag, tq, tk)` (8 heads of 64): a steady chunk's token-clock
/// blocks (25 tokens over the 151 + 50 kept and the chunk's 25) and frame-clock up-blocks (50
/// frames over 302 + 100 and the chunk's 50).
pub const ENCODER_REL_POS: [(&str, usize, usize); 2] =
    [("encoder blocks", 25, 226), ("encoder up", 50, 452)];

pub fn lin(n: usize) -> LaunchDims {
    LaunchDims::linear(n, 128)
}

pub(crate) fn rows(r: usize) -> LaunchDims {
    LaunchDims::linear(norm::row_threads(r), 128)
}

pub fn case(
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

/// Every kernel at tiny and full sizes.
pub fn cases() -> Vec<Case> {
    let mut c = Vec::new();
    // embedding: 56 tokens of the full model (one id past the vocabulary: zero row), tiny
    for (tag, n, dim) in [("full", 56usize, 512usize), ("tiny", 28, 64)] {
        let mut ids: Vec<u32> = (0..n as u32)
            .map(|i| i.wrapping_mul(2_654_435_761) % 6561)
            .collect();
        ids[3] = 7000;
        c.push(case(
            format!("embed.gather {tag} n{n} dim{dim}"),
            &embed::GATHER,
            lin(n * dim),
            vec![zeros(n * dim), ids, f(1, 6561 * dim)],
            vec![A::B(0), A::B(1), A::B(2), A::I(n), A::I(dim), A::I(6561)],
        ));
    }
    // copy_block: concat into an offset with repeat, bias broadcast (lds = 0), im2col rows
    c.push(case(
        "copy.block rep2 rows112 cols512",
        &copy::BLOCK,
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
        "copy.block broadcast rows56 cols2048",
        &copy::BLOCK,
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
        "copy.block im2col rows56 cols2048 lds512",
        &copy::BLOCK,
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
        "copy.transpose rows80 cols514",
        &copy::TRANSPOSE,
        lin(80 * 514),
        vec![zeros(513 * 96 + 80), f(6, 79 * 520 + 514)],
        vec![
            A::B(0),
            A::I(0),
            A::I(96),
            A::B(1),
            A::I(0),
            A::I(520),
            A::I(1),
            A::I(80),
            A::I(514),
        ],
    ));
    // sixteen sessions' mels [80, 56] from their rows [56, 80] in one launch
    c.push(case(
        "copy.transpose batch16 rows56 cols80",
        &copy::TRANSPOSE,
        lin(16 * 56 * 80),
        vec![zeros(16 * 80 * 56), f(7, 16 * 56 * 80)],
        vec![
            A::B(0),
            A::I(80 * 56),
            A::I(56),
            A::B(1),
            A::I(56 * 80),
            A::I(80),
            A::I(16),
            A::I(56),
            A::I(80),
        ],
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
    // the fp16 modulate: the same shapes, its own entry
    for (tag, r, dim) in [("full", 112, 512), ("odd", 3, 33), ("wide", 3, 700)] {
        let mut m = layer_norm_modulate(tag, r, dim);
        m.kernel = &norm::LAYER_NORM_MODULATE_F16;
        m.name = m.name.replacen("modulate", "modulate_f16", 1);
        c.push(m);
    }
    c.push(l2(1, 192));
    c.push(l2(5, 80));
    // elementwise
    for op in 0..5 {
        let n = 112 * 2048 + 5;
        c.push(case(
            format!("act.apply op{op} n{n}"),
            &act::APPLY,
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
            format!("act.apply op{op} sweep [-110, 90) n{n}"),
            &act::APPLY,
            lin(n),
            vec![xs],
            vec![A::B(0), A::I(n), A::I32(op), A::F(0.1)],
        ));
    }
    c.push(case(
        "elementwise.add n57344",
        &elementwise::ADD,
        lin(112 * 512),
        vec![f(8, 112 * 512), f(9, 112 * 512)],
        vec![A::B(0), A::B(1), A::I(112 * 512)],
    ));
    c.push(case(
        "elementwise.gated_add rows112 dim512",
        &elementwise::GATED_ADD,
        lin(112 * 512),
        vec![f(10, 112 * 512), f(11, 512), f(12, 112 * 512)],
        vec![A::B(0), A::B(1), A::B(2), A::I(112), A::I(512)],
    ));
    // one session's rows, and sixteen sessions' in one launch; fp32 and the half point's
    for (name, kernel) in [
        ("cfg_euler", &elementwise::CFG_EULER),
        ("cfg_euler_f16", &elementwise::CFG_EULER_F16),
    ] {
        for s in [1usize, 16] {
            let n = s * 56 * 80;
            c.push(case(
                format!("elementwise.{name} sessions{s} n{n}"),
                kernel,
                lin(n),
                vec![f(13, n), f(14, 2 * n)],
                vec![
                    A::B(0),
                    A::B(1),
                    A::I(n),
                    A::I(56 * 80),
                    A::F(0.7),
                    A::F(0.0913),
                ],
            ));
        }
    }
    // rounding to f16: normal values up to ±6e4 (below the overflow at 65520), f16 subnormals
    // (|x| < 2^-14) and plain data, 112 × 512 each
    let n = 112 * 512;
    let wide = [scaled(16, n, 2e4, 0.0), scaled(17, n, 2e-6, 0.0), f(18, n)].concat();
    c.push(case(
        "elementwise.round_f16 n172032",
        &elementwise::ROUND_F16,
        lin(3 * n),
        vec![wide],
        vec![A::B(0), A::I(1), A::I(3 * n), A::I(3 * n)],
    ));
    // every third row of 49 (the modulations' scale rows), and new cache frames: 16 rows of
    // 56·128 elements, 520·128 apart
    c.push(case(
        "elementwise.round_f16 rows16 cols7168 ld66560",
        &elementwise::ROUND_F16,
        lin(16 * 56 * 128),
        vec![scaled(20, 16 * 520 * 128, 3.0, 0.0)],
        vec![A::B(0), A::I(16), A::I(56 * 128), A::I(520 * 128)],
    ));
    c.push(case(
        "elementwise.round_f16_shifted rows49 cols512 ld1536 c1",
        &elementwise::ROUND_F16_SHIFTED,
        lin(49 * 512),
        vec![scaled(19, 147 * 512, 0.3, 0.0)],
        vec![A::B(0), A::I(49), A::I(512), A::I(1536), A::F(1.0)],
    ));
    c.push(case(
        "elementwise.gated_add_f16 rows112 dim512",
        &elementwise::GATED_ADD_F16,
        lin(112 * 512),
        vec![f(10, 112 * 512), f(11, 512), f(12, 112 * 512)],
        vec![A::B(0), A::B(1), A::B(2), A::I(112), A::I(512)],
    ));
    for (dim, t) in [(256usize, 0.37f32), (255, 0.999), (16, 0.0)] {
        c.push(case(
            format!("elementwise.timestep_f16 dim{dim} t{t}"),
            &elementwise::TIMESTEP_F16,
            lin(dim / 2),
            vec![f(15, dim)],
            vec![A::B(0), A::I(dim), A::F(t), A::F(1000.0), A::F(10000.0)],
        ));
    }
    for (dim, t) in [(256usize, 0.37f32), (255, 0.999), (16, 0.0)] {
        c.push(case(
            format!("embed.timestep dim{dim} t{t}"),
            &embed::TIMESTEP,
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
    // resident keys/values (sdpa_dims): the SRc chunk (402 + 56 keys), a tail tile, the prompt
    // call, d = 32 / 128 and a generic d (scalar staging)
    c.push(attention_resident("full", 2, 8, 56, 458, 64, 520));
    c.push(attention_resident("full 1-key", 2, 8, 5, 1, 64, 4));
    c.push(attention_resident("full prompt", 2, 8, 308, 308, 64, 320));
    c.push(attention_resident("tiny", 2, 2, 50, 452, 32, 460));
    c.push(attention_resident("d128 odd", 1, 3, 9, 70, 128, 70));
    c.push(attention_resident("d40 generic", 1, 3, 9, 70, 40, 75));
    for w in [1, 2, 4, 8] {
        c.push(rel_pos("full up", Some(w), 8, 56, 514, 64));
    }
    c.push(rel_pos("full blocks", None, 8, 28, 257, 64));
    c.push(rel_pos("full prompt", None, 8, 154, 154, 64));
    c.push(rel_pos("tiny", None, 2, 50, 250, 32));
    c.push(rel_pos_batch("full up", None, 4, 8, 50, 450, 64));
    c.push(rel_pos_batch("tiny", None, 4, 2, 50, 250, 32));
    c.push(rel_pos("d40 odd", None, 3, 5, 33, 40));
    c.push(rel_pos("d128", None, 2, 9, 40, 128));
    c.push(rel_pos("d30 scalar", None, 2, 7, 70, 30));
    // the encoder's steady chunk (25 tokens over 201 kept + 25, 50 frames over 402 + 50), one
    // session and sixteen batched, its staged launch and the global-memory one
    for (tag, tq, tk) in ENCODER_REL_POS {
        c.push(rel_pos(tag, None, 8, tq, tk, 64));
        c.push(rel_pos_batch(tag, None, 16, 8, tq, tk, 64));
        c.push(rel_pos_global(tag, 16, 8, tq, tk, 64));
    }
    c.push(rel_pos_global("d40 odd", 1, 3, 5, 33, 40));
    c.push(rel_pos_global("d30 scalar", 1, 2, 7, 70, 30));
    // fused DiT ops
    for (tag, batch, heads, t, d, cap, t0) in [
        ("full", 2usize, 8usize, 56usize, 64usize, 520usize, 0usize),
        ("tiny", 2, 2, 50, 32, 460, 3),
    ] {
        let inner = heads * d;
        let ld = 3 * inner + 5;
        c.push(case(
            format!("norm.qk_pack {tag} b{batch} h{heads} t{t} d{d} cap{cap} t0{t0}"),
            &norm::QK_PACK,
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
    let gated = [&norm::GATED_ADD_MODULATE, &norm::GATED_ADD_MODULATE_F16];
    for ((r, dim), kernel) in [(112usize, 512usize), (100, 64), (3, 700)]
        .into_iter()
        .flat_map(|s| gated.map(|k| (s, k)))
    {
        c.push(case(
            format!("{} rows{r} dim{dim}", kernel.name),
            kernel,
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
    // at the ops' geometry (16-byte rows where src_b is a multiple of 4) and at a linear one:
    // the kernel covers every element once at any geometry
    let im2col = [
        (56usize, 3usize, 512usize, 7usize, false),
        (56, 3, 512, 8, false),
        (56, 3, 512, 8, true),
        (1, 3, 64, 7, false),
        (50, 5, 32, 4, false),
        (50, 5, 36, 3, true),
    ];
    for (frames, k, dim, pad, linear) in im2col {
        let (batch, src_b, ctx_b) = (2, frames * dim + pad, 2 * (k - 1) * dim);
        let (dims, how) = if linear {
            (lin(batch * frames * k * dim), ", linear geometry")
        } else {
            (copy::im2col_dims(batch, frames, k, dim, 128), "")
        };
        c.push(case(
            format!("copy.im2col b{batch} frames{frames} k{k} dim{dim} src_b{src_b}{how}"),
            &copy::IM2COL,
            dims,
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
                format!("norm.layer_norm_act_im2col op{op} b{batch} frames{frames} k{k} dim{dim}"),
                &norm::LAYER_NORM_ACT_IM2COL,
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
                "norm.layer_norm_act_im2col op1 b{batch} frames{frames} k{k} dim{dim} (block per row)"
            ),
            &norm::LAYER_NORM_ACT_IM2COL,
            LaunchDims::blocks((batch * (frames + k - 1)) as u32, norm::LN_ACT_BLOCK),
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
        "norm.layer_norm_act_im2col wide b1 frames3 k3 dim700",
        &norm::LAYER_NORM_ACT_IM2COL,
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
        "copy.batched b2 rows2 cols1024",
        &copy::BATCHED,
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
    // 16-byte rows on both sides (the kernel's vector path), at the ops' geometry and at a
    // linear one: the kernel covers every element once at any geometry
    for (what, dims) in [
        ("its geometry", copy::batched_dims(3, 5, 1028, 4, 128)),
        ("linear geometry", lin(3 * 5 * 1028)),
    ] {
        c.push(case(
            format!("copy.batched b3 rows5 cols1028, 16-byte rows, {what}"),
            &copy::BATCHED,
            dims,
            vec![
                f(113, 2 * 5160 + 4 * 1032 + 1028),
                f(114, 2 * 6000 + 4 * 1100 + 1028),
            ],
            vec![
                A::B(0),
                A::I(5160),
                A::I(1032),
                A::B(1),
                A::I(6000),
                A::I(1100),
                A::I(3),
                A::I(5),
                A::I(1028),
            ],
        ));
    }
    // binary16 values (buffers of 32-bit words, two halves each; counts in halves): 16-byte
    // rows (8 halves a move) at the ops' geometry and at a linear one, then rows that start at
    // odd halves (one half at a time)
    for (what, dims) in [
        ("its geometry", copy::batched_dims(3, 5, 1032, 2, 128)),
        ("linear geometry", lin(3 * 5 * 1032)),
    ] {
        c.push(case(
            format!("copy.batched_f16 b3 rows5 cols1032, 16-byte rows, {what}"),
            &copy::BATCHED_F16,
            dims,
            vec![
                f(115, (2 * 5200 + 4 * 1040 + 1032usize) / 2),
                f(116, (2 * 6000 + 4 * 1104 + 1032usize) / 2),
            ],
            vec![
                A::B(0),
                A::I(5200),
                A::I(1040),
                A::B(1),
                A::I(6000),
                A::I(1104),
                A::I(3),
                A::I(5),
                A::I(1032),
            ],
        ));
    }
    c.push(case(
        "copy.batched_f16 b2 rows3 cols1021, odd strides",
        &copy::BATCHED_F16,
        copy::batched_dims(2, 3, 1021, 2, 128),
        // batch strides past a batch entry's rows (2·ld + cols): entries that overlapped would
        // leave the bytes of the overlap to whichever write lands last
        vec![
            f(117, (5201 + 2 * 2075 + 1021usize).div_ceil(2)),
            f(118, (5431 + 2 * 2203 + 1021usize).div_ceil(2)),
        ],
        vec![
            A::B(0),
            A::I(5201),
            A::I(2075),
            A::B(1),
            A::I(5431),
            A::I(2203),
            A::I(2),
            A::I(3),
            A::I(1021),
        ],
    ));
    c.extend(vocoder::cases());
    c
}
