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

// Relative-position attention (host twin: `rel_pos_attention`). Layout of the block's dynamic
// shared memory, floats: [W·d (q + u) | W·d (q + w) | W·tk (scores) | 64·(d + 1) (key/value
// tile) | (W + 63)·(d + 1) (position rows, `staged` launches only)].
//
// Score s_ij = ((q_i + u)·k_j + (q_i + w)·p_{tq−1−i+j}) / √d, both dot products ascending over c
// (`ac = ac + qu[c]·kj[c]; bd = bd + qv[c]·pr[c]`), then (ac + bd) / √d. For the W query rows
// i0 .. i0 + W of a block and the key tile j0 .. j0 + 64, the position rows paired with live
// (query, key) pairs are r0 .. r0 + W + 63, r0 = tq − i0 − W + j0 (query i, key j: row r0 +
// (i0 + W − 1 − i) + (j − j0)). A staged launch (`attention::rel_pos_dims`: the shared memory
// above, up to its opt-in limit) loads those rows coalesced with the key tile, padded to d + 1
// floats (lanes read consecutive rows: no bank conflicts); otherwise each lane reads its row
// from global memory (the launch of `attention::attention_dims`). Same operands, products and
// sums in the same order either way, whatever W: only where the position rows are read from.

// Position rows r0 .. r0 + rows of head h into pt[rr · (d + 1) + c]; rows outside
// 0 .. rend (never paired with a live query and key) read as 0. `vec`: float4 loads (d a
// multiple of 4, p 16-byte aligned), 8 per thread in flight before any store; else one float
// per load, DCC_STAGE_BATCH in flight.
template <int D>
__device__ __forceinline__ void dcc_stage_pos(float* pt, const float* p, i64 hd, i64 h, i64 r0, int rows, i64 rend,
                                              int d, bool vec) {
    const int dd = D ? D : d;
    const float* ph = p + h * dd;
    if (vec) {
        const int q4 = dd / 4;  // float4 per row
        const int total = rows * q4;
        for (int i0 = 0; i0 < total; i0 += 8 * blockDim.x) {
            float4 buf[8];
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const int idx = i0 + k * blockDim.x + threadIdx.x;
                const int rr = idx / q4, c4 = idx - rr * q4;
                const i64 r = r0 + rr;
                buf[k] = (idx < total && r >= 0 && r < rend)
                             ? *reinterpret_cast<const float4*>(ph + r * hd + 4 * c4)
                             : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const int idx = i0 + k * blockDim.x + threadIdx.x;
                const int rr = idx / q4, c4 = idx - rr * q4;
                if (idx < total) {
                    float* t = pt + rr * (dd + 1) + 4 * c4;
                    t[0] = buf[k].x;
                    t[1] = buf[k].y;
                    t[2] = buf[k].z;
                    t[3] = buf[k].w;
                }
            }
        }
    } else {
        const int total = rows * dd;
        for (int i0 = 0; i0 < total; i0 += DCC_STAGE_BATCH * blockDim.x) {
            float buf[DCC_STAGE_BATCH];
#pragma unroll
            for (int k = 0; k < DCC_STAGE_BATCH; ++k) {
                const int idx = i0 + k * blockDim.x + threadIdx.x;
                const int rr = idx / dd, c = idx - rr * dd;
                const i64 r = r0 + rr;
                buf[k] = (idx < total && r >= 0 && r < rend) ? ph[r * hd + c] : 0.0f;
            }
#pragma unroll
            for (int k = 0; k < DCC_STAGE_BATCH; ++k) {
                const int idx = i0 + k * blockDim.x + threadIdx.x;
                const int rr = idx / dd, c = idx - rr * dd;
                if (idx < total) pt[rr * (dd + 1) + c] = buf[k];
            }
        }
    }
}

