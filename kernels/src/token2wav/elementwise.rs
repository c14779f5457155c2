//! Elementwise, copy and gather ops. Launch: one thread per output element.

use super::math::{exp_f32, mish_f32, tanh_f32};

/// `torch.nn.SiLU` in place: `x / (1 + exp(−x))`.
pub fn silu_inplace(x: &mut [f32]) {
    for v in x {
        *v = *v / (1.0 + exp_f32(-*v));
    }
}

/// `torch.nn.Mish` in place: `x · tanh(log1p(exp(x)))` ([`mish_f32`]).
pub fn mish_inplace(x: &mut [f32]) {
    for v in x {
        *v = mish_f32(*v);
    }
}

/// `torch.nn.GELU(approximate="tanh")` in place:
/// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`.
pub fn gelu_tanh_inplace(x: &mut [f32]) {
    /// √(2/π) rounded to float (the CUDA kernel spells the same bits).
    const BETA: f32 = f32::from_bits(0x3f4c_422a);
    const KAPPA: f32 = 0.044715;
    for v in x {
        let x = *v;
        let cube = x * x * x;
        let inner = BETA * (x + KAPPA * cube);
        *v = 0.5 * x * (1.0 + tanh_f32(inner));
    }
}

/// `F.leaky_relu` (slope 0.01) in place.
pub fn leaky_relu_inplace(x: &mut [f32], slope: f32) {
    for v in x {
        if *v <= 0.0 {
            *v *= slope;
        }
    }
}

/// `x *= s`.
pub fn scale_inplace(x: &mut [f32], s: f32) {
    for v in x {
        *v *= s;
    }
}

/// `x += y` elementwise.
pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    assert_eq!(x.len(), y.len());
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Residual with a per-column gate (adaLN-Zero): `x[r, j] += gate[j] · y[r, j]`, `rows × dim`.
pub fn gated_add(rows: usize, dim: usize, x: &mut [f32], gate: &[f32], y: &[f32]) {
    for r in 0..rows {
        let xr = &mut x[r * dim..(r + 1) * dim];
        let yr = &y[r * dim..(r + 1) * dim];
        for j in 0..dim {
            xr[j] += gate[j] * yr[j];
        }
    }
}

/// Classifier-free guidance and one Euler step of the CFM solver, fused:
/// `x += dt · ((1 + cfg) · d_cond − cfg · d_uncond)`.
pub fn cfg_euler_step(x: &mut [f32], d_cond: &[f32], d_uncond: &[f32], cfg: f32, dt: f32) {
    assert!(x.len() == d_cond.len() && x.len() == d_uncond.len());
    let a = 1.0 + cfg;
    for i in 0..x.len() {
        let d = a * d_cond[i] - cfg * d_uncond[i];
        x[i] += dt * d;
    }
}

/// Copy a `rows × cols` block: `dst[r·ldd + j] = src[r·lds + j]` (concat into an offset:
/// pass `dst` already advanced to the column/row offset).
pub fn copy_block(rows: usize, cols: usize, src: &[f32], lds: usize, dst: &mut [f32], ldd: usize) {
    for r in 0..rows {
        dst[r * ldd..r * ldd + cols].copy_from_slice(&src[r * lds..r * lds + cols]);
    }
}

/// Fill a `rows × cols` block with `value`.
pub fn fill_block(rows: usize, cols: usize, dst: &mut [f32], ldd: usize, value: f32) {
    for r in 0..rows {
        dst[r * ldd..r * ldd + cols].fill(value);
    }
}

/// Broadcast one row over `rows` rows of a block: `dst[r·ldd + j] = v[j]`.
pub fn broadcast_row(rows: usize, cols: usize, v: &[f32], dst: &mut [f32], ldd: usize) {
    for r in 0..rows {
        dst[r * ldd..r * ldd + cols].copy_from_slice(&v[..cols]);
    }
}

/// `out[c, r] = x[r, c]` for an `rows × cols` input (`x` with leading dimension `ldx`,
/// `out` with leading dimension `ldo`).
pub fn transpose(rows: usize, cols: usize, x: &[f32], ldx: usize, out: &mut [f32], ldo: usize) {
    for r in 0..rows {
        for c in 0..cols {
            out[c * ldo + r] = x[r * ldx + c];
        }
    }
}

/// Nearest-neighbour upsampling along time (`F.interpolate(mode="nearest")` with an integer
/// factor) of a time-major `rows × cols` block: `out[r, :] = x[r / factor, :]`.
pub fn repeat_rows(rows: usize, cols: usize, factor: usize, x: &[f32], out: &mut [f32]) {
    for r in 0..rows * factor {
        let s = r / factor;
        out[r * cols..(r + 1) * cols].copy_from_slice(&x[s * cols..(s + 1) * cols]);
    }
}

