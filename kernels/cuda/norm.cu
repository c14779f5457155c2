// Row normalisations (LayerNorm, modulated LayerNorm, L2) and the fused launches built on them; the
// _f16 entries are the vendor's fp16 mode (the modulate's 1 + scale rounded to f16, the gated
// residual rounded as elementwise_gated_add_f16 rounds it).
// Host twins: kernels/src/norm.rs. Prepended with common.cuh. One warp per row, rows grid-strided
// over warps; the row statistics use the warp reduction of common.cuh.

#define DCC_WARP_ROWS(r, rows)                                                                       \
    for (i64 r = (blockIdx.x * (i64)blockDim.x + threadIdx.x) / DCC_WARP; r < (rows);                 \
         r += ((i64)gridDim.x * blockDim.x) / DCC_WARP)

__device__ __forceinline__ void dcc_moments(const float* row, i64 n, float eps, int lane, float* mean,
                                            float* rstd) {
    float s = 0.0f;
    for (i64 j = lane; j < n; j += DCC_WARP) s = s + row[j];
    s = dcc_warp_tree(s);
    const float m = s / (float)n;
    float q = 0.0f;
    for (i64 j = lane; j < n; j += DCC_WARP) {
        const float d = row[j] - m;
        q = q + d * d;
    }
    q = dcc_warp_tree(q);
    const float var = q / (float)n;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + eps);
}

// Rows of at most DCC_ROW_REGS · 32 elements are held in registers (one load batch; the same
// additions in the same order as dcc_moments).
#define DCC_ROW_REGS 16

__device__ __forceinline__ void dcc_moments_regs(const float (&v)[DCC_ROW_REGS], i64 n, float eps, int lane,
                                                 float* mean, float* rstd) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < DCC_ROW_REGS; ++k)
        if (lane + k * DCC_WARP < n) s = s + v[k];
    s = dcc_warp_tree(s);
    const float m = s / (float)n;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < DCC_ROW_REGS; ++k)
        if (lane + k * DCC_WARP < n) {
            const float d = v[k] - m;
            q = q + d * d;
        }
    q = dcc_warp_tree(q);
    const float var = q / (float)n;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + eps);
}

__device__ __forceinline__ void dcc_load_row(float (&v)[DCC_ROW_REGS], const float* row, i64 n, int lane) {
#pragma unroll
    for (int k = 0; k < DCC_ROW_REGS; ++k) {
        const i64 j = lane + k * DCC_WARP;
        v[k] = j < n ? row[j] : 0.0f;
    }
}

// Loads the lane's columns of a [dim] parameter vector (0 where absent or past the row). Every
// kernel below issues all of its loads before its first store: the stores may alias the inputs as
// far as the compiler knows, so a load after a store would wait for a whole round trip.
__device__ __forceinline__ void dcc_load_vec(float (&v)[DCC_ROW_REGS], const float* p, i64 n, int lane) {
#pragma unroll
    for (int k = 0; k < DCC_ROW_REGS; ++k) {
        const i64 j = lane + k * DCC_WARP;
        v[k] = (p && j < n) ? p[j] : 0.0f;
    }
}

// elementwise.cu's dcc_rn16, the same lines (each module is its own translation unit): the f16
// value nearest x (round to nearest even), as a float, overflow (|x| >= 65520) to +-inf, NaN kept,
// f16 subnormals included. Host twin: kernels/src/elementwise.rs: rn16.
__device__ __forceinline__ float dcc_rn16(float x) {
    const unsigned bits = __float_as_uint(x);
    const unsigned sign = bits & 0x80000000u;
    unsigned a = bits & 0x7fffffffu;
    if (a >= 0x7f800000u) return x;                               // inf, NaN
    if (a >= 0x477ff000u) return __uint_as_float(sign | 0x7f800000u); // >= 65520: inf
    if (a < 0x38800000u) {                                        // below 2^-14: multiples of 2^-24
        const float m = (0.5f + __uint_as_float(a)) - 0.5f;       // ulp of [0.5, 1) is 2^-24
        return __uint_as_float(sign | __float_as_uint(m));
    }
    a = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;               // 23 -> 10 mantissa bits, RNE
    return __uint_as_float(sign | a);
}

