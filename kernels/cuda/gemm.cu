// Deterministic, batch-invariant fp32 linear: y[rows, out] = x[rows, in] · Wᵀ + b (an "NT" GEMM:
// rows of x and rows of W are both contiguous along k). Host twin: kernels/src/gemm.rs
// (`linear`), BIT-IDENTICAL to every entry below: same k-grouping, same fused multiply-adds in
// the same order, same zero padding of k, same reduction tree, then `+ b`.
//
// The accumulation order of one output element y[r, o] depends only on K (= in):
//   * k is padded with zeros to KP = ceil(K / GEMM_BK) · GEMM_BK (GEMM_BK = GEMM_KG · GEMM_KS = 64);
//   * k-group g (0 ≤ g < GEMM_KG = 16) owns every k with (k / GEMM_KS) mod GEMM_KG == g, i.e. the
//     slice [t·64 + 4g, t·64 + 4g + 4) of every 64-wide k tile t;
//   * p_g = 0.0f, then p_g = fmaf(x[r, k], w[o, k], p_g) over the group's k in ascending order
//     (a padded k contributes fmaf(0, 0, p_g));
//   * the pairwise tree in group order: for h = 1, 2, 4, 8: p_g = p_g + p_{g+h} for every g that
//     is a multiple of 2h; s = p_0;
//   * s = s + b[o] (with a bias), then s = act(s) (with a fused activation: dcc_act1 of
//     common.cuh, exactly what act_apply computes per element), y = s.
// Nothing in that order depends on the number of rows, the tile shape, the tile's position or the
// grid, so every variant below computes the same bits, and a row's result never depends on which
// other rows share the launch (batch invariance).
//
// Structure: one CTA computes a BM × BN output tile with GW thread sets; set s owns the k-groups
// s·G .. s·G + G − 1 (G = GEMM_KG / GW, one TM × TN register tile each). The tree's levels below
// G pair two groups of one set and are summed in registers; the levels from G on pair set s + d
// with set s (s a multiple of 2d) and meet in shared memory. (Every subtree is a run of groups, a
// contiguous k range of each tile, so the same tree splits k over CTAs without changing a bit.)
// x and W are staged through shared memory in chunks of CH k tiles, k-contiguous ([BM][CH·64 + 4]
// and [BN][CH·64 + 4] floats: 16-byte aligned rows, conflict-free float4 reads), in a ring of
// STAGES buffers filled by asynchronous copies (cp.async), STAGES − 1 chunks in flight while one
// is multiplied, one barrier per chunk (a chunk past the last k tile is never multiplied: k is
// padded to a tile, not to a chunk); 16-byte copies when the operand's rows are 16-byte aligned (address and leading
// dimension multiples of 4 floats, K a multiple of 4), 4-byte copies otherwise. Rows past `rows`,
// outputs past `out` and k past K are staged as zeros (zero-filling copies that read nothing)
// and are never written.
//
// Compiled by NVRTC with --fmad=false: the only fused multiply-adds are the __fmaf_rn below.
// Launch: grid (ceil(out / BN), ceil(rows / BM), 1), block (GW · (BM/TM) · (BN/TN), 1, 1),
// max(STAGES · (BM + BN) · (CH·64 + 4), GW/2 · BM · BN) floats of dynamic shared memory
// (kernels/src/gemm.rs Variant::shared_bytes); another block shape, less shared memory or K above
// GEMM_MAX_K traps.
// Arguments of every entry:
//   (y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out), sizes long long, w packed [out, in];
//   b [out] is read only when bias != 0 (the backends check every pointer argument against their
//   live buffers, so a launch without a bias passes some live address there, never null); act < 0
//   is no activation, else the op code of act_apply (kernels/src/act.rs) with its alpha.
// Prepended with common.cuh (i64, dcc_act1); followed by one variant's entry (end of file).

#define GEMM_KG 16
#define GEMM_KS 4
#define GEMM_BK (GEMM_KG * GEMM_KS)

struct GemmArgs {
    float* y;
    i64 ldy;
    const float* x;
    i64 ldx;
    const float* w;
    const float* b;
    int bias;
    int act;
    float alpha;
    i64 rows;
    i64 k;
    i64 out;
};

