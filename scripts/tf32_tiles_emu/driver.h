// The launch of one variant on the emulated device (scripts/tf32_tiles_emu/run.sh).
// T: the element type of w and b (float; unsigned short: binary16 bits, gemm_f16.cu).
template <typename T>
using EntryT = void (*)(float*, i64, const float*, i64, const T*, const T*, int, int, float, i64, i64, i64);
template <typename T>
struct VariantEmuT { const char* name; EntryT<T> f; int bm, bn, nt; unsigned smem; int cl = 1; };
typedef VariantEmuT<float> VariantEmu;
typedef VariantEmuT<unsigned short> VariantEmu16;
// A grid of clusters of v.cl CTAs along z (grid z = v.cl), one cluster at a time, every thread of
// its CTAs at once.
template <typename T>
static void launch(const VariantEmuT<T>& v, float* y, i64 ldy, const float* x, i64 ldx, const T* w, const T* b,
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
                c->cluster = &cl;
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
