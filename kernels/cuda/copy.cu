// Copies, packs and gathers: strided blocks (concat, broadcast, nearest upsampling, im2col rows),
// transposes, key/value cache packing, causal-conv im2col, batched row copies of floats or binary16
// values. Host twins: kernels/src/copy.rs. Prepended with common.cuh. One thread per destination
// element, grid-strided (the batched copies: one grid row per copied row).

extern "C" __global__ void copy_block(float* dst, i64 ldd, const float* src, i64 lds, i64 rows, i64 cols,
                                      i64 rep) {
    DCC_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols, j = i % cols;
        dst[r * ldd + j] = src[(r / rep) * lds + j];
    }
}

// A batch of transposes (each session's solver rows into its mel, one launch for all).
extern "C" __global__ void copy_transpose(float* out, i64 out_b, i64 ldo, const float* x, i64 x_b, i64 ldx,
                                          i64 batch, i64 rows, i64 cols) {
    DCC_GRID_STRIDE(i, batch * rows * cols) {
        const i64 b = i / (rows * cols), rc = i % (rows * cols);
        const i64 r = rc / cols, c = rc % cols;
        out[b * out_b + c * ldo + r] = x[b * x_b + r * ldx + c];
    }
}

extern "C" __global__ void copy_kv_pack(float* cache, i64 cap, i64 t0, const float* k, const float* v, i64 ld,
                                        i64 batch, i64 heads, i64 t, i64 d) {
    DCC_GRID_STRIDE(i, batch * heads * t * d) {
        const i64 c = i % d, ti = (i / d) % t, h = (i / (d * t)) % heads, b = i / (d * t * heads);
        const i64 dst = ((b * heads + h) * cap + t0 + ti) * 2 * d + c;
        const i64 src = (b * t + ti) * ld + h * d + c;
        cache[dst] = k[src];
        cache[dst + d] = v[src];
    }
}

// One destination row (b, f, s) of `col` per grid row (grid-strided along y), its `dim` columns
// across x (grid-strided), 16-byte moves where every row of both sources and of col starts 16-byte
// aligned: the index arithmetic (three divisions) once per row, not per element. Any geometry
// covers every element once (kernels/src/copy.rs: im2col_dims); the same words land either way.
extern "C" __global__ void copy_im2col(float* col, const float* src, i64 src_b, const float* ctx, i64 ctx_b,
                                       i64 batch, i64 frames, i64 k, i64 dim) {
    const i64 c0 = k - 1;
    const bool vec = ((dim | src_b | ctx_b) & 3) == 0 &&
                     (((unsigned long long)col | (unsigned long long)src | (unsigned long long)ctx) & 15) == 0;
    const i64 n = vec ? dim / 4 : dim;
    const i64 x0 = blockIdx.x * (i64)blockDim.x + threadIdx.x, xs = (i64)gridDim.x * blockDim.x;
    for (i64 u = blockIdx.y; u < batch * frames * k; u += gridDim.y) {
        const i64 s = u % k, f = (u / k) % frames, b = u / (k * frames);
        const i64 r = f + s;
        float* const d = col + u * dim;
        const float* const from = r < c0 ? ctx + b * ctx_b + r * dim : src + b * src_b + (r - c0) * dim;
        if (vec) {
            for (i64 j = x0; j < n; j += xs) reinterpret_cast<float4*>(d)[j] = reinterpret_cast<const float4*>(from)[j];
        } else {
            for (i64 j = x0; j < n; j += xs) d[j] = from[j];
        }
    }
}

// One (batch, row) pair per grid row (grid-strided along y), its columns across x (grid-strided):
// no index division per element. 16-byte moves (4 floats, 8 halves) where every row of both sides
// starts 16-byte aligned (the solver's staged histories and write-backs: ~50 MB per launch), one
// element at a time otherwise. Any geometry covers every element once (kernels/src/copy.rs:
// batched_dims); the same bytes land either way. `T`: the element (float, or the binary16 bits of
// the half point's cache, unsigned short).
template <typename T>
__device__ __forceinline__ void dcc_copy_batched_rows(T* dst, i64 dst_b, i64 ldd, const T* src, i64 src_b, i64 lds,
                                                      i64 batch, i64 rows, i64 cols) {
    constexpr i64 V = 16 / sizeof(T);
    const bool vec = ((cols | ldd | lds | dst_b | src_b) & (V - 1)) == 0 &&
                     (((unsigned long long)dst | (unsigned long long)src) & 15) == 0;
    const i64 n = vec ? cols / V : cols;
    const i64 x0 = blockIdx.x * (i64)blockDim.x + threadIdx.x, xs = (i64)gridDim.x * blockDim.x;
    for (i64 br = blockIdx.y; br < batch * rows; br += gridDim.y) {
        const i64 b = br / rows, r = br % rows;
        T* const d = dst + b * dst_b + r * ldd;
        const T* const s = src + b * src_b + r * lds;
        if (vec) {
            for (i64 j = x0; j < n; j += xs) reinterpret_cast<uint4*>(d)[j] = reinterpret_cast<const uint4*>(s)[j];
        } else {
            for (i64 j = x0; j < n; j += xs) d[j] = s[j];
        }
    }
}

extern "C" __global__ void copy_batched(float* dst, i64 dst_b, i64 ldd, const float* src, i64 src_b, i64 lds,
                                        i64 batch, i64 rows, i64 cols) {
    dcc_copy_batched_rows(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols);
}

// copy_batched over binary16 elements (their bits, moved as they are).
extern "C" __global__ void copy_batched_f16(unsigned short* dst, i64 dst_b, i64 ldd, const unsigned short* src,
                                            i64 src_b, i64 lds, i64 batch, i64 rows, i64 cols) {
    dcc_copy_batched_rows(dst, dst_b, ldd, src, src_b, lds, batch, rows, cols);
}
