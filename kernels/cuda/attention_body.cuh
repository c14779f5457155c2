// The SDPA body of attention.cu (attention_sdpa: fp32 caches), templated on the cache's element
// type KV; what follows is its description (host twin: kernels/src/attention.rs). half_kv.cu
// includes this file for dcc_kv (a binary16 element widened); the half point's SDPA over a
// binary16 cache is attention_f16.cu's. Included after common.cuh.
//
// One warp per query row, W = blockDim.x / 32 query rows per block.
//
// A block takes W consecutive query rows of one (batch, head). Keys and values are staged in
// shared memory 64 frames at a time (coalesced loads, rows padded to d + 1 floats). Warp w owns
// query row i0 + w: lane l scores keys j0 + l and j0 + 32 + l of each tile (two independent dot
// products, each ascending over c, as the twin), the row's scores live in shared memory, the softmax sum is the warp reduction above, and
// lane l accumulates the output columns l, l + 32, ... over all keys in ascending order.
//
// Dynamic shared memory (launch's shared_bytes): floats [W·d (queries) | W·d (rel-pos: q + w) |
// W·tk (scores) | 64·(d + 1) (key/value tile)], see `attention::attention_dims`; the rel-pos
// kernel's staged launch adds (W + 63)·(d + 1) for the tile's position rows
// (`attention::rel_pos_dims`, described in attention.cu).
//
// Resident SDPA: when the launch gives room for ALL keys at once (`attention::sdpa_dims`:
// [W·d | W·d | W·tk | ceil64(tk)·(d + 1)] floats, up to ~152 KB for the DiT's 458 keys of d = 64),
// attention_sdpa stages every key of the (batch, head) in one pass, computes the score rows with no
// barrier between tiles, then stages every value the same way. Same products, sums and order as
// the tiled path (and the Host twin): only the number of barriers and load rounds changes. Both
// kernels trap if the launch gives less than the tiled layout above (the minimum), or if d is
// outside 1..=128. The bodies are templated on the head
// dimension (D = 32, 64, 128 unrolled; D = 0 any d): same operations in the same order.

#define DCC_MAX_HEAD_DIM 128
#define DCC_TILE 64

