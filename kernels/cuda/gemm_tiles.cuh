// Tile variants of the 3xTF32 linear (kernels/src/gemm/tf32_tiles.rs): THE SAME BITS as
// gemm_linear_tf32x3 (gemm.cu) for every shape, with more outputs per warp and per CTA, deeper
// staging, and (the cluster variants) the four chains of one output tile on four CTAs.
// Prepended with common.cuh and gemm.cu (GemmArgs, GemmSlot, gemm_stage4, the cp.async helpers,
// t3_tf32, t3_mma); followed by one variant's entry.
//
// Why the bits are the same. gemm_tf32x3's spec fixes, per output element y[r, o]:
//   (1) the operand values of every mma: for k step s (k in [8s, 8s + 8)) the fragments hold
//       x[r, 8s + p] and w[o, 8s + p] at mma k position p (0 for k at or past K), split by
//       t3_tf32 into big and small;
//   (2) the chain: step s goes to accumulator chain s mod 4, which starts at 0.0f and takes its
//       steps in ascending s, three mma per step in the order small(x)·big(w), big(x)·small(w),
//       big(x)·big(w); a step wholly past K is skipped;
//   (3) the end: (p0 + p1) + (p2 + p3), then + b[o] (with a bias), then dcc_act1.
// An mma computes each of its outputs from that output's row of A, column of B and accumulator
// alone (the batch-invariance property gemm_linear_tf32x3 already rests on: its tests shift a
// row to every position of an m16 tile), so the bits of y[r, o] are a function of (1)–(3) only.
// The kernel below keeps (1)–(3) and changes only who computes what:
//   * a warp owns MT × NTL mma tiles (16·MT rows × 8·NTL outputs), fragments loaded exactly as
//     gemm_tf32x3 loads them (row g / g + 8, k positions t / t + 4, output g of each n8 tile),
//     staged zeros past K and past the operand's rows as there;
//   * the chains: CG = 4, CL = 1: warp group cg (of WM × WN warps over the CTA tile) runs chain
//     cg, as gemm_tf32x3's warp cg does; CG = 1, CL = 1: every warp runs all four chains in four
//     accumulator sets, tile-local step j into set j mod 4 (a tile is BK = a multiple of 32
//     k, so j mod 4 = s mod 4); CG = 1, CL = 4: the four CTAs of a thread-block cluster
//     (__cluster_dims__(1, 1, 4), sm_90) share one output tile, CTA rank c stages and runs only
//     the steps of chain c (k in [32i + 8c, 32i + 8c + 8) for every i);
//   * each chain still takes its steps in ascending order (tiles ascending, steps ascending
//     within a tile), three mma per step in the spec's order, into its own accumulator; a step
//     at or past ceil(K / 8) is skipped (break: steps only grow);
//   * the end: chain 0's holder gathers p1, p2, p3 (registers, shared memory, or the cluster's
//     distributed shared memory) and computes (p0 + p1) + (p2 + p3), + b, act: the same fp32
//     operations on the same values (--fmad=false, no reassociation).
// So every output element sees the identical sequence of mma instructions on identical operand
// values into its accumulators, and the identical final combination.
//
// Launch: grid (ceil(out / BN), ceil(rows / BM), CL), block (32 · WM · WN · CG, 1, 1),
// max(ST · (BM + BN) · (BK / CL + 4), R · BM · BN) floats of dynamic shared memory (R = 3 for
// CG = 4, 1 for CL = 4, 0 for CG = CL = 1; kernels/src/gemm/tf32_tiles.rs shared_bytes);
// another shape, less shared memory, another cluster or K above GEMM_MAX_K traps.

// The cluster attribute of a CL = 4 entry (sm_90 and later; on an earlier device the entry
// traps: its cluster is one CTA).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define T3V_CLUSTER4
#else
#define T3V_CLUSTER4 __cluster_dims__(1, 1, 4)
#endif

// This CTA's rank in its cluster and the cluster's size (1 and 1 before sm_90).
__device__ __forceinline__ unsigned t3v_cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
#else
    return 0;
