//! Signal ops (`signal.*`, and the `act` kernels Snake, float64 ELU and division): the vocoder's
//! harmonic excitation, its STFT/ISTFT by direct DFT, float/double conversions. One kernel launch
//! per op, one thread per output element (per harmonic for [`harmonic_phase`]).

use dcc_kernels as k;
use dcc_kernels::Arg;

use super::{Ctx, OpError, Tensor, disjoint, int, matrix, operand, packed, ptr};

/// `y = x as f64`: `y` packed `[rows, cols]`, `x` `[rows, cols]` with unit column stride.
pub fn widen(cx: &Ctx<'_>, y: Tensor<'_, f64>, x: Tensor<'_, f32>) -> Result<(), OpError> {
    let op = "widen";
    let (rows, cols, ldx) = matrix(op, "x", &x)?;
    super::dims(op, "y", &y, &[rows, cols])?;
    packed(op, "y", &y)?;
    disjoint(op, &[operand("y", &y, true), operand("x", &x, false)])?;
    if rows * cols == 0 {
        return Ok(());
    }
    let args = [ptr(&y), ptr(&x), int(rows), int(cols), int(ldx)];
    // SAFETY: the kernel writes y[0..rows·cols] and reads x[r·ldx + c]: the checked views, which
    // do not overlap.
    unsafe { cx.launch_linear(&k::signal::WIDEN, rows * cols, &args) }
}

/// `y = |x| as f32` over packed views of equal dims.
pub fn abs_narrow(cx: &Ctx<'_>, y: Tensor<'_, f32>, x: Tensor<'_, f64>) -> Result<(), OpError> {
    let op = "abs_narrow";
    packed(op, "y", &y)?;
    packed(op, "x", &x)?;
    super::dims(op, "x", &x, y.dims())?;
    disjoint(op, &[operand("y", &y, true), operand("x", &x, false)])?;
    let n = y.elems();
    if n == 0 {
        return Ok(());
    }
    let args = [ptr(&y), ptr(&x), int(n)];
    // SAFETY: the kernel writes y[0..n] and reads x[0..n]: the checked packed views.
    unsafe { cx.launch_linear(&k::signal::ABS_NARROW, n, &args) }
}

/// The running harmonic phase over `n` frames: `sine` packed `[n, harmonics]` (written), `phase`
/// packed `[harmonics]` f64 (read and advanced in place), `f0` packed `[n]` (see
/// `dcc_kernels::signal::harmonic_phase`).
pub fn harmonic_phase(
    cx: &Ctx<'_>,
    sine: Tensor<'_, f32>,
    phase: Tensor<'_, f64>,
    f0: Tensor<'_, f32>,
    rate: f32,
    hop: usize,
) -> Result<(), OpError> {
    let op = "harmonic_phase";
    let (n, hn) = match sine.dims() {
        &[n, h] => (n, h),
        d => return Err(OpError::shape(op, "sine", "[frames, harmonics]", d)),
    };
    packed(op, "sine", &sine)?;
    super::dims(op, "phase", &phase, &[hn])?;
    packed(op, "phase", &phase)?;
    super::dims(op, "f0", &f0, &[n])?;
    packed(op, "f0", &f0)?;
    disjoint(
        op,
        &[
            operand("sine", &sine, true),
            operand("phase", &phase, true),
            operand("f0", &f0, false),
        ],
    )?;
    if hn == 0 {
        return Ok(());
    }
    let args = [
        ptr(&sine),
        ptr(&phase),
        ptr(&f0),
        int(n),
        int(hn),
        Arg::F32(rate),
        int(hop),
    ];
    // SAFETY: thread h writes sine[t·hn + h] (t < n) and phase[h], reads f0[0..n]: the checked
    // packed views, which do not overlap.
    unsafe { cx.launch_linear(&k::signal::HARMONIC_PHASE, hn, &args) }
}

/// The scalars of [`harmonic_source`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct SourceArgs {
    pub hop: usize,
    pub sine_amp: f32,
    pub noise_std: f32,
    pub threshold: f32,
}

