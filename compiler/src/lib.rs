//! dcc-compiler: native-clock contracts, from YAML spec to derived numbers (and, in `back`, Rust).
//!
//! Pipeline (naga-style; each stage only knows its neighbours):
//!
//! ```text
//! front (YAML → spanned tree → ir::Spec)  →  validate (names, cycles, consistency)
//!       →  lint (units, impossible contracts)  →  derive (extents, bytes, ρ, catalogs,
//!       verdicts, M_reserve)  →  lint (checks on derived values)  →  report / CLI
//! ```
//!
//! Only [`front`] knows the YAML crate. Every fallible path returns a typed [`Diagnostic`]
//! carrying a [`ir::Span`]; nothing in this crate panics on input.
//!
//! Entry points: [`check_source`] (text in memory) and [`load_file`] (from disk). Both return a
//! [`Checked`]: the IR, the derived values at the base operating point and at every declared
//! operating point, warnings, and the spec's SHA-256.

pub mod back;
pub mod derive;
pub mod diag;
pub mod expr;
pub mod front;
pub mod graph;
pub mod ir;
pub mod lint;
pub mod report;
pub mod validate;

use std::path::Path;
use std::sync::Arc;

pub use back::{CompileError, Config, GenError, GenOptions, generate, generate_with};
pub use derive::types::*;
pub use diag::{Code, Diagnostic, Diagnostics, Severity, SourceFile};

/// Largest spec file accepted (bytes). Larger files are rejected before parsing.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// A spec that parsed, validated and derived without errors.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The file it came from.
    pub source: Arc<SourceFile>,
    /// Hex SHA-256 of the file's bytes (the runtime checks it at start-up).
    pub spec_sha256: String,
    /// Typed IR.
    pub spec: ir::Spec,
    /// Derived values at the base operating point.
    pub derived: Derived,
    /// Derived values at each declared operating point, in declaration order.
    pub operating_points: Vec<Derived>,
    /// Warnings (never errors).
    pub warnings: Diagnostics,
}

impl Checked {
    /// Family name (`token2wav`).
    pub fn family(&self) -> &str {
        &self.spec.family.value
    }
}

/// Errors of [`load_file`]: the file could not be read, or the spec has errors.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// I/O error reading the file (CLI exit code 2).
    #[error("error: cannot read `{}`: {error}", path.display())]
    Io {
        path: std::path::PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// The spec has errors (CLI exit code 1); `Display` renders them.
    #[error("{0}")]
    Spec(Diagnostics),
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in digest {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Parse, validate and derive a spec given as text. `path` is only used in messages.
///
/// Returns every error found (several per run where possible) as [`Diagnostics`].
pub fn check_source(path: impl AsRef<Path>, text: &str) -> Result<Checked, Diagnostics> {
    let source = Arc::new(SourceFile::new(path.as_ref(), text));
    let spec_sha256 = sha256_hex(text.as_bytes());
    let mut diags = Diagnostics::new(source.clone());
    let spec = match front::parse(&source) {
        Ok(spec) => spec,
        Err(items) => {
            diags.items = items;
            return Err(diags);
        }
    };
    let mut items = validate::validate(&spec);
    if items.iter().any(|d| d.severity == Severity::Error) {
        diags.items = items;
        return Err(diags);
    }
    items.extend(lint::declarations(&spec));
    if items.iter().any(|d| d.severity == Severity::Error) {
        diags.items = items;
        return Err(diags);
    }
    let (derived, operating_points) = match derive::derive_all(&spec) {
        Ok(v) => v,
        Err(more) => {
            items.extend(more);
            diags.items = items;
            return Err(diags);
        }
    };
    items.extend(lint::derived(
        &spec,
        std::iter::once(&derived).chain(&operating_points),
    ));
    if items.iter().any(|d| d.severity == Severity::Error) {
        diags.items = items;
        return Err(diags);
    }
    items.extend(derive::warnings(&spec, &derived));
    diags.items = items;
    Ok(Checked {
        source,
        spec_sha256,
        spec,
        derived,
        operating_points,
        warnings: diags,
    })
}

/// Read `path` and [`check_source`] it. Only regular files are read (a FIFO, a device such as
/// `/dev/zero` or a directory is [`LoadError::Io`], exit 2, without blocking or reading it);
/// files over [`MAX_FILE_BYTES`] (by their size, checked before reading) or not UTF-8 are
/// reported as spec errors (exit 1).
pub fn load_file(path: impl AsRef<Path>) -> Result<Checked, LoadError> {
    let path = path.as_ref();
    let text = read_spec(path)?;
    check_source(path, &text).map_err(LoadError::Spec)
}

/// The text of the spec at `path`, read as [`load_file`] reads it (a regular file of at most
/// [`MAX_FILE_BYTES`], UTF-8) but not checked: for callers that name the spec differently in
/// messages (the `#[native_clock]` macro names it as written in the source).
pub fn read_spec(path: impl AsRef<Path>) -> Result<String, LoadError> {
    let path = path.as_ref();
    let io = |error| LoadError::Io {
        path: path.to_path_buf(),
        error,
    };
    let bytes = match read_limited(path).map_err(io)? {
        Limited::Bytes(b) => b,
        Limited::TooLarge(len) => {
            let mut d = Diagnostics::new(Arc::new(SourceFile::new(path, String::new())));
            d.items.push(
                Diagnostic::error(
                    Code::FileTooLarge,
                    ir::Span::new(0, 0),
                    format!("spec is {len} bytes; the limit is {MAX_FILE_BYTES} bytes"),
                )
                .label("file starts here")
                .help("a contract is a few hundred lines; check that this is the right file"),
            );
            return Err(LoadError::Spec(d));
        }
    };
    match String::from_utf8(bytes) {
        Ok(text) => Ok(text),
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
            let source = Arc::new(SourceFile::new(path, text));
            let mut d = Diagnostics::new(source);
            d.items.push(
                Diagnostic::error(
                    Code::YamlSyntax,
                    ir::Span::new(valid, valid),
                    "spec is not valid UTF-8",
                )
                .label("invalid byte sequence starts here")
                .help("save the spec as UTF-8"),
            );
            Err(LoadError::Spec(d))
        }
    }
}

/// What [`read_limited`] found.
enum Limited {
    Bytes(Vec<u8>),
    /// A regular file over [`MAX_FILE_BYTES`], of this many bytes (not read).
    TooLarge(u64),
}

/// Read a regular file of at most [`MAX_FILE_BYTES`]. The file is opened non-blocking on Unix
/// (so opening a FIFO with no writer does not hang) and its type and size are taken from the
/// open handle before a byte is read; the read itself is still capped, in case the file grows.
fn read_limited(path: &Path) -> std::io::Result<Limited> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK);
    }
    let file = options.open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what}; a spec must be a regular file"),
        ));
    }
    if meta.len() > MAX_FILE_BYTES as u64 {
        return Ok(Limited::TooLarge(meta.len()));
    }
    let mut buf = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut buf)?;
    Ok(Limited::Bytes(buf))
}
