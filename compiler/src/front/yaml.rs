//! YAML → spanned tree. The only file in the crate that touches the YAML parser
//! (`granit-parser`, the event/span layer under `serde-saphyr`).
//!
//! The tree is deliberately small: scalars keep their text and whether they were plain
//! (unquoted); mappings keep their key order and every key's span. Typing happens in
//! [`super::lower`]. Limits (depth, node count) are enforced while building, so deep nesting
//! and huge documents fail fast with a diagnostic instead of exhausting the stack.

use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle};

use crate::diag::{Code, Diagnostic};
use crate::ir::Span;

/// Deepest nesting of mappings/sequences accepted.
pub const MAX_DEPTH: usize = 32;
/// Most YAML nodes accepted in one spec.
pub const MAX_NODES: usize = 200_000;
/// Longest key (a name: quantity, region, callable...) accepted, in characters. YAML itself
/// refuses implicit keys over 1024 characters with a bare "mapping values are not allowed"; the
/// check before parsing turns that into a diagnostic naming the limit and pointing at the key.
pub const MAX_NAME_LEN: usize = 256;

/// A YAML node with its span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub span: Span,
}

/// The shape of a YAML node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// A scalar; `plain` is false for quoted and block scalars (always strings).
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    /// Key/value pairs in source order (duplicates kept; `lower` reports them).
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// `a mapping`, `a list`, `the number 3`, ... for "expected X, found Y" messages.
    pub fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Seq(_) => "a list".into(),
            NodeKind::Map(_) => "a mapping".into(),
            NodeKind::Scalar { text, plain } => {
                if *plain && is_null(text) {
                    "nothing (null)".into()
                } else if *plain && text.parse::<i64>().is_ok() {
                    format!("the number {text}")
                } else if *plain && (text == "true" || text == "false") {
                    format!("the boolean {text}")
                } else {
                    let t: String = text.chars().take(40).collect();
                    format!("the text `{t}`")
                }
            }
        }
    }

    /// Whether this is a plain null scalar (`~`, `null`, or empty).
    pub fn is_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar { text, plain: true } if is_null(text))
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// Maps character offsets to byte offsets when the parser reports only characters.
struct Offsets<'a> {
    text: &'a str,
    /// Byte offset of every char (only for non-ASCII text; ASCII maps 1:1).
    table: Option<Vec<usize>>,
}

impl<'a> Offsets<'a> {
    fn new(text: &'a str) -> Self {
        let table = (!text.is_ascii()).then(|| text.char_indices().map(|(b, _)| b).collect());
        Offsets { text, table }
    }

    fn byte(&self, m: &serde_saphyr::granit_parser::Marker) -> usize {
        if let Some(b) = m.byte_offset() {
            return b.min(self.text.len());
        }
        match &self.table {
            None => m.index().min(self.text.len()),
            Some(t) => t.get(m.index()).copied().unwrap_or(self.text.len()),
        }
    }
}

enum Frame {
    Seq(Vec<Node>, usize),
    /// Entries so far, a pending key, start offset.
    Map(Vec<(Node, Node)>, Option<Node>, usize),
}

