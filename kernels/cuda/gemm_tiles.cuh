// The 3xTF32 tile variant of the linear (kernels/src/gemm/tf32_tiles.rs): THE SAME BITS as
// gemm_linear_tf32x3 (gemm.cu) for every shape, with more outputs per warp and per CTA and every
// warp running the four chains in registers.
// Prepended with common.cuh and gemm.cu (GemmArgs, GemmSlot, gemm_stage4, the cp.async helpers,
// t3_tf32, t3_mma); followed by the variant's entry.
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
//   * a warp owns MT × NTL mma tiles (16·MT rows × 8·NTL outputs) of a CTA tile of WM × WN
//     warps, fragments loaded exactly as gemm_tf32x3 loads them (row g / g + 8, k positions
//     t / t + 4, output g of each n8 tile), staged zeros past K and past the operand's rows as
//     there;
//   * the chains: every warp runs all four in four accumulator sets, tile-local step j into set
//     j mod 4 (a tile is BK = a multiple of 32 k, so j mod 4 = s mod 4), each taking its steps
//     in ascending order (tiles ascending, steps ascending within a tile), three mma per step in
//     the spec's order; a step at or past ceil(K / 8) is skipped (break: steps only grow);
//   * the end: each thread computes (p0 + p1) + (p2 + p3) from its own four sets, + b, act: the
//     same fp32 operations on the same values (--fmad=false, no reassociation).
// So every output element sees the identical sequence of mma instructions on identical operand
// values into its accumulators, and the identical final combination.
//
// Launch: grid (ceil(out / BN), ceil(rows / BM), 1), block (32 · WM · WN, 1, 1),
// ST · (BM + BN) · (BK + 4) floats of dynamic shared memory (kernels/src/gemm/tf32_tiles.rs
// shared_bytes); another shape, less shared memory or K above GEMM_MAX_K traps.

template <int MT, int NTL, int WM, int WN, int BK, int ST, bool VEC>
__device__ __forceinline__ void gemm_t3v_tile(const GemmArgs a) {
    constexpr int BM = 16 * MT * WM;      // rows per CTA
    constexpr int BN = 8 * NTL * WN;      // outputs per CTA
    constexpr int NT = 32 * WM * WN;      // threads per CTA
    constexpr int LDS = BK + 4;           // staged row stride: ≡ 4, 12, 20 or 28 mod 32, so a
                                          // fragment load (row g, column t) is conflict-free
    constexpr int SJ = BK / 8;            // steps per tile
    constexpr int Q = BK / 4;             // 4-float slots per staged row
    constexpr int XV = BM * Q;
    constexpr int WV = BN * Q;
    constexpr int XPT = (XV + NT - 1) / NT;
    constexpr int WPT = (WV + NT - 1) / NT;
    constexpr int STAGE = (BM + BN) * LDS;
    constexpr int SMEM = ST * STAGE;
    static_assert(BK % 32 == 0, "whole groups of four k steps per tile");
    static_assert(ST >= 2 && MT >= 1 && NTL >= 1, "at least two staging buffers");

    extern __shared__ float4 gemm_smem[];
    float* const smem = reinterpret_cast<float*>(gemm_smem);
    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1 || gridDim.z != 1) __trap();
    if (gemm_dynamic_smem() < SMEM * sizeof(float) || a.k > GEMM_MAX_K) __trap();
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int wm = warp / WN;
    const int wn = warp - wm * WN;
    const int g = lane / 4;
    const int t = lane % 4;
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;

    // Staged element e of a row holds k = (tile start) + e.
    GemmSlot xsl[XPT];
    GemmSlot wsl[WPT];
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
        const int q = tid + i * NT;
        const int e = 4 * (q % Q);
        const i64 r = m0 + q / Q;
        const bool in = q < XV && r < a.rows;
        xsl[i].src = in ? a.x + r * a.ldx + e : a.x;
        xsl[i].lim = in ? (int)K - e : 0;
        xsl[i].dst = (q / Q) * LDS + e;
    }
