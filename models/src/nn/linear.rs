//! `torch.nn.Linear`: `y = x · Wᵀ + b`, the bias in the GEMM's epilogue.
//!
//! The weights are stored once, in the element type of the GEMM path the layer was loaded for
//! ([`Loader::with_gemm`], `GemmPath::weight_dtype`): `f32`, or on `GemmPath::Half` only
//! binary16, rounded to nearest even at load (as PyTorch's `module.half()`), half the bytes and
//! no `f32` copy kept. A layer run on a path that reads the other type is refused by the op
//! ([`ops::linear`]), nothing queued.

use dcc_runtime::backend::DeviceBuffer;
use dcc_runtime::contract::DType;
use half::f16;

use super::{Act, Ctx, LoadError, Loader, OpError, Tensor, ops};

/// A linear layer: weight `[out, in]` (as the state_dict stores it), optional bias `[out]`, both
/// of `dtype` (`F32`, or `F16` for `GemmPath::Half`).
#[derive(Debug)]
pub struct Linear {
    w: DeviceBuffer,
    b: Option<DeviceBuffer>,
    dtype: DType,
    in_dim: usize,
    out_dim: usize,
}

impl Linear {
    /// `{prefix}.weight` `[out, in]` and, with `bias`, `{prefix}.bias` `[out]`.
    pub fn load(
        ld: &Loader<'_>,
        prefix: &str,
        in_dim: usize,
        out_dim: usize,
        bias: bool,
    ) -> Result<Self, LoadError> {
        Self::stacked(ld, &[(prefix, out_dim)], in_dim, bias)
    }

    /// Linears reading the same input, stacked along the output (their weights' rows and bias
    /// entries in order): one GEMM computes them all. `parts` are `(prefix, out)`.
    pub fn stacked(
        ld: &Loader<'_>,
        parts: &[(&str, usize)],
        in_dim: usize,
        bias: bool,
    ) -> Result<Self, LoadError> {
        let mut w = Vec::new();
        let mut b = Vec::new();
        for &(p, o) in parts {
            w.extend(ld.host(&format!("{p}.weight"), &[o, in_dim])?);
            if bias {
                b.extend(ld.host(&format!("{p}.bias"), &[o])?);
            }
        }
        let out_dim = parts.iter().map(|p| p.1).sum();
        Self::from_host(ld, &w, bias.then_some(b.as_slice()), in_dim, out_dim)
    }

    /// A layer over host values (`w` `[out, in]` row-major, `b` `[out]`), stored in the element
    /// type of the loader's GEMM path.
    pub fn from_host(
        ld: &Loader<'_>,
        w: &[f32],
        b: Option<&[f32]>,
        in_dim: usize,
        out_dim: usize,
    ) -> Result<Self, LoadError> {
        let dtype = ld.gemm_path().weight_dtype();
        let up = |v: &[f32]| match dtype {
            DType::F16 => ld.upload_f16(v),
            _ => ld.upload(v),
        };
        Ok(Linear {
            w: up(w)?,
            b: b.map(up).transpose()?,
            dtype,
            in_dim,
            out_dim,
        })
    }

    pub fn in_dim(&self) -> usize {
        self.in_dim
    }

    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// The element type the weight and bias are stored in (`F32`, or `F16` when loaded for
    /// `GemmPath::Half`).
    pub fn weight_dtype(&self) -> DType {
        self.dtype
    }

