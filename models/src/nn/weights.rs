//! A safetensors state_dict in host memory, by name (names as the vendor's PyTorch modules
//! write them).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use safetensors::{Dtype, SafeTensors};

/// The largest weights file [`WeightStore::load`] reads (the released flow checkpoint is well
/// under 2 GiB in f32); checked before reading, so a huge or endless file is refused up front.
pub const MAX_WEIGHTS_BYTES: u64 = 8 << 30;

/// Why a weight could not be read. Every variant names the file (`file`: its path, or
/// `(bytes)` for [`WeightStore::from_bytes`]) and, where one is involved, the tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WeightError {
    /// The file could not be opened, inspected or read.
    #[error("{file}: {error}")]
    Io { file: String, error: String },
    /// Not a regular file (a FIFO, a device, a directory): refused before reading, since such a
    /// file may never end.
    #[error("{file}: not a regular file ({kind})")]
    NotRegular { file: String, kind: String },
    /// Larger than the limit the caller set.
    #[error("{file}: {size} bytes, over the {limit}-byte limit")]
    TooLarge { file: String, size: u64, limit: u64 },
    /// Not a readable safetensors image.
    #[error("{file}: not a safetensors file: {error}")]
    Format { file: String, error: String },
    /// A state_dict entry is absent.
    #[error("{file}: missing tensor `{name}`")]
    Missing { file: String, name: String },
    /// A state_dict entry is present with a dtype that is not a float.
    #[error("{file}: tensor `{name}` has dtype {found}; expected {expected}")]
    Dtype {
        file: String,
        name: String,
        found: String,
        expected: String,
    },
    /// A state_dict entry has another shape than the configuration needs.
    #[error("{file}: tensor `{name}`: expected shape {expected:?}, found {found:?}")]
    Shape {
        file: String,
        name: String,
        expected: Vec<usize>,
        found: Vec<usize>,
    },
}

/// Reads `path` whole if it is a regular file of at most `limit` bytes. The file type and size
/// are checked on the path before opening (opening a FIFO for reading would block until a
/// writer comes) and again on the open handle; the read itself stops at `limit + 1` bytes, so a
/// file that grows meanwhile is refused too, never read without bound.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, WeightError> {
    let file = || path.display().to_string();
    let io = |e: std::io::Error| WeightError::Io {
        file: file(),
        error: e.to_string(),
    };
    let check = |m: &std::fs::Metadata| -> Result<(), WeightError> {
        let t = m.file_type();
        if !t.is_file() {
            let kind = if t.is_dir() {
                "a directory"
            } else if t.is_symlink() {
                "a symbolic link"
            } else {
                "a FIFO, socket or device"
            };
            return Err(WeightError::NotRegular {
                file: file(),
                kind: kind.into(),
            });
        }
        if m.len() > limit {
            return Err(WeightError::TooLarge {
                file: file(),
                size: m.len(),
                limit,
            });
        }
        Ok(())
    };
    check(&std::fs::metadata(path).map_err(io)?)?;
    let f = std::fs::File::open(path).map_err(io)?;
    check(&f.metadata().map_err(io)?)?;
    let mut bytes = Vec::new();
    f.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    let size = bytes.len() as u64;
    if size > limit {
        return Err(WeightError::TooLarge {
            file: file(),
            size,
            limit,
        });
    }
    Ok(bytes)
}

