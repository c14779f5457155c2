// The device intrinsics of gemm_f16.cu on the CPU (after shim.h): binary16 conversions through
// _Float16 (round to nearest even, overflow to ±inf, as cvt.rn.f16.f32), mma.m16n8k16 emulated
// per warp by one fixed per-element model.
inline unsigned short h16_bits(_Float16 f) { unsigned short u; memcpy(&u, &f, 2); return u; }
inline float h16_to_f32(unsigned short h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
inline float h16_round(float v) { return (float)(_Float16)v; }
inline unsigned h16_pack(float lo, float hi) {
    return (unsigned)h16_bits((_Float16)lo) | ((unsigned)h16_bits((_Float16)hi) << 16);
}
inline void h16_cp16(void* dst, const void* src, int n) {
    unsigned char tmp[16] = {0};
    if (n) memcpy(tmp, src, n);
    memcpy(dst, tmp, 16);
}
inline void h16_commit() {}
template <int N> inline void h16_wait() {}
inline unsigned h16_dynamic_smem() { return emu.cta->smem_bytes; }
// The model of one m16n8k16 output: c + the sixteen products (exact in float) summed in
// ascending k in float (the host twin's model; any fixed per-element function would serve).
inline float mma16_model(float c, const float* a, const float* b) {
    float s = a[0] * b[0];
    for (int k = 1; k < 16; ++k) s = s + a[k] * b[k];
    return c + s;
}
inline float h16_half(unsigned r, int hi) { return h16_to_f32((unsigned short)(hi ? r >> 16 : r & 0xffff)); }
inline void h16_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    const int lane = emu.tid.x % 32;
    Warp& w = *emu.cta->warps[emu.tid.x / 32];
    for (int i = 0; i < 4; ++i) { w.A[lane][i] = a[i]; w.C[lane][i] = d[i]; }
    w.B[lane][0] = b0; w.B[lane][1] = b1;
    w.bar.arrive_and_wait();
    const int g = lane / 4, t = lane % 4;
    float out[4];
    for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i / 2), col = 2 * t + (i % 2);
        float av[16], bv[16];
        for (int k = 0; k < 16; ++k) {
            // A: register (row >= 8) + 2·(k >= 8) of lane (row mod 8)·4 + (k mod 8)/2, half k mod 2;
            // B: register (k >= 8) of lane col·4 + (k mod 8)/2, half k mod 2.
            av[k] = h16_half(w.A[(row % 8) * 4 + (k % 8) / 2][(row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k % 2);
            bv[k] = h16_half(w.B[col * 4 + (k % 8) / 2][k >= 8 ? 1 : 0], k % 2);
        }
        out[i] = mma16_model(w.C[lane][i], av, bv);
    }
    w.bar.arrive_and_wait();
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}
