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
//! content changed (atomically, see [`super::output`]), and every spec is announced with
//! `cargo:rerun-if-changed`. A manifest in the output directory ([`MANIFEST`]) lists the modules
//! the last run wrote, so a module whose spec was dropped from the list is removed instead of
//! lingering and still compiling into the crate.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::output::{check_output_target, write_if_changed};
use super::{GenError, GenOptions, display_spec_path, generate_with};
use crate::LoadError;

/// File name of the manifest [`Config::compile`] keeps in its output directory: the file names
/// of the modules it wrote, one per line, sorted.
pub const MANIFEST: &str = ".dcc-manifest";

/// Largest manifest read back (bytes); a larger one is not ours and is left alone.
const MAX_MANIFEST_BYTES: u64 = 1 << 16;

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
    /// The output is one of the inputs of the same run (also through a symlink or a hard link):
    /// writing it would destroy the spec.
    #[error("output `{}` is the input `{}`: refusing to overwrite a spec", output.display(), input.display())]
    OutputIsInput { output: PathBuf, input: PathBuf },
    /// The output exists and is not a regular file (a directory, a device node, a FIFO...).
    #[error("output `{}` is {kind}: refusing to write there", path.display())]
    BadOutput { path: PathBuf, kind: &'static str },
    /// Two specs of one run declare the same family, so both would write `<family>.rs`.
    #[error("specs `{}` and `{}` both declare family `{family}`: each family compiles from one spec", first.display(), second.display())]
    DuplicateFamily {
        family: String,
        first: PathBuf,
        second: PathBuf,
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
    /// directory, i.e. the crate root); write `<family>.rs` for each where the content changed,
    /// remove the modules an earlier run wrote for specs no longer in `specs`, and update the
    /// manifest. Every spec is checked before anything is written, and two specs of one family
    /// are refused ([`CompileError::DuplicateFamily`]). Returns the paths of the modules, in the
    /// order of `specs`.
    pub fn compile(&self, specs: &[impl AsRef<Path>]) -> Result<Vec<PathBuf>, CompileError> {
        let dir = self.output_dir()?;
        let inputs: Vec<&Path> = specs.iter().map(|s| s.as_ref()).collect();
        let mut families: BTreeMap<String, &Path> = BTreeMap::new();
        let mut outputs: Vec<(PathBuf, String)> = Vec::new();
        for &path in &inputs {
            if self.rerun_if_changed {
                println!("cargo:rerun-if-changed={}", path.display());
            }
            let checked = crate::load_file(path).map_err(|error| CompileError::Spec {
                path: path.to_path_buf(),
                error,
            })?;
            if let Some(first) = families.insert(checked.family().to_string(), path) {
                return Err(CompileError::DuplicateFamily {
                    family: checked.family().to_string(),
                    first: first.to_path_buf(),
                    second: path.to_path_buf(),
                });
            }
            let options = GenOptions {
                spec_path: display_spec_path(path),
                regenerate: "the build script (dcc_compiler::Config), on every change of the spec"
                    .into(),
            };
            let files = generate_with(&checked, &options).map_err(|error| CompileError::Gen {
                path: path.to_path_buf(),
                error,
            })?;
            outputs.extend(files);
        }
        std::fs::create_dir_all(&dir).map_err(|error| CompileError::Io {
            path: dir.clone(),
            error,
        })?;
        let mut written = Vec::new();
        for (name, _) in &outputs {
            check_output_target(&dir.join(name), &inputs)?;
        }
        let manifest = dir.join(MANIFEST);
        check_output_target(&manifest, &inputs)?;
        for (name, text) in &outputs {
            let out = dir.join(name);
            write_if_changed(&out, text)?;
            written.push(out);
        }
        let names: BTreeSet<&Path> = outputs.iter().map(|(n, _)| n.as_path()).collect();
        for stale in read_manifest(&manifest) {
            if !names.contains(Path::new(&stale)) {
                let path = dir.join(&stale);
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                        return Err(CompileError::Io { path, error: e });
                    }
                    _ => {}
                }
            }
        }
        let mut listing = String::new();
        for name in &names {
            listing.push_str(&name.display().to_string());
            listing.push('\n');
        }
        write_if_changed(&manifest, &listing)?;
        Ok(written)
    }
}

/// The module file names listed in the manifest at `path` (none when it is absent or unreadable).
/// Only plain `<name>.rs` entries are returned, so a tampered manifest cannot make
/// [`Config::compile`] delete anything outside its output directory or anything but a module.
fn read_manifest(path: &Path) -> Vec<String> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut text = String::new();
    if file
        .take(MAX_MANIFEST_BYTES)
        .read_to_string(&mut text)
        .is_err()
    {
        return Vec::new();
    }
    text.lines()
        .filter(|l| {
            let mut parts = Path::new(l).components();
            l.ends_with(".rs")
                && matches!(parts.next(), Some(Component::Normal(_)))
                && parts.next().is_none()
        })
        .map(str::to_string)
        .collect()
}
