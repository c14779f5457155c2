// Half-precision linear on tensor cores (gemm_linear_f16_*; kernels/src/gemm/f16.rs,
// GemmPath::Half): y[rows, out] = rn16(rn16(x) · W16ᵀ + b16), stored as float, W16 and b16 IEEE
// binary16 (packed [out, in] and [out]), x and y float with unit column stride and their own
// leading dimensions. rn16 rounds a float to the nearest binary16 value, ties to even, overflow to
// ±inf (cvt.rn.f16.f32, __float2half_rn). Not bit-equal to its host twin (an mma's internal
// accumulation is not specified), but batch-invariant: the operations of one output depend on K
// alone.
//   * every x value is rounded to binary16 (a product of two binary16 values is exact in float);
//   * k is padded with zeros to a multiple of 16; k step s (k in [16s, 16s + 16)) belongs to chain
//     s mod 4; chain c accumulates, from 0, over its steps in ascending order, one
//     mma.m16n8k16 (f16 inputs, f32 accumulator) per step; a step wholly past K is skipped;
//   * the chains' partials are added as (p0 + p1) + (p2 + p3), then + b (float), then rounded to
//     binary16; with a fused activation (dcc_act1, the op codes of act_apply), the activation of
//     that value in float, rounded to binary16 again; y = the value as float.
// An mma computes each output element from its own row of x, its own column of W16ᵀ and its own
// accumulator, so neither the other rows of the tile nor the tile's position changes its bits,
// and every tile shape below (H16_TILE<MT, NT, WM, WN>) computes the same bits.
// CTA: WM × WN warp tiles of 16·MT rows × 8·NT outputs, each computed by H16_KW warps (one per
// chain): BM = 16·MT·WM rows, BN = 8·NT·WN outputs, 32 · WM · WN · H16_KW threads. k tiles of
// BK (a multiple of 64: BK / 16 k steps, step j of a tile belongs to chain j mod 4, its warp
// taking them in ascending order; H16_BK = 64 for all but the 64 × 128 tile) are staged through
// a ring of ST buffers (H16_ST = 4 likewise), x as float ([BM][BK + 8]) and W as binary16
// ([BN][BK + 8]), with 16-byte
// asynchronous copies (cp.async) when every row allows them (x: address and leading dimension
// multiples of 4 floats, K a multiple of 4; W: address a multiple of 16 bytes, K a multiple of 8),
// plain loads otherwise; rows past `rows`, outputs past `out` and k past K are staged as zeros
// and never written. Then the partials meet in shared memory ([H16_KW][BM][BN + 8] floats over
// the staging buffers: the padded rows make a warp's 64-bit stores of its accumulator pairs
// conflict-free, where [BM][BN] put the eight rows of an m16 tile in one bank).
// Compiled by NVRTC with --fmad=false. Launch: grid (ceil(out / BN), ceil(rows / BM), 1), block
// (32 · WM · WN · H16_KW, 1, 1), max(ST · stage, H16_KW · BM · (BN + 8) · 4) bytes of dynamic
// shared memory (kernels/src/gemm/f16.rs F16Variant::shared_bytes); another block shape, less
// shared memory or K above H16_MAX_K traps.
// Arguments of every entry: (y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out), as the fp32
// linear's (gemm.cu) but w and b binary16; b is read only when bias != 0.
// Prepended with common.cuh (i64, dcc_act1).

#define H16_KW 4
#define H16_BK 64
#define H16_ST 4
#define H16_MAX_K 0x7fffff00LL

struct H16Args {
    float* y;
    i64 ldy;
    const float* x;
    i64 ldx;
    const unsigned short* w;
    const unsigned short* b;
    int bias;
    int act;
    float alpha;
    i64 rows;
    i64 k;
    i64 out;
};

__device__ __forceinline__ float h16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

// rn16: the nearest binary16 value (ties to even, overflow to ±inf), as float.
__device__ __forceinline__ float h16_round(float v) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
    return h16_to_f32(h);
}

