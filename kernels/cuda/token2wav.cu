// Token2Wav flow kernels (token embedding, UpsampleConformerEncoderV2, CFM + DiT estimator).
// Host twins: kernels/src/token2wav/ (defs.rs maps each entry to its twin). Compiled with
// --fmad=false --prec-div=true --prec-sqrt=true --ftz=false: every a*b + c rounds twice, as in
// Rust. Transcendentals are the double-precision helpers below, line-by-line ports of
// kernels/src/token2wav/math.rs, rounded once to float. Reductions are walked by one thread in
// ascending index order (the twins' order); no atomics.
//
// Sizes are long long; addresses are raw device pointers. GEMMs are not here: the runtime's
// Backend::gemm (cuBLAS) computes every Linear and every convolution (after t2w_copy_block
// builds its im2col rows).

typedef long long i64;

#define T2W_GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// ---- math.rs ------------------------------------------------------------------------------

__device__ __forceinline__ double t2w_pow2(i64 k) { return __longlong_as_double((k + 1023) << 52); }

__device__ double t2w_exp64(double x) {
    const double LN2_HI = __longlong_as_double(0x3fe62e42fee00000LL);
    const double LN2_LO = __longlong_as_double(0x3dea39ef35793c76LL);
    const double LOG2E = __longlong_as_double(0x3ff71547652b82feLL);
    if (x != x) return x;
    if (x > 709.0) return __longlong_as_double(0x7ff0000000000000LL);
    if (x < -708.0) return 0.0;
    const double k = round(x * LOG2E);
    const double r = (x - k * LN2_HI) - k * LN2_LO;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return p * t2w_pow2((i64)k);
}

