// Direct 1-D convolutions (dilated, strided, zero-padded on either side, optionally over a
// nearest-upsampled input, with an optional residual), in float and double. Host twins:
// kernels/src/conv.rs. Prepended with common.cuh.
//
// One thread per output element (co, t): it walks c_in in ascending order and, inside each
// input channel, the k taps in ascending order, accumulating `acc = acc + w * x` from 0 (a
// rounded product, then a rounded sum: --fmad=false), skipping taps that fall on the zero
// padding; then `acc + bias[co]`, then `+ res[co, t]` when a residual is given. No reduction
// crosses threads, so the order is the twin's by construction.
//
// The input is addressed through element strides (sxc per channel, sxt per frame), so a
// channel-major slice of a longer history is read in place. Tap j of output t reads padded
// position p = t*stride + j*dil - pad of the (upsampled) input, which is x[p / up] when
// 0 <= p < t_in*up and zero otherwise: left padding is `pad`, right padding is whatever lies past
// the input. `res` is read only when use_res is nonzero (every pointer argument must address live
// memory, so a launch without a residual passes y there).

template <typename T>
__device__ __forceinline__ void dcc_conv1d(T* y, const T* x, const T* w, const T* bias, const T* res,
                                           i64 c_in, i64 t_in, i64 sxc, i64 sxt, i64 c_out,
                                           i64 t_out, i64 ldy, i64 ldr, i64 k, i64 stride,
                                           i64 dil, i64 pad, i64 up, i64 use_res) {
    const i64 span = t_in * up;
    DCC_GRID_STRIDE(i, c_out * t_out) {
        const i64 co = i / t_out;
        const i64 t = i - co * t_out;
        T acc = (T)0;
        for (i64 ci = 0; ci < c_in; ++ci) {
            const T* wr = w + (co * c_in + ci) * k;
            const T* xr = x + ci * sxc;
            for (i64 j = 0; j < k; ++j) {
                const i64 p = t * stride + j * dil - pad;
                if (p >= 0 && p < span) acc = acc + wr[j] * xr[(p / up) * sxt];
            }
        }
        T v = acc + bias[co];
        if (use_res) v = v + res[co * ldr + t];
        y[co * ldy + t] = v;
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
