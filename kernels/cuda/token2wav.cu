// Token2Wav flow kernels (token embedding, UpsampleConformerEncoderV2, CFM + DiT estimator).
// Host twins: kernels/src/token2wav/ (defs.rs maps each entry to its twin). Compiled with
// --fmad=false --prec-div=true --prec-sqrt=true --ftz=false: every a*b + c rounds twice, as in
// Rust. Transcendentals are the helpers below, line-by-line ports of kernels/src/token2wav/math.rs:
// expf and Mish in single precision with __fmaf_rn (Rust mul_add), the others in double, rounded
// once to float. Reductions are walked by one thread in
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

// Single-precision expf (math.rs `exp_f32`, line by line): Cody-Waite reduction by ln 2 in two
// fused multiply-adds, degree-7 Taylor polynomial of e^r in fused multiply-adds, then 2^k as two
// exact power-of-two factors (one rounding, also into the subnormals). Within 1 ulp.
__device__ __forceinline__ float t2w_pow2f(int k) { return __int_as_float((k + 127) << 23); }

__device__ __forceinline__ float t2w_expf(float x) {
    if (x != x) return x;
    if (x > __int_as_float(0x42b17218)) return __int_as_float(0x7f800000);
    if (x < __int_as_float(0xc2cff1b4)) return 0.0f;
    const float k = rintf(x * __int_as_float(0x3fb8aa3b));
    float r = __fmaf_rn(-k, __int_as_float(0x3f317200), x);
    r = __fmaf_rn(-k, __int_as_float(0x35bfbe8e), r);
    float p = __int_as_float(0x39500d01);
    p = __fmaf_rn(p, r, __int_as_float(0x3ab60b61));
    p = __fmaf_rn(p, r, __int_as_float(0x3c088889));
    p = __fmaf_rn(p, r, __int_as_float(0x3d2aaaab));
    p = __fmaf_rn(p, r, __int_as_float(0x3e2aaaab));
    p = __fmaf_rn(p, r, __int_as_float(0x3f000000));
    p = __fmaf_rn(p, r, 1.0f);
    p = __fmaf_rn(p, r, 1.0f);
    const int ki = (int)k;
    const int k1 = ki >> 1;
    return (p * t2w_pow2f(k1)) * t2w_pow2f(ki - k1);
}

// Mish (math.rs `mish_f32`): x · n(n + 2) / (n(n + 2) + 2), n = e^x; x above 20 passes.
__device__ __forceinline__ float t2w_mish(float x) {
    if (x > 20.0f) return x;
    const float n = t2w_expf(x);
    const float u = n * (n + 2.0f);
    return x * (u / (u + 2.0f));
}

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
            case 1: y = t2w_mish(v); break;
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

// ---- reductions (warp per row) --------------------------------------------------------------
//
// Every row reduction is one warp's: lane l sums the terms j = l, l + 32, l + 64, ... in ascending
// order (starting from 0.0f), then the 32 lane partials meet in a fixed tree, offsets 16, 8, 4, 2, 1
// (`v += shfl_down(v, off)`); lane 0's value is broadcast. The host twin (`math::warp_sum`) does
// the same additions in the same order. A kernel using it needs blockDim.x to be a multiple of 32
// (checked by the twin; the kernels trap otherwise).

#define T2W_WARP 32
#define T2W_FULL_MASK 0xffffffffu

__device__ __forceinline__ float t2w_warp_tree(float v) {
    for (int off = T2W_WARP / 2; off > 0; off >>= 1) v = v + __shfl_down_sync(T2W_FULL_MASK, v, off);
    return __shfl_sync(T2W_FULL_MASK, v, 0);
}

__device__ __forceinline__ float t2w_warp_max(float v) {
    // max is exact and order-free (no NaN rows reach it unless the input has NaN; fmaxf drops NaN
    // like Rust's f32::max)
    for (int off = T2W_WARP / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(T2W_FULL_MASK, v, off));
    return v;
}

__device__ __forceinline__ void t2w_require_warps() {
    if (blockDim.x % T2W_WARP != 0 || blockDim.y != 1 || blockDim.z != 1) __trap();
}

// ---- norm.rs (warp per row, rows grid-strided over warps) -----------------------------------

#define T2W_WARP_ROWS(r, rows)                                                                       \
    for (i64 r = (blockIdx.x * (i64)blockDim.x + threadIdx.x) / T2W_WARP; r < (rows);                 \
         r += ((i64)gridDim.x * blockDim.x) / T2W_WARP)

