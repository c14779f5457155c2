//! Signal kernels (`kernels/cuda/signal.cu`): the harmonic excitation of a neural source-filter
//! vocoder with its float64 running phase ([`HARMONIC_PHASE`], [`HARMONIC_SOURCE`]), the
//! short-time Fourier transform and its inverse by direct DFT ([`STFT`], [`POLAR`], [`ISTFT`];
//! the vocoder's FFT is 16 points, so a direct sum per output is cheap and has one fixed order),
//! float/double conversions ([`WIDEN`], [`ABS_NARROW`]) and the stream counters a captured
//! vocoder call advances in device memory ([`COUNTERS_ADD`]).
//!
//! Each twin's body is the slice function of the same name below. Transcendentals are the shared
//! helpers of `common.cuh` ([`sincos64`], [`exp_f32`], [`sin_f32`], [`cos_f32`], [`tanh_f32`]),
//! ported line by line, so every kernel here equals its twin bit for bit. Launch: one thread per
//! output element (per harmonic for [`HARMONIC_PHASE`]), grid-strided.

#![allow(clippy::too_many_arguments)]

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::conv::{rd_as, wr_as};
use crate::math::{cos_f32, exp_f32, sin_f32, sincos64, tanh_f32};
use crate::twin::{invalid, kdef};

use Param::{F32, I64, Ptr};

/// The vocoder's stream counters [`COUNTERS_ADD`] advances (the vendor's `mel_offset`,
/// `source_offset`, `source_end`, `speech_offset`, `finalized`).
pub const COUNTERS: usize = 5;

pub static SOURCE: CudaSource = CudaSource {
    name: "signal",
    code: concat!(
        include_str!("../../cuda/common.cuh"),
        include_str!("../../cuda/signal.cu")
    ),
};

/// `2π` in double (`2 * math.pi` in Python).
pub const TWO_PI: f64 = f64::from_bits(0x401921fb54442d18);

kdef!(
    WIDEN,
    "signal",
    "widen",
    [Ptr, Ptr, I64, I64, I64],
    host_widen,
    "`(y, x, rows, cols, ldx)`: `y[r, c] = x[r·ldx + c] as f64`, `y` packed ([`widen`])."
);
kdef!(
    ABS_NARROW,
    "signal",
    "abs_narrow",
    [Ptr, Ptr, I64],
    host_abs_narrow,
    "`(y, x, n)`: `y[i] = |x[i]| as f32` ([`abs_narrow`])."
);
kdef!(
    HARMONIC_PHASE,
    "signal",
    "harmonic_phase",
    [Ptr, Ptr, Ptr, I64, I64, F32, I64],
    host_harmonic_phase,
    "`(sine, phase, f0, n, harmonics, rate, hop)`: one thread per harmonic ([`harmonic_phase`])."
);
kdef!(
    HARMONIC_SOURCE,
    "signal",
    "harmonic_source",
    [
        Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, F32, F32, F32
    ],
    host_harmonic_source,
    "`(y, sine, f0, table, lw, lb, frame, n, harmonics, hop, table_len, sine_amp, noise_std, threshold)`: one thread per sample; `frame` points at the int64 source frame of `y[0]` ([`harmonic_source`])."
);
kdef!(
    COUNTERS_ADD,
    "signal",
    "counters_add",
    [Ptr, I64, I64, I64, I64, I64],
    host_counters_add,
    "`(c, d0, d1, d2, d3, d4)`: `c[k] += d_k` over the 5 int64 counters, one thread ([`counters_add`])."
);
kdef!(
    STFT,
    "signal",
    "stft",
    [Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64],
    host_stft,
    "`(y, x, win, tw, len, frames, ldy, n_fft, hop)`: one thread per (bin, frame) ([`stft`])."
);
kdef!(
    POLAR,
    "signal",
    "polar",
    [Ptr, Ptr, I64, I64, I64, I64, F32],
    host_polar,
    "`(spec, x, bins, frames, ldx, lds, max_mag)`: one thread per (bin, frame) ([`polar`])."
);
kdef!(
    ISTFT,
    "signal",
    "istft",
    [Ptr, Ptr, Ptr, Ptr, I64, I64, I64, I64, I64, F32],
    host_istft,
    "`(y, spec, win, tw, frames, lds, n_out, n_fft, hop, limit)`: one thread per sample ([`istft`])."
);

