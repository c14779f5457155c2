//! Typed parameter groups and their forward calls over the kernel host twins.

use dcc_kernels as k;

use super::FlowError;
use super::weights::WeightStore;

/// `torch.nn.Linear` (`weight [out, in]`, optional bias).
#[derive(Clone, Debug)]
pub struct Linear {
    pub w: Vec<f32>,
    pub b: Option<Vec<f32>>,
    pub in_dim: usize,
    pub out_dim: usize,
}

impl Linear {
    pub fn load(
        ws: &WeightStore,
        prefix: &str,
        in_dim: usize,
        out_dim: usize,
        bias: bool,
    ) -> Result<Self, FlowError> {
        let w = ws.get(&format!("{prefix}.weight"), &[out_dim, in_dim])?;
        let b = if bias {
            Some(ws.get(&format!("{prefix}.bias"), &[out_dim])?)
        } else {
            None
        };
        Ok(Self {
            w,
            b,
            in_dim,
            out_dim,
        })
    }

    /// `y[rows, out] = x[rows, in] · Wᵀ + b` (contiguous rows).
    pub fn forward(&self, rows: usize, x: &[f32], y: &mut [f32]) {
        k::gemm::linear(
            rows,
            self.in_dim,
            self.out_dim,
            x,
            self.in_dim,
            &self.w,
            self.b.as_deref(),
            y,
            self.out_dim,
        );
    }

    /// Allocating variant of [`Linear::forward`].
    pub fn apply(&self, rows: usize, x: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; rows * self.out_dim];
        self.forward(rows, x, &mut y);
        y
    }
}

/// `torch.nn.LayerNorm` with affine parameters.
#[derive(Clone, Debug)]
pub struct LayerNorm {
    pub g: Vec<f32>,
    pub b: Vec<f32>,
    pub eps: f32,
}

impl LayerNorm {
    pub fn load(ws: &WeightStore, prefix: &str, dim: usize, eps: f32) -> Result<Self, FlowError> {
        Ok(Self {
            g: ws.get(&format!("{prefix}.weight"), &[dim])?,
            b: ws.get(&format!("{prefix}.bias"), &[dim])?,
            eps,
        })
    }

    pub fn dim(&self) -> usize {
        self.g.len()
    }

    /// Normalises `rows` contiguous rows of width `dim`.
    pub fn forward(&self, rows: usize, x: &[f32], y: &mut [f32]) {
        let d = self.dim();
        k::norm::layer_norm(rows, d, x, d, Some(&self.g), Some(&self.b), self.eps, y, d);
    }

    pub fn apply(&self, rows: usize, x: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; rows * self.dim()];
        self.forward(rows, x, &mut y);
        y
    }
}

/// `torch.nn.Conv1d` (stride 1, no padding), weight re-laid out as `[out, k, in]`.
#[derive(Clone, Debug)]
pub struct Conv1d {
    pub w_okc: Vec<f32>,
    pub b: Vec<f32>,
    pub c_in: usize,
    pub c_out: usize,
    pub k: usize,
}

impl Conv1d {
    pub fn load(
        ws: &WeightStore,
        prefix: &str,
        c_in: usize,
        c_out: usize,
        kk: usize,
    ) -> Result<Self, FlowError> {
        let w = ws.get(&format!("{prefix}.weight"), &[c_out, c_in, kk])?;
        let b = ws.get(&format!("{prefix}.bias"), &[c_out])?;
        Ok(Self {
            w_okc: k::gemm::conv_weight_okc(&w, c_out, c_in, kk),
            b,
            c_in,
            c_out,
            k: kk,
        })
    }

    /// Valid convolution over a time-major input of `t_in` rows: `t_in − k + 1` output rows.
    pub fn forward(&self, t_in: usize, x: &[f32], y: &mut [f32]) -> usize {
        assert!(t_in >= self.k, "conv input shorter than its kernel");
        let t_out = t_in - self.k + 1;
        k::gemm::linear(
            t_out,
            self.k * self.c_in,
            self.c_out,
            x,
            self.c_in,
            &self.w_okc,
            Some(&self.b),
            y,
            self.c_out,
        );
        t_out
    }

    pub fn apply(&self, t_in: usize, x: &[f32]) -> Vec<f32> {
        let mut y = vec![0.0; (t_in + 1 - self.k) * self.c_out];
        self.forward(t_in, x, &mut y);
        y
    }
}

/// `cat([cache, x], time)` of time-major blocks, with the new cache = the last `cache_rows` rows
/// of the concatenation (the vendor's causal-conv streaming rule). Returns the concatenation.
pub fn causal_concat(cache: &mut [f32], x: &[f32], cols: usize) -> Vec<f32> {
    let mut cat = Vec::with_capacity(cache.len() + x.len());
    cat.extend_from_slice(cache);
    cat.extend_from_slice(x);
    let n = cache.len();
    cache.copy_from_slice(&cat[cat.len() - n..]);
    debug_assert_eq!(n % cols, 0);
    cat
}
