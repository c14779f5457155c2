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

// ---- The tiled kernels (conv_conv1d_tile, conv_conv1d_tile_f64) ------------------------------
//
// Stride 1 and k in {1, 3, 5, 7, 11, 16} only (kernels/src/conv.rs conv1d_tile_fits routes every
// other launch to conv_conv1d). Each output is still summed by one thread alone in the order
// above (ci ascending, then j ascending, from zero, skipping taps outside the input; then the bias,
// then the residual), so the bits are conv_conv1d's and the Host twin's. What changes is where
// the operands come from. conv_conv1d reads them from global memory and a launch of the vocoder's
// shapes has only a few warps per multiprocessor, so it waits on memory latency. Here a block of
// DCC_TILE_THREADS threads owns a tile of 4*C output channels by DCC_TILE_ITEMS work items (an
// item is R outputs t = b + r*dil, b = (g / dil)*(R*dil) + g % dil, as in dcc_conv1d_win), and
// stages, per chunk of input channels, the tile's input window (zero outside the input: those
// taps are skipped anyway) and the tile's weights in shared memory: every input value loaded
// serves 4*C output channels, every weight 32 items. A chunk is as many input channels as the
// buffer holds for the tile's window (fewer chunks, fewer waits at the block barrier). Window
// position m sits at m + m / 32 of its row: lane l of a wide tile reads m = 4l + u, which would
// put lanes l, l + 8, l + 16 and l + 24 on one bank without the skipped word. Thread (group gi = tid / 32, lane)
// computes channels co0 + gi*C + c (c < C) of item g0 + lane. Two shapes of tile (the `cfg`
// argument): 0 is C = 2, R = 4 (long rows); 1 is C = 1, R = 2 (more threads, for short rows).
//
// Any other launch is still computed right: a tile whose window exceeds DCC_TILE_WIN positions
// from global memory in the same order, another stride, k or size by conv_conv1d's body (the
// host launches neither: conv1d_tile_fits).

#define DCC_TILE_THREADS 128
#define DCC_TILE_ITEMS 32
#define DCC_TILE_WIN 256
// bytes of the staging buffer: at the largest window (WIN positions, WIN / 32 + 1 skipped) and
// the widest tile's weights (4 * 2 channels x k 16), 10 input channels of double, 20 of float
#define DCC_TILE_SMEM 32768

