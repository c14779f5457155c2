//! Front end: YAML text → [`crate::ir::Spec`].
//!
//! [`yaml`] builds a spanned tree (the only code that knows the YAML parser); [`lower`] types it
//! into the IR, collecting as many errors as it can in one pass (unknown keys, wrong types,
//! duplicate keys, bad expressions...). `effects.rs` lowers an effect set, `view.rs` an
//! input's offset view, and `flow.rs` reports an expression YAML cut at a comma.

mod effects;
mod flow;
pub mod lower;
mod view;
pub mod yaml;

use crate::diag::{Code, Diagnostic, SourceFile};
use crate::ir::{Span, Spec};

/// Parse and lower one spec file.
pub fn parse(source: &SourceFile) -> Result<Spec, Vec<Diagnostic>> {
    let text = source.text.as_str();
    if text.len() > crate::MAX_FILE_BYTES {
        return Err(vec![
            Diagnostic::error(
                Code::FileTooLarge,
                Span::new(0, 0),
                format!(
                    "spec is {} bytes; the limit is {} bytes",
                    text.len(),
                    crate::MAX_FILE_BYTES
                ),
            )
            .label("file starts here")
            .help("a contract is a few hundred lines; check that this is the right file"),
        ]);
    }
    let root = yaml::parse(text)?;
    let Some(root) = root else {
        return Err(vec![
            Diagnostic::error(Code::EmptySpec, Span::new(0, 0), "spec is empty")
                .label("no YAML content")
                .help("start with `family: <name>` followed by `clocks:`, `quantities:`, `regions:` and `callables:`"),
        ]);
    };
    lower::lower(text, &root)
}