    /// The weight as a `[out, in]` view of `T` (refused unless `T` is the stored type).
    pub fn weight<T: ops::Elem>(&self) -> Result<Tensor<'_, T>, OpError> {
        self.stored::<T>("w")?;
        Tensor::of(&self.w)?.view(&[self.out_dim, self.in_dim])
    }

    /// The bias as a `[out]` view of `T`, if the layer has one (refused unless `T` is the
    /// stored type).
    pub fn bias<T: ops::Elem>(&self) -> Result<Option<Tensor<'_, T>>, OpError> {
        self.stored::<T>("b")?;
        self.b
            .as_ref()
            .map(|b| Tensor::of(b)?.view(&[self.out_dim]))
            .transpose()
    }

    fn stored<T: ops::Elem>(&self, view: &'static str) -> Result<(), OpError> {
        if T::DTYPE != self.dtype {
            return Err(OpError::Arg {
                op: "linear",
                arg: view,
                detail: format!(
                    "a {} view of {} weights",
                    T::DTYPE.name(),
                    self.dtype.name()
                ),
            });
        }
        Ok(())
    }

    /// `y[rows, out] = x[rows, in] · Wᵀ + b` ([`ops::linear`]).
    pub fn forward(&self, cx: &Ctx<'_>, x: Tensor<'_>, y: Tensor<'_>) -> Result<(), OpError> {
        match self.dtype {
            DType::F16 => ops::linear(cx, self.weight::<f16>()?, self.bias()?, x, y),
            _ => ops::linear(cx, self.weight::<f32>()?, self.bias()?, x, y),
        }
    }

    /// `y = f(x · Wᵀ + b)` in one launch ([`ops::linear_act`]): the bits of [`Linear::forward`]
    /// followed by `ops::act(y, f)` (on `GemmPath::Half`, that activation's value rounded to
    /// binary16).
    pub fn forward_act(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        y: Tensor<'_>,
        f: Act,
    ) -> Result<(), OpError> {
        match self.dtype {
            DType::F16 => ops::linear_act(cx, self.weight::<f16>()?, self.bias()?, x, y, f),
            _ => ops::linear_act(cx, self.weight::<f32>()?, self.bias()?, x, y, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::WeightStore;
    use dcc_runtime::backend::AllocKind;
    use dcc_runtime::ops::GemmPath;

    /// On the half path the layer holds binary16 only (half the bytes), rounded to nearest
    /// even, and runs on that path alone; on the others `f32`.
    #[test]
    fn a_half_layer_keeps_binary16_weights_and_runs_on_its_path_only() {
        let be = dcc_runtime::backend::host();
        let ws = WeightStore::default();
        let w = [1.0 + 2f32.powi(-11), 3.0, -0.1, 70_000.0, 0.5, 0.25];
        let b = [0.1f32, -2.0];
        let f32_ld = Loader::new(be.as_ref(), &ws);
        let half_ld = f32_ld.with_gemm(GemmPath::Half);
        let full = Linear::from_host(&f32_ld, &w, Some(&b), 3, 2).unwrap();
        let half = Linear::from_host(&half_ld, &w, Some(&b), 3, 2).unwrap();
        assert_eq!(
            (full.weight_dtype(), half.weight_dtype()),
            (DType::F32, DType::F16)
        );
        assert_eq!((full.w.bytes(), half.w.bytes()), (24, 12));
        let hw: Vec<f16> = be.download(half.w.ptr(), 6).unwrap();
        let want: Vec<f16> = w.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(hw, want);
        assert_eq!(hw[0].to_f32(), 1.0, "ties to even");
        assert!(hw[3].is_infinite());
        assert!(
            half.weight::<f32>().is_err(),
            "no f32 view of binary16 bytes"
        );

        let x = be
            .alloc_from(&[1.0f32, 2.0, 4.0], AllocKind::Other)
            .unwrap();
        let y = be.alloc(8, AllocKind::Other).unwrap();
        let xt = || Tensor::<f32>::of(&x).unwrap().view(&[1, 3]).unwrap();
        let yt = || Tensor::<f32>::of(&y).unwrap().view(&[1, 2]).unwrap();
        let cx = Ctx::new(be.as_ref(), None);
        let half_cx = cx.with_gemm(GemmPath::Half);
        assert!(matches!(
            half.forward(&cx, xt(), yt()),
            Err(OpError::Arg { arg: "w", .. })
        ));
        assert!(matches!(
            full.forward(&half_cx, xt(), yt()),
            Err(OpError::Arg { arg: "w", .. })
        ));
        half.forward(&half_cx, xt(), yt()).unwrap();
        let got: Vec<f32> = be.download(y.ptr(), 2).unwrap();
        // Row 0: 1·1 + 2·3 + 4·(−0.1 in binary16) + 0.1 in binary16, rounded to binary16.
        let r0 = 1.0 + 6.0 + 4.0 * f16::from_f32(-0.1).to_f32() + f16::from_f32(0.1).to_f32();
        assert_eq!(got[0], f16::from_f32(r0).to_f32());
        assert!(got[1].is_infinite());
        full.forward(&cx, xt(), yt()).unwrap();
    }
}
