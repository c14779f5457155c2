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
//   * the halving tree: for h = 8, 4, 2, 1: p_g = p_g + p_{g+h} for every g < h; s = p_0;
//   * s = s + b[o] (with a bias), then s = act(s) (with a fused activation: dcc_act1 of
//     common.cuh, exactly what act_apply computes per element), y = s.
// Nothing in that order depends on the number of rows, the tile shape, the tile's position or the
// grid, so every variant below computes the same bits, and a row's result never depends on which
// other rows share the launch (batch invariance).
//
// Structure: one CTA computes a BM × BN output tile with GW thread sets; set s owns the k-groups
// s, s + GW, s + 2·GW, ... (GEMM_KG / GW of them, one TM × TN register tile each). The tree's
// levels h ≥ GW pair two groups of one set and are summed in registers; the levels h < GW pair
// set s + h with set s and meet in shared memory. (The same tree splits over CTAs: the groups
// ≡ c mod C reduce to one partial per output, and the last log2(C) levels combine the C partials.)
// x and W tiles are staged through shared memory k-contiguous ([BM][68] and [BN][68] floats:
// 16-byte aligned rows, conflict-free float4 reads), in STAGES buffers (2: the next tile is
// stored while the current one is multiplied, one barrier per tile), loaded with float4 when the
// operand's rows are 16-byte aligned (address and leading dimension multiples of 4 floats, K a
// multiple of 4) and with guarded scalar loads otherwise; the next tile is fetched into registers
// while the current one is multiplied. Rows past `rows`, outputs past `out` and k past K read as
// zeros and are never written.
//
// Compiled by NVRTC with --fmad=false: the only fused multiply-adds are the __fmaf_rn below.
// Launch: grid (ceil(out / BN), ceil(rows / BM), 1), block (GW · (BM/TM) · (BN/TN), 1, 1);
// any other block shape traps. Arguments of every entry:
//   (y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out), sizes long long, w packed [out, in];
//   b [out] is read only when bias != 0 (the backends check every pointer argument against their
//   live buffers, so a launch without a bias passes some live address there, never null); act < 0
//   is no activation, else the op code of act_apply (kernels/src/act.rs) with its alpha.
// Prepended with common.cuh (i64, dcc_act1).

#define GEMM_KG 16
#define GEMM_KS 4
#define GEMM_BK (GEMM_KG * GEMM_KS)
// Shared-memory row stride of the staged tiles, in floats (BK + 4: 16-byte aligned rows whose
// float4 reads and writes hit distinct bank groups).
#define GEMM_LDS (GEMM_BK + 4)

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

// One staged row slot of a thread: the row's start (null past the operand's rows) and the k
// offset of its float4 within a tile.
struct GemmSlot {
    const float* row;
    int kq;
};

// Four consecutive k of one row (zeros for a null row and past K). `vec`: the row start and its
// leading dimension are multiples of 4 floats and K is a multiple of 4, so a float4 at k0 < K lies
// inside the row and is 16-byte aligned.
__device__ __forceinline__ float4 gemm_load4(const float* r, i64 K, i64 k0, bool vec) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r == nullptr || k0 >= K) return v;
    r += k0;
    if (vec) return *reinterpret_cast<const float4*>(r);
    v.x = r[0];
    if (k0 + 1 < K) v.y = r[1];
    if (k0 + 2 < K) v.z = r[2];
    if (k0 + 3 < K) v.w = r[3];
    return v;
}