#endif
}
__device__ __forceinline__ unsigned t3v_cluster_size() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
    return n;
#else
    return 1;
#endif
}
// Every thread of the cluster arrives; the shared-memory writes before it are visible to every
// CTA of the cluster after it (release / acquire).
__device__ __forceinline__ void t3v_cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
#else
    __trap();
#endif
}
// The float at `p` (this CTA's shared memory) in the shared memory of cluster CTA `rank`.
__device__ __forceinline__ float t3v_ld_cluster(const float* p, unsigned rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    unsigned r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r) : "memory");
    return v;
#else
    __trap();
    return 0.0f;
#endif
}

template <int MT, int NTL, int WM, int WN, int CG, int CL, int BK, int ST, bool VEC>
__device__ __forceinline__ void gemm_t3v_tile(const GemmArgs a) {
    constexpr int BM = 16 * MT * WM;      // rows per CTA
    constexpr int BN = 8 * NTL * WN;      // outputs per CTA
    constexpr int WMN = WM * WN;          // warps per chain group
    constexpr int NT = 32 * WMN * CG;     // threads per CTA
    constexpr int SK = BK / CL;           // staged k per row and tile (this CTA's chains)
    constexpr int LDS = SK + 4;           // staged row stride: ≡ 4, 12, 20 or 28 mod 32, so a
                                          // fragment load (row g, column t) is conflict-free
    constexpr int SJ = SK / 8;            // staged steps per tile
    constexpr int JW = SJ / CG;           // of them, one warp's
    constexpr int CPW = 4 / (CG * CL);    // chains per warp
    constexpr int Q = SK / 4;             // 4-float slots per staged row
    constexpr int XV = BM * Q;
    constexpr int WV = BN * Q;
    constexpr int XPT = (XV + NT - 1) / NT;
    constexpr int WPT = (WV + NT - 1) / NT;
    constexpr int STAGE = (BM + BN) * LDS;
    constexpr int P = BM * BN;            // one partial tile
    constexpr int RED = (CL == 4 ? 1 : CG - 1) * P;
    constexpr int SMEM = ST * STAGE > RED ? ST * STAGE : RED;
    static_assert((CG == 4 && CL == 1) || (CG == 1 && CL == 1) || (CG == 1 && CL == 4),
                  "one chain per warp group, four chains per warp, or one chain per cluster CTA");
    static_assert(BK % 32 == 0 && SK % 8 == 0 && SJ % CG == 0, "whole groups of four k steps per tile");
    static_assert(ST >= 2 && MT >= 1 && NTL >= 1, "at least two staging buffers");

    extern __shared__ float4 gemm_smem[];
    float* const smem = reinterpret_cast<float*>(gemm_smem);
    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1 || gridDim.z != CL) __trap();
    if (gemm_dynamic_smem() < SMEM * sizeof(float) || a.k > GEMM_MAX_K) __trap();
    if (CL != 1 && (t3v_cluster_size() != CL || t3v_cluster_rank() != blockIdx.z)) __trap();
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int cg = warp / WMN;
    const int wmn = warp - cg * WMN;
    const int wm = wmn / WN;
    const int wn = wmn - wm * WN;
    const int g = lane / 4;
    const int t = lane % 4;
    const int rank = CL == 1 ? 0 : (int)blockIdx.z;  // the chain of this CTA (CL = 4)
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;

    // Staged element e of a row (e < SK) holds k = (tile start) + koff(e): every k (CL = 1), or
    // the chain's 8 of every 32 (CL = 4). koff of a slot is a multiple of 4, so its four k are
    // consecutive.
    auto koff = [&](int e) { return CL == 1 ? e : (e / 8) * 32 + 8 * rank + e % 8; };
    GemmSlot xsl[XPT];
    GemmSlot wsl[WPT];
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
        const int q = tid + i * NT;
        const int e = 4 * (q % Q);
        const i64 r = m0 + q / Q;
        const bool in = q < XV && r < a.rows;
        xsl[i].src = in ? a.x + r * a.ldx + koff(e) : a.x;
        xsl[i].lim = in ? (int)K - koff(e) : 0;
        xsl[i].dst = (q / Q) * LDS + e;
    }