// Two floats as one f16x2 register: lo in the low half, hi in the high half (cvt's first source
// goes to the upper half).
__device__ __forceinline__ unsigned h16_pack(float lo, float hi) {
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

__device__ __forceinline__ void h16_cp16(void* dst, const void* src, int n) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void h16_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void h16_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ unsigned h16_dynamic_smem() {
    unsigned n;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
    return n;
}

// d += a · b over one k step of 16 (a: 16 × 16 row-major f16 fragment, b: 16 × 8 column-major).
__device__ __forceinline__ void h16_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// One staging slot of a thread: E consecutive k of one row (16 bytes: 4 floats of x or 8 halves
// of W) from `src` + the tile's k offset into the stage at element `dst`; `lim`: the k offsets
// below it are inside the operand (K − the slot's k; 0 for a row past the operand's rows, whose
// `src` is the operand's start, never read).
template <typename T>
struct H16Slot {
    const T* src;
    int lim;
    int dst;
};

// A thread's slots of one operand (N of them: slot q = tid + i · NTH, i < N, of V): rows of Q
// slots of E elements, slot q reading row r0 + q / Q of `src` (leading dimension ld, `n` rows)
// from k offset E · (q mod Q), staged at element dst0 + (q / Q) · LD + E · (q mod Q); a slot past
// V or past the operand's rows reads nothing (lim 0, src the operand's start).
template <typename T, int E, int Q, int V, int NTH, int LD, int N>
__device__ __forceinline__ void h16_slots(H16Slot<T> (&sl)[N], int tid, i64 r0, i64 n, const T* src, i64 ld, i64 K,
                                          int dst0) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
        const int q = tid + i * NTH;
        const i64 r = r0 + q / Q;
        const bool in = q < V && r < n;
        sl[i].src = in ? src + r * ld + E * (q % Q) : src;
        sl[i].lim = in ? (int)K - E * (q % Q) : 0;
        sl[i].dst = dst0 + (q / Q) * LD + E * (q % Q);
    }
}

// Stages slot `sl` at tile offset kb into the stage `buf` (E elements of T; zeros past K).
template <bool VEC, typename T, int E>
__device__ __forceinline__ void h16_stage(T* buf, const H16Slot<T>& sl, int kb) {
    if constexpr (VEC) {
        const bool in = kb < sl.lim;
        h16_cp16(buf + sl.dst, in ? sl.src + kb : sl.src, in ? 16 : 0);
    } else {
#pragma unroll
        for (int e = 0; e < E; ++e) buf[sl.dst + e] = kb + e < sl.lim ? sl.src[kb + e] : (T)0;
    }
}

