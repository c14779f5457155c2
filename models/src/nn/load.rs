//! Weights from a [`WeightStore`] into device buffers.

use std::fmt;

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::elementwise::rn16;
use dcc_runtime::ops::GemmPath;

use super::weights::{WeightError, WeightStore};

/// Why a layer could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    Weight(WeightError),
    /// The backend refused an allocation or upload.
    Device(dcc_runtime::Error),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Weight(e) => write!(f, "{e}"),
            LoadError::Device(e) => write!(f, "device: {e}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<WeightError> for LoadError {
    fn from(e: WeightError) -> Self {
        LoadError::Weight(e)
    }
}

impl From<dcc_runtime::Error> for LoadError {
    fn from(e: dcc_runtime::Error) -> Self {
        LoadError::Device(e)
    }
}

/// Reads named weights, checks their shapes and uploads them to a backend, for layers whose
/// linears run on one [`GemmPath`] (a [`super::Linear`] stores its weights in the path's
/// element type, [`GemmPath::weight_dtype`]; every other layer's weights stay `f32`).
#[derive(Copy, Clone)]
pub struct Loader<'a> {
    be: &'a dyn Backend,
    ws: &'a WeightStore,
    gemm: GemmPath,
}

impl<'a> Loader<'a> {
    /// A loader for layers on [`GemmPath::Backend`] (`f32` weights, which every path but
    /// [`GemmPath::Half`] reads).
    pub fn new(be: &'a dyn Backend, ws: &'a WeightStore) -> Loader<'a> {
        Loader {
            be,
            ws,
            gemm: GemmPath::default(),
        }
    }

    /// The same loader for layers whose linears run on `gemm`: on [`GemmPath::Half`] a
    /// [`super::Linear`] keeps its weight and bias only as binary16, rounded to nearest even at
    /// load.
    pub fn with_gemm(self, gemm: GemmPath) -> Loader<'a> {
        Loader { gemm, ..self }
    }

    /// The GEMM path the loaded linears run on.
    pub fn gemm_path(&self) -> GemmPath {
        self.gemm
    }

    pub fn contains(&self, name: &str) -> bool {
        self.ws.contains(name)
    }

    /// The host values of `name`, checked against `shape`. For layers on [`GemmPath::Half`]
    /// every value is rounded to the nearest binary16 value (kept as `f32` where the layer
    /// stores `f32`): the vendor's `flow.half()` rounds every parameter and buffer of the flow,
    /// norm scales, position biases, the embedding table and the noise table included.
    pub fn host(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, WeightError> {
        let mut v = self.ws.get(name, shape)?;
        if crate::token2wav::half::rounds(self.gemm) {
            v.iter_mut().for_each(|x| *x = rn16(*x));
        }
        Ok(v)
    }

    /// `v` in a fresh device buffer.
    pub fn upload(&self, v: &[f32]) -> Result<DeviceBuffer, LoadError> {
        Ok(self.be.alloc_from(v, AllocKind::Other)?)
    }

    /// `v` rounded to binary16 (to nearest, ties to even; beyond ±65,504 to ±inf, as PyTorch's
    /// `Tensor.half()`) in a fresh device buffer of half the bytes.
    pub fn upload_f16(&self, v: &[f32]) -> Result<DeviceBuffer, LoadError> {
        let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
        Ok(self.be.alloc_from(&h, AllocKind::Other)?)
    }

    /// The values of `name`, checked against `shape`, in a fresh device buffer.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<DeviceBuffer, LoadError> {
        self.upload(&self.host(name, shape)?)
    }
}