#pragma unroll
    for (int i = 0; i < WPT; ++i) {
        const int q = tid + i * NT;
        const int e = 4 * (q % Q);
        const i64 r = n0 + q / Q;
        const bool in = q < WV && r < a.out;
        wsl[i].src = in ? a.w + r * K + koff(e) : a.w;
        wsl[i].lim = in ? (int)K - koff(e) : 0;
        wsl[i].dst = BM * LDS + (q / Q) * LDS + e;
    }

    float acc[CPW][MT][NTL][4];
#pragma unroll
    for (int c = 0; c < CPW; ++c)
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < NTL; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) acc[c][m][n][i] = 0.0f;

    const i64 tiles = (K + BK - 1) / BK;
    const i64 steps = (K + 7) / 8;
    auto issue = [&](i64 c, int buf) {
        if (c < tiles) {
            const int kb = (int)c * BK;
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
    // This warp's steps of tile c (in buffer buf), ascending: staged step j (k at staged offset
    // 8j) is global step c·BK/8 + j (CL = 1) or c·BK/8 + 4j + rank (CL = 4).
    auto multiply = [&](int buf, i64 c) {
        const float* const xs = smem + buf * STAGE + (wm * 16 * MT + g) * LDS + t;
        const float* const ws = smem + buf * STAGE + BM * LDS + (wn * 8 * NTL + g) * LDS + t;
#pragma unroll
        for (int jj = 0; jj < JW; ++jj) {
            const int j = CG == 1 ? jj : cg + CG * jj;
            if (c * (BK / 8) + (CL == 1 ? j : 4 * j + rank) >= steps) break;
            // The step's chain among this warp's: j mod 4 when the warp runs all four chains.
            const int ci = CPW == 4 ? jj % 4 : 0;
            const int k0 = 8 * j;
            unsigned abig[MT][4];
            unsigned asml[MT][4];
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                const float* const xr = xs + 16 * m * LDS + k0;
                const float av[4] = {xr[0], xr[8 * LDS], xr[4], xr[8 * LDS + 4]};
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    abig[m][i] = t3_tf32(av[i]);
                    asml[m][i] = t3_tf32(av[i] - __uint_as_float(abig[m][i]));
                }
            }
#pragma unroll
            for (int n = 0; n < NTL; ++n) {
                const float* const wr = ws + 8 * n * LDS + k0;
                const float w0 = wr[0];
                const float w1 = wr[4];
                const unsigned b0 = t3_tf32(w0);
                const unsigned b1 = t3_tf32(w1);
                const unsigned s0 = t3_tf32(w0 - __uint_as_float(b0));
                const unsigned s1 = t3_tf32(w1 - __uint_as_float(b1));
#pragma unroll
                for (int m = 0; m < MT; ++m) {
                    t3_mma(acc[ci][m][n], asml[m], b0, b1);
                    t3_mma(acc[ci][m][n], abig[m], s0, s1);
                    t3_mma(acc[ci][m][n], abig[m], b0, b1);
                }
            }
        }
    };

    {
#pragma unroll
        for (int c = 0; c < ST - 1; ++c) issue(c, c);
        int rbuf = 0;
        int wbuf = ST - 1;
        for (i64 c = 0; c < tiles; ++c) {
            gemm_wait<ST - 2>();
            // Tile c is in shared memory for every thread, and every thread is done with tile
            // c − 1, whose buffer (wbuf) the next issue refills.
            __syncthreads();
            issue(c + ST - 1, wbuf);
            multiply(rbuf, c);
            rbuf = rbuf + 1 == ST ? 0 : rbuf + 1;
            wbuf = wbuf + 1 == ST ? 0 : wbuf + 1;
        }
    }
    gemm_wait<0>();
    __syncthreads();

    // The partials: element i of mma tile (m, n) of lane (g, t) is row g + 8·(i / 2), output
    // 2t + (i mod 2) of the tile. Exchanged lane-major (conflict-free), [slot][wmn][m][n][i][lane].
    auto at = [&](int m, int n, int i) { return (((wmn * MT + m) * NTL + n) * 4 + i) * 32 + lane; };
    float v[MT][NTL][4];
    if constexpr (CPW == 4) {
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < NTL; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i)
                    v[m][n][i] = (acc[0][m][n][i] + acc[1][m][n][i]) + (acc[2][m][n][i] + acc[3][m][n][i]);
    } else if constexpr (CL == 1) {
        // Warp group cg (chain cg) hands its partial to group 0 through slot cg − 1.
        if (cg != 0) {
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int n = 0; n < NTL; ++n)
#pragma unroll
                    for (int i = 0; i < 4; ++i) smem[(cg - 1) * P + at(m, n, i)] = acc[0][m][n][i];
        }
        __syncthreads();
        if (cg != 0) return;
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < NTL; ++n)
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int e = at(m, n, i);
                    v[m][n][i] = (acc[0][m][n][i] + smem[e]) + (smem[P + e] + smem[2 * P + e]);
                }
    } else {
        // CTA rank c (chain c) leaves its partial in its own shared memory; rank 0 reads ranks
        // 1, 2, 3 there. The second barrier keeps every CTA (and its shared memory) alive until
        // rank 0 has read it.
        if (rank != 0) {
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int n = 0; n < NTL; ++n)
#pragma unroll
                    for (int i = 0; i < 4; ++i) smem[at(m, n, i)] = acc[0][m][n][i];
        }
        t3v_cluster_sync();
        if (rank == 0) {
#pragma unroll
            for (int m = 0; m < MT; ++m)
#pragma unroll
                for (int n = 0; n < NTL; ++n)
#pragma unroll
                    for (int i = 0; i < 4; ++i) {
                        const float* const e = smem + at(m, n, i);
                        const float p1 = t3v_ld_cluster(e, 1);
                        const float p2 = t3v_ld_cluster(e, 2);
                        const float p3 = t3v_ld_cluster(e, 3);
                        v[m][n][i] = (acc[0][m][n][i] + p1) + (p2 + p3);
                    }
        }
        t3v_cluster_sync();
        if (rank != 0) return;
    }