// One staging slot of a thread: four consecutive k of one row, at `src` + chunk offset in global
// memory and `dst` floats into a staging buffer. `lim`: the chunk offsets below it are inside
// the operand (K − k offset of the slot; 0 for a row past the operand's rows, whose `src` is the
// operand's start, never read).
struct GemmSlot {
    const float* src;
    int lim;
    int dst;
};

// The largest K the kernels take (k offsets are 32-bit; the launch traps above it).
#define GEMM_MAX_K 0x7fffff00LL

// Asynchronous copies global → shared (sm_80+, `cp.async`): `n` of 16 bytes (or of 4 bytes)
// are read from `src`, the rest of the 16 (4) bytes at `dst` is zero-filled; `n` = 0 reads
// nothing. Copies are committed in groups; gemm_wait<N> waits until at most N groups of this
// thread are still in flight.
__device__ __forceinline__ void gemm_cp16(float* dst, const float* src, int n) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void gemm_cp4(float* dst, const float* src, int n) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void gemm_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void gemm_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ unsigned gemm_dynamic_smem() {
    unsigned n;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

// Stages the four k of slot `sl` at chunk offset kb into the buffer at `buf`, zeros past K (and
// for a row past the operand's rows). VEC: the slot's row start and leading dimension are
// multiples of 4 floats and K is a multiple of 4, so four floats below K are 16-byte aligned.
template <bool VEC>
__device__ __forceinline__ void gemm_stage4(float* buf, const GemmSlot& sl, int kb) {
    if constexpr (VEC) {
        const bool in = kb < sl.lim;
        gemm_cp16(buf + sl.dst, in ? sl.src + kb : sl.src, in ? 16 : 0);
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        const bool in = kb + e < sl.lim;
        gemm_cp4(buf + sl.dst + e, in ? sl.src + kb + e : sl.src, in ? 4 : 0);
    }
}

// VEC: both operands take 16-byte copies (gemm_linear's dispatch).
template <int BM, int BN, int TM, int TN, int GW, int STAGES, int CH, bool VEC>
__device__ __forceinline__ void gemm_linear_tile(const GemmArgs a) {
    constexpr int TY = BM / TM;                 // threads along rows in a set
    constexpr int TX = BN / TN;                 // threads along outputs in a set
    constexpr int GT = TX * TY;                 // threads per set
    constexpr int NT = GT * GW;                 // threads per CTA
    constexpr int GPT = GEMM_KG / GW;           // k-groups per thread
    constexpr int CK = CH * GEMM_BK;            // k per staged chunk (CH k tiles)
    constexpr int LDS = CK + 4;                 // row stride of a staged chunk, in floats
    constexpr int Q = CK / 4;                   // float4 slots per staged row
    constexpr int XV = BM * Q;                  // float4 slots of the x chunk
    constexpr int WV = BN * Q;                  // float4 slots of the W chunk
    constexpr int XPT = (XV + NT - 1) / NT;
    constexpr int WPT = (WV + NT - 1) / NT;
    constexpr int STAGE = (BM + BN) * LDS;
    constexpr int RED = (GW / 2) * BM * BN;
    constexpr int SMEM = STAGES * STAGE > RED ? STAGES * STAGE : RED;
    static_assert(BM % TM == 0 && BN % TN == 0, "tile not divisible by the thread tile");
    static_assert(GW >= 1 && GW <= GEMM_KG && GEMM_KG % GW == 0 && (GW & (GW - 1)) == 0,
                  "GW must be a power of two dividing GEMM_KG");
    static_assert(STAGES >= 2 && CH >= 1, "at least two staging buffers of at least one tile");

    extern __shared__ float4 gemm_smem[];
    float* const smem = reinterpret_cast<float*>(gemm_smem);

    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1) __trap();
    if (gemm_dynamic_smem() < SMEM * sizeof(float) || a.k > GEMM_MAX_K) __trap();
    const int tid = threadIdx.x;
    const int s = tid / GT;
    const int lt = tid - s * GT;
    const int ty = lt / TX;
    const int tx = lt - ty * TX;
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;

    // This thread's staging slots (slot q: row q / Q of the chunk, k offset 4·(q mod Q)).
    GemmSlot xsl[XPT];
    GemmSlot wsl[WPT];
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
        const int q = tid + i * NT;
        const i64 r = m0 + q / Q;
        const bool in = q < XV && r < a.rows;
        xsl[i].src = in ? a.x + r * a.ldx + 4 * (q % Q) : a.x;
        xsl[i].lim = in ? (int)K - 4 * (q % Q) : 0;
        xsl[i].dst = (q / Q) * LDS + 4 * (q % Q);
    }
