// The launch of one variant on the emulated device (scripts/tf32_tiles_emu/run.sh).
// T: the element type of w and b (float; unsigned short: binary16 bits, gemm_f16.cu).
template <typename T>
using EntryT = void (*)(float*, i64, const float*, i64, const T*, const T*, int, int, float, i64, i64, i64);
template <typename T>
struct VariantEmuT { const char* name; EntryT<T> f; int bm, bn, nt; unsigned smem; };
typedef VariantEmuT<float> VariantEmu;
typedef VariantEmuT<unsigned short> VariantEmu16;
template <typename T>
static void launch(const VariantEmuT<T>& v, float* y, i64 ldy, const float* x, i64 ldx, const T* w, const T* b,
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