__device__ __forceinline__ void t2w_moments(const float* row, i64 n, float eps, int lane, float* mean,
                                            float* rstd) {
    float s = 0.0f;
    for (i64 j = lane; j < n; j += T2W_WARP) s = s + row[j];
    s = t2w_warp_tree(s);
    const float m = s / (float)n;
    float q = 0.0f;
    for (i64 j = lane; j < n; j += T2W_WARP) {
        const float d = row[j] - m;
        q = q + d * d;
    }
    q = t2w_warp_tree(q);
    const float var = q / (float)n;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + eps);
}

// Rows of at most T2W_ROW_REGS · 32 elements are held in registers (one load batch; the same
// additions in the same order as t2w_moments).
#define T2W_ROW_REGS 16

__device__ __forceinline__ void t2w_moments_regs(const float (&v)[T2W_ROW_REGS], i64 n, float eps, int lane,
                                                 float* mean, float* rstd) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < T2W_ROW_REGS; ++k)
        if (lane + k * T2W_WARP < n) s = s + v[k];
    s = t2w_warp_tree(s);
    const float m = s / (float)n;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < T2W_ROW_REGS; ++k)
        if (lane + k * T2W_WARP < n) {
            const float d = v[k] - m;
            q = q + d * d;
        }
    q = t2w_warp_tree(q);
    const float var = q / (float)n;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + eps);
}

__device__ __forceinline__ void t2w_load_row(float (&v)[T2W_ROW_REGS], const float* row, i64 n, int lane) {
#pragma unroll
    for (int k = 0; k < T2W_ROW_REGS; ++k) {
        const i64 j = lane + k * T2W_WARP;
        v[k] = j < n ? row[j] : 0.0f;
    }
}

// Loads the lane's columns of a [dim] parameter vector (0 where absent or past the row). Every
// kernel below issues all of its loads before its first store: the stores may alias the inputs as
// far as the compiler knows, so a load after a store would wait for a whole round trip.
__device__ __forceinline__ void t2w_load_vec(float (&v)[T2W_ROW_REGS], const float* p, i64 n, int lane) {
#pragma unroll
    for (int k = 0; k < T2W_ROW_REGS; ++k) {
        const i64 j = lane + k * T2W_WARP;
        v[k] = (p && j < n) ? p[j] : 0.0f;
    }
}

extern "C" __global__ void t2w_layer_norm(float* y, i64 ldy, const float* x, i64 ldx, const float* gamma,
                                          const float* beta, i64 rows, i64 dim, float eps) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP;
    T2W_WARP_ROWS(r, rows) {
        const float* xr = x + r * ldx;
        float* yr = y + r * ldy;
        float mean, rstd;
        if (dim <= T2W_ROW_REGS * T2W_WARP) {
            float v[T2W_ROW_REGS], g[T2W_ROW_REGS], be[T2W_ROW_REGS];
            t2w_load_row(v, xr, dim, lane);
            t2w_load_vec(g, gamma, dim, lane);
            t2w_load_vec(be, beta, dim, lane);
            t2w_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int k = 0; k < T2W_ROW_REGS; ++k) {
                const i64 j = lane + k * T2W_WARP;
                if (j < dim) {
                    float o = v[k] * rstd + bias;
                    if (gamma) o = o * g[k];
                    if (beta) o = o + be[k];
                    yr[j] = o;
                }
            }
            continue;
        }
        t2w_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = lane; j < dim; j += T2W_WARP) {
            float v = xr[j] * rstd + bias;
            if (gamma) v = v * gamma[j];
            if (beta) v = v + beta[j];
            yr[j] = v;
        }
    }
}

extern "C" __global__ void t2w_layer_norm_modulate(float* y, const float* x, const float* shift, const float* scale,
                                                   i64 rows, i64 dim, float eps) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP;
    T2W_WARP_ROWS(r, rows) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        float mean, rstd;
        if (dim <= T2W_ROW_REGS * T2W_WARP) {
            float v[T2W_ROW_REGS], sc[T2W_ROW_REGS], sh[T2W_ROW_REGS];
            t2w_load_row(v, xr, dim, lane);
            t2w_load_vec(sc, scale, dim, lane);
            t2w_load_vec(sh, shift, dim, lane);
            t2w_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int k = 0; k < T2W_ROW_REGS; ++k) {
                const i64 j = lane + k * T2W_WARP;
                if (j < dim) {
                    const float n = v[k] * rstd + bias;
                    yr[j] = n * (1.0f + sc[k]) + sh[k];
                }
            }
            continue;
        }
        t2w_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = lane; j < dim; j += T2W_WARP) {
            const float n = xr[j] * rstd + bias;
            yr[j] = n * (1.0f + scale[j]) + shift[j];
        }
    }
}

