//! Row normalisations. Launch: one warp per row; the row statistics are reduced in the kernels'
//! warp order ([`warp_sum`]: 32 lane-strided partial sums, then a fixed tree), no atomics.

use super::math::warp_sum;

/// Mean and `1 / sqrt(var + eps)` of one row (two passes: mean, then centred squares).
#[inline]
fn moments(row: &[f32], eps: f32) -> (f32, f32) {
    let n = row.len() as f32;
    let s = warp_sum(row.len(), |j| row[j]);
    let mean = s / n;
    let q = warp_sum(row.len(), |j| {
        let d = row[j] - mean;
        d * d
    });
    let var = q / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// `torch.nn.LayerNorm` over the last `dim` elements of each of `rows` rows:
/// `y = (x · rstd − mean · rstd) · gamma + beta` (torch's CPU kernel form); `gamma`/`beta`
/// absent = `elementwise_affine=False`. `x[r, :]` at `x[r·ldx..]`, `y[r, :]` at `y[r·ldy..]`.
pub fn layer_norm(
    rows: usize,
    dim: usize,
    x: &[f32],
    ldx: usize,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
    ldy: usize,
) {
    for r in 0..rows {
        let xr = &x[r * ldx..r * ldx + dim];
        let (mean, rstd) = moments(xr, eps);
        let bias = -mean * rstd;
        let yr = &mut y[r * ldy..r * ldy + dim];
        for j in 0..dim {
            let mut v = xr[j] * rstd + bias;
            if let Some(g) = gamma {
                v *= g[j];
            }
            if let Some(b) = beta {
                v += b[j];
            }
            yr[j] = v;
        }
    }
}

/// DiT's `modulate(norm(x), shift, scale)`: non-affine LayerNorm followed by
/// `y = n · (1 + scale) + shift`, `shift`/`scale` broadcast over rows (`[dim]` each).
pub fn layer_norm_modulate(
    rows: usize,
    dim: usize,
    x: &[f32],
    eps: f32,
    shift: &[f32],
    scale: &[f32],
    y: &mut [f32],
) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let (mean, rstd) = moments(xr, eps);
        let bias = -mean * rstd;
        let yr = &mut y[r * dim..(r + 1) * dim];
        for j in 0..dim {
            let n = xr[j] * rstd + bias;
            yr[j] = n * (1.0 + scale[j]) + shift[j];
        }
    }
}

/// `F.normalize(x, dim=1)` of each row: `x / max(‖x‖₂, eps)`.
pub fn l2_normalize(rows: usize, dim: usize, x: &[f32], eps: f32, y: &mut [f32]) {
    for r in 0..rows {
        let xr = &x[r * dim..(r + 1) * dim];
        let s = warp_sum(dim, |j| xr[j] * xr[j]);
        let norm = s.sqrt().max(eps);
        for (o, v) in y[r * dim..(r + 1) * dim].iter_mut().zip(xr) {
            *o = v / norm;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_basic() {
        let x = [1.0, 2.0, 3.0, 4.0, -1.0, -1.0, -1.0, -1.0];
        let mut y = [0.0; 8];
        layer_norm(2, 4, &x, 4, None, None, 0.0, &mut y, 4);
        let s = 1.0 / 1.25f32.sqrt();
        let want = [-1.5 * s, -0.5 * s, 0.5 * s, 1.5 * s];
        for j in 0..4 {
            assert!((y[j] - want[j]).abs() < 1e-6);
        }
        // constant row with eps: zero output
        let mut y2 = [9.0; 8];
        layer_norm(
            2,
            4,
            &x,
            4,
            Some(&[2.0; 4]),
            Some(&[0.5; 4]),
            1e-5,
            &mut y2,
            4,
        );
        assert!(y2[4..].iter().all(|v| (*v - 0.5).abs() < 1e-6));
    }

    #[test]
    fn modulate_matches_layer_norm() {
        let x = [0.3, -1.2, 2.5, 0.1, 0.7, 0.0];
        let shift = [0.1, 0.2, 0.3];
        let scale = [-0.5, 0.0, 1.0];
        let mut a = [0.0; 6];
        let mut b = [0.0; 6];
        layer_norm(2, 3, &x, 3, None, None, 1e-6, &mut a, 3);
        layer_norm_modulate(2, 3, &x, 1e-6, &shift, &scale, &mut b);
        for i in 0..6 {
            assert_eq!(b[i], a[i] * (1.0 + scale[i % 3]) + shift[i % 3]);
        }
    }

    #[test]
    fn l2_normalize_unit() {
        let mut y = [0.0; 2];
        l2_normalize(1, 2, &[3.0, 4.0], 1e-12, &mut y);
        assert_eq!(y, [0.6, 0.8]);
        l2_normalize(1, 2, &[0.0, 0.0], 1e-12, &mut y);
        assert_eq!(y, [0.0, 0.0]);
    }
}
