//! Embeddings (`kernels/cuda/embed.cu`): token table lookup ([`GATHER`]) and sinusoidal timestep
//! features ([`TIMESTEP`]), each a kernel whose host twin's body is the slice function below, plus
//! the relative-position table the host builds once ([`espnet_rel_pos_table`]). Launch: one
//! thread per output element; the twins evaluate the same float32 expressions as the vendor's
//! torch code.

use crate::CudaSource;
use crate::abi::{Arg, Args, KernelError, LaunchDims, Param};
use crate::math::{cos_f32, exp_f32, ln64, sin_f32};
use crate::twin::{invalid, kdef, rd, wr};

use Param::{F32, I64, Ptr};

pub static SOURCE: CudaSource = CudaSource {
    name: "embed",
    code: concat!(
        include_str!("../cuda/common.cuh"),
        include_str!("../cuda/embed.cu")
    ),
};

kdef!(
    GATHER,
    "embed",
    "gather",
    [Ptr, Ptr, Ptr, I64, I64, I64],
    host_gather,
    "`(out, ids: u32*, table, n, dim, vocab)`: `out[t, :] = table[ids[t], :]`; an id ≥ vocab gives a zero row (callers validate ids first)."
);
kdef!(
    TIMESTEP,
    "embed",
    "timestep",
    [Ptr, I64, F32, F32, F32],
    host_timestep,
    "`(out, dim, t, scale, max_period)`: sinusoidal timestep features `[cos ‖ sin]` ([`timestep_embedding`])."
);

pub static KERNELS: &[&crate::KernelDef] = &[&GATHER, &TIMESTEP];

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

/// ESPnet relative positional encoding (`EspnetRelPositionalEncoding.position_encoding(size)`):
/// a `(2·size − 1) × d_model` table whose row `r` encodes the relative position
/// `p = size − 1 − r` (from `size − 1` down to `−(size − 1)`):
/// `pe[r, 2i] = sin(p · div_i)`, `pe[r, 2i+1] = cos(p · div_i)`,
/// `div_i = exp(2i · (−ln(10000) / d_model))`, all in float32.
pub fn espnet_rel_pos_table(size: usize, d_model: usize, out: &mut [f32]) {
    assert!(out.len() >= (2 * size - 1) * d_model);
    let coef = -(10000.0f64.ln() / d_model as f64) as f32;
    let half = d_model / 2;
    let div: Vec<f32> = (0..half).map(|i| exp_f32((2 * i) as f32 * coef)).collect();
    for r in 0..2 * size - 1 {
        let p = size as i64 - 1 - r as i64;
        let row = &mut out[r * d_model..(r + 1) * d_model];
        // torch evaluates the negative half as sin(−1 · pos · div): the product is formed from |p|
        // and negated, which is exactly (−|p|) · div in IEEE arithmetic.
        let pf = p as f32;
        for i in 0..half {
            let a = pf * div[i];
            row[2 * i] = sin_f32(a);
            row[2 * i + 1] = cos_f32(a);
        }
    }
}

/// DiT `TimestepEmbedder.timestep_embedding(t · scale, dim)` for one scalar `t`:
/// `out = [cos(t·scale·f_i) for i < dim/2] ‖ [sin(t·scale·f_i)]`, `f_i = exp(−ln(max_period)·i/(dim/2))`.
pub fn timestep_embedding(t: f32, scale: f32, dim: usize, max_period: f32, out: &mut [f32]) {
    let half = dim / 2;
    let c = -(ln64(max_period as f64) as f32);
    let ts = t * scale;
    for i in 0..half {
        let f = exp_f32(c * i as f32 / half as f32);
        let a = ts * f;
        out[i] = cos_f32(a);
        out[half + i] = sin_f32(a);
    }
    if dim % 2 == 1 {
        out[dim - 1] = 0.0;
    }
}

unsafe fn host_gather(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (n, dim, vocab) = (a.usize(3)?, a.usize(4)?, a.usize(5)?);
    // SAFETY: HostFn contract.
    let ids = unsafe { std::slice::from_raw_parts(a.ptr(1)?.0 as *const u32, n) };
    // SAFETY: HostFn contract.
    let (out, table) = unsafe { (wr(a.ptr(0)?, n * dim)?, rd(a.ptr(2)?, vocab * dim)?) };
    for (t, &id) in ids.iter().enumerate() {
        let row = &mut out[t * dim..(t + 1) * dim];
        if (id as usize) < vocab {
            embedding_gather(table, dim, &[id], row).map_err(|_| invalid("id"))?;
        } else {
            row.fill(0.0);
        }
    }
    Ok(())
}

unsafe fn host_timestep(_d: &LaunchDims, a: &[Arg]) -> Result<(), KernelError> {
    let (dim, t, scale, max_period) = (a.usize(1)?, a.f32(2)?, a.f32(3)?, a.f32(4)?);
    // SAFETY: HostFn contract.
    let out = unsafe { wr(a.ptr(0)?, dim)? };
    timestep_embedding(t, scale, dim, max_period, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_rows() {
        let table = [0.0, 0.5, 1.0, 1.5, 2.0, 2.5];
        let mut e = [0.0; 4];
        embedding_gather(&table, 2, &[2, 0], &mut e).unwrap();
        assert_eq!(e, [2.0, 2.5, 0.0, 0.5]);
        assert_eq!(embedding_gather(&table, 2, &[3], &mut e), Err(3));
    }

    #[test]
    fn rel_pos_table_symmetry() {
        let (size, d) = (5, 8);
        let mut pe = vec![0.0; (2 * size - 1) * d];
        espnet_rel_pos_table(size, d, &mut pe);
        // centre row is position 0: sin 0 = 0, cos 0 = 1
        let c = &pe[(size - 1) * d..size * d];
        assert!(c.chunks(2).all(|p| p[0] == 0.0 && p[1] == 1.0));
        // row r and row 2(size-1)-r are ±p: sin odd, cos even
        for r in 0..size - 1 {
            let a = &pe[r * d..(r + 1) * d];
            let b = &pe[(2 * (size - 1) - r) * d..(2 * (size - 1) - r + 1) * d];
            for i in 0..d / 2 {
                assert_eq!(a[2 * i], -b[2 * i]);
                assert_eq!(a[2 * i + 1], b[2 * i + 1]);
            }
        }
        // first row is position size-1 with div_0 = 1
        assert_eq!(pe[0], sin_f32(4.0));
    }

    #[test]
    fn timestep_embedding_basics() {
        let mut e = [0.0; 8];
        timestep_embedding(0.0, 1000.0, 8, 10000.0, &mut e);
        assert_eq!(e, [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
        timestep_embedding(0.001, 1000.0, 8, 10000.0, &mut e);
        assert_eq!(e[0], cos_f32(1.0));
        assert_eq!(e[4], sin_f32(1.0));
    }
}
