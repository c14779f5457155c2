//! Launch cases of the vocoder's kernels (families `conv`, `signal`, and Snake / float64 ELU /
//! division of `act`) at the full causal HiFT's sizes (base 512 channels, a 52-frame decoder
//! input: stages of 256 × 416, 128 × 2080, 64 × 6241 frames; the F0 predictor's 512 channels over
//! 27 frames; 16-point STFT over 52 · 480 samples). Float64 buffers are held as pairs of words
//! (low word first), so they are compared bit for bit like the others; since `kernels.rs` reads
//! the first buffer of every case as floats (its finiteness check), a case whose output is
//! float64 lists an unused one-word float buffer first ([`f64_case`]).

use dcc_runtime::kernels::{act, conv, signal};

use super::{A, Case, case, f, lin, scaled, zeros};

/// Float64 values as little-endian word pairs.
fn words(v: &[f64]) -> Vec<u32> {
    v.iter()
        .flat_map(|x| {
            let b = x.to_bits();
            [b as u32, (b >> 32) as u32]
        })
        .collect()
}

fn f64s(seed: u64, n: usize, s: f64) -> Vec<u32> {
    let v: Vec<f64> = super::super::common::data(seed, n)
        .iter()
        .map(|&x| x as f64 * s)
        .collect();
    words(&v)
}

/// A case whose outputs are float64: an unused zero float word goes first (`kernels.rs` checks
/// the first buffer's words as floats), every buffer index of `args` shifted past it.
fn f64_case(
    name: &str,
    kernel: &'static dcc_runtime::KernelDef,
    n: usize,
    bufs: Vec<Vec<u32>>,
    args: Vec<A>,
) -> Case {
    let mut b = vec![zeros(1)];
    b.extend(bufs);
    let args = args
        .into_iter()
        .map(|a| match a {
            A::B(i) => A::B(i + 1),
            a => a,
        })
        .collect();
    case(name, kernel, lin(n), b, args)
}

fn ints(v: &[usize]) -> Vec<A> {
    v.iter().map(|&i| A::I(i)).collect()
}

/// A `conv.conv1d` (or `_f64`) case: `(c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
/// stride, dil, pad, up, use_res)`, buffers y, x, w, bias, res (res = y when `in_place`).
fn conv_case(name: &str, f64_: bool, g: [usize; 14], in_place: bool) -> Case {
    let [
        c_in,
        t_in,
        sxc,
        sxt,
        c_out,
        t_out,
        ldy,
        ldr,
        k,
        _,
        dil,
        _,
        _,
        _,
    ] = g;
    let x_span = (c_in - 1) * sxc + (t_in - 1) * sxt + 1;
    let y_span = (c_out - 1) * ldy + t_out;
    let r_span = (c_out - 1) * ldr + t_out;
    let (kernel, bufs) = if f64_ {
        (
            &conv::CONV1D_F64,
            vec![
                f64s(200, y_span, 1.0),
                f64s(201, x_span, 1.0),
                f64s(202, c_out * c_in * k, 0.1),
                f64s(203, c_out, 0.1),
                f64s(204, r_span, 1.0),
            ],
        )
    } else {
        (
            &conv::CONV1D,
            vec![
                f(200, y_span),
                f(201, x_span),
                scaled(202, c_out * c_in * k, 0.1, 0.0),
                scaled(203, c_out, 0.1, 0.0),
                f(204, r_span),
            ],
        )
    };
    let res = if in_place { A::B(0) } else { A::B(4) };
    let mut args = vec![A::B(0), A::B(1), A::B(2), A::B(3), res];
    args.extend(ints(&g));
    // the runtime's launch (`ops::conv1d`)
    let threads = conv::conv1d_threads(c_out, t_out, dil);
    let mut c = if f64_ {
        f64_case(&format!("conv {name}"), kernel, threads, bufs, args)
    } else {
        case(format!("conv {name}"), kernel, lin(threads), bufs, args)
    };
    c.dims = dcc_runtime::LaunchDims::linear(threads, conv::CONV1D_BLOCK);
    c
}

/// `conv_case` launched on `blocks` blocks of 128 threads only, so that each thread walks
/// several work items (grid-stride): the same bits as any other geometry (CUDA only).
fn conv_variant(name: &str, f64_: bool, g: [usize; 14], in_place: bool, blocks: usize) -> Case {
    let mut c = conv_case(&format!("{name} {blocks} blocks"), f64_, g, in_place);
    c.dims = lin(blocks * 128);
    c.variant = true;
    c
}

