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
// Work split (speed only; any launch geometry gives the same bits, each thread walking work
// items grid-strided): every thread computes R outputs of one row co with R independent
// accumulators (ILP: every weight load serves R products). Before its channel loop it works out,
// once, the input offsets its taps read (32-bit; the p / up division done here, not per channel)
// and a bit mask of those inside the input, so the channel loop has no division, no 64-bit index
// math and no bounds arithmetic.
// - Stride 1 and k in {1, 3, 5, 7, 11, 16} (every vocoder layer but the strided source
//   downsamplings): the item's outputs are t = b + r*dil, so output r's tap j reads window
//   position r + j: a channel's R + k - 1 window values are loaded once for R*k products.
//   Items per row: dil * ceil(t_out / (R*dil)) (adjacent items: adjacent b, coalesced loads).
// - Otherwise (other k or stride, or offsets past 32 bits): outputs t = q + r*Q, Q = ceil(t_out/R)
//   (Q items per row), every tap tested and addressed in 64 bits as a plain loop would.
// conv1d_threads in kernels/src/conv.rs counts the items of the first split, never fewer than
// the second's.

#define DCC_CONV_R 4

// Stride 1: the R outputs t = b + r*dil (r < R) of item (co, g), b = (g / dil)*R*dil + g % dil,
// so that tap j of output r reads window position m = r + j, p = b + m*dil - pad: the R + K - 1
// window values of a channel are loaded once and serve all R*K products (a tap is skipped, as
// everywhere, when its position lies outside the input). Offsets in 32 bits.
template <typename T, int K>
__device__ __forceinline__ void dcc_conv1d_win(T* y, const T* x, const T* w, const T* bias,
                                               const T* res, i64 c_in, i64 t_in, i64 sxc,
                                               int sxt, i64 t_out, i64 ldy, i64 ldr, int dil,
                                               int pad, int up, i64 use_res, i64 co, i64 g) {
    const int W = DCC_CONV_R + K - 1;
    const int span = (int)t_in * up;
    const int b = (int)(g / dil) * (DCC_CONV_R * dil) + (int)(g % dil);
    int off[W];
    unsigned mask = 0u;
#pragma unroll
    for (int m = 0; m < W; ++m) {
        const int p = b + m * dil - pad;
        off[m] = 0;
        if (p >= 0 && p < span) {
            off[m] = (up == 1 ? p : p / up) * sxt;
            mask |= 1u << m;
        }
    }
    T acc[DCC_CONV_R];
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) acc[r] = (T)0;
    const T* wr = w + co * c_in * K;
    for (i64 ci = 0; ci < c_in; ++ci) {
        const T* xr = x + ci * sxc;
        T xv[W];
#pragma unroll
        for (int m = 0; m < W; ++m) xv[m] = (mask & (1u << m)) ? xr[off[m]] : (T)0;
        T wj[K];
#pragma unroll
        for (int j = 0; j < K; ++j) wj[j] = wr[j];
#pragma unroll
        for (int j = 0; j < K; ++j) {
#pragma unroll
            for (int r = 0; r < DCC_CONV_R; ++r) {
                if (mask & (1u << (r + j))) acc[r] = acc[r] + wj[j] * xv[r + j];
            }
        }
        wr += K;
    }
#pragma unroll
    for (int r = 0; r < DCC_CONV_R; ++r) {
        const i64 t = b + (i64)r * dil;
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
    // 32-bit offsets: every padded position (< (t_out + R*dil)*stride + k*dil), the upsampled
    // span t_in*up and every frame offset (t_in - 1)*sxt fit in an int.
    const i64 lim = 0x7fffffffLL;
    const bool small = (t_out + DCC_CONV_R * dil) * stride + k * dil + pad < lim &&
                       t_in * up < lim && t_in * sxt < lim;
    const int s32 = (int)sxt, d = (int)dil, pd = (int)pad, u = (int)up;
    const bool win =
        small && stride == 1 && (k == 1 || k == 3 || k == 5 || k == 7 || k == 11 || k == 16);
    if (win) {
        // items per row: dil interleaved runs of R-output groups
        const i64 ng = dil * ((t_out + DCC_CONV_R * dil - 1) / (DCC_CONV_R * dil));
        DCC_GRID_STRIDE(i, c_out * ng) {
            const i64 co = i / ng;
            const i64 g = i - co * ng;
#define DCC_CONV_WIN(KK)                                                                      \
    dcc_conv1d_win<T, KK>(y, x, w, bias, res, c_in, t_in, sxc, s32, t_out, ldy, ldr, d, pd, u, \
                          use_res, co, g)
            if (k == 1) DCC_CONV_WIN(1);
            else if (k == 3) DCC_CONV_WIN(3);
            else if (k == 5) DCC_CONV_WIN(5);
            else if (k == 7) DCC_CONV_WIN(7);
            else if (k == 11) DCC_CONV_WIN(11);
            else DCC_CONV_WIN(16);
#undef DCC_CONV_WIN
        }
        return;
    }
    const i64 nq = (t_out + DCC_CONV_R - 1) / DCC_CONV_R;
    DCC_GRID_STRIDE(i, c_out * nq) {
        const i64 co = i / nq;
        const i64 q = i - co * nq;
        dcc_conv1d_any<T>(y, x, w, bias, res, c_in, t_in, sxc, sxt, t_out, ldy, ldr, k, stride,
                          dil, pad, up, use_res, co, q, nq);
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