__device__ double t2w_ln64(double x) {
    const double LN2_HI = __longlong_as_double(0x3fe62e42fee00000LL);
    const double LN2_LO = __longlong_as_double(0x3dea39ef35793c76LL);
    const double SQRT2 = __longlong_as_double(0x3ff6a09e667f3bcdLL);
    const double MIN_POSITIVE = __longlong_as_double(0x0010000000000000LL);
    if (x != x || x < 0.0) return __longlong_as_double(0x7ff8000000000000LL);
    if (x == 0.0) return __longlong_as_double((i64)0xfff0000000000000ULL);
    if (x == __longlong_as_double(0x7ff0000000000000LL)) return x;
    i64 bias = 0;
    if (x < MIN_POSITIVE) {
        x = x * t2w_pow2(54);
        bias = -54;
    }
    const unsigned long long bits = (unsigned long long)__double_as_longlong(x);
    i64 e = (i64)((bits >> 52) & 0x7ff) - 1023 + bias;
    double m = __longlong_as_double((i64)((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL));
    if (m > SQRT2) {
        m = m * 0.5;
        e += 1;
    }
    const double s = (m - 1.0) / (m + 1.0);
    const double s2 = s * s;
    double p = 1.0 / 23.0;
    const double ds[11] = {21.0, 19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0};
    for (int i = 0; i < 11; ++i) p = p * s2 + 1.0 / ds[i];
    const double lnm = 2.0 * s * p;
    const double ef = (double)e;
    return ef * LN2_HI + (ef * LN2_LO + lnm);
}

__device__ double t2w_log1p64(double x) {
    const double u = 1.0 + x;
    if (u == 1.0) return x;
    if (u == __longlong_as_double(0x7ff0000000000000LL)) return u;
    return t2w_ln64(u) * (x / (u - 1.0));
}

__device__ double t2w_tanh64(double x) {
    const double ax = fabs(x);
    double t;
    if (ax < 0.05) {
        const double x2 = ax * ax;
        double p = -1382.0 / 155925.0;
        p = p * x2 + 62.0 / 2835.0;
        p = p * x2 - 17.0 / 315.0;
        p = p * x2 + 2.0 / 15.0;
        p = p * x2 - 1.0 / 3.0;
        p = p * x2 + 1.0;
        t = ax * p;
    } else if (ax > 20.0) {
        t = 1.0;
    } else {
        t = 1.0 - 2.0 / (t2w_exp64(2.0 * ax) + 1.0);
    }
    return x < 0.0 ? -t : t;
}

__device__ void t2w_sincos64(double x, double* sn, double* cs) {
    const double PIO2_1 = __longlong_as_double(0x3ff921fb54400000LL);
    const double PIO2_1T = __longlong_as_double(0x3dd0b4611a626331LL);
    const double TWO_OVER_PI = __longlong_as_double(0x3fe45f306dc9c883LL);
    const double SIN[9] = {1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0,
                           -1.0 / 39916800.0,       1.0 / 362880.0,          -1.0 / 5040.0,
                           1.0 / 120.0,             -1.0 / 6.0,              1.0};
    const double COS[10] = {-1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0,
                            1.0 / 479001600.0,         -1.0 / 3628800.0,       1.0 / 40320.0,
                            -1.0 / 720.0,              1.0 / 24.0,             -0.5,
                            1.0};
    const double k = round(x * TWO_OVER_PI);
    const double r = (x - k * PIO2_1) - k * PIO2_1T;
    const double r2 = r * r;
    double s = 0.0;
    for (int i = 0; i < 9; ++i) s = s * r2 + SIN[i];
    const double sin_r = r * s;
    double c = 0.0;
    for (int i = 0; i < 10; ++i) c = c * r2 + COS[i];
    switch (((i64)k) & 3) {
        case 0: *sn = sin_r; *cs = c; break;
        case 1: *sn = c; *cs = -sin_r; break;
        case 2: *sn = -sin_r; *cs = -c; break;
        default: *sn = -c; *cs = sin_r; break;
    }
}

__device__ __forceinline__ float t2w_expf(float x) { return (float)t2w_exp64((double)x); }
__device__ __forceinline__ float t2w_tanhf(float x) { return (float)t2w_tanh64((double)x); }
__device__ __forceinline__ float t2w_log1pf(float x) { return (float)t2w_log1p64((double)x); }
__device__ __forceinline__ float t2w_sinf(float x) { double s, c; t2w_sincos64((double)x, &s, &c); return (float)s; }
__device__ __forceinline__ float t2w_cosf(float x) { double s, c; t2w_sincos64((double)x, &s, &c); return (float)c; }

// ---- elementwise.rs -----------------------------------------------------------------------

extern "C" __global__ void t2w_embedding(float* out, const unsigned* ids, const float* table, i64 n, i64 dim,
                                         i64 vocab) {
    T2W_GRID_STRIDE(i, n * dim) {
        const i64 t = i / dim, c = i % dim;
        const i64 id = (i64)ids[t];
        out[i] = id < vocab ? table[id * dim + c] : 0.0f;
    }
}

extern "C" __global__ void t2w_copy_block(float* dst, i64 ldd, const float* src, i64 lds, i64 rows, i64 cols,
                                          i64 rep) {
    T2W_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols, j = i % cols;
        dst[r * ldd + j] = src[(r / rep) * lds + j];
    }
}

extern "C" __global__ void t2w_transpose(float* out, i64 ldo, const float* x, i64 ldx, i64 rows, i64 cols) {
    T2W_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols, c = i % cols;
        out[c * ldo + r] = x[r * ldx + c];
    }
}

extern "C" __global__ void t2w_act(float* x, i64 n, int op, float alpha) {
    const float BETA = __int_as_float(0x3f4c422a);  // sqrt(2/pi)
    const float KAPPA = 0.044715f;
    T2W_GRID_STRIDE(i, n) {
        const float v = x[i];
        float y;
        switch (op) {
            case 0: y = v / (1.0f + t2w_expf(-v)); break;
            case 1: y = v * t2w_tanhf(t2w_log1pf(t2w_expf(v))); break;
            case 2: {
                const float cube = v * v * v;
                const float inner = BETA * (v + KAPPA * cube);
                y = 0.5f * v * (1.0f + t2w_tanhf(inner));
                break;
            }
            case 3: y = v <= 0.0f ? v * alpha : v; break;
            default: y = v * alpha; break;
        }
        x[i] = y;
    }
}

extern "C" __global__ void t2w_add(float* x, const float* y, i64 n) {
    T2W_GRID_STRIDE(i, n) x[i] = x[i] + y[i];
}