/// Writes `t` new key/value rows into a `[batch, heads, cap, 2d]` cache at frames `t0..t0 + t`:
/// `cache[b, h, t0 + i, 0..d] = k[(b·t + i)·ld + h·d ..]`, `cache[b, h, t0 + i, d..2d] = v[…]`.
pub fn kv_pack(
    cache: &mut [f32],
    cap: usize,
    t0: usize,
    k: &[f32],
    v: &[f32],
    ld: usize,
    batch: usize,
    heads: usize,
    t: usize,
    d: usize,
) {
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..t {
                let dst = ((b * heads + h) * cap + t0 + i) * 2 * d;
                let src = (b * t + i) * ld + h * d;
                cache[dst..dst + d].copy_from_slice(&k[src..src + d]);
                cache[dst + d..dst + 2 * d].copy_from_slice(&v[src..src + d]);
            }
        }
    }
}

/// `nn.Embedding`: `out[t, :] = table[ids[t], :]`. Returns the first out-of-range id as an error.
pub fn embedding_gather(
    table: &[f32],
    dim: usize,
    ids: &[u32],
    out: &mut [f32],
) -> Result<(), u32> {
    let vocab = table.len() / dim;
    for (t, &id) in ids.iter().enumerate() {
        let i = id as usize;
        if i >= vocab {
            return Err(id);
        }
        out[t * dim..(t + 1) * dim].copy_from_slice(&table[i * dim..(i + 1) * dim]);
    }
    Ok(())
}

/// The retention carry along one time axis: for each of `outer` slices of a tensor
/// `[outer, t_src, inner]`, `dst[o, :, :] = src[o, s0.start..s0.end, :] ‖ src[o, s1.start..s1.end, :] ‖ …`
/// where `dst` is `[outer, t_dst, inner]` with `t_dst = Σ segment lengths` (a strided copy; the
/// CUDA twin maps one thread per destination element and computes its source index).
pub fn gather_time_segments(
    outer: usize,
    t_src: usize,
    inner: usize,
    segments: &[std::ops::Range<usize>],
    src: &[f32],
    dst: &mut [f32],
) {
    let t_dst: usize = segments.iter().map(|s| s.len()).sum();
    for o in 0..outer {
        let mut td = 0;
        for s in segments {
            assert!(s.end <= t_src, "gather_time_segments: segment out of range");
            let from = (o * t_src + s.start) * inner;
            let to = (o * t_dst + td) * inner;
            let n = s.len() * inner;
            dst[to..to + n].copy_from_slice(&src[from..from + n]);
            td += s.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gelu_constant_is_sqrt_2_over_pi() {
        let want = (std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5) as f32;
        assert_eq!(want.to_bits(), 0x3f4c_422a);
    }

    #[test]
    fn activations() {
        let mut x = [0.0, 1.0, -2.0];
        silu_inplace(&mut x);
        assert!((x[1] - 0.7310586).abs() < 1e-6 && (x[2] + 0.23840584).abs() < 1e-6);
        let mut x = [0.0, 1.0, -1.0];
        mish_inplace(&mut x);
        assert!(
            x[0] == 0.0 && (x[1] - 0.86509836).abs() < 1e-6 && (x[2] + 0.30340144).abs() < 1e-6
        );
        let mut x = [0.0, 1.0, -3.0];
        gelu_tanh_inplace(&mut x);
        assert!(x[0] == 0.0 && (x[1] - 0.841_192).abs() < 1e-6 && (x[2] + 0.0036373).abs() < 1e-6);
        let mut x = [2.0, -2.0];
        leaky_relu_inplace(&mut x, 0.01);
        assert_eq!(x, [2.0, -0.02]);
    }

    #[test]
    fn euler_and_gates() {
        let mut x = [1.0, 1.0];
        cfg_euler_step(&mut x, &[1.0, 2.0], &[0.0, 2.0], 0.5, 0.1);
        assert!((x[0] - 1.15).abs() < 1e-7 && (x[1] - 1.2).abs() < 1e-7);
        let mut x = [1.0, 1.0, 1.0, 1.0];
        gated_add(2, 2, &mut x, &[2.0, 0.0], &[1.0, 1.0, 3.0, 3.0]);
        assert_eq!(x, [3.0, 1.0, 7.0, 1.0]);
    }

    #[test]
    fn copies_and_gathers() {
        let mut out = [0.0; 6];
        repeat_rows(1, 3, 2, &[1.0, 2.0, 3.0], &mut out);
        assert_eq!(out, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        let mut t = [0.0; 6];
        transpose(2, 3, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3, &mut t, 2);
        assert_eq!(t, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let table = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5];
        let mut e = [0.0; 4];
        embedding_gather(&table, 2, &[2, 0], &mut e).unwrap();
        assert_eq!(e, [2.0, 2.5, 0.0, 0.5]);
        assert_eq!(embedding_gather(&table, 2, &[3], &mut e), Err(3));
        // [outer=2, t=4, inner=1], keep [0..1] ‖ [2..4]
        let src = [0.0, 1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0];
        let mut dst = [0.0; 6];
        gather_time_segments(2, 4, 1, &[0..1, 2..4], &src, &mut dst);
        assert_eq!(dst, [0.0, 2.0, 3.0, 10.0, 12.0, 13.0]);
        let mut blk = [0.0; 6];
        copy_block(2, 2, &[1.0, 2.0, 3.0, 4.0], 2, &mut blk[1..], 3);
        assert_eq!(blk, [0.0, 1.0, 2.0, 0.0, 3.0, 4.0]);
    }
}