template <int BM, int BN, int TM, int TN, int GW, int STAGES>
__device__ __forceinline__ void gemm_linear_tile(const GemmArgs a) {
    constexpr int TY = BM / TM;                 // threads along rows in a set
    constexpr int TX = BN / TN;                 // threads along outputs in a set
    constexpr int GT = TX * TY;                 // threads per set
    constexpr int NT = GT * GW;                 // threads per CTA
    constexpr int GPT = GEMM_KG / GW;           // k-groups per thread
    constexpr int Q = GEMM_BK / 4;              // float4 slots per staged row
    constexpr int XV = BM * Q;                  // float4 slots of the x tile
    constexpr int WV = BN * Q;                  // float4 slots of the W tile
    constexpr int XPT = (XV + NT - 1) / NT;
    constexpr int WPT = (WV + NT - 1) / NT;
    constexpr int STAGE = (BM + BN) * GEMM_LDS;
    constexpr int RED = (GW / 2) * BM * BN;
    constexpr int SMEM = STAGES * STAGE > RED ? STAGES * STAGE : RED;
    static_assert(BM % TM == 0 && BN % TN == 0, "tile not divisible by the thread tile");
    static_assert(GW >= 1 && GW <= GEMM_KG && GEMM_KG % GW == 0 && (GW & (GW - 1)) == 0,
                  "GW must be a power of two dividing GEMM_KG");
    static_assert(STAGES == 1 || STAGES == 2, "one or two staging buffers");
    static_assert(SMEM * 4 <= 48 * 1024, "static shared memory above 48 KB");

    __shared__ __align__(16) float smem[SMEM];

    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1) __trap();
    const int tid = threadIdx.x;
    const int s = tid / GT;
    const int lt = tid - s * GT;
    const int ty = lt / TX;
    const int tx = lt - ty * TX;
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;
    const bool vx = ((unsigned long long)a.x % 16 == 0) && (a.ldx % 4 == 0) && (K % 4 == 0);
    const bool vw = ((unsigned long long)a.w % 16 == 0) && (K % 4 == 0);

    // This thread's staging slots (slot q: row q / Q of the tile, k offset 4·(q mod Q)).
    GemmSlot xsl[XPT];
    GemmSlot wsl[WPT];
#pragma unroll
    for (int i = 0; i < XPT; ++i) {
        const int q = tid + i * NT;
        const i64 r = m0 + q / Q;
        xsl[i].row = (q < XV && r < a.rows) ? a.x + r * a.ldx : nullptr;
        xsl[i].kq = 4 * (q % Q);
    }
#pragma unroll
    for (int i = 0; i < WPT; ++i) {
        const int q = tid + i * NT;
        const i64 r = n0 + q / Q;
        wsl[i].row = (q < WV && r < a.out) ? a.w + r * K : nullptr;
        wsl[i].kq = 4 * (q % Q);
    }

    float4 xr[XPT];
    float4 wr[WPT];
    float acc[GPT][TM][TN];
