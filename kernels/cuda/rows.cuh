// One warp per row: the row loop and the row LayerNorm shared by norm.cu and half_kv.cu (each
// module is its own translation unit; both sources are common.cuh, this header, then the family
// file). Host twins: kernels/src/norm.rs (layer_norm and the fused kernels built on it).
//
// A row's statistics are one fixed sum order: lane l adds the columns l, l + 32, l + 64, ... in
// ascending order, then the warp tree of common.cuh combines the lanes. A row of at most R · 32
// elements is held in R registers a lane (dcc_load_row, one load batch); a longer one is read from
// memory (dcc_moments). Both add the same values in the same order, so neither R nor the path
// changes a bit: each family picks R for its rows (norm.cu 16: rows up to 512 wide; half_kv.cu 4:
// the DiT's 64-wide heads), since the row arrays stay live across the reductions and limit how
// many warps an SM holds.

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

template <int R>
__device__ __forceinline__ void dcc_moments_regs(const float (&v)[R], i64 n, float eps, int lane, float* mean,
                                                 float* rstd) {
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < R; ++k)
        if (lane + k * DCC_WARP < n) s = s + v[k];
    s = dcc_warp_tree(s);
    const float m = s / (float)n;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < R; ++k)
        if (lane + k * DCC_WARP < n) {
            const float d = v[k] - m;
            q = q + d * d;
        }
    q = dcc_warp_tree(q);
    const float var = q / (float)n;
    *mean = m;
    *rstd = 1.0f / sqrtf(var + eps);
}

template <int R>
__device__ __forceinline__ void dcc_load_row(float (&v)[R], const float* row, i64 n, int lane) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const i64 j = lane + k * DCC_WARP;
        v[k] = j < n ? row[j] : 0.0f;
    }
}

// Loads the lane's columns of a [dim] parameter vector (0 where absent or past the row). Every
// kernel issues all of its loads before its first store: the stores may alias the inputs as far
// as the compiler knows, so a load after a store would wait for a whole round trip.
template <int R>
__device__ __forceinline__ void dcc_load_vec(float (&v)[R], const float* p, i64 n, int lane) {
#pragma unroll
    for (int k = 0; k < R; ++k) {
        const i64 j = lane + k * DCC_WARP;
        v[k] = (p && j < n) ? p[j] : 0.0f;
    }
}

// Affine LayerNorm of one row by one warp (gamma, beta optional): each output o goes out as
// put(yr + j, o), so a family chooses how it is stored (norm.cu as it is, half_kv.cu rounded to
// binary16).
template <int R, typename Out, typename Put>
__device__ __forceinline__ void dcc_ln_row_by(Out* yr, const float* xr, i64 dim, const float* gamma,
                                              const float* beta, float eps, int lane, Put put) {
    float mean, rstd;
    if (dim <= R * DCC_WARP) {
        float v[R], g[R], be[R];
        dcc_load_row(v, xr, dim, lane);
        dcc_load_vec(g, gamma, dim, lane);
        dcc_load_vec(be, beta, dim, lane);
        dcc_moments_regs(v, dim, eps, lane, &mean, &rstd);
        const float bias = -mean * rstd;
#pragma unroll
        for (int k = 0; k < R; ++k) {
            const i64 j = lane + k * DCC_WARP;
            if (j < dim) {
                float o = v[k] * rstd + bias;
                if (gamma) o = o * g[k];
                if (beta) o = o + be[k];
                put(yr + j, o);
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
        put(yr + j, v);
    }
}
