// Signal kernels: the harmonic (neural source-filter) excitation with its float64 phase, a
// short-time Fourier transform and its inverse by direct DFT, and float/double conversions.
// Host twins: kernels/src/signal/mod.rs. Prepended with common.cuh (dcc_sincos64, dcc_expf,
// dcc_sinf, dcc_cosf, dcc_tanhf are its line-by-line ported transcendentals).
//
// No reduction crosses threads: each thread sums its terms in ascending index order, as the twin.

// y[r, c] = (double)x[r*ldx + c], y packed [rows, cols].
extern "C" __global__ void signal_widen(double* y, const float* x, i64 rows, i64 cols, i64 ldx) {
    DCC_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols;
        y[i] = (double)x[r * ldx + (i - r * cols)];
    }
}

// y[i] = (float)|x[i]|.
extern "C" __global__ void signal_abs_narrow(float* y, const double* x, i64 n) {
    DCC_GRID_STRIDE(i, n) y[i] = (float)fabs(x[i]);
}

// One thread per harmonic h < harmonics (h + 1 times the fundamental). Over the n frames in
// order: the per-sample phase increment inc = frac((f0[t] * (h + 1)) / rate) in float, its
// running sum in double, cycles = sum * hop + phase[h], sine[t, h] = (float)sin(2*pi*frac(cycles));
// finally phase[h] = frac(cycles of the last frame) (in place).
extern "C" __global__ void signal_harmonic_phase(float* sine, double* phase, const float* f0, i64 n,
                                                 i64 harmonics, float rate, i64 hop) {
    const double TWO_PI = __longlong_as_double(0x401921fb54442d18LL);
    DCC_GRID_STRIDE(h, harmonics) {
        const float hf = (float)(h + 1);
        const double p0 = phase[h];
        double acc = 0.0;
        double c = 0.0;
        for (i64 t = 0; t < n; ++t) {
            const float a = (f0[t] * hf) / rate;
            const float inc = a - floorf(a);
            acc = acc + (double)inc;
            c = acc * (double)hop + p0;
            double s, co;
            dcc_sincos64((c - floor(c)) * TWO_PI, &s, &co);
            sine[t * harmonics + h] = (float)s;
        }
        if (n > 0) phase[h] = c - floor(c);
    }
}

// One thread per sample i < n*hop of frame t = i / hop: voiced v = f0[t] > threshold; the
// excitation of harmonic h is (sine[t, h] * sine_amp) * v + amp * table[row(i), h] with
// amp = v * noise_std + ((1 - v) * sine_amp) / 3; y[i] = tanh(sum_h e_h * lw[h] + lb[0]).
// The table row is the absolute sample position modulo the table's rows, (frame[0] * hop + i)
// mod table_len, computed as (((frame[0] mod table_len) * hop) mod table_len + i) mod table_len
// (no overflow for any stream length): frame[0] is the stream's source frame in device memory
// (a counter a captured graph reads at replay, never a frozen host value).
extern "C" __global__ void signal_harmonic_source(float* y, const float* sine, const float* f0,
                                                  const float* table, const float* lw,
                                                  const float* lb, const i64* frame, i64 n,
                                                  i64 harmonics, i64 hop, i64 table_len,
                                                  float sine_amp, float noise_std,
                                                  float threshold) {
    const unsigned long long len = (unsigned long long)table_len;
    const unsigned long long base =
        (((unsigned long long)frame[0] % len) * (unsigned long long)hop) % len;
    DCC_GRID_STRIDE(i, n * hop) {
        const i64 t = i / hop;
        const float v = f0[t] > threshold ? 1.0f : 0.0f;
        const float amp = v * noise_std + ((1.0f - v) * sine_amp) / 3.0f;
        const float* noise = table + ((base + (unsigned long long)i) % len) * harmonics;
        const float* s = sine + t * harmonics;
        float acc = 0.0f;
        for (i64 h = 0; h < harmonics; ++h) {
            const float e = (s[h] * sine_amp) * v + amp * noise[h];
            acc = acc + e * lw[h];
        }
        y[i] = dcc_tanhf(acc + lb[0]);
    }
}

// The vocoder's stream counters (mel_offset, source_offset, source_end, speech_offset,
// finalized: int64, in device memory): c[k] += d_k, one thread. Queued after the work that read
// them, so a captured graph advances them exactly as eager execution does.
extern "C" __global__ void signal_counters_add(i64* c, i64 d0, i64 d1, i64 d2, i64 d3, i64 d4) {
    DCC_GRID_STRIDE(i, 1) {
        c[0] += d0;
        c[1] += d1;
        c[2] += d2;
        c[3] += d3;
        c[4] += d4;
    }
}