extern "C" __global__ void t2w_l2_normalize(float* y, const float* x, i64 rows, i64 dim, float eps) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP;
    T2W_WARP_ROWS(r, rows) {
        const float* xr = x + r * dim;
        float s = 0.0f;
        for (i64 j = lane; j < dim; j += T2W_WARP) s = s + xr[j] * xr[j];
        s = t2w_warp_tree(s);
        const float norm = fmaxf(sqrtf(s), eps);
        for (i64 j = lane; j < dim; j += T2W_WARP) y[r * dim + j] = xr[j] / norm;
    }
}

// ---- attn.rs (warp per query row, W = blockDim.x / 32 query rows per block) -----------------
//
// A block takes W consecutive query rows of one (batch, head). Keys and values are staged in
// shared memory 64 frames at a time (coalesced loads, rows padded to d + 1 floats). Warp w owns
// query row i0 + w: lane l scores keys j0 + l and j0 + 32 + l of each tile (two independent dot
// products, each ascending over c, as the twin), the row's scores live in shared memory, the softmax sum is the warp reduction above, and
// lane l accumulates the output columns l, l + 32, ... over all keys in ascending order.
//
// Dynamic shared memory (launch's shared_bytes): floats [W·d (queries) | W·d (rel-pos: q + w) |
// W·tk (scores) | 64·(d + 1) (key/value tile)], see `defs::attention_dims`. The kernel traps if
// the launch gives less, or if d is outside 1..=128. The bodies are templated on the head
// dimension (D = 32, 64, 128 unrolled; D = 0 any d): same operations in the same order.

#define T2W_MAX_HEAD_DIM 128
#define T2W_TILE 64

