// Direct 1-D convolutions (dilated, strided, zero-padded on either side, optionally over a
// nearest-upsampled input, with an optional residual), in float and double. Host twins:
// kernels/src/conv.rs. Prepended with common.cuh.
//
// Every output element (co, t) is computed by one thread, alone: it walks c_in in ascending
// order and, inside each input channel, the k taps in ascending order, accumulating
// `acc = acc + w * x` from 0 (a rounded product, then a rounded sum: --fmad=false), skipping taps
// that fall on the zero padding; then `acc + bias[co]`, then `+ res[co, t]` when a residual is
// given. No reduction crosses threads, so the order is the twin's by construction.
//
// The input is addressed through element strides (sxc per channel, sxt per frame), so a
// channel-major slice of a longer history is read in place. Tap j of output t reads padded
// position p = t*stride + j*dil - pad of the (upsampled) input, which is x[p / up] when
// 0 <= p < t_in*up and zero otherwise: left padding is `pad`, right padding is whatever lies past
// the input. `res` is read only when use_res is nonzero (every pointer argument must address live
// memory, so a launch without a residual passes y there).
//
// Work split (speed only; any launch geometry gives the same bits): a work item is (co, q) with
// q < Q = ceil(t_out / R); its thread computes the R outputs t = q, q + Q, ..., q + (R-1)Q of row
// co with R independent accumulators (ILP: every weight load serves R products, and adjacent
// threads read adjacent frames for each r: coalesced). Before the channel loop the thread works
// out, once, each tap's input offset (32-bit, the p / up division done here and not per channel)
// and a bit mask of the taps that lie inside the input, so the channel loop has no division,
// no 64-bit index math and no bounds arithmetic. The common kernel sizes are compile-time
// constants (fully unrolled, offsets in registers); other sizes, and inputs whose offsets do not
// fit 32 bits, take a generic path with the same per-accumulator order.

#define DCC_CONV_R 4

// The R outputs of item (co, q), every tap size K a compile-time constant; offsets in 32 bits.
template <typename T, int K>
__device__ __forceinline__ void dcc_conv1d_fixed(T* y, const T* x, const T* w, const T* bias,
                                                 const T* res, i64 c_in, i64 t_in, i64 sxc,
                                                 int sxt, i64 t_out, i64 ldy, i64 ldr,
                                                 int stride, int dil, int pad, int up,
                                                 i64 use_res, i64 co, i64 q, i64 nq) {
    const int span = (int)t_in * up;
    int off[DCC_CONV_R][K];
    unsigned mask[DCC_CONV_R];
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) {
        const i64 t = q + r * nq;
        mask[r] = 0u;
#pragma unroll
        for (int j = 0; j < K; ++j) {
            off[r][j] = 0;
            if (t < t_out) {
                const int p = (int)t * stride + j * dil - pad;
                if (p >= 0 && p < span) {
                    off[r][j] = (up == 1 ? p : p / up) * sxt;
                    mask[r] |= 1u << j;
                }
            }
        }
    }
    T acc[DCC_CONV_R];
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) acc[r] = (T)0;
    const T* wr = w + co * c_in * K;
    for (i64 ci = 0; ci < c_in; ++ci) {
        const T* xr = x + ci * sxc;
        T wj[K];
#pragma unroll
        for (int j = 0; j < K; ++j) wj[j] = wr[j];
#pragma unroll
        for (int j = 0; j < K; ++j) {
#pragma unroll
            for (int r = 0; r < DCC_CONV_R; ++r) {
                if (mask[r] & (1u << j)) acc[r] = acc[r] + wj[j] * xr[off[r][j]];
            }
        }
        wr += K;
    }
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) {
        const i64 t = q + r * nq;
        if (t < t_out) {
            T v = acc[r] + bias[co];
            if (use_res) v = v + res[co * ldr + t];
            y[co * ldy + t] = v;
        }
    }
}