// The modulation's factor 1 + scale: in f32, or in the vendor's fp16 mode (f16) the f16 sum
// rn16(1 + scale), the product and the shift still in f32 (n · rn16(1 + scale) + shift).
__device__ __forceinline__ float dcc_one_plus(float scale, bool f16) {
    return f16 ? dcc_rn16(1.0f + scale) : 1.0f + scale;
}

extern "C" __global__ void norm_layer_norm(float* y, i64 ldy, const float* x, i64 ldx, const float* gamma,
                                           const float* beta, i64 rows, i64 dim, float eps) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    DCC_WARP_ROWS(r, rows) {
        const float* xr = x + r * ldx;
        float* yr = y + r * ldy;
        float mean, rstd;
        if (dim <= DCC_ROW_REGS * DCC_WARP) {
            float v[DCC_ROW_REGS], g[DCC_ROW_REGS], be[DCC_ROW_REGS];
            dcc_load_row(v, xr, dim, lane);
            dcc_load_vec(g, gamma, dim, lane);
            dcc_load_vec(be, beta, dim, lane);
            dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int k = 0; k < DCC_ROW_REGS; ++k) {
                const i64 j = lane + k * DCC_WARP;
                if (j < dim) {
                    float o = v[k] * rstd + bias;
                    if (gamma) o = o * g[k];
                    if (beta) o = o + be[k];
                    yr[j] = o;
                }
            }
            continue;
        }
        dcc_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = lane; j < dim; j += DCC_WARP) {
            float v = xr[j] * rstd + bias;
            if (gamma) v = v * gamma[j];
            if (beta) v = v + beta[j];
            yr[j] = v;
        }
    }
}

// The row body of both modulated LayerNorms: y = LN(x) · (1 + scale) + shift, the factor as
// dcc_one_plus gives it.
__device__ __forceinline__ void dcc_layer_norm_modulate(float* y, const float* x, const float* shift,
                                                        const float* scale, i64 rows, i64 dim, float eps,
                                                        bool f16) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    DCC_WARP_ROWS(r, rows) {
        const float* xr = x + r * dim;
        float* yr = y + r * dim;
        float mean, rstd;
        if (dim <= DCC_ROW_REGS * DCC_WARP) {
            float v[DCC_ROW_REGS], sc[DCC_ROW_REGS], sh[DCC_ROW_REGS];
            dcc_load_row(v, xr, dim, lane);
            dcc_load_vec(sc, scale, dim, lane);
            dcc_load_vec(sh, shift, dim, lane);
            dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int k = 0; k < DCC_ROW_REGS; ++k) {
                const i64 j = lane + k * DCC_WARP;
                if (j < dim) {
                    const float n = v[k] * rstd + bias;
                    yr[j] = n * dcc_one_plus(sc[k], f16) + sh[k];
                }
            }
            continue;
        }
        dcc_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = lane; j < dim; j += DCC_WARP) {
            const float n = xr[j] * rstd + bias;
            yr[j] = n * dcc_one_plus(scale[j], f16) + shift[j];
        }
    }
}

extern "C" __global__ void norm_layer_norm_modulate(float* y, const float* x, const float* shift, const float* scale,
                                                    i64 rows, i64 dim, float eps) {
    dcc_layer_norm_modulate(y, x, shift, scale, rows, dim, eps, false);
}

// The vendor's fp16 modulate: y = LN(x) · rn16(1 + scale) + shift (LayerNorm, product and shift in
// f32, the f16 sum 1 + scale rounded).
extern "C" __global__ void norm_layer_norm_modulate_f16(float* y, const float* x, const float* shift,
                                                        const float* scale, i64 rows, i64 dim, float eps) {
    dcc_layer_norm_modulate(y, x, shift, scale, rows, dim, eps, true);
}

extern "C" __global__ void norm_l2_normalize(float* y, const float* x, i64 rows, i64 dim, float eps) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    DCC_WARP_ROWS(r, rows) {
        const float* xr = x + r * dim;
        float s = 0.0f;
        for (i64 j = lane; j < dim; j += DCC_WARP) s = s + xr[j] * xr[j];
        s = dcc_warp_tree(s);
        const float norm = fmaxf(sqrtf(s), eps);
        for (i64 j = lane; j < dim; j += DCC_WARP) y[r * dim + j] = xr[j] / norm;
    }
}

// ---- fused (one launch for a sequence of the ops above, same arithmetic) --------------------

