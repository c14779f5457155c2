// Elementwise arithmetic (residuals, the CFM solver step, rounding to f16). Host twins: kernels/src/elementwise.rs.
// Prepended with common.cuh.

extern "C" __global__ void elementwise_add(float* x, const float* y, i64 n) {
    DCC_GRID_STRIDE(i, n) x[i] = x[i] + y[i];
}

extern "C" __global__ void elementwise_gated_add(float* x, const float* gate, const float* y, i64 rows, i64 dim) {
    DCC_GRID_STRIDE(i, rows * dim) x[i] = x[i] + gate[i % dim] * y[i];
}

// Guidance and one Euler step of the solver rows of a batch of sessions in one launch: x is
// [n / m, m] (session s's m elements at s·m), v [n / m, 2, m] (its conditional then its
// unconditional velocities), so element i = s·m + e reads v[i + s·m] and v[i + s·m + m]; one
// session (m = n) reads v[i] and v[n + i].
extern "C" __global__ void elementwise_cfg_euler(float* x, const float* v, i64 n, i64 m, float cfg, float dt) {
    const float a = 1.0f + cfg;
    DCC_GRID_STRIDE(i, n) {
        const i64 c = i + (i / m) * m;
        const float d = a * v[c] - cfg * v[c + m];
        x[i] = x[i] + dt * d;
    }
}

// ---- half precision: rounding to f16 values kept in f32 storage -----------------------------
//
// dcc_rn16 (common.cuh) rounds a float to the nearest f16 value, kept as a float.

// Over `rows` rows of `cols` elements, row r at x + r * ld (a packed tensor is one row).
extern "C" __global__ void elementwise_round_f16(float* x, i64 rows, i64 cols, i64 ld) {
    DCC_GRID_STRIDE(i, rows * cols) {
        float* p = x + (i / cols) * ld + i % cols;
        *p = dcc_rn16(*p);
    }
}

// x = rn16(c + x) - c: an f16 sum with the constant c (the modulate's `1 + scale`), stored as its
// offset from c so that c + x recomputes it exactly. Rows as elementwise_round_f16.
extern "C" __global__ void elementwise_round_f16_shifted(float* x, i64 rows, i64 cols, i64 ld, float c) {
    DCC_GRID_STRIDE(i, rows * cols) {
        float* p = x + (i / cols) * ld + i % cols;
        *p = dcc_rn16(c + *p) - c;
    }
}

// The vendor's fp16 gated residual: x = rn16(x + rn16(gate[j] * y)), rows x dim packed.
extern "C" __global__ void elementwise_gated_add_f16(float* x, const float* gate, const float* y, i64 rows, i64 dim) {
    DCC_GRID_STRIDE(i, rows * dim) x[i] = dcc_rn16(x[i] + dcc_rn16(gate[i % dim] * y[i]));
}

// Guidance and the Euler step as the vendor's fp16 mode computes them, every op an f16 op
// (computed in float, rounded): x = rn16(x + rn16(dt * rn16(rn16((1 + cfg) * v) - rn16(cfg * u)))).
// elementwise_cfg_euler's batch layout.
extern "C" __global__ void elementwise_cfg_euler_f16(float* x, const float* v, i64 n, i64 m, float cfg, float dt) {
    const float a = 1.0f + cfg;
    DCC_GRID_STRIDE(i, n) {
        const i64 c = i + (i / m) * m;
        const float d = dcc_rn16(dcc_rn16(a * v[c]) - dcc_rn16(cfg * v[c + m]));
        x[i] = dcc_rn16(x[i] + dcc_rn16(dt * d));
    }
}

// embed_timestep in the vendor's fp16 mode: t * scale rounded, the float32 frequencies rounded,
// their products rounded, cos and sin rounded.
extern "C" __global__ void elementwise_timestep_f16(float* out, i64 dim, float t, float scale, float max_period) {
    const i64 half = dim / 2;
    const float c = -(float)dcc_ln64((double)max_period);
    const float ts = dcc_rn16(t * scale);
    DCC_GRID_STRIDE(i, half) {
        const float f = dcc_rn16(dcc_expf(c * (float)i / (float)half));
        const float a = dcc_rn16(ts * f);
        out[i] = dcc_rn16(dcc_cosf(a));
        out[half + i] = dcc_rn16(dcc_sinf(a));
    }
    if ((dim & 1) && blockIdx.x == 0 && threadIdx.x == 0) out[dim - 1] = 0.0f;
}
