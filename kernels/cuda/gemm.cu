// Deterministic, batch-invariant fp32 linear: y[rows, out] = x[rows, in] · Wᵀ + b (an "NT" GEMM:
// rows of x and rows of W are both contiguous along k). Host twin: kernels/src/gemm.rs
// (`linear`), BIT-IDENTICAL to every entry below: same k-grouping, same fused multiply-adds in
// the same order, same zero padding of k, same final reduction order, then `+ b`.
//
// The accumulation order of one output element y[r, o] depends only on K (= in):
//   * k is padded with zeros to KP = ceil(K / GEMM_BK) · GEMM_BK (GEMM_BK = GEMM_KG · GEMM_KS = 32);
//   * k-group g (0 ≤ g < GEMM_KG = 4) owns every k with (k / GEMM_KS) mod GEMM_KG == g, i.e. the
//     slice [t·32 + 8g, t·32 + 8g + 8) of every 32-wide k tile t;
//   * p_g = 0.0f, then p_g = fmaf(x[r, k], w[o, k], p_g) over the group's k in ascending order
//     (a padded k contributes fmaf(0, 0, p_g));
//   * s = ((p_0 + p_1) + p_2) + p_3, then s = s + b[o] (with a bias), then s = act(s) (with a
//     fused activation: dcc_act1 of common.cuh, exactly what act_apply computes per element), y = s.
// Nothing in that order depends on the number of rows, the tile shape, the tile's position or the
// grid, so every variant below computes the same bits, and a row's result never depends on which
// other rows share the launch (batch invariance).
//
// Structure: one CTA computes a BM × BN output tile with GEMM_KG thread groups; group g runs the
// whole tile over its k slices (each thread a TM × TN register tile), then the groups' partial
// tiles meet in shared memory and are summed in group order. x and W tiles are staged through
// shared memory k-contiguous ([BM][36] and [BN][36] floats: 16-byte aligned rows, conflict-free
// float4 reads), loaded with float4 when the operand's rows are 16-byte aligned (address and
// leading dimension multiples of 4 floats, K a multiple of 4) and with guarded scalar loads
// otherwise; the next tile is fetched into registers while the current one is multiplied.
// Rows past `rows`, outputs past `out` and k past K read as zeros and are never written.
//
// Compiled by NVRTC with --fmad=false: the only fused multiply-adds are the __fmaf_rn below.
// Launch: grid (ceil(out / BN), ceil(rows / BM), 1), block (GEMM_KG · (BM/TM) · (BN/TN), 1, 1);
// any other block shape traps. Arguments of every entry:
//   (y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out), sizes long long, w packed [out, in];
//   b [out] is read only when bias != 0 (the backends check every pointer argument against their
//   live buffers, so a launch without a bias passes some live address there, never null); act < 0
//   is no activation, else the op code of act_apply (kernels/src/act.rs) with its alpha.
// Prepended with common.cuh (i64, dcc_act1).

#define GEMM_KG 4
#define GEMM_KS 8
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

// Four consecutive k of one row of a [n, K] operand with leading dimension ld (zeros past n and
// past K). `vec`: the row start and ld are multiples of 4 floats and K is a multiple of 4, so a
// float4 at k0 < K lies inside the row and is 16-byte aligned.
__device__ __forceinline__ float4 gemm_load4(const float* p, i64 ld, i64 n, i64 K, i64 row, i64 k0, bool vec) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row >= n || k0 >= K) return v;
    const float* r = p + row * ld + k0;
    if (vec) return *reinterpret_cast<const float4*>(r);
    v.x = r[0];
    if (k0 + 1 < K) v.y = r[1];
    if (k0 + 2 < K) v.z = r[2];
    if (k0 + 3 < K) v.w = r[3];
    return v;
}