// LayerNorm of one row by one warp, exactly norm_layer_norm's row body.
__device__ __forceinline__ void dcc_ln_row(float* yr, const float* xr, i64 dim, const float* gamma,
                                           const float* beta, float eps, int lane) {
    float mean, rstd;
    if (dim <= DCC_ROW_REGS * DCC_WARP) {
        float v[DCC_ROW_REGS], g[DCC_ROW_REGS], be[DCC_ROW_REGS];
        dcc_load_row(v, xr, dim, lane);
        dcc_load_vec(g, gamma, dim, lane);
        dcc_load_vec(be, beta, dim, lane);
        dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
#pragma unroll
        for (int k = 0; k < DCC_ROW_REGS; ++k) {
            const i64 j = lane + k * DCC_WARP;
            if (j < dim) {
                float o = v[k] * rstd + bias;
                if (gamma) o = o * g[k];
                if (beta) o = o + be[k];
                yr[j] = o;
            }
        }
        return;
    }
    dcc_moments(xr, dim, eps, lane, &mean, &rstd);
    const float bias = -mean * rstd;
    for (i64 j = lane; j < dim; j += DCC_WARP) {
        float v = xr[j] * rstd + bias;
        if (gamma) v = v * gamma[j];
        if (beta) v = v + beta[j];
        yr[j] = v;
    }
}


extern "C" __global__ void norm_qk_pack(float* qn, float* cache, i64 cap, i64 t0, const float* qkv, i64 ld,
                                        const float* gq, const float* bq, const float* gk, const float* bk,
                                        i64 batch, i64 heads, i64 t, i64 d, float eps) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    const i64 units = batch * t * heads, inner = heads * d;
    DCC_WARP_ROWS(u, 2 * units) {
        const bool is_k = u >= units;
        const i64 uu = is_k ? u - units : u;
        const i64 h = uu % heads, row = uu / heads;
        const i64 b = row / t, i = row % t;
        const float* src = qkv + row * ld + h * d;
        if (!is_k) {
            dcc_ln_row(qn + row * inner + h * d, src, d, gq, bq, eps, lane);
        } else {
            float* dst = cache + ((b * heads + h) * cap + t0 + i) * 2 * d;
            dcc_ln_row(dst, src + inner, d, gk, bk, eps, lane);
            for (i64 c = lane; c < d; c += DCC_WARP) dst[d + c] = src[2 * inner + c];
        }
    }
}

// The gated residual of one element: x + g·y (elementwise_gated_add), or in the vendor's fp16
// mode rn16(x + rn16(g·y)) (elementwise_gated_add_f16).
__device__ __forceinline__ float dcc_gate_sum(float x, float g, float y, bool f16) {
    return f16 ? dcc_rn16(x + dcc_rn16(g * y)) : x + g * y;
}

// x = gated residual in place, then xn = the modulated LayerNorm of x: the row body of
// dcc_layer_norm_modulate (same loads, same moments, same modulate) after the residual of
// elementwise_gated_add (f16 = false: norm_layer_norm_modulate's modulate) or
// elementwise_gated_add_f16 (f16 = true: norm_layer_norm_modulate_f16's), so one launch gives the
// bits of the two.
__device__ __forceinline__ void dcc_gated_add_modulate(float* x, const float* gate, const float* y, float* xn,
                                                       const float* shift, const float* scale, i64 rows,
                                                       i64 dim, float eps, bool f16) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    DCC_WARP_ROWS(r, rows) {
        float* xr = x + r * dim;
        const float* yr = y + r * dim;
        float* nr = xn + r * dim;
        float mean, rstd;
        if (dim <= DCC_ROW_REGS * DCC_WARP) {
            // every load first (x, gate, y, scale, shift: one round trip), then the stores
            float v[DCC_ROW_REGS], g[DCC_ROW_REGS], yv[DCC_ROW_REGS], sc[DCC_ROW_REGS], sh[DCC_ROW_REGS];
            dcc_load_row(v, xr, dim, lane);
            dcc_load_vec(g, gate, dim, lane);
            dcc_load_row(yv, yr, dim, lane);
            dcc_load_vec(sc, scale, dim, lane);
            dcc_load_vec(sh, shift, dim, lane);
#pragma unroll
            for (int k = 0; k < DCC_ROW_REGS; ++k) {
                const i64 j = lane + k * DCC_WARP;
                v[k] = j < dim ? dcc_gate_sum(v[k], g[k], yv[k], f16) : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < DCC_ROW_REGS; ++k) {
                const i64 j = lane + k * DCC_WARP;
                if (j < dim) xr[j] = v[k];
            }
            dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
            const float bias = -mean * rstd;
#pragma unroll
            for (int k = 0; k < DCC_ROW_REGS; ++k) {
                const i64 j = lane + k * DCC_WARP;
                if (j < dim) {
                    const float n = v[k] * rstd + bias;
                    nr[j] = n * dcc_one_plus(sc[k], f16) + sh[k];
                }
            }
            continue;
        }
        for (i64 j = lane; j < dim; j += DCC_WARP) xr[j] = dcc_gate_sum(xr[j], gate[j], yr[j], f16);
        __syncwarp();
        dcc_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = lane; j < dim; j += DCC_WARP) {
            const float n = xr[j] * rstd + bias;
            nr[j] = n * dcc_one_plus(scale[j], f16) + shift[j];
        }
        __syncwarp();
    }
}

