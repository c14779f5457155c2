// The cases and the spec model (scripts/tf32_tiles_emu/run.sh): each variant bit for bit against the spec.
static float tf(float v) { return __uint_as_float((__float_as_uint(v) + 0x1000u) & 0xffffe000u); }
static float spec(const float* xr, const float* wr, i64 k) {
    float p[4] = {0, 0, 0, 0};
    for (i64 s = 0; s < (k + 7) / 8; ++s) {
        float xb[8], xs[8], wb[8], ws[8];
        for (int j = 0; j < 8; ++j) {
            const i64 kk = 8 * s + j;
            const float a = kk < k ? xr[kk] : 0.0f, c = kk < k ? wr[kk] : 0.0f;
            xb[j] = tf(a); xs[j] = tf(a - xb[j]); wb[j] = tf(c); ws[j] = tf(c - wb[j]);
        }
        float& c = p[s % 4];
        c = mma_model(c, xs, wb);
        c = mma_model(c, xb, ws);
        c = mma_model(c, xb, wb);
    }
    return (p[0] + p[1]) + (p[2] + p[3]);
}
int main(int argc, char** argv) {
    struct Case { i64 rows, k, out, ldx, ldy, off; int bias, act; };
    const Case cases[] = {
        {37, 100, 70, 103, 71, 1, 1, -1}, {33, 37, 33, 40, 35, 3, 0, -1}, {5, 3, 7, 3, 7, 0, 1, -1},
        {17, 8, 1, 8, 1, 0, 1, 1}, {65, 33, 129, 36, 130, 2, 0, -1}, {19, 200, 33, 200, 33, 0, 1, -1},
        {70, 260, 97, 260, 97, 0, 1, 1}, {1, 300, 130, 300, 130, 0, 0, -1}, {112, 256, 64, 256, 64, 0, 1, -1},
        {129, 516, 65, 520, 65, 0, 1, -1}, {48, 1024, 72, 1024, 72, 0, 1, -1},
        // The model's K and outputs with row tails past every tile (80 outputs: a partial n tile).
        {100, 512, 1536, 512, 1536, 0, 1, -1}, {70, 2048, 80, 2048, 80, 0, 1, -1},
        {81, 1536, 80, 1540, 81, 3, 1, 1},
    };
    unsigned long long s = 12345;
    auto rnd = [&] { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return (float)((s >> 40) / double(1 << 23)) * 2.0f - 1.0f; };
    int bad = 0;
    for (const Case& c : cases) {
        std::vector<float> xa(c.off + c.rows * c.ldx + 8), wa(c.out * c.k), ba(c.out);
        for (auto& v : xa) v = rnd() * 3.0f;
        for (auto& v : wa) v = rnd();
        for (auto& v : ba) v = rnd();
        const float* x = xa.data() + c.off;
        std::vector<float> want(c.rows * c.ldy, NAN);
        for (i64 r = 0; r < c.rows; ++r)
            for (i64 o = 0; o < c.out; ++o) {
                float v = spec(x + r * c.ldx, wa.data() + o * c.k, c.k);
                if (c.bias) v = v + ba[o];
                if (c.act >= 0) v = dcc_act1(v, c.act, 0.25f);
                want[r * c.ldy + o] = v;
            }
        for (const VariantEmu& v : VARIANTS) {
            bool named = argc == 1 || strcmp(v.name, "tf32x3") == 0;
            for (int a = 1; a < argc; ++a) named = named || strcmp(argv[a], v.name) == 0;
            if (!named) continue;
            std::vector<float> y(c.rows * c.ldy, NAN);
            launch(v, y.data(), c.ldy, x, c.ldx, wa.data(), ba.data(), c.bias, c.act, 0.25f, c.rows, c.k, c.out);
            i64 diff = 0, first = -1;
            for (i64 e = 0; e < (i64)y.size(); ++e) {
                const bool same = __float_as_uint(y[e]) == __float_as_uint(want[e]) || (std::isnan(y[e]) && std::isnan(want[e]));
                if (!same) { if (first < 0) first = e; ++diff; }
            }
            printf("%-10s rows %3lld k %4lld out %3lld off %lld: %s", v.name, c.rows, c.k, c.out, c.off, diff ? "DIFF" : "same");
            if (diff) { printf(" (%lld, first (%lld, %lld): %g vs %g)", diff, first / c.ldy, first % c.ldy, y[first], want[first]); ++bad; }
            printf("\n");
            fflush(stdout);
        }
    }
    printf(bad ? "FAILED %d\n" : "all equal to the spec\n", bad);
    return bad != 0;
}