template <typename T, int K, int C, int R>
__device__ __forceinline__ void dcc_conv1d_tile(T* y, const T* x, const T* w, const T* bias,
                                                const T* res, i64 c_in, i64 t_in, i64 sxc,
                                                i64 sxt, i64 c_out, i64 t_out, i64 ldy, i64 ldr,
                                                int dil, int pad, int up, i64 use_res,
                                                i64 first, i64 step, unsigned char* smem) {
    const int CO_T = (DCC_TILE_THREADS / DCC_TILE_ITEMS) * C;
    const int U = R + K - 1;  // window offsets r + j of one item
    const int elems = DCC_TILE_SMEM / (int)sizeof(T);
    T* xs = reinterpret_cast<T*>(smem);
    const int span = (int)t_in * up;
    const i64 ng = (i64)dil * ((t_out + (i64)R * dil - 1) / ((i64)R * dil));
    const i64 t_tiles = (ng + DCC_TILE_ITEMS - 1) / DCC_TILE_ITEMS;
    const i64 tiles = ((c_out + CO_T - 1) / CO_T) * t_tiles;
    const int tid = threadIdx.x;
    const int gi = tid / DCC_TILE_ITEMS;
    const int lane = tid % DCC_TILE_ITEMS;
    for (i64 tile = first; tile < tiles; tile += step) {
        const i64 co0 = (tile / t_tiles) * CO_T;
        const i64 g0 = (tile % t_tiles) * DCC_TILE_ITEMS;
        const i64 g1 = min(g0 + DCC_TILE_ITEMS - 1, ng - 1);
        const int b0 = (int)(g0 / dil) * (R * dil) + (int)(g0 % dil);
        const int b1 = (int)(g1 / dil) * (R * dil) + (int)(g1 % dil);
        const int lo = b0 - pad;
        const int wl = b1 - b0 + (U - 1) * dil + 1;  // window positions [lo, lo + wl)
        const i64 g = g0 + lane;
        const bool item = g < ng;
        const int b = (int)(g / dil) * (R * dil) + (int)(g % dil);
        unsigned mask = 0u;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int p = b + u * dil - pad;
            if (item && p >= 0 && p < span) mask |= 1u << u;
        }
        T acc[C][R];
#pragma unroll
        for (int c = 0; c < C; ++c)
#pragma unroll
            for (int r = 0; r < R; ++r) acc[c][r] = (T)0;
        if (wl > DCC_TILE_WIN) {
            // never launched so (the host checks the bound): the same sums from global memory
#pragma unroll
            for (int c = 0; c < C; ++c) {
                const i64 co = co0 + gi * C + c;
                if (!item || co >= c_out) continue;
                for (i64 ci = 0; ci < c_in; ++ci) {
                    const T* wr = w + (co * c_in + ci) * K;
                    const T* xr = x + ci * sxc;
#pragma unroll
                    for (int j = 0; j < K; ++j) {
#pragma unroll
                        for (int r = 0; r < R; ++r) {
                            const int p = b + (r + j) * dil - pad;
                            if (mask & (1u << (r + j))) acc[c][r] = acc[c][r] + wr[j] * xr[(i64)(p / up) * sxt];
                        }
                    }
                }
            }
        } else {
            const int m0 = b - b0;
            const int row = wl + (wl >> 5) + 1;  // a channel's window, skipped words included
            // input channels per chunk: as many windows and weight rows as the buffer holds
            const int cich = (int)min(c_in, (i64)(elems / (row + CO_T * K)));
            T* ws = xs + cich * row;
            for (i64 ci0 = 0; ci0 < c_in; ci0 += cich) {
                const int nci = (int)min((i64)cich, c_in - ci0);
                __syncthreads();  // the previous chunk's readers are done
                for (int e = tid; e < nci * wl; e += DCC_TILE_THREADS) {
                    const int cl = e / wl, m = e - cl * wl;
                    const int p = lo + m;
                    T v = (T)0;
                    if (p >= 0 && p < span)
                        v = x[(ci0 + cl) * sxc + (i64)(up == 1 ? p : p / up) * sxt];
                    xs[cl * row + m + (m >> 5)] = v;
                }
                for (int e = tid; e < CO_T * nci * K; e += DCC_TILE_THREADS) {
                    const int ol = e / (nci * K), rest = e - ol * (nci * K);
                    const int cl = rest / K, j = rest - cl * K;
                    T v = (T)0;
                    if (co0 + ol < c_out) v = w[((co0 + ol) * c_in + ci0 + cl) * K + j];
                    ws[e] = v;
                }
                __syncthreads();
                if (item) {
                    for (int cl = 0; cl < nci; ++cl) {
                        T xv[U];
                        const T* xr = xs + cl * row;
#pragma unroll
                        for (int u = 0; u < U; ++u) {
                            const int m = m0 + u * dil;
                            xv[u] = xr[m + (m >> 5)];
                        }
#pragma unroll
                        for (int c = 0; c < C; ++c) {
                            const T* wr = ws + ((gi * C + c) * nci + cl) * K;
#pragma unroll
                            for (int j = 0; j < K; ++j) {
                                const T wj = wr[j];
#pragma unroll
                                for (int r = 0; r < R; ++r) {
                                    if (mask & (1u << (r + j))) acc[c][r] = acc[c][r] + wj * xv[r + j];
                                }
                            }
                        }
                    }
                }
            }
        }
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const i64 co = co0 + gi * C + c;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const i64 t = b + (i64)r * dil;
                if (item && co < c_out && t < t_out) {
                    T v = acc[c][r] + bias[co];
                    if (use_res) v = v + res[co * ldr + t];
                    y[co * ldy + t] = v;
                }
            }
        }
    }
}

// Outputs (co, t) of blocks first, first + step, ... (DCC_TILE_THREADS outputs per block), each
// summed by one thread in the order above, at any stride: the tiled kernels' path for a geometry
// they were not built for (the host never launches one).
template <typename T>
__device__ __forceinline__ void dcc_conv1d_outputs(T* y, const T* x, const T* w, const T* bias,
                                                   const T* res, i64 c_in, i64 t_in, i64 sxc,
                                                   i64 sxt, i64 c_out, i64 t_out, i64 ldy,
                                                   i64 ldr, i64 k, i64 stride, i64 dil, i64 pad,
                                                   i64 up, i64 use_res, i64 first, i64 step) {
    const i64 span = t_in * up;
    for (i64 blk = first; blk * DCC_TILE_THREADS < c_out * t_out; blk += step) {
        const i64 i = blk * DCC_TILE_THREADS + threadIdx.x;
        if (i >= c_out * t_out) continue;
        const i64 co = i / t_out, t = i - co * t_out;
        T acc = (T)0;
        for (i64 ci = 0; ci < c_in; ++ci)
            for (i64 j = 0; j < k; ++j) {
                const i64 p = t * stride + j * dil - pad;
                if (p >= 0 && p < span) acc = acc + w[(co * c_in + ci) * k + j] * x[ci * sxc + (p / up) * sxt];
            }
        T v = acc + bias[co];
        if (use_res) v = v + res[co * ldr + t];
        y[co * ldy + t] = v;
    }
}

