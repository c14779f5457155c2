// The f16 attention on tensor cores, its own NVRTC module (`attention/sdpa_f16`, host side:
// kernels/src/attention/f16.rs): the SDPA of the half path (GemmPath::Half, the vendor's fp16
// mode: FlashAttention-style SDPA on f16 operands). Prepended with common.cuh.
//
// attention_sdpa_f16 (binary16 cache) and attention_sdpa_f16_kv32 (an f32 cache holding binary16
// values, as the half path's f32 cache does): arguments (out, q, kv, batch, heads, tq, tk, d, cap,
// scale, rows), q/out [batch, tq, heads·d] float, keys/values frames 0 .. tk of a packed
// [batch, heads, cap, 2d] cache (k ‖ v per frame), d ≤ 128, rows = 16 or 64 (the tiling).
// attention_sdpa_f16_split (at the end) reads frames from tn on from each session's carry
// instead, staged into the same places of the same tiles: the same bits. Not
// bit-equal to its host twin (an mma's internal accumulation is not specified); batch-invariant:
// the operations of one (batch, head, query row i) depend on d and tk alone:
//   * operands: q, k and v rounded to binary16 (cvt.rn.f16.f32; exact for the values the half
//     path holds, and the identity on a binary16 cache);
//   * every score s_j = scale · dot16(q_i, k_j) over the d columns, where dot16 is
//     gemm_linear_f16's order (gemm_f16.cu): k padded with zeros to a multiple of 16; k step s to
//     chain s mod 4, a chain from 0 over its steps in ascending order, one
//     mma.m16n8k16.row.col.f32.f16.f16.f32 per step; the chains added as (p0 + p1) + (p2 + p3);
//     then one float multiply by scale;
//   * m = max_j s_j, e_j = dcc_expf(s_j − m), Σ = Σ e_j in the warp order (lane l adds
//     j = l, l + 32, ... ascending from 0, then dcc_warp_tree), as attention_sdpa;
//   * P_j = rn16(e_j) (unnormalized probabilities rounded to binary16, as flash attention does
//     before its P·V product); every output column o_c = dot16(P, v_c) / Σ over the keys (the
//     keys as the k dimension, padded with zeros to a multiple of 16, chained as above).
// An mma computes each output element from its own row of A, its own column of B and its own
// accumulator: neither the other rows of the tile (other queries, or the padding past tq) nor
// the tile's position changes its bits.
// CTA = one (batch, head, `rows` query rows), 8 warps; warp w owns m16 tile w mod MT (MT =
// rows / 16) and group w / MT of the NG = 8 / MT groups: in the scores the key n8 tiles
// SN·group .. SN·group + SN of each 64-frame key tile (SN = 8 / NG), in the outputs the column
// n8 tiles VN·group .. + VN (VN = ⌈DP/8 / NG⌉). Each score and each
// output is one warp's, so neither the tiling nor the warp count changes an order: both tilings
// give the same bits. The query fragments (rounded to binary16) stay in registers; keys, then
// values, stream once per CTA through a ring of DCC_HA_STAGES tiles of 64 frames of binary16
// (cp.async 16-byte copies where d % 8 == 0 and the cache is 16-byte aligned, else plain loads;
// an f32 cache is loaded and rounded); the values' B fragments come by ldmatrix .trans from the
// frame-major tile. 16 rows: 4 times the CTAs of 64 (one session's batch fills more SMs); 64
// rows: the keys and values pass once per 64 queries (many sessions).
// Dynamic shared memory (bytes; DP = d rounded up to 32, 64 or 128, R = min(tq, rows),
// LS = ⌈⌈tk/16⌉·16 / 32⌉·32 + 8 floats per score row: conflict-free 64-bit accesses):
// [3·64·(DP + 8) halves ring | R·LS floats scores | rows floats row sums]
// (attention::f16::shared_bytes). Less traps, as do a block of other than 256 threads, d outside
// 1..=128, tk outside 1..=cap, rows other than 16 or 64.

#define DCC_HA_KEYS 64
#define DCC_HA_WARPS 8
#define DCC_HA_STAGES 3