pub static KERNELS: &[&crate::KernelDef] = &[
    &WIDEN,
    &ABS_NARROW,
    &HARMONIC_PHASE,
    &HARMONIC_SOURCE,
    &COUNTERS_ADD,
    &STFT,
    &POLAR,
    &ISTFT,
];

/// `y[r·cols + c] = x[r·ldx + c] as f64`.
pub fn widen(y: &mut [f64], x: &[f32], rows: usize, cols: usize, ldx: usize) {
    for r in 0..rows {
        for c in 0..cols {
            y[r * cols + c] = x[r * ldx + c] as f64;
        }
    }
}

/// `y[i] = |x[i]| as f32`.
pub fn abs_narrow(y: &mut [f32], x: &[f64]) {
    for (a, b) in y.iter_mut().zip(x) {
        *a = b.abs() as f32;
    }
}

/// The fractional part `a − ⌊a⌋` (`torch.remainder(a, 1)` for the non-negative values here).
fn frac32(a: f32) -> f32 {
    a - a.floor()
}

fn frac64(a: f64) -> f64 {
    a - a.floor()
}

/// The running phase of `harmonics` harmonics over `n` frames (`f0 [n]`, `sine [n, harmonics]`,
/// `phase [harmonics]` in place), per harmonic `h` (multiple `h + 1` of the fundamental):
/// `inc_t = frac((f0[t] · (h + 1)) / rate)` in float, `s_t = Σ_{u ≤ t} inc_u` in double (in
/// order), `c_t = s_t · hop + phase[h]`, `sine[t, h] = sin(2π · frac(c_t)) as f32`, and finally
/// `phase[h] = frac(c_{n−1})`: the phase stays continuous and bounded across calls.
pub fn harmonic_phase(
    sine: &mut [f32],
    phase: &mut [f64],
    f0: &[f32],
    n: usize,
    harmonics: usize,
    rate: f32,
    hop: usize,
) {
    for h in 0..harmonics {
        let hf = (h + 1) as f32;
        let p0 = phase[h];
        let mut acc = 0.0f64;
        let mut c = 0.0f64;
        for t in 0..n {
            let inc = frac32((f0[t] * hf) / rate);
            acc += inc as f64;
            c = acc * hop as f64 + p0;
            sine[t * harmonics + h] = sincos64(frac64(c) * TWO_PI).0 as f32;
        }
        if n > 0 {
            phase[h] = frac64(c);
        }
    }
}

/// The scalar parameters of [`harmonic_source`].
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct SourceParams {
    pub harmonics: usize,
    pub hop: usize,
    /// Rows of the noise table: sample positions wrap modulo it.
    pub table_len: usize,
    pub sine_amp: f32,
    pub noise_std: f32,
    pub threshold: f32,
}

/// The table row of the first sample of source frame `frame`: `(frame · hop) mod table_len`,
/// computed as `((frame mod table_len) · hop) mod table_len` so no stream length overflows (the
/// vendor's `SineGen2` reads its 7,200,000-row table at the absolute sample position modulo its
/// rows; a smaller table wraps at its own rows the same way).
pub fn noise_row(frame: u64, hop: usize, table_len: usize) -> u64 {
    let len = table_len as u64;
    ((frame % len) * hop as u64) % len
}

/// The merged excitation of `n` frames starting at source frame `frame`: for sample `i` of frame
/// `t = i / hop`, voiced `v = f0[t] > threshold`, noise amplitude `amp = v · noise_std + ((1 −
/// v) · sine_amp) / 3`, harmonic `h`'s excitation `e_h = (sine[t, h] · sine_amp) · v + amp ·
/// table[(frame · hop + i) mod table_len, h]`, and `y[i] = tanh(Σ_h e_h · lw[h] + lb[0])` (the
/// source's `Linear` and `Tanh`).
pub fn harmonic_source(
    y: &mut [f32],
    sine: &[f32],
    f0: &[f32],
    table: &[f32],
    lw: &[f32],
    lb: &[f32],
    frame: u64,
    n: usize,
    p: &SourceParams,
) {
    let hn = p.harmonics;
    let len = p.table_len as u64;
    let base = noise_row(frame, p.hop, p.table_len);
    for (i, out) in y[..n * p.hop].iter_mut().enumerate() {
        let t = i / p.hop;
        let v = if f0[t] > p.threshold { 1.0f32 } else { 0.0 };
        let amp = v * p.noise_std + ((1.0 - v) * p.sine_amp) / 3.0;
        let row = ((base + i as u64) % len) as usize;
        let noise = &table[row * hn..][..hn];
        let s = &sine[t * hn..][..hn];
        let mut acc = 0.0f32;
        for h in 0..hn {
            let e = (s[h] * p.sine_amp) * v + amp * noise[h];
            acc += e * lw[h];
        }
        *out = tanh_f32(acc + lb[0]);
    }
}

