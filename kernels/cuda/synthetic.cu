// Synthetic kernels for the runtime's tests and the replay micro-benchmark.
// Host twin: kernels/src/synthetic.rs. Compiled with --fmad=false: a*b + c rounds twice.

// out[i] = in[i] * a + b
extern "C" __global__ void affine_f32(float* out, const float* in, long long n, float a, float b) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = in[i] * a + b;
}

// out[i] = x[i] * wx + y[i] * wy
extern "C" __global__ void mix_f32(float* out, const float* x, const float* y, long long n, float wx, float wy) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = x[i] * wx + y[i] * wy;
}

// out[r] = sum_c in[r * cols + c], summed in ascending c by one thread (a fixed order).
extern "C" __global__ void row_sum_f32(float* out, const float* in, long long rows, long long cols) {
    for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
        float acc = 0.0f;
        for (long long c = 0; c < cols; ++c) acc = acc + in[r * cols + c];
        out[r] = acc;
    }
}

// data[i] = mix32(data[i] ^ salt ^ i)
extern "C" __global__ void hash_u32(unsigned* data, long long n, unsigned salt) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        unsigned x = data[i] ^ salt ^ (unsigned)i;
        x ^= x >> 16;
        x *= 0x7feb352du;
        x ^= x >> 15;
        x *= 0x846ca68bu;
        x ^= x >> 16;
        data[i] = x;
    }
}

// Busy-waits about `cycles` SM clock cycles (one thread). Used by the benchmark to queue a chunk's
// launches behind a running kernel, so events around the chunk measure device-busy time only.
// Host twin: no-op.
extern "C" __global__ void spin_cycles(long long cycles) {
    if (threadIdx.x != 0) return;
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
