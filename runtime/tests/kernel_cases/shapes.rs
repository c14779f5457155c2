//! Case builders of one shape family each (attention, LayerNorm, L2, key/value packing).

use dcc_runtime::kernels::{attention as attn, copy, norm};

use super::{A, Case, case, f, lin, rows, scaled, zeros};

/// DiT self-attention: `q` `[batch, tq, heads·d]`, cache `[batch, heads, cap, 2d]`.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    tag: &str,
    warps: Option<usize>,
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    cap: usize,
) -> Case {
    let dims = match warps {
        Some(w) => attn::attention_dims_with(w, batch * heads, tq, tk, d),
        None => attn::attention_dims(batch * heads, tq, tk, d),
    }
    .unwrap();
    let scale = 1.0 / (d as f32).sqrt();
    let mut c = case(
        format!(
            "attention.sdpa {tag} b{batch} h{heads} tq{tq} tk{tk} d{d} ({} rows/block)",
            dims.block.0 / 32
        ),
        &attn::SDPA,
        dims,
        vec![
            zeros(batch * tq * heads * d),
            scaled(11, batch * tq * heads * d, 3.0, 0.0),
            scaled(12, batch * heads * cap * 2 * d, 3.0, 0.0),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::I(batch),
            A::I(heads),
            A::I(tq),
            A::I(tk),
            A::I(d),
            A::I(cap),
            A::F(scale),
        ],
    );
    c.variant = warps.is_some_and(|w| w != attn::ATTN_WARPS);
    c
}

/// [`attention`] launched with [`attn::sdpa_dims`]: every key frame resident in shared memory
/// (the same bits as the tiled launch; the name says which launch ran).
pub fn attention_resident(
    tag: &str,
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
    cap: usize,
) -> Case {
    let mut c = attention(tag, None, batch, heads, tq, tk, d, cap);
    c.dims = attn::sdpa_dims(batch * heads, tq, tk, d).unwrap();
    c.name = format!("{} resident {} B", c.name, c.dims.shared_bytes);
    c
}

/// Conformer relative-position attention (batch 1).
pub fn rel_pos(
    tag: &str,
    warps: Option<usize>,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Case {
    rel_pos_batch(tag, warps, 1, heads, tq, tk, d)
}

/// Conformer relative-position attention over `batch` entries (sessions), each its own queries
/// and cache, the positions and biases shared; launched with [`attn::rel_pos_dims`] (the
/// position rows staged in shared memory).
pub fn rel_pos_batch(
    tag: &str,
    warps: Option<usize>,
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Case {
    let cap = tk + 7;
    let hd = heads * d;
    let dims = match warps {
        Some(w) => attn::rel_pos_dims_with(w, batch * heads, tq, tk, d),
        None => attn::rel_pos_dims(batch * heads, tq, tk, d),
    }
    .unwrap();
    let batched = if batch > 1 {
        format!(" b{batch}")
    } else {
        String::new()
    };
    let mut c = case(
        format!(
            "attention.rel_pos {tag}{batched} h{heads} tq{tq} tk{tk} d{d} ({} rows/block)",
            dims.block.0 / 32
        ),
        &attn::REL_POS,
        dims,
        vec![
            zeros(batch * tq * hd),
            scaled(21, batch * tq * hd, 2.0, 0.0),
            scaled(22, hd, 0.5, 0.0),
            scaled(23, hd, 0.5, 0.0),
            scaled(24, batch * heads * cap * 2 * d, 2.0, 0.0),
            scaled(25, (2 * tk - 1) * hd, 2.0, 0.0),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::B(4),
            A::B(5),
            A::I(batch),
            A::I(heads),
            A::I(tq),
            A::I(tk),
            A::I(d),
            A::I(cap),
        ],
    );
    c.variant = warps.is_some_and(|w| w != attn::ATTN_WARPS);
    c
}

/// [`rel_pos_batch`] launched with [`attn::attention_dims`]'s smaller shared memory: the kernel
/// reads each position row from global memory (the same bits; the name says which launch ran).
pub fn rel_pos_global(
    tag: &str,
    batch: usize,
    heads: usize,
    tq: usize,
    tk: usize,
    d: usize,
) -> Case {
    let mut c = rel_pos_batch(tag, None, batch, heads, tq, tk, d);
    c.dims = attn::attention_dims(batch * heads, tq, tk, d).unwrap();
    c.name = format!("{} global positions", c.name);
    c.variant = true;
    c
}

#[allow(clippy::too_many_arguments)]
pub fn layer_norm(
    tag: &str,
    r: usize,
    dim: usize,
    ldx: usize,
    ldy: usize,
    eps: f32,
    offset: f32,
) -> Case {
    case(
        format!("norm.layer_norm {tag} rows{r} dim{dim} ldx{ldx} ldy{ldy}"),
        &norm::LAYER_NORM,
        rows(r),
        vec![
            zeros((r - 1) * ldy + dim),
            scaled(31, (r - 1) * ldx + dim, 4.0, offset),
            scaled(32, dim, 1.0, 1.0),
            f(33, dim),
        ],
        vec![
            A::B(0),
            A::I(ldy),
            A::B(1),
            A::I(ldx),
            A::B(2),
            A::B(3),
            A::I(r),
            A::I(dim),
            A::F(eps),
        ],
    )
}

pub fn layer_norm_modulate(tag: &str, r: usize, dim: usize) -> Case {
    case(
        format!("norm.layer_norm_modulate {tag} rows{r} dim{dim}"),
        &norm::LAYER_NORM_MODULATE,
        rows(r),
        vec![
            zeros(r * dim),
            scaled(41, r * dim, 5.0, 0.3),
            f(42, dim),
            f(43, dim),
        ],
        vec![
            A::B(0),
            A::B(1),
            A::B(2),
            A::B(3),
            A::I(r),
            A::I(dim),
            A::F(1e-6),
        ],
    )
}

pub(crate) fn l2(r: usize, dim: usize) -> Case {
    case(
        format!("norm.l2_normalize rows{r} dim{dim}"),
        &norm::L2_NORMALIZE,
        rows(r),
        vec![zeros(r * dim), scaled(51, r * dim, 7.0, 0.0)],
        vec![A::B(0), A::B(1), A::I(r), A::I(dim), A::F(1e-12)],
    )
}

pub(crate) fn kv_pack(
    tag: &str,
    cap: usize,
    t0: usize,
    batch: usize,
    heads: usize,
    t: usize,
    d: usize,
) -> Case {
    let ld = heads * d + 3;
    let n_in = (batch * t - 1) * ld + heads * d;
    case(
        format!("copy.kv_pack {tag} cap{cap} t0{t0} b{batch} h{heads} t{t} d{d}"),
        &copy::KV_PACK,
        lin(batch * heads * t * d),
        vec![f(61, batch * heads * cap * 2 * d), f(62, n_in), f(63, n_in)],
        vec![
            A::B(0),
            A::I(cap),
            A::I(t0),
            A::B(1),
            A::B(2),
            A::I(ld),
            A::I(batch),
            A::I(heads),
            A::I(t),
            A::I(d),
        ],
    )
}