/// Parse `text` into one [`Node`] (the document root), or diagnostics.
///
/// Returns `Ok(None)` for an empty document (no content at all).
pub fn parse(text: &str) -> Result<Option<Node>, Vec<Diagnostic>> {
    if let Some(d) = find_tab_indent(text) {
        return Err(vec![d]);
    }
    if let Some(d) = find_long_key(text) {
        return Err(vec![d]);
    }
    let mut opts = Options::default();
    opts.block_nesting_limit = MAX_DEPTH + 4;
    opts.flow_nesting_limit = MAX_DEPTH + 4;
    let parser = Parser::new_from_str_with_options(text, opts);
    let off = Offsets::new(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut docs = 0usize;
    let mut nodes = 0usize;
    for item in parser {
        let (event, span) = match item {
            Ok(v) => v,
            Err(e) => {
                let at = off.byte(e.marker());
                let mut msg = e.info();
                if msg.is_empty() {
                    msg = e.to_string();
                }
                let hint = if msg.contains("tab") {
                    "indent with spaces; YAML forbids tabs in indentation"
                } else if msg.contains("depth")
                    || msg.contains("nesting")
                    || msg.contains("recursion")
                {
                    "flatten the structure; specs never nest deeper than a few levels"
                } else {
                    "check the indentation and punctuation near this point (`key: value`, `- item`, matching brackets and quotes)"
                };
                return Err(vec![
                    Diagnostic::error(
                        classify_scan(&msg),
                        Span::new(at, next_char(text, at)),
                        format!("invalid YAML: {msg}"),
                    )
                    .label("the YAML parser stopped here")
                    .help(hint),
                ]);
            }
        };
        let sp = Span::new(off.byte(&span.start), off.byte(&span.end));
        let is_seq = matches!(event, Event::SequenceStart(..));
        let node = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => continue,
            Event::DocumentStart(..) => {
                docs += 1;
                if docs > 1 {
                    return Err(vec![
                        Diagnostic::error(
                            Code::UnsupportedYaml,
                            sp,
                            "a spec holds exactly one YAML document",
                        )
                        .label("a second document starts here")
                        .help("split the file: one contract per spec file"),
                    ]);
                }
                continue;
            }
            Event::Alias(_) | Event::UnresolvedAlias(_) => {
                return Err(vec![
                    Diagnostic::error(
                        Code::UnsupportedYaml,
                        sp,
                        "YAML aliases are not part of the contract language",
                    )
                    .label("alias used here")
                    .help("write the value out, or define a quantity and refer to it by name"),
                ]);
            }
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return Err(vec![unsupported_props(sp)]);
                }
                nodes += 1;
                Node {
                    kind: NodeKind::Scalar {
                        text: value.into_owned(),
                        plain: matches!(style, ScalarStyle::Plain),
                    },
                    span: sp,
                }
            }
            Event::SequenceStart(_, anchor, tag) | Event::MappingStart(_, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return Err(vec![unsupported_props(sp)]);
                }
                nodes += 1;
                if stack.len() >= MAX_DEPTH {
                    return Err(vec![
                        Diagnostic::error(
                            Code::TooDeep,
                            Span::new(sp.start, next_char(text, sp.start)),
                            format!("nesting deeper than {MAX_DEPTH} levels"),
                        )
                        .label("this collection is too deeply nested")
                        .help("flatten the structure; specs never nest deeper than a few levels"),
                    ]);
                }
                if is_seq {
                    stack.push(Frame::Seq(Vec::new(), sp.start));
                } else {
                    stack.push(Frame::Map(Vec::new(), None, sp.start));
                }
                if nodes > MAX_NODES {
                    return Err(vec![too_many(sp)]);
                }
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(items, start)) => Node {
                    kind: NodeKind::Seq(items),
                    span: Span::new(start, sp.end.max(start)),
                },
                _ => return Err(vec![internal(sp)]),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(items, _, start)) => {
                    let end = items.last().map(|(_, v)| v.span.end).unwrap_or(sp.end);
                    Node {
                        kind: NodeKind::Map(items),
                        span: Span::new(start, end.max(start)),
                    }
                }
                _ => return Err(vec![internal(sp)]),
            },
            // Comments and anchor metadata (when enabled) are presentation only.
            #[allow(unreachable_patterns)]
            _ => continue,
        };
        if nodes > MAX_NODES {
            return Err(vec![too_many(node.span)]);
        }
        // Attach the finished node to its parent.
        match stack.last_mut() {
            None => {
                if root.is_none() {
                    root = Some(node);
                }
            }
            Some(Frame::Seq(items, _)) => items.push(node),
            Some(Frame::Map(items, pending, _)) => match pending.take() {
                None => *pending = Some(node),
                Some(key) => items.push((key, node)),
            },
        }
    }
    Ok(root)
}

