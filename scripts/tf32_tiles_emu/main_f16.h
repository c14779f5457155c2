// The cases and the spec model of the half linear (scripts/tf32_tiles_emu/run_f16.sh): each
// variant of gemm_f16.cu bit for bit against the spec (its header comment) on the same mma model.
static float spec16(const float* xr, const unsigned short* wr, i64 k) {
    float p[4] = {0, 0, 0, 0};
    for (i64 s = 0; s < (k + 15) / 16; ++s) {
        float a[16], b[16];
        for (int j = 0; j < 16; ++j) {
            const i64 kk = 16 * s + j;
            a[j] = kk < k ? h16_round(xr[kk]) : 0.0f;
            b[j] = kk < k ? h16_to_f32(wr[kk]) : 0.0f;
        }
        p[s % 4] = mma16_model(p[s % 4], a, b);
    }
    return (p[0] + p[1]) + (p[2] + p[3]);
}
int main(int argc, char** argv) {
    struct Case { i64 rows, k, out, ldx, ldy, off; int bias, act; };
    const Case cases[] = {
        {37, 100, 70, 103, 71, 1, 1, -1}, {33, 37, 33, 40, 35, 3, 0, -1}, {5, 3, 7, 3, 7, 0, 1, -1},
        {17, 8, 1, 8, 1, 0, 1, 1}, {65, 33, 129, 36, 130, 2, 0, -1}, {70, 264, 97, 264, 97, 0, 1, 1},
        {129, 512, 136, 512, 136, 0, 1, -1}, {100, 512, 1536, 512, 1536, 0, 1, -1},
        {70, 2048, 80, 2048, 80, 0, 1, -1}, {81, 1536, 80, 1540, 81, 3, 1, 1},
    };
    unsigned long long s = 12345;
    auto rnd = [&] { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return (float)((s >> 40) / double(1 << 23)) * 2.0f - 1.0f; };
    int bad = 0;
    for (const Case& c : cases) {
        std::vector<float> xa(c.off + c.rows * c.ldx + 8);
        std::vector<unsigned short> wa(c.out * c.k), ba(c.out);
        for (auto& v : xa) v = rnd() * 3.0f;
        for (auto& v : wa) v = h16_bits((_Float16)rnd());
        for (auto& v : ba) v = h16_bits((_Float16)rnd());
        const float* x = xa.data() + c.off;
        std::vector<float> want(c.rows * c.ldy, NAN);
        for (i64 r = 0; r < c.rows; ++r)
            for (i64 o = 0; o < c.out; ++o) {
                float v = spec16(x + r * c.ldx, wa.data() + o * c.k, c.k);
                if (c.bias) v = v + h16_to_f32(ba[o]);
                v = h16_round(v);
                if (c.act >= 0) v = h16_round(dcc_act1(v, c.act, 0.25f));
                want[r * c.ldy + o] = v;
            }
        for (const VariantEmu16& v : VARIANTS) {
            if (argc > 1 && strcmp(argv[1], v.name) != 0) continue;
            std::vector<float> y(c.rows * c.ldy, NAN);
            launch(v, y.data(), c.ldy, x, c.ldx, wa.data(), ba.data(), c.bias, c.act, 0.25f, c.rows, c.k, c.out);
            i64 diff = 0, first = -1;
            for (i64 e = 0; e < (i64)y.size(); ++e) {
                const bool same = __float_as_uint(y[e]) == __float_as_uint(want[e]) || (std::isnan(y[e]) && std::isnan(want[e]));
                if (!same) { if (first < 0) first = e; ++diff; }
            }
            printf("%-10s rows %3lld k %4lld out %4lld off %lld: %s", v.name, c.rows, c.k, c.out, c.off, diff ? "DIFF" : "same");
            if (diff) { printf(" (%lld, first (%lld, %lld): %g vs %g)", diff, first / c.ldy, first % c.ldy, y[first], want[first]); ++bad; }
            printf("\n");
            fflush(stdout);
        }
    }
    printf(bad ? "FAILED %d\n" : "all equal to the spec\n", bad);
    return bad != 0;
}