// torch.stft(x, n_fft, hop, n_fft, window, center=True, pad_mode="reflect", onesided) of x[len],
// frames 0..frames: one thread per (bin k <= n_fft/2, frame f). Frame f reads x at f*hop + n -
// n_fft/2 (n < n_fft), reflected at both ends; v = win[n] * x (float), then re = sum v*cos,
// im = -sum v*sin in double over n ascending (twiddles tw[m] = cos(2 pi m / n_fft),
// tw[n_fft + m] = sin(...)), rounded to float. y: rows 0..bins the real parts, rows
// bins..2*bins the imaginary parts, row stride ldy.
extern "C" __global__ void signal_stft(float* y, const float* x, const float* win, const double* tw,
                                       i64 len, i64 frames, i64 ldy, i64 n_fft, i64 hop) {
    const i64 bins = n_fft / 2 + 1;
    DCC_GRID_STRIDE(i, bins * frames) {
        const i64 k = i / frames;
        const i64 f = i - k * frames;
        double re = 0.0, im = 0.0;
        for (i64 n = 0; n < n_fft; ++n) {
            i64 j = f * hop + n - n_fft / 2;
            if (j < 0) j = -j;
            if (j >= len) j = 2 * (len - 1) - j;
            const double v = (double)(win[n] * x[j]);
            const i64 m = (k * n) % n_fft;
            re = re + v * tw[m];
            im = im - v * tw[n_fft + m];
        }
        y[k * ldy + f] = (float)re;
        y[(bins + k) * ldy + f] = (float)im;
    }
}

// The ISTFT's input from a log-magnitude / phase-logit block x (rows 0..bins, bins..2*bins, row
// stride ldx): m = min(exp(x[k]), max_mag), p = sin(x[bins + k]); spec[k] = m*cos(p),
// spec[bins + k] = m*sin(p) (row stride lds). One thread per (k, f).
extern "C" __global__ void signal_polar(float* spec, const float* x, i64 bins, i64 frames, i64 ldx,
                                        i64 lds, float max_mag) {
    DCC_GRID_STRIDE(i, bins * frames) {
        const i64 k = i / frames;
        const i64 f = i - k * frames;
        float m = dcc_expf(x[k * ldx + f]);
        m = m > max_mag ? max_mag : m;
        const float p = dcc_sinf(x[(bins + k) * ldx + f]);
        spec[k * lds + f] = m * dcc_cosf(p);
        spec[(bins + k) * lds + f] = m * dcc_sinf(p);
    }
}

// torch.istft(spec, n_fft, hop, n_fft, window, center=True) then clamp to [-limit, limit], for
// output samples 0..n_out: one thread per sample s at overlap-add position p = s + n_fft/2. Over
// the frames f covering p in ascending order (n = p - f*hop): the inverse real DFT of frame f at
// n in double (1/n_fft normalisation; the imaginary parts of bins 0 and n_fft/2 ignored), rounded
// to float, times win[n], summed in float; the window envelope sum of win[n]^2 likewise; y =
// clamp(sum / envelope).
extern "C" __global__ void signal_istft(float* y, const float* spec, const float* win,
                                        const double* tw, i64 frames, i64 lds, i64 n_out,
                                        i64 n_fft, i64 hop, float limit) {
    const i64 bins = n_fft / 2 + 1;
    DCC_GRID_STRIDE(s, n_out) {
        const i64 p = s + n_fft / 2;
        const i64 lo = p >= n_fft ? (p - n_fft) / hop + 1 : 0;
        i64 hi = p / hop;
        if (hi > frames - 1) hi = frames - 1;
        float acc = 0.0f, env = 0.0f;
        for (i64 f = lo; f <= hi; ++f) {
            const i64 n = p - f * hop;
            const double nyq = (double)spec[(bins - 1) * lds + f];
            double v = (double)spec[f] + ((n & 1) ? -nyq : nyq);
            for (i64 k = 1; k < bins - 1; ++k) {
                const i64 m = (k * n) % n_fft;
                v = v + 2.0 * ((double)spec[k * lds + f] * tw[m] -
                               (double)spec[(bins + k) * lds + f] * tw[n_fft + m]);
            }
            const float yf = (float)(v / (double)n_fft);
            acc = acc + yf * win[n];
            env = env + win[n] * win[n];
        }
        const float o = acc / env;
        y[s] = o < -limit ? -limit : (o > limit ? limit : o);
    }
}
