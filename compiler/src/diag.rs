//! Diagnostics: typed errors with source spans, rendered rustc-style by `annotate-snippets`.
//!
//! Every error the compiler reports about a spec is a [`Diagnostic`]: a stable code
//! (`E0xxx`), a message, a primary span (byte range into the spec file) with a label, optional
//! secondary spans, and a `help:` line saying what would fix it. A [`Diagnostics`] bundles
//! several of them with the [`SourceFile`] they point into, so it can render itself.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::ir::Span;

/// A spec file as read from disk (or given in memory): its display path and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Path as the user named it; used in `--> path:line:col`.
    pub path: PathBuf,
    /// Full text of the file.
    pub text: String,
}

impl SourceFile {
    /// Wrap a path and its text.
    pub fn new(path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        SourceFile {
            path: path.into(),
            text: text.into(),
        }
    }

    /// 1-based line and column (in characters) of a byte offset; offsets past the end clamp.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = clamp_to_boundary(&self.text, offset);
        let before = &self.text[..offset];
        let line = before.bytes().filter(|b| *b == b'\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let col = self.text[line_start..offset].chars().count() + 1;
        (line, col)
    }
}

/// Largest char boundary `<= offset` (and `<= text.len()`).
pub(crate) fn clamp_to_boundary(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while o > 0 && !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// How bad a diagnostic is. Errors make `dcc check` exit with 1; warnings do not.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// Stable diagnostic codes. The number never changes meaning; new codes are appended. Retired:
/// E0034 (`host_rng` was an error; it is now the verdict `out: effects`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    /// The YAML itself does not parse (scanner/parser error).
    YamlSyntax,
    /// A tab character used for indentation.
    Tab,
    /// File larger than the accepted maximum.
    FileTooLarge,
    /// Nesting deeper than the accepted maximum.
    TooDeep,
    /// Too many YAML nodes.
    TooManyNodes,
    /// Anchors, aliases, tags or multiple documents (not part of the contract language).
    UnsupportedYaml,
    /// The file has no document, or the top level is not a mapping.
    EmptySpec,
    /// A key longer than [`crate::front::yaml::MAX_NAME_LEN`] characters.
    NameTooLong,
    /// A key the contract language does not know.
    UnknownKey,
    /// A required key is absent.
    MissingKey,
    /// The same key appears twice in one mapping.
    DuplicateKey,
    /// A node of the wrong type (e.g. a list where a number is expected).
    WrongType,
    /// A value outside the set of allowed words (`lifetime: forever`).
    BadValue,
    /// An arithmetic expression that does not parse.
    BadExpression,
    /// A name used but never declared.
    Undefined,
    /// Two declarations with the same name.
    DuplicateName,
    /// Quantity definitions that depend on each other in a cycle.
    Cycle,
    /// Arithmetic that overflows, divides by zero or is otherwise not evaluable.
    Arithmetic,
    /// A value that must be positive is zero or negative.
    NotPositive,
    /// Declarations that contradict each other.
    Inconsistent,
    /// Retention that needs more than the declared envelope holds.
    RetentionExceedsEnvelope,
    /// A callable reads or writes a region that is not declared.
    UndeclaredRegion,
    /// `alias: true` on an input that is not contract-owned.
    AliasNonContract,
    /// Clock declarations that are cyclic or inconsistent.
    Clock,
    /// A callable writes storage one of its inputs stages (`alias: false`): replay would read
    /// the staged copy while the graph writes the storage in place, and diverge from eager.
    StagedWrite,
    /// A derived number is suspicious (warning).
    Suspicious,
    /// A YAML flow collection (`[a, b]`, `{k: v}`) split an expression at a `,`.
    FlowComma,
    /// A value in one clock used where another clock (or a different unit) is expected.
    UnitMismatch,
    /// A window retention whose stride is larger than the window: frames are dropped unseen.
    StrideExceedsWindow,
    /// A ring smaller than what one call writes into it, or a ring with `call:` frames.
    RingTooSmall,
    /// An admission predicate that admits nothing (empty, zero or negative bound).
    EmptyAdmission,
    /// An offset view that is out of range or malformed.
    View,
    /// A `batch:` list that is not a set of batch sizes: empty, an entry below 1 or not an
    /// integer, not starting at 1, not strictly increasing; `row_copies` without `batch:`.
    BadBatch,
    /// A batched callable the contract cannot serve batched: not captured, more graphs
    /// (classes × sizes) than the capture limit, or staged inputs that do not say how many
    /// rows a session presents.
    BatchBound,
}

impl Code {
    /// The `E0xxx` / `W0xxx` identifier printed in brackets.
    pub fn id(self) -> &'static str {
        match self {
            Code::YamlSyntax => "E0001",
            Code::Tab => "E0002",
            Code::FileTooLarge => "E0003",
            Code::TooDeep => "E0004",
            Code::TooManyNodes => "E0005",
            Code::UnsupportedYaml => "E0006",
            Code::EmptySpec => "E0007",
            Code::NameTooLong => "E0008",
            Code::UnknownKey => "E0010",
            Code::MissingKey => "E0011",
            Code::DuplicateKey => "E0012",
            Code::WrongType => "E0013",
            Code::BadValue => "E0014",
            Code::BadExpression => "E0020",
            Code::Undefined => "E0021",
            Code::DuplicateName => "E0022",
            Code::Cycle => "E0023",
            Code::Arithmetic => "E0024",
            Code::NotPositive => "E0025",
            Code::Inconsistent => "E0030",
            Code::RetentionExceedsEnvelope => "E0031",
            Code::UndeclaredRegion => "E0032",
            Code::AliasNonContract => "E0033",
            Code::Clock => "E0035",
            Code::StagedWrite => "E0036",
            Code::Suspicious => "W0001",
            Code::FlowComma => "E0015",
            Code::UnitMismatch => "E0037",
            Code::StrideExceedsWindow => "E0038",
            Code::RingTooSmall => "E0039",
            Code::EmptyAdmission => "E0040",
            Code::View => "E0041",
            Code::BadBatch => "E0042",
            Code::BatchBound => "E0043",
        }
    }
}

