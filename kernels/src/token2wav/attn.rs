//! Attention kernels. Launch: one warp per `(batch, head, query row)` (several rows of one head
//! per block, sharing key/value tiles in shared memory, see `defs::attention_dims`); the warp
//! computes the score row (each dot product ascending over the head dimension), its max, the
//! exp-sum in the warp order ([`warp_sum`]), then the weighted value sum (ascending over keys).
//! No atomics; the order is fixed.

use super::math::{exp_f32, warp_sum};

/// Strided view of a 4-D `(batch, head, time, d)` tensor with `d` contiguous:
/// element `(b, h, t, j)` lives at `offset + b·batch + h·head + t·time + j`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnLayout {
    pub offset: usize,
    pub batch: usize,
    pub head: usize,
    pub time: usize,
}

impl AttnLayout {
    /// `[batch, time, heads·d]` row-major (the output of a Linear, split into heads).
    pub fn rows(time: usize, heads: usize, d: usize) -> Self {
        Self {
            offset: 0,
            batch: time * heads * d,
            head: d,
            time: heads * d,
        }
    }

    /// The vendor cache layout `[batch, heads, time, 2·d]`: keys in `[0, d)`, values in `[d, 2d)`
    /// of the last axis (`value = true` selects the values).
    pub fn kv_cache(heads: usize, time: usize, d: usize, value: bool) -> Self {
        Self {
            offset: if value { d } else { 0 },
            batch: heads * time * 2 * d,
            head: time * 2 * d,
            time: 2 * d,
        }
    }

    #[inline]
    pub fn at(&self, b: usize, h: usize, t: usize) -> usize {
        self.offset + b * self.batch + h * self.head + t * self.time
    }
}

#[inline]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        acc += x * y;
    }
    acc
}

/// `F.scaled_dot_product_attention(q, k, v)` without mask (the DiT estimator, all queries see
/// all keys): `out[b,h,i,:] = Σ_j e_ij · v[b,h,j,:] / Σ_j e_ij`, `e_ij = exp(s_ij − max_j s_ij)`,
/// `s_ij = scale · q[b,h,i,:]·k[b,h,j,:]` (flash-attention order: normalise at the end).
pub fn attention(
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    scale: f32,
    q: &[f32],
    ql: AttnLayout,
    k: &[f32],
    kl: AttnLayout,
    v: &[f32],
    vl: AttnLayout,
    out: &mut [f32],
    ol: AttnLayout,
) {
    let mut s = vec![0.0f32; tk];
    let mut acc = vec![0.0f32; d];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..tq {
                let qi = &q[ql.at(b, h, i)..ql.at(b, h, i) + d];
                let mut m = f32::NEG_INFINITY;
                for (j, sj) in s.iter_mut().enumerate() {
                    let kj = &k[kl.at(b, h, j)..kl.at(b, h, j) + d];
                    *sj = scale * dot(qi, kj);
                    m = m.max(*sj);
                }
                for sj in s.iter_mut() {
                    *sj = exp_f32(*sj - m);
                }
                let sum = warp_sum(tk, |j| s[j]);
                acc.fill(0.0);
                for (j, &e) in s.iter().enumerate() {
                    let vj = &v[vl.at(b, h, j)..vl.at(b, h, j) + d];
                    for (a, x) in acc.iter_mut().zip(vj) {
                        *a += e * x;
                    }
                }
                let o = &mut out[ol.at(b, h, i)..ol.at(b, h, i) + d];
                for (oo, a) in o.iter_mut().zip(&acc) {
                    *oo = a / sum;
                }
            }
        }
    }
}

