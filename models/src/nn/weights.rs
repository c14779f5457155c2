//! A safetensors state_dict in host memory, by name (names as the vendor's PyTorch modules
//! write them).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

/// Why a weight could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WeightError {
    Io(String),
    /// Not a readable safetensors image.
    Format(String),
    /// A state_dict entry is absent.
    Missing(String),
    Shape {
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
}

impl fmt::Display for WeightError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WeightError::Io(s) => write!(f, "i/o: {s}"),
            WeightError::Format(s) => write!(f, "not a safetensors file: {s}"),
            WeightError::Missing(s) => write!(f, "missing tensor `{s}`"),
            WeightError::Shape {
                name,
                expected,
                found,
            } => write!(
                f,
                "tensor `{name}`: expected shape {expected:?}, found {found:?}"
            ),
        }
    }
}

impl std::error::Error for WeightError {}

/// One float32 tensor (converted from F32/F16/BF16 on load).
#[derive(Clone, Debug)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// All tensors of a safetensors file, by state_dict name.
#[derive(Clone, Debug, Default)]
pub struct WeightStore {
    tensors: BTreeMap<String, HostTensor>,
}

fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // subnormal: normalise
            let mut e = 113u32; // 127 - 15 + 1
            let mut m = m;
            while m & 0x400 == 0 {
                m <<= 1;
                e -= 1;
            }
            sign | (e << 23) | ((m & 0x3ff) << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

impl WeightStore {
    /// Parses a safetensors image. Integer tensors are skipped; F32, F16 and BF16 become f32.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WeightError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| WeightError::Format(e.to_string()))?;
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            let raw = view.data();
            let data: Vec<f32> = match view.dtype() {
                Dtype::F32 => raw
                    .chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
                Dtype::BF16 => raw
                    .chunks_exact(2)
                    .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
                    .collect(),
                Dtype::F16 => raw
                    .chunks_exact(2)
                    .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                    .collect(),
                _ => continue,
            };
            tensors.insert(
                name,
                HostTensor {
                    shape: view.shape().to_vec(),
                    data,
                },
            );
        }
        Ok(Self { tensors })
    }

    /// Reads and parses a safetensors file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, WeightError> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| WeightError::Io(format!("{}: {e}", path.display())))?;
        Self::from_bytes(&bytes)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(|s| s.as_str())
    }

    /// The shape of `name`, or `WeightError::Missing`.
    pub fn shape(&self, name: &str) -> Result<&[usize], WeightError> {
        self.tensors
            .get(name)
            .map(|t| t.shape.as_slice())
            .ok_or_else(|| WeightError::Missing(name.to_string()))
    }

    /// The data of `name`, checked against `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, WeightError> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| WeightError::Missing(name.to_string()))?;
        if t.shape != shape {
            return Err(WeightError::Shape {
                name: name.to_string(),
                expected: shape.to_vec(),
                found: t.shape.clone(),
            });
        }
        Ok(t.data.clone())
    }

    /// Number of consecutive `prefix.{i}.<probe>` entries (`i = 0, 1, …`).
    pub fn count_indexed(&self, prefix: &str, probe: &str) -> usize {
        let mut n = 0;
        while self.contains(&format!("{prefix}.{n}.{probe}")) {
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversions() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
    }

    #[test]
    fn malformed_input_is_an_error() {
        assert!(matches!(
            WeightStore::from_bytes(b"not a safetensors file"),
            Err(WeightError::Format(_))
        ));
        assert!(matches!(
            WeightStore::from_bytes(&[]),
            Err(WeightError::Format(_))
        ));
    }
}