/// `c[k] += d[k]` over the vocoder's [`COUNTERS`] int64 stream counters (wrapping, as the
/// kernel's two's-complement addition).
pub fn counters_add(c: &mut [i64], d: &[i64; COUNTERS]) {
    for (a, b) in c.iter_mut().zip(d) {
        *a = a.wrapping_add(*b);
    }
}

/// Twiddles of an `n`-point DFT: `[cos(2πm/n) for m < n] ‖ [sin(2πm/n) for m < n]` by
/// [`sincos64`] (what [`stft`] and [`istft`] read; built once by the layer that owns them).
pub fn twiddles(n: usize) -> Vec<f64> {
    let (mut c, mut s) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for m in 0..n {
        let (sn, cs) = sincos64(TWO_PI * m as f64 / n as f64);
        c.push(cs);
        s.push(sn);
    }
    c.extend(s);
    c
}

/// `torch.stft(x, n_fft, hop, n_fft, win, center=True, pad_mode="reflect", return_complex)` of
/// `x [len]` for frames `0..frames`, as `[real rows ‖ imaginary rows]` (`bins = n_fft/2 + 1` each,
/// row stride `ldy`): frame `f` reads `x[f·hop + n − n_fft/2]` reflected at both ends, `v =
/// win[n] · x` in float, then `re = Σ v·cos`, `im = −Σ v·sin` in double over `n` ascending,
/// rounded once.
pub fn stft(
    y: &mut [f32],
    x: &[f32],
    win: &[f32],
    tw: &[f64],
    frames: usize,
    ldy: usize,
    n_fft: usize,
    hop: usize,
) {
    let bins = n_fft / 2 + 1;
    let len = x.len() as isize;
    for k in 0..bins {
        for f in 0..frames {
            let (mut re, mut im) = (0.0f64, 0.0f64);
            for (n, &wn) in win[..n_fft].iter().enumerate() {
                let mut j = (f * hop + n) as isize - (n_fft / 2) as isize;
                if j < 0 {
                    j = -j;
                }
                if j >= len {
                    j = 2 * (len - 1) - j;
                }
                let v = (wn * x[j as usize]) as f64;
                let m = (k * n) % n_fft;
                re += v * tw[m];
                im -= v * tw[n_fft + m];
            }
            y[k * ldy + f] = re as f32;
            y[(bins + k) * ldy + f] = im as f32;
        }
    }
}

/// The complex spectrum from a `[log-magnitude ‖ phase-logit]` block `x` (row stride `ldx`):
/// `m = min(exp(x[k]), max_mag)`, `p = sin(x[bins + k])`, `spec[k] = m·cos p`, `spec[bins + k] =
/// m·sin p` (row stride `lds`).
pub fn polar(
    spec: &mut [f32],
    x: &[f32],
    bins: usize,
    frames: usize,
    ldx: usize,
    lds: usize,
    max_mag: f32,
) {
    for k in 0..bins {
        for f in 0..frames {
            let mut m = exp_f32(x[k * ldx + f]);
            if m > max_mag {
                m = max_mag;
            }
            let p = sin_f32(x[(bins + k) * ldx + f]);
            spec[k * lds + f] = m * cos_f32(p);
            spec[(bins + k) * lds + f] = m * sin_f32(p);
        }
    }
}

