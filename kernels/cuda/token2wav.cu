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

extern "C" __global__ void t2w_layer_norm(float* y, i64 ldy, const float* x, i64 ldx, const float* gamma,
                                          const float* beta, i64 rows, i64 dim, float eps) {
    t2w_require_warps();
    const int lane = threadIdx.x % T2W_WARP;
    T2W_WARP_ROWS(r, rows) {
        const float* xr = x + r * ldx;
        float* yr = y + r * ldy;
        float mean, rstd;
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
// shared memory 32 frames at a time (coalesced loads, rows padded to d + 1 floats). Warp w owns
// query row i0 + w: lane l scores key j0 + l of each tile (dot product ascending over c, as the
// twin), the row's scores live in shared memory, the softmax sum is the warp reduction above, and
// lane l accumulates the output columns l, l + 32, ... over all keys in ascending order.
//
// Dynamic shared memory (launch's shared_bytes): floats [W·d (queries) | W·d (rel-pos: q + w) |
// W·tk (scores) | 32·(d + 1) (key/value tile)], see `defs::attention_dims`. The kernel traps if
// the launch gives less, or if d > 128.

#define T2W_MAX_HEAD_DIM 128
#define T2W_TILE 32

__device__ __forceinline__ unsigned t2w_dyn_smem_bytes() {
    unsigned r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

extern __shared__ float t2w_smem[];

// Stages frames j0 .. j0 + 32 of one (batch, head) cache slice (`base` + `off`: 0 keys, d values)
// into tile[jj · (d + 1) + c]; frames ≥ tk read as 0.
__device__ __forceinline__ void t2w_stage(float* tile, const float* base, i64 off, i64 j0, i64 tk, i64 d) {
    for (i64 idx = threadIdx.x; idx < T2W_TILE * d; idx += blockDim.x) {
        const i64 jj = idx / d, c = idx % d;
        const i64 j = j0 + jj;
        tile[jj * (d + 1) + c] = j < tk ? base[j * 2 * d + off + c] : 0.0f;
    }
}

extern "C" __global__ void t2w_attention(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                         i64 tk, i64 d, i64 cap, float scale) {
    t2w_require_warps();
    const i64 W = blockDim.x / T2W_WARP;
    if (d > T2W_MAX_HEAD_DIM || (i64)t2w_dyn_smem_bytes() < (2 * W * d + W * tk + T2W_TILE * (d + 1)) * 4) __trap();
    const int lane = threadIdx.x % T2W_WARP;
    const i64 w = threadIdx.x / T2W_WARP;
    float* qs = t2w_smem;                    // [W, d]
    float* ss = qs + 2 * W * d;              // [W, tk]
    float* tile = ss + W * tk;               // [32, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    for (i64 unit = blockIdx.x; unit < batch * heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, h = (unit / tiles) % heads, b = unit / (tiles * heads);
        const i64 i = i0 + w;
        const bool live = i < tq;
        const float* base = kv + (b * heads + h) * cap * 2 * d;
        float* qw = qs + w * d;
        float* sw = ss + w * tk;
        if (live) {
            const float* qi = q + (b * tq + i) * heads * d + h * d;
            for (i64 c = lane; c < d; c += T2W_WARP) qw[c] = qi[c];
        }
        __syncwarp();
        // scores
        for (i64 j0 = 0; j0 < tk; j0 += T2W_TILE) {
            __syncthreads();
            t2w_stage(tile, base, 0, j0, tk, d);
            __syncthreads();
            const i64 j = j0 + lane;
            if (live && j < tk) {
                const float* kj = tile + lane * (d + 1);
                float acc = 0.0f;
                for (i64 c = 0; c < d; ++c) acc = acc + qw[c] * kj[c];
                sw[j] = scale * acc;
            }
        }
        __syncwarp();
        // softmax numerators and their sum
        float m = -__int_as_float(0x7f800000);
        for (i64 j = lane; j < tk; j += T2W_WARP) m = fmaxf(m, sw[j]);
        m = t2w_warp_max(m);
        float sum = 0.0f;
        for (i64 j = lane; j < tk; j += T2W_WARP) {
            const float e = t2w_expf(sw[j] - m);
            sw[j] = e;
            sum = sum + e;
        }
        sum = t2w_warp_tree(sum);
        __syncwarp();
        // Σ_j e_j · v_j, ascending j
        float acc[T2W_MAX_HEAD_DIM / T2W_WARP];
        for (int k = 0; k < T2W_MAX_HEAD_DIM / T2W_WARP; ++k) acc[k] = 0.0f;
        for (i64 j0 = 0; j0 < tk; j0 += T2W_TILE) {
            __syncthreads();
            t2w_stage(tile, base, d, j0, tk, d);
            __syncthreads();
            if (live) {
                const i64 n = tk - j0 < T2W_TILE ? tk - j0 : T2W_TILE;
                for (i64 jj = 0; jj < n; ++jj) {
                    const float e = sw[j0 + jj];
                    const float* vj = tile + jj * (d + 1);
#pragma unroll
                    for (int k = 0; k < T2W_MAX_HEAD_DIM / T2W_WARP; ++k) {
                        const i64 c = lane + k * T2W_WARP;
                        if (c < d) acc[k] = acc[k] + e * vj[c];
                    }
                }
            }
        }
        if (live) {
            float* o = out + (b * tq + i) * heads * d + h * d;
#pragma unroll
            for (int k = 0; k < T2W_MAX_HEAD_DIM / T2W_WARP; ++k) {
                const i64 c = lane + k * T2W_WARP;
                if (c < d) o[c] = acc[k] / sum;
            }
        }
    }
}

extern "C" __global__ void t2w_rel_pos_attention(float* out, const float* q, const float* pos_bias_u,
                                                 const float* pos_bias_v, const float* kv, const float* p, i64 heads,
                                                 i64 tq, i64 tk, i64 d, i64 cap) {
    t2w_require_warps();
    const i64 W = blockDim.x / T2W_WARP;
    if (d > T2W_MAX_HEAD_DIM || (i64)t2w_dyn_smem_bytes() < (2 * W * d + W * tk + T2W_TILE * (d + 1)) * 4) __trap();
    const int lane = threadIdx.x % T2W_WARP;
    const i64 w = threadIdx.x / T2W_WARP;
    const i64 hd = heads * d;
    const float denom = (float)sqrt((double)d);
    float* qus = t2w_smem;                   // [W, d]: q + u
    float* qvs = qus + W * d;                // [W, d]: q + w
    float* ss = qus + 2 * W * d;             // [W, tk]
    float* tile = ss + W * tk;               // [32, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    for (i64 unit = blockIdx.x; unit < heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, h = unit / tiles;
        const i64 i = i0 + w;
        const bool live = i < tq;
        const float* base = kv + h * cap * 2 * d;
        float* qu = qus + w * d;
        float* qv = qvs + w * d;
        float* sw = ss + w * tk;
        if (live) {
            const float* qi = q + i * hd + h * d;
            for (i64 c = lane; c < d; c += T2W_WARP) {
                qu[c] = qi[c] + pos_bias_u[h * d + c];
                qv[c] = qi[c] + pos_bias_v[h * d + c];
            }
        }
        __syncwarp();
        for (i64 j0 = 0; j0 < tk; j0 += T2W_TILE) {
            __syncthreads();
            t2w_stage(tile, base, 0, j0, tk, d);
            __syncthreads();
            const i64 j = j0 + lane;
            if (live && j < tk) {
                const float* kj = tile + lane * (d + 1);
                const float* pr = p + (tq - 1 - i + j) * hd + h * d;
                float ac = 0.0f, bd = 0.0f;
                for (i64 c = 0; c < d; ++c) ac = ac + qu[c] * kj[c];
                for (i64 c = 0; c < d; ++c) bd = bd + qv[c] * pr[c];
                sw[j] = (ac + bd) / denom;
            }
        }
        __syncwarp();
        float m = -__int_as_float(0x7f800000);
        for (i64 j = lane; j < tk; j += T2W_WARP) m = fmaxf(m, sw[j]);
        m = t2w_warp_max(m);
        float sum = 0.0f;
        for (i64 j = lane; j < tk; j += T2W_WARP) {
            const float e = t2w_expf(sw[j] - m);
            sw[j] = e;
            sum = sum + e;
        }
        sum = t2w_warp_tree(sum);
        const float inv = 1.0f / sum;
        __syncwarp();
        float acc[T2W_MAX_HEAD_DIM / T2W_WARP];
        for (int k = 0; k < T2W_MAX_HEAD_DIM / T2W_WARP; ++k) acc[k] = 0.0f;
        for (i64 j0 = 0; j0 < tk; j0 += T2W_TILE) {
            __syncthreads();
            t2w_stage(tile, base, d, j0, tk, d);
            __syncthreads();
            if (live) {
                const i64 n = tk - j0 < T2W_TILE ? tk - j0 : T2W_TILE;
                for (i64 jj = 0; jj < n; ++jj) {
                    const float pj = sw[j0 + jj] * inv;
                    const float* vj = tile + jj * (d + 1);
#pragma unroll
                    for (int k = 0; k < T2W_MAX_HEAD_DIM / T2W_WARP; ++k) {
                        const i64 c = lane + k * T2W_WARP;
                        if (c < d) acc[k] = acc[k] + pj * vj[c];
                    }
                }
            }
        }
        if (live) {
            float* o = out + i * hd + h * d;
#pragma unroll
            for (int k = 0; k < T2W_MAX_HEAD_DIM / T2W_WARP; ++k) {
                const i64 c = lane + k * T2W_WARP;
                if (c < d) o[c] = acc[k];
            }
        }
    }
}