template <int MT, int NT, int WM, int WN, int BK, int ST, bool VEC>
__device__ __forceinline__ void h16_tile(const H16Args a) {
    constexpr int BM = 16 * MT * WM;
    constexpr int BN = 8 * NT * WN;
    constexpr int NTH = 32 * WM * WN * H16_KW;
    constexpr int LDX = BK + 8;  // staged x row stride, floats (see the a fragments' loads)
    constexpr int LDW = BK + 8;  // staged W row stride, halves
    constexpr int SJ = BK / 16;  // k steps per tile
    constexpr int XQ = BK / 4;   // x slots per row of a tile (4 floats each)
    constexpr int WQ = BK / 8;   // W slots per row of a tile (8 halves each)
    constexpr int XV = BM * XQ;
    constexpr int WV = BN * WQ;
    constexpr int XPT = (XV + NTH - 1) / NTH;
    constexpr int WPT = (WV + NTH - 1) / NTH;
    constexpr int XBYTES = BM * LDX * 4;
    constexpr int STAGE = XBYTES + BN * LDW * 2;  // bytes
    constexpr int RLD = BN + 8;  // row stride of a partial tile, floats
    constexpr int RED = H16_KW * BM * RLD * 4;
    constexpr int SMEM = ST * STAGE > RED ? ST * STAGE : RED;
    static_assert(BK % (16 * H16_KW) == 0, "step j of a tile belongs to chain j mod H16_KW");
    static_assert(ST >= 2, "at least two staging buffers");
    static_assert(STAGE % 16 == 0 && XBYTES % 16 == 0, "16-byte aligned stages");

    extern __shared__ float4 h16_smem[];
    unsigned char* const smem = reinterpret_cast<unsigned char*>(h16_smem);
    if (blockDim.x != NTH || blockDim.y != 1 || blockDim.z != 1) __trap();
    if (h16_dynamic_smem() < (unsigned)SMEM || a.k > H16_MAX_K) __trap();
    const int tid = threadIdx.x;
    const int warp = tid / 32;
    const int chain = warp / (WM * WN);
    const int wm = (warp % (WM * WN)) / WN;
    const int wn = warp % WN;
    const int g = (tid % 32) / 4;
    const int t = tid % 4;
    const i64 m0 = (i64)blockIdx.y * BM;
    const i64 n0 = (i64)blockIdx.x * BN;
    const i64 K = a.k;

    H16Slot<float> xsl[XPT];
    H16Slot<unsigned short> wsl[WPT];
    h16_slots<float, 4, XQ, XV, NTH, LDX>(xsl, tid, m0, a.rows, a.x, a.ldx, K, 0);
    h16_slots<unsigned short, 8, WQ, WV, NTH, LDW>(wsl, tid, n0, a.out, a.w, K, K, 0);

    float acc[MT][NT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[m][n][i] = 0.0f;

    const i64 tiles = (K + BK - 1) / BK;
    const i64 steps = (K + 15) / 16;
    auto issue = [&](i64 c, int buf) {
        if (c < tiles) {
            const int kb = (int)c * BK;
            float* const xs = reinterpret_cast<float*>(smem + buf * STAGE);
            unsigned short* const ws = reinterpret_cast<unsigned short*>(smem + buf * STAGE + XBYTES);
#pragma unroll
            for (int i = 0; i < XPT; ++i)
                if (tid + i * NTH < XV) h16_stage<VEC, float, 4>(xs, xsl[i], kb);
#pragma unroll
            for (int i = 0; i < WPT; ++i)
                if (tid + i * NTH < WV) h16_stage<VEC, unsigned short, 8>(ws, wsl[i], kb);
        }
        h16_commit();
    };
    // This warp's k steps of tile c (in buffer buf), ascending: local steps chain, chain + 4, ...
    // (global step c·SJ + j); a step at or past ceil(K / 16) ends them (steps only grow).
    auto multiply = [&](int buf, i64 c) {
        const float* const xs = reinterpret_cast<const float*>(smem + buf * STAGE);
        const unsigned short* const ws = reinterpret_cast<const unsigned short*>(smem + buf * STAGE + XBYTES);
#pragma unroll
        for (int jj = 0; jj < SJ / H16_KW; ++jj) {
            const int j = H16_KW * jj + chain;
            if (c * SJ + j >= steps) return;
            const int k0 = 16 * j;
            // Row g of an m16 tile at floats k0 + 2t, + 1 (one 64-bit load): with rows LDX = BK + 8
            // floats apart (≡ 8 banks), the 16 lanes of a half warp cover 32 distinct banks.
            unsigned af[MT][4];
#pragma unroll
            for (int m = 0; m < MT; ++m) {
                const float* const r0 = xs + (16 * (MT * wm + m) + g) * LDX + k0 + 2 * t;
                const float* const r1 = r0 + 8 * LDX;
                af[m][0] = h16_pack(r0[0], r0[1]);
                af[m][1] = h16_pack(r1[0], r1[1]);
                af[m][2] = h16_pack(r0[8], r0[9]);
                af[m][3] = h16_pack(r1[8], r1[9]);
            }
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                const unsigned short* const col = ws + (8 * (NT * wn + n) + g) * LDW + k0 + 2 * t;
                const unsigned b0 = *reinterpret_cast<const unsigned*>(col);
                const unsigned b1 = *reinterpret_cast<const unsigned*>(col + 8);
#pragma unroll
                for (int m = 0; m < MT; ++m) h16_mma(acc[m][n], af[m], b0, b1);
            }
        }
    };

    {
#pragma unroll
        for (int c = 0; c < ST - 1; ++c) issue(c, c);
        int rbuf = 0;
        int wbuf = ST - 1;
        for (i64 c = 0; c < tiles; ++c) {
            h16_wait<ST - 2>();
            __syncthreads();
            issue(c + ST - 1, wbuf);
            multiply(rbuf, c);
            rbuf = rbuf + 1 == ST ? 0 : rbuf + 1;
            wbuf = wbuf + 1 == ST ? 0 : wbuf + 1;
        }
    }
    h16_wait<0>();
    __syncthreads();

    // Accumulator element i of tile (m, n): row 16·(MT·wm + m) + g + 8·(i / 2), output
    // 8·(NT·wn + n) + 2t + (i mod 2); elements 0, 1 (and 2, 3) are one 64-bit store.
    float* const red = reinterpret_cast<float*>(smem);
    float* const mine = red + chain * BM * RLD;
#pragma unroll
    for (int m = 0; m < MT; ++m)
#pragma unroll
        for (int n = 0; n < NT; ++n) {
            float* const p = mine + (16 * (MT * wm + m) + g) * RLD + 8 * (NT * wn + n) + 2 * t;
            *reinterpret_cast<float2*>(p) = make_float2(acc[m][n][0], acc[m][n][1]);
            *reinterpret_cast<float2*>(p + 8 * RLD) = make_float2(acc[m][n][2], acc[m][n][3]);
        }
    __syncthreads();
    constexpr int P = BM * RLD;
    for (int e = tid; e < BM * BN; e += NTH) {
        const int er = e / BN;
        const int eo = e - er * BN;
        const i64 r = m0 + er;
        const i64 o = n0 + eo;
        if (r >= a.rows || o >= a.out) continue;
        const int q = er * RLD + eo;
        float v = (red[q] + red[P + q]) + (red[2 * P + q] + red[3 * P + q]);
        if (a.bias != 0) v = v + h16_to_f32(a.b[o]);
        v = h16_round(v);
        if (a.act >= 0) v = h16_round(dcc_act1(v, a.act, a.alpha));
        a.y[r * a.ldy + o] = v;
    }
}