__device__ __forceinline__ unsigned t2w_dyn_smem_bytes() {
    unsigned r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void t2w_check_attention_launch(i64 tk, i64 d) {
    t2w_require_warps();
    const i64 W = blockDim.x / T2W_WARP;
    if (d < 1 || d > T2W_MAX_HEAD_DIM || tk < 1 ||
        (i64)t2w_dyn_smem_bytes() < (2 * W * d + W * tk + T2W_TILE * (d + 1)) * 4)
        __trap();
}

extern __shared__ float t2w_smem[];

// Stages frames j0 .. j0 + 64 of one (batch, head) cache slice (`base` + `off`: 0 keys, d values)
// into tile[jj · (d + 1) + c]; frames ≥ tk read as 0. Loads go out in batches of 16 per thread
// before any store, so their latencies overlap.
#define T2W_STAGE_BATCH 16
template <int D>
__device__ __forceinline__ void t2w_stage(float* tile, const float* base, int off, int j0, int tk, int d) {
    const int dd = D ? D : d;
    const int total = T2W_TILE * dd;
    for (int i0 = 0; i0 < total; i0 += T2W_STAGE_BATCH * blockDim.x) {
        float buf[T2W_STAGE_BATCH];
#pragma unroll
        for (int r = 0; r < T2W_STAGE_BATCH; ++r) {
            const int idx = i0 + r * blockDim.x + threadIdx.x;
            const int jj = idx / dd, c = idx - jj * dd;
            const int j = j0 + jj;
            buf[r] = (idx < total && j < tk) ? base[(i64)j * 2 * dd + off + c] : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < T2W_STAGE_BATCH; ++r) {
            const int idx = i0 + r * blockDim.x + threadIdx.x;
            const int jj = idx / dd, c = idx - jj * dd;
            if (idx < total) tile[jj * (dd + 1) + c] = buf[r];
        }
    }
}

// Software-pipelined staging (blocks of NT = T2W_PIPE_THREADS threads, a compile-time count so
// that the R = 64·D / NT loads of a thread are one address plus constant offsets): thread t
// holds the tile elements idx = r · NT + t of the *next* tile in registers, so their global loads
// are in flight while the block computes on the current one. `t2w_tile_next` waits for every
// warp to finish with the shared tile, stores the registers into it, and issues the loads of the
// tile after (`next_j0` < 0: none). NT = 0 stages synchronously (t2w_stage, any block size). The
// tile contents are the same either way; only the timing of the loads differs.
#define T2W_PIPE_THREADS 256
template <int D, int NT>
struct T2wPipe {
    static constexpr int R = (NT > 0 && D > 0) ? T2W_TILE * D / NT : 1;
};

template <int D, int NT>
__device__ __forceinline__ void t2w_fetch(float (&buf)[T2wPipe<D, NT>::R], const float* base, int off, int j0,
                                          int tk) {
    if constexpr (NT > 0 && D > 0) {
#pragma unroll
        for (int r = 0; r < T2wPipe<D, NT>::R; ++r) {
            const int idx = r * NT + threadIdx.x;
            const int jj = idx / D, c = idx - jj * D;
            const int j = j0 + jj;
            buf[r] = j < tk ? base[(i64)j * 2 * D + off + c] : 0.0f;
        }
    }
}

template <int D, int NT>
__device__ __forceinline__ void t2w_tile_next(float* tile, float (&buf)[T2wPipe<D, NT>::R], const float* base,
                                              int off, int j0, int next_off, int next_j0, int tk, int d) {
    __syncthreads();
    if constexpr (NT > 0 && D > 0) {
#pragma unroll
        for (int r = 0; r < T2wPipe<D, NT>::R; ++r) {
            const int idx = r * NT + threadIdx.x;
            const int jj = idx / D, c = idx - jj * D;
            tile[jj * (D + 1) + c] = buf[r];
        }
    } else {
        t2w_stage<D>(tile, base, off, j0, tk, d);
    }
    __syncthreads();
    if (next_j0 >= 0) t2w_fetch<D, NT>(buf, base, next_off, next_j0, tk);
}

// Softmax numerators e_j = exp(s_j − max) in place over the warp's score row; returns Σ e_j in
// the warp order.
__device__ __forceinline__ float t2w_softmax_row(float* sw, int tk, int lane) {
    float m = -__int_as_float(0x7f800000);
    for (int j = lane; j < tk; j += T2W_WARP) m = fmaxf(m, sw[j]);
    m = t2w_warp_max(m);
#pragma unroll 4
    for (int j = lane; j < tk; j += T2W_WARP) sw[j] = t2w_expf(sw[j] - m);
    float sum = 0.0f;
    for (int j = lane; j < tk; j += T2W_WARP) sum = sum + sw[j];
    sum = t2w_warp_tree(sum);
    __syncwarp();
    return sum;
}

// acc[k] (column lane + 32k) = Σ_j coef(sw[j]) · v_j[c], ascending j; `inv` = 0 means
// coef(e) = e (attention), else coef(e) = e · inv (rel-pos attention). On entry `buf` holds the
// first value tile (R > 0).
template <int D, int NT, bool SCALED>
__device__ __forceinline__ void t2w_weighted_values(float* acc, float (&buf)[T2wPipe<D, NT>::R], const float* sw,
                                                    float inv, float* tile, const float* base, int tk, int d,
                                                    bool live, int lane) {
    constexpr int K = (D ? D : T2W_MAX_HEAD_DIM) / T2W_WARP;
    const int dd = D ? D : d;
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = 0.0f;
    for (int j0 = 0; j0 < tk; j0 += T2W_TILE) {
        t2w_tile_next<D, NT>(tile, buf, base, dd, j0, dd, j0 + T2W_TILE < tk ? j0 + T2W_TILE : -1, tk, dd);
        if (!live) continue;
        const int n = tk - j0 < T2W_TILE ? tk - j0 : T2W_TILE;
#pragma unroll 8
        for (int jj = 0; jj < n; ++jj) {
            const float e = SCALED ? sw[j0 + jj] * inv : sw[j0 + jj];
            const float* vj = tile + jj * (dd + 1);
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = lane + k * T2W_WARP;
                if (D || c < dd) acc[k] = acc[k] + e * vj[c];
            }
        }
    }
}