extern "C" __global__ void norm_gated_add_modulate(float* x, const float* gate, const float* y, float* xn,
                                                   const float* shift, const float* scale, i64 rows, i64 dim,
                                                   float eps) {
    dcc_gated_add_modulate(x, gate, y, xn, shift, scale, rows, dim, eps, false);
}

// The vendor's fp16 gated residual x = rn16(x + rn16(gate·y)), then its modulated norm
// LN(x) · rn16(1 + scale) + shift: elementwise_gated_add_f16 followed by
// norm_layer_norm_modulate_f16.
extern "C" __global__ void norm_gated_add_modulate_f16(float* x, const float* gate, const float* y, float* xn,
                                                       const float* shift, const float* scale, i64 rows,
                                                       i64 dim, float eps) {
    dcc_gated_add_modulate(x, gate, y, xn, shift, scale, rows, dim, eps, true);
}

// The causal conv's context, advanced where the im2col rows are written: cat_b = ctx_b ‖ rows_b
// (k − 1 context rows, then `frames` rows), col[(b·frames + f)·k + s] = cat_b[f + s], and the new
// ctx_b = the last k − 1 rows of cat_b, written in place. Every old context element is read
// before the new one is written at its place, by the same thread, so no launch geometry races:
//   * frames >= k − 1 (the DiT's): row f of batch b is one unit (a warp, or a block); the unit of
//     a last row (f >= head = frames − (k − 1)) owns context row i = f − head: it loads the old
//     row i with the columns it later writes (each lane or thread the columns its row body
//     hands it), issues its row's loads, stores the old row into its im2col slots (cat row i),
//     then writes its own row to its slots (cat row k − 1 + f) and to context row i;
//   * frames < k − 1: one block per batch: (1) the old context rows into their slots; a barrier;
//     (2) new context rows that are old ones (row i ← cat row frames + i, read back from its slot
//     (f = 0, s = frames + i), which nothing else writes); (3) the rows, each into its slots and
//     context row k − 1 + f − frames.

// Writes value v of column j of cat row r of batch b into every im2col slot that reads it.
__device__ __forceinline__ void dcc_im2col_put(float* col, i64 b, i64 frames, i64 k, i64 dim, i64 r, i64 j, float v) {
    const i64 s_lo = r - (frames - 1) > 0 ? r - (frames - 1) : 0;
    const i64 s_hi = r < k - 1 ? r : k - 1;
    for (i64 s = s_lo; s <= s_hi; ++s) col[((b * frames + r - s) * k + s) * dim + j] = v;
}

// Phases 1 and 2 of a batch's context when frames < k − 1 (the whole block; the barrier between).
__device__ __forceinline__ void dcc_ctx_short_begin(float* col, float* cb, i64 b, i64 frames, i64 k, i64 dim) {
    const i64 c0 = k - 1;
    for (i64 e = threadIdx.x; e < c0 * dim; e += blockDim.x) {
        const i64 r = e / dim, j = e - (e / dim) * dim;
        dcc_im2col_put(col, b, frames, k, dim, r, j, cb[r * dim + j]);
    }
    __syncthreads();
    for (i64 e = threadIdx.x; e < (c0 - frames) * dim; e += blockDim.x) {
        const i64 i = e / dim, j = e - (e / dim) * dim;
        cb[i * dim + j] = col[((b * frames) * k + frames + i) * dim + j];
    }
}

