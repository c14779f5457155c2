//! `torch.nn.Linear`: `y = x · Wᵀ + b`, the bias in the GEMM's epilogue.

use dcc_runtime::backend::DeviceBuffer;

use super::{Act, Ctx, LoadError, Loader, OpError, Tensor, ops};

/// A linear layer: weight `[out, in]` (as the state_dict stores it), optional bias `[out]`.
#[derive(Debug)]
pub struct Linear {
    w: DeviceBuffer,
    b: Option<DeviceBuffer>,
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

    /// A layer over host values (`w` `[out, in]` row-major, `b` `[out]`).
    pub fn from_host(
        ld: &Loader<'_>,
        w: &[f32],
        b: Option<&[f32]>,
        in_dim: usize,
        out_dim: usize,
    ) -> Result<Self, LoadError> {
        Ok(Linear {
            w: ld.upload(w)?,
            b: b.map(|b| ld.upload(b)).transpose()?,
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

    /// The weight as a `[out, in]` view.
    pub fn weight(&self) -> Result<Tensor<'_>, OpError> {
        Tensor::of(&self.w)?.view(&[self.out_dim, self.in_dim])
    }

    /// `y[rows, out] = x[rows, in] · Wᵀ + b` ([`ops::linear`]).
    pub fn forward(&self, cx: &Ctx<'_>, x: Tensor<'_>, y: Tensor<'_>) -> Result<(), OpError> {
        ops::linear(cx, self.weight()?, self.bias()?, x, y)
    }

    /// `y = f(x · Wᵀ + b)` in one launch ([`ops::linear_act`]): the bits of [`Linear::forward`]
    /// followed by `ops::act(y, f)`.
    pub fn forward_act(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        y: Tensor<'_>,
        f: Act,
    ) -> Result<(), OpError> {
        ops::linear_act(cx, self.weight()?, self.bias()?, x, y, f)
    }

    fn bias(&self) -> Result<Option<Tensor<'_>>, OpError> {
        self.b
            .as_ref()
            .map(|b| Tensor::of(b)?.view(&[self.out_dim]))
            .transpose()
    }
}
