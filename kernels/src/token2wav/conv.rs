//! 1-D convolutions over time-major activations.
//!
//! A `Conv1d(c_in, c_out, k)` (stride 1, no padding) applied to a time-major input `x[t, c]`
//! (`t_out + k − 1` rows of `c_in` contiguous floats: the causal left context, from a cache or
//! zeros, is written in front by the caller) is
//! `y[t, o] = bias[o] + Σ_{κ<k} Σ_{c<c_in} w[o, κ, c] · x[t + κ, c]`.
//! The `k` consecutive input rows of output `t` form one contiguous run of `k·c_in` floats, so
//! the convolution is [`crate::token2wav::linear`] with `in_dim = k·c_in` and `ldx = c_in`
//! (overlapping rows), given the weight in `[o, κ, c]` order.

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
    use crate::token2wav::linear;

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
