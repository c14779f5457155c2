// Row normalisations (LayerNorm, modulated LayerNorm, L2) and the fused launches built on them; the
// _f16 entries are the vendor's fp16 mode (the modulate's 1 + scale rounded to f16, the gated
// residual rounded as elementwise_gated_add_f16 rounds it).
// Host twins: kernels/src/norm.rs. Prepended with common.cuh and rows.cuh (the row loop, the row
// statistics and the row LayerNorm). One warp per row, rows grid-strided over warps.

// Rows of at most DCC_ROW_REGS · 32 elements (the DiT's 512) are held in registers (rows.cuh).
#define DCC_ROW_REGS 16

// The modulation's factor 1 + scale: in f32, or in the vendor's fp16 mode (f16) the f16 sum
// rn16(1 + scale), the product and the shift still in f32 (n · rn16(1 + scale) + shift).
__device__ __forceinline__ float dcc_one_plus(float scale, bool f16) {
    return f16 ? dcc_rn16(1.0f + scale) : 1.0f + scale;
}

// Affine LayerNorm of one row by one warp (gamma, beta optional), stored as it is:
// norm_layer_norm's row body, and norm_qk_pack's per head.
struct DccPutF32 {
    __device__ __forceinline__ void operator()(float* p, float v) const { *p = v; }
};
__device__ __forceinline__ void dcc_ln_row(float* yr, const float* xr, i64 dim, const float* gamma,
                                           const float* beta, float eps, int lane) {
    dcc_ln_row_by<DCC_ROW_REGS>(yr, xr, dim, gamma, beta, eps, lane, DccPutF32{});
}

extern "C" __global__ void norm_layer_norm(float* y, i64 ldy, const float* x, i64 ldx, const float* gamma,
                                           const float* beta, i64 rows, i64 dim, float eps) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    DCC_WARP_ROWS(r, rows) dcc_ln_row(y + r * ldy, x + r * ldx, dim, gamma, beta, eps, lane);
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

// One block per row r of cat_b = ctx_b ‖ act(LN(x_b)) (frames + k − 1 rows per batch, blocks
// grid-strided over rows): the row is written to every im2col slot that reads it,
// col[(b·frames + f)·k + s] with f + s = r. Every warp of the block reduces the whole row (the
// same warp-order sums, so the same statistics), then applies LayerNorm + activation to its
// share of the columns (register k of lane l, column l + 32k, goes to warp k mod W): the
// transcendental-heavy activation is spread over W warps instead of one.
extern "C" __global__ void norm_layer_norm_act_im2col(float* col, const float* x, const float* gamma,
                                                      const float* beta, float eps, int op, float alpha,
                                                      const float* ctx, i64 ctx_b, i64 batch, i64 frames, i64 k,
                                                      i64 dim) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP, w = threadIdx.x / DCC_WARP, W = blockDim.x / DCC_WARP;
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
        if (dim <= DCC_ROW_REGS * DCC_WARP) {
            // the row and this warp's gamma/beta columns in one round trip, stores last
            float v[DCC_ROW_REGS], g[DCC_ROW_REGS], be[DCC_ROW_REGS];
            dcc_load_row(v, xr, dim, lane);
#pragma unroll
            for (int kk = 0; kk < DCC_ROW_REGS; ++kk) {
                const i64 j = lane + kk * DCC_WARP;
                const bool mine = kk % W == w && j < dim;
                g[kk] = mine ? gamma[j] : 0.0f;
                be[kk] = mine ? beta[j] : 0.0f;
            }
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
                if (kk % W == w && j < dim)
                    for (i64 s = s_lo; s <= s_hi; ++s) col[((b * frames + r - s) * k + s) * dim + j] = v[kk];
            }
            continue;
        }
        dcc_moments(xr, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
        for (i64 j = threadIdx.x; j < dim; j += blockDim.x) {
            float v = xr[j] * rstd + bias;
            v = v * gamma[j];
            v = v + beta[j];
            v = dcc_act1(v, op, alpha);
            for (i64 s = s_lo; s <= s_hi; ++s) col[((b * frames + r - s) * k + s) * dim + j] = v;
        }
    }
}