fn classify_scan(msg: &str) -> Code {
    if msg.contains("tab") {
        Code::Tab
    } else if msg.contains("nest") || msg.contains("depth") || msg.contains("recursion") {
        Code::TooDeep
    } else {
        Code::YamlSyntax
    }
}

fn next_char(text: &str, at: usize) -> usize {
    let at = crate::diag::clamp_to_boundary(text, at);
    text[at..]
        .chars()
        .next()
        .map(|c| at + c.len_utf8())
        .unwrap_or(at)
}

fn unsupported_props(sp: Span) -> Diagnostic {
    Diagnostic::error(
        Code::UnsupportedYaml,
        sp,
        "YAML anchors and tags are not part of the contract language",
    )
    .label("anchor or tag on this node")
    .help("remove the `&anchor` / `!tag`; refer to shared values through `quantities:`")
}

fn too_many(sp: Span) -> Diagnostic {
    Diagnostic::error(
        Code::TooManyNodes,
        sp,
        format!("spec has more than {MAX_NODES} YAML nodes"),
    )
    .label("limit reached here")
    .help("a contract declares a handful of clocks, regions and callables; split or trim the file")
}

fn internal(sp: Span) -> Diagnostic {
    Diagnostic::error(Code::YamlSyntax, sp, "unbalanced YAML structure")
        .label("unexpected end of collection")
        .help("check the indentation and brackets near this point")
}

/// The first tab used in indentation (before the first non-blank character of a line).
fn find_tab_indent(text: &str) -> Option<Diagnostic> {
    let mut line_start = 0usize;
    for line in text.split_inclusive('\n') {
        for (i, c) in line.char_indices() {
            match c {
                ' ' => continue,
                '\t' => {
                    let at = line_start + i;
                    // A line holding only whitespace and a comment is harmless, but tabs there
                    // are still confusing; report only when content follows on the line.
                    let rest = line[i..].trim();
                    if rest.is_empty() || rest.starts_with('#') {
                        break;
                    }
                    return Some(
                        Diagnostic::error(Code::Tab, Span::new(at, at + 1), "tab used for indentation")
                            .label("this tab")
                            .help("YAML indentation must use spaces: replace the tab with spaces (e.g. 2 per level)"),
                    );
                }
                _ => break,
            }
        }
        line_start += line.len();
    }
    None
}

/// The first block-mapping key (`  name: ...` or `- name: ...`, plain or quoted) longer than
/// [`MAX_NAME_LEN`] characters, as a diagnostic spanning the key.
fn find_long_key(text: &str) -> Option<Diagnostic> {
    let mut line_start = 0usize;
    for line in text.split_inclusive('\n') {
        let mut rest = line.trim_start_matches(' ');
        while let Some(r) = rest.strip_prefix('-').filter(|r| r.starts_with(' ')) {
            rest = r.trim_start_matches(' ');
        }
        let start = line_start + (line.len() - rest.len());
        let (key_len, after) = match rest.chars().next() {
            Some(q @ ('"' | '\'')) => match rest[1..].find(q) {
                Some(end) => (end + 2, &rest[end + 2..]),
                None => (0, ""),
            },
            Some(c) if !"#{}[],&*!|>%@`".contains(c) => {
                let end = rest
                    .find(|c: char| c == ':' || c.is_whitespace())
                    .unwrap_or(rest.len());
                (end, &rest[end..])
            }
            _ => (0, ""),
        };
        let chars = rest[..key_len].chars().count();
        if chars > MAX_NAME_LEN && after.trim_start_matches(' ').starts_with(':') {
            let shown: String = rest.chars().take(40).collect();
            return Some(
                Diagnostic::error(
                    Code::NameTooLong,
                    Span::new(start, start + key_len),
                    format!(
                        "`{shown}…` is {chars} characters long; names are at most {MAX_NAME_LEN}"
                    ),
                )
                .label("this key")
                .help("use a short name made of letters, digits and `_`, like `f_chunk`"),
            );
        }
        line_start += line.len();
    }
    None
}