template <int D, int NT>
__device__ void t2w_attention_body(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                   int tk, int d, i64 cap, float scale) {
    constexpr int K = (D ? D : T2W_MAX_HEAD_DIM) / T2W_WARP;
    const int dd = D ? D : d;
    const int W = blockDim.x / T2W_WARP;
    const int lane = threadIdx.x % T2W_WARP, w = threadIdx.x / T2W_WARP;
    float* qw = t2w_smem + w * dd;                          // [W, d] queries
    float* sw = t2w_smem + 2 * W * dd + w * tk;             // [W, tk] scores
    float* tile = t2w_smem + 2 * W * dd + W * tk;           // [64, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    float buf[T2wPipe<D, NT>::R];
    for (i64 unit = blockIdx.x; unit < batch * heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, h = (unit / tiles) % heads, b = unit / (tiles * heads);
        const i64 i = i0 + w;
        const bool live = i < tq;
        const float* base = kv + (b * heads + h) * cap * 2 * dd;
        t2w_fetch<D, NT>(buf, base, 0, 0, tk);
        if (live) {
            const float* qi = q + (b * tq + i) * heads * dd + h * dd;
            for (int c = lane; c < dd; c += T2W_WARP) qw[c] = qi[c];
        }
        __syncwarp();
        for (int j0 = 0; j0 < tk; j0 += T2W_TILE) {
            // after the last key tile, the first value tile is fetched
            const bool more = j0 + T2W_TILE < tk;
            t2w_tile_next<D, NT>(tile, buf, base, 0, j0, more ? 0 : dd, more ? j0 + T2W_TILE : 0, tk, dd);
            if (live) {
                const float* k0 = tile + lane * (dd + 1);
                const float* k1 = tile + (lane + T2W_WARP) * (dd + 1);
                float a0 = 0.0f, a1 = 0.0f;
                if constexpr (D != 0) {
                    // the query in 16-byte broadcasts (D is a multiple of 4; same products and sums)
#pragma unroll 4
                    for (int c = 0; c < D; c += 4) {
                        const float4 q4 = *reinterpret_cast<const float4*>(qw + c);
                        a0 = a0 + q4.x * k0[c];
                        a1 = a1 + q4.x * k1[c];
                        a0 = a0 + q4.y * k0[c + 1];
                        a1 = a1 + q4.y * k1[c + 1];
                        a0 = a0 + q4.z * k0[c + 2];
                        a1 = a1 + q4.z * k1[c + 2];
                        a0 = a0 + q4.w * k0[c + 3];
                        a1 = a1 + q4.w * k1[c + 3];
                    }
                } else {
                    for (int c = 0; c < dd; ++c) {
                        const float qc = qw[c];
                        a0 = a0 + qc * k0[c];
                        a1 = a1 + qc * k1[c];
                    }
                }
                if (j0 + lane < tk) sw[j0 + lane] = scale * a0;
                if (j0 + T2W_WARP + lane < tk) sw[j0 + T2W_WARP + lane] = scale * a1;
            }
        }
        __syncwarp();
        const float sum = t2w_softmax_row(sw, tk, lane);
        float acc[K];
        t2w_weighted_values<D, NT, false>(acc, buf, sw, 0.0f, tile, base, tk, dd, live, lane);
        if (live) {
            float* o = out + (b * tq + i) * heads * dd + h * dd;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = lane + k * T2W_WARP;
                if (D || c < dd) o[c] = acc[k] / sum;
            }
        }
    }
}

// Synchronous staging for every block size. The register-pipelined staging (NT =
// T2W_PIPE_THREADS) is bit-equal but was measured slower on the H200: it needs ~170 registers (one
// 256-thread block per SM; the prompt call's 624 blocks then run in 5 waves), and capping it at
// 128 with launch bounds spills (DiT chunk 44.8 µs vs 37.4 µs synchronous). Kept for a later
// cp.async double-buffered variant; not instantiated.
#define T2W_ATTN_DISPATCH(BODY, D, ...) BODY<D, 0>(__VA_ARGS__);

extern "C" __global__ void t2w_attention(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                         i64 tk, i64 d, i64 cap, float scale) {
    t2w_check_attention_launch(tk, d);
    switch (d) {
        case 32: T2W_ATTN_DISPATCH(t2w_attention_body, 32, out, q, kv, batch, heads, tq, (int)tk, 32, cap, scale); break;
        case 64: T2W_ATTN_DISPATCH(t2w_attention_body, 64, out, q, kv, batch, heads, tq, (int)tk, 64, cap, scale); break;
        case 128: T2W_ATTN_DISPATCH(t2w_attention_body, 128, out, q, kv, batch, heads, tq, (int)tk, 128, cap, scale); break;
        default: t2w_attention_body<0, 0>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale); break;
    }
}

