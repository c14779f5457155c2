//! Matrix products and 1-D convolutions as matrix products, on the host. No kernel of this crate
//! computes them: on a device every `Linear` and every convolution is the runtime's
//! `Backend::gemm` (cuBLAS). These are the plain ordered loops (the reference arithmetic of a
//! one-thread-per-output-element SGEMM): `acc = Σ_k a·b` summed for k = 0, 1, … in order, then
//! the epilogue (`alpha`, `beta`, bias) applied once.
//!
//! A `Conv1d(c_in, c_out, k)` (stride 1, no padding) applied to a time-major input `x[t, c]`
//! (`t_out + k − 1` rows of `c_in` contiguous floats: the causal left context, from a cache or
//! zeros, is written in front by the caller) is
//! `y[t, o] = bias[o] + Σ_{κ<k} Σ_{c<c_in} w[o, κ, c] · x[t + κ, c]`.
//! The `k` consecutive input rows of output `t` form one contiguous run of `k·c_in` floats, so
//! the convolution is [`linear`] with `in_dim = k·c_in` and `ldx = c_in` (overlapping rows),
//! given the weight in `[o, κ, c]` order ([`conv_weight_okc`]).
#![allow(clippy::too_many_arguments)]

/// Row-major GEMM: `C[i, j] = alpha · Σ_k opA[i, k] · opB[k, j] + beta · C[i, j]`.
///
/// `opA = A` (`A[i, k]` at `a[i·lda + k]`) or, with `trans_a`, `Aᵀ` (`a[k·lda + i]`);
/// `opB = B` (`b[k·ldb + j]`) or, with `trans_b`, `Bᵀ` (`b[j·ldb + k]`).
/// With `beta == 0` the previous content of `C` is not read (as BLAS).
/// Launch: one thread per `(i, j)`, grid `m × n`.
pub fn gemm(
    trans_a: bool,
    trans_b: bool,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    lda: usize,
    b: &[f32],
    ldb: usize,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
) {
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0.0f32;
            for kk in 0..k {
                let av = if trans_a {
                    a[kk * lda + i]
                } else {
                    a[i * lda + kk]
                };
                let bv = if trans_b {
                    b[j * ldb + kk]
                } else {
                    b[kk * ldb + j]
                };
                acc += av * bv;
            }
            let out = &mut c[i * ldc + j];
            *out = if beta == 0.0 {
                alpha * acc
            } else {
                alpha * acc + beta * *out
            };
        }
    }
}

/// `torch.nn.Linear` (also every convolution, see the module docs): `Y[r, o] = Σ_i X[r, i] · W[o, i] + bias[o]`.
///
/// `X[r, i]` at `x[r·ldx + i]` (rows may overlap: a causal conv passes `ldx = channels` and
/// `in_dim = k · channels`), `W` is `[out_dim, in_dim]` row-major, `Y[r, o]` at `y[r·ldy + o]`.
/// The dot product is summed sequentially over `i`; the bias is added once at the end
/// (`addmm` order). Launch: one thread per `(r, o)`, grid `rows × out_dim`.
pub fn linear(
    rows: usize,
    in_dim: usize,
    out_dim: usize,
    x: &[f32],
    ldx: usize,
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    ldy: usize,
) {
    assert!(w.len() >= out_dim * in_dim, "linear: weight too small");
    if rows == 0 {
        return;
    }
    assert!(
        x.len() >= (rows - 1) * ldx + in_dim,
        "linear: input too small"
    );
    assert!(
        y.len() >= (rows - 1) * ldy + out_dim,
        "linear: output too small"
    );
    for r in 0..rows {
        let xr = &x[r * ldx..r * ldx + in_dim];
        let yr = &mut y[r * ldy..r * ldy + out_dim];
        for (o, yo) in yr.iter_mut().enumerate() {
            let wr = &w[o * in_dim..(o + 1) * in_dim];
            let mut acc = 0.0f32;
            for (xv, wv) in xr.iter().zip(wr) {
                acc += xv * wv;
            }
            *yo = match bias {
                Some(b) => acc + b[o],
                None => acc,
            };
        }
    }
}

/// Re-lay a torch `Conv1d` weight `[c_out, c_in, k]` as `[c_out, k, c_in]` (done once at load).
pub fn conv_weight_okc(w: &[f32], c_out: usize, c_in: usize, k: usize) -> Vec<f32> {
    assert_eq!(w.len(), c_out * c_in * k);
    let mut out = vec![0.0f32; w.len()];
    for o in 0..c_out {
        for c in 0..c_in {
            for kk in 0..k {
                out[(o * k + kk) * c_in + c] = w[(o * c_in + c) * k + kk];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_all_transposes_agree() {
        // A 2x3, B 3x2
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let at = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
        let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let bt = [7.0, 9.0, 11.0, 8.0, 10.0, 12.0];
        let want = [58.0, 64.0, 139.0, 154.0];
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut c = [0.0; 4];
            let (aa, lda) = if ta { (&at[..], 2) } else { (&a[..], 3) };
            let (bb, ldb) = if tb { (&bt[..], 3) } else { (&b[..], 2) };
            gemm(ta, tb, 2, 2, 3, 1.0, aa, lda, bb, ldb, 0.0, &mut c, 2);
            assert_eq!(c, want, "ta={ta} tb={tb}");
        }
        let mut c = [1.0; 4];
        gemm(false, false, 2, 2, 3, 2.0, &a, 3, &b, 2, 0.5, &mut c, 2);
        assert_eq!(c, [116.5, 128.5, 278.5, 308.5]);
    }

    #[test]
    fn linear_matches_gemm_plus_bias() {
        let x = [1.0, -2.0, 0.5, 3.0, 0.25, -1.0];
        let w = [0.5, 1.0, -1.0, 2.0, 0.0, 1.0];
        let b = [0.1, -0.2];
        let mut y = [0.0; 4];
        linear(2, 3, 2, &x, 3, &w, Some(&b), &mut y, 2);
        let mut g = [0.0; 4];
        gemm(false, true, 2, 2, 3, 1.0, &x, 3, &w, 3, 0.0, &mut g, 2);
        for i in 0..4 {
            assert_eq!(y[i], g[i] + b[i % 2]);
        }
        // overlapping rows (conv-style): rows of width 4 advancing by 2
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let w = [1.0, 1.0, 1.0, 1.0];
        let mut y = [0.0; 2];
        linear(2, 4, 1, &x, 2, &w, None, &mut y, 1);
        assert_eq!(y, [10.0, 18.0]);
    }

    #[test]
    fn conv_as_linear_matches_direct_conv() {
        let (c_in, c_out, k, t_out) = (3, 2, 3, 4);
        let w: Vec<f32> = (0..c_out * c_in * k)
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        let b = [0.5, -0.25];
        let x: Vec<f32> = (0..(t_out + k - 1) * c_in)
            .map(|i| (i as f32 * 0.11).cos())
            .collect();
        let wt = conv_weight_okc(&w, c_out, c_in, k);
        let mut y = vec![0.0; t_out * c_out];
        linear(
            t_out,
            k * c_in,
            c_out,
            &x,
            c_in,
            &wt,
            Some(&b),
            &mut y,
            c_out,
        );
        for t in 0..t_out {
            for o in 0..c_out {
                let mut want = 0.0f64;
                for c in 0..c_in {
                    for kk in 0..k {
                        want += (w[(o * c_in + c) * k + kk] * x[(t + kk) * c_in + c]) as f64;
                    }
                }
                want += b[o] as f64;
                assert!((y[t * c_out + o] as f64 - want).abs() < 1e-5);
            }
        }
    }
}
