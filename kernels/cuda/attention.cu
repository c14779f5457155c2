// Attention: scaled dot-product (attention_sdpa) and the conformer's relative-position attention
// (attention_rel_pos). Host twins: kernels/src/attention.rs. Prepended with common.cuh.
// One warp per query row, W = blockDim.x / 32 query rows per block.
//
// A block takes W consecutive query rows of one (batch, head). Keys and values are staged in
// shared memory 64 frames at a time (coalesced loads, rows padded to d + 1 floats). Warp w owns
// query row i0 + w: lane l scores keys j0 + l and j0 + 32 + l of each tile (two independent dot
// products, each ascending over c, as the twin), the row's scores live in shared memory, the softmax sum is the warp reduction above, and
// lane l accumulates the output columns l, l + 32, ... over all keys in ascending order.
//
// Dynamic shared memory (launch's shared_bytes): floats [W·d (queries) | W·d (rel-pos: q + w) |
// W·tk (scores) | 64·(d + 1) (key/value tile)], see `attention::attention_dims`.
//
// Resident SDPA: when the launch gives room for ALL keys at once (`attention::sdpa_dims`:
// [W·d | W·d | W·tk | ceil64(tk)·(d + 1)] floats, up to ~152 KB for the DiT's 458 keys of d = 64),
// attention_sdpa stages every key of the (batch, head) in one pass, computes the score rows with no
// barrier between tiles, then stages every value the same way. Same products, sums and order as
// the tiled path (and the Host twin): only the number of barriers and load rounds changes. The kernel traps if
// the launch gives less, or if d is outside 1..=128. The bodies are templated on the head
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

extern __shared__ float dcc_smem[];