// No old context row to move (a row that does not become context).
struct DccNoOld {
    __device__ __forceinline__ void load(int) {}
    __device__ __forceinline__ void store(int) {}
};

// The old context row `ci` of a last row's unit (cat row i of batch b): `load` reads the columns
// j = lane + 32·kk (kk ≡ w mod W: the columns the row body hands this thread) into registers
// before the row's loads, `store` writes them to their im2col slots after; rows wider than the
// registers (dim > DCC_ROW_REGS · 32) move them in `store` alone, over the columns the wide row
// body hands this thread (threadIdx.x-strided for a block, lane-strided for a warp).
struct DccOldRow {
    float* col;
    const float* ci;
    i64 b, frames, k, dim, i;
    int lane, w, W;
    bool block;
    float v[DCC_ROW_REGS];
    __device__ __forceinline__ void load(int) {
        if (dim > DCC_ROW_REGS * DCC_WARP) return;
#pragma unroll
        for (int kk = 0; kk < DCC_ROW_REGS; ++kk) {
            const i64 j = lane + kk * DCC_WARP;
            v[kk] = kk % W == w && j < dim ? ci[j] : 0.0f;
        }
    }
    __device__ __forceinline__ void store(int) {
        if (dim > DCC_ROW_REGS * DCC_WARP) {
            const i64 j0 = block ? threadIdx.x : lane, dj = block ? blockDim.x : DCC_WARP;
            for (i64 j = j0; j < dim; j += dj) dcc_im2col_put(col, b, frames, k, dim, i, j, ci[j]);
            return;
        }
#pragma unroll
        for (int kk = 0; kk < DCC_ROW_REGS; ++kk) {
            const i64 j = lane + kk * DCC_WARP;
            if (kk % W == w && j < dim) dcc_im2col_put(col, b, frames, k, dim, i, j, v[kk]);
        }
    }
};

// dcc_gated_add_modulate's row body (the same loads, residual, moments and modulate), the
// normalized value of column j handed to put(j, value) instead of stored to xn; old.load before
// the row's loads, old.store after them and before the first store (every column j = lane +
// 32k of the row, or lane-strided past the registers, is this lane's).
template <class Old, class Put>
__device__ __forceinline__ void dcc_gated_row(float* xr, const float* gate, const float* yr, const float* shift,
                                              const float* scale, i64 dim, float eps, bool f16, int lane, Old& old,
                                              Put put) {
    float mean, rstd;
    if (dim <= DCC_ROW_REGS * DCC_WARP) {
        float v[DCC_ROW_REGS], g[DCC_ROW_REGS], yv[DCC_ROW_REGS], sc[DCC_ROW_REGS], sh[DCC_ROW_REGS];
        old.load(0);
        dcc_load_row(v, xr, dim, lane);
        dcc_load_vec(g, gate, dim, lane);
        dcc_load_row(yv, yr, dim, lane);
        dcc_load_vec(sc, scale, dim, lane);
        dcc_load_vec(sh, shift, dim, lane);
        old.store(0);
#pragma unroll
        for (int k = 0; k < DCC_ROW_REGS; ++k) {
            const i64 j = lane + k * DCC_WARP;
            v[k] = j < dim ? dcc_gate_sum(v[k], g[k], yv[k], f16) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < DCC_ROW_REGS; ++k) {
            const i64 j = lane + k * DCC_WARP;
            if (j < dim) xr[j] = v[k];
        }
        dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
#pragma unroll
        for (int k = 0; k < DCC_ROW_REGS; ++k) {
            const i64 j = lane + k * DCC_WARP;
            if (j < dim) {
                const float n = v[k] * rstd + bias;
                put(j, n * dcc_one_plus(sc[k], f16) + sh[k]);
            }
        }
        return;
    }
    old.store(0);
    for (i64 j = lane; j < dim; j += DCC_WARP) xr[j] = dcc_gate_sum(xr[j], gate[j], yr[j], f16);
    __syncwarp();
    dcc_moments(xr, dim, eps, lane, &mean, &rstd);
    const float bias = -mean * rstd;
    for (i64 j = lane; j < dim; j += DCC_WARP) {
        const float n = xr[j] * rstd + bias;
        put(j, n * dcc_one_plus(scale[j], f16) + shift[j]);
    }
    __syncwarp();
}