__device__ __forceinline__ unsigned dcc_ha_dyn_smem() {
    unsigned r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

extern __shared__ float4 dcc_ha_smem[];

// The binary16 nearest x (round to nearest even, overflow to ±inf), as its bits.
__device__ __forceinline__ unsigned short dcc_ha_bits(float x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}

__device__ __forceinline__ float dcc_ha_widen(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// rn16: the nearest binary16 value, as float.
__device__ __forceinline__ float dcc_ha_rn16(float v) { return dcc_ha_widen(dcc_ha_bits(v)); }

// Two floats as one f16x2 register, rounded: lo in the low half, hi in the high half (cvt's
// first source goes to the upper half).
__device__ __forceinline__ unsigned dcc_ha_pack(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

// d += a · b over one k step of 16 (a: 16 × 16 row-major f16 fragment, b: 16 × 8 column-major).
__device__ __forceinline__ void dcc_ha_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    __trap();
#endif
}

// The B fragment of one k step of 16 frames × one n8 tile of columns from a frame-major
// ([frame][column]) binary16 tile: lane l gives the address of frame row l mod 16 (lanes 0-7
// the first 8 frames, 8-15 the next 8; 16-31 ignored), column n0; .trans hands lane (g, t) the
// frames 2t, 2t + 1 (b0) and 2t + 8, 2t + 9 (b1) of column g.
__device__ __forceinline__ void dcc_ha_ldsm_t(unsigned& b0, unsigned& b1, const unsigned short* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(b0), "=r"(b1) : "r"(a));
}

__device__ __forceinline__ void dcc_ha_cp16(void* dst, const void* src, int n) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(src), "r"(n));
}
__device__ __forceinline__ void dcc_ha_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void dcc_ha_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// Where the frames of one (batch, head) slice lie: frame j at `lo` + j·2d, moved by `delta` bytes
// from frame tn on (the cache up to tn, a session's carry row after it: attention_sdpa_f16_split;
// tn ≥ tk where the cache holds the whole slice). `lo` at the slice's first key, or its first
// value. One address, one offset and one bound: the fewest registers the staging loop holds.
template <typename KV>
struct DccHaSrc {
    const KV* lo;
    long long delta;
    int tn;
    __device__ __forceinline__ const KV* frame(int j, int d) const {
        const unsigned long long a = reinterpret_cast<unsigned long long>(lo + (i64)j * 2 * d);
        return reinterpret_cast<const KV*>(a + (j < tn ? 0ull : (unsigned long long)delta));
    }
    __device__ __forceinline__ DccHaSrc plus(int c) const { return DccHaSrc{lo + c, delta, tn}; }
};

// No history: every frame of a slice from the cache (attention_sdpa_f16, attention_sdpa_f16_kv32).
struct DccHaNoHist {
    template <typename KV>
    __device__ __forceinline__ DccHaSrc<KV> src(const KV* base, i64, i64, i64, int, int tk) const {
        return DccHaSrc<KV>{base, 0, tk};
    }
    __device__ __forceinline__ bool aligned16() const { return true; }
    __device__ __forceinline__ i64 own(i64 tk) const { return tk; }
};

// The history of attention_sdpa_f16_split, for the one (batch row b, head h) slice this CTA
// computes (the split launch runs one unit per CTA): its frames from tn on at `hp` + (j − shift)·2d,
// the row of its session's carry. The entry picks `hp` among the launch's addresses before the
// body runs, so they are dead by then and hold no registers in its loops.
template <typename KV>
struct DccHaOne {
    const KV* hp;
    int tn, shift;
    // frame j ≥ tn at hp + (j − shift)·2d, i.e. base + j·2d moved by (hp − base) − shift·2d elements
    __device__ __forceinline__ DccHaSrc<KV> src(const KV* base, i64, i64, i64, int d, int) const {
        const long long delta = (long long)(reinterpret_cast<unsigned long long>(hp) -
                                            reinterpret_cast<unsigned long long>(base)) -
                                (long long)shift * 2 * d * (long long)sizeof(KV);
        return DccHaSrc<KV>{base, delta, tn};
    }
    __device__ __forceinline__ bool aligned16() const { return (reinterpret_cast<unsigned long long>(hp) & 15) == 0; }
    __device__ __forceinline__ i64 own(i64) const { return tn; }
};