/// The geometry of a conv case's integer arguments `(c_in, t_in, sxc, sxt, c_out, t_out, ldy,
/// ldr, k, stride, dil, pad, up, ..)`.
fn geom(n: &[usize]) -> conv::Conv1dGeom {
    conv::Conv1dGeom {
        c_in: n[0],
        t_in: n[1],
        sxc: n[2],
        sxt: n[3],
        c_out: n[4],
        t_out: n[5],
        ldy: n[6],
        ldr: n[7],
        k: n[8],
        stride: n[9],
        dil: n[10],
        pad: n[11],
        up: n[12],
    }
}

/// The `conv.conv1d_tile` (or `_f64`) cases of a plain `conv.conv1d` case: the same buffers
/// and arguments plus the tile shape, launched as the runtime does (`ops::conv1d`) and on 3
/// blocks; none when the tiled kernel does not take the geometry (or `p` is not a plain
/// convolution case).
fn tile_cases(p: &Case) -> Option<Vec<Case>> {
    let kernel = if std::ptr::eq(p.kernel, &conv::CONV1D) {
        &conv::CONV1D_TILE
    } else if std::ptr::eq(p.kernel, &conv::CONV1D_F64) {
        &conv::CONV1D_TILE_F64
    } else {
        return None;
    };
    if p.variant {
        return None;
    }
    let n: Vec<usize> = p.args[5..]
        .iter()
        .map(|a| match a {
            A::I(v) => *v,
            a => panic!("{}: conv argument {a:?}", p.name),
        })
        .collect();
    let g = geom(&n);
    let mut out = Vec::new();
    for shape in [conv::TileShape::Wide, conv::TileShape::Narrow] {
        if !conv::conv1d_tile_fits(&g, shape) {
            continue;
        }
        let blocks = conv::conv1d_tile_blocks(&g, shape);
        for (tag, b, variant) in [("", blocks, false), (" 3 blocks", 3, true)] {
            let mut args = p.args.clone();
            args.push(A::I(shape as usize));
            out.push(Case {
                name: format!("{} tile {shape:?}{tag}", p.name),
                kernel,
                dims: dcc_runtime::LaunchDims::linear(
                    b * conv::CONV1D_TILE_BLOCK as usize,
                    conv::CONV1D_TILE_BLOCK,
                ),
                bufs: p.bufs.clone(),
                args,
                variant,
            });
        }
    }
    Some(out)
}

/// A `conv.conv1d_tile_group` case of the float `conv_case`s of `problems` (each its own
/// buffers), tile shapes as the runtime picks them (`ops::conv1d_group`), on a block per tile
/// and share, or on `blocks` blocks.
fn group_case(name: &str, problems: &[([usize; 14], bool)], blocks: Option<usize>) -> Case {
    let mut bufs = Vec::new();
    let mut args = vec![A::I(problems.len())];
    let mut shapes = Vec::new();
    for (i, &(g, in_place)) in problems.iter().enumerate() {
        let c = conv_case(&format!("{name} {i}"), false, g, in_place);
        let base = bufs.len();
        bufs.extend(c.bufs);
        args.extend(c.args.iter().map(|a| match a {
            A::B(j) => A::B(base + j),
            a => *a,
        }));
        let cg = geom(&g);
        let shape = conv::conv1d_tile_pick(&cg).unwrap_or(conv::TileShape::Narrow);
        args.push(A::I(shape as usize));
        shapes.push((cg, shape));
    }
    for _ in problems.len()..conv::CONV1D_GROUP_MAX {
        let first: Vec<A> = args[1..21].to_vec();
        args.extend(first);
    }
    let n = blocks.unwrap_or_else(|| conv::conv1d_group_blocks(&shapes));
    let mut c = case(
        format!("conv group {name}"),
        &conv::CONV1D_TILE_GROUP,
        dcc_runtime::LaunchDims::linear(
            n * conv::CONV1D_TILE_BLOCK as usize,
            conv::CONV1D_TILE_BLOCK,
        ),
        bufs,
        args,
    );
    c.variant = blocks.is_some();
    c
}