#pragma unroll
    for (int i = 0; i < WPT; ++i) {
        const int q = tid + i * NT;
        const i64 r = n0 + q / Q;
        const bool in = q < WV && r < a.out;
        wsl[i].src = in ? a.w + r * K + 4 * (q % Q) : a.w;
        wsl[i].lim = in ? (int)K - 4 * (q % Q) : 0;
        wsl[i].dst = BM * LDS + (q / Q) * LDS + 4 * (q % Q);
    }

    float acc[GPT][TM][TN];
#pragma unroll
    for (int j = 0; j < GPT; ++j)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int n = 0; n < TN; ++n) acc[j][i][n] = 0.0f;

    const i64 tiles = (K + GEMM_BK - 1) / GEMM_BK;
    const i64 chunks = (tiles + CH - 1) / CH;
    // Queues the copies of chunk c (k tiles c·CH .. c·CH + CH − 1) into buffer `buf` (slots past
    // the chunk's rows copy nothing), then commits them as one group (an empty group past the
    // last chunk, so that every thread commits one group per chunk and gemm_wait counts chunks).
    auto issue = [&](i64 c, int buf) {
        if (c < chunks) {
            const int kb = (int)c * CK;
            float* const st = smem + buf * STAGE;
#pragma unroll
            for (int i = 0; i < XPT; ++i)
                if (tid + i * NT < XV) gemm_stage4<VEC>(st, xsl[i], kb);
#pragma unroll
            for (int i = 0; i < WPT; ++i)
                if (tid + i * NT < WV) gemm_stage4<VEC>(st, wsl[i], kb);
        }
        gemm_commit();
    };
    // This thread's groups over k tile u of the chunk in buffer `buf`: group s·GPT + j takes its
    // four k in ascending order into each accumulator.
    auto multiply = [&](int buf, int u) {
        const float* const xs = smem + buf * STAGE + ty * LDS + u * GEMM_BK + 4 * GPT * s;
        const float* const ws = smem + buf * STAGE + (BM + tx) * LDS + u * GEMM_BK + 4 * GPT * s;
#pragma unroll
        for (int j = 0; j < GPT; ++j) {
            float4 xv[TM];
            float4 wv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) xv[i] = *reinterpret_cast<const float4*>(xs + i * TY * LDS + 4 * j);
#pragma unroll
            for (int n = 0; n < TN; ++n) wv[n] = *reinterpret_cast<const float4*>(ws + n * TX * LDS + 4 * j);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int n = 0; n < TN; ++n) {
                    float c = acc[j][i][n];
                    c = __fmaf_rn(xv[i].x, wv[n].x, c);
                    c = __fmaf_rn(xv[i].y, wv[n].y, c);
                    c = __fmaf_rn(xv[i].z, wv[n].z, c);
                    c = __fmaf_rn(xv[i].w, wv[n].w, c);
                    acc[j][i][n] = c;
                }
        }
    };

    // STAGES − 1 chunks in flight ahead of the one being multiplied.
    {
#pragma unroll
        for (int c = 0; c < STAGES - 1; ++c) issue(c, c);
        int rbuf = 0;
        int wbuf = STAGES - 1;
        for (i64 c = 0; c < chunks; ++c) {
            gemm_wait<STAGES - 2>();
            // Chunk c is in shared memory for every thread, and every thread is done with chunk
            // c − 1, whose buffer (wbuf) the next issue refills.
            __syncthreads();
            issue(c + STAGES - 1, wbuf);
            if (c * CH + CH <= tiles) {
#pragma unroll
                for (int u = 0; u < CH; ++u) multiply(rbuf, u);
            } else {
                // The last chunk: only its tiles below ceil(K / 64) (k is padded to a tile,
                // never to a chunk).
                for (int u = 0; u < (int)(tiles - c * CH); ++u) multiply(rbuf, u);
            }
            rbuf = rbuf + 1 == STAGES ? 0 : rbuf + 1;
            wbuf = wbuf + 1 == STAGES ? 0 : wbuf + 1;
        }
    }
    gemm_wait<0>();
    __syncthreads();

    // The tree's levels inside a thread (h < GPT: group s·GPT + j meets group s·GPT + j + h).
