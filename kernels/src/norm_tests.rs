//! The row normalisations' slice functions (`norm.rs`): small cases by hand, and the fp16
//! modulate against the f32 one over pre-rounded scales.

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

/// `layer_norm_modulate_f16` is `layer_norm_modulate` over `rn16(1 + scale) − 1` (what
/// `round_f16_shifted` stored before the modulate rounded its own factor): `rn16(1 + s) − 1`
/// and `1 + (rn16(1 + s) − 1)` are exact for every f32 `s` of a sweep over all bit patterns
/// (signs, subnormals, overflow, infinities), so the rows agree bit for bit.
#[test]
fn modulate_f16_is_modulate_over_shifted_scales() {
    let mut checked = 0u64;
    for bits in (0u32..=0xffff_ffff).step_by(65_537) {
        let s = f32::from_bits(bits);
        if s.is_nan() {
            continue;
        }
        let mut shifted = [s];
        ew::round_f16_shifted(&mut shifted, 1.0);
        assert_eq!(
            (1.0 + shifted[0]).to_bits(),
            ew::rn16(1.0 + s).to_bits(),
            "{s:e}"
        );
        checked += 1;
    }
    assert!(checked > 60_000);
    let (rows, dim) = (5, 37);
    let x: Vec<f32> = (0..rows * dim)
        .map(|i| ((i * 7919) % 101) as f32 - 50.0)
        .collect();
    let shift: Vec<f32> = (0..dim).map(|j| j as f32 * 0.01 - 0.2).collect();
    let scale: Vec<f32> = (0..dim).map(|j| (j as f32 - 18.0) * 1.37e-3).collect();
    let mut rounded = scale.clone();
    ew::round_f16_shifted(&mut rounded, 1.0);
    assert_ne!(rounded, scale);
    let (mut a, mut b) = (vec![0.0; rows * dim], vec![0.0; rows * dim]);
    layer_norm_modulate_f16(rows, dim, &x, 1e-6, &shift, &scale, &mut a);
    layer_norm_modulate(rows, dim, &x, 1e-6, &shift, &rounded, &mut b);
    assert_eq!(a, b);
    layer_norm_modulate(rows, dim, &x, 1e-6, &shift, &scale, &mut b);
    assert_ne!(a, b);
}
