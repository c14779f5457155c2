// The launch of one variant on the emulated device (scripts/tf32_tiles_emu/run.sh).
typedef void (*Entry)(float*, i64, const float*, i64, const float*, const float*, int, int, float, i64, i64, i64);
struct VariantEmu { const char* name; Entry f; int bm, bn, nt; unsigned smem; };
static void launch(const VariantEmu& v, float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b,
                   int bias, int act, float alpha, i64 rows, i64 k, i64 out) {
    const unsigned gx = (out + v.bn - 1) / v.bn, gy = (rows + v.bm - 1) / v.bm;
    emu_bdim = {(unsigned)v.nt, 1, 1};
    emu_gdim = {gx, gy, 1};
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            Cta cta;
            cta.smem.assign(v.smem / 16, float4{NAN, NAN, NAN, NAN});
            cta.smem_bytes = v.smem;
            cta.bar = std::make_unique<std::barrier<>>(v.nt);
            for (int i = 0; i < v.nt / 32; ++i) cta.warps.push_back(std::make_unique<Warp>());
            std::vector<std::thread> th;
            for (int t = 0; t < v.nt; ++t)
                th.emplace_back([&, t] {
                    emu.tid = {(unsigned)t, 0, 0};
                    emu.bid = {bx, by, 0};
                    emu.cta = &cta;
                    v.f(y, ldy, x, ldx, w, b, bias, act, alpha, rows, k, out);
                });
            for (auto& t : th) t.join();
        }
}