// norm_gated_add_modulate's residual and modulated norm over x [batch·frames, dim], the
// normalized rows written as the im2col rows of a causal conv of kernel k over ctx ‖ rows and
// the context advanced in place (see above): one warp per row.
__device__ __forceinline__ void dcc_gated_add_modulate_im2col(float* x, const float* gate, const float* y,
                                                              const float* shift, const float* scale, float* col,
                                                              float* ctx, i64 ctx_b, i64 batch, i64 frames, i64 k,
                                                              i64 dim, float eps, bool f16) {
    dcc_require_warps();
    if (frames <= 0) return;  // cat_b is the context alone: nothing to write, nothing moves
    const int lane = threadIdx.x % DCC_WARP, w = threadIdx.x / DCC_WARP, W = blockDim.x / DCC_WARP;
    const i64 c0 = k - 1;
    if (frames < c0) {
        for (i64 b = blockIdx.x; b < batch; b += gridDim.x) {
            float* const cb = ctx + b * ctx_b;
            dcc_ctx_short_begin(col, cb, b, frames, k, dim);
            for (i64 f = w; f < frames; f += W) {
                const i64 r = c0 + f, row = b * frames + f;
                float* const cr = cb + (r - frames) * dim;
                DccNoOld none;
                dcc_gated_row(x + row * dim, gate, y + row * dim, shift, scale, dim, eps, f16, lane, none,
                              [&](i64 j, float v) {
                                  dcc_im2col_put(col, b, frames, k, dim, r, j, v);
                                  cr[j] = v;
                              });
            }
        }
        return;
    }
    const i64 head = frames - c0;
    for (i64 u = (i64)blockIdx.x * W + w; u < batch * frames; u += (i64)gridDim.x * W) {
        const i64 b = u / frames, f = u - (u / frames) * frames;
        const i64 r = c0 + f, row = b * frames + f;
        if (f < head) {
            DccNoOld none;
            dcc_gated_row(x + row * dim, gate, y + row * dim, shift, scale, dim, eps, f16, lane, none,
                          [&](i64 j, float v) { dcc_im2col_put(col, b, frames, k, dim, r, j, v); });
            continue;
        }
        float* const ci = ctx + b * ctx_b + (f - head) * dim;
        DccOldRow old{col, ci, b, frames, k, dim, f - head, lane, 0, 1, false, {}};
        dcc_gated_row(x + row * dim, gate, y + row * dim, shift, scale, dim, eps, f16, lane, old,
                      [&](i64 j, float v) {
                          dcc_im2col_put(col, b, frames, k, dim, r, j, v);
                          ci[j] = v;
                      });
    }
}

extern "C" __global__ void norm_gated_add_modulate_im2col(float* x, const float* gate, const float* y,
                                                          const float* shift, const float* scale, float* col,
                                                          float* ctx, i64 ctx_b, i64 batch, i64 frames, i64 k,
                                                          i64 dim, float eps) {
    dcc_gated_add_modulate_im2col(x, gate, y, shift, scale, col, ctx, ctx_b, batch, frames, k, dim, eps, false);
}

// The vendor's fp16 mode of norm_gated_add_modulate_im2col: norm_gated_add_modulate_f16's rows.
extern "C" __global__ void norm_gated_add_modulate_im2col_f16(float* x, const float* gate, const float* y,
                                                              const float* shift, const float* scale, float* col,
                                                              float* ctx, i64 ctx_b, i64 batch, i64 frames, i64 k,
                                                              i64 dim, float eps) {
    dcc_gated_add_modulate_im2col(x, gate, y, shift, scale, col, ctx, ctx_b, batch, frames, k, dim, eps, true);
}