// Stages frames j0 .. j0 + 64 of one (batch, head) cache slice (`base` + `off`: 0 keys, d values)
// into tile[jj · (d + 1) + c]; frames ≥ tk read as 0. Loads go out in batches of 16 per thread
// before any store, so their latencies overlap.
#define DCC_STAGE_BATCH 16
template <int D>
__device__ __forceinline__ void dcc_stage(float* tile, const float* base, int off, int j0, int tk, int d) {
    const int dd = D ? D : d;
    const int total = DCC_TILE * dd;
    for (int i0 = 0; i0 < total; i0 += DCC_STAGE_BATCH * blockDim.x) {
        float buf[DCC_STAGE_BATCH];
#pragma unroll
        for (int r = 0; r < DCC_STAGE_BATCH; ++r) {
            const int idx = i0 + r * blockDim.x + threadIdx.x;
            const int jj = idx / dd, c = idx - jj * dd;
            const int j = j0 + jj;
            buf[r] = (idx < total && j < tk) ? base[(i64)j * 2 * dd + off + c] : 0.0f;
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

template <int D, int NT>
__device__ __forceinline__ void dcc_fetch(float (&buf)[DccPipe<D, NT>::R], const float* base, int off, int j0,
                                          int tk) {
    if constexpr (NT > 0 && D > 0) {
#pragma unroll
        for (int r = 0; r < DccPipe<D, NT>::R; ++r) {
            const int idx = r * NT + threadIdx.x;
            const int jj = idx / D, c = idx - jj * D;
            const int j = j0 + jj;
            buf[r] = j < tk ? base[(i64)j * 2 * D + off + c] : 0.0f;
        }
    }
}

template <int D, int NT>
__device__ __forceinline__ void dcc_tile_next(float* tile, float (&buf)[DccPipe<D, NT>::R], const float* base,
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
template <int D, int NT, bool SCALED>
__device__ __forceinline__ void dcc_weighted_values(float* acc, float (&buf)[DccPipe<D, NT>::R], const float* sw,
                                                    float inv, float* tile, const float* base, int tk, int d,
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
template <int D>
__device__ __forceinline__ void dcc_stage_all(float* all, const float* base, int off, int tk, int rows, int d) {
    if constexpr (D != 0) {
        constexpr int Q = D / 4;  // float4 per frame
        const int total = rows * Q;
        for (int i0 = 0; i0 < total; i0 += 8 * blockDim.x) {
            float4 buf[8];
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                const int idx = i0 + r * blockDim.x + threadIdx.x;
                const int j = idx / Q, c4 = idx - j * Q;
                buf[r] = (idx < total && j < tk)
                             ? *reinterpret_cast<const float4*>(base + (i64)j * 2 * D + off + 4 * c4)
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
            all[j * (d + 1) + c] = j < tk ? base[(i64)j * 2 * d + off + c] : 0.0f;
        }
    }
}

template <int D, int NT>
__device__ void dcc_attention_body(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
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
        const float* base = kv + (b * heads + h) * cap * 2 * dd;
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

// Synchronous staging for every block size. The register-pipelined staging (NT =
// DCC_PIPE_THREADS) is bit-equal but was measured slower on the H200: it needs ~170 registers (one
// 256-thread block per SM; the prompt call's 624 blocks then run in 5 waves), and capping it at
// 128 with launch bounds spills (DiT chunk 44.8 µs vs 37.4 µs synchronous). Kept for a later
// cp.async double-buffered variant; not instantiated.
#define DCC_ATTN_DISPATCH(BODY, D, ...) BODY<D, 0>(__VA_ARGS__);

extern "C" __global__ void attention_sdpa(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                          i64 tk, i64 d, i64 cap, float scale) {
    dcc_check_attention_launch(tk, d);
    // Resident when the launch gave room for every key frame (rounded up to whole tiles).
    const i64 W = blockDim.x / DCC_WARP;
    const i64 rows = (tk + DCC_TILE - 1) / DCC_TILE * DCC_TILE;
    const bool res = (i64)dcc_dyn_smem_bytes() >= (2 * W * d + W * tk + rows * (d + 1)) * 4 &&
                     (d % 4 != 0 || (reinterpret_cast<unsigned long long>(kv) & 15) == 0);
    switch (d) {
        case 32: DCC_ATTN_DISPATCH(dcc_attention_body, 32, out, q, kv, batch, heads, tq, (int)tk, 32, cap, scale, res); break;
        case 64: DCC_ATTN_DISPATCH(dcc_attention_body, 64, out, q, kv, batch, heads, tq, (int)tk, 64, cap, scale, res); break;
        case 128: DCC_ATTN_DISPATCH(dcc_attention_body, 128, out, q, kv, batch, heads, tq, (int)tk, 128, cap, scale, res); break;
        default: dcc_attention_body<0, 0>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale, res); break;
    }
}

template <int D, int NT>
__device__ void dcc_rel_pos_body(float* out, const float* q, const float* pos_bias_u, const float* pos_bias_v,
                                 const float* kv, const float* p, i64 heads, i64 tq, int tk, int d, i64 cap) {
    constexpr int K = (D ? D : DCC_MAX_HEAD_DIM) / DCC_WARP;
    const int dd = D ? D : d;
    const int W = blockDim.x / DCC_WARP;
    const int lane = threadIdx.x % DCC_WARP, w = threadIdx.x / DCC_WARP;
    const i64 hd = heads * dd;
    const float denom = (float)sqrt((double)dd);
    float* qu = dcc_smem + w * dd;                          // [W, d]: q + u
    float* qv = dcc_smem + W * dd + w * dd;                 // [W, d]: q + w
    float* sw = dcc_smem + 2 * W * dd + w * tk;             // [W, tk]
    float* tile = dcc_smem + 2 * W * dd + W * tk;           // [64, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    float buf[DccPipe<D, NT>::R];
    for (i64 unit = blockIdx.x; unit < heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, h = unit / tiles;
        const i64 i = i0 + w;
        const bool live = i < tq;
        const float* base = kv + h * cap * 2 * dd;
        dcc_fetch<D, NT>(buf, base, 0, 0, tk);
        if (live) {
            const float* qi = q + i * hd + h * dd;
            for (int c = lane; c < dd; c += DCC_WARP) {
                qu[c] = qi[c] + pos_bias_u[h * dd + c];
                qv[c] = qi[c] + pos_bias_v[h * dd + c];
            }
        }
        __syncwarp();
        for (int j0 = 0; j0 < tk; j0 += DCC_TILE) {
            const bool more = j0 + DCC_TILE < tk;
            dcc_tile_next<D, NT>(tile, buf, base, 0, j0, more ? 0 : dd, more ? j0 + DCC_TILE : 0, tk, dd);
            if (live) {
#pragma unroll
                for (int t = 0; t < DCC_TILE / DCC_WARP; ++t) {
                    const int j = j0 + t * DCC_WARP + lane;
                    if (j < tk) {
                        const float* kj = tile + (t * DCC_WARP + lane) * (dd + 1);
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
        const float sum = dcc_softmax_row(sw, tk, lane);
        const float inv = 1.0f / sum;
        float acc[K];
        dcc_weighted_values<D, NT, true>(acc, buf, sw, inv, tile, base, tk, dd, live, lane);
        if (live) {
            float* o = out + i * hd + h * dd;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = lane + k * DCC_WARP;
                if (D || c < dd) o[c] = acc[k];
            }
        }
    }
}

extern "C" __global__ void attention_rel_pos(float* out, const float* q, const float* pos_bias_u,
                                             const float* pos_bias_v, const float* kv, const float* p, i64 heads,
                                             i64 tq, i64 tk, i64 d, i64 cap) {
    dcc_check_attention_launch(tk, d);
    switch (d) {
        case 32: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 32, out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, 32, cap); break;
        case 64: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 64, out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, 64, cap); break;
        case 128: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 128, out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, 128, cap); break;
        default: dcc_rel_pos_body<0, 0>(out, q, pos_bias_u, pos_bias_v, kv, p, heads, tq, (int)tk, (int)d, cap); break;
    }
}

// ---------------------------------------------------------------------------------------------
// attention_sdpa_tf32x3: the same op as attention_sdpa (same arguments, layouts, unmasked
// softmax over frames 0 .. tk of the packed cache) with both products on tensor cores as 3xTF32
// (kernels/src/attention/tf32.rs, GemmPath::InvariantTf32x3). Not bit-equal to its host twin (an
// mma's internal accumulation is not specified); batch-invariant: the operations of one (batch,
// head, query row) depend on d and tk alone. The order of one query row i:
//   * every score s_j = scale · dot(q_i, k_j) over c < d, and every output column
//     o_c = dot(e, v_c) over j < tk, where dot(x, w) is gemm_tf32x3's order (kernels/cuda/gemm.cu):
//     each value split into big = tf32(v) and small = tf32(v − big); k padded with zeros to a
//     multiple of 8; k step s to chain s mod 4; a chain starts at 0 and takes its steps in
//     ascending order, three mma.m16n8k8 per step: small(x)·big(w), big(x)·small(w),
//     big(x)·big(w); the chains added as (p0 + p1) + (p2 + p3). x is the query (scores) or the
//     row's numerators (outputs), w the key or the value column;
//   * softmax exactly as attention_sdpa (dcc_softmax_row): m = max_j s_j, e_j = dcc_expf(s_j − m),
//     Σ e_j in the warp order; o_c / Σ.
// An mma computes each output element from its own row of A, its own column of B and its own
// accumulator: neither the other rows of the tile (other queries, or the padding past tq) nor
// the tile's position changes its bits.
// CTA: one (batch, head, 16-row query tile), W = DCC_T3_WARPS = 8 warps. Keys, then values, stream
// through a ring of DCC_T3_STAGES tiles of 64 frames (cp.async, 16-byte copies when kv and d allow
// it); warp w scores the key n8 tile w of each tile (8 per tile) into the score rows in shared
// memory; after the softmax (warp w: rows w, w + W) warp w accumulates the output n8 tiles w,
// w + W, ... below DP over every value tile (at DP = 32 warps 4..7 have none). Each score and
// each output is one warp's, so the warp count changes no order.
// Dynamic shared memory (floats; DP = d rounded up to 32, 64 or 128, LS = tk rounded up to 64,
// plus 4): [16·(DP + 4) big q | 16·(DP + 4) small q | 16·LS scores | STAGES·64·(DP + 8) ring |
// 16 row sums] (attention::tf32::shared_bytes); less traps, as does a block of other than 128
// threads or d outside 1..=128.

#define DCC_T3_ROWS 16
#define DCC_T3_KEYS 64
#define DCC_T3_WARPS 8
#define DCC_T3_STAGES 3

// gemm.cu's t3_tf32 and t3_mma (copied: each module is its own translation unit).
__device__ __forceinline__ unsigned dcc_tf32(float v) { return (__float_as_uint(v) + 0x1000u) & 0xffffe000u; }

// d += a · b over one k step of 8 (a: 16 × 8 row-major fragment, b: 8 × 8 column-major).
__device__ __forceinline__ void dcc_mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// The three products of one k step into chain accumulator d: small(a)·big(b), big(a)·small(b),
// big(a)·big(b); w0, w1 the B fragment's values, split here.
__device__ __forceinline__ void dcc_mma3(float (&d)[4], const unsigned (&abig)[4], const unsigned (&asml)[4], float w0,
                                         float w1) {
    const unsigned b0 = dcc_tf32(w0);
    const unsigned b1 = dcc_tf32(w1);
    const unsigned s0 = dcc_tf32(w0 - __uint_as_float(b0));
    const unsigned s1 = dcc_tf32(w1 - __uint_as_float(b1));
    dcc_mma_tf32(d, asml, b0, b1);
    dcc_mma_tf32(d, abig, s0, s1);
    dcc_mma_tf32(d, abig, b0, b1);
}

// Splits the four A values of a fragment.
__device__ __forceinline__ void dcc_split4(const float (&v)[4], unsigned (&big)[4], unsigned (&sml)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        big[i] = dcc_tf32(v[i]);
        sml[i] = dcc_tf32(v[i] - __uint_as_float(big[i]));
    }
}

__device__ __forceinline__ void dcc_cp16(float* dst, const float* src, int n) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(n));
}
__device__ __forceinline__ void dcc_cp4(float* dst, const float* src, int n) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(a), "l"(src), "r"(n));
}
__device__ __forceinline__ void dcc_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void dcc_cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Floats of dynamic shared memory of a launch (attention::tf32::shared_bytes / 4).
__device__ __forceinline__ i64 dcc_t3_smem_floats(i64 tk, int dp) {
    const i64 ls = (tk + DCC_T3_KEYS - 1) / DCC_T3_KEYS * DCC_T3_KEYS + 4;
    return 2 * DCC_T3_ROWS * (dp + 4) + DCC_T3_ROWS * ls + DCC_T3_STAGES * DCC_T3_KEYS * (dp + 8) + DCC_T3_ROWS;
}

