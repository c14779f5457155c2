//! The checks of `dcc-bench kernels` ([`super`]): a kernel's output against the fp32 twin
//! (bit for bit, or within the 3xTF32 or half bound), against its path's base kernel (every
//! tile variant bit for bit), and against cuBLAS (normwise).

use std::sync::Arc;

use dcc_runtime::backend::Backend;
use dcc_runtime::kernels::gemm;
use dcc_runtime::kernels::gemm::f16 as h16;
use dcc_runtime::kernels::gemm::tf32_tiles::{self, BASE};
use dcc_runtime::ops::Ctx;
use serde_json::{Value, json};

use super::{Kernel, Operands, Res, TWIN_SHAPES, data, kf16, short, tf32_short};

/// `max |a − b| / max |b|` (NaN when either holds a NaN).
pub(super) fn rel_err(a: &[f32], b: &[f32]) -> f64 {
    let mut num = 0.0f64;
    let mut den = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        let d = (*x as f64 - *y as f64).abs();
        if d.is_nan() {
            return f64::NAN;
        }
        num = num.max(d);
        den = den.max((*y as f64).abs());
    }
    num / den.max(f64::MIN_POSITIVE)
}

pub(super) fn bits_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(p, q)| p.to_bits() == q.to_bits())
}

/// The kernel whose bits `k` must give for every output: `gemm.linear_tf32x3` for a 3xTF32
/// tile variant, `gemm.linear_f16_64x64` for another half variant (every variant of a path
/// computes the same bits); `None` for the rest.
pub(super) fn base_of(k: Kernel) -> Option<Kernel> {
    match k {
        Kernel::Tf32(v) if !std::ptr::eq(v, &BASE) => Some(Kernel::Tf32(&BASE)),
        Kernel::F16(v) if !std::ptr::eq(v, &h16::V64X64) => Some(Kernel::F16(&h16::V64X64)),
        _ => None,
    }
}