/// A secondary span with a label ("first defined here").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

/// One error or warning about a spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Code,
    /// Headline: `error[E0021]: <message>`.
    pub message: String,
    /// The offending node.
    pub span: Span,
    /// Label under the primary span.
    pub label: String,
    /// Other relevant places.
    pub secondary: Vec<Label>,
    /// What would fix it (rendered as `help:`).
    pub help: Option<String>,
}

impl Diagnostic {
    /// A new error at `span`.
    pub fn error(code: Code, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            span,
            label: String::new(),
            secondary: Vec::new(),
            help: None,
        }
    }

    /// A new warning at `span`.
    pub fn warning(code: Code, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::error(code, span, message)
        }
    }

    /// Set the label under the primary span.
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// Add a secondary span.
    pub fn with_secondary(mut self, span: Span, message: impl Into<String>) -> Self {
        self.secondary.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    /// Set the `help:` line.
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Render this diagnostic against `source` (plain text, rustc style).
    pub fn render(&self, source: &SourceFile) -> String {
        use annotate_snippets::{AnnotationKind, Group, Level, Renderer, Snippet};
        let level = match self.severity {
            Severity::Error => Level::ERROR,
            Severity::Warning => Level::WARNING,
        };
        let full = source.text.as_str();
        let path = source.path.display().to_string();
        // Render only the lines the spans touch (keeps rendering O(excerpt), not O(file)).
        let mut lo = clamp_to_boundary(full, self.span.start);
        let mut hi = clamp_to_boundary(full, self.span.end.max(self.span.start));
        for l in &self.secondary {
            lo = lo.min(clamp_to_boundary(full, l.span.start));
            hi = hi.max(clamp_to_boundary(full, l.span.end.max(l.span.start)));
        }
        let line_lo = full[..lo].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let line_hi = full[hi..].find('\n').map(|i| hi + i).unwrap_or(full.len());
        let text = &full[line_lo..line_hi];
        let line_start = full[..line_lo].bytes().filter(|b| *b == b'\n').count() + 1;
        let fix = |s: Span| -> std::ops::Range<usize> {
            let a = clamp_to_boundary(full, s.start).clamp(line_lo, line_hi) - line_lo;
            let b = clamp_to_boundary(full, s.end.max(s.start)).clamp(line_lo, line_hi) - line_lo;
            a..b.max(a)
        };
        let mut snippet = Snippet::source(text)
            .line_start(line_start)
            .path(path.as_str())
            .fold(true)
            .annotation(
                AnnotationKind::Primary
                    .span(fix(self.span))
                    .label(self.label.as_str()),
            );
        for l in &self.secondary {
            snippet = snippet.annotation(
                AnnotationKind::Context
                    .span(fix(l.span))
                    .label(l.message.as_str()),
            );
        }
        let mut group = level
            .primary_title(self.message.as_str())
            .id(self.code.id())
            .element(snippet);
        if let Some(h) = &self.help {
            group = group.element(Level::HELP.message(h.as_str()));
        }
        let report: [Group<'_>; 1] = [group];
        Renderer::plain().render(&report).to_string()
    }
}

/// Most diagnostics rendered (and kept) per file; the rest are counted.
pub const MAX_RENDERED: usize = 50;

/// Several diagnostics about one source file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics {
    pub source: Arc<SourceFile>,
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// An empty set for `source`.
    pub fn new(source: Arc<SourceFile>) -> Self {
        Diagnostics {
            source,
            items: Vec::new(),
        }
    }

    /// Whether any item is an error.
    pub fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    /// Render all items, each followed by a blank line, then a summary line when there are errors.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for d in self.items.iter().take(MAX_RENDERED) {
            out.push_str(&d.render(&self.source));
            out.push_str("\n\n");
        }
        if self.items.len() > MAX_RENDERED {
            out.push_str(&format!(
                "note: {} more diagnostics not shown\n\n",
                self.items.len() - MAX_RENDERED
            ));
        }
        let n = self.error_count();
        if n > 0 {
            out.push_str(&format!(
                "error: could not check `{}` due to {} previous error{}\n",
                self.source.path.display(),
                n,
                if n == 1 { "" } else { "s" }
            ));
        }
        out
    }

    /// `path` of the file these diagnostics are about.
    pub fn path(&self) -> &Path {
        &self.source.path
    }

    /// JSON form: one object per diagnostic with file/line/column.
    pub fn to_json(&self) -> Vec<serde_json::Value> {
        self.items
            .iter()
            .take(MAX_RENDERED)
            .map(|d| {
                let (line, column) = self.source.line_col(d.span.start);
                serde_json::json!({
                    "severity": d.severity,
                    "code": d.code.id(),
                    "message": d.message,
                    "file": self.source.path.display().to_string(),
                    "line": line,
                    "column": column,
                    "label": d.label,
                    "help": d.help,
                })
            })
            .collect()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::error::Error for Diagnostics {}
