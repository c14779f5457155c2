// Attention: scaled dot-product (attention_sdpa) and the conformer's relative-position attention
// (attention_rel_pos). Host twins: kernels/src/attention.rs. Prepended with common.cuh and
// attention_body.cuh (the staging, softmax and SDPA body, templated on the cache's element type,
// and the description of the launch).

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