// The R outputs of item (co, q) for any k and any sizes (64-bit offsets, taps tested in the loop).
template <typename T>
__device__ __forceinline__ void dcc_conv1d_any(T* y, const T* x, const T* w, const T* bias,
                                               const T* res, i64 c_in, i64 t_in, i64 sxc,
                                               i64 sxt, i64 t_out, i64 ldy, i64 ldr, i64 k,
                                               i64 stride, i64 dil, i64 pad, i64 up,
                                               i64 use_res, i64 co, i64 q, i64 nq) {
    const i64 span = t_in * up;
    T acc[DCC_CONV_R];
    i64 p0[DCC_CONV_R];
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) {
        acc[r] = (T)0;
        const i64 t = q + r * nq;
        // an output past t_out gets a start no tap of which is inside the input
        p0[r] = t < t_out ? t * stride - pad : span;
    }
    const T* wr = w + co * c_in * k;
    for (i64 ci = 0; ci < c_in; ++ci) {
        const T* xr = x + ci * sxc;
        for (i64 j = 0; j < k; ++j) {
            const T wj = wr[j];
#pragma unroll
            for (int r = 0; r < DCC_CONV_R; ++r) {
                const i64 p = p0[r] + j * dil;
                if (p >= 0 && p < span) acc[r] = acc[r] + wj * xr[(p / up) * sxt];
            }
        }
        wr += k;
    }
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) {
        const i64 t = q + r * nq;
        if (t < t_out) {
            T v = acc[r] + bias[co];
            if (use_res) v = v + res[co * ldr + t];
            y[co * ldy + t] = v;
        }
    }
}

template <typename T>
__device__ __forceinline__ void dcc_conv1d(T* y, const T* x, const T* w, const T* bias, const T* res,
                                           i64 c_in, i64 t_in, i64 sxc, i64 sxt, i64 c_out,
                                           i64 t_out, i64 ldy, i64 ldr, i64 k, i64 stride,
                                           i64 dil, i64 pad, i64 up, i64 use_res) {
    const i64 nq = (t_out + DCC_CONV_R - 1) / DCC_CONV_R;
    // 32-bit offsets: every padded position t*stride + j*dil (< t_out*stride + k*dil), the
    // upsampled span t_in*up and every frame offset (t_in - 1)*sxt fit in an int.
    const i64 lim = 0x7fffffffLL;
    const bool small = t_out * stride + k * dil + pad < lim && t_in * up < lim &&
                       t_in * sxt < lim;
    const int s32 = (int)sxt, st = (int)stride, d = (int)dil, pd = (int)pad, u = (int)up;
    DCC_GRID_STRIDE(i, c_out * nq) {
        const i64 co = i / nq;
        const i64 q = i - co * nq;
#define DCC_CONV_FIXED(KK)                                                                    \
    dcc_conv1d_fixed<T, KK>(y, x, w, bias, res, c_in, t_in, sxc, s32, t_out, ldy, ldr, st, d, \
                            pd, u, use_res, co, q, nq)
        if (small && k == 3) DCC_CONV_FIXED(3);
        else if (small && k == 5) DCC_CONV_FIXED(5);
        else if (small && k == 7) DCC_CONV_FIXED(7);
        else if (small && k == 11) DCC_CONV_FIXED(11);
        else if (small && k == 16) DCC_CONV_FIXED(16);
        else if (small && k == 1) DCC_CONV_FIXED(1);
        else
            dcc_conv1d_any<T>(y, x, w, bias, res, c_in, t_in, sxc, sxt, t_out, ldy, ldr, k,
                              stride, dil, pad, up, use_res, co, q, nq);
#undef DCC_CONV_FIXED
    }
}

extern "C" __global__ void conv_conv1d(float* y, const float* x, const float* w, const float* bias,
                                       const float* res, i64 c_in, i64 t_in, i64 sxc, i64 sxt,
                                       i64 c_out, i64 t_out, i64 ldy, i64 ldr, i64 k, i64 stride,
                                       i64 dil, i64 pad, i64 up, i64 use_res) {
    dcc_conv1d<float>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k, stride,
                      dil, pad, up, use_res);
}

extern "C" __global__ void conv_conv1d_f64(double* y, const double* x, const double* w,
                                           const double* bias, const double* res, i64 c_in,
                                           i64 t_in, i64 sxc, i64 sxt, i64 c_out, i64 t_out,
                                           i64 ldy, i64 ldr, i64 k, i64 stride, i64 dil, i64 pad,
                                           i64 up, i64 use_res) {
    dcc_conv1d<double>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
                       stride, dil, pad, up, use_res);
}