#pragma unroll
    for (int j = 0; j < GPT; ++j)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int n = 0; n < TN; ++n) acc[j][i][n] = 0.0f;

    const i64 tiles = (K + GEMM_BK - 1) / GEMM_BK;
    auto fetch = [&](i64 t) {
        const i64 kb = t * GEMM_BK;
#pragma unroll
        for (int i = 0; i < XPT; ++i) xr[i] = gemm_load4(xsl[i].row, K, kb + xsl[i].kq, vx);
#pragma unroll
        for (int i = 0; i < WPT; ++i) wr[i] = gemm_load4(wsl[i].row, K, kb + wsl[i].kq, vw);
    };
    auto store = [&](int buf) {
        float* const xs = smem + buf * STAGE;
        float* const ws = xs + BM * GEMM_LDS;
#pragma unroll
        for (int i = 0; i < XPT; ++i) {
            const int q = tid + i * NT;
            if (q < XV) *reinterpret_cast<float4*>(xs + (q / Q) * GEMM_LDS + 4 * (q % Q)) = xr[i];
        }
#pragma unroll
        for (int i = 0; i < WPT; ++i) {
            const int q = tid + i * NT;
            if (q < WV) *reinterpret_cast<float4*>(ws + (q / Q) * GEMM_LDS + 4 * (q % Q)) = wr[i];
        }
    };
    // This thread's groups over the staged tile in buffer `buf`: group s + j·GW takes its four k
    // in ascending order into each accumulator.
    auto multiply = [&](int buf) {
        const float* const xs = smem + buf * STAGE + ty * GEMM_LDS + 4 * s;
        const float* const ws = smem + buf * STAGE + (BM + tx) * GEMM_LDS + 4 * s;
#pragma unroll
        for (int j = 0; j < GPT; ++j) {
            float4 xv[TM];
            float4 wv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) xv[i] = *reinterpret_cast<const float4*>(xs + i * TY * GEMM_LDS + 4 * j * GW);
#pragma unroll
            for (int n = 0; n < TN; ++n) wv[n] = *reinterpret_cast<const float4*>(ws + n * TX * GEMM_LDS + 4 * j * GW);
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

    if (STAGES == 2) {
        if (tiles > 0) {
            fetch(0);
            store(0);
        }
        __syncthreads();
        for (i64 t = 0; t < tiles; ++t) {
            if (t + 1 < tiles) fetch(t + 1);
            multiply((int)(t & 1));
            // Buffer (t + 1) & 1 was last read in iteration t − 1, before the barrier below it.
            if (t + 1 < tiles) store((int)((t + 1) & 1));
            __syncthreads();
        }
    } else {
        if (tiles > 0) fetch(0);
        for (i64 t = 0; t < tiles; ++t) {
            store(0);
            __syncthreads();
            if (t + 1 < tiles) fetch(t + 1);
            multiply(0);
            __syncthreads();
        }
    }

    // The tree's levels inside a thread (h ≥ GW: group s + j·GW meets group s + (j + h/GW)·GW).
#pragma unroll
    for (int h = GEMM_KG / 2; h >= GW; h /= 2)
#pragma unroll
        for (int j = 0; j < h / GW; ++j)
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int n = 0; n < TN; ++n) acc[j][i][n] = acc[j][i][n] + acc[j + h / GW][i][n];

    // The levels between sets (h < GW: set s + h hands its partial tile to set s), through shared
    // memory ([h][BM][BN] over the staging buffers: every thread is past the loop's last barrier).
    const int e0 = ty * BN + tx;
#pragma unroll
    for (int h = GW / 2; h >= 1; h /= 2) {
        if (s >= h && s < 2 * h) {
            float* const red = smem + (s - h) * BM * BN + e0;
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int n = 0; n < TN; ++n) red[i * TY * BN + n * TX] = acc[0][i][n];
        }
        __syncthreads();
        if (s < h) {
            const float* const red = smem + s * BM * BN + e0;
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

// The variants (tile BM × BN, thread tile TM × TN, GW thread sets, STAGES staging buffers), one
// entry each, spelled out so that every entry's name appears in the source: kernels/src/gemm.rs
// `VARIANTS` lists the same table, and a test checks every entry here against it.

#define GEMM_ENTRY(NAME, NT, BM, BN, TM, TN, GW, ST)                                                   \
    extern "C" __global__ void __launch_bounds__(NT) NAME(float* y, i64 ldy, const float* x, i64 ldx, \
        const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out) { \
        gemm_linear_tile<BM, BN, TM, TN, GW, ST>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out}); \
    }

GEMM_ENTRY(gemm_linear_16x64, 512, 16, 64, 4, 8, 16, 2)
GEMM_ENTRY(gemm_linear_16x32, 512, 16, 32, 4, 4, 16, 2)
GEMM_ENTRY(gemm_linear_16x16, 512, 16, 16, 4, 2, 16, 2)
GEMM_ENTRY(gemm_linear_8x32, 512, 8, 32, 2, 4, 16, 2)
GEMM_ENTRY(gemm_linear_1x128, 512, 1, 128, 1, 4, 16, 1)
GEMM_ENTRY(gemm_linear_32x32, 512, 32, 32, 4, 4, 8, 2)
GEMM_ENTRY(gemm_linear_32x64, 512, 32, 64, 4, 8, 8, 1)