/// The merged excitation `y` (packed `[n·hop]`) of `n` frames from `sine` (`[n, harmonics]`),
/// `f0` (`[n]`), the noise `table` (packed `[rows, harmonics]`), the source's linear weight `lw`
/// (`[harmonics]`) and bias `lb` (`[1]`), starting at the source frame `frame` holds (`[1]`
/// int64 in device memory, read by the kernel when it runs: a captured graph reads the stream's
/// position at replay). Sample `i` reads table row `(frame · hop + i) mod rows` (see
/// `dcc_kernels::signal::harmonic_source`): every row is inside the table, whatever the
/// position.
#[allow(clippy::too_many_arguments)]
pub fn harmonic_source(
    cx: &Ctx<'_>,
    y: Tensor<'_, f32>,
    sine: Tensor<'_, f32>,
    f0: Tensor<'_, f32>,
    table: Tensor<'_, f32>,
    lw: Tensor<'_, f32>,
    lb: Tensor<'_, f32>,
    frame: Tensor<'_, i64>,
    a: &SourceArgs,
) -> Result<(), OpError> {
    let op = "harmonic_source";
    let (n, hn) = match sine.dims() {
        &[n, h] => (n, h),
        d => return Err(OpError::shape(op, "sine", "[frames, harmonics]", d)),
    };
    let rows = match table.dims() {
        &[r, h] if h == hn && r > 0 => r,
        d => return Err(OpError::shape(op, "table", format!("[rows > 0, {hn}]"), d)),
    };
    for (name, t) in [
        ("sine", &sine),
        ("f0", &f0),
        ("table", &table),
        ("lw", &lw),
        ("lb", &lb),
    ] {
        packed(op, name, t)?;
    }
    super::dims(op, "f0", &f0, &[n])?;
    super::dims(op, "lw", &lw, &[hn])?;
    super::dims(op, "lb", &lb, &[1])?;
    super::dims(op, "frame", &frame, &[1])?;
    let samples = n.saturating_mul(a.hop);
    super::dims(op, "y", &y, &[samples])?;
    packed(op, "y", &y)?;
    if a.hop == 0 {
        return Err(OpError::arg(op, "hop", "0"));
    }
    disjoint(
        op,
        &[
            operand("y", &y, true),
            operand("sine", &sine, false),
            operand("f0", &f0, false),
            operand("table", &table, false),
            operand("lw", &lw, false),
            operand("lb", &lb, false),
            operand("frame", &frame, false),
        ],
    )?;
    if samples == 0 || hn == 0 {
        return Ok(());
    }
    let args = [
        ptr(&y),
        ptr(&sine),
        ptr(&f0),
        ptr(&table),
        ptr(&lw),
        ptr(&lb),
        ptr(&frame),
        int(n),
        int(hn),
        int(a.hop),
        int(rows),
        Arg::F32(a.sine_amp),
        Arg::F32(a.noise_std),
        Arg::F32(a.threshold),
    ];
    // SAFETY: the kernel writes y[0..n·hop] and reads sine, f0, lw, lb over their checked packed
    // dims, frame[0] (a checked [1] view) and table rows taken modulo its rows (rows > 0).
    unsafe { cx.launch_linear(&k::signal::HARMONIC_SOURCE, samples, &args) }
}

/// `c[k] += deltas[k]` over the vocoder's stream counters `c` (packed `[5]` int64 in device
/// memory; see `dcc_kernels::signal::counters_add`): one launch, queued after the work that read
/// them.
pub fn counters_add(
    cx: &Ctx<'_>,
    c: Tensor<'_, i64>,
    deltas: &[i64; k::signal::COUNTERS],
) -> Result<(), OpError> {
    let op = "counters_add";
    super::dims(op, "c", &c, &[k::signal::COUNTERS])?;
    packed(op, "c", &c)?;
    let args = [
        ptr(&c),
        Arg::I64(deltas[0]),
        Arg::I64(deltas[1]),
        Arg::I64(deltas[2]),
        Arg::I64(deltas[3]),
        Arg::I64(deltas[4]),
    ];
    // SAFETY: the kernel reads and writes c[0..5], the checked packed view.
    unsafe { cx.launch_linear(&k::signal::COUNTERS_ADD, 1, &args) }
}

/// Checks a window `[n_fft]` (packed, even `n_fft >= 2`) and its twiddles `[2·n_fft]` f64.
fn fft_operands(
    op: &'static str,
    win: &Tensor<'_, f32>,
    tw: &Tensor<'_, f64>,
    hop: usize,
) -> Result<usize, OpError> {
    let n_fft = match win.dims() {
        &[n] if n >= 2 && n.is_multiple_of(2) => n,
        d => return Err(OpError::shape(op, "win", "[even n_fft >= 2]", d)),
    };
    packed(op, "win", win)?;
    super::dims(op, "tw", tw, &[2 * n_fft])?;
    packed(op, "tw", tw)?;
    if hop == 0 {
        return Err(OpError::arg(op, "hop", "0"));
    }
    Ok(n_fft)
}

