// The estimator's key/value cache stored as IEEE binary16 (the contract's `half` operating point:
// `carry` and `solver_workspace` in f16; GemmPath::Half, the vendor's fp16 mode). Host twins:
// kernels/src/half_kv.rs. Prepended with common.cuh, rows.cuh and attention_body.cuh (dcc_kv: a
// binary16 element widened). SDPA over a binary16 cache is attention_f16.cu's
// (kernels/src/attention/f16.rs).
//
// In the vendor's fp16 mode the cache holds f16 keys and values: rn16(LN_k(k)) and v, a linear's
// f16 output. The fp32 path of this port keeps those values in float storage (norm_qk_pack, then
// elementwise_round_f16 over q and the new frames); these kernels store the same values in half the
// bytes, so every value read back is the same float:
//   * half_qk_pack: norm_qk_pack's LayerNorms (rows.cuh's dcc_ln_row_by, as norm.cu's dcc_ln_row),
//     then qn = rn16(LN_q(q)) as float and LN_k(k) ‖ v as binary16 bits (cvt.rn.f16.f32: round to
//     nearest even, overflow to ±inf) into frames t0 .. t0 + t of a [batch, heads, cap, 2d]
//     binary16 cache. Launch as norm_qk_pack: one warp per (row, head) of q, then of k.
// The cache's copies are copy.cu's copy_batched_f16 (the history into the solver workspace) and
// carry.cu's carry_retain (the write-back, in 32-bit words).

// The binary16 nearest x (round to nearest even, overflow to ±inf), as its bits.
__device__ __forceinline__ unsigned short dcc_f16_bits(float x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}

// Where a LayerNorm output goes: a float holding the binary16 value (the query), or the
// binary16 bits (the cache's keys).
__device__ __forceinline__ void dcc_put16(float* p, float v) { *p = dcc_kv(dcc_f16_bits(v)); }
__device__ __forceinline__ void dcc_put16(unsigned short* p, float v) { *p = dcc_f16_bits(v); }

// norm.cu's row LayerNorm (rows.cuh: dcc_ln_row_by), the same operations in the same order; only
// the store rounds (dcc_put16). A head's row is held in DCC_ROW_REGS registers a lane: 4 here
// (rows of up to 128, the DiT's heads are 64 wide) where norm.cu holds 16 (its rows are up to 512
// wide); the width changes no bit (rows.cuh), and 16 of each row array (3 × 16 floats a lane,
// mostly predicated off for a 64-wide head) would limit how many warps an SM holds.
#define DCC_ROW_REGS 4

struct DccPut16 {
    __device__ __forceinline__ void operator()(float* p, float v) const { dcc_put16(p, v); }
    __device__ __forceinline__ void operator()(unsigned short* p, float v) const { dcc_put16(p, v); }
};
template <typename Out>
__device__ __forceinline__ void dcc_ln_row16(Out* yr, const float* xr, i64 dim, const float* gamma,
                                             const float* beta, float eps, int lane) {
    dcc_ln_row_by<DCC_ROW_REGS>(yr, xr, dim, gamma, beta, eps, lane, DccPut16{});
}

extern "C" __global__ void half_qk_pack(float* qn, unsigned short* cache, i64 cap, i64 t0, const float* qkv, i64 ld,
                                        const float* gq, const float* bq, const float* gk, const float* bk,
                                        i64 batch, i64 heads, i64 t, i64 d, float eps) {
    dcc_require_warps();
    const int lane = threadIdx.x % DCC_WARP;
    const i64 units = batch * t * heads, inner = heads * d;
    DCC_WARP_ROWS(u, 2 * units) {
        const bool is_k = u >= units;
        const i64 uu = is_k ? u - units : u;
        const i64 h = uu % heads, row = uu / heads;
        const i64 b = row / t, i = row % t;
        const float* src = qkv + row * ld + h * d;
        if (!is_k) {
            dcc_ln_row16(qn + row * inner + h * d, src, d, gq, bq, eps, lane);
        } else {
            unsigned short* dst = cache + ((b * heads + h) * cap + t0 + i) * 2 * d;
            dcc_ln_row16(dst, src + inner, d, gk, bk, eps, lane);
            for (i64 c = lane; c < d; c += DCC_WARP) dst[d + c] = dcc_f16_bits(src[2 * inner + c]);
        }
    }
}

