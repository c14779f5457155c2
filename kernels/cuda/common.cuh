// Shared by the model kernel families (norm, act, elementwise, attention, copy, embed): each
// family's CudaSource is this header followed by its .cu file (kernels/src/<family>.rs: SOURCE),
// compiled as one translation unit by NVRTC with --fmad=false --prec-div=true --prec-sqrt=true
// --ftz=false: every a*b + c rounds twice, as in Rust. Transcendentals are the helpers below,
// line-by-line ports of kernels/src/math.rs. Reductions have one fixed order (one thread walking
// a row in ascending index order, or the warp tree below, as the twins); no atomics.
//
// Sizes are long long; addresses are raw device pointers. GEMMs are not here: gemm.cu (its own
// translation unit) computes every Linear and every convolution (over im2col rows or
// overlapping row windows).

typedef long long i64;

#define DCC_GRID_STRIDE(i, n) \
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// ---- transcendentals (host twins: kernels/src/math.rs, line by line) ----------------------
//
// expf and Mish in single precision with __fmaf_rn (Rust mul_add); the others in double, rounded
// once to float.

__device__ __forceinline__ double dcc_pow2(i64 k) { return __longlong_as_double((k + 1023) << 52); }

__device__ double dcc_exp64(double x) {
    const double LN2_HI = __longlong_as_double(0x3fe62e42fee00000LL);
    const double LN2_LO = __longlong_as_double(0x3dea39ef35793c76LL);
    const double LOG2E = __longlong_as_double(0x3ff71547652b82feLL);
    if (x != x) return x;
    if (x > 709.0) return __longlong_as_double(0x7ff0000000000000LL);
    if (x < -708.0) return 0.0;
    const double k = round(x * LOG2E);
    const double r = (x - k * LN2_HI) - k * LN2_LO;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    return p * dcc_pow2((i64)k);
}