extern "C" __global__ void t2w_gated_add(float* x, const float* gate, const float* y, i64 rows, i64 dim) {
    T2W_GRID_STRIDE(i, rows * dim) x[i] = x[i] + gate[i % dim] * y[i];
}

extern "C" __global__ void t2w_cfg_euler(float* x, const float* v, i64 n, float cfg, float dt) {
    const float a = 1.0f + cfg;
    T2W_GRID_STRIDE(i, n) {
        const float d = a * v[i] - cfg * v[n + i];
        x[i] = x[i] + dt * d;
    }
}

extern "C" __global__ void t2w_kv_pack(float* cache, i64 cap, i64 t0, const float* k, const float* v, i64 ld,
                                       i64 batch, i64 heads, i64 t, i64 d) {
    T2W_GRID_STRIDE(i, batch * heads * t * d) {
        const i64 c = i % d, ti = (i / d) % t, h = (i / (d * t)) % heads, b = i / (d * t * heads);
        const i64 dst = ((b * heads + h) * cap + t0 + ti) * 2 * d + c;
        const i64 src = (b * t + ti) * ld + h * d + c;
        cache[dst] = k[src];
        cache[dst + d] = v[src];
    }
}

// ---- pos.rs -------------------------------------------------------------------------------

extern "C" __global__ void t2w_timestep_embedding(float* out, i64 dim, float t, float scale, float max_period) {
    const i64 half = dim / 2;
    const float c = -(float)t2w_ln64((double)max_period);
    const float ts = t * scale;
    T2W_GRID_STRIDE(i, half) {
        const float f = t2w_expf(c * (float)i / (float)half);
        const float a = ts * f;
        out[i] = t2w_cosf(a);
        out[half + i] = t2w_sinf(a);
    }
    if ((dim & 1) && blockIdx.x == 0 && threadIdx.x == 0) out[dim - 1] = 0.0f;
}

// ---- norm.rs (one thread per row) ----------------------------------------------------------

__device__ __forceinline__ void t2w_moments(const float* row, i64 n, float eps, float* mean, float* rstd) {
    float s = 0.0f;
    for (i64 j = 0; j < n; ++j) s = s + row[j];
    const float m = s / (float)n;
    float q = 0.0f;
    for (i64 j = 0; j < n; ++j) {
        const float d = row[j] - m;
        q = q + d * d;
    }
    const float var = q / (float)n;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + eps);
}

extern "C" __global__ void t2w_layer_norm(float* y, i64 ldy, const float* x, i64 ldx, const float* gamma,
                                          const float* beta, i64 rows, i64 dim, float eps) {
    T2W_GRID_STRIDE(r, rows) {
        const float* xr = x + r * ldx;
        float* yr = y + r * ldy;
        float mean, rstd;
        t2w_moments(xr, dim, eps, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = 0; j < dim; ++j) {
            float v = xr[j] * rstd + bias;
            if (gamma) v = v * gamma[j];
            if (beta) v = v + beta[j];
            yr[j] = v;
        }
    }
}

extern "C" __global__ void t2w_layer_norm_modulate(float* y, const float* x, const float* shift, const float* scale,
                                                   i64 rows, i64 dim, float eps) {
    T2W_GRID_STRIDE(r, rows) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        float mean, rstd;
        t2w_moments(xr, dim, eps, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = 0; j < dim; ++j) {
            const float n = xr[j] * rstd + bias;
            yr[j] = n * (1.0f + scale[j]) + shift[j];
        }
    }
}

extern "C" __global__ void t2w_l2_normalize(float* y, const float* x, i64 rows, i64 dim, float eps) {
    T2W_GRID_STRIDE(r, rows) {
        const float* xr = x + r * dim;
        float s = 0.0f;
        for (i64 j = 0; j < dim; ++j) s = s + xr[j] * xr[j];
        const float norm = fmaxf(sqrtf(s), eps);
        for (i64 j = 0; j < dim; ++j) y[r * dim + j] = xr[j] / norm;
    }
}

// ---- attn.rs (one thread per query row; scores recomputed per pass, identical values) -------

#define T2W_MAX_HEAD_DIM 128