/// `torch.istft(spec, n_fft, hop, n_fft, win, center=True)` clamped to `[−limit, limit]`, samples
/// `0..y.len()`: sample `s` sits at overlap-add position `p = s + n_fft/2`; over the frames `f`
/// covering it, ascending (`n = p − f·hop`), the inverse real DFT at `n` in double (`1/n_fft`;
/// imaginary parts of the DC and Nyquist bins ignored) rounded to float, times `win[n]`, summed
/// in float, over the float sum of `win[n]²`.
pub fn istft(
    y: &mut [f32],
    spec: &[f32],
    win: &[f32],
    tw: &[f64],
    frames: usize,
    lds: usize,
    n_fft: usize,
    hop: usize,
    limit: f32,
) {
    let bins = n_fft / 2 + 1;
    for (s, out) in y.iter_mut().enumerate() {
        let p = s + n_fft / 2;
        let lo = if p >= n_fft { (p - n_fft) / hop + 1 } else { 0 };
        let hi = (p / hop).min(frames - 1);
        let (mut acc, mut env) = (0.0f32, 0.0f32);
        for f in lo..=hi {
            let n = p - f * hop;
            let nyq = spec[(bins - 1) * lds + f] as f64;
            let mut v = spec[f] as f64 + if n & 1 == 1 { -nyq } else { nyq };
            for k in 1..bins - 1 {
                let m = (k * n) % n_fft;
                v += 2.0
                    * (spec[k * lds + f] as f64 * tw[m]
                        - spec[(bins + k) * lds + f] as f64 * tw[n_fft + m]);
            }
            let yf = (v / n_fft as f64) as f32;
            acc += yf * win[n];
            env += win[n] * win[n];
        }
        let o = acc / env;
        *out = if o < -limit {
            -limit
        } else if o > limit {
            limit
        } else {
            o
        };
    }
}

unsafe fn host_widen(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (rows, cols, ldx) = (a.usize(2)?, a.usize(3)?, a.usize(4)?);
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    // SAFETY: HostFn contract.
    let (y, x) = unsafe {
        (
            wr_as::<f64>(a.ptr(0)?, rows * cols)?,
            rd_as::<f32>(a.ptr(1)?, (rows - 1) * ldx + cols)?,
        )
    };
    widen(y, x, rows, cols, ldx);
    Ok(())
}

unsafe fn host_abs_narrow(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(2)?;
    // SAFETY: HostFn contract.
    let (y, x) = unsafe { (wr_as::<f32>(a.ptr(0)?, n)?, rd_as::<f64>(a.ptr(1)?, n)?) };
    abs_narrow(y, x);
    Ok(())
}

unsafe fn host_harmonic_phase(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, hn, rate, hop) = (a.usize(3)?, a.usize(4)?, a.f32(5)?, a.usize(6)?);
    // SAFETY: HostFn contract.
    let (sine, phase, f0) = unsafe {
        (
            wr_as::<f32>(a.ptr(0)?, n * hn)?,
            wr_as::<f64>(a.ptr(1)?, hn)?,
            rd_as::<f32>(a.ptr(2)?, n)?,
        )
    };
    harmonic_phase(sine, phase, f0, n, hn, rate, hop);
    Ok(())
}

unsafe fn host_harmonic_source(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let n = a.usize(7)?;
    let p = SourceParams {
        harmonics: a.usize(8)?,
        hop: a.usize(9)?,
        table_len: a.usize(10)?,
        sine_amp: a.f32(11)?,
        noise_std: a.f32(12)?,
        threshold: a.f32(13)?,
    };
    if n == 0 || p.hop == 0 {
        return Ok(());
    }
    if p.table_len == 0 {
        return Err(invalid("signal.harmonic_source: empty noise table"));
    }
    let hn = p.harmonics;
    // SAFETY: HostFn contract.
    unsafe {
        let y = wr_as::<f32>(a.ptr(0)?, n * p.hop)?;
        let sine = rd_as::<f32>(a.ptr(1)?, n * hn)?;
        let f0 = rd_as::<f32>(a.ptr(2)?, n)?;
        let table = rd_as::<f32>(a.ptr(3)?, p.table_len * hn)?;
        let lw = rd_as::<f32>(a.ptr(4)?, hn)?;
        let lb = rd_as::<f32>(a.ptr(5)?, 1)?;
        let frame = rd_as::<i64>(a.ptr(6)?, 1)?[0] as u64;
        harmonic_source(y, sine, f0, table, lw, lb, frame, n, &p);
    }
    Ok(())
}