// Whether both operands allow 16-byte staging: x at 16-byte addresses, rows and K multiples of 4
// floats; W at a 16-byte address, K a multiple of 8 halves.
__device__ __forceinline__ bool h16_vec(const H16Args& a) {
    return (unsigned long long)a.x % 16 == 0 && a.ldx % 4 == 0 && a.k % 4 == 0 && (unsigned long long)a.w % 16 == 0 &&
           a.k % 8 == 0;
}

// The 16-byte asynchronous staging when both operands allow it, else plain loads.
template <int MT, int NT, int WM, int WN, int BK, int ST>
__device__ __forceinline__ void h16_linear(const H16Args a) {
    static_assert(H16_KW == 4, "the partials' tree is written for four chains");
    if (h16_vec(a))
        h16_tile<MT, NT, WM, WN, BK, ST, true>(a);
    else
        h16_tile<MT, NT, WM, WN, BK, ST, false>(a);
}

// 64 rows × 128 outputs per CTA, 8 warps of 64 × 64 (eight sessions batched and more: a warp
// converts 16 x and loads 16 W values a step for 32 mma, where a 32 × 32 warp tile takes 8 and 8
// for 8; its 128 accumulators leave room for one CTA of 8 warps an SM, so no 128 × 128); 128-k
// tiles through three stages (201 KB), two steps a warp between barriers.
extern "C" __global__ void __launch_bounds__(256, 1) gemm_linear_f16_64x128(float* y, i64 ldy, const float* x, i64 ldx,
                                                                           const unsigned short* w,
                                                                           const unsigned short* b, int bias, int act,
                                                                           float alpha, i64 rows, i64 in, i64 out) {
    h16_linear<4, 8, 1, 2, 128, 3>(H16Args{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}

// 64 rows × 64 outputs per CTA, 16 warps (many rows: sessions batched).
extern "C" __global__ void __launch_bounds__(512, 1) gemm_linear_f16_64x64(float* y, i64 ldy, const float* x, i64 ldx,
                                                                          const unsigned short* w,
                                                                          const unsigned short* b, int bias, int act,
                                                                          float alpha, i64 rows, i64 in, i64 out) {
    h16_linear<2, 4, 2, 2, H16_BK, H16_ST>(H16Args{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}

// 16 rows × 32 outputs per CTA, 4 warps (one session's rows: more CTAs).
extern "C" __global__ void __launch_bounds__(128, 4) gemm_linear_f16_16x32(float* y, i64 ldy, const float* x, i64 ldx,
                                                                          const unsigned short* w,
                                                                          const unsigned short* b, int bias, int act,
                                                                          float alpha, i64 rows, i64 in, i64 out) {
    h16_linear<1, 4, 1, 1, H16_BK, H16_ST>(H16Args{y, ldy, x, ldx, w, b, bias, act, alpha, rows, in, out});
}