#[allow(clippy::vec_init_then_push)]
pub fn cases() -> Vec<Case> {
    let mut c = Vec::new();
    // conv_pre (right look-ahead: the last 4 taps of the last frames read zeros when finalizing)
    c.push(conv_case(
        "conv_pre 80->512 t52 k5",
        false,
        [80, 52, 55, 1, 512, 52, 52, 52, 5, 1, 1, 0, 1, 0],
        false,
    ));
    // ups[1]: nearest ×5 then causal k11 (pad 10)
    c.push(conv_case(
        "ups 256->128 t416 x5 k11",
        false,
        [256, 416, 416, 1, 128, 2080, 2080, 2080, 11, 1, 1, 10, 5, 0],
        false,
    ));
    // ups[2] into a row stride one wider (the reflection pad's column 0 is written apart)
    c.push(conv_case(
        "ups 128->64 t2080 x3 k7 ld6241",
        false,
        [128, 2080, 2080, 1, 64, 6240, 6241, 6241, 7, 1, 1, 6, 3, 0],
        false,
    ));
    // resblock convs1 (dilation 5, kernel 11, pad 50) with a separate residual, and in place
    c.push(conv_case(
        "resblock 64 t6241 k11 d5 res",
        false,
        [64, 6241, 6241, 1, 64, 6241, 6241, 6241, 11, 1, 5, 50, 1, 1],
        false,
    ));
    c.push(conv_case(
        "resblock 128 t2080 k7 in place",
        false,
        [128, 2080, 2080, 1, 128, 2080, 2080, 2080, 7, 1, 1, 6, 1, 1],
        true,
    ));
    // source_downs[0]: kernel 30, stride 15, pad 14 over the 18-row source spectrum
    c.push(conv_case(
        "source_down 18->256 k30 s15",
        false,
        [18, 6241, 6241, 1, 256, 416, 416, 416, 30, 15, 1, 14, 1, 0],
        false,
    ));
    // ups[0] (nearest ×8 then causal k16), at a quarter of its channels
    c.push(conv_case(
        "ups 128->64 t52 x8 k16",
        false,
        [128, 52, 52, 1, 64, 416, 416, 416, 16, 1, 1, 15, 8, 0],
        false,
    ));
    // resblock k3 dilation 3 with a separate residual; conv_post (k7, 64 -> 18 rows)
    c.push(conv_case(
        "resblock 64 t2080 k3 d3 res",
        false,
        [64, 2080, 2080, 1, 64, 2080, 2080, 2080, 3, 1, 3, 6, 1, 1],
        false,
    ));
    c.push(conv_case(
        "conv_post 64->18 t6241 k7",
        false,
        [64, 6241, 6241, 1, 18, 6241, 6241, 6241, 7, 1, 1, 6, 1, 0],
        false,
    ));
    // source_downs[1] (k6 s3: the generic tap loop) and [2] (k1 s1)
    c.push(conv_case(
        "source_down 18->128 k6 s3",
        false,
        [18, 6241, 6241, 1, 128, 2080, 2080, 2080, 6, 3, 1, 2, 1, 0],
        false,
    ));
    c.push(conv_case(
        "source_down 18->64 k1",
        false,
        [18, 6241, 6241, 1, 64, 6241, 6241, 6241, 1, 1, 1, 0, 1, 0],
        false,
    ));
    // the reflection pad's column: one output frame (three of the four accumulators idle); a
    // strided input read in place with dilation and upsampling, with stride 2 (the generic tap
    // loop) and 1 (the shared tap window); the generic tap loop over an upsampled input (k9)
    c.push(conv_case(
        "ups 128->64 t2080 x3 k7 t_out1",
        false,
        [128, 2080, 2080, 1, 64, 1, 6241, 6241, 7, 1, 1, 5, 3, 0],
        false,
    ));
    c.push(conv_case(
        "32->16 sxt3 k5 s2 d3 up2 res",
        false,
        [32, 100, 1, 32, 16, 97, 99, 98, 5, 2, 3, 9, 2, 1],
        false,
    ));
    c.push(conv_case(
        "32->16 sxt32 k5 d3 up2 res",
        false,
        [32, 100, 1, 32, 16, 197, 199, 198, 5, 1, 3, 9, 2, 1],
        false,
    ));
    c.push(conv_case(
        "32->16 k9 d2 up3 res",
        false,
        [32, 100, 100, 1, 16, 301, 301, 301, 9, 1, 2, 16, 3, 1],
        false,
    ));
    // grid-stride: fewer threads than work items
    c.push(conv_variant(
        "resblock 64 t2080 k11 d5 in place",
        false,
        [64, 2080, 2080, 1, 64, 2080, 2080, 2080, 11, 1, 5, 50, 1, 1],
        true,
        7,
    ));
    c.push(conv_variant(
        "f0 512->512 t24 k3 f64",
        true,
        [512, 24, 24, 1, 512, 24, 24, 24, 3, 1, 1, 2, 1, 0],
        false,
        3,
    ));
    // F0 predictor in double: the right-causal first conv over a strided mel window, then a
    // left-causal one
    c.push(conv_case(
        "f0 80->512 t27 k4 f64",
        true,
        [80, 27, 55, 1, 512, 24, 24, 24, 4, 1, 1, 0, 1, 0],
        false,
    ));
    c.push(conv_case(
        "f0 512->512 t24 k3 f64",
        true,
        [512, 24, 24, 1, 512, 24, 24, 24, 3, 1, 1, 2, 1, 0],
        false,
    ));

    // the tiled kernels on every geometry above that they take, in both tile shapes, once with a
    // block per tile and once with 3 blocks walking every tile (grid-stride)
    let tiled: Vec<Case> = c.iter().filter_map(tile_cases).flatten().collect();
    c.extend(tiled);
    // a window past the staging buffer (k11, dilation 20: up to 442 positions; the runtime
    // never launches it) is summed from global memory in the same order
    let mut wide = conv_case(
        "32->16 t300 k11 d20 res",
        false,
        [32, 300, 300, 1, 16, 300, 300, 300, 11, 1, 20, 200, 1, 1],
        false,
    );
    wide.name += " tile Wide (window past the buffer)";
    wide.kernel = &conv::CONV1D_TILE;
    wide.args.push(A::I(conv::TileShape::Wide as usize));
    let g_tiles = conv::TileShape::Wide.tiles(16, 300, 20);
    wide.dims = dcc_runtime::LaunchDims::linear(
        g_tiles * conv::CONV1D_TILE_BLOCK as usize,
        conv::CONV1D_TILE_BLOCK,
    );
    c.push(wide);
    // a stage's three resblock convolutions in one launch (kernels 3, 7, 11 at dilations 1, 3,
    // 5: a separate residual, none, in place), then on 3 blocks; two problems the tiled path
    // does not take (stride 2, kernel 4) beside one it does
    let stage = [
        (
            [64, 2080, 2080, 1, 64, 2080, 2080, 2080, 3, 1, 1, 2, 1, 1],
            false,
        ),
        (
            [64, 2080, 2080, 1, 64, 2080, 2080, 2080, 7, 1, 3, 18, 1, 0],
            false,
        ),
        (
            [64, 2080, 2080, 1, 64, 2080, 2080, 2080, 11, 1, 5, 50, 1, 1],
            true,
        ),
    ];
    c.push(group_case("resblocks 64 t2080", &stage, None));
    c.push(group_case("resblocks 64 t2080 3 blocks", &stage, Some(3)));
    c.push(group_case(
        "s2 k5, k4, k3",
        &[
            ([32, 100, 100, 1, 16, 48, 48, 48, 5, 2, 1, 2, 1, 1], false),
            (
                [32, 100, 100, 1, 16, 100, 100, 100, 4, 1, 1, 3, 1, 0],
                false,
            ),
            ([32, 100, 100, 1, 16, 100, 100, 100, 3, 1, 2, 4, 1, 1], true),
        ],
        None,
    ));
    c.push(group_case(
        "one problem",
        &[(
            [128, 416, 416, 1, 128, 416, 416, 416, 7, 1, 3, 18, 1, 0],
            false,
        )],
        None,
    ));

    // act: Snake separate and in place, float64 ELU, division
    let (rows, cols) = (64usize, 6241usize);
    c.push(case(
        "act.snake 64x6241",
        &act::SNAKE,
        lin(rows * cols),
        vec![
            zeros(rows * cols),
            scaled(210, rows * cols, 4.0, 0.0),
            scaled(211, rows, 0.5, 1.0),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::I(rows),
            A::I(cols),
            A::I(cols),
            A::I(cols),
        ],
    ));
    c.push(case(
        "act.snake in place 128x2080",
        &act::SNAKE,
        lin(128 * 2080),
        vec![
            scaled(212, 128 * 2080, 4.0, 0.0),
            scaled(213, 128, 0.5, 1.0),
        ],
        vec![
            A::B(0),
            A::B(0),
            A::B(1),
            A::I(128),
            A::I(2080),
            A::I(2080),
            A::I(2080),
        ],
    ));
    c.push(f64_case(
        "act.elu_f64 n12288",
        &act::ELU_F64,
        512 * 24,
        vec![f64s(214, 512 * 24, 8.0)],
        vec![A::B(0), A::I(512 * 24)],
    ));
    c.push(case(
        "act.div n399424",
        &act::DIV,
        lin(64 * 6241),
        vec![f(215, 64 * 6241)],
        vec![A::B(0), A::I(64 * 6241), A::F(3.0)],
    ));

    // signal: conversions, the harmonic phase and source, STFT, polar, ISTFT
    c.push(f64_case(
        "signal.widen 80x27 ld55",
        &signal::WIDEN,
        80 * 27,
        vec![words(&[0.0; 80 * 27]), f(216, 79 * 55 + 27)],
        vec![A::B(0), A::B(1), A::I(80), A::I(27), A::I(55)],
    ));
    c.push(case(
        "signal.abs_narrow n27",
        &signal::ABS_NARROW,
        lin(27),
        vec![zeros(27), f64s(217, 27, 300.0)],
        vec![A::B(0), A::B(1), A::I(27)],
    ));
    let f0: Vec<u32> = super::super::common::data(218, 16)
        .iter()
        .enumerate()
        .map(|(i, x)| if i == 5 { 2.0f32 } else { 220.0 + 180.0 * x }.to_bits())
        .collect();
    let phase = words(&[0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.33, 0.01, 0.999]);
    c.push(case(
        "signal.harmonic_phase n16 h9",
        &signal::HARMONIC_PHASE,
        lin(9),
        vec![zeros(16 * 9), phase, f0.clone()],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::I(16),
            A::I(9),
            A::F(24000.0),
            A::I(480),
        ],
    ));
    // the source frame in device memory (int64 as two words): frame 32 of a 48,480-row table,
    // then frame 150 (72,000 samples: rows wrap modulo the table's rows)
    let rows = 48480usize;
    for frame in [32u32, 150] {
        c.push(case(
            format!("signal.harmonic_source n16 h9 hop480 frame{frame}"),
            &signal::HARMONIC_SOURCE,
            lin(16 * 480),
            vec![
                zeros(16 * 480),
                f(219, 16 * 9),
                f0.clone(),
                scaled(220, rows * 9, 0.5, 0.5),
                f(221, 9),
                scaled(222, 1, 0.1, 0.0),
                vec![frame, 0],
            ],
            vec![
                A::B(0),
                A::B(1),
                A::B(2),
                A::B(3),
                A::B(4),
                A::B(5),
                A::B(6),
                A::I(16),
                A::I(9),
                A::I(480),
                A::I(rows),
                A::F(0.1),
                A::F(0.003),
                A::F(10.0),
            ],
        ));
    }
    // the stream counters (int64 word pairs, low first): +16 on source_end, +1 on finalized
    c.push(case(
        "signal.counters_add",
        &signal::COUNTERS_ADD,
        lin(1),
        vec![vec![11, 0, 11, 0, 47, 0, 42, 0, 0, 0]],
        vec![A::B(0), A::I(2), A::I(2), A::I(16), A::I(2), A::I(1)],
    ));
    let tw = words(&signal::twiddles(16));
    let win: Vec<u32> = (0..16)
        .map(|n| {
            ((0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / 16.0).cos()) as f32).to_bits()
        })
        .collect();
    let (len, frames) = (52 * 480, 47 * 120 + 1);
    c.push(case(
        "signal.stft len24960 frames5641",
        &signal::STFT,
        lin(9 * frames),
        vec![zeros(18 * frames), f(223, len), win.clone(), tw.clone()],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::I(len),
            A::I(frames),
            A::I(frames),
            A::I(16),
            A::I(4),
        ],
    ));
    c.push(case(
        "signal.stft tail frames6241",
        &signal::STFT,
        lin(9 * 6241),
        vec![zeros(18 * 6241), f(224, len), win.clone(), tw.clone()],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::I(len),
            A::I(6241),
            A::I(6241),
            A::I(16),
            A::I(4),
        ],
    ));
    c.push(case(
        "signal.polar 9x6241",
        &signal::POLAR,
        lin(9 * 6241),
        vec![zeros(18 * 6241), scaled(225, 18 * 6241, 6.0, 0.0)],
        vec![
            A::B(0),
            A::B(1),
            A::I(9),
            A::I(6241),
            A::I(6241),
            A::I(6241),
            A::F(100.0),
        ],
    ));
    c.push(case(
        "signal.istft frames6241",
        &signal::ISTFT,
        lin(480 * 52),
        vec![zeros(480 * 52), scaled(226, 18 * 6241, 3.0, 0.0), win, tw],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::I(6241),
            A::I(6241),
            A::I(480 * 52),
            A::I(16),
            A::I(4),
            A::F(0.99),
        ],
    ));
    c
}
