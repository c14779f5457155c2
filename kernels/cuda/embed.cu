// Embeddings: token table lookup, sinusoidal timestep features. Host twins: kernels/src/embed.rs.
// Prepended with common.cuh.

extern "C" __global__ void embed_gather(float* out, const unsigned* ids, const float* table, i64 n, i64 dim,
                                        i64 vocab) {
    DCC_GRID_STRIDE(i, n * dim) {
        const i64 t = i / dim, c = i % dim;
        const i64 id = (i64)ids[t];
        out[i] = id < vocab ? table[id * dim + c] : 0.0f;
    }
}

extern "C" __global__ void embed_timestep(float* out, i64 dim, float t, float scale, float max_period) {
    const i64 half = dim / 2;
    const float c = -(float)dcc_ln64((double)max_period);
    const float ts = t * scale;
    DCC_GRID_STRIDE(i, half) {
        const float f = dcc_expf(c * (float)i / (float)half);
        const float a = ts * f;
        out[i] = dcc_cosf(a);
        out[half + i] = dcc_sinf(a);
    }
    if ((dim & 1) && blockIdx.x == 0 && threadIdx.x == 0) out[dim - 1] = 0.0f;
}