template <int BM, int BN, int TM, int TN>
__device__ __forceinline__ void gemm_linear_tile(const GemmArgs a) {
    constexpr int TY = BM / TM;                 // threads along rows in a group
    constexpr int TX = BN / TN;                 // threads along outputs in a group
    constexpr int GT = TX * TY;                 // threads per k-group
    constexpr int NT = GT * GEMM_KG;            // threads per CTA
    constexpr int Q = GEMM_BK / 4;              // float4 slots per staged row
    constexpr int XV = BM * Q;                  // float4 slots of the x tile
    constexpr int WV = BN * Q;                  // float4 slots of the W tile
    constexpr int XPT = (XV + NT - 1) / NT;
    constexpr int WPT = (WV + NT - 1) / NT;
    constexpr int STAGE = (BM + BN) * GEMM_LDS;
    constexpr int RED = GEMM_KG * BM * BN;
    constexpr int SMEM = STAGE > RED ? STAGE : RED;
    static_assert(BM % TM == 0 && BN % TN == 0, "tile not divisible by the thread tile");

    __shared__ __align__(16) float smem[SMEM];
    float* const xs = smem;                     // [BM][GEMM_LDS]
    float* const ws = smem + BM * GEMM_LDS;     // [BN][GEMM_LDS]

    if (blockDim.x != NT || blockDim.y != 1 || blockDim.z != 1) __trap();
    const int tid = threadIdx.x;
    const int g = tid / GT;
    const int lt = tid - g * GT;
    const int ty = lt / TX;
    const int tx = lt - ty * TX;
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;
    const bool vx = ((unsigned long long)a.x % 16 == 0) && (a.ldx % 4 == 0) && (K % 4 == 0);
    const bool vw = ((unsigned long long)a.w % 16 == 0) && (K % 4 == 0);

    float4 xr[XPT];
    float4 wr[WPT];
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    const i64 tiles = (K + GEMM_BK - 1) / GEMM_BK;
    // Fetches tile t of x and W into registers (slot s: row s / Q, k = t·BK + 4·(s mod Q)).
    auto fetch = [&](i64 t) {
        const i64 kb = t * GEMM_BK;
#pragma unroll
        for (int i = 0; i < XPT; ++i) {
            const int s = tid + i * NT;
            if (s < XV) xr[i] = gemm_load4(a.x, a.ldx, a.rows, K, m0 + s / Q, kb + 4 * (s % Q), vx);
        }
#pragma unroll
        for (int i = 0; i < WPT; ++i) {
            const int s = tid + i * NT;
            if (s < WV) wr[i] = gemm_load4(a.w, K, a.out, K, n0 + s / Q, kb + 4 * (s % Q), vw);
        }
    };

    if (tiles > 0) fetch(0);
    for (i64 t = 0; t < tiles; ++t) {
#pragma unroll
        for (int i = 0; i < XPT; ++i) {
            const int s = tid + i * NT;
            if (s < XV) *reinterpret_cast<float4*>(xs + (s / Q) * GEMM_LDS + 4 * (s % Q)) = xr[i];
        }
#pragma unroll
        for (int i = 0; i < WPT; ++i) {
            const int s = tid + i * NT;
            if (s < WV) *reinterpret_cast<float4*>(ws + (s / Q) * GEMM_LDS + 4 * (s % Q)) = wr[i];
        }
        __syncthreads();
        if (t + 1 < tiles) fetch(t + 1);
        // This group's k slice of the tile, ascending, four k at a time; each accumulator takes
        // its four products in k order.
#pragma unroll
        for (int kk = 0; kk < GEMM_KS; kk += 4) {
            const int kc = g * GEMM_KS + kk;
            float4 xv[TM];
            float4 wv[TN];
#pragma unroll
            for (int i = 0; i < TM; ++i) xv[i] = *reinterpret_cast<const float4*>(xs + (ty + i * TY) * GEMM_LDS + kc);
#pragma unroll
            for (int j = 0; j < TN; ++j) wv[j] = *reinterpret_cast<const float4*>(ws + (tx + j * TX) * GEMM_LDS + kc);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) {
                    float c = acc[i][j];
                    c = __fmaf_rn(xv[i].x, wv[j].x, c);
                    c = __fmaf_rn(xv[i].y, wv[j].y, c);
                    c = __fmaf_rn(xv[i].z, wv[j].z, c);
                    c = __fmaf_rn(xv[i].w, wv[j].w, c);
                    acc[i][j] = c;
                }
        }
        __syncthreads();
    }

    // The groups' partial tiles, [GEMM_KG][BM][BN], over the staging buffers (every thread is
    // past the last __syncthreads of the loop, so no one reads them any more).
    float* const red = smem;
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) red[(g * BM + ty + i * TY) * BN + tx + j * TX] = acc[i][j];
    __syncthreads();
    for (int e = tid; e < BM * BN; e += NT) {
        const int m = e / BN;
        const int n = e - m * BN;
        const i64 r = m0 + m;
        const i64 o = n0 + n;
        if (r < a.rows && o < a.out) {
            float s = red[e];
#pragma unroll
            for (int q = 1; q < GEMM_KG; ++q) s = s + red[q * BM * BN + e];
            if (a.bias != 0) s = s + a.b[o];
            if (a.act >= 0) s = dcc_act1(s, a.act, a.alpha);
            a.y[r * a.ldy + o] = s;
        }
    }
}

// The variants (tile BM × BN, thread tile TM × TN), one entry each, spelled out so that every
// entry's name appears in the source: kernels/src/gemm.rs `VARIANTS` lists the same table, and a
// test checks every entry here against it.

extern "C" __global__ void gemm_linear_32x64(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out) {
    gemm_linear_tile<32, 64, 4, 8>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}

extern "C" __global__ void gemm_linear_32x32(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out) {
    gemm_linear_tile<32, 32, 4, 4>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}

extern "C" __global__ void gemm_linear_16x32(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out) {
    gemm_linear_tile<16, 32, 4, 4>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}

extern "C" __global__ void gemm_linear_8x64(float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b, int bias, int act, float alpha, i64 rows, i64 in, i64 out) {
    gemm_linear_tile<8, 64, 2, 4>(GemmArgs{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}
