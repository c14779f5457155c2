// Device randomness: Philox4x32-10 with its state [seed, offset] in device memory.
// Host twin: kernels/src/rng.rs (+ kernels/src/philox.rs). Stream layout: see philox.rs.

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

__device__ __forceinline__ uint4 dcc_philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k.x += PHILOX_W0;
            k.y += PHILOX_W1;
        }
        unsigned hi0 = __umulhi(PHILOX_M0, c.x);
        unsigned lo0 = PHILOX_M0 * c.x;
        unsigned hi1 = __umulhi(PHILOX_M1, c.z);
        unsigned lo1 = PHILOX_M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

__device__ __forceinline__ uint4 dcc_philox_block(unsigned long long seed, unsigned long long offset,
                                                  unsigned long long g) {
    uint4 c = make_uint4((unsigned)g, (unsigned)(g >> 32), (unsigned)offset, (unsigned)(offset >> 32));
    uint2 k = make_uint2((unsigned)seed, (unsigned)(seed >> 32));
    return dcc_philox4x32_10(c, k);
}

__device__ __forceinline__ float dcc_uniform(unsigned x) {
    return (float)(x >> 8) * 5.9604644775390625e-8f;
}

__device__ __forceinline__ unsigned dcc_lane(uint4 r, int lane) {
    return lane == 0 ? r.x : lane == 1 ? r.y : lane == 2 ? r.z : r.w;
}

// out[i] = word i of the stream (state[0], state[1]).
extern "C" __global__ void philox_bits_u32(const unsigned long long* state, unsigned* out, long long n) {
    const unsigned long long seed = state[0], offset = state[1];
    const long long groups = (n + 3) / 4;
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < groups;
         g += (long long)gridDim.x * blockDim.x) {
        uint4 r = dcc_philox_block(seed, offset, (unsigned long long)g);
        for (int lane = 0; lane < 4; ++lane) {
            long long i = g * 4 + lane;
            if (i < n) out[i] = dcc_lane(r, lane);
        }
    }
}

// out[i] = uniform(word i) in [0, 1).
extern "C" __global__ void philox_uniform_f32(const unsigned long long* state, float* out, long long n) {
    const unsigned long long seed = state[0], offset = state[1];
    const long long groups = (n + 3) / 4;
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < groups;
         g += (long long)gridDim.x * blockDim.x) {
        uint4 r = dcc_philox_block(seed, offset, (unsigned long long)g);
        for (int lane = 0; lane < 4; ++lane) {
            long long i = g * 4 + lane;
            if (i < n) out[i] = dcc_uniform(dcc_lane(r, lane));
        }
    }
}

// out[i] = x[i] + scale * uniform(word i): a consumer of device randomness.
extern "C" __global__ void add_uniform_f32(float* out, const float* x, const unsigned long long* state,
                                           long long n, float scale) {
    const unsigned long long seed = state[0], offset = state[1];
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint4 r = dcc_philox_block(seed, offset, (unsigned long long)(i / 4));
        out[i] = x[i] + scale * dcc_uniform(dcc_lane(r, (int)(i % 4)));
    }
}

// state[1] += increment (one thread): the declared per-call advance of the offset.
extern "C" __global__ void philox_advance(unsigned long long* state, unsigned long long increment) {
    if (blockIdx.x == 0 && threadIdx.x == 0) state[1] += increment;
}
