//! Build-script integration, in the style of `prost-build`:
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     dcc_compiler::Config::new().compile(&["specs/token2wav.yaml"])?;
//!     Ok(())
//! }
//! ```
//!
//! and in the crate: `pub mod token2wav { dcc_runtime::include_contracts!("token2wav"); }`.
//! Files go to `$OUT_DIR/dcc/<family>.rs` (or [`Config::out_dir`]), written only when their
//! content changed, and every spec is announced with `cargo:rerun-if-changed`.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{GenError, GenOptions, display_spec_path, generate_with};
use crate::LoadError;

/// Why [`Config::compile`] failed.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// `OUT_DIR` is not set and no [`Config::out_dir`] was given (not running under Cargo).
    #[error("OUT_DIR is not set: call dcc_compiler::Config from a build script, or set out_dir")]
    NoOutDir,
    /// A spec could not be read or has errors (its `Display` renders the diagnostics).
    #[error("spec `{}` has errors:\n{error}", path.display())]
    Spec {
        path: PathBuf,
        #[source]
        error: LoadError,
    },
    /// Code generation refused the spec.
    #[error("{}: {error}", path.display())]
    Gen {
        path: PathBuf,
        #[source]
        error: GenError,
    },
    /// Writing an output failed.
    #[error("cannot write `{}`: {error}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
}

/// Compiles specs into Rust modules from a build script.
#[derive(Clone, Debug, Default)]
pub struct Config {
    out_dir: Option<PathBuf>,
    rerun_if_changed: bool,
}

impl Config {
    /// Defaults: output to `$OUT_DIR/dcc`, `cargo:rerun-if-changed` for every spec.
    pub fn new() -> Config {
        Config {
            out_dir: None,
            rerun_if_changed: true,
        }
    }

    /// Write the modules into `dir` instead of `$OUT_DIR/dcc`.
    pub fn out_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Config {
        self.out_dir = Some(dir.into());
        self
    }

    /// Whether to print `cargo:rerun-if-changed=<spec>` (on by default; turn off outside Cargo).
    pub fn rerun_if_changed(&mut self, on: bool) -> &mut Config {
        self.rerun_if_changed = on;
        self
    }

    /// The directory modules are written to.
    pub fn output_dir(&self) -> Result<PathBuf, CompileError> {
        match &self.out_dir {
            Some(d) => Ok(d.clone()),
            None => std::env::var_os("OUT_DIR")
                .map(|d| PathBuf::from(d).join("dcc"))
                .ok_or(CompileError::NoOutDir),
        }
    }

    /// Check, derive and generate every spec (paths relative to the build script's working
    /// directory, i.e. the crate root); write `<family>.rs` for each where the content changed.
    /// Returns the paths of the modules, in the order of `specs`.
    pub fn compile(&self, specs: &[impl AsRef<Path>]) -> Result<Vec<PathBuf>, CompileError> {
        let dir = self.output_dir()?;
        std::fs::create_dir_all(&dir).map_err(|error| CompileError::Io {
            path: dir.clone(),
            error,
        })?;
        let mut written = Vec::new();
        for spec in specs {
            let path = spec.as_ref();
            if self.rerun_if_changed {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            let checked = crate::load_file(path).map_err(|error| CompileError::Spec {
                path: path.to_path_buf(),
                error,
            })?;
            let options = GenOptions {
                spec_path: display_spec_path(path),
                regenerate: "the build script (dcc_compiler::Config), on every change of the spec"
                    .into(),
            };
            let files = generate_with(&checked, &options).map_err(|error| CompileError::Gen {
                path: path.to_path_buf(),
                error,
            })?;
            for (name, text) in files {
                let out = dir.join(name);
                write_if_changed(&out, &text)?;
                written.push(out);
            }
        }
        Ok(written)
    }
}

/// Write `text` to `path` unless the file already holds exactly it (keeps mtimes, so Cargo does
/// not rebuild dependents for nothing).
pub fn write_if_changed(path: &Path, text: &str) -> Result<bool, CompileError> {
    if std::fs::read(path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(false);
    }
    let io = |error| CompileError::Io {
        path: path.to_path_buf(),
        error,
    };
    let tmp = path.with_extension("rs.tmp");
    let mut f = std::fs::File::create(&tmp).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io)?;
    Ok(true)
}