// The scores of query row qu/qv against keys j0 + lane and j0 + 32 + lane from staged rows: k0,
// k1 their key rows, p0, p1 their position rows (row stride d + 1). The two keys share the
// query's broadcast loads; each key's ac and bd are the twin's sums, ascending over c.
template <int D>
__device__ __forceinline__ void dcc_rel_pos_scores(float* sw, const float* qu, const float* qv, const float* k0,
                                                   const float* p0, int stride, int j0, int tk, int d,
                                                   float denom, int lane) {
    const float* k1 = k0 + DCC_WARP * stride;
    const float* p1 = p0 + DCC_WARP * stride;
    float a0 = 0.0f, b0 = 0.0f, a1 = 0.0f, b1 = 0.0f;
    if constexpr (D != 0 && D % 4 == 0) {
        // q + u and q + w in 16-byte broadcasts (same products and sums)
#pragma unroll 4
        for (int c = 0; c < D; c += 4) {
            const float4 u4 = *reinterpret_cast<const float4*>(qu + c);
            const float4 v4 = *reinterpret_cast<const float4*>(qv + c);
            a0 = a0 + u4.x * k0[c];
            b0 = b0 + v4.x * p0[c];
            a1 = a1 + u4.x * k1[c];
            b1 = b1 + v4.x * p1[c];
            a0 = a0 + u4.y * k0[c + 1];
            b0 = b0 + v4.y * p0[c + 1];
            a1 = a1 + u4.y * k1[c + 1];
            b1 = b1 + v4.y * p1[c + 1];
            a0 = a0 + u4.z * k0[c + 2];
            b0 = b0 + v4.z * p0[c + 2];
            a1 = a1 + u4.z * k1[c + 2];
            b1 = b1 + v4.z * p1[c + 2];
            a0 = a0 + u4.w * k0[c + 3];
            b0 = b0 + v4.w * p0[c + 3];
            a1 = a1 + u4.w * k1[c + 3];
            b1 = b1 + v4.w * p1[c + 3];
        }
    } else {
        for (int c = 0; c < d; ++c) {
            const float uc = qu[c], vc = qv[c];
            a0 = a0 + uc * k0[c];
            b0 = b0 + vc * p0[c];
            a1 = a1 + uc * k1[c];
            b1 = b1 + vc * p1[c];
        }
    }
    if (j0 + lane < tk) sw[j0 + lane] = (a0 + b0) / denom;
    if (j0 + DCC_WARP + lane < tk) sw[j0 + DCC_WARP + lane] = (a1 + b1) / denom;
}

template <int D, int NT>
__device__ void dcc_rel_pos_body(float* out, const float* q, const float* pos_bias_u, const float* pos_bias_v,
                                 const float* kv, const float* p, i64 batch, i64 heads, i64 tq, int tk, int d,
                                 i64 cap, bool staged, bool vec) {
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
    float* pt = tile + DCC_TILE * (dd + 1);                 // [W + 63, d + 1] (staged)
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
            if (staged) {
                __syncthreads();  // every warp is done with the previous tile's position rows
                dcc_stage_pos<D>(pt, p, hd, h, tq - i0 - W + j0, W + DCC_TILE - 1, tq + tk - 1, dd, vec);
            }
            dcc_tile_next<D, NT>(tile, buf, base, 0, j0, more ? 0 : dd, more ? j0 + DCC_TILE : 0, tk, dd);
            if (!live) continue;
            if (staged) {
                // query i's row for key j0 + jj: (W − 1 − w) + jj of the staged rows
                dcc_rel_pos_scores<D>(sw, qu, qv, tile + lane * (dd + 1), pt + (W - 1 - w + lane) * (dd + 1),
                                      dd + 1, j0, tk, dd, denom, lane);
                continue;
            }
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
    // Staged position rows when the launch gave room for them (`attention::rel_pos_dims`).
    const i64 W = blockDim.x / DCC_WARP;
    const bool staged = (i64)dcc_dyn_smem_bytes() >= (2 * W * d + W * tk + (2 * DCC_TILE + W - 1) * (d + 1)) * 4;
    const bool vec = d % 4 == 0 && (reinterpret_cast<unsigned long long>(p) & 15) == 0;
    switch (d) {
        case 32: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 32, out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, 32, cap, staged, vec); break;
        case 64: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 64, out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, 64, cap, staged, vec); break;
        case 128: DCC_ATTN_DISPATCH(dcc_rel_pos_body, 128, out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, 128, cap, staged, vec); break;
        default: dcc_rel_pos_body<0, 0>(out, q, pos_bias_u, pos_bias_v, kv, p, batch, heads, tq, (int)tk, (int)d, cap, staged, vec); break;
    }
}
