// The 3xTF32 attention on tensor cores, its own NVRTC module (`attention/sdpa_tf32x3`, host
// side: kernels/src/attention/tf32.rs). Prepended with common.cuh. The helpers it shares with
// attention.cu (dcc_dyn_smem_bytes, dcc_softmax_row) are copied below: each module is its own
// translation unit.

#define DCC_MAX_HEAD_DIM 128

__device__ __forceinline__ unsigned dcc_dyn_smem_bytes() {
    unsigned r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

extern __shared__ float dcc_smem[];

// attention.cu's softmax numerators: e_j = exp(s_j − max) in place over the warp's score row;
// returns Σ e_j in the warp order.
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

// dcc_softmax_row over two rows of one warp at once (two independent chains in each loop, for
// the latency); each row's operations and their order are dcc_softmax_row's. Returns the sums.
__device__ __forceinline__ float2 dcc_softmax_row2(float* sa, float* sb, int tk, int lane) {
    float ma = -__int_as_float(0x7f800000), mb = ma;
    for (int j = lane; j < tk; j += DCC_WARP) {
        ma = fmaxf(ma, sa[j]);
        mb = fmaxf(mb, sb[j]);
    }
    ma = dcc_warp_max(ma);
    mb = dcc_warp_max(mb);
#pragma unroll 4
    for (int j = lane; j < tk; j += DCC_WARP) {
        sa[j] = dcc_expf(sa[j] - ma);
        sb[j] = dcc_expf(sb[j] - mb);
    }
    float xa = 0.0f, xb = 0.0f;
    for (int j = lane; j < tk; j += DCC_WARP) {
        xa = xa + sa[j];
        xb = xb + sb[j];
    }
    xa = dcc_warp_tree(xa);
    xb = dcc_warp_tree(xb);
    __syncwarp();
    return make_float2(xa, xb);
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
// Two tilings of a (batch, head)'s queries, the same bits (attention::tf32::Tiling):
// * 16 rows (dcc_sdpa_tf32x3_body; any d): CTA = one (batch, head, 16-row query tile),
//   W = DCC_T3_WARPS = 8 warps. Keys, then values, stream through a ring of DCC_T3_STAGES tiles
//   of 64 frames (cp.async, 16-byte copies when kv and d allow it); warp w scores the key n8
//   tile w of each tile (8 per tile) into the score rows in shared memory; after the softmax
//   (warp w: rows w, w + W) warp w accumulates the output n8 tiles w, w + W, ... below DP over
//   every value tile (at DP = 32 warps 4..7 have none). Many CTAs: it fills the device at one
//   session's batch (2 × 8 heads × 4 tiles at the DiT's shape). Dynamic shared memory (floats;
//   DP = d rounded up to 32, 64 or 128, LS = tk rounded up to 64, plus 4): [16·(DP + 4) big q |
//   16·(DP + 4) small q | 16·LS scores | STAGES·64·(DP + 8) ring | 16 row sums]
//   (attention::tf32::shared_bytes).
// * 64 rows (dcc_sdpa_tf32x3_wide; d ≤ 64): CTA = one (batch, head, 64-row query tile), 8 warps,
//   each on one m16 tile and half the columns (its comment below). At many sessions the 16-row
//   tiling is bound by what each CTA re-does per 16 queries: it streams the head's keys and
//   values again (4 times over for the DiT's 56 queries), reloads and resplits its query
//   fragments for every key tile, and each warp's k step feeds one n8 tile (10 shared loads for
//   3 mma, 4 chains in flight). In 64 rows the keys and values pass once, the query fragments
//   stay in registers, and a k step feeds 4 n8 tiles (8 loads for 12 mma, 16 chains): fewer
//   CTAs, which only a batch of many sessions fills (attention::tf32::dims picks it from 96).
//   Dynamic shared memory: [min(tq, 64)·(tk rounded up to 8, plus 4) scores | 3·64·(DP + 8)
//   ring | 64 row sums] (attention::tf32::shared_bytes_rows64).
// Each score and each output is one warp's, so neither the warp count nor the tiling changes
// an order. The kernel takes 64 rows where d ≤ 64 and the launch gives their shared memory,
// more than 16 rows need (so the size says which), else 16 rows; less than that traps, as
// does a block of other than 256 threads or d outside 1..=128.

#define DCC_T3_ROWS 16
#define DCC_T3_KEYS 64
#define DCC_T3_WARPS 8
#define DCC_T3_STAGES 3
#define DCC_T3W_ROWS 64
#define DCC_T3W_STAGES 3

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

// Issues the cp.async copies of frames j0 .. j0 + 64 of one (batch, head) cache slice (`src`:
// its first key, or its first value) into dst[jj · ld + c] (16-byte copies where VEC, else
// 4-byte ones); frames ≥ tk and columns ≥ d are zero-filled. Every thread of the block takes its
// share; the caller commits the group.
template <int DP, bool VEC>
__device__ __forceinline__ void dcc_t3_stage(float* dst, int ld, const float* src, const float* kv, int j0, int tk,
                                             int d) {
    constexpr int Q4 = DP / 4;  // 16-byte slots per staged frame
    constexpr int SLOTS = DCC_T3_KEYS * Q4;
    for (int sl = threadIdx.x; sl < SLOTS; sl += 32 * DCC_T3_WARPS) {
        const int jj = sl / Q4, c = 4 * (sl % Q4);
        const int j = j0 + jj;
        const float* const s = src + (i64)j * 2 * d + c;
        if constexpr (VEC) {
            const bool in = j < tk && c < d;
            dcc_cp16(dst + jj * ld + c, in ? s : kv, in ? 16 : 0);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const bool in = j < tk && c + e < d;
                dcc_cp4(dst + jj * ld + c + e, in ? s + e : kv, in ? 4 : 0);
            }
        }
    }
}

// Floats of dynamic shared memory of a 16-row launch (attention::tf32::shared_bytes / 4).
__device__ __forceinline__ i64 dcc_t3_smem_floats(i64 tk, int dp) {
    const i64 ls = (tk + DCC_T3_KEYS - 1) / DCC_T3_KEYS * DCC_T3_KEYS + 4;
    return 2 * DCC_T3_ROWS * (dp + 4) + DCC_T3_ROWS * ls + DCC_T3_STAGES * DCC_T3_KEYS * (dp + 8) + DCC_T3_ROWS;
}

// Floats of dynamic shared memory of a 64-row launch (attention::tf32::shared_bytes_rows64 / 4):
// R = min(tq, 64) score rows of tk rounded up to 8, plus 4, the ring, the row sums.
__device__ __forceinline__ i64 dcc_t3w_smem_floats(i64 tq, i64 tk, int dp) {
    const i64 ls = (tk + 7) / 8 * 8 + 4;
    const i64 rows = tq < DCC_T3W_ROWS ? tq : DCC_T3W_ROWS;
    return rows * ls + DCC_T3W_STAGES * DCC_T3_KEYS * (dp + 8) + DCC_T3W_ROWS;
}

template <int DP, bool VEC>
__device__ void dcc_sdpa_tf32x3_body(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                     int tk, int d, i64 cap, float scale) {
    constexpr int LQ = DP + 4;  // q rows: conflict-free A fragments
    constexpr int LK = DP + 4;  // key rows: conflict-free B fragments (B[k][n] = key n, dim k)
    constexpr int LV = DP + 8;  // value rows: conflict-free B fragments (B[k][n] = key k, dim n)
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
                float* const dst = ring + (u % DCC_T3_STAGES) * DCC_T3_KEYS * LV;
                dcc_t3_stage<DP, VEC>(dst, val ? LV : LK, base + (val ? d : 0), kv, j0, tk, d);
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

// The 64-row body (DP = 32 or 64): one CTA per (batch, head, 64-row query tile), so a head's keys
// and values are staged once for up to 64 queries (4 m16 tiles) instead of once per 16. Warp w
// owns m16 tile w mod 4 and half the columns (n-group w / 4): in the scores, the key n8 tiles
// 4·(w / 4) .. + 4 of each key tile, its query fragments split once and held in registers
// across every key tile; in the outputs, the n8 tiles (w / 4)·DP/16 .. + DP/16. Per k step a warp
// loads one A fragment and DP/16 or 4 B fragments for 3·(4 or DP/16) mma: a quarter of the
// 16-row body's shared-memory loads per mma in the scores. Each score and output is still one
// warp's, its k steps in the same chains in the same order (dcc_mma3, step s to chain s mod 4, a
// 64-frame tile being 8 steps): the same bits as the 16-row body. Shared memory (floats;
// LS = tk rounded up to 8, plus 4 (LS / 4 odd: conflict-free A fragments), R = min(tq, 64)):
// [R·LS scores | 3·64·(DP + 8) ring | 64 row sums]; the query tile is staged once through the
// third ring slot before the third key tile lands there. The values' k steps end at the last
// multiple of 8, so the rows need no more. Score rows past R are never stored: their A
// fragments read as zeros (their outputs are not written).
template <int DP, bool VEC>
__device__ void dcc_sdpa_tf32x3_wide(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                     int tk, int d, i64 cap, float scale) {
    constexpr int LQ = DP + 4;  // staged q rows: conflict-free A fragments
    constexpr int LK = DP + 4;  // key rows: conflict-free B fragments (B[k][n] = key n, dim k)
    constexpr int LV = DP + 8;  // value rows: conflict-free B fragments (B[k][n] = key k, dim n)
    constexpr int KS = DP / 8;  // k steps of the scores product (at most)
    constexpr int SN = DCC_T3_KEYS / 8 / 2;  // key n8 tiles per warp and key tile (4)
    constexpr int VN = DP / 8 / 2;           // output n8 tiles per warp (2, 4)
    static_assert(DP == 32 || DP == 64, "the 64-row body holds DP / 8 query fragments in registers");
    static_assert(DCC_T3_WARPS == 8 && DCC_T3W_ROWS == 64, "4 m16 tiles × 2 column halves");
    constexpr int NT = 32 * DCC_T3_WARPS;
    const int ntiles = (tk + DCC_T3_KEYS - 1) / DCC_T3_KEYS;
    const int ksteps = (tk + 7) / 8;          // k steps of the values product
    const int dsteps = (d + 7) / 8;           // k steps of the scores product
    const int LS = 8 * ksteps + 4;            // score rows: conflict-free A fragments
    const int R = tq < DCC_T3W_ROWS ? (int)tq : DCC_T3W_ROWS;  // stored score rows
    float* const sc = dcc_smem;
    float* const ring = sc + R * LS;
    float* const rowsum = ring + DCC_T3W_STAGES * DCC_T3_KEYS * LV;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int mt = warp % 4, ng = warp / 4;
    const int r0 = 16 * mt + g, r1 = r0 + 8;  // this lane's two fragment rows of the query tile
    const i64 qtiles = (tq + DCC_T3W_ROWS - 1) / DCC_T3W_ROWS;
    for (i64 unit = blockIdx.x; unit < batch * heads * qtiles; unit += gridDim.x) {
        const i64 i0 = (unit % qtiles) * DCC_T3W_ROWS, h = (unit / qtiles) % heads, b = unit / (qtiles * heads);
        const float* const base = kv + (b * heads + h) * cap * 2 * d;
        auto issue = [&](int u) {
            if (u < 2 * ntiles) {
                const bool val = u >= ntiles;
                const int j0 = (val ? u - ntiles : u) * DCC_T3_KEYS;
                float* const dst = ring + (u % DCC_T3W_STAGES) * DCC_T3_KEYS * LV;
                dcc_t3_stage<DP, VEC>(dst, val ? LV : LK, base + (val ? d : 0), kv, j0, tk, d);
            }
            dcc_cp_commit();
        };
#pragma unroll
        for (int u = 0; u < DCC_T3W_STAGES - 1; ++u) issue(u);
        // The query tile (rows past tq and columns past d are zeros) through the last ring slot,
        // then this warp's A fragments, split, into registers.
        float* const qt = ring + (DCC_T3W_STAGES - 1) * DCC_T3_KEYS * LV;
        for (int e = tid; e < DCC_T3W_ROWS * DP; e += NT) {
            const int r = e / DP, c = e % DP;
            const i64 i = i0 + r;
            qt[r * LQ + c] = (i < tq && c < d) ? q[(b * tq + i) * heads * d + h * d + c] : 0.0f;
        }
        __syncthreads();
        unsigned qbig[KS][4], qsml[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const int k0 = 8 * ks;
            const float av[4] = {qt[r0 * LQ + k0 + t], qt[r1 * LQ + k0 + t], qt[r0 * LQ + k0 + t + 4],
                                 qt[r1 * LQ + k0 + t + 4]};
            dcc_split4(av, qbig[ks], qsml[ks]);
        }
        // Scores: key tiles 0 .. ntiles − 1.
        for (int u = 0; u < ntiles; ++u) {
            dcc_cp_wait<DCC_T3W_STAGES - 2>();
            // Tile u is in shared memory for every thread, every thread is done with tile u − 1
            // (at u = 0: with the staged queries), whose slot the next issue refills.
            __syncthreads();
            issue(u + DCC_T3W_STAGES - 1);
            const float* const tile = ring + (u % DCC_T3W_STAGES) * DCC_T3_KEYS * LV;
            const int j0 = u * DCC_T3_KEYS;
            float sacc[SN][4][4];
#pragma unroll
            for (int n = 0; n < SN; ++n)
#pragma unroll
                for (int ch = 0; ch < 4; ++ch)
#pragma unroll
                    for (int e = 0; e < 4; ++e) sacc[n][ch][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                if (ks >= dsteps) break;
#pragma unroll
                for (int n = 0; n < SN; ++n) {
                    const float* const kr = tile + (8 * (SN * ng + n) + g) * LK + 8 * ks + t;
                    dcc_mma3(sacc[n][ks % 4], qbig[ks], qsml[ks], kr[0], kr[4]);
                }
            }
            // Accumulator element e of n-tile n: row g + 8·(e / 2), key 8·nt + 2t + (e mod 2).
#pragma unroll
            for (int n = 0; n < SN; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = 16 * mt + g + 8 * (e / 2);
                    const int j = j0 + 8 * (SN * ng + n) + 2 * t + (e % 2);
                    const float v = (sacc[n][0][e] + sacc[n][1][e]) + (sacc[n][2][e] + sacc[n][3][e]);
                    if (j < tk && r < R) sc[r * LS + j] = scale * v;
                }
        }
        // Every score is written: the softmax of rows warp, warp + W, ..., numerators in place,
        // zeros past tk (to the last k step's end) and the row sums. The first value tile's
        // barrier below publishes them.
        // Rows r and r + W together where both are stored (dcc_softmax_row2: the same bits).
        __syncthreads();
        for (int r = warp; r < R; r += 2 * DCC_T3_WARPS) {
            float* const row = sc + r * LS;
            float* const row2 = row + DCC_T3_WARPS * LS;
            if (r + DCC_T3_WARPS < R) {
                const float2 sums = dcc_softmax_row2(row, row2, tk, lane);
                for (int j = tk + lane; j < 8 * ksteps; j += 32) row[j] = row2[j] = 0.0f;
                if (lane == 0) {
                    rowsum[r] = sums.x;
                    rowsum[r + DCC_T3_WARPS] = sums.y;
                }
            } else {
                const float sum = dcc_softmax_row(row, tk, lane);
                for (int j = tk + lane; j < 8 * ksteps; j += 32) row[j] = 0.0f;
                if (lane == 0) rowsum[r] = sum;
            }
        }
        float acc[VN][4][4];
#pragma unroll
        for (int n = 0; n < VN; ++n)
#pragma unroll
            for (int ch = 0; ch < 4; ++ch)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[n][ch][e] = 0.0f;
        // Values: value tiles ntiles .. 2·ntiles − 1, k steps 8·(u − ntiles) .., step s to chain
        // s mod 4 (a tile is 8 steps, so the chain is the step's index in the tile mod 4).
        for (int u = ntiles; u < 2 * ntiles; ++u) {
            dcc_cp_wait<DCC_T3W_STAGES - 2>();
            __syncthreads();
            issue(u + DCC_T3W_STAGES - 1);
            const float* const tile = ring + (u % DCC_T3W_STAGES) * DCC_T3_KEYS * LV;
            const int s0 = 8 * (u - ntiles);
#pragma unroll
            for (int ks = 0; ks < DCC_T3_KEYS / 8; ++ks) {
                if (s0 + ks >= ksteps) break;
                const int j = 8 * (s0 + ks);
                const float av[4] = {r0 < R ? sc[r0 * LS + j + t] : 0.0f, r1 < R ? sc[r1 * LS + j + t] : 0.0f,
                                     r0 < R ? sc[r0 * LS + j + t + 4] : 0.0f, r1 < R ? sc[r1 * LS + j + t + 4] : 0.0f};
                unsigned abig[4], asml[4];
                dcc_split4(av, abig, asml);
#pragma unroll
                for (int n = 0; n < VN; ++n) {
                    const float* const vr = tile + (8 * ks + t) * LV + 8 * (VN * ng + n) + g;
                    dcc_mma3(acc[n][ks % 4], abig, asml, vr[0], vr[4 * LV]);
                }
            }
        }
        dcc_cp_wait<0>();
        // Output element e of n-tile n: row g + 8·(e / 2), column 8·nt + 2t + (e mod 2).
#pragma unroll
        for (int n = 0; n < VN; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = 16 * mt + g + 8 * (e / 2);
                const int c = 8 * (VN * ng + n) + 2 * t + (e % 2);
                const i64 i = i0 + r;
                const float v = (acc[n][0][e] + acc[n][1][e]) + (acc[n][2][e] + acc[n][3][e]);
                if (i < tq && c < d) out[(b * tq + i) * heads * d + h * d + c] = v / rowsum[r];
            }
        __syncthreads();  // the next unit rewrites the scores, the row sums and the ring
    }
}

extern "C" __global__ void attention_sdpa_tf32x3(float* out, const float* q, const float* kv, i64 batch, i64 heads,
                                                 i64 tq, i64 tk, i64 d, i64 cap, float scale) {
    if (blockDim.x != 32 * DCC_T3_WARPS || blockDim.y != 1 || blockDim.z != 1) __trap();
    if (d < 1 || d > DCC_MAX_HEAD_DIM || tk < 1 || tk > cap) __trap();
    const int dp = d <= 32 ? 32 : d <= 64 ? 64 : 128;
    const i64 smem = (i64)dcc_dyn_smem_bytes();
    const i64 narrow = dcc_t3_smem_floats(tk, dp) * 4, wide = dcc_t3w_smem_floats(tq, tk, dp) * 4;
    // The 64-row body where the launch gave its shared memory (and it needs more than the
    // 16-row body's, so that the size says which); the same bits either way.
    const bool rows64 = dp <= 64 && wide > narrow && smem >= wide;
    if (!rows64 && smem < narrow) __trap();
    const bool vec = d % 4 == 0 && (reinterpret_cast<unsigned long long>(kv) & 15) == 0;
#define DCC_T3_CASE(BODY, DP)                                                                                  \
    if (vec)                                                                                                   \
        BODY<DP, true>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale);                             \
    else                                                                                                       \
        BODY<DP, false>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale);
    if (rows64) {
        if (dp == 32) {
            DCC_T3_CASE(dcc_sdpa_tf32x3_wide, 32)
        } else {
            DCC_T3_CASE(dcc_sdpa_tf32x3_wide, 64)
        }
    } else if (dp == 32) {
        DCC_T3_CASE(dcc_sdpa_tf32x3_body, 32)
    } else if (dp == 64) {
        DCC_T3_CASE(dcc_sdpa_tf32x3_body, 64)
    } else {
        DCC_T3_CASE(dcc_sdpa_tf32x3_body, 128)
    }
#undef DCC_T3_CASE
}