#pragma unroll
    for (int h = 1; h < GPT; h *= 2)
#pragma unroll
        for (int j = 0; j < GPT; j += 2 * h)
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[j][i][n] = acc[j][i][n] + acc[j + h][i][n];

    // The levels between sets (set distance d: set s + d hands its partial tile to set s, for s a
    // multiple of 2d), through shared memory ([GW / 2d][BM][BN] over the staging buffers).
    const int e0 = ty * BN + tx;
#pragma unroll
    for (int d = 1; d < GW; d *= 2) {
        if (s % (2 * d) == d) {
            float* const red = smem + (s / (2 * d)) * BM * BN + e0;
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int n = 0; n < TN; ++n) red[i * TY * BN + n * TX] = acc[0][i][n];
        }
        __syncthreads();
        if (s % (2 * d) == 0) {
            const float* const red = smem + (s / (2 * d)) * BM * BN + e0;
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[0][i][n] = acc[0][i][n] + red[i * TY * BN + n * TX];
        }
        __syncthreads();
    }

    if (s != 0) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const i64 r = m0 + ty + i * TY;
        if (r >= a.rows) continue;
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            const i64 o = n0 + tx + n * TX;
            if (o >= a.out) continue;
            float v = acc[0][i][n];
            if (a.bias != 0) v = v + a.b[o];
            if (a.act >= 0) v = dcc_act1(v, a.act, a.alpha);
            a.y[r * a.ldy + o] = v;
        }
    }
}

// Both operands 16-byte aligned row by row (address and leading dimension multiples of 4 floats,
// K a multiple of 4): the 16-byte copies; otherwise the 4-byte ones.
template <int BM, int BN, int TM, int TN, int GW, int ST, int CH, int NT>
__device__ __forceinline__ void gemm_linear(const GemmArgs a) {
    static_assert((BM / TM) * (BN / TN) * GW == NT, "the entry's thread count");
    if ((unsigned long long)a.x % 16 == 0 && a.ldx % 4 == 0 && (unsigned long long)a.w % 16 == 0 && a.k % 4 == 0)
        gemm_linear_tile<BM, BN, TM, TN, GW, ST, CH, true>(a);
    else
        gemm_linear_tile<BM, BN, TM, TN, GW, ST, CH, false>(a);
}

// ---------------------------------------------------------------------------------------------
// 3xTF32 on tensor cores (gemm_tf32x3; kernels/src/gemm/tf32.rs, GemmPath::InvariantTf32x3). Not
// bit-equal to its host twin (an mma's internal accumulation is not specified), but
// batch-invariant: the operations of one output depend on K alone.
//   * every operand value v is split into big = tf32(v) and small = tf32(v − big), where tf32(u)
//     rounds to 10 fraction bits, to nearest with ties away from zero: the bits (u + 0x1000) &
//     0xffffe000 (v − big is exact in fp32);
//   * k is padded with zeros to a multiple of 8; k step s (k in [8s, 8s + 8)) belongs to warp
//     s mod 4; warp w accumulates, from 0, over its steps in ascending order, three
//     mma.m16n8k8 per step in this order: small(x)·big(w), big(x)·small(w), big(x)·big(w)
//     (small·small is left out); a step wholly past K is skipped;
//   * the warps' partials are added as (p0 + p1) + (p2 + p3), then + b, then act.
// An mma computes each output element from its own row of x, its own column of Wᵀ and its own
// accumulator, so neither the other rows of the tile nor the tile's position changes its bits.
// A tile variant with the same bits per output (larger warp and CTA tiles, every warp running
// the four chains): gemm_tiles.cuh (kernels/src/gemm/tf32_tiles.rs); this kernel is its spec.
// CTA: T3_BM rows × T3_BN outputs, T3_KW warps; k tiles of T3_BK staged through a ring of T3_ST
// buffers ([T3_BM + T3_BN][T3_BK + 4] floats each, cp.async as above), then the partials
// through shared memory ([T3_KW][T3_BM][T3_BN] over the staging buffers).
#define T3_BM 16
#define T3_BN 32
#define T3_BK 64
#define T3_KW 4
#define T3_ST 3
#define T3_NT (32 * T3_KW)
#define T3_LDS (T3_BK + 4)