__device__ __forceinline__ unsigned dcc_dyn_smem_bytes() {
    unsigned r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void dcc_check_attention_launch(i64 tk, i64 d) {
    dcc_require_warps();
    const i64 W = blockDim.x / DCC_WARP;
    if (d < 1 || d > DCC_MAX_HEAD_DIM || tk < 1 ||
        (i64)dcc_dyn_smem_bytes() < (2 * W * d + W * tk + DCC_TILE * (d + 1)) * 4)
        __trap();
}

// The key/value element types a cache may hold, read as float (exact: every binary16 value is a
// float): `float` (the fp32 caches) or `unsigned short` holding IEEE binary16 bits (the half
// point's caches, kernels/cuda/half_kv.cu). dcc_kv4 reads 4 consecutive elements (16 bytes of
// float, 8 of binary16; the caller keeps the address aligned to that).
__device__ __forceinline__ float dcc_kv(float v) { return v; }
__device__ __forceinline__ float dcc_kv(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ float4 dcc_kv4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 dcc_kv4(const unsigned short* p) {
    const uint2 w = *reinterpret_cast<const uint2*>(p);
    return make_float4(dcc_kv((unsigned short)(w.x & 0xffffu)), dcc_kv((unsigned short)(w.x >> 16)),
                       dcc_kv((unsigned short)(w.y & 0xffffu)), dcc_kv((unsigned short)(w.y >> 16)));
}

extern __shared__ float dcc_smem[];

// Stages frames j0 .. j0 + 64 of one (batch, head) cache slice (`base` + `off`: 0 keys, d values)
// into tile[jj · (d + 1) + c]; frames ≥ tk read as 0. Loads go out in batches of 16 per thread
// before any store, so their latencies overlap.
#define DCC_STAGE_BATCH 16
template <int D, typename KV>
__device__ __forceinline__ void dcc_stage(float* tile, const KV* base, int off, int j0, int tk, int d) {
    const int dd = D ? D : d;
    const int total = DCC_TILE * dd;
    for (int i0 = 0; i0 < total; i0 += DCC_STAGE_BATCH * blockDim.x) {
        float buf[DCC_STAGE_BATCH];
#pragma unroll
        for (int r = 0; r < DCC_STAGE_BATCH; ++r) {
            const int idx = i0 + r * blockDim.x + threadIdx.x;
            const int jj = idx / dd, c = idx - jj * dd;
            const int j = j0 + jj;
            buf[r] = (idx < total && j < tk) ? dcc_kv(base[(i64)j * 2 * dd + off + c]) : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < DCC_STAGE_BATCH; ++r) {
            const int idx = i0 + r * blockDim.x + threadIdx.x;
            const int jj = idx / dd, c = idx - jj * dd;
            if (idx < total) tile[jj * (dd + 1) + c] = buf[r];
        }
    }
}

// Software-pipelined staging (blocks of NT = DCC_PIPE_THREADS threads, a compile-time count so
// that the R = 64·D / NT loads of a thread are one address plus constant offsets): thread t
// holds the tile elements idx = r · NT + t of the *next* tile in registers, so their global loads
// are in flight while the block computes on the current one. `dcc_tile_next` waits for every
// warp to finish with the shared tile, stores the registers into it, and issues the loads of the
// tile after (`next_j0` < 0: none). NT = 0 stages synchronously (dcc_stage, any block size). The
// tile contents are the same either way; only the timing of the loads differs.
#define DCC_PIPE_THREADS 256
template <int D, int NT>
struct DccPipe {
    static constexpr int R = (NT > 0 && D > 0) ? DCC_TILE * D / NT : 1;
};

template <int D, int NT, typename KV>
__device__ __forceinline__ void dcc_fetch(float (&buf)[DccPipe<D, NT>::R], const KV* base, int off, int j0,
                                          int tk) {
    if constexpr (NT > 0 && D > 0) {
#pragma unroll
        for (int r = 0; r < DccPipe<D, NT>::R; ++r) {
            const int idx = r * NT + threadIdx.x;
            const int jj = idx / D, c = idx - jj * D;
            const int j = j0 + jj;
            buf[r] = j < tk ? dcc_kv(base[(i64)j * 2 * D + off + c]) : 0.0f;
        }
    }
}

template <int D, int NT, typename KV>
__device__ __forceinline__ void dcc_tile_next(float* tile, float (&buf)[DccPipe<D, NT>::R], const KV* base,
                                              int off, int j0, int next_off, int next_j0, int tk, int d) {
    __syncthreads();
    if constexpr (NT > 0 && D > 0) {
#pragma unroll
        for (int r = 0; r < DccPipe<D, NT>::R; ++r) {
            const int idx = r * NT + threadIdx.x;
            const int jj = idx / D, c = idx - jj * D;
            tile[jj * (D + 1) + c] = buf[r];
        }
    } else {
        dcc_stage<D>(tile, base, off, j0, tk, d);
    }
    __syncthreads();
    if (next_j0 >= 0) dcc_fetch<D, NT>(buf, base, next_off, next_j0, tk);
}

// Softmax numerators e_j = exp(s_j − max) in place over the warp's score row; returns Σ e_j in
// the warp order.
__device__ __forceinline__ float dcc_softmax_row(float* sw, int tk, int lane) {
    float m = -__int_as_float(0x7f800000);
    for (int j = lane; j < tk; j += DCC_WARP) m = fmaxf(m, sw[j]);
    m = dcc_warp_max(m);
#pragma unroll 4
    for (int j = lane; j < tk; j += DCC_WARP) sw[j] = dcc_expf(sw[j] - m);
    float sum = 0.0f;
    for (int j = lane; j < tk; j += DCC_WARP) sum = sum + sw[j];
    sum = dcc_warp_tree(sum);
    __syncwarp();
    return sum;
}

// The values loop of both attentions, one routine for both places the values sit: acc[k]
// (column lane + 32k) += Σ_{jj < n} coef(sw[j0 + jj]) · rows[jj · (d + 1) + c], ascending jj,
// over n staged value rows (row stride d + 1) of keys j0 .. j0 + n; coef(e) = e (attention), or
// e · inv when SCALED (rel-pos attention). The tiled path calls it once per 64-frame tile (rows =
// the tile, j0 = its first key), the resident path once over every frame (rows = all values,
// j0 = 0): each acc[k] takes the same products and sums in the same order, ascending over all
// keys.
template <int D>
__device__ __forceinline__ void dcc_values_zero(float* acc) {
    constexpr int K = (D ? D : DCC_MAX_HEAD_DIM) / DCC_WARP;
#pragma unroll
    for (int k = 0; k < K; ++k) acc[k] = 0.0f;
}

template <int D, bool SCALED>
__device__ __forceinline__ void dcc_values_add(float* acc, const float* sw, int j0, float inv, const float* rows, int n,
                                               int d, int lane) {
    constexpr int K = (D ? D : DCC_MAX_HEAD_DIM) / DCC_WARP;
    const int dd = D ? D : d;
#pragma unroll 8
    for (int jj = 0; jj < n; ++jj) {
        const float e = SCALED ? sw[j0 + jj] * inv : sw[j0 + jj];
        const float* vj = rows + jj * (dd + 1);
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int c = lane + k * DCC_WARP;
            if (D || c < dd) acc[k] = acc[k] + e * vj[c];
        }
    }
}

// Tiled values: acc[k] = Σ_j coef(sw[j]) · v_j[c] over tk keys staged 64 at a time (dcc_values_add
// per tile; `inv` as there). On entry `buf` holds the first value tile (R > 0).
template <int D, int NT, bool SCALED, typename KV>
__device__ __forceinline__ void dcc_weighted_values(float* acc, float (&buf)[DccPipe<D, NT>::R], const float* sw,
                                                    float inv, float* tile, const KV* base, int tk, int d,
                                                    bool live, int lane) {
    const int dd = D ? D : d;
    dcc_values_zero<D>(acc);
    for (int j0 = 0; j0 < tk; j0 += DCC_TILE) {
        dcc_tile_next<D, NT>(tile, buf, base, dd, j0, dd, j0 + DCC_TILE < tk ? j0 + DCC_TILE : -1, tk, dd);
        if (!live) continue;
        const int n = tk - j0 < DCC_TILE ? tk - j0 : DCC_TILE;
        dcc_values_add<D, SCALED>(acc, sw, j0, inv, tile, n, dd, lane);
    }
}

// Stages frames 0 .. tk of one (batch, head) cache slice (`base` + `off`: 0 keys, d values) into
// all[j · (d + 1) + c] for j < rows (rows = tk rounded up to 64; frames ≥ tk read as 0), float4
// loads where D is a multiple of 4 (D = 32, 64, 128), 8 per thread in flight.
template <int D, typename KV>
__device__ __forceinline__ void dcc_stage_all(float* all, const KV* base, int off, int tk, int rows, int d) {
    if constexpr (D != 0) {
        constexpr int Q = D / 4;  // float4 per frame
        const int total = rows * Q;
        for (int i0 = 0; i0 < total; i0 += 8 * blockDim.x) {
            float4 buf[8];
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                const int idx = i0 + r * blockDim.x + threadIdx.x;
                const int j = idx / Q, c4 = idx - j * Q;
                buf[r] = (idx < total && j < tk) ? dcc_kv4(base + (i64)j * 2 * D + off + 4 * c4)
                                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                const int idx = i0 + r * blockDim.x + threadIdx.x;
                const int j = idx / Q, c4 = idx - j * Q;
                if (idx < total) {
                    float* t = all + j * (D + 1) + 4 * c4;
                    t[0] = buf[r].x;
                    t[1] = buf[r].y;
                    t[2] = buf[r].z;
                    t[3] = buf[r].w;
                }
            }
        }
    } else {
        const int total = rows * d;
        for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
            const int j = idx / d, c = idx - j * d;
            all[j * (d + 1) + c] = j < tk ? dcc_kv(base[(i64)j * 2 * d + off + c]) : 0.0f;
        }
    }
}