unsafe fn host_counters_add(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let mut d = [0i64; COUNTERS];
    for (k, v) in d.iter_mut().enumerate() {
        *v = a.i64(1 + k)?;
    }
    // SAFETY: HostFn contract.
    let c = unsafe { wr_as::<i64>(a.ptr(0)?, COUNTERS)? };
    counters_add(c, &d);
    Ok(())
}

fn fft_args(n_fft: usize, hop: usize) -> Result<(), KernelError> {
    if n_fft < 2 || !n_fft.is_multiple_of(2) || hop == 0 {
        return Err(invalid(format!(
            "signal: n_fft {n_fft} (even, >= 2), hop {hop} (> 0)"
        )));
    }
    Ok(())
}

unsafe fn host_stft(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (len, frames, ldy, n_fft, hop) = (
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
    );
    fft_args(n_fft, hop)?;
    if frames == 0 {
        return Ok(());
    }
    if len <= n_fft / 2 {
        return Err(invalid(format!(
            "signal.stft: reflect padding {} needs more than {len} samples",
            n_fft / 2
        )));
    }
    let bins = n_fft / 2 + 1;
    // SAFETY: HostFn contract.
    unsafe {
        let y = wr_as::<f32>(a.ptr(0)?, (2 * bins - 1) * ldy + frames)?;
        let x = rd_as::<f32>(a.ptr(1)?, len)?;
        let win = rd_as::<f32>(a.ptr(2)?, n_fft)?;
        let tw = rd_as::<f64>(a.ptr(3)?, 2 * n_fft)?;
        stft(y, x, win, tw, frames, ldy, n_fft, hop);
    }
    Ok(())
}

unsafe fn host_polar(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (bins, frames, ldx, lds, max_mag) = (
        a.usize(2)?,
        a.usize(3)?,
        a.usize(4)?,
        a.usize(5)?,
        a.f32(6)?,
    );
    if bins == 0 || frames == 0 {
        return Ok(());
    }
    // SAFETY: HostFn contract.
    unsafe {
        let spec = wr_as::<f32>(a.ptr(0)?, (2 * bins - 1) * lds + frames)?;
        let x = rd_as::<f32>(a.ptr(1)?, (2 * bins - 1) * ldx + frames)?;
        polar(spec, x, bins, frames, ldx, lds, max_mag);
    }
    Ok(())
}