__device__ double dcc_ln64(double x) {
    const double LN2_HI = __longlong_as_double(0x3fe62e42fee00000LL);
    const double LN2_LO = __longlong_as_double(0x3dea39ef35793c76LL);
    const double SQRT2 = __longlong_as_double(0x3ff6a09e667f3bcdLL);
    const double MIN_POSITIVE = __longlong_as_double(0x0010000000000000LL);
    if (x != x || x < 0.0) return __longlong_as_double(0x7ff8000000000000LL);
    if (x == 0.0) return __longlong_as_double((i64)0xfff0000000000000ULL);
    if (x == __longlong_as_double(0x7ff0000000000000LL)) return x;
    i64 bias = 0;
    if (x < MIN_POSITIVE) {
        x = x * dcc_pow2(54);
        bias = -54;
    }
    const unsigned long long bits = (unsigned long long)__double_as_longlong(x);
    i64 e = (i64)((bits >> 52) & 0x7ff) - 1023 + bias;
    double m = __longlong_as_double((i64)((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL));
    if (m > SQRT2) {
        m = m * 0.5;
        e += 1;
    }
    const double s = (m - 1.0) / (m + 1.0);
    const double s2 = s * s;
    double p = 1.0 / 23.0;
    const double ds[11] = {21.0, 19.0, 17.0, 15.0, 13.0, 11.0, 9.0, 7.0, 5.0, 3.0, 1.0};
    for (int i = 0; i < 11; ++i) p = p * s2 + 1.0 / ds[i];
    const double lnm = 2.0 * s * p;
    const double ef = (double)e;
    return ef * LN2_HI + (ef * LN2_LO + lnm);
}

__device__ double dcc_log1p64(double x) {
    const double u = 1.0 + x;
    if (u == 1.0) return x;
    if (u == __longlong_as_double(0x7ff0000000000000LL)) return u;
    return dcc_ln64(u) * (x / (u - 1.0));
}

__device__ double dcc_tanh64(double x) {
    const double ax = fabs(x);
    double t;
    if (ax < 0.05) {
        const double x2 = ax * ax;
        double p = -1382.0 / 155925.0;
        p = p * x2 + 62.0 / 2835.0;
        p = p * x2 - 17.0 / 315.0;
        p = p * x2 + 2.0 / 15.0;
        p = p * x2 - 1.0 / 3.0;
        p = p * x2 + 1.0;
        t = ax * p;
    } else if (ax > 20.0) {
        t = 1.0;
    } else {
        t = 1.0 - 2.0 / (dcc_exp64(2.0 * ax) + 1.0);
    }
    return x < 0.0 ? -t : t;
}

__device__ void dcc_sincos64(double x, double* sn, double* cs) {
    const double PIO2_1 = __longlong_as_double(0x3ff921fb54400000LL);
    const double PIO2_1T = __longlong_as_double(0x3dd0b4611a626331LL);
    const double TWO_OVER_PI = __longlong_as_double(0x3fe45f306dc9c883LL);
    const double SIN[9] = {1.0 / 355687428096000.0, -1.0 / 1307674368000.0, 1.0 / 6227020800.0,
                           -1.0 / 39916800.0,       1.0 / 362880.0,          -1.0 / 5040.0,
                           1.0 / 120.0,             -1.0 / 6.0,              1.0};
    const double COS[10] = {-1.0 / 6402373705728000.0, 1.0 / 20922789888000.0, -1.0 / 87178291200.0,
                            1.0 / 479001600.0,         -1.0 / 3628800.0,       1.0 / 40320.0,
                            -1.0 / 720.0,              1.0 / 24.0,             -0.5,
                            1.0};
    const double k = round(x * TWO_OVER_PI);
    const double r = (x - k * PIO2_1) - k * PIO2_1T;
    const double r2 = r * r;
    double s = 0.0;
    for (int i = 0; i < 9; ++i) s = s * r2 + SIN[i];
    const double sin_r = r * s;
    double c = 0.0;
    for (int i = 0; i < 10; ++i) c = c * r2 + COS[i];
    switch (((i64)k) & 3) {
        case 0: *sn = sin_r; *cs = c; break;
        case 1: *sn = c; *cs = -sin_r; break;
        case 2: *sn = -sin_r; *cs = -c; break;
        default: *sn = -c; *cs = sin_r; break;
    }
}

// Single-precision expf (math.rs `exp_f32`, line by line): Cody-Waite reduction by ln 2 in two
// fused multiply-adds, degree-7 Taylor polynomial of e^r in fused multiply-adds, then 2^k as two
// exact power-of-two factors (one rounding, also into the subnormals). Within 1 ulp.
__device__ __forceinline__ float dcc_pow2f(int k) { return __int_as_float((k + 127) << 23); }

__device__ __forceinline__ float dcc_expf(float x) {
    if (x != x) return x;
    if (x > __int_as_float(0x42b17218)) return __int_as_float(0x7f800000);
    if (x < __int_as_float(0xc2cff1b4)) return 0.0f;
    const float k = rintf(x * __int_as_float(0x3fb8aa3b));
    float r = __fmaf_rn(-k, __int_as_float(0x3f317200), x);
    r = __fmaf_rn(-k, __int_as_float(0x35bfbe8e), r);
    float p = __int_as_float(0x39500d01);
    p = __fmaf_rn(p, r, __int_as_float(0x3ab60b61));
    p = __fmaf_rn(p, r, __int_as_float(0x3c088889));
    p = __fmaf_rn(p, r, __int_as_float(0x3d2aaaab));
    p = __fmaf_rn(p, r, __int_as_float(0x3e2aaaab));
    p = __fmaf_rn(p, r, __int_as_float(0x3f000000));
    p = __fmaf_rn(p, r, 1.0f);
    p = __fmaf_rn(p, r, 1.0f);
    const int ki = (int)k;
    const int k1 = ki >> 1;
    return (p * dcc_pow2f(k1)) * dcc_pow2f(ki - k1);
}

// Mish (math.rs `mish_f32`): x · n(n + 2) / (n(n + 2) + 2), n = e^x; x above 20 passes.
__device__ __forceinline__ float dcc_mish(float x) {
    if (x > 20.0f) return x;
    const float n = dcc_expf(x);
    const float u = n * (n + 2.0f);
    return x * (u / (u + 2.0f));
}

__device__ __forceinline__ float dcc_tanhf(float x) { return (float)dcc_tanh64((double)x); }
__device__ __forceinline__ float dcc_log1pf(float x) { return (float)dcc_log1p64((double)x); }
__device__ __forceinline__ float dcc_sinf(float x) { double s, c; dcc_sincos64((double)x, &s, &c); return (float)s; }
__device__ __forceinline__ float dcc_cosf(float x) { double s, c; dcc_sincos64((double)x, &s, &c); return (float)c; }

// ---- reductions (warp per row) --------------------------------------------------------------
//
// Every row reduction is one warp's: lane l sums the terms j = l, l + 32, l + 64, ... in ascending
// order (starting from 0.0f), then the 32 lane partials meet in a fixed tree, offsets 16, 8, 4, 2, 1
// (`v += shfl_down(v, off)`); lane 0's value is broadcast. The host twin (`math::warp_sum`) does
// the same additions in the same order. A kernel using it needs blockDim.x to be a multiple of 32
// (checked by the twin; the kernels trap otherwise).

#define DCC_WARP 32
#define DCC_FULL_MASK 0xffffffffu

__device__ __forceinline__ float dcc_warp_tree(float v) {
    for (int off = DCC_WARP / 2; off > 0; off >>= 1) v = v + __shfl_down_sync(DCC_FULL_MASK, v, off);
    return __shfl_sync(DCC_FULL_MASK, v, 0);
}

__device__ __forceinline__ float dcc_warp_max(float v) {
    // max is exact and order-free (no NaN rows reach it unless the input has NaN; fmaxf drops NaN
    // like Rust's f32::max)
    for (int off = DCC_WARP / 2; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(DCC_FULL_MASK, v, off));
    return v;
}

__device__ __forceinline__ void dcc_require_warps() {
    if (blockDim.x % DCC_WARP != 0 || blockDim.y != 1 || blockDim.z != 1) __trap();
}

// ---- half precision: rounding to f16 values kept in f32 storage -----------------------------
//
// dcc_rn16(x): the f16 value nearest x (round to nearest even), as a float: what
// __half2float(__float2half_rn(x)) gives, overflow (|x| >= 65520) to +-inf, NaN kept, subnormal
// f16 values (multiples of 2^-24 below 2^-14) included. Integer and float operations only, no
// cuda_fp16.h: the host twin (kernels/src/elementwise.rs: rn16) is the same lines. Used by the
// half-precision kernels of elementwise.cu and norm.cu.
__device__ __forceinline__ float dcc_rn16(float x) {
    const unsigned bits = __float_as_uint(x);
    const unsigned sign = bits & 0x80000000u;
    unsigned a = bits & 0x7fffffffu;
    if (a >= 0x7f800000u) return x;                               // inf, NaN
    if (a >= 0x477ff000u) return __uint_as_float(sign | 0x7f800000u); // >= 65520: inf
    if (a < 0x38800000u) {                                        // below 2^-14: multiples of 2^-24
        const float m = (0.5f + __uint_as_float(a)) - 0.5f;       // ulp of [0.5, 1) is 2^-24
        return __uint_as_float(sign | __float_as_uint(m));
    }
    a = (a + 0xfffu + ((a >> 13) & 1u)) & ~0x1fffu;               // 23 -> 10 mantissa bits, RNE
    return __uint_as_float(sign | a);
}

// ---- activations ---------------------------------------------------------------------------

// One element of act_apply (act.cu; op codes in kernels/src/act.rs), for the fused kernels.
__device__ __forceinline__ float dcc_act1(float v, int op, float alpha) {
    const float BETA = __int_as_float(0x3f4c422a);  // sqrt(2/pi)
    const float KAPPA = 0.044715f;
    switch (op) {
        case 0: return v / (1.0f + dcc_expf(-v));
        case 1: return dcc_mish(v);
        case 2: {
            const float cube = v * v * v;
            const float inner = BETA * (v + KAPPA * cube);
            return 0.5f * v * (1.0f + dcc_tanhf(inner));
        }
        case 3: return v <= 0.0f ? v * alpha : v;
        default: return v * alpha;
    }
}
