// Attention: scaled dot-product (attention_sdpa) and the conformer's relative-position attention
// (attention_rel_pos). Host twins: kernels/src/attention.rs. Prepended with common.cuh and
// attention_body.cuh (the staging, softmax and SDPA body, templated on the cache's element type,
// and the description of the launch).

// Synchronous staging for every block size. The register-pipelined staging (NT =
// DCC_PIPE_THREADS) is bit-equal but was measured slower on the H200: it needs ~170 registers (one
// 256-thread block per SM; the prompt call's 624 blocks then run in 5 waves), and capping it at
// 128 with launch bounds spills (DiT chunk 44.8 µs vs 37.4 µs synchronous). Kept for a later
// cp.async double-buffered variant; not instantiated.
#define DCC_ATTN_DISPATCH(BODY, D, ...) BODY<D, 0>(__VA_ARGS__);

extern "C" __global__ void attention_sdpa(float* out, const float* q, const float* kv, i64 batch, i64 heads, i64 tq,
                                          i64 tk, i64 d, i64 cap, float scale) {
    dcc_check_attention_launch(tk, d);
    // Resident when the launch gave room for every key frame (rounded up to whole tiles).
    const i64 W = blockDim.x / DCC_WARP;
    const i64 rows = (tk + DCC_TILE - 1) / DCC_TILE * DCC_TILE;
    const bool res = (i64)dcc_dyn_smem_bytes() >= (2 * W * d + W * tk + rows * (d + 1)) * 4 &&
                     (d % 4 != 0 || (reinterpret_cast<unsigned long long>(kv) & 15) == 0);
    switch (d) {
        case 32: DCC_ATTN_DISPATCH(dcc_attention_body, 32, out, q, kv, batch, heads, tq, (int)tk, 32, cap, scale, res); break;
        case 64: DCC_ATTN_DISPATCH(dcc_attention_body, 64, out, q, kv, batch, heads, tq, (int)tk, 64, cap, scale, res); break;
        case 128: DCC_ATTN_DISPATCH(dcc_attention_body, 128, out, q, kv, batch, heads, tq, (int)tk, 128, cap, scale, res); break;
        default: dcc_attention_body<0, 0>(out, q, kv, batch, heads, tq, (int)tk, (int)d, cap, scale, res); break;
    }
}

template <int D, int NT>
__device__ void dcc_rel_pos_body(float* out, const float* q, const float* pos_bias_u, const float* pos_bias_v,
                                 const float* kv, const float* p, i64 batch, i64 heads, i64 tq, int tk, int d,
                                 i64 cap) {
    constexpr int K = (D ? D : DCC_MAX_HEAD_DIM) / DCC_WARP;
    const int dd = D ? D : d;
    const int W = blockDim.x / DCC_WARP;
    const int lane = threadIdx.x % DCC_WARP, w = threadIdx.x / DCC_WARP;
    const i64 hd = heads * dd;
    const float denom = (float)sqrt((double)dd);
    float* qu = dcc_smem + w * dd;                          // [W, d]: q + u
    float* qv = dcc_smem + W * dd + w * dd;                 // [W, d]: q + w
    float* sw = dcc_smem + 2 * W * dd + w * tk;             // [W, tk]
    float* tile = dcc_smem + 2 * W * dd + W * tk;           // [64, d + 1]
    const i64 tiles = (tq + W - 1) / W;
    float buf[DccPipe<D, NT>::R];
    // Units are (batch entry, head, query tile): entry b's queries and output are rows b·tq..
    // of q and out, its keys and values cache row (b, h); the positions and biases are shared.
    for (i64 unit = blockIdx.x; unit < batch * heads * tiles; unit += gridDim.x) {
        const i64 i0 = (unit % tiles) * W, bh = unit / tiles, h = bh % heads;
        const i64 i = i0 + w;
        const bool live = i < tq;
        const i64 row = (bh / heads) * tq + i;
        const float* base = kv + bh * cap * 2 * dd;
        dcc_fetch<D, NT>(buf, base, 0, 0, tk);
        if (live) {
            const float* qi = q + row * hd + h * dd;
            for (int c = lane; c < dd; c += DCC_WARP) {
                qu[c] = qi[c] + pos_bias_u[h * dd + c];
                qv[c] = qi[c] + pos_bias_v[h * dd + c];
            }
        }
        __syncwarp();
        for (int j0 = 0; j0 < tk; j0 += DCC_TILE) {
            const bool more = j0 + DCC_TILE < tk;
            dcc_tile_next<D, NT>(tile, buf, base, 0, j0, more ? 0 : dd, more ? j0 + DCC_TILE : 0, tk, dd);
            if (live) {
#pragma unroll
                for (int t = 0; t < DCC_TILE / DCC_WARP; ++t) {
                    const int j = j0 + t * DCC_WARP + lane;
                    if (j < tk) {
                        const float* kj = tile + (t * DCC_WARP + lane) * (dd + 1);
                        const float* pr = p + (tq - 1 - i + j) * hd + h * dd;
                        float ac = 0.0f, bd = 0.0f;
#pragma unroll
                        for (int c = 0; c < dd; ++c) {
                            ac = ac + qu[c] * kj[c];
                            bd = bd + qv[c] * pr[c];
                        }
                        sw[j] = (ac + bd) / denom;
                    }
                }
            }
        }
        __syncwarp();
        const float sum = dcc_softmax_row(sw, tk, lane);
        const float inv = 1.0f / sum;
        float acc[K];
        dcc_weighted_values<D, NT, true>(acc, buf, sw, inv, tile, base, tk, dd, live, lane);
        if (live) {
            float* o = out + row * hd + h * dd;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const int c = lane + k * DCC_WARP;
                if (D || c < dd) o[c] = acc[k];
            }
        }
    }
}

extern "C" __global__ void attention_rel_pos(float* out, const float* q, const float* pos_bias_u,
                                             const float* pos_bias_v, const float* kv, const float* p, i64 batch,
                                             i64 heads, i64 tq, i64 tk, i64 d, i64 cap) {
    dcc_check_attention_launch(tk, d);
    switch (d) {
        case 32: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 32, out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, 32, cap); break;
        case 64: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 64, out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, 64, cap); break;
        case 128: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 128, out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, 128, cap); break;
        default: dcc_rel_pos_body<0, 0>(out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, (int)d, cap); break;
    }
}