/// The outputs of every base kernel ([`base_of`]) the kernels `ks` need, run on the operands
/// `d`: `(base kernel's name, y)`.
pub(super) fn base_outputs(
    d: &Operands,
    cx: &Ctx<'_>,
    be: &dyn Backend,
    ks: impl Iterator<Item = Kernel>,
    (rows, i, o): (usize, usize, usize),
) -> Res<Vec<(&'static str, Vec<f32>)>> {
    let mut out: Vec<(&'static str, Vec<f32>)> = Vec::new();
    for b in ks.filter_map(base_of) {
        if !out.iter().any(|(n, _)| *n == b.name()) {
            d.linear(cx, b, rows, i, o)?;
            out.push((b.name(), d.read(be, rows * o)?));
        }
    }
    Ok(out)
}

/// Whether `got` (kernel `k`'s output) has the bits of its base kernel's in `bases`
/// ([`base_outputs`]); `None` when `k` has no base.
pub(super) fn equals_base(
    k: Kernel,
    bases: &[(&'static str, Vec<f32>)],
    got: &[f32],
) -> Option<bool> {
    let b = base_of(k)?;
    bases
        .iter()
        .find(|(n, _)| *n == b.name())
        .map(|(_, y)| bits_equal(y, got))
}

/// Whether kernel `k`'s output `got` passes against the fp32 twin's `want` for the operands of
/// set `seed` ([`Operands::new`]) at `(rows, in, out)`: bit for bit for an fp32 variant, every
/// output within `gemm::tf32::bound` for `tf32x3`, within `gemm::f16::bound` of the half twin
/// for an `f16` variant.
pub(super) fn twin_ok(
    k: Kernel,
    seed: u64,
    (rows, i, o): (usize, usize, usize),
    want: &[f32],
    got: &[f32],
) -> bool {
    if let Kernel::Fp32(_) = k {
        return bits_equal(want, got);
    }
    let (x, w) = (data(4 * seed + 1, rows * i), data(4 * seed + 2, o * i));
    if let Kernel::F16(_) = k {
        return kf16::twin_ok((rows, i, o), &x, &w, &data(4 * seed + 3, o), got);
    }
    want.len() == rows * o
        && got.len() == rows * o
        && (0..rows * o).all(|e| {
            let (xr, wr) = (&x[e / o * i..][..i], &w[e % o * i..][..i]);
            let t: f64 = xr
                .iter()
                .zip(wr)
                .map(|(p, q)| (*p as f64 * *q as f64).abs())
                .sum();
            let (g, f) = (got[e], want[e]);
            (g as f64 - f as f64).abs() <= gemm::tf32::bound(i, t, g, f)
        })
}

/// Every kernel at every shape of [`TWIN_SHAPES`] on `be` against the fp32 twin on the Host:
/// one JSON row per kernel and shape, `ok` when bit-equal (an fp32 variant) or within the bound
/// (`tf32x3`, `f16_*`: [`twin_ok`]), and a tile variant bit-equal to its base ([`base_of`]).
pub(super) fn twin_check(
    be: &Arc<dyn Backend>,
    host: &Arc<dyn Backend>,
    cx: &Ctx<'_>,
) -> Res<Vec<Value>> {
    let hcx = Ctx::new(host.as_ref(), None);
    let mut rows = Vec::new();
    let kernels = gemm::VARIANTS
        .iter()
        .map(|v| (short(v), Kernel::Fp32(v)))
        .chain([("tf32x3", Kernel::Tf32(&BASE))])
        .chain(
            tf32_tiles::TILES
                .iter()
                .map(|v| (tf32_short(v), Kernel::Tf32(v))),
        )
        .chain(
            h16::VARIANTS
                .iter()
                .map(|v| (kf16::label(v), Kernel::F16(v))),
        );
    let kernels: Vec<_> = kernels.collect();
    for (m, i, o) in TWIN_SHAPES {
        let h = Operands::new(host, 7, m, i, o)?;
        h.linear(&hcx, Kernel::Fp32(gemm::pick(m, o)), m, i, o)?;
        let want = h.read(host.as_ref(), m * o)?;
        let d = Operands::new(be, 7, m, i, o)?;
        let ks = kernels.iter().map(|(_, k)| *k);
        let bases = base_outputs(&d, cx, be.as_ref(), ks, (m, i, o))?;
        for &(name, k) in &kernels {
            d.linear(cx, k, m, i, o)?;
            let got = d.read(be.as_ref(), m * o)?;
            // A tile variant: also the bits of its path's base kernel.
            let base = equals_base(k, &bases, &got) != Some(false);
            rows.push(json!({
                "kernel": name, "rows": m, "in": i, "out": o,
                "ok": base && twin_ok(k, 7, (m, i, o), &want, &got),
            }));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::super::Choice;
    use super::*;

    /// `--variants tf32small` times every small-row variant, in `SMALL`'s order, and each one
    /// is also named on its own; every one is checked against the 3xTF32 base.
    #[test]
    fn tf32small_names_every_small_row_variant() {
        let all = super::super::variant("tf32small").unwrap();
        let got: Vec<String> = super::super::expand(112, 512, &[all])
            .into_iter()
            .map(|(label, _)| label)
            .collect();
        let want: Vec<String> = tf32_tiles::SMALL
            .iter()
            .map(|v| tf32_short(v).to_string())
            .collect();
        assert_eq!(got, want);
        assert_eq!(want.len(), 7);
        for v in tf32_tiles::SMALL {
            match super::super::variant(tf32_short(v)) {
                Ok(Choice::Tf32(k)) => assert!(std::ptr::eq(k, *v)),
                other => panic!("{}: {other:?}", v.kernel.name),
            }
            assert_eq!(
                base_of(Kernel::Tf32(v)).map(|b| b.name()),
                Some(BASE.kernel.name)
            );
        }
    }

    /// Every tile variant has its path's base, the bases and the fp32 variants none, and a
    /// changed bit fails the comparison.
    #[test]
    fn tiles_are_checked_against_their_base() {
        for v in tf32_tiles::TILES {
            assert_eq!(
                base_of(Kernel::Tf32(v)).map(|b| b.name()),
                Some(BASE.kernel.name)
            );
        }
        for v in h16::VARIANTS
            .iter()
            .filter(|v| !std::ptr::eq(**v, &h16::V64X64))
        {
            let b = base_of(Kernel::F16(v)).map(|b| b.name());
            assert_eq!(b, Some("gemm.linear_f16_64x64"));
        }
        assert!(base_of(Kernel::Tf32(&BASE)).is_none());
        assert!(base_of(Kernel::F16(&h16::V64X64)).is_none());
        assert!(base_of(Kernel::Fp32(gemm::VARIANTS[0])).is_none());
        let bases = vec![(BASE.kernel.name, vec![1.0f32, -0.0])];
        let tile = Kernel::Tf32(tf32_tiles::TILES[0]);
        assert_eq!(equals_base(tile, &bases, &[1.0, -0.0]), Some(true));
        assert_eq!(equals_base(tile, &bases, &[1.0, 0.0]), Some(false));
        assert_eq!(equals_base(Kernel::Tf32(&BASE), &bases, &[1.0, 0.0]), None);
        // A half tile whose base was not run has no verdict.
        assert_eq!(
            equals_base(Kernel::F16(h16::VARIANTS[0]), &bases, &[1.0]),
            None
        );
    }
}
