//! Back end: a checked contract → one Rust module (askama templates in `compiler/templates/`,
//! formatted with prettyplease).
//!
//! [`generate`] is a pure function of the [`Checked`] spec: the same spec gives the same bytes on
//! every machine (ordered maps only, no timestamps, no absolute paths). The CLI (`dcc compile`),
//! build scripts ([`Config`]), the `#[native_clock]` macro and the regeneration test of
//! `dcc-generated` all call it.
//!
//! The generated module depends only on the public API of `dcc-runtime`
//! (`dcc_runtime::contract`); see that module for the traits it implements.

mod batch;
mod callable;
mod config;
mod io;
mod model;
mod output;
mod point;
mod region;
mod render;
mod spell;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use crate::Checked;

pub use config::{CompileError, Config, MANIFEST};
pub use output::{check_output_target, write_atomic, write_if_changed};
pub use spell::{camel, explain, module_name};

/// Version of `dcc` written into every generated header.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Where the committed outputs of the bundled specs live (the `dcc-generated` crate).
pub const GENERATED_DIR: &str = "generated/src";

/// How the generated header names the spec and the command that regenerates the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenOptions {
    /// The spec path as written in the header (relative, `/`-separated).
    pub spec_path: String,
    /// What to run to regenerate the file.
    pub regenerate: String,
}

impl GenOptions {
    /// The header of the committed module in `generated/src/<module>.rs`.
    pub fn committed(checked: &Checked) -> Result<GenOptions, GenError> {
        let spec_path = display_spec_path(&checked.source.path);
        let module = module_name(checked.family())?;
        Ok(GenOptions {
            regenerate: format!(
                "cargo run -p dcc-compiler --bin dcc -- compile {spec_path} -o {GENERATED_DIR}/{module}.rs"
            ),
            spec_path,
        })
    }
}

/// Why code could not be generated. Every case is a property of the spec's names (a clash the
/// generated module cannot express), an arithmetic limit, or an internal inconsistency, never an
/// I/O problem.
#[derive(Debug, thiserror::Error)]
pub enum GenError {
    /// A name of the spec cannot be a Rust module/item name (keyword, not an identifier).
    #[error("{what} `{name}` cannot be used as a Rust name in the generated module; rename it")]
    BadName { what: String, name: String },
    /// Two items of the generated module would have the same name.
    #[error(
        "generated item `{item}` would be defined twice (by {first} and by {second}); rename one of them"
    )]
    NameClash {
        item: String,
        first: String,
        second: String,
    },
    /// A number the module spells (elements of a region) overflows 64 bits.
    #[error("cannot evaluate {what}: arithmetic overflow")]
    Overflow { what: String },
    /// The admission predicate of a callable could not be evaluated again at generation time.
    #[error("cannot evaluate the admission predicate of `{callable}`: {}", error.message)]
    Admission {
        callable: String,
        error: crate::expr::EvalError,
    },
    /// The template could not be rendered (a bug in `dcc`).
    #[error("internal error: the module template failed ({0}); please report this")]
    Template(#[source] askama::Error),
    /// The template produced text that is not valid Rust (a bug in `dcc`).
    #[error("internal error: generated code does not parse ({0}); please report this")]
    Parse(#[source] syn::Error),
}

/// Generate the Rust module for `checked` with the header of the committed file
/// (`generated/src/<module>.rs`): one entry, `<module>.rs` → source text.
pub fn generate(checked: &Checked) -> Result<BTreeMap<PathBuf, String>, GenError> {
    generate_with(checked, &GenOptions::committed(checked)?)
}

/// [`generate`] with an explicit header (build scripts name themselves as the regenerator).
pub fn generate_with(
    checked: &Checked,
    options: &GenOptions,
) -> Result<BTreeMap<PathBuf, String>, GenError> {
    let module = module_name(checked.family())?;
    let body = generate_body(checked, &options.spec_path)?;
    let mut text = header(options, &checked.spec_sha256);
    text.push_str(&body);
    let mut out = BTreeMap::new();
    out.insert(PathBuf::from(format!("{module}.rs")), text);
    Ok(out)
}

/// The module's items without the header comment, formatted (what the macro embeds).
pub fn generate_body(checked: &Checked, spec_path: &str) -> Result<String, GenError> {
    let view = model::build(checked, spec_path)?;
    let raw = render::module(&view)?;
    let file = syn::parse_file(&raw).map_err(GenError::Parse)?;
    Ok(space_items(&prettyplease::unparse(&file)))
}

/// prettyplease packs items together; put one blank line between consecutive items at the same
/// indentation (an item starts with a doc comment, an attribute or an item keyword, and the line
/// before it ends an item).
fn space_items(text: &str) -> String {
    const STARTS: [&str; 13] = [
        "///", "#[", "pub ", "impl ", "impl<", "const ", "static ", "use ", "mod ", "type ",
        "struct ", "fn ", "enum ",
    ];
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut prev: Option<&str> = None;
    for line in text.lines() {
        if let Some(p) = prev {
            let indent = |l: &str| l.len() - l.trim_start().len();
            let pt = p.trim();
            let ends_item = !pt.starts_with("//") && (pt.ends_with(';') || pt == "}");
            let starts_item = STARTS.iter().any(|s| line.trim_start().starts_with(s));
            if ends_item && starts_item && indent(p) == indent(line) {
                out.push('\n');
            }
        }
        out.push_str(line);
        out.push('\n');
        prev = Some(line);
    }
    out
}

/// `// @generated ...` and `// spec sha256: ...`, then a blank line.
pub fn header(options: &GenOptions, sha256: &str) -> String {
    format!(
        "// @generated by dcc {VERSION} from {} — do not edit. Regenerate: {}\n// spec sha256: {sha256}\n\n",
        options.spec_path, options.regenerate
    )
}

/// The spec path as the header shows it: `/`-separated, relative, starting at the last `specs`
/// directory when there is one (`../specs/x.yaml` and `/abs/specs/x.yaml` both give
/// `specs/x.yaml`), else the relative path as given, else the file name.
pub fn display_spec_path(path: &Path) -> String {
    let parts: Vec<String> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if let Some(i) = parts.iter().rposition(|p| p == "specs")
        && i + 1 < parts.len()
    {
        return parts[i..].join("/");
    }
    let relative = path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if relative && !parts.is_empty() {
        parts.join("/")
    } else {
        parts.last().cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_paths_are_relative_and_stable() {
        assert_eq!(display_spec_path(Path::new("specs/x.yaml")), "specs/x.yaml");
        assert_eq!(
            display_spec_path(Path::new("./specs/x.yaml")),
            "specs/x.yaml"
        );
        assert_eq!(
            display_spec_path(Path::new("../specs/x.yaml")),
            "specs/x.yaml"
        );
        assert_eq!(
            display_spec_path(Path::new("/abs/repo/specs/x.yaml")),
            "specs/x.yaml"
        );
        assert_eq!(display_spec_path(Path::new("a/b.yaml")), "a/b.yaml");
        assert_eq!(display_spec_path(Path::new("/tmp/b.yaml")), "b.yaml");
        assert_eq!(display_spec_path(Path::new("../b.yaml")), "b.yaml");
    }
}