__device__ __forceinline__ float t2w_dot(const float* a, const float* b, i64 d) {
    float acc = 0.0f;
    for (i64 c = 0; c < d; ++c) acc = acc + a[c] * b[c];
    return acc;
}

extern "C" __global__ void t2w_attention(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                         i64 tk, i64 d, i64 cap, float scale) {
    T2W_GRID_STRIDE(idx, batch * heads * tq) {
        if (d > T2W_MAX_HEAD_DIM) return;
        const i64 i = idx % tq, h = (idx / tq) % heads, b = idx / (tq * heads);
        const float* qi = q + (b * tq + i) * heads * d + h * d;
        const float* base = kv + (b * heads + h) * cap * 2 * d;
        float m = -__int_as_float(0x7f800000);
        for (i64 j = 0; j < tk; ++j) m = fmaxf(m, scale * t2w_dot(qi, base + j * 2 * d, d));
        float acc[T2W_MAX_HEAD_DIM];
        for (i64 c = 0; c < d; ++c) acc[c] = 0.0f;
        float sum = 0.0f;
        for (i64 j = 0; j < tk; ++j) {
            const float s = scale * t2w_dot(qi, base + j * 2 * d, d);
            const float e = t2w_expf(s - m);
            sum = sum + e;
            const float* vj = base + j * 2 * d + d;
            for (i64 c = 0; c < d; ++c) acc[c] = acc[c] + e * vj[c];
        }
        float* o = out + (b * tq + i) * heads * d + h * d;
        for (i64 c = 0; c < d; ++c) o[c] = acc[c] / sum;
    }
}

__device__ __forceinline__ float t2w_rel_score(const float* qi, const float* u, const float* w, const float* kj,
                                               const float* pr, i64 d, float denom) {
    float ac = 0.0f, bd = 0.0f;
    for (i64 c = 0; c < d; ++c) ac = ac + (qi[c] + u[c]) * kj[c];
    for (i64 c = 0; c < d; ++c) bd = bd + (qi[c] + w[c]) * pr[c];
    return (ac + bd) / denom;
}

extern "C" __global__ void t2w_rel_pos_attention(float* out, const float* q, const float* pos_bias_u,
                                                 const float* pos_bias_v, const float* kv, const float* p, i64 heads,
                                                 i64 tq, i64 tk, i64 d, i64 cap) {
    T2W_GRID_STRIDE(idx, heads * tq) {
        if (d > T2W_MAX_HEAD_DIM) return;
        const i64 i = idx % tq, h = idx / tq;
        const i64 hd = heads * d;
        const float denom = (float)sqrt((double)d);
        const float* qi = q + i * hd + h * d;
        const float* u = pos_bias_u + h * d;
        const float* w = pos_bias_v + h * d;
        const float* base = kv + h * cap * 2 * d;
        float m = -__int_as_float(0x7f800000);
        for (i64 j = 0; j < tk; ++j) {
            const float* pr = p + (tq - 1 - i + j) * hd + h * d;
            m = fmaxf(m, t2w_rel_score(qi, u, w, base + j * 2 * d, pr, d, denom));
        }
        float sum = 0.0f;
        for (i64 j = 0; j < tk; ++j) {
            const float* pr = p + (tq - 1 - i + j) * hd + h * d;
            sum = sum + t2w_expf(t2w_rel_score(qi, u, w, base + j * 2 * d, pr, d, denom) - m);
        }
        const float inv = 1.0f / sum;
        float acc[T2W_MAX_HEAD_DIM];
        for (i64 c = 0; c < d; ++c) acc[c] = 0.0f;
        for (i64 j = 0; j < tk; ++j) {
            const float* pr = p + (tq - 1 - i + j) * hd + h * d;
            const float e = t2w_expf(t2w_rel_score(qi, u, w, base + j * 2 * d, pr, d, denom) - m);
            const float pj = e * inv;
            const float* vj = base + j * 2 * d + d;
            for (i64 c = 0; c < d; ++c) acc[c] = acc[c] + pj * vj[c];
        }
        float* o = out + i * hd + h * d;
        for (i64 c = 0; c < d; ++c) o[c] = acc[c];
    }
}