// Stages frames j0 .. j0 + 64 of one (batch, head) cache slice (`src`: its first key, or its
// first value; frame stride 2d) into dst[jj · (DP + 8) + c] as binary16; frames ≥ tk and columns
// ≥ d are zeros. Every thread of the block takes its share; the caller commits the group.
// Binary16 cache: 16-byte cp.async where VEC (d % 8 == 0, 16-byte aligned cache), else plain
// loads and stores.
template <int DP, bool VEC>
__device__ __forceinline__ void dcc_ha_stage(unsigned short* dst, DccHaSrc<unsigned short> s,
                                             const unsigned short* kv, int j0, int tk, int d) {
    constexpr int LD = DP + 8;
    if constexpr (VEC) {
        constexpr int Q8 = DP / 8;  // 16-byte slots per staged frame
        for (int sl = threadIdx.x; sl < DCC_HA_KEYS * Q8; sl += 32 * DCC_HA_WARPS) {
            const int jj = sl / Q8, c = 8 * (sl % Q8);
            const int j = j0 + jj;
            const bool in = j < tk && c < d;
            dcc_ha_cp16(dst + jj * LD + c, in ? s.frame(j, d) + c : kv, in ? 16 : 0);
        }
    } else {
        for (int e = threadIdx.x; e < DCC_HA_KEYS * DP; e += 32 * DCC_HA_WARPS) {
            const int jj = e / DP, c = e % DP;
            const int j = j0 + jj;
            dst[jj * LD + c] = (j < tk && c < d) ? s.frame(j, d)[c] : (unsigned short)0;
        }
    }
}

// An f32 cache holding binary16 values: plain loads, rounded to binary16 (exact for those).
template <int DP, bool VEC>
__device__ __forceinline__ void dcc_ha_stage(unsigned short* dst, DccHaSrc<float> s, const float*, int j0, int tk,
                                             int d) {
    constexpr int LD = DP + 8;
    for (int e = threadIdx.x; e < DCC_HA_KEYS * DP; e += 32 * DCC_HA_WARPS) {
        const int jj = e / DP, c = e % DP;
        const int j = j0 + jj;
        dst[jj * LD + c] = (j < tk && c < d) ? dcc_ha_bits(s.frame(j, d)[c]) : (unsigned short)0;
    }
}

// Floats per score row (attention::f16::score_stride): the values' k steps' end (tk rounded up to
// 16), rounded up to 32, plus 8 (row r starts at bank 8r mod 32: the 64-bit accesses of a
// fragment's eight rows × four lanes are conflict-free).
__device__ __forceinline__ int dcc_ha_ls(int tk) { return (((tk + 15) / 16 * 16 + 31) / 32) * 32 + 8; }

// Bytes of dynamic shared memory (attention::f16::shared_bytes).
__device__ __forceinline__ i64 dcc_ha_smem_bytes(i64 tq, int tk, int dp, int rows) {
    const i64 r = tq < rows ? tq : rows;
    return (i64)DCC_HA_STAGES * DCC_HA_KEYS * (dp + 8) * 2 + (r * dcc_ha_ls(tk) + rows) * 4;
}

// The softmax numerators of one score row (tk scores): e_j = dcc_expf(s_j − max) summed in the
// warp order, P_j = rn16(e_j) stored in place; returns Σ e_j.
__device__ __forceinline__ float dcc_ha_softmax_row(float* sw, int tk, int lane) {
    float m = -__int_as_float(0x7f800000);
    for (int j = lane; j < tk; j += DCC_WARP) m = fmaxf(m, sw[j]);
    m = dcc_warp_max(m);
    float sum = 0.0f;
#pragma unroll 4
    for (int j = lane; j < tk; j += DCC_WARP) {
        const float e = dcc_expf(sw[j] - m);
        sum = sum + e;
        sw[j] = dcc_ha_rn16(e);
    }
    sum = dcc_warp_tree(sum);
    __syncwarp();
    return sum;
}

