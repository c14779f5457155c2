//! LayerNorms: affine, and the DiT's non-affine adaptive (modulated) variants.

use dcc_runtime::backend::DeviceBuffer;

use super::{Ctx, LoadError, Loader, OpError, Tensor, ops};

/// `torch.nn.LayerNorm` with affine parameters.
#[derive(Debug)]
pub struct LayerNorm {
    g: DeviceBuffer,
    b: DeviceBuffer,
    dim: usize,
    eps: f32,
}

impl LayerNorm {
    /// `{prefix}.weight` and `{prefix}.bias`, both `[dim]`.
    pub fn load(ld: &Loader<'_>, prefix: &str, dim: usize, eps: f32) -> Result<Self, LoadError> {
        Ok(LayerNorm {
            g: ld.tensor(&format!("{prefix}.weight"), &[dim])?,
            b: ld.tensor(&format!("{prefix}.bias"), &[dim])?,
            dim,
            eps,
        })
    }

    pub fn eps(&self) -> f32 {
        self.eps
    }

    /// The gain and bias as `[dim]` views.
    pub fn params(&self) -> Result<(Tensor<'_>, Tensor<'_>), OpError> {
        Ok((
            Tensor::of(&self.g)?.view(&[self.dim])?,
            Tensor::of(&self.b)?.view(&[self.dim])?,
        ))
    }

    /// `y = LN(x) · g + b` per row of `[rows, dim]` views ([`ops::layer_norm`]).
    pub fn forward(&self, cx: &Ctx<'_>, x: Tensor<'_>, y: Tensor<'_>) -> Result<(), OpError> {
        let (g, b) = self.params()?;
        ops::layer_norm(cx, y, x, g, b, self.eps)
    }
}

/// The non-affine LayerNorm of adaLN blocks, modulated by a conditioning vector: `LN(x) · (1 +
/// scale) + shift`.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct AdaNorm {
    pub eps: f32,
}

impl AdaNorm {
    /// `y = LN(x) · (1 + scale) + shift` ([`ops::layer_norm_modulate`]).
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        (shift, scale): (Tensor<'_>, Tensor<'_>),
        y: Tensor<'_>,
    ) -> Result<(), OpError> {
        ops::layer_norm_modulate(cx, y, x, shift, scale, self.eps)
    }

    /// [`AdaNorm::forward`] in the vendor's fp16 mode: `y = LN(x) · rn16(1 + scale) + shift`
    /// ([`ops::layer_norm_modulate_f16`]; `scale` as the linear left it).
    pub fn forward_f16(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        (shift, scale): (Tensor<'_>, Tensor<'_>),
        y: Tensor<'_>,
    ) -> Result<(), OpError> {
        ops::layer_norm_modulate_f16(cx, y, x, shift, scale, self.eps)
    }

    /// The gated residual then the next modulated norm: `x += gate · y`, `xn = LN(x) · (1 +
    /// scale) + shift` ([`ops::gated_norm_modulate`]).
    pub fn gated(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        (gate, y): (Tensor<'_>, Tensor<'_>),
        (shift, scale): (Tensor<'_>, Tensor<'_>),
        xn: Tensor<'_>,
    ) -> Result<(), OpError> {
        ops::gated_norm_modulate(cx, x, gate, y, xn, shift, scale, self.eps)
    }

    /// [`AdaNorm::gated`] in the vendor's fp16 mode, one launch: `x = rn16(x + rn16(gate · y))`,
    /// then `xn = LN(x) · rn16(1 + scale) + shift` ([`ops::gated_norm_modulate_f16`]: the bits
    /// of [`ops::gated_add_f16`] followed by [`AdaNorm::forward_f16`]).
    pub fn gated_f16(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        (gate, y): (Tensor<'_>, Tensor<'_>),
        (shift, scale): (Tensor<'_>, Tensor<'_>),
        xn: Tensor<'_>,
    ) -> Result<(), OpError> {
        ops::gated_norm_modulate_f16(cx, x, gate, y, xn, shift, scale, self.eps)
    }
}
