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

// Snake (BigVGAN) over channel-major [rows, cols] blocks: y = x + (1 / (alpha[r] + 1e-9)) *
// sin(x * alpha[r])^2. y may be x itself (ldy = ldx, in place).
extern "C" __global__ void act_snake(float* y, const float* x, const float* alpha, i64 rows,
                                     i64 cols, i64 ldy, i64 ldx) {
    DCC_GRID_STRIDE(i, rows * cols) {
        const i64 r = i / cols;
        const i64 c = i - r * cols;
        const float a = alpha[r];
        const float inv = 1.0f / (a + 1e-9f);
        const float v = x[r * ldx + c];
        const float s = dcc_sinf(v * a);
        y[r * ldy + c] = v + inv * (s * s);
    }
}

// expm1 in double: the Taylor series to x^17 on |x| < 0.5 (Horner, highest degree first), else
// e^x - 1 (dcc_exp64). Host twin: act.rs `expm1_64`.
__device__ double dcc_expm1_64(double x) {
    if (x != x) return x;
    if (fabs(x) < 0.5) {
        double p = 1.0 / 355687428096000.0;
        const double d[16] = {16.0, 15.0, 14.0, 13.0, 12.0, 11.0, 10.0, 9.0,
                              8.0,  7.0,  6.0,  5.0,  4.0,  3.0,  2.0,  1.0};
        double f = 355687428096000.0;
        for (int i = 0; i < 16; ++i) {
            f = f / (d[i] + 1.0);
            p = p * x + 1.0 / f;
        }
        return p * x;
    }
    return dcc_exp64(x) - 1.0;
}

// torch.nn.ELU (alpha 1) in double, in place: x > 0 ? x : expm1(x).
extern "C" __global__ void act_elu_f64(double* x, i64 n) {
    DCC_GRID_STRIDE(i, n) {
        const double v = x[i];
        x[i] = v > 0.0 ? v : dcc_expm1_64(v);
    }
}

// x = x / d in place (a true division, as torch's `tensor / number`).
extern "C" __global__ void act_div(float* x, i64 n, float d) {
    DCC_GRID_STRIDE(i, n) x[i] = x[i] / d;
}