// Not inlined: each (element type, width, tiling, staging) instantiation gets its own register
// allocation, so the widest one's pressure does not spill into the one a launch runs (inlined
// into one entry they all spilled; this changes no instruction of the arithmetic).
template <typename KV, int DP, int MT, bool VEC, typename H>
__device__ __noinline__ void dcc_sdpa_f16_body(float* out, const float* q, const KV* kv, i64 batch, i64 heads,
                                                  i64 tq, int tk, int d, i64 cap, float scale, const H hist) {
    constexpr int ROWS = 16 * MT;
    constexpr int NG = DCC_HA_WARPS / MT;           // warp groups over key / column n8 tiles
    constexpr int LD = DP + 8;                      // staged frame stride (halves): conflict-free
    constexpr int KS = DP / 16;                     // k steps of the scores (at most)
    constexpr int SN = DCC_HA_KEYS / 8 / NG;        // key n8 tiles per warp and key tile (1, 4)
    constexpr int VN = (DP / 8 + NG - 1) / NG;      // output n8 tiles per warp
    constexpr int TILE = DCC_HA_KEYS * LD;          // halves per ring slot
    static_assert(MT == 1 || MT == 4, "16 or 64 query rows per CTA");
    static_assert(SN * 8 * NG == DCC_HA_KEYS, "whole key n8 tiles per warp");
    const int ntiles = (tk + DCC_HA_KEYS - 1) / DCC_HA_KEYS;
    const int ksteps = (tk + 15) / 16;  // k steps of the values product
    const int dsteps = (d + 15) / 16;   // k steps of the scores product
    const int LS = dcc_ha_ls(tk);
    const int R = tq < ROWS ? (int)tq : ROWS;  // stored score rows
    unsigned short* const ring = reinterpret_cast<unsigned short*>(dcc_ha_smem);
    float* const sc = reinterpret_cast<float*>(ring + DCC_HA_STAGES * TILE);
    float* const rowsum = sc + R * LS;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const int mt = warp % MT, grp = warp / MT;
    const int r0 = 16 * mt + g, r1 = r0 + 8;  // this lane's two fragment rows of the query tile
    const i64 qtiles = (tq + ROWS - 1) / ROWS;
    for (i64 unit = blockIdx.x; unit < batch * heads * qtiles; unit += gridDim.x) {
        const i64 i0 = (unit % qtiles) * ROWS, h = (unit / qtiles) % heads, b = unit / (qtiles * heads);
        const KV* const base = kv + (b * heads + h) * cap * 2 * d;
        const DccHaSrc<KV> src = hist.src(base, b, h, heads, d, tk);
        // Tile u of the stream (keys 0 .. ntiles − 1, then values) into ring slot u mod STAGES; an
        // empty group past the last, so that every thread commits one group per tile.
        auto issue = [&](int u) {
            if (u < 2 * ntiles) {
                const bool val = u >= ntiles;
                const int j0 = (val ? u - ntiles : u) * DCC_HA_KEYS;
                dcc_ha_stage<DP, VEC>(ring + (u % DCC_HA_STAGES) * TILE, src.plus(val ? d : 0), kv, j0, tk, d);
            }
            dcc_ha_commit();
        };
#pragma unroll
        for (int u = 0; u < DCC_HA_STAGES - 1; ++u) issue(u);
        // This lane's query A fragments, rounded to binary16 (rows past tq, columns past d zero).
        const i64 ia = i0 + r0, ib = i0 + r1;
        const float* const qa_row = q + (b * tq + (ia < tq ? ia : 0)) * heads * d + h * d;
        const float* const qb_row = q + (b * tq + (ib < tq ? ib : 0)) * heads * d + h * d;
        auto qv = [&](bool in, const float* row, int c) { return (in && c < d) ? row[c] : 0.0f; };
        unsigned qf[KS][4];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            const int c = 16 * ks + 2 * t;
            qf[ks][0] = dcc_ha_pack(qv(ia < tq, qa_row, c), qv(ia < tq, qa_row, c + 1));
            qf[ks][1] = dcc_ha_pack(qv(ib < tq, qb_row, c), qv(ib < tq, qb_row, c + 1));
            qf[ks][2] = dcc_ha_pack(qv(ia < tq, qa_row, c + 8), qv(ia < tq, qa_row, c + 9));
            qf[ks][3] = dcc_ha_pack(qv(ib < tq, qb_row, c + 8), qv(ib < tq, qb_row, c + 9));
        }
        // Scores: key tiles 0 .. ntiles − 1.
        for (int u = 0; u < ntiles; ++u) {
            dcc_ha_wait<DCC_HA_STAGES - 2>();
            // Tile u is in shared memory for every thread, and every thread is done with tile
            // u − 1, whose slot the next issue refills.
            __syncthreads();
            issue(u + DCC_HA_STAGES - 1);
            const unsigned short* const tile = ring + (u % DCC_HA_STAGES) * TILE;
            const int j0 = u * DCC_HA_KEYS;
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
                    // B[k][n] = key n, column k: key 8·nt + g, columns 16·ks + 2t (+1) and + 8 (+9)
                    const unsigned short* const kr = tile + (8 * (SN * grp + n) + g) * LD + 16 * ks + 2 * t;
                    const unsigned b0 = *reinterpret_cast<const unsigned*>(kr);
                    const unsigned b1 = *reinterpret_cast<const unsigned*>(kr + 8);
                    dcc_ha_mma(sacc[n][ks % 4], qf[ks], b0, b1);
                }
            }
            // Accumulator element e of n-tile n: row g + 8·(e / 2), key 8·nt + 2t + (e mod 2).
