//! Weights from a [`WeightStore`] into device buffers.

use std::fmt;

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};

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

/// Reads named weights, checks their shapes and uploads them to a backend.
#[derive(Copy, Clone)]
pub struct Loader<'a> {
    be: &'a dyn Backend,
    ws: &'a WeightStore,
}

impl<'a> Loader<'a> {
    pub fn new(be: &'a dyn Backend, ws: &'a WeightStore) -> Loader<'a> {
        Loader { be, ws }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.ws.contains(name)
    }

    /// The host values of `name`, checked against `shape`.
    pub fn host(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, WeightError> {
        self.ws.get(name, shape)
    }

    /// `v` in a fresh device buffer.
    pub fn upload(&self, v: &[f32]) -> Result<DeviceBuffer, LoadError> {
        Ok(self.be.alloc_from(v, AllocKind::Other)?)
    }

    /// The values of `name`, checked against `shape`, in a fresh device buffer.
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<DeviceBuffer, LoadError> {
        self.upload(&self.host(name, shape)?)
    }
}