__device__ __forceinline__ unsigned t3_tf32(float v) { return (__float_as_uint(v) + 0x1000u) & 0xffffe000u; }

// d += a · b over one k step of 8 (a: 16 × 8 row-major fragment, b: 8 × 8 column-major).
__device__ __forceinline__ void t3_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <bool VEC>
__device__ __forceinline__ void gemm_tf32x3_tile(const GemmArgs a) {
    constexpr int Q = T3_BK / 4;
    constexpr int XV = T3_BM * Q;
    constexpr int WV = T3_BN * Q;
    constexpr int XPT = (XV + T3_NT - 1) / T3_NT;
    constexpr int WPT = (WV + T3_NT - 1) / T3_NT;
    constexpr int STAGE = (T3_BM + T3_BN) * T3_LDS;
    constexpr int RED = T3_KW * T3_BM * T3_BN;
    constexpr int SMEM = T3_ST * STAGE > RED ? T3_ST * STAGE : RED;
    constexpr int STEPS = T3_BK / 8;
    static_assert(T3_BM == 16 && T3_BN % 8 == 0 && STEPS % T3_KW == 0, "one m16 row tile, whole k steps");

    extern __shared__ float4 gemm_smem[];
    float* const smem = reinterpret_cast<float*>(gemm_smem);
    if (blockDim.x != T3_NT || blockDim.y != 1 || blockDim.z != 1) __trap();
    if (gemm_dynamic_smem() < SMEM * sizeof(float) || a.k > GEMM_MAX_K) __trap();
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int g = (tid % 32) / 4;
    const int t = tid % 4;
    const i64 m0 = (i64)blockIdx.y * T3_BM;
    const i64 n0 = (i64)blockIdx.x * T3_BN;
    const i64 K = a.k;

    GemmSlot xsl[XPT];
    GemmSlot wsl[WPT];
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
        const int q = tid + i * T3_NT;
        const i64 r = m0 + q / Q;
        const bool in = q < XV && r < a.rows;
        xsl[i].src = in ? a.x + r * a.ldx + 4 * (q % Q) : a.x;
        xsl[i].lim = in ? (int)K - 4 * (q % Q) : 0;
        xsl[i].dst = (q / Q) * T3_LDS + 4 * (q % Q);
    }
#pragma unroll
    for (int i = 0; i < WPT; ++i) {
        const int q = tid + i * T3_NT;
        const i64 r = n0 + q / Q;
        const bool in = q < WV && r < a.out;
        wsl[i].src = in ? a.w + r * K + 4 * (q % Q) : a.w;
        wsl[i].lim = in ? (int)K - 4 * (q % Q) : 0;
        wsl[i].dst = T3_BM * T3_LDS + (q / Q) * T3_LDS + 4 * (q % Q);
    }

    float acc[T3_BN / 8][4];