/// `torch.stft(x, n_fft, hop, n_fft, win, center=True, pad_mode="reflect")` of `x` (packed
/// `[len]`) for the frames `y` holds: `y` `[2·bins, frames]` with unit column stride (real rows,
/// then imaginary rows; `bins = n_fft/2 + 1`); `tw` the DFT twiddles
/// (`dcc_kernels::signal::twiddles`). Frames past `len / hop` read the reflected tail, as torch.
pub fn stft(
    cx: &Ctx<'_>,
    y: Tensor<'_, f32>,
    x: Tensor<'_, f32>,
    win: Tensor<'_, f32>,
    tw: Tensor<'_, f64>,
    hop: usize,
) -> Result<(), OpError> {
    let op = "stft";
    let n_fft = fft_operands(op, &win, &tw, hop)?;
    let bins = n_fft / 2 + 1;
    let (rows, frames, ldy) = matrix(op, "y", &y)?;
    if rows != 2 * bins {
        return Err(OpError::shape(
            op,
            "y",
            format!("[{}, frames]", 2 * bins),
            y.dims(),
        ));
    }
    let len = match x.dims() {
        &[l] => l,
        d => return Err(OpError::shape(op, "x", "[len]", d)),
    };
    packed(op, "x", &x)?;
    if frames > 0 && (len <= n_fft / 2 || frames > len / hop + 1) {
        return Err(OpError::shape(
            op,
            "x",
            format!(
                "more than {} samples and at least {} frames' worth",
                n_fft / 2,
                frames
            ),
            x.dims(),
        ));
    }
    disjoint(
        op,
        &[
            operand("y", &y, true),
            operand("x", &x, false),
            operand("win", &win, false),
            operand("tw", &tw, false),
        ],
    )?;
    if frames == 0 {
        return Ok(());
    }
    let args = [
        ptr(&y),
        ptr(&x),
        ptr(&win),
        ptr(&tw),
        int(len),
        int(frames),
        int(ldy),
        int(n_fft),
        int(hop),
    ];
    // SAFETY: the kernel writes y[r·ldy + f] (r < 2·bins, f < frames: the checked view), reads
    // x at reflected positions inside [0, len) (len > n_fft/2 checked), win and tw over their
    // checked dims. No overlap (checked).
    unsafe { cx.launch_linear(&k::signal::STFT, bins * frames, &args) }
}

/// The ISTFT's complex input from a `[log-magnitude ‖ phase-logit]` block `x` `[2·bins, frames]`
/// into `spec` of the same dims (both unit column stride): `m = min(exp(x[k]), max_mag)`, `p =
/// sin(x[bins + k])`, `spec = [m·cos p ‖ m·sin p]`.
pub fn polar(
    cx: &Ctx<'_>,
    spec: Tensor<'_, f32>,
    x: Tensor<'_, f32>,
    max_mag: f32,
) -> Result<(), OpError> {
    let op = "polar";
    let (rows, frames, lds) = matrix(op, "spec", &spec)?;
    let (xr, xf, ldx) = matrix(op, "x", &x)?;
    if rows == 0 || !rows.is_multiple_of(2) || (xr, xf) != (rows, frames) {
        return Err(OpError::shape(
            op,
            "x",
            format!("[{rows} (even), {frames}]"),
            x.dims(),
        ));
    }
    disjoint(op, &[operand("spec", &spec, true), operand("x", &x, false)])?;
    let bins = rows / 2;
    if frames == 0 {
        return Ok(());
    }
    let args = [
        ptr(&spec),
        ptr(&x),
        int(bins),
        int(frames),
        int(ldx),
        int(lds),
        Arg::F32(max_mag),
    ];
    // SAFETY: the kernel writes spec[r·lds + f] and reads x[r·ldx + f] for r < 2·bins, f <
    // frames: the checked views, which do not overlap.
    unsafe { cx.launch_linear(&k::signal::POLAR, bins * frames, &args) }
}