// Affine LayerNorm + activation of row xr, handed to put(j, value) column by column: every warp
// of the block reduces the whole row (the same warp-order sums, so the same statistics), then
// applies LayerNorm + activation to its share of the columns (register k of lane l, column
// l + 32k, goes to warp k mod W): the transcendental-heavy activation is spread over W warps
// instead of one. old.load before the row's loads, old.store after them, before any store.
template <class Old, class Put>
__device__ __forceinline__ void dcc_ln_act_row(const float* xr, const float* gamma, const float* beta, float eps,
                                               int op, float alpha, i64 dim, int lane, int w, int W, Old& old,
                                               Put put) {
    float mean, rstd;
    if (dim <= DCC_ROW_REGS * DCC_WARP) {
        // the row and this warp's gamma/beta columns in one round trip, stores last
        float v[DCC_ROW_REGS], g[DCC_ROW_REGS], be[DCC_ROW_REGS];
        old.load(0);
        dcc_load_row(v, xr, dim, lane);
#pragma unroll
        for (int kk = 0; kk < DCC_ROW_REGS; ++kk) {
            const i64 j = lane + kk * DCC_WARP;
            const bool mine = kk % W == w && j < dim;
            g[kk] = mine ? gamma[j] : 0.0f;
            be[kk] = mine ? beta[j] : 0.0f;
        }
        old.store(0);
        dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
#pragma unroll
        for (int kk = 0; kk < DCC_ROW_REGS; ++kk) {
            const i64 j = lane + kk * DCC_WARP;
            if (kk % W == w && j < dim) {
                float o = v[kk] * rstd + bias;
                o = o * g[kk];
                o = o + be[kk];
                v[kk] = dcc_act1(o, op, alpha);
            }
        }
#pragma unroll
        for (int kk = 0; kk < DCC_ROW_REGS; ++kk) {
            const i64 j = lane + kk * DCC_WARP;
            if (kk % W == w && j < dim) put(j, v[kk]);
        }
        return;
    }
    old.store(0);
    dcc_moments(xr, dim, eps, lane, &mean, &rstd);
    const float bias = -mean * rstd;
    for (i64 j = threadIdx.x; j < dim; j += blockDim.x) {
        float v = xr[j] * rstd + bias;
        v = v * gamma[j];
        v = v + beta[j];
        put(j, dcc_act1(v, op, alpha));
    }
}

// act(LN(x_b)) of x [batch·frames, dim] written as the im2col rows of a causal conv of kernel k
// over cat_b = ctx_b ‖ act(LN(x_b)), the context advanced in place (see above): one block per
// row (frames < k − 1: per batch).
extern "C" __global__ void norm_layer_norm_act_im2col(float* col, const float* x, const float* gamma,
                                                      const float* beta, float eps, int op, float alpha, float* ctx,
                                                      i64 ctx_b, i64 batch, i64 frames, i64 k, i64 dim) {
    dcc_require_warps();
    if (frames <= 0) return;  // cat_b is the context alone: nothing to write, nothing moves
    const int lane = threadIdx.x % DCC_WARP, w = threadIdx.x / DCC_WARP, W = blockDim.x / DCC_WARP;
    const i64 c0 = k - 1;
    if (frames < c0) {
        for (i64 b = blockIdx.x; b < batch; b += gridDim.x) {
            float* const cb = ctx + b * ctx_b;
            dcc_ctx_short_begin(col, cb, b, frames, k, dim);
            for (i64 f = 0; f < frames; ++f) {
                const i64 r = c0 + f;
                float* const cr = cb + (r - frames) * dim;
                DccNoOld none;
                dcc_ln_act_row(x + (b * frames + f) * dim, gamma, beta, eps, op, alpha, dim, lane, w, W, none,
                               [&](i64 j, float v) {
                                   dcc_im2col_put(col, b, frames, k, dim, r, j, v);
                                   cr[j] = v;
                               });
            }
        }
        return;
    }
    const i64 head = frames - c0;
    for (i64 u = blockIdx.x; u < batch * frames; u += gridDim.x) {
        const i64 b = u / frames, f = u - (u / frames) * frames;
        const i64 r = c0 + f;
        const float* const xr = x + (b * frames + f) * dim;
        if (f < head) {
            DccNoOld none;
            dcc_ln_act_row(xr, gamma, beta, eps, op, alpha, dim, lane, w, W, none,
                           [&](i64 j, float v) { dcc_im2col_put(col, b, frames, k, dim, r, j, v); });
            continue;
        }
        float* const ci = ctx + b * ctx_b + (f - head) * dim;
        DccOldRow old{col, ci, b, frames, k, dim, f - head, lane, w, W, true, {}};
        dcc_ln_act_row(xr, gamma, beta, eps, op, alpha, dim, lane, w, W, old, [&](i64 j, float v) {
            dcc_im2col_put(col, b, frames, k, dim, r, j, v);
            ci[j] = v;
        });
    }
}