unsafe fn host_istft(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (frames, lds, n_out, n_fft, hop, limit) = (
        a.usize(4)?,
        a.usize(5)?,
        a.usize(6)?,
        a.usize(7)?,
        a.usize(8)?,
        a.f32(9)?,
    );
    fft_args(n_fft, hop)?;
    if n_out == 0 {
        return Ok(());
    }
    if frames == 0 || n_out > (frames - 1) * hop {
        return Err(invalid(format!(
            "signal.istft: {n_out} samples from {frames} frames of hop {hop}"
        )));
    }
    let bins = n_fft / 2 + 1;
    // SAFETY: HostFn contract.
    unsafe {
        let y = wr_as::<f32>(a.ptr(0)?, n_out)?;
        let spec = rd_as::<f32>(a.ptr(1)?, (2 * bins - 1) * lds + frames)?;
        let win = rd_as::<f32>(a.ptr(2)?, n_fft)?;
        let tw = rd_as::<f64>(a.ptr(3)?, 2 * n_fft)?;
        istft(y, spec, win, tw, frames, lds, n_fft, hop, limit);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A periodic Hann window of `n` points in float (scipy's `get_window("hann", n)`).
    fn hann(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| (0.5 - 0.5 * (TWO_PI * i as f64 / n as f64).cos()) as f32)
            .collect()
    }

    /// STFT then ISTFT reconstructs the signal (Hann window, hop n/4: the envelope is
    /// constant inside), within float rounding.
    #[test]
    fn stft_istft_round_trip() {
        let (n_fft, hop, len) = (16, 4, 96);
        let x: Vec<f32> = (0..len)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) / 13.0)
            .collect();
        let win = hann(n_fft);
        let tw = twiddles(n_fft);
        let frames = len / hop + 1;
        let ld = frames;
        let mut spec = vec![0.0f32; (n_fft + 2) * ld];
        stft(&mut spec, &x, &win, &tw, frames, ld, n_fft, hop);
        let mut y = vec![0.0f32; len];
        istft(&mut y, &spec, &win, &tw, frames, ld, n_fft, hop, 10.0);
        for (a, b) in y.iter().zip(&x) {
            assert!((a - b).abs() < 1e-5, "{a} vs {b}");
        }
        // the DC bin of a constant is its windowed sum
        let ones = vec![1.0f32; len];
        stft(&mut spec, &ones, &win, &tw, frames, ld, n_fft, hop);
        let sum: f32 = win.iter().sum();
        assert!((spec[5] - sum).abs() < 1e-5 && spec[(n_fft / 2 + 1) * ld + 5].abs() < 1e-6);
    }

    #[test]
    fn phase_is_continuous_across_calls() {
        let f0 = [100.0f32, 120.0, 0.0, 130.0];
        let (hn, hop) = (3, 480);
        let mut one = vec![0.0f32; 4 * hn];
        let mut p1 = vec![0.25f64; hn];
        harmonic_phase(&mut one, &mut p1, &f0, 4, hn, 24000.0, hop);
        // the same frames in two calls: the running sum restarts, so the phase can differ in the
        // last bits, but both stay in [0, 1) and the sines agree closely
        let mut two = vec![0.0f32; 4 * hn];
        let mut p2 = vec![0.25f64; hn];
        harmonic_phase(&mut two[..2 * hn], &mut p2, &f0[..2], 2, hn, 24000.0, hop);
        harmonic_phase(&mut two[2 * hn..], &mut p2, &f0[2..], 2, hn, 24000.0, hop);
        for h in 0..hn {
            assert!((0.0..1.0).contains(&p1[h]) && (p1[h] - p2[h]).abs() < 1e-9);
        }
        for (a, b) in one.iter().zip(&two) {
            assert!((a - b).abs() < 1e-6);
        }
        // frame 0, harmonic 0: inc = 100/24000, cycles = inc·480 + 0.25 = 2.25 → sin(π/2)
        assert!((one[0] - 1.0).abs() < 1e-7);
    }

    #[test]
    fn source_mixes_voiced_and_noise() {
        let p = SourceParams {
            harmonics: 2,
            hop: 2,
            table_len: 3,
            sine_amp: 0.1,
            noise_std: 0.003,
            threshold: 10.0,
        };
        let sine = [1.0f32, 0.5, 1.0, 0.5];
        let f0 = [100.0f32, 5.0];
        let table = [1.0f32, 0.0, 0.0, 1.0, 2.0, 2.0];
        let mut y = [0.0f32; 4];
        // frame 4: row (4 · 2) mod 3 = 2
        harmonic_source(&mut y, &sine, &f0, &table, &[1.0, 1.0], &[0.0], 4, 2, &p);
        // sample 0: voiced, table row 2: (0.1 + 0.05) + 0.003·4
        assert!((y[0] - tanh_f32(0.1 + 0.05 + 0.012)).abs() < 1e-7);
        // sample 2: unvoiced, table row 1: (0.1/3)·1
        assert!((y[2] - tanh_f32(0.1 / 3.0)).abs() < 1e-7);
        // the rows wrap modulo the table: frame 4 + 3k reads the rows frame 4 does, bit for bit
        for frame in [7, 3 * 1_000_003 + 4, u64::MAX - 2] {
            let mut z = [0.0f32; 4];
            harmonic_source(
                &mut z,
                &sine,
                &f0,
                &table,
                &[1.0, 1.0],
                &[0.0],
                frame,
                2,
                &p,
            );
            assert_eq!(z.map(f32::to_bits), y.map(f32::to_bits), "frame {frame}");
        }
        // the vendor's table wraps after 300 s (frame 15,000), the tiny one after 101 frames
        assert_eq!(noise_row(15_000, 480, 7_200_000), 0);
        assert_eq!(noise_row(14_999, 480, 7_200_000), 7_200_000 - 480);
        assert_eq!(noise_row(101, 480, 48_480), 0);
        assert_eq!(noise_row(102, 480, 48_480), 480);
    }
}

#[cfg(test)]
mod cuda_cross_check;