// Whether the tiled kernels take a geometry at stride 1 (kernels/src/conv.rs conv1d_tile_fits,
// less its window bound, which dcc_conv1d_tile checks per tile), and how many tiles (or, when
// they do not, blocks of dcc_conv1d_outputs) it makes in tile shape cfg.
__device__ __forceinline__ bool dcc_tile_fits(i64 t_in, i64 sxt, i64 t_out, i64 k, i64 dil,
                                              i64 pad, i64 up) {
    const i64 lim = 0x7fffffffLL;
    const bool small = (t_out + 8 * dil) + k * dil + pad < lim && t_in * up < lim &&
                       t_in * sxt < lim;
    return small && (k == 1 || k == 3 || k == 5 || k == 7 || k == 11 || k == 16);
}

__device__ __forceinline__ i64 dcc_tile_blocks(i64 t_in, i64 sxt, i64 c_out, i64 t_out, i64 k,
                                               i64 stride, i64 dil, i64 pad, i64 up, i64 cfg) {
    if (stride != 1 || !dcc_tile_fits(t_in, sxt, t_out, k, dil, pad, up))
        return (c_out * t_out + DCC_TILE_THREADS - 1) / DCC_TILE_THREADS;
    const i64 c = cfg == 0 ? 2 : 1, r = cfg == 0 ? 4 : 2;
    const i64 items = dil * ((t_out + r * dil - 1) / (r * dil));
    return ((c_out + 4 * c - 1) / (4 * c)) * ((items + DCC_TILE_ITEMS - 1) / DCC_TILE_ITEMS);
}

template <typename T>
__device__ __forceinline__ void dcc_conv1d_tiled(T* y, const T* x, const T* w, const T* bias,
                                                 const T* res, i64 c_in, i64 t_in, i64 sxc,
                                                 i64 sxt, i64 c_out, i64 t_out, i64 ldy, i64 ldr,
                                                 i64 k, i64 dil, i64 pad, i64 up, i64 use_res,
                                                 i64 cfg, i64 first, i64 step,
                                                 unsigned char* smem) {
    if (!dcc_tile_fits(t_in, sxt, t_out, k, dil, pad, up)) {
        // not a launch the host makes: every output of the blocks' share, one per thread, summed
        // in the same order (correct for any geometry at stride 1)
        dcc_conv1d_outputs<T>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
                              1, dil, pad, up, use_res, first, step);
        return;
    }
    const int d = (int)dil, pd = (int)pad, u = (int)up;
#define DCC_TILE_K(KK)                                                                          \
    do {                                                                                        \
        if (cfg == 0)                                                                           \
            dcc_conv1d_tile<T, KK, 2, 4>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, \
                                         ldy, ldr, d, pd, u, use_res, first, step, smem);       \
        else                                                                                    \
            dcc_conv1d_tile<T, KK, 1, 2>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, \
                                         ldy, ldr, d, pd, u, use_res, first, step, smem);       \
    } while (0)
    if (k == 1) DCC_TILE_K(1);
    else if (k == 3) DCC_TILE_K(3);
    else if (k == 5) DCC_TILE_K(5);
    else if (k == 7) DCC_TILE_K(7);
    else if (k == 11) DCC_TILE_K(11);
    else DCC_TILE_K(16);
#undef DCC_TILE_K
}

extern "C" __global__ void conv_conv1d_tile(float* y, const float* x, const float* w,
                                            const float* bias, const float* res, i64 c_in,
                                            i64 t_in, i64 sxc, i64 sxt, i64 c_out, i64 t_out,
                                            i64 ldy, i64 ldr, i64 k, i64 stride, i64 dil, i64 pad,
                                            i64 up, i64 use_res, i64 cfg) {
    __shared__ __align__(16) unsigned char smem[DCC_TILE_SMEM];
    if (stride != 1) {  // not a launch the host makes: the plain kernel's body
        dcc_conv1d<float>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
                          stride, dil, pad, up, use_res);
        return;
    }
    dcc_conv1d_tiled<float>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
                            dil, pad, up, use_res, cfg, blockIdx.x, gridDim.x, smem);
}