/// `torch.istft(spec, n_fft, hop, n_fft, win, center=True)` clamped to `[−limit, limit]`: the
/// first `y.len()` samples (packed `[n_out]`, at most `hop·(frames − 1)`, torch's length) from
/// `spec` `[2·bins, frames]` (unit column stride).
pub fn istft(
    cx: &Ctx<'_>,
    y: Tensor<'_, f32>,
    spec: Tensor<'_, f32>,
    win: Tensor<'_, f32>,
    tw: Tensor<'_, f64>,
    hop: usize,
    limit: f32,
) -> Result<(), OpError> {
    let op = "istft";
    let n_fft = fft_operands(op, &win, &tw, hop)?;
    let bins = n_fft / 2 + 1;
    let (rows, frames, lds) = matrix(op, "spec", &spec)?;
    if rows != 2 * bins {
        return Err(OpError::shape(
            op,
            "spec",
            format!("[{}, frames]", 2 * bins),
            spec.dims(),
        ));
    }
    let n_out = match y.dims() {
        &[n] if n == 0 || (frames > 0 && n <= hop * (frames - 1)) => n,
        d => {
            return Err(OpError::shape(
                op,
                "y",
                format!("[at most {}]", hop * frames.saturating_sub(1)),
                d,
            ));
        }
    };
    packed(op, "y", &y)?;
    disjoint(
        op,
        &[
            operand("y", &y, true),
            operand("spec", &spec, false),
            operand("win", &win, false),
            operand("tw", &tw, false),
        ],
    )?;
    if n_out == 0 {
        return Ok(());
    }
    let args = [
        ptr(&y),
        ptr(&spec),
        ptr(&win),
        ptr(&tw),
        int(frames),
        int(lds),
        int(n_out),
        int(n_fft),
        int(hop),
        Arg::F32(limit),
    ];
    // SAFETY: the kernel writes y[0..n_out] and reads spec[r·lds + f] for frames f <= (n_out − 1 +
    // n_fft/2)/hop < frames (n_out <= hop·(frames − 1) checked), win and tw over their checked
    // dims. No overlap (checked).
    unsafe { cx.launch_linear(&k::signal::ISTFT, n_out, &args) }
}

/// Snake over channel-major `[rows, cols]` views with unit column stride: `y = x + (1 / (alpha +
/// 1e-9)) · sin(x · alpha)²`, `alpha` packed `[rows]`. `y` may be `x` itself (the same view:
/// in place); otherwise they must not overlap.
pub fn snake(
    cx: &Ctx<'_>,
    y: Tensor<'_, f32>,
    x: Tensor<'_, f32>,
    alpha: Tensor<'_, f32>,
) -> Result<(), OpError> {
    let op = "snake";
    let (rows, cols, ldy) = matrix(op, "y", &y)?;
    let (xr, xc, ldx) = matrix(op, "x", &x)?;
    if (xr, xc) != (rows, cols) {
        return Err(OpError::shape(
            op,
            "x",
            format!("[{rows}, {cols}]"),
            x.dims(),
        ));
    }
    super::dims(op, "alpha", &alpha, &[rows])?;
    packed(op, "alpha", &alpha)?;
    let in_place = y.ptr() == x.ptr() && ldy == ldx;
    if in_place {
        disjoint(
            op,
            &[operand("y", &y, true), operand("alpha", &alpha, false)],
        )?;
    } else {
        disjoint(
            op,
            &[
                operand("y", &y, true),
                operand("x", &x, false),
                operand("alpha", &alpha, false),
            ],
        )?;
    }
    if rows * cols == 0 {
        return Ok(());
    }
    let args = [
        ptr(&y),
        ptr(&x),
        ptr(&alpha),
        int(rows),
        int(cols),
        int(ldy),
        int(ldx),
    ];
    // SAFETY: the kernel writes y[r·ldy + c] and reads x[r·ldx + c] (the same element when in
    // place: read before written by one thread) and alpha[r]: the checked views.
    unsafe { cx.launch_linear(&k::act::SNAKE, rows * cols, &args) }
}

/// `torch.nn.ELU()` in double, in place over a packed view.
pub fn elu_f64(cx: &Ctx<'_>, x: Tensor<'_, f64>) -> Result<(), OpError> {
    packed("elu_f64", "x", &x)?;
    let n = x.elems();
    if n == 0 {
        return Ok(());
    }
    // SAFETY: the kernel reads and writes x[0..n], the checked packed view.
    unsafe { cx.launch_linear(&k::act::ELU_F64, n, &[ptr(&x), int(n)]) }
}

/// `x /= d` in place over a packed view (a true division, not a multiplication by `1/d`).
pub fn div(cx: &Ctx<'_>, x: Tensor<'_, f32>, d: f32) -> Result<(), OpError> {
    packed("div", "x", &x)?;
    let n = x.elems();
    if n == 0 {
        return Ok(());
    }
    // SAFETY: the kernel reads and writes x[0..n], the checked packed view.
    unsafe { cx.launch_linear(&k::act::DIV, n, &[ptr(&x), int(n), Arg::F32(d)]) }
}