#pragma unroll
            for (int n = 0; n < SN; ++n)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = 16 * mt + g + 8 * (e / 2);
                    const int j = j0 + 8 * (SN * grp + n) + 2 * t + (e % 2);
                    const float v = (sacc[n][0][e] + sacc[n][1][e]) + (sacc[n][2][e] + sacc[n][3][e]);
                    if (j < tk && r < R) sc[r * LS + j] = scale * v;
                }
        }
        // Every score is written: the softmax of rows warp, warp + 8, ..., P in place, zeros past
        // tk (to the last k step's end) and the row sums. The first value tile's barrier below
        // publishes them.
        __syncthreads();
        for (int r = warp; r < R; r += DCC_HA_WARPS) {
            float* const row = sc + r * LS;
            const float sum = dcc_ha_softmax_row(row, tk, lane);
            for (int j = tk + lane; j < 16 * ksteps; j += DCC_WARP) row[j] = 0.0f;
            if (lane == 0) rowsum[r] = sum;
        }
        float acc[VN][4][4];
#pragma unroll
        for (int n = 0; n < VN; ++n)
#pragma unroll
            for (int ch = 0; ch < 4; ++ch)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[n][ch][e] = 0.0f;
        // Values: value tiles ntiles .. 2·ntiles − 1, k steps 4·(u − ntiles) .., step s to chain
        // s mod 4 (a tile is 4 steps, so the chain is the step's index in the tile).
        for (int u = ntiles; u < 2 * ntiles; ++u) {
            dcc_ha_wait<DCC_HA_STAGES - 2>();
            __syncthreads();
            issue(u + DCC_HA_STAGES - 1);
            const unsigned short* const tile = ring + (u % DCC_HA_STAGES) * TILE;
            const int s0 = (DCC_HA_KEYS / 16) * (u - ntiles);
#pragma unroll
            for (int ks = 0; ks < DCC_HA_KEYS / 16; ++ks) {
                if (s0 + ks >= ksteps) break;
                const int j = 16 * (s0 + ks) + 2 * t;
                // A = P: rows r0, r1, keys j (+1) and j + 8 (+9); rows past R read as zeros.
                const float2 z = make_float2(0.0f, 0.0f);
                const float2 x0 = r0 < R ? *reinterpret_cast<const float2*>(sc + r0 * LS + j) : z;
                const float2 x1 = r1 < R ? *reinterpret_cast<const float2*>(sc + r1 * LS + j) : z;
                const float2 x2 = r0 < R ? *reinterpret_cast<const float2*>(sc + r0 * LS + j + 8) : z;
                const float2 x3 = r1 < R ? *reinterpret_cast<const float2*>(sc + r1 * LS + j + 8) : z;
                const unsigned pa[4] = {dcc_ha_pack(x0.x, x0.y), dcc_ha_pack(x1.x, x1.y), dcc_ha_pack(x2.x, x2.y),
                                        dcc_ha_pack(x3.x, x3.y)};
#pragma unroll
                for (int n = 0; n < VN; ++n) {
                    const int nt = VN * grp + n;
                    if (8 * nt >= d) break;  // columns past d: none written
                    unsigned b0, b1;
                    dcc_ha_ldsm_t(b0, b1, tile + (16 * ks + lane % 16) * LD + 8 * nt);
                    dcc_ha_mma(acc[n][ks], pa, b0, b1);
                }
            }
        }
        dcc_ha_wait<0>();
        // Output element e of n-tile n: row g + 8·(e / 2), column 8·nt + 2t + (e mod 2).
