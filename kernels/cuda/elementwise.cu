// Elementwise arithmetic (residuals, the CFM solver step). Host twins: kernels/src/elementwise.rs.
// Prepended with common.cuh.

extern "C" __global__ void elementwise_add(float* x, const float* y, i64 n) {
    DCC_GRID_STRIDE(i, n) x[i] = x[i] + y[i];
}

extern "C" __global__ void elementwise_gated_add(float* x, const float* gate, const float* y, i64 rows, i64 dim) {
    DCC_GRID_STRIDE(i, rows * dim) x[i] = x[i] + gate[i % dim] * y[i];
}

extern "C" __global__ void elementwise_cfg_euler(float* x, const float* v, i64 n, float cfg, float dt) {
    const float a = 1.0f + cfg;
    DCC_GRID_STRIDE(i, n) {
        const float d = a * v[i] - cfg * v[n + i];
        x[i] = x[i] + dt * d;
    }
}