#pragma unroll
    for (int n = 0; n < T3_BN / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[n][i] = 0.0f;

    const i64 tiles = (K + T3_BK - 1) / T3_BK;
    const i64 steps = (K + 7) / 8;
    auto issue = [&](i64 c, int buf) {
        if (c < tiles) {
            const int kb = (int)c * T3_BK;
            float* const st = smem + buf * STAGE;
#pragma unroll
            for (int i = 0; i < XPT; ++i)
                if (tid + i * T3_NT < XV) gemm_stage4<VEC>(st, xsl[i], kb);
#pragma unroll
            for (int i = 0; i < WPT; ++i)
                if (tid + i * T3_NT < WV) gemm_stage4<VEC>(st, wsl[i], kb);
        }
        gemm_commit();
    };
    // This warp's k steps of tile c (in buffer buf): local steps warp, warp + T3_KW, ...
    auto multiply = [&](int buf, i64 c) {
        const float* const xs = smem + buf * STAGE;
        const float* const ws = xs + T3_BM * T3_LDS;
#pragma unroll
        for (int j = warp; j < STEPS; j += T3_KW) {
            if (c * STEPS + j >= steps) break;
            const int k0 = 8 * j;
            const float av[4] = {xs[g * T3_LDS + k0 + t], xs[(g + 8) * T3_LDS + k0 + t],
                                 xs[g * T3_LDS + k0 + t + 4], xs[(g + 8) * T3_LDS + k0 + t + 4]};
            unsigned abig[4];
            unsigned asml[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                abig[i] = t3_tf32(av[i]);
                asml[i] = t3_tf32(av[i] - __uint_as_float(abig[i]));
            }
#pragma unroll
            for (int n = 0; n < T3_BN / 8; ++n) {
                const float w0 = ws[(8 * n + g) * T3_LDS + k0 + t];
                const float w1 = ws[(8 * n + g) * T3_LDS + k0 + t + 4];
                const unsigned b0 = t3_tf32(w0);
                const unsigned b1 = t3_tf32(w1);
                const unsigned s0 = t3_tf32(w0 - __uint_as_float(b0));
                const unsigned s1 = t3_tf32(w1 - __uint_as_float(b1));
                t3_mma(acc[n], asml, b0, b1);
                t3_mma(acc[n], abig, s0, s1);
                t3_mma(acc[n], abig, b0, b1);
            }
        }
    };

    {
#pragma unroll
        for (int c = 0; c < T3_ST - 1; ++c) issue(c, c);
        int rbuf = 0;
        int wbuf = T3_ST - 1;
        for (i64 c = 0; c < tiles; ++c) {
            gemm_wait<T3_ST - 2>();
            __syncthreads();
            issue(c + T3_ST - 1, wbuf);
            multiply(rbuf, c);
            rbuf = rbuf + 1 == T3_ST ? 0 : rbuf + 1;
            wbuf = wbuf + 1 == T3_ST ? 0 : wbuf + 1;
        }
    }
    gemm_wait<0>();
    __syncthreads();

    // Accumulator element i of n-tile n: row g + 8·(i / 2), output 8n + 2t + (i mod 2).
    float* const red = smem + warp * T3_BM * T3_BN;
#pragma unroll
    for (int n = 0; n < T3_BN / 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[(g + 8 * (i / 2)) * T3_BN + 8 * n + 2 * t + (i % 2)] = acc[n][i];
    __syncthreads();
    for (int e = tid; e < T3_BM * T3_BN; e += T3_NT) {
        const i64 r = m0 + e / T3_BN;
        const i64 o = n0 + e % T3_BN;
        if (r >= a.rows || o >= a.out) continue;
        constexpr int P = T3_BM * T3_BN;
        float v = (smem[e] + smem[P + e]) + (smem[2 * P + e] + smem[3 * P + e]);
        if (a.bias != 0) v = v + a.b[o];
        if (a.act >= 0) v = dcc_act1(v, a.act, a.alpha);
        a.y[r * a.ldy + o] = v;
    }
}

// The 16-byte staging when both operands allow it (as gemm_linear), else the 4-byte one.
__device__ __forceinline__ void gemm_tf32x3(const GemmArgs a) {
    static_assert(T3_KW == 4, "the partials' tree is written for four warps");
    if ((unsigned long long)a.x % 16 == 0 && a.ldx % 4 == 0 && (unsigned long long)a.w % 16 == 0 && a.k % 4 == 0)
        gemm_tf32x3_tile<true>(a);
    else
        gemm_tf32x3_tile<false>(a);
}

// No entry here: each variant is its own NVRTC module, this file followed by one global entry
// gemm_linear_<name> (the arguments above, __launch_bounds__(NT, MINB)) whose body is
// gemm_linear<BM, BN, TM, TN, GW, ST, CH, NT>(GemmArgs{...}): tile BM × BN, thread tile TM × TN,
// GW thread sets, ST staging buffers of CH k tiles, NT threads, compiled for MINB CTAs per SM.
// kernels/src/gemm.rs writes that entry from its `variant!` table, so that a process compiles
// only the variants it launches; kernels/src/gemm/tf32.rs writes gemm_linear_tf32x3's, whose body
// is gemm_tf32x3(GemmArgs{...}) (T3_NT threads).