#pragma unroll
        for (int n = 0; n < VN; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = 16 * mt + g + 8 * (e / 2);
                const int c = 8 * (VN * grp + n) + 2 * t + (e % 2);
                const i64 i = i0 + r;
                const float v = (acc[n][0][e] + acc[n][1][e]) + (acc[n][2][e] + acc[n][3][e]);
                if (i < tq && c < d) out[(b * tq + i) * heads * d + h * d + c] = v / rowsum[r];
            }
        __syncthreads();  // the next unit rewrites the scores, the row sums and the ring
    }
}

// The body for one head width and tiling: 16-byte staging where `vec` (binary16 caches only).
template <typename KV, int DP, int MT, typename H>
__device__ __forceinline__ void dcc_ha_run(bool vec, float* out, const float* q, const KV* kv, i64 batch, i64 heads,
                                           i64 tq, int tk, int d, i64 cap, float scale, const H hist) {
    if constexpr (sizeof(KV) == 2) {
        if (vec) {
            dcc_sdpa_f16_body<KV, DP, MT, true>(out, q, kv, batch, heads, tq, tk, d, cap, scale, hist);
            return;
        }
    }
    dcc_sdpa_f16_body<KV, DP, MT, false>(out, q, kv, batch, heads, tq, tk, d, cap, scale, hist);
}

// The launch's checks (traps) and dispatch. Without a history (DccHaNoHist) frames 0 .. tk come
// from the cache (tk ≤ cap); with one, frames 0 .. tn (≤ cap) do and the rest from the carries.
template <typename KV, typename H>
__device__ __forceinline__ void dcc_sdpa_f16_entry(float* out, const float* q, const KV* kv, i64 batch, i64 heads,
                                                   i64 tq, i64 tk, i64 d, i64 cap, float scale, i64 rows,
                                                   const H hist) {
    if (blockDim.x != 32 * DCC_HA_WARPS || blockDim.y != 1 || blockDim.z != 1) __trap();
    if (d < 1 || d > 128 || tk < 1 || hist.own(tk) > cap || (rows != 16 && rows != 64)) __trap();
    const int dp = d <= 32 ? 32 : d <= 64 ? 64 : 128;
    if ((i64)dcc_ha_dyn_smem() < dcc_ha_smem_bytes(tq, (int)tk, dp, (int)rows)) __trap();
    const bool vec = d % 8 == 0 && (reinterpret_cast<unsigned long long>(kv) & 15) == 0 && hist.aligned16();
    const int k = (int)tk, w = (int)d;
    if (rows == 64) {
        if (dp == 32)
            dcc_ha_run<KV, 32, 4>(vec, out, q, kv, batch, heads, tq, k, w, cap, scale, hist);
        else if (dp == 64)
            dcc_ha_run<KV, 64, 4>(vec, out, q, kv, batch, heads, tq, k, w, cap, scale, hist);
        else
            dcc_ha_run<KV, 128, 4>(vec, out, q, kv, batch, heads, tq, k, w, cap, scale, hist);
    } else if (dp == 32) {
        dcc_ha_run<KV, 32, 1>(vec, out, q, kv, batch, heads, tq, k, w, cap, scale, hist);
    } else if (dp == 64) {
        dcc_ha_run<KV, 64, 1>(vec, out, q, kv, batch, heads, tq, k, w, cap, scale, hist);
    } else {
        dcc_ha_run<KV, 128, 1>(vec, out, q, kv, batch, heads, tq, k, w, cap, scale, hist);
    }
}

extern "C" __global__ void __launch_bounds__(256) attention_sdpa_f16(float* out, const float* q,
                                                                     const unsigned short* kv, i64 batch, i64 heads,
                                                                     i64 tq, i64 tk, i64 d, i64 cap, float scale,
                                                                     i64 rows) {
    dcc_sdpa_f16_entry(out, q, kv, batch, heads, tq, tk, d, cap, scale, rows, DccHaNoHist{});
}

