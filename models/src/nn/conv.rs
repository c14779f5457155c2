//! 1-D convolutions (stride 1, no padding) as im2col + GEMM, and the causal variant that keeps
//! the last `k − 1` input frames of a stream as its context.

use super::{Ctx, Linear, LoadError, Loader, OpError, Tensor, ops};

/// `torch.nn.Conv1d` (stride 1, no padding) over time-major `[t, c_in]` inputs: the weight
/// `[c_out, c_in, k]` is re-laid out once to `[c_out, k, c_in]`, so that the `k`-row windows of
/// the input (its im2col rows) times the weight's transpose are the output.
#[derive(Debug)]
pub struct Conv1d {
    lin: Linear,
    k: usize,
    c_in: usize,
}

impl Conv1d {
    /// `{prefix}.weight` `[c_out, c_in, k]` and `{prefix}.bias` `[c_out]`.
    pub fn load(
        ld: &Loader<'_>,
        prefix: &str,
        c_in: usize,
        c_out: usize,
        k: usize,
    ) -> Result<Self, LoadError> {
        let w = ld.host(&format!("{prefix}.weight"), &[c_out, c_in, k])?;
        let b = ld.host(&format!("{prefix}.bias"), &[c_out])?;
        // [out, in, k] → [out, k, in]
        let mut okc = vec![0.0f32; w.len()];
        for o in 0..c_out {
            for c in 0..c_in {
                for j in 0..k {
                    okc[(o * k + j) * c_in + c] = w[(o * c_in + c) * k + j];
                }
            }
        }
        Ok(Conv1d {
            lin: Linear::from_host(ld, &okc, Some(&b), k * c_in, c_out)?,
            k,
            c_in,
        })
    }

    pub fn kernel(&self) -> usize {
        self.k
    }

    /// The GEMM over im2col rows `[t, k·c_in]` built elsewhere.
    pub fn linear(&self) -> &Linear {
        &self.lin
    }

    /// Valid convolution of `x` (`[t_in, c_in]`, packed rows) into `y` (`[t_in − k + 1, c_out]`):
    /// the im2col rows into `col` (packed scratch of at least `(t_in − k + 1)·k·c_in`), then
    /// the GEMM.
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        col: Tensor<'_>,
        y: Tensor<'_>,
    ) -> Result<(), OpError> {
        let col = self.im2col(cx, x, col)?;
        self.lin.forward(cx, col, y)
    }

    /// [`Conv1d::forward`] then the activation `f` of `y`, the activation in the GEMM's launch
    /// ([`Linear::forward_act`]: the bits of the convolution followed by `ops::act`, and on
    /// `GemmPath::Half` its value rounded to binary16).
    pub fn forward_act(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        col: Tensor<'_>,
        y: Tensor<'_>,
        f: ops::Act,
    ) -> Result<(), OpError> {
        let col = self.im2col(cx, x, col)?;
        self.lin.forward_act(cx, col, y, f)
    }

    /// The `k`-row windows of `x` copied into `col`, viewed as the GEMM's `[t_out, k·c_in]` rows.
    fn im2col<'c>(
        &self,
        cx: &Ctx<'_>,
        x: Tensor<'_>,
        col: Tensor<'c>,
    ) -> Result<Tensor<'c>, OpError> {
        let rows = x.windows(self.k)?;
        let col = col.view(&[rows.dims()[0], self.k * self.c_in])?;
        ops::copy(cx, col, rows)?;
        Ok(col)
    }
}

/// A causal convolution over a stream: its input is `ctx ‖ x`, where the context `ctx` (`[k −
/// 1, c_in]`, a state region) holds the last `k − 1` input frames of the previous call. The
/// caller assembles `cat` (`[k − 1 + t, c_in]`): [`CausalConv1d::load_context`] writes the
/// context into its head, the caller writes `x` after it, then [`CausalConv1d::forward`] saves
/// the new context and convolves.
#[derive(Debug)]
pub struct CausalConv1d {
    pub conv: Conv1d,
}

impl CausalConv1d {
    /// Frames of context (`k − 1`).
    pub fn context(&self) -> usize {
        self.conv.k - 1
    }

    /// `cat[0..k − 1] = ctx`.
    pub fn load_context(
        &self,
        cx: &Ctx<'_>,
        ctx: Tensor<'_>,
        cat: Tensor<'_>,
    ) -> Result<(), OpError> {
        ops::copy(cx, cat.rows(0, self.context())?, ctx)
    }

    /// `ctx = cat[t..t + k − 1]` (the last `k − 1` frames), then `y` (`[t, c_out]`) = the
    /// convolution of `cat` (`[k − 1 + t, c_in]`), `col` its im2col scratch.
    pub fn forward(
        &self,
        cx: &Ctx<'_>,
        cat: Tensor<'_>,
        ctx: Tensor<'_>,
        col: Tensor<'_>,
        y: Tensor<'_>,
    ) -> Result<(), OpError> {
        let c = self.context();
        let t = cat.dims()[0].checked_sub(c).ok_or_else(|| OpError::Shape {
            op: "causal_conv1d",
            view: "cat",
            expected: format!("[>= {c}, c_in]"),
            actual: cat.dims().to_vec(),
        })?;
        ops::copy(cx, ctx, cat.rows(t, c)?)?;
        self.conv.forward(cx, cat, col, y)
    }

    /// [`CausalConv1d::load_context`] of a batch of streams: `cat` `[n, k − 1 + t, c_in]`
    /// (rows packed), stream `s`'s context `ctxs[s]` (`[k − 1, c_in]`, at its own address) into
    /// the head of `cat[s]`: one copy a stream.
    pub fn load_contexts(
        &self,
        cx: &Ctx<'_>,
        ctxs: &[Tensor<'_>],
        cat: Tensor<'_>,
    ) -> Result<(), OpError> {
        let c = self.context();
        for (i, ctx) in ctxs.iter().enumerate() {
            ops::copy(cx, cat.index(0, i)?.rows(0, c)?, *ctx)?;
        }
        Ok(())
    }

    /// [`CausalConv1d::forward`] of a batch of `n = ctxs.len()` streams: each stream's new
    /// context `ctxs[s] = cat[s, t..t + k − 1]` (one copy a stream), then one im2col of every
    /// stream's windows (`cat` `[n, k − 1 + t, c_in]` → `[n·t, k·c_in]` in `col`) and one GEMM
    /// into `y` (`[n·t, c_out]`). Stream `s`'s rows are its [`CausalConv1d::forward`]'s, bit
    /// for bit, on a batch-invariant GEMM path.
    pub fn forward_batch(
        &self,
        cx: &Ctx<'_>,
        cat: Tensor<'_>,
        ctxs: &[Tensor<'_>],
        col: Tensor<'_>,
        y: Tensor<'_>,
    ) -> Result<(), OpError> {
        let c = self.context();
        let (n, t) = match cat.dims() {
            &[n, rows, _] if n == ctxs.len() && rows > c => (n, rows - c),
            d => {
                return Err(OpError::Shape {
                    op: "causal_conv1d",
                    view: "cat",
                    expected: format!("[{}, > {c}, c_in]", ctxs.len()),
                    actual: d.to_vec(),
                });
            }
        };
        for (i, ctx) in ctxs.iter().enumerate() {
            ops::copy(cx, *ctx, cat.index(0, i)?.rows(t, c)?)?;
        }
        let k = self.conv.k;
        let width = k * self.conv.c_in;
        let col = col.view(&[n, t, width])?;
        ops::copy_batched(cx, col, cat.windows(k)?)?;
        self.conv.lin.forward(cx, col.view(&[n * t, width])?, y)
    }
}