template <int D, int NT>
__device__ void t2w_rel_pos_body(float* out, const float* q, const float* pos_bias_u, const float* pos_bias_v,
                                 const float* kv, const float* p, i64 heads, i64 tq, int tk, int d, i64 cap) {
    constexpr int K = (D ? D : T2W_MAX_HEAD_DIM) / T2W_WARP;
    const int dd = D ? D : d;
    const int W = blockDim.x / T2W_WARP;
    const int lane = threadIdx.x % T2W_WARP, w = threadIdx.x / T2W_WARP;
    const i64 hd = heads * dd;
    const float denom = (float)sqrt((double)dd);
    float* qu = t2w_smem + w * dd;                          // [W, d]: q + u
    float* qv = t2w_smem + W * dd + w * dd;                 // [W, d]: q + w
    float* sw = t2w_smem + 2 * W * dd + w * tk;             // [W, tk]
    float* tile = t2w_smem + 2 * W * dd + W * tk;           // [64, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    float buf[T2wPipe<D, NT>::R];
    for (i64 unit = blockIdx.x; unit < heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, h = unit / tiles;
        const i64 i = i0 + w;
        const bool live = i < tq;
        const float* base = kv + h * cap * 2 * dd;
        t2w_fetch<D, NT>(buf, base, 0, 0, tk);
        if (live) {
            const float* qi = q + i * hd + h * dd;
            for (int c = lane; c < dd; c += T2W_WARP) {
                qu[c] = qi[c] + pos_bias_u[h * dd + c];
                qv[c] = qi[c] + pos_bias_v[h * dd + c];
            }
        }
        __syncwarp();
        for (int j0 = 0; j0 < tk; j0 += T2W_TILE) {
            const bool more = j0 + T2W_TILE < tk;
            t2w_tile_next<D, NT>(tile, buf, base, 0, j0, more ? 0 : dd, more ? j0 + T2W_TILE : 0, tk, dd);
            if (live) {
#pragma unroll
                for (int t = 0; t < T2W_TILE / T2W_WARP; ++t) {
                    const int j = j0 + t * T2W_WARP + lane;
                    if (j < tk) {
                        const float* kj = tile + (t * T2W_WARP + lane) * (dd + 1);
                        const float* pr = p + (tq - 1 - i + j) * hd + h * dd;
                        float ac = 0.0f, bd = 0.0f;
#pragma unroll
                        for (int c = 0; c < dd; ++c) {
                            ac = ac + qu[c] * kj[c];
                            bd = bd + qv[c] * pr[c];
                        }
                        sw[j] = (ac + bd) / denom;
                    }
                }
            }
        }
        __syncwarp();
        const float sum = t2w_softmax_row(sw, tk, lane);
        const float inv = 1.0f / sum;
        float acc[K];
        t2w_weighted_values<D, NT, true>(acc, buf, sw, inv, tile, base, tk, dd, live, lane);
        if (live) {
            float* o = out + i * hd + h * dd;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = lane + k * T2W_WARP;
                if (D || c < dd) o[c] = acc[k];
            }
        }
    }
}

extern "C" __global__ void t2w_rel_pos_attention(float* out, const float* q, const float* pos_bias_u,
                                                 const float* pos_bias_v, const float* kv, const float* p, i64 heads,
                                                 i64 tq, i64 tk, i64 d, i64 cap) {
    t2w_check_attention_launch(tk, d);
    switch (d) {
        case 32: T2W_ATTN_DISPATCH(t2w_rel_pos_body, 32, out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, 32, cap); break;
        case 64: T2W_ATTN_DISPATCH(t2w_rel_pos_body, 64, out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, 64, cap); break;
        case 128: T2W_ATTN_DISPATCH(t2w_rel_pos_body, 128, out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, 128, cap); break;
        default: t2w_rel_pos_body<0, 0>(out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, (int)d, cap); break;
    }
}

// ---- fused.rs (DiT: one launch for a sequence of the ops above, same arithmetic) -----------

