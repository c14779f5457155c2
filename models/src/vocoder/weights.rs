//! The vocoder's safetensors file: float32 tensors, the float64 F0 predictor, the noise table and
//! the `config` JSON metadata, read by the vendor's state_dict names. (A `noise_table_period`
//! entry the exporter writes is not read: sample positions wrap modulo the table's own rows.)

use std::collections::BTreeMap;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::VocoderError;
use crate::nn::weights::{MAX_WEIGHTS_BYTES, read_regular_file};

/// One tensor's values in the dtype the file stores.
#[derive(Clone, Debug)]
enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// The tensors and metadata of a vocoder weights file.
#[derive(Clone, Debug)]
pub struct VocoderWeights {
    file: String,
    tensors: BTreeMap<String, (Vec<usize>, Values)>,
    others: BTreeMap<String, String>,
    metadata: BTreeMap<String, String>,
}

impl VocoderWeights {
    /// Reads a regular file of at most the weights limit (the `nn` weights limit).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, VocoderError> {
        let path = path.as_ref();
        let bytes = read_regular_file(path, MAX_WEIGHTS_BYTES)?;
        Self::parse(&bytes, path.display().to_string())
    }

    /// Parses a safetensors image held in memory (`file` names it in errors).
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self, VocoderError> {
        Self::parse(bytes, file.to_string())
    }

    fn parse(bytes: &[u8], file: String) -> Result<Self, VocoderError> {
        let format = |error: String| {
            VocoderError::Weights(crate::nn::WeightError::Format {
                file: file.clone(),
                error,
            })
        };
        let (_, meta) = SafeTensors::read_metadata(bytes).map_err(|e| format(e.to_string()))?;
        let metadata: BTreeMap<String, String> = meta
            .metadata()
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        let st = SafeTensors::deserialize(bytes).map_err(|e| format(e.to_string()))?;
        let mut tensors = BTreeMap::new();
        let mut others = BTreeMap::new();
        for (name, view) in st.tensors() {
            let raw = view.data();
            let values = match view.dtype() {
                Dtype::F32 => Values::F32(
                    raw.chunks_exact(4)
                        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                        .collect(),
                ),
                Dtype::F64 => Values::F64(
                    raw.chunks_exact(8)
                        .map(|b| {
                            f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
                        })
                        .collect(),
                ),
                d => {
                    others.insert(name, format!("{d:?}"));
                    continue;
                }
            };
            tensors.insert(name, (view.shape().to_vec(), values));
        }
        Ok(VocoderWeights {
            file,
            tensors,
            others,
            metadata,
        })
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// The metadata value `key`.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata.get(key).map(|s| s.as_str())
    }

    fn entry(&self, name: &str) -> Result<&(Vec<usize>, Values), VocoderError> {
        self.tensors
            .get(name)
            .ok_or_else(|| match self.others.get(name) {
                Some(d) => VocoderError::Dtype {
                    file: self.file.clone(),
                    name: name.into(),
                    expected: "F32 or F64".into(),
                    found: d.clone(),
                },
                None => VocoderError::Missing {
                    file: self.file.clone(),
                    name: name.into(),
                },
            })
    }

    /// The shape of `name`.
    pub fn shape(&self, name: &str) -> Result<&[usize], VocoderError> {
        Ok(&self.entry(name)?.0)
    }

    fn check_shape(
        &self,
        name: &str,
        found: &[usize],
        shape: &[usize],
    ) -> Result<(), VocoderError> {
        if found != shape {
            return Err(VocoderError::Shape {
                file: self.file.clone(),
                name: name.into(),
                expected: shape.to_vec(),
                found: found.to_vec(),
            });
        }
        Ok(())
    }

    /// The float32 tensor `name`, checked against `shape`.
    pub fn f32(&self, name: &str, shape: &[usize]) -> Result<&[f32], VocoderError> {
        let (found, v) = self.entry(name)?;
        self.check_shape(name, found, shape)?;
        match v {
            Values::F32(v) => Ok(v),
            Values::F64(_) => Err(VocoderError::Dtype {
                file: self.file.clone(),
                name: name.into(),
                expected: "F32".into(),
                found: "F64".into(),
            }),
        }
    }

    /// The float64 tensor `name`, checked against `shape`. A float32 tensor is widened exactly
    /// (the vendor's `.double()` of float32 weights).
    pub fn f64(&self, name: &str, shape: &[usize]) -> Result<Vec<f64>, VocoderError> {
        let (found, v) = self.entry(name)?;
        self.check_shape(name, found, shape)?;
        Ok(match v {
            Values::F64(v) => v.clone(),
            Values::F32(v) => v.iter().map(|&x| x as f64).collect(),
        })
    }
}
