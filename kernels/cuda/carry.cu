// The carry (paper eq. 2): retention writeback of a prompt + retained-history cache, in place.
// Host twin: kernels/src/carry.rs.
//
// Layout: a cache is `outer` rows; row r starts at word r * row_stride and holds frames of
// `inner` 32-bit words each (frame f of row r at word r * row_stride + f * inner). The frame axis
// is the inner-but-one axis of e.g. (layers, 2, heads, frames, 128).
//
// Every retention keeps a head that is already in place and moves one tail window left by
// shift = extent - L frames:
//   prepend order (newest first, prompt-derived frames at the tail):
//       C[., 0:f_ret] <- H[., 0:f_ret]  ||  C[., f_ret:L] <- H[., extent-f_prompt : extent]
//   append order (prompt head, newest at the end):
//       C[., 0:f_prompt] <- H[., 0:f_prompt]  ||  C[., f_prompt:L] <- H[., extent-f_ret : extent]
//
// In place (dst == src): the head is skipped (it is already there) and the tail window is moved
// in passes of `shift` frames, one block per row, with __syncthreads() between passes. Pass p
// writes frames [head + p*shift, head + (p+1)*shift) and reads the disjoint frames `shift`
// higher; the barrier orders pass p's reads before pass p+1 overwrites them. No temporary
// buffer, no second region. When dst != src (a separate carry region) both parts are copied in
// one pass each.

__device__ __forceinline__ void dcc_retain_row(unsigned* d, const unsigned* s, bool inplace, long long inner,
                                               long long head, long long tail_src, long long tail_len) {
    const long long tid = threadIdx.x, nt = blockDim.x;
    if (!inplace) {
        for (long long i = tid; i < head * inner; i += nt) d[i] = s[i];
    }
    const long long shift = tail_src - head;
    const long long pass = inplace ? shift : tail_len;
    for (long long p0 = 0; p0 < tail_len; p0 += pass) {
        const long long p1 = p0 + pass < tail_len ? p0 + pass : tail_len;
        const long long bd = (head + p0) * inner, bs = (tail_src + p0) * inner, cnt = (p1 - p0) * inner;
        for (long long i = tid; i < cnt; i += nt) d[bd + i] = s[bs + i];
        __syncthreads();
    }
}

__device__ __forceinline__ void dcc_retain(unsigned* dst, const unsigned* src, long long outer, long long dst_rs,
                                           long long src_rs, long long inner, long long head, long long tail_src,
                                           long long tail_len) {
    const bool inplace = (const unsigned*)dst == src;
    for (long long r = blockIdx.x; r < outer; r += gridDim.x) {
        dcc_retain_row(dst + r * dst_rs, src + r * src_rs, inplace, inner, head, tail_src, tail_len);
    }
}

extern "C" __global__ void carry_prepend(unsigned* dst, const unsigned* src, long long outer, long long dst_rs,
                                         long long src_rs, long long inner, long long f_prompt,
                                         long long f_retained, long long extent) {
    dcc_retain(dst, src, outer, dst_rs, src_rs, inner, f_retained, extent - f_prompt, f_prompt);
}

extern "C" __global__ void carry_append(unsigned* dst, const unsigned* src, long long outer, long long dst_rs,
                                        long long src_rs, long long inner, long long f_prompt,
                                        long long f_retained, long long extent) {
    dcc_retain(dst, src, outer, dst_rs, src_rs, inner, f_prompt, extent - f_retained, f_retained);
}