#pragma unroll
    for (int i = 0; i < WPT; ++i) {
        const int q = tid + i * NT;
        const int e = 4 * (q % Q);
        const i64 r = n0 + q / Q;
        const bool in = q < WV && r < a.out;
        wsl[i].src = in ? a.w + r * K + e : a.w;
        wsl[i].lim = in ? (int)K - e : 0;
        wsl[i].dst = BM * LDS + (q / Q) * LDS + e;
    }

    float acc[4][MT][NTL][4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
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
    // The steps of tile c (in buffer buf), ascending: staged step j (k at staged offset 8j) is
    // global step c·BK/8 + j.
    auto multiply = [&](int buf, i64 c) {
        const float* const xs = smem + buf * STAGE + (wm * 16 * MT + g) * LDS + t;
        const float* const ws = smem + buf * STAGE + BM * LDS + (wn * 8 * NTL + g) * LDS + t;
#pragma unroll
        for (int j = 0; j < SJ; ++j) {
            if (c * (BK / 8) + j >= steps) break;
            const int ci = j % 4;  // the step's chain
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

    // The end: element i of mma tile (m, n) of lane (g, t) is row g + 8·(i / 2), output
    // 2t + (i mod 2) of the tile.
    float v[MT][NTL][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NTL; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i)
                v[m][n][i] = (acc[0][m][n][i] + acc[1][m][n][i]) + (acc[2][m][n][i] + acc[3][m][n][i]);

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
template <int MT, int NTL, int WM, int WN, int BK, int ST, int NT>
__device__ __forceinline__ void gemm_t3v(const GemmArgs a) {
    static_assert(32 * WM * WN == NT, "the entry's thread count");
    if ((unsigned long long)a.x % 16 == 0 && a.ldx % 4 == 0 && (unsigned long long)a.w % 16 == 0 && a.k % 4 == 0)
        gemm_t3v_tile<MT, NTL, WM, WN, BK, ST, true>(a);
    else
        gemm_t3v_tile<MT, NTL, WM, WN, BK, ST, false>(a);
}

// No entry here: kernels/src/gemm/tf32_tiles.rs writes the variant's, gemm_linear_tf32x3_<name>
// (the arguments of gemm.cu's entries, __launch_bounds__(NT, MINB)), whose body is
// gemm_t3v<MT, NTL, WM, WN, BK, ST, NT>(GemmArgs{...}).

// ---------------------------------------------------------------------------------------------
// The chains dealt to warps (gemm_t3w, the large-row variants of kernels/src/gemm/tf32_tiles.rs):
// THE SAME BITS again, for batched row counts. gemm_t3v runs the four chains in every warp, so a
// warp's accumulators are four times its output tile, and at 128 of them a thread that tile is
// 32 × 32: a warp splits 16 operand values for 24 mma, and the split's integer work, not the
// tensor cores, bounds it. Here the CG chain groups of a CTA (CG = 4: one chain a warp; CG = 2:
// two) cover the same output tile, so the same 128 accumulators hold a 64 × 64 warp tile
// (CG = 4): 32 values split for 96 mma. Per output element the spec's (1)–(3) again:
//   * (1): fragments loaded exactly as gemm_tf32x3 loads them, from the same staging layout
//     (zeros past K and past the operand's rows);
//   * (2): warp group cgi runs the chains CPW·cgi .. CPW·cgi + CPW − 1 (CPW = 4 / CG), local
//     step j of a tile (BK a multiple of 32, so j mod 4 = s mod 4) in accumulator set
//     j mod 4 − CPW·cgi, steps ascending (tiles ascending, steps ascending within a tile), three
//     mma per step in the spec's order; a step at or past ceil(K / 8) is skipped;
//   * (3): after the last tile each warp stores its partial, p_c (CG = 4) or p_2cgi + p_2cgi+1
//     (CG = 2: (p0 + p1) or (p2 + p3), the spec's first additions), into shared memory, and
//     every thread then computes outputs of the CTA tile as (p0 + p1) + (p2 + p3) (CG = 4) or
//     (p0 + p1) + (p2 + p3) from the two stored sums (CG = 2), + b, act: the same fp32
//     operations on the same values.
// Staging: a thread's slots are one k offset e = 4·(tid mod BK/4) of rows tid / (BK/4) + i·RS
// (RS = NT / (BK/4)), so it keeps one source pointer per operand instead of one per slot.
// Launch: grid (ceil(out / BN), ceil(rows / BM), 1), block (32 · WM · WN · CG, 1, 1),
// max(ST · (BM + BN) · (BK + 4), CG · BM · (BN + 8)) floats of dynamic shared memory
// (kernels/src/gemm/tf32_tiles.rs shared_bytes); another shape, less shared memory or K above
// GEMM_MAX_K traps.

template <int MT, int NTL, int WM, int WN, int CG, int BK, int ST, bool VEC>
__device__ __forceinline__ void gemm_t3w_tile(const GemmArgs a) {
    constexpr int BM = 16 * MT * WM;      // rows per CTA
    constexpr int BN = 8 * NTL * WN;      // outputs per CTA
    constexpr int NT = 32 * WM * WN * CG; // threads per CTA
    constexpr int CPW = 4 / CG;           // chains per warp
    constexpr int LDS = BK + 4;           // staged row stride (≡ 4 mod 32 for BK = 64: conflict-free fragments)
    constexpr int SJ = BK / 8;            // steps per tile
    constexpr int Q = BK / 4;             // 4-float slots per staged row
    constexpr int RS = NT / Q;            // staged rows between a thread's slots
    constexpr int XPT = BM / RS;
    constexpr int WPT = BN / RS;
    constexpr int STAGE = (BM + BN) * LDS;
    constexpr int RLD = BN + 8;           // partial tile row stride: 64-bit stores conflict-free
    constexpr int RED = CG * BM * RLD;
    constexpr int SMEM = ST * STAGE > RED ? ST * STAGE : RED;
    static_assert(CG == 2 || CG == 4, "two or four chain groups");
    static_assert(BK % 32 == 0 && NT % Q == 0 && BM % RS == 0 && BN % RS == 0, "whole slots");
    static_assert(ST >= 2 && MT >= 1 && NTL >= 1, "at least two staging buffers");

    extern __shared__ float4 gemm_smem[];
    float* const smem = reinterpret_cast<float*>(gemm_smem);
    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1 || gridDim.z != 1) __trap();
    if (gemm_dynamic_smem() < SMEM * sizeof(float) || a.k > GEMM_MAX_K) __trap();
    const int tid = threadIdx.x;
    const int lane = tid % 32;
    const int warp = tid / 32;
    const int cgi = warp / (WM * WN);
    const int pos = warp - cgi * (WM * WN);
    const int wm = pos / WN;
    const int wn = pos - wm * WN;
    const int g = lane / 4;
    const int t = lane % 4;
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;

    // Staged element e of a row holds k = (tile start) + e; this thread's slots: k offset se of
    // staged rows sr + i·RS, read from the operand's row m0 + sr + i·RS (n0 + ... for w) when
    // that row exists (xleft, wleft: the operand's rows from the first slot's on).
    const int se = 4 * (tid % Q);
    const int sr = tid / Q;
    const i64 xleft = a.rows - (m0 + sr);
    const i64 wleft = a.out - (n0 + sr);
    const float* const xsrc = xleft > 0 ? a.x + (m0 + sr) * a.ldx + se : a.x;
    const float* const wsrc = wleft > 0 ? a.w + (n0 + sr) * K + se : a.w;
    const i64 xstep = RS * a.ldx;
    const i64 wstep = RS * K;
    const int lim = (int)K - se;

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
            float* const st = smem + buf * STAGE + sr * LDS + se;
#pragma unroll
            for (int i = 0; i < XPT; ++i) {
                const bool in = (i64)i * RS < xleft;
                gemm_stage4<VEC>(st + i * RS * LDS, GemmSlot{in ? xsrc + i * xstep : a.x, in ? lim : 0, 0}, kb);
            }
#pragma unroll
            for (int i = 0; i < WPT; ++i) {
                const bool in = (i64)i * RS < wleft;
                gemm_stage4<VEC>(st + (BM + i * RS) * LDS, GemmSlot{in ? wsrc + i * wstep : a.w, in ? lim : 0, 0},
                                 kb);
            }
        }
        gemm_commit();
    };
    // One step into accumulator set cc: the fragments at xs / ws (row g, k position t of the
    // step's first m16 / n8 tile), split once, then MT × NTL × 3 mma.
    auto step = [&](const float* xs, const float* ws, int cc) {
        unsigned abig[MT][4];
        unsigned asml[MT][4];
#pragma unroll
        for (int m = 0; m < MT; ++m) {
            const float* const xr = xs + 16 * m * LDS;
            const float av[4] = {xr[0], xr[8 * LDS], xr[4], xr[8 * LDS + 4]};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                abig[m][i] = t3_tf32(av[i]);
                asml[m][i] = t3_tf32(av[i] - __uint_as_float(abig[m][i]));
            }
        }
#pragma unroll
        for (int n = 0; n < NTL; ++n) {
            const float* const wr = ws + 8 * n * LDS;
            const float w0 = wr[0];
            const float w1 = wr[4];
            const unsigned b0 = t3_tf32(w0);
            const unsigned b1 = t3_tf32(w1);
            const unsigned s0 = t3_tf32(w0 - __uint_as_float(b0));
            const unsigned s1 = t3_tf32(w1 - __uint_as_float(b1));
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                t3_mma(acc[cc][m][n], asml[m], b0, b1);
                t3_mma(acc[cc][m][n], abig[m], s0, s1);
                t3_mma(acc[cc][m][n], abig[m], b0, b1);
            }
        }
    };
    // This warp's steps of tile c (in buffer buf), ascending: local step j = 4·jj + CPW·cgi + cc
    // (global step c·BK/8 + j, chain CPW·cgi + cc) at staged offset 8j.
    auto multiply = [&](int buf, i64 c) {
        const float* const xs = smem + buf * STAGE + (wm * 16 * MT + g) * LDS + 8 * CPW * cgi + t;
        const float* const ws = smem + buf * STAGE + (BM + wn * 8 * NTL + g) * LDS + 8 * CPW * cgi + t;
        if ((c + 1) * SJ <= steps) {
#pragma unroll
            for (int jj = 0; jj < SJ / 4; ++jj)
#pragma unroll
                for (int cc = 0; cc < CPW; ++cc) step(xs + 8 * (4 * jj + cc), ws + 8 * (4 * jj + cc), cc);
        } else {
            // The last tile, past ceil(K / 8): its steps below it only (a step's j grows).
            const int nj = (int)(steps - c * SJ);
#pragma unroll
            for (int jj = 0; jj < SJ / 4; ++jj)
#pragma unroll
                for (int cc = 0; cc < CPW; ++cc) {
                    if (4 * jj + CPW * cgi + cc >= nj) return;
                    step(xs + 8 * (4 * jj + cc), ws + 8 * (4 * jj + cc), cc);
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

    // The partials, [CG][BM][RLD] over the staging buffers: element i of mma tile (m, n) of lane
    // (g, t) is row g + 8·(i / 2), output 2t + (i mod 2) of the tile.
    float* const red = smem + cgi * BM * RLD;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NTL; ++n) {
            float p[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if constexpr (CPW == 1)
                    p[i] = acc[0][m][n][i];
                else
                    p[i] = acc[0][m][n][i] + acc[1][m][n][i];
            }
            float* const pr = red + (wm * 16 * MT + 16 * m + g) * RLD + wn * 8 * NTL + 8 * n + 2 * t;
            *reinterpret_cast<float2*>(pr) = make_float2(p[0], p[1]);
            *reinterpret_cast<float2*>(pr + 8 * RLD) = make_float2(p[2], p[3]);
        }
    __syncthreads();
    for (int e = tid; e < BM * BN; e += NT) {
        const int r = e / BN;
        const int o = e - r * BN;
        const i64 gr = m0 + r;
        const i64 go = n0 + o;
        if (gr >= a.rows || go >= a.out) continue;
        const float* const p = smem + r * RLD + o;
        float y;
        if constexpr (CG == 4)
            y = (p[0] + p[BM * RLD]) + (p[2 * BM * RLD] + p[3 * BM * RLD]);
        else
            y = p[0] + p[BM * RLD];
        if (a.bias != 0) y = y + a.b[go];
        if (a.act >= 0) y = dcc_act1(y, a.act, a.alpha);
        a.y[gr * a.ldy + go] = y;
    }
}

// The 16-byte staging when both operands allow it (as gemm_linear), else the 4-byte one.
template <int MT, int NTL, int WM, int WN, int CG, int BK, int ST, int NT>
__device__ __forceinline__ void gemm_t3w(const GemmArgs a) {
    static_assert(32 * WM * WN * CG == NT, "the entry's thread count");
    if ((unsigned long long)a.x % 16 == 0 && a.ldx % 4 == 0 && (unsigned long long)a.w % 16 == 0 && a.k % 4 == 0)
        gemm_t3w_tile<MT, NTL, WM, WN, CG, BK, ST, true>(a);
    else
        gemm_t3w_tile<MT, NTL, WM, WN, CG, BK, ST, false>(a);
}

// No entry here either: tf32_tiles.rs writes gemm_linear_tf32x3_<name> with the body
// gemm_t3w<MT, NTL, WM, WN, CG, BK, ST, NT>(GemmArgs{...}).