// LayerNorm of one row by one warp, exactly t2w_layer_norm's row body.
__device__ __forceinline__ void t2w_ln_row(float* yr, const float* xr, i64 dim, const float* gamma,
                                           const float* beta, float eps, int lane) {
    float mean, rstd;
    if (dim <= T2W_ROW_REGS * T2W_WARP) {
        float v[T2W_ROW_REGS], g[T2W_ROW_REGS], be[T2W_ROW_REGS];
        t2w_load_row(v, xr, dim, lane);
        t2w_load_vec(g, gamma, dim, lane);
        t2w_load_vec(be, beta, dim, lane);
        t2w_moments_regs(v, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
#pragma unroll
        for (int k = 0; k < T2W_ROW_REGS; ++k) {
            const i64 j = lane + k * T2W_WARP;
            if (j < dim) {
                float o = v[k] * rstd + bias;
                if (gamma) o = o * g[k];
                if (beta) o = o + be[k];
                yr[j] = o;
            }
        }
        return;
    }
    t2w_moments(xr, dim, eps, lane, &mean, &rstd);
    const float bias = -mean * rstd;
    for (i64 j = lane; j < dim; j += T2W_WARP) {
        float v = xr[j] * rstd + bias;
        if (gamma) v = v * gamma[j];
        if (beta) v = v + beta[j];
        yr[j] = v;
    }
}

// One element of t2w_act.
__device__ __forceinline__ float t2w_act1(float v, int op, float alpha) {
    const float BETA = __int_as_float(0x3f4c422a);  // sqrt(2/pi)
    const float KAPPA = 0.044715f;
    switch (op) {
        case 0: return v / (1.0f + t2w_expf(-v));
        case 1: return t2w_mish(v);
        case 2: {
            const float cube = v * v * v;
            const float inner = BETA * (v + KAPPA * cube);
            return 0.5f * v * (1.0f + t2w_tanhf(inner));
        }
        case 3: return v <= 0.0f ? v * alpha : v;
        default: return v * alpha;
    }
}

extern "C" __global__ void t2w_qk_norm_pack(float* qn, float* cache, i64 cap, i64 t0, const float* qkv, i64 ld,
                                            const float* gq, const float* bq, const float* gk, const float* bk,
                                            i64 batch, i64 heads, i64 t, i64 d, float eps) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP;
    const i64 units = batch * t * heads, inner = heads * d;
    T2W_WARP_ROWS(u, 2 * units) {
        const bool is_k = u >= units;
        const i64 uu = is_k ? u - units : u;
        const i64 h = uu % heads, row = uu / heads;
        const i64 b = row / t, i = row % t;
        const float* src = qkv + row * ld + h * d;
        if (!is_k) {
            t2w_ln_row(qn + row * inner + h * d, src, d, gq, bq, eps, lane);
        } else {
            float* dst = cache + ((b * heads + h) * cap + t0 + i) * 2 * d;
            t2w_ln_row(dst, src + inner, d, gk, bk, eps, lane);
            for (i64 c = lane; c < d; c += T2W_WARP) dst[d + c] = src[2 * inner + c];
        }
    }
}

extern "C" __global__ void t2w_gated_norm_modulate(float* x, const float* gate, const float* y, float* xn,
                                                   const float* shift, const float* scale, i64 rows, i64 dim,
                                                   float eps) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP;
    T2W_WARP_ROWS(r, rows) {
        float* xr = x + r * dim;
        const float* yr = y + r * dim;
        float* nr = xn + r * dim;
        float mean, rstd;
        if (dim <= T2W_ROW_REGS * T2W_WARP) {
            // every load first (x, gate, y, scale, shift: one round trip), then the stores
            float v[T2W_ROW_REGS], g[T2W_ROW_REGS], yv[T2W_ROW_REGS], sc[T2W_ROW_REGS], sh[T2W_ROW_REGS];
            t2w_load_row(v, xr, dim, lane);
            t2w_load_vec(g, gate, dim, lane);
            t2w_load_row(yv, yr, dim, lane);
            t2w_load_vec(sc, scale, dim, lane);
            t2w_load_vec(sh, shift, dim, lane);
#pragma unroll
            for (int k = 0; k < T2W_ROW_REGS; ++k) {
                const i64 j = lane + k * T2W_WARP;
                v[k] = j < dim ? v[k] + g[k] * yv[k] : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < T2W_ROW_REGS; ++k) {
                const i64 j = lane + k * T2W_WARP;
                if (j < dim) xr[j] = v[k];
            }
            t2w_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int k = 0; k < T2W_ROW_REGS; ++k) {
                const i64 j = lane + k * T2W_WARP;
                if (j < dim) {
                    const float n = v[k] * rstd + bias;
                    nr[j] = n * (1.0f + sc[k]) + sh[k];
                }
            }
            continue;
        }
        for (i64 j = lane; j < dim; j += T2W_WARP) xr[j] = xr[j] + gate[j] * yr[j];
        __syncwarp();
        t2w_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = lane; j < dim; j += T2W_WARP) {
            const float n = xr[j] * rstd + bias;
            nr[j] = n * (1.0f + scale[j]) + shift[j];
        }
        __syncwarp();
    }
}