/// One float32 tensor (converted from F32/F16/BF16 on load).
#[derive(Clone, Debug)]
pub struct HostTensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// All tensors of a safetensors file, by state_dict name.
#[derive(Clone, Debug, Default)]
pub struct WeightStore {
    /// Where the tensors came from, for error messages.
    file: String,
    tensors: BTreeMap<String, HostTensor>,
    /// Entries of a non-float dtype, kept by name so a lookup reports the wrong dtype rather
    /// than a missing tensor.
    others: BTreeMap<String, Dtype>,
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
    /// Parses a safetensors image held in memory (errors name the file `(bytes)`). Float
    /// tensors (F32, F16, BF16) become f32; other dtypes are remembered by name only.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, WeightError> {
        Self::parse(bytes, "(bytes)".into())
    }

    fn parse(bytes: &[u8], file: String) -> Result<Self, WeightError> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| WeightError::Format {
            file: file.clone(),
            error: e.to_string(),
        })?;
        let mut tensors = BTreeMap::new();
        let mut others = BTreeMap::new();
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
                d => {
                    others.insert(name, d);
                    continue;
                }
            };
            tensors.insert(
                name,
                HostTensor {
                    shape: view.shape().to_vec(),
                    data,
                },
            );
        }
        Ok(Self {
            file,
            tensors,
            others,
        })
    }

    /// Reads and parses a safetensors file: a regular file of at most [`MAX_WEIGHTS_BYTES`]
    /// ([`read_regular_file`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, WeightError> {
        let path = path.as_ref();
        let bytes = read_regular_file(path, MAX_WEIGHTS_BYTES)?;
        Self::parse(&bytes, path.display().to_string())
    }

    /// The file the tensors came from (`(bytes)` for [`WeightStore::from_bytes`]).
    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn contains(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tensors.keys().map(|s| s.as_str())
    }

    /// The float tensor `name`, or why there is none: [`WeightError::Dtype`] for an entry of
    /// another dtype, [`WeightError::Missing`] for none at all.
    fn entry(&self, name: &str) -> Result<&HostTensor, WeightError> {
        if let Some(t) = self.tensors.get(name) {
            return Ok(t);
        }
        Err(match self.others.get(name) {
            Some(d) => WeightError::Dtype {
                file: self.file.clone(),
                name: name.into(),
                found: format!("{d:?}"),
                expected: "F32, F16 or BF16".into(),
            },
            None => WeightError::Missing {
                file: self.file.clone(),
                name: name.into(),
            },
        })
    }

    /// The shape of `name`.
    pub fn shape(&self, name: &str) -> Result<&[usize], WeightError> {
        Ok(self.entry(name)?.shape.as_slice())
    }

    /// The data of `name`, checked against `shape`.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, WeightError> {
        let t = self.entry(name)?;
        if t.shape != shape {
            return Err(WeightError::Shape {
                file: self.file.clone(),
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
            Err(WeightError::Format { .. })
        ));
        assert!(matches!(
            WeightStore::from_bytes(&[]),
            Err(WeightError::Format { .. })
        ));
    }

    /// A one-entry safetensors image: `name` of `dtype` and `shape`, zero bytes.
    fn image(name: &str, dtype: Dtype, shape: &[usize]) -> Vec<u8> {
        let n: usize = shape.iter().product::<usize>() * dtype.bitsize() / 8;
        let data = vec![0u8; n];
        let view = safetensors::tensor::TensorView::new(dtype, shape.to_vec(), &data).unwrap();
        safetensors::serialize([(name, view)], None).unwrap()
    }

    #[test]
    fn a_non_float_entry_is_a_dtype_error_not_a_missing_one() {
        let ws = WeightStore::from_bytes(&image("w", Dtype::I64, &[2, 3])).unwrap();
        let e = ws.get("w", &[2, 3]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "(bytes): tensor `w` has dtype I64; expected F32, F16 or BF16"
        );
        assert!(matches!(ws.shape("w"), Err(WeightError::Dtype { .. })));
        assert_eq!(
            ws.shape("v").unwrap_err().to_string(),
            "(bytes): missing tensor `v`"
        );
    }

    #[test]
    fn errors_name_the_file_the_tensor_and_both_shapes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.safetensors");
        std::fs::write(&p, image("w", Dtype::F32, &[2, 3])).unwrap();
        let ws = WeightStore::load(&p).unwrap();
        assert_eq!(ws.get("w", &[2, 3]).unwrap(), vec![0.0; 6]);
        let e = ws.get("w", &[3, 2]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}: tensor `w`: expected shape [3, 2], found [2, 3]",
                p.display()
            )
        );
        std::fs::write(&p, b"junk").unwrap();
        let e = WeightStore::load(&p).unwrap_err();
        assert!(
            matches!(e, WeightError::Format { ref file, .. } if *file == p.display().to_string())
        );
        let e = WeightStore::load(dir.path().join("absent")).unwrap_err();
        assert!(matches!(e, WeightError::Io { ref file, .. } if file.ends_with("absent")));
    }

    #[test]
    fn only_regular_files_under_the_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, [7u8; 10]).unwrap();
        assert_eq!(read_regular_file(&p, 10).unwrap(), vec![7u8; 10]);
        assert_eq!(
            read_regular_file(&p, 9).unwrap_err(),
            WeightError::TooLarge {
                file: p.display().to_string(),
                size: 10,
                limit: 9
            }
        );
        for (q, kind) in [
            (Path::new("/dev/zero"), "a FIFO, socket or device"),
            (dir.path(), "a directory"),
        ] {
            assert_eq!(
                read_regular_file(q, u64::MAX).unwrap_err(),
                WeightError::NotRegular {
                    file: q.display().to_string(),
                    kind: kind.into()
                }
            );
        }
    }
}