template <int D, int NT, typename KV>
__device__ void dcc_attention_body(float* out, const float* q, const KV* kv, i64 batch, i64 heads, i64 tq,
                                   int tk, int d, i64 cap, float scale, bool resident) {
    constexpr int K = (D ? D : DCC_MAX_HEAD_DIM) / DCC_WARP;
    const int dd = D ? D : d;
    const int W = blockDim.x / DCC_WARP;
    const int lane = threadIdx.x % DCC_WARP, w = threadIdx.x / DCC_WARP;
    float* qw = dcc_smem + w * dd;                          // [W, d] queries
    float* sw = dcc_smem + 2 * W * dd + w * tk;             // [W, tk] scores
    float* tile = dcc_smem + 2 * W * dd + W * tk;           // [64, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    float buf[DccPipe<D, NT>::R];
    for (i64 unit = blockIdx.x; unit < batch * heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, h = (unit / tiles) % heads, b = unit / (tiles * heads);
        const i64 i = i0 + w;
        const bool live = i < tq;
        const KV* base = kv + (b * heads + h) * cap * 2 * dd;
        dcc_fetch<D, NT>(buf, base, 0, 0, tk);
        if (live) {
            const float* qi = q + (b * tq + i) * heads * dd + h * dd;
            for (int c = lane; c < dd; c += DCC_WARP) qw[c] = qi[c];
        }
        __syncwarp();
        const int rows = (tk + DCC_TILE - 1) / DCC_TILE * DCC_TILE;
        if (resident) {
            __syncthreads();  // the previous unit's values are no longer read
            dcc_stage_all<D>(tile, base, 0, tk, rows, dd);
            __syncthreads();
        }
        for (int j0 = 0; j0 < tk; j0 += DCC_TILE) {
            // after the last key tile, the first value tile is fetched
            const bool more = j0 + DCC_TILE < tk;
            if (!resident)
                dcc_tile_next<D, NT>(tile, buf, base, 0, j0, more ? 0 : dd, more ? j0 + DCC_TILE : 0, tk, dd);
            if (live) {
                const float* kt = resident ? tile + j0 * (dd + 1) : tile;
                const float* k0 = kt + lane * (dd + 1);
                const float* k1 = kt + (lane + DCC_WARP) * (dd + 1);
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
                if (j0 + DCC_WARP + lane < tk) sw[j0 + DCC_WARP + lane] = scale * a1;
            }
        }
        __syncwarp();
        const float sum = dcc_softmax_row(sw, tk, lane);
        float acc[K];
        if (resident) {
            __syncthreads();  // every warp is done with the keys
            dcc_stage_all<D>(tile, base, dd, tk, rows, dd);
            __syncthreads();
            if (live) {
                dcc_values_zero<D>(acc);
                dcc_values_add<D, false>(acc, sw, 0, 0.0f, tile, tk, dd, lane);
            }
        } else {
            dcc_weighted_values<D, NT, false>(acc, buf, sw, 0.0f, tile, base, tk, dd, live, lane);
        }
        if (live) {
            float* o = out + (b * tq + i) * heads * dd + h * dd;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = lane + k * DCC_WARP;
                if (D || c < dd) o[c] = acc[k] / sum;
            }
        }
    }
}

