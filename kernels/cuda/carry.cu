// The carry (paper eq. 2): retention writeback of a prompt + retained-history cache, in place.
// Host twin: kernels/src/carry.rs.
//
// Layout: a cache is `outer` rows; row r starts at word r * row_stride and holds frames of
// `inner` 32-bit words each (frame f of row r at word r * row_stride + f * inner). The frame axis
// is the inner-but-one axis of e.g. (layers, 2, heads, frames, 128).
//
// One kernel for every storage order and keep rule: with the extent ℓ above head + tail it keeps
//       C[., 0:head] <- H[., 0:head]  ||  C[., head:head+tail] <- H[., ℓ-tail : ℓ]
// i.e. a head already in place and one tail window moved left by shift = ℓ - (head + tail)
// frames. The contract's `keep: {head, tail}` gives the pair: prepend storage under the paper's
// rule keeps head = retained, tail = prompt; append storage (and the vendor's slicing of prepend
// storage) keeps head = prompt, tail = retained.
//
// In place (dst == src): the head is skipped (it is already there) and the tail window is moved
// in passes of `shift` frames, one block per row, with __syncthreads() between passes. Pass p
// writes frames [head + p*shift, head + (p+1)*shift) and reads the disjoint frames `shift`
// higher; the barrier orders pass p's reads before pass p+1 overwrites them. No temporary
// buffer, no second region. When dst != src (a separate carry region) both parts are copied in
// one pass each.

// Copies words [0, cnt) of s to d, whose ranges do not overlap (within one pass they never do).
// The block's threads load DCC_COPY_BATCH words (or 16-byte vectors, `vec`: both pointers 16-byte
// aligned and cnt a multiple of 4) each before storing any, so the loads are in flight together;
// a plain `d[i] = s[i]` loop through pointers that may alias would wait for each load in turn.
// `dcc_copy_batched` is that loop over n elements of one word type (uint4 or unsigned).
#define DCC_COPY_BATCH 8
template <typename T>
__device__ __forceinline__ void dcc_copy_batched(T* d, const T* s, long long n) {
    const long long tid = threadIdx.x, nt = blockDim.x;
    for (long long i0 = 0; i0 < n; i0 += DCC_COPY_BATCH * nt) {
        T v[DCC_COPY_BATCH];
#pragma unroll
        for (int r = 0; r < DCC_COPY_BATCH; ++r) {
            const long long i = i0 + r * nt + tid;
            if (i < n) v[r] = s[i];
        }
#pragma unroll
        for (int r = 0; r < DCC_COPY_BATCH; ++r) {
            const long long i = i0 + r * nt + tid;
            if (i < n) d[i] = v[r];
        }
    }
}

__device__ __forceinline__ void dcc_copy_words(unsigned* d, const unsigned* s, long long cnt, bool vec) {
    if (vec)
        dcc_copy_batched(reinterpret_cast<uint4*>(d), reinterpret_cast<const uint4*>(s), cnt / 4);
    else
        dcc_copy_batched(d, s, cnt);
}

__device__ __forceinline__ bool dcc_aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15) == 0;
}

__device__ __forceinline__ void dcc_retain_row(unsigned* d, const unsigned* s, bool inplace, long long inner,
                                               long long head, long long tail_src, long long tail_len) {
    // Every copy below starts at a multiple of `inner` words from the row starts.
    const bool vec = inner % 4 == 0 && dcc_aligned16(d) && dcc_aligned16(s);
    if (!inplace) dcc_copy_words(d, s, head * inner, vec);
    const long long shift = tail_src - head;
    const long long pass = inplace ? shift : tail_len;
    for (long long p0 = 0; p0 < tail_len; p0 += pass) {
        const long long p1 = p0 + pass < tail_len ? p0 + pass : tail_len;
        const long long bd = (head + p0) * inner, bs = (tail_src + p0) * inner, cnt = (p1 - p0) * inner;
        dcc_copy_words(d + bd, s + bs, cnt, vec);
        __syncthreads();
    }
}

// `layers` blocks of `outer` rows: row r of layer l at word l * ls + r * rs of each side (one
// block of rows, layers = 1, for carry_retain). One block per row, grid-strided over all rows.
__device__ __forceinline__ void dcc_retain(unsigned* dst, const unsigned* src, long long layers, long long dst_ls,
                                           long long src_ls, long long outer, long long dst_rs, long long src_rs,
                                           long long inner, long long head, long long tail_src, long long tail_len) {
    const bool inplace = (const unsigned*)dst == src;
    const long long rows = layers * outer;
    for (long long q = blockIdx.x; q < rows; q += gridDim.x) {
        const long long l = q / outer, r = q - l * outer;
        dcc_retain_row(dst + l * dst_ls + r * dst_rs, src + l * src_ls + r * src_rs, inplace, inner, head, tail_src,
                       tail_len);
    }
}

// Guards (the host twin refuses the same launches with a KernelError; the runtime validates
// before launching on either backend): a negative size, count or stride, more rows than i64
// counts (LAYERED: layers · outer; one layer cannot), a tail longer than the extent, an extent
// not above head + tail (the window would not move left: an in-place pass of shift <= 0 frames
// never ends), or dst == src with different row or layer strides. Such a launch returns without
// writing. The comparisons are written so that no sum or product can overflow. Then dcc_retain.
template <bool LAYERED>
__device__ __forceinline__ void dcc_retain_checked(unsigned* dst, const unsigned* src, long long layers,
                                                   long long dst_ls, long long src_ls, long long outer,
                                                   long long dst_rs, long long src_rs, long long inner,
                                                   long long head, long long tail, long long extent) {
    if (layers < 0 || dst_ls < 0 || src_ls < 0) return;
    if (outer < 0 || dst_rs < 0 || src_rs < 0 || inner < 0 || head < 0 || tail < 0) return;
    if (LAYERED && outer > 0 && layers > 0x7fffffffffffffffLL / outer) return;
    if (tail > extent || extent - tail <= head) return;
    if ((const unsigned*)dst == src && (dst_rs != src_rs || dst_ls != src_ls)) return;
    dcc_retain(dst, src, layers, dst_ls, src_ls, outer, dst_rs, src_rs, inner, head, extent - tail, tail);
}

// One block of `outer` rows (dcc_retain_checked with one layer).
extern "C" __global__ void carry_retain(unsigned* dst, const unsigned* src, long long outer, long long dst_rs,
                                        long long src_rs, long long inner, long long head, long long tail,
                                        long long extent) {
    dcc_retain_checked<false>(dst, src, 1, 0, 0, outer, dst_rs, src_rs, inner, head, tail, extent);
}

// carry_retain over `layers` blocks of `outer` rows at layer strides `dst_ls` / `src_ls` words
// (a session's rows of every layer of a batched workspace, whose layers repeat at a stride of
// their own): row r of layer l as carry_retain's row r of a launch at dst + l * dst_ls,
// src + l * src_ls; one launch instead of one per layer, the same words moved the same way.
extern "C" __global__ void carry_retain_layers(unsigned* dst, const unsigned* src, long long layers, long long dst_ls,
                                               long long src_ls, long long outer, long long dst_rs, long long src_rs,
                                               long long inner, long long head, long long tail, long long extent) {
    dcc_retain_checked<true>(dst, src, layers, dst_ls, src_ls, outer, dst_rs, src_rs, inner, head, tail, extent);
}
