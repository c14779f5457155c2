//! Host-side numerics a model needs bit for bit with the kernels' arithmetic (tables computed
//! once on the host and uploaded, schedules), so that models reach the kernels crate only
//! through this module.

/// ESPnet's relative positional encoding table for `size` positions of width `dim`: `2·size −
/// 1` rows, the centre row position 0.
pub fn rel_pos_table(size: usize, dim: usize) -> Vec<f32> {
    if size == 0 {
        return Vec::new();
    }
    let mut pe = vec![0.0f32; (2 * size - 1) * dim];
    dcc_kernels::embed::espnet_rel_pos_table(size, dim, &mut pe);
    pe
}

/// `cos(x)` in single precision, as the kernels compute it.
pub fn cos_f32(x: f32) -> f32 {
    dcc_kernels::math::cos_f32(x)
}