extern "C" __global__ void t2w_conv_im2col(float* col, const float* src, i64 src_b, const float* ctx, i64 ctx_b,
                                           i64 batch, i64 frames, i64 k, i64 dim) {
    const i64 c0 = k - 1;
    T2W_GRID_STRIDE(i, batch * frames * k * dim) {
        const i64 c = i % dim, s = (i / dim) % k, f = (i / (dim * k)) % frames, b = i / (dim * k * frames);
        const i64 r = f + s;
        col[i] = r < c0 ? ctx[b * ctx_b + r * dim + c] : src[b * src_b + (r - c0) * dim + c];
    }
}

// One block per row r of cat_b = ctx_b ‖ act(LN(x_b)) (frames + k − 1 rows per batch, blocks
// grid-strided over rows): the row is written to every im2col slot that reads it,
// col[(b·frames + f)·k + s] with f + s = r. Every warp of the block reduces the whole row (the
// same warp-order sums, so the same statistics), then applies LayerNorm + activation to its
// share of the columns (register k of lane l, column l + 32k, goes to warp k mod W): the
// transcendental-heavy activation is spread over W warps instead of one.
extern "C" __global__ void t2w_layer_norm_act_im2col(float* col, const float* x, const float* gamma,
                                                     const float* beta, float eps, int op, float alpha,
                                                     const float* ctx, i64 ctx_b, i64 batch, i64 frames, i64 k,
                                                     i64 dim) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP, w = threadIdx.x / T2W_WARP, W = blockDim.x / T2W_WARP;
    const i64 c0 = k - 1, per = frames + c0;
    for (i64 u = blockIdx.x; u < batch * per; u += gridDim.x) {
        const i64 b = u / per, r = u % per;
        const i64 s_lo = r - (frames - 1) > 0 ? r - (frames - 1) : 0;
        const i64 s_hi = r < k - 1 ? r : k - 1;
        if (r < c0) {
            const float* cr = ctx + b * ctx_b + r * dim;
            for (i64 s = s_lo; s <= s_hi; ++s) {
                float* o = col + ((b * frames + r - s) * k + s) * dim;
                for (i64 j = threadIdx.x; j < dim; j += blockDim.x) o[j] = cr[j];
            }
            continue;
        }
        const float* xr = x + (b * frames + r - c0) * dim;
        float mean, rstd;
        if (dim <= T2W_ROW_REGS * T2W_WARP) {
            // the row and this warp's gamma/beta columns in one round trip, stores last
            float v[T2W_ROW_REGS], g[T2W_ROW_REGS], be[T2W_ROW_REGS];
            t2w_load_row(v, xr, dim, lane);
#pragma unroll
            for (int kk = 0; kk < T2W_ROW_REGS; ++kk) {
                const i64 j = lane + kk * T2W_WARP;
                const bool mine = kk % W == w && j < dim;
                g[kk] = mine ? gamma[j] : 0.0f;
                be[kk] = mine ? beta[j] : 0.0f;
            }
            t2w_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int kk = 0; kk < T2W_ROW_REGS; ++kk) {
                const i64 j = lane + kk * T2W_WARP;
                if (kk % W == w && j < dim) {
                    float o = v[kk] * rstd + bias;
                    o = o * g[kk];
                    o = o + be[kk];
                    v[kk] = t2w_act1(o, op, alpha);
                }
            }
#pragma unroll
            for (int kk = 0; kk < T2W_ROW_REGS; ++kk) {
                const i64 j = lane + kk * T2W_WARP;
                if (kk % W == w && j < dim)
                    for (i64 s = s_lo; s <= s_hi; ++s) col[((b * frames + r - s) * k + s) * dim + j] = v[kk];
            }
            continue;
        }
        t2w_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = threadIdx.x; j < dim; j += blockDim.x) {
            float v = xr[j] * rstd + bias;
            v = v * gamma[j];
            v = v + beta[j];
            v = t2w_act1(v, op, alpha);
            for (i64 s = s_lo; s <= s_hi; ++s) col[((b * frames + r - s) * k + s) * dim + j] = v;
        }
    }
}

extern "C" __global__ void t2w_copy_batched(float* dst, i64 dst_b, i64 ldd, const float* src, i64 src_b, i64 lds,
                                            i64 batch, i64 rows, i64 cols) {
    T2W_GRID_STRIDE(i, batch * rows * cols) {
        const i64 j = i % cols, r = (i / cols) % rows, b = i / (cols * rows);
        dst[b * dst_b + r * ldd + j] = src[b * src_b + r * lds + j];
    }
}
