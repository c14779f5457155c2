// Copies, packs and gathers: strided blocks (concat, broadcast, nearest upsampling, im2col rows),
// transposes, key/value cache packing, causal-conv im2col. Host twins: kernels/src/copy.rs.
// Prepended with common.cuh. One thread per destination element, grid-strided.

extern "C" __global__ void copy_block(float* dst, i64 ldd, const float* src, i64 lds, i64 rows, i64 cols,
                                      i64 rep) {
    DCC_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols, j = i % cols;
        dst[r * ldd + j] = src[(r / rep) * lds + j];
    }
}

extern "C" __global__ void copy_transpose(float* out, i64 ldo, const float* x, i64 ldx, i64 rows, i64 cols) {
    DCC_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols, c = i % cols;
        out[c * ldo + r] = x[r * ldx + c];
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

extern "C" __global__ void copy_im2col(float* col, const float* src, i64 src_b, const float* ctx, i64 ctx_b,
                                       i64 batch, i64 frames, i64 k, i64 dim) {
    const i64 c0 = k - 1;
    DCC_GRID_STRIDE(i, batch * frames * k * dim) {
        const i64 c = i % dim, s = (i / dim) % k, f = (i / (dim * k)) % frames, b = i / (dim * k * frames);
        const i64 r = f + s;
        col[i] = r < c0 ? ctx[b * ctx_b + r * dim + c] : src[b * src_b + (r - c0) * dim + c];
    }
}

// One (batch, row) pair per grid row (grid-strided along y), its columns across x (grid-strided):
// no index division per element. 16-byte moves where every row of both sides starts 16-byte
// aligned (the solver's staged histories and write-backs: ~50 MB per launch). Any geometry
// covers every element once (kernels/src/copy.rs: batched_dims); the same words land either way.
extern "C" __global__ void copy_batched(float* dst, i64 dst_b, i64 ldd, const float* src, i64 src_b, i64 lds,
                                        i64 batch, i64 rows, i64 cols) {
    const bool vec = ((cols | ldd | lds | dst_b | src_b) & 3) == 0 &&
                     (((unsigned long long)dst | (unsigned long long)src) & 15) == 0;
    const i64 n = vec ? cols / 4 : cols;
    const i64 x0 = blockIdx.x * (i64)blockDim.x + threadIdx.x, xs = (i64)gridDim.x * blockDim.x;
    for (i64 br = blockIdx.y; br < batch * rows; br += gridDim.y) {
        const i64 b = br / rows, r = br % rows;
        float* const d = dst + b * dst_b + r * ldd;
        const float* const s = src + b * src_b + r * lds;
        if (vec) {
            for (i64 j = x0; j < n; j += xs) reinterpret_cast<float4*>(d)[j] = reinterpret_cast<const float4*>(s)[j];
        } else {
            for (i64 j = x0; j < n; j += xs) d[j] = s[j];
        }
    }
}