/// Relative-position self-attention of the conformer (`RelPositionMultiHeadedAttention`, batch 1,
/// no mask, Transformer-XL scores with ESPnet's `rel_shift`):
///
/// `s_ij = ((q_i + u)·k_j + (q_i + w)·p_{tq−1−i+j}) / √d`, `attn = softmax_j(s)`,
/// `out_i = Σ_j attn_ij · v_j`,
///
/// with `q` `[tq, heads·d]` (row stride `ldq`), `u = pos_bias_u`, `w = pos_bias_v` `[heads, d]`,
/// keys/values in the vendor cache layout `[heads, cap, 2d]` of which frames `0..tk` are used
/// (append-ordered: the query `i` is the key `tk − tq + i`), `p = linear_pos(pos_emb)` `[2tk − 1, heads·d]` (row `r` ↔ relative
/// position `tk − 1 − r`), `out` `[tq, heads·d]`. The softmax multiplies by `1 / Σ` (torch's
/// CPU softmax).
pub fn rel_pos_attention(
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    cap: usize,
    q: &[f32],
    ldq: usize,
    pos_bias_u: &[f32],
    pos_bias_v: &[f32],
    kv: &[f32],
    p: &[f32],
    out: &mut [f32],
    ldo: usize,
) {
    assert!(tq <= tk && tq > 0 && tk <= cap);
    let hd = heads * d;
    let kl = AttnLayout::kv_cache(heads, cap, d, false);
    let vl = AttnLayout::kv_cache(heads, cap, d, true);
    let denom = (d as f64).sqrt() as f32;
    let mut qu = vec![0.0f32; d];
    let mut qv = vec![0.0f32; d];
    let mut s = vec![0.0f32; tk];
    let mut acc = vec![0.0f32; d];
    for h in 0..heads {
        let u = &pos_bias_u[h * d..(h + 1) * d];
        let w = &pos_bias_v[h * d..(h + 1) * d];
        for i in 0..tq {
            let qi = &q[i * ldq + h * d..i * ldq + (h + 1) * d];
            for c in 0..d {
                qu[c] = qi[c] + u[c];
                qv[c] = qi[c] + w[c];
            }
            let mut m = f32::NEG_INFINITY;
            for (j, sj) in s.iter_mut().enumerate() {
                let kj = &kv[kl.at(0, h, j)..kl.at(0, h, j) + d];
                let r = tq - 1 - i + j;
                let pr = &p[r * hd + h * d..r * hd + (h + 1) * d];
                *sj = (dot(&qu, kj) + dot(&qv, pr)) / denom;
                m = m.max(*sj);
            }
            for sj in s.iter_mut() {
                *sj = exp_f32(*sj - m);
            }
            let sum = warp_sum(tk, |j| s[j]);
            let inv = 1.0 / sum;
            acc.fill(0.0);
            for (j, sj) in s.iter().enumerate() {
                let pj = sj * inv;
                let vj = &kv[vl.at(0, h, j)..vl.at(0, h, j) + d];
                for (a, x) in acc.iter_mut().zip(vj) {
                    *a += pj * x;
                }
            }
            out[i * ldo + h * d..i * ldo + (h + 1) * d].copy_from_slice(&acc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive reference: explicit score matrix, softmax, matmul.
    fn naive(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        tq: usize,
        tk: usize,
        d: usize,
        scale: f32,
    ) -> Vec<f32> {
        let mut out = vec![0.0; tq * d];
        for i in 0..tq {
            let s: Vec<f64> = (0..tk)
                .map(|j| {
                    (0..d)
                        .map(|c| (q[i * d + c] * k[j * d + c]) as f64)
                        .sum::<f64>()
                        * scale as f64
                })
                .collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = e.iter().sum();
            for c in 0..d {
                out[i * d + c] =
                    (0..tk).map(|j| e[j] / z * v[j * d + c] as f64).sum::<f64>() as f32;
            }
        }
        out
    }

    fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn sdpa_matches_naive() {
        let (tq, tk, d) = (3, 5, 4);
        let q = pseudo(tq * d, 1);
        let k = pseudo(tk * d, 2);
        let v = pseudo(tk * d, 3);
        let mut out = vec![0.0; tq * d];
        let l = AttnLayout::rows;
        attention(
            1,
            1,
            tq,
            tk,
            d,
            0.5,
            &q,
            l(tq, 1, d),
            &k,
            l(tk, 1, d),
            &v,
            l(tk, 1, d),
            &mut out,
            l(tq, 1, d),
        );
        let want = naive(&q, &k, &v, tq, tk, d, 0.5);
        for (a, b) in out.iter().zip(&want) {
            assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        }
    }

    #[test]
    fn rel_pos_attention_with_zero_pos_is_plain_attention() {
        // With p = 0 and u = 0 the rel-pos scores reduce to q·k / √d.
        let (h, tq, tk, d) = (2, 2, 4, 4);
        let q = pseudo(tq * h * d, 4);
        let kvh: Vec<Vec<f32>> = (0..h).map(|i| pseudo(tk * 2 * d, 10 + i as u32)).collect();
        let kv: Vec<f32> = kvh.concat();
        let p = vec![0.0; (2 * tk - 1) * h * d];
        let u = vec![0.0; h * d];
        let w = pseudo(h * d, 7);
        let mut out = vec![0.0; tq * h * d];
        rel_pos_attention(
            h,
            tq,
            tk,
            d,
            tk,
            &q,
            h * d,
            &u,
            &w,
            &kv,
            &p,
            &mut out,
            h * d,
        );
        for hh in 0..h {
            let qh: Vec<f32> = (0..tq)
                .flat_map(|i| q[i * h * d + hh * d..i * h * d + (hh + 1) * d].to_vec())
                .collect();
            let kh: Vec<f32> = (0..tk)
                .flat_map(|j| kvh[hh][j * 2 * d..j * 2 * d + d].to_vec())
                .collect();
            let vh: Vec<f32> = (0..tk)
                .flat_map(|j| kvh[hh][j * 2 * d + d..(j + 1) * 2 * d].to_vec())
                .collect();
            let want = naive(&qh, &kh, &vh, tq, tk, d, 1.0 / 2.0);
            for i in 0..tq {
                for c in 0..d {
                    let a = out[i * h * d + hh * d + c];
                    assert!((a - want[i * d + c]).abs() < 1e-6);
                }
            }
        }
    }

    #[test]
    fn rel_shift_index_is_relative_position() {
        // One head, d = 1, q = 0, k = 0, u = w = 1: s_ij = p[tq-1-i+j] / 1. Put a spike at the
        // row of relative position (query_abs - key_abs) = 1 and check every query attends most to
        // its predecessor.
        let (tq, tk) = (2, 4);
        let q = vec![0.0; tq];
        let kv = {
            let mut kv = vec![0.0; tk * 2];
            for j in 0..tk {
                kv[2 * j + 1] = j as f32; // value = key index
            }
            kv
        };
        let mut p = vec![0.0; 2 * tk - 1];
        p[tk - 1 - 1] = 30.0; // row r ↔ relative position tk-1-r = 1
        let mut out = vec![0.0; tq];
        rel_pos_attention(
            1,
            tq,
            tk,
            1,
            tk,
            &q,
            1,
            &[1.0],
            &[1.0],
            &kv,
            &p,
            &mut out,
            1,
        );
        // query i has absolute position tk - tq + i; its predecessor is key tk - tq + i - 1
        for (i, o) in out.iter().enumerate() {
            assert!((o - (tk - tq + i - 1) as f32).abs() < 1e-6, "{i}: {o}");
        }
    }
}