extern "C" __global__ void __launch_bounds__(256) attention_sdpa_f16_kv32(float* out, const float* q,
                                                                          const float* kv, i64 batch, i64 heads,
                                                                          i64 tq, i64 tk, i64 d, i64 cap,
                                                                          float scale, i64 rows) {
    dcc_sdpa_f16_entry(out, q, kv, batch, heads, tq, tk, d, cap, scale, rows, DccHaNoHist{});
}

// attention_sdpa_f16 over keys split between the cache and each session's carry: frames 0 .. tn of
// the cache `kv` (the new frames and whatever the step staged), then frames j = tn .. tk − 1 at
// frame j − shift of batch row b's carry row (b mod group, head) of the packed [group, heads,
// hcap, 2d] block h<b / group> (nhist ≤ 32 of them; the unused slots repeat a used one). The same
// values in the same order as attention_sdpa_f16 over a cache holding all tk frames: the same bits.
// One unit (batch row, head, query tile) per CTA: a grid of fewer CTAs traps; CTAs past the last
// unit return.
#define DCC_HA_P(i) const unsigned short* h##i
#define DCC_HA_P8(a, b, c, d, e, f, g, h) DCC_HA_P(a), DCC_HA_P(b), DCC_HA_P(c), DCC_HA_P(d), DCC_HA_P(e), DCC_HA_P(f), DCC_HA_P(g), DCC_HA_P(h)
#define DCC_HA_PICK(i) \
    if (m == i) hp = h##i;
extern "C" __global__ void __launch_bounds__(256) attention_sdpa_f16_split(
    float* out, const float* q, const unsigned short* kv, i64 batch, i64 heads, i64 tq, i64 tk, i64 d, i64 cap,
    float scale, i64 rows, i64 tn, i64 shift, i64 group, i64 hcap, i64 nhist, DCC_HA_P8(0, 1, 2, 3, 4, 5, 6, 7),
    DCC_HA_P8(8, 9, 10, 11, 12, 13, 14, 15), DCC_HA_P8(16, 17, 18, 19, 20, 21, 22, 23),
    DCC_HA_P8(24, 25, 26, 27, 28, 29, 30, 31)) {
    if (nhist < 1 || nhist > 32 || group < 1 || nhist * group < batch || tn < 0 || tn > tk || shift < 0 ||
        shift > tn || tk - shift > hcap || rows < 1 || tq < 0 || heads < 1)
        __trap();
    const i64 qtiles = (tq + rows - 1) / rows, units = batch * heads * qtiles;
    if ((i64)gridDim.x < units) __trap();
    const i64 unit = blockIdx.x;
    if (unit >= units) return;
    const i64 b = unit / (qtiles * heads), h = (unit / qtiles) % heads, m = b / group;
    const unsigned short* hp = h0;
    DCC_HA_PICK(1) DCC_HA_PICK(2) DCC_HA_PICK(3) DCC_HA_PICK(4) DCC_HA_PICK(5) DCC_HA_PICK(6) DCC_HA_PICK(7)
    DCC_HA_PICK(8) DCC_HA_PICK(9) DCC_HA_PICK(10) DCC_HA_PICK(11) DCC_HA_PICK(12) DCC_HA_PICK(13) DCC_HA_PICK(14)
    DCC_HA_PICK(15) DCC_HA_PICK(16) DCC_HA_PICK(17) DCC_HA_PICK(18) DCC_HA_PICK(19) DCC_HA_PICK(20) DCC_HA_PICK(21)
    DCC_HA_PICK(22) DCC_HA_PICK(23) DCC_HA_PICK(24) DCC_HA_PICK(25) DCC_HA_PICK(26) DCC_HA_PICK(27) DCC_HA_PICK(28)
    DCC_HA_PICK(29) DCC_HA_PICK(30) DCC_HA_PICK(31)
    // one unit per CTA (checked above), so the body's one slice is (b, h)
    const DccHaOne<unsigned short> hist{hp + ((b % group) * heads + h) * hcap * 2 * d, (int)tn, (int)shift};
    dcc_sdpa_f16_entry(out, q, kv, batch, heads, tq, tk, d, cap, scale, rows, hist);
}