template <int DP, bool VEC>
__device__ void dcc_sdpa_tf32x3_body(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                     int tk, int d, i64 cap, float scale) {
    constexpr int LQ = DP + 4;  // q rows: conflict-free A fragments
    constexpr int LK = DP + 4;  // key rows: conflict-free B fragments (B[k][n] = key n, dim k)
    constexpr int LV = DP + 8;  // value rows: conflict-free B fragments (B[k][n] = key k, dim n)
    constexpr int Q4 = DP / 4;  // 16-byte slots per staged frame
    constexpr int SLOTS = DCC_T3_KEYS * Q4;
    constexpr int SPW = DCC_T3_KEYS / 8 / DCC_T3_WARPS;                  // key n8 tiles per warp (1)
    constexpr int NPW = (DP / 8 + DCC_T3_WARPS - 1) / DCC_T3_WARPS;      // output n8 tiles per warp (1, 1, 2)
    static_assert(SPW * 8 * DCC_T3_WARPS == DCC_T3_KEYS, "whole key n8 tiles per warp");
    constexpr int NT = 32 * DCC_T3_WARPS;
    const int ntiles = (tk + DCC_T3_KEYS - 1) / DCC_T3_KEYS;
    const int LS = ntiles * DCC_T3_KEYS + 4;    // score rows: conflict-free A fragments
    const int ksteps = (tk + 7) / 8;            // k steps of the values product
    const int dsteps = (d + 7) / 8;             // k steps of the scores product
    float* const qb = dcc_smem;
    float* const qs = qb + DCC_T3_ROWS * LQ;
    float* const sc = qs + DCC_T3_ROWS * LQ;
    float* const ring = sc + DCC_T3_ROWS * LS;
    float* const rowsum = ring + DCC_T3_STAGES * DCC_T3_KEYS * LV;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const i64 qtiles = (tq + DCC_T3_ROWS - 1) / DCC_T3_ROWS;
    for (i64 unit = blockIdx.x; unit < batch * heads * qtiles; unit += gridDim.x) {
        const i64 i0 = (unit % qtiles) * DCC_T3_ROWS, h = (unit / qtiles) % heads, b = unit / (qtiles * heads);
        const float* const base = kv + (b * heads + h) * cap * 2 * d;
        // Tile u of the stream (keys 0 .. ntiles − 1, then values) into ring slot u mod STAGES; an
        // empty group past the last, so that every thread commits one group per tile.
        auto issue = [&](int u) {
            if (u < 2 * ntiles) {
                const bool val = u >= ntiles;
                const int j0 = (val ? u - ntiles : u) * DCC_T3_KEYS;
                const int ld = val ? LV : LK;
                float* const dst = ring + (u % DCC_T3_STAGES) * DCC_T3_KEYS * LV;
                for (int sl = tid; sl < SLOTS; sl += NT) {
                    const int jj = sl / Q4, c = 4 * (sl % Q4);
                    const int j = j0 + jj;
                    const float* src = base + (i64)j * 2 * d + (val ? d : 0) + c;
                    if constexpr (VEC) {
                        const bool in = j < tk && c < d;
                        dcc_cp16(dst + jj * ld + c, in ? src : kv, in ? 16 : 0);
                    } else {
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const bool in = j < tk && c + e < d;
                            dcc_cp4(dst + jj * ld + c + e, in ? src + e : kv, in ? 4 : 0);
                        }
                    }
                }
            }
            dcc_cp_commit();
        };
#pragma unroll
        for (int u = 0; u < DCC_T3_STAGES - 1; ++u) issue(u);
        // The query tile, split (rows past tq and columns past d are zeros).
        for (int e = tid; e < DCC_T3_ROWS * DP; e += NT) {
            const int r = e / DP, c = e % DP;
            const i64 i = i0 + r;
            const float v = (i < tq && c < d) ? q[(b * tq + i) * heads * d + h * d + c] : 0.0f;
            const unsigned big = dcc_tf32(v);
            qb[r * LQ + c] = __uint_as_float(big);
            qs[r * LQ + c] = __uint_as_float(dcc_tf32(v - __uint_as_float(big)));
        }
        float acc[NPW][4][4];
#pragma unroll
        for (int n = 0; n < NPW; ++n)
#pragma unroll
            for (int ch = 0; ch < 4; ++ch)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[n][ch][e] = 0.0f;
        for (int u = 0; u < 2 * ntiles; ++u) {
            dcc_cp_wait<DCC_T3_STAGES - 2>();
            // Tile u is in shared memory for every thread, and every thread is done with tile
            // u − 1, whose slot the next issue refills (and, at u = ntiles, with every score).
            __syncthreads();
            issue(u + DCC_T3_STAGES - 1);
            const float* const tile = ring + (u % DCC_T3_STAGES) * DCC_T3_KEYS * LV;
            if (u < ntiles) {
                // Scores of the key n8 tiles warp, warp + W, ... of this tile.
                const int j0 = u * DCC_T3_KEYS;
                float sacc[SPW][4][4];
#pragma unroll
                for (int n = 0; n < SPW; ++n)
#pragma unroll
                    for (int ch = 0; ch < 4; ++ch)
#pragma unroll
                        for (int e = 0; e < 4; ++e) sacc[n][ch][e] = 0.0f;
#pragma unroll
                for (int ks = 0; ks < DP / 8; ++ks) {
                    if (ks >= dsteps) break;
                    const int k0 = 8 * ks;
                    const float av[4] = {qb[g * LQ + k0 + t], qb[(g + 8) * LQ + k0 + t], qb[g * LQ + k0 + t + 4],
                                         qb[(g + 8) * LQ + k0 + t + 4]};
                    const float as[4] = {qs[g * LQ + k0 + t], qs[(g + 8) * LQ + k0 + t], qs[g * LQ + k0 + t + 4],
                                         qs[(g + 8) * LQ + k0 + t + 4]};
                    unsigned abig[4], asml[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        abig[e] = __float_as_uint(av[e]);
                        asml[e] = __float_as_uint(as[e]);
                    }
#pragma unroll
                    for (int n = 0; n < SPW; ++n) {
                        const float* const kr = tile + (8 * (warp + DCC_T3_WARPS * n) + g) * LK + k0 + t;
                        dcc_mma3(sacc[n][ks % 4], abig, asml, kr[0], kr[4]);
                    }
                }
                // Accumulator element e of n-tile n: row g + 8·(e / 2), key 8·nt + 2t + (e mod 2).
#pragma unroll
                for (int n = 0; n < SPW; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int j = j0 + 8 * (warp + DCC_T3_WARPS * n) + 2 * t + (e % 2);
                        const float v = (sacc[n][0][e] + sacc[n][1][e]) + (sacc[n][2][e] + sacc[n][3][e]);
                        if (j < tk) sc[(g + 8 * (e / 2)) * LS + j] = scale * v;
                    }
                continue;
            }
            if (u == ntiles) {
                // Every score is written: the softmax of rows warp, warp + W, numerators in
                // place, zeros past tk (to the end of the last tile) and the row sums.
                for (int r = warp; r < DCC_T3_ROWS; r += DCC_T3_WARPS) {
                    float* const row = sc + r * LS;
                    const float sum = dcc_softmax_row(row, tk, lane);
                    for (int j = tk + lane; j < ntiles * DCC_T3_KEYS; j += 32) row[j] = 0.0f;
                    if (lane == 0) rowsum[r] = sum;
                }
                __syncthreads();
            }
            // Values: k steps 8·(u − ntiles) .. of this tile, step s to chain s mod 4 (a tile is 8
            // steps, so the chain is the step's index in the tile mod 4).
            const int s0 = 8 * (u - ntiles);
#pragma unroll
            for (int ks = 0; ks < DCC_T3_KEYS / 8; ++ks) {
                if (s0 + ks >= ksteps) break;
                const int j = 8 * (s0 + ks);
                const float av[4] = {sc[g * LS + j + t], sc[(g + 8) * LS + j + t], sc[g * LS + j + t + 4],
                                     sc[(g + 8) * LS + j + t + 4]};
                unsigned abig[4], asml[4];
                dcc_split4(av, abig, asml);
#pragma unroll
                for (int n = 0; n < NPW; ++n) {
                    if (8 * (warp + DCC_T3_WARPS * n) >= DP) break;  // no such n8 tile (DP = 32)
                    const float* const vr = tile + (8 * ks + t) * LV + 8 * (warp + DCC_T3_WARPS * n) + g;
                    dcc_mma3(acc[n][ks % 4], abig, asml, vr[0], vr[4 * LV]);
                }
            }
        }
        dcc_cp_wait<0>();
        // Output element e of n-tile n: row g + 8·(e / 2), column 8·nt + 2t + (e mod 2).
#pragma unroll
        for (int n = 0; n < NPW; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = g + 8 * (e / 2);
                const int c = 8 * (warp + DCC_T3_WARPS * n) + 2 * t + (e % 2);
                const i64 i = i0 + r;
                const float v = (acc[n][0][e] + acc[n][1][e]) + (acc[n][2][e] + acc[n][3][e]);
                if (i < tq && c < d) out[(b * tq + i) * heads * d + h * d + c] = v / rowsum[r];
            }
        __syncthreads();  // the next unit rewrites q, the scores and the row sums
    }
}