extern "C" __global__ void conv_conv1d_tile_f64(double* y, const double* x, const double* w,
                                                const double* bias, const double* res, i64 c_in,
                                                i64 t_in, i64 sxc, i64 sxt, i64 c_out, i64 t_out,
                                                i64 ldy, i64 ldr, i64 k, i64 stride, i64 dil,
                                                i64 pad, i64 up, i64 use_res, i64 cfg) {
    __shared__ __align__(16) unsigned char smem[DCC_TILE_SMEM];
    if (stride != 1) {
        dcc_conv1d<double>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
                           stride, dil, pad, up, use_res);
        return;
    }
    dcc_conv1d_tiled<double>(y, x, w, bias, res, c_in, t_in, sxc, sxt, c_out, t_out, ldy, ldr, k,
                             dil, pad, up, use_res, cfg, blockIdx.x, gridDim.x, smem);
}

// ---- conv_conv1d_tile_group: up to three independent convolutions in one launch ---------------
//
// The vocoder's resblocks of one stage (kernels 3, 7 and 11 over the same input) are independent
// until their outputs are summed, and each of their convolutions alone makes a grid of a few
// hundred blocks, less than a wave: one launch of all three keeps the multiprocessors busy while
// the longest kernel finishes. Problem p (of n, in order) owns the next dcc_tile_blocks of its
// geometry of the launch's block indices; its tiles are computed exactly as conv_conv1d_tile
// computes them, so every output has its bits from any launch. Fewer blocks than the total are
// correct too (grid-stride over the concatenated block indices).

#define DCC_GROUP_PARAMS(n)                                                                       \
    float *y##n, const float *x##n, const float *w##n, const float *b##n, const float *r##n,     \
        i64 c_in##n, i64 t_in##n, i64 sxc##n, i64 sxt##n, i64 c_out##n, i64 t_out##n, i64 ldy##n, \
        i64 ldr##n, i64 k##n, i64 stride##n, i64 dil##n, i64 pad##n, i64 up##n, i64 use_res##n,    \
        i64 cfg##n

extern "C" __global__ void conv_conv1d_tile_group(i64 n, DCC_GROUP_PARAMS(0), DCC_GROUP_PARAMS(1),
                                                  DCC_GROUP_PARAMS(2)) {
    __shared__ __align__(16) unsigned char smem[DCC_TILE_SMEM];
#define DCC_GROUP_BLOCKS(m) \
    dcc_tile_blocks(t_in##m, sxt##m, c_out##m, t_out##m, k##m, stride##m, dil##m, pad##m, up##m, cfg##m)
#define DCC_GROUP_RUN(m, first, step)                                                              \
    do {                                                                                           \
        if (stride##m == 1)                                                                        \
            dcc_conv1d_tiled<float>(y##m, x##m, w##m, b##m, r##m, c_in##m, t_in##m, sxc##m, sxt##m,  \
                                    c_out##m, t_out##m, ldy##m, ldr##m, k##m, dil##m, pad##m, up##m, \
                                    use_res##m, cfg##m, first, step, smem);                         \
        else                                                                                       \
            dcc_conv1d_outputs<float>(y##m, x##m, w##m, b##m, r##m, c_in##m, t_in##m, sxc##m,       \
                                      sxt##m, c_out##m, t_out##m, ldy##m, ldr##m, k##m, stride##m,  \
                                      dil##m, pad##m, up##m, use_res##m, first, step);              \
    } while (0)
    const i64 n0 = DCC_GROUP_BLOCKS(0);
    const i64 n1 = n > 1 ? DCC_GROUP_BLOCKS(1) : 0;
    const i64 n2 = n > 2 ? DCC_GROUP_BLOCKS(2) : 0;
    for (i64 blk = blockIdx.x; blk < n0 + n1 + n2; blk += gridDim.x) {
        // one tile (or block of outputs) of one problem per iteration: the step is its count
        if (blk < n0) DCC_GROUP_RUN(0, blk, n0);
        else if (blk < n0 + n1) DCC_GROUP_RUN(1, blk - n0, n1);
        else DCC_GROUP_RUN(2, blk - n0 - n1, n2);
    }
#undef DCC_GROUP_BLOCKS
#undef DCC_GROUP_RUN
}
