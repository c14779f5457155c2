// The launch of one variant on the emulated device (scripts/tf32_tiles_emu/run.sh).
typedef void (*Entry)(float*, i64, const float*, i64, const float*, const float*, int, int, float, i64, i64, i64);
struct VariantEmu { const char* name; Entry f; int bm, bn, nt, cl; unsigned smem; };
static void launch(const VariantEmu& v, float* y, i64 ldy, const float* x, i64 ldx, const float* w, const float* b,
                   int bias, int act, float alpha, i64 rows, i64 k, i64 out) {
    const unsigned gx = (out + v.bn - 1) / v.bn, gy = (rows + v.bm - 1) / v.bm;
    emu_bdim = {(unsigned)v.nt, 1, 1};
    emu_gdim = {gx, gy, (unsigned)v.cl};
    for (unsigned by = 0; by < gy; ++by)
        for (unsigned bx = 0; bx < gx; ++bx) {
            Cluster cl;
            std::vector<std::unique_ptr<Cta>> ctas;
            for (int z = 0; z < v.cl; ++z) {
                auto c = std::make_unique<Cta>();
                c->smem.assign(v.smem / 16, float4{NAN, NAN, NAN, NAN});
                c->smem_bytes = v.smem;
                c->bar = std::make_unique<std::barrier<>>(v.nt);
                for (int i = 0; i < v.nt / 32; ++i) c->warps.push_back(std::make_unique<Warp>());
                c->cluster = v.cl > 1 ? &cl : nullptr;
                c->rank = z;
                cl.ctas.push_back(c.get());
                ctas.push_back(std::move(c));
            }
            cl.bar = std::make_unique<std::barrier<>>(v.nt * v.cl);
            std::vector<std::thread> th;
            for (int z = 0; z < v.cl; ++z)
                for (int t = 0; t < v.nt; ++t)
                    th.emplace_back([&, z, t] {
                        emu.tid = {(unsigned)t, 0, 0};
                        emu.bid = {bx, by, (unsigned)z};
                        emu.cta = ctas[z].get();
                        v.f(y, ldy, x, ldx, w, b, bias, act, alpha, rows, k, out);
                    });
            for (auto& t : th) t.join();
        }
}