extern "C" __global__ void attention_sdpa_tf32x3(float* out, const float* q, const float* kv, i64 batch, i64 heads,
                                                 i64 tq, i64 tk, i64 d, i64 cap, float scale) {
    if (blockDim.x != 32 * DCC_T3_WARPS || blockDim.y != 1 || blockDim.z != 1) __trap();
    if (d < 1 || d > DCC_MAX_HEAD_DIM || tk < 1 || tk > cap) __trap();
    const int dp = d <= 32 ? 32 : d <= 64 ? 64 : 128;
    if ((i64)dcc_dyn_smem_bytes() < dcc_t3_smem_floats(tk, dp) * 4) __trap();
    const bool vec = d % 4 == 0 && (reinterpret_cast<unsigned long long>(kv) & 15) == 0;
#define DCC_T3_CASE(DP)                                                                                        \
    if (vec)                                                                                                   \
        dcc_sdpa_tf32x3_body<DP, true>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale);            \
    else                                                                                                       \
        dcc_sdpa_tf32x3_body<DP, false>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale);
    if (dp == 32) {
        DCC_T3_CASE(32)
    } else if (dp == 64) {
        DCC_T3_CASE(64)
    } else {
        DCC_T3_CASE(128)
    }
#undef DCC_T3_CASE
}
