//! The two-layer feed-forward block: `fc2(act(fc1(x)))`.

use super::{Act, Ctx, Linear, LoadError, Loader, OpError, Tensor};

#[derive(Debug)]
pub struct Mlp {
    pub fc1: Linear,
    pub fc2: Linear,
    pub act: Act,
}

impl Mlp {
    /// `{fc1}` `[hidden, dim]` and `{fc2}` `[dim, hidden]`, both with biases.
    pub fn load(
        ld: &Loader<'_>,
        (fc1, fc2): (&str, &str),
        dim: usize,
        hidden: usize,
        act: Act,
    ) -> Result<Self, LoadError> {
        Ok(Mlp {
            fc1: Linear::load(ld, fc1, dim, hidden, true)?,
            fc2: Linear::load(ld, fc2, hidden, dim, true)?,
            act,
        })
    }

    /// `y = fc2(act(fc1(x)))` over `[rows, dim]` views, `hidden` the `[rows, hidden]` scratch
    /// (the activation fused into fc1's launch).
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        hidden: Tensor<'_>,
        y: Tensor<'_>,
    ) -> Result<(), OpError> {
        self.fc1.forward_act(cx, x, hidden, self.act)?;
        self.fc2.forward(cx, hidden, y)
    }
}
