// Activations. Host twins: kernels/src/act.rs. Prepended with common.cuh.

extern "C" __global__ void act_apply(float* x, i64 n, int op, float alpha) {
    const float BETA = __int_as_float(0x3f4c422a);  // sqrt(2/pi)
    const float KAPPA = 0.044715f;
    DCC_GRID_STRIDE(i, n) {
        const float v = x[i];
        float y;
        switch (op) {
            case 0: y = v / (1.0f + dcc_expf(-v)); break;
            case 1: y = dcc_mish(v); break;
            case 2: {
                const float cube = v * v * v;
                const float inner = BETA * (v + KAPPA * cube);
                y = 0.5f * v * (1.0f + dcc_tanhf(inner));
                break;
            }
            case 3: y = v <= 0.0f ? v * alpha : v; break;
            default: y = v * alpha; break;
        }
        x[i] = y;
    }
}