#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NTL; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const i64 r = m0 + wm * 16 * MT + 16 * m + g + 8 * (i / 2);
                const i64 o = n0 + wn * 8 * NTL + 8 * n + 2 * t + (i % 2);
                if (r >= a.rows || o >= a.out) continue;
                float y = v[m][n][i];
                if (a.bias != 0) y = y + a.b[o];
                if (a.act >= 0) y = dcc_act1(y, a.act, a.alpha);
                a.y[r * a.ldy + o] = y;
            }
}

// The 16-byte staging when both operands allow it (as gemm_linear), else the 4-byte one.
template <int MT, int NTL, int WM, int WN, int CG, int CL, int BK, int ST, int NT>
__device__ __forceinline__ void gemm_t3v(const GemmArgs a) {
    static_assert(32 * WM * WN * CG == NT, "the entry's thread count");
    if ((unsigned long long)a.x % 16 == 0 && a.ldx % 4 == 0 && (unsigned long long)a.w % 16 == 0 && a.k % 4 == 0)
        gemm_t3v_tile<MT, NTL, WM, WN, CG, CL, BK, ST, true>(a);
    else
        gemm_t3v_tile<MT, NTL, WM, WN, CG, CL, BK, ST, false>(a);
}

// No entry here: kernels/src/gemm/tf32_tiles.rs writes one per variant, gemm_linear_tf32x3_<name>
// (the arguments of gemm.cu's entries, __launch_bounds__(NT, MINB), T3V_CLUSTER4 when CL = 4),
// whose body is gemm_t3v<MT, NTL, WM, WN, CG, CL, BK, ST, NT>(GemmArgs{...}).
