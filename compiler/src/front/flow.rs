//! YAML's flow collections split at every `,`: `shape: [min(a, b), 4]` is the three items
//! `min(a`, `b)` and `4`, and `{by: min(a, b)}` is `by: min(a` plus a key `b)`. An expression
//! cut in two this way is reported once, as what happened, with the quoting that keeps it whole,
//! instead of as two unrelated expression errors.

use super::lower::Lower;
use super::yaml::{Node, NodeKind};
use crate::diag::{Code, Diagnostic};

/// `(` minus `)` in a plain scalar (0 for anything else).
fn depth(node: &Node) -> i64 {
    match &node.kind {
        NodeKind::Scalar { text, plain: true } => text.chars().fold(0, |d, c| match c {
            '(' => d + 1,
            ')' => d - 1,
            _ => d,
        }),
        _ => 0,
    }
}

fn text(node: &Node) -> &str {
    match &node.kind {
        NodeKind::Scalar { text, .. } => text,
        _ => "",
    }
}

impl Lower<'_> {
    /// In the flow list `list`, the runs of items that are one expression cut at its commas:
    /// each reported, their spans remembered so the pieces raise no further error. Returns
    /// whether any was found.
    pub(super) fn split_in_list(&mut self, list: &Node, items: &[Node]) -> bool {
        let flow = self
            .text
            .get(list.span.start..list.span.end)
            .is_some_and(|t| t.starts_with('['));
        if !flow {
            return false;
        }
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut i = 0;
        while i < items.len() {
            let mut d = depth(&items[i]);
            if d <= 0 {
                i += 1;
                continue;
            }
            let mut j = i;
            while d > 0 && j + 1 < items.len() {
                j += 1;
                d += depth(&items[j]);
            }
            if j > i {
                runs.push((i, j));
            }
            i = j + 1;
        }
        if runs.is_empty() {
            return false;
        }
        let fixed: Vec<String> = {
            let mut out = Vec::new();
            let mut k = 0;
            while k < items.len() {
                match runs.iter().find(|(a, _)| *a == k) {
                    Some((a, b)) => {
                        let joined: Vec<&str> = items[*a..=*b].iter().map(text).collect();
                        out.push(format!("\"{}\"", joined.join(", ")));
                        k = b + 1;
                    }
                    None => {
                        out.push(self.source_of(&items[k]));
                        k += 1;
                    }
                }
            }
            out
        };
        for (a, b) in runs {
            let pieces: Vec<String> = items[a..=b]
                .iter()
                .map(|n| format!("`{}`", text(n)))
                .collect();
            let joined: Vec<&str> = items[a..=b].iter().map(text).collect();
            let span = items[a].span.to(items[b].span);
            self.diags.push(
                Diagnostic::error(
                    Code::FlowComma,
                    span,
                    format!(
                        "YAML split the expression `{}` at its comma{}",
                        joined.join(", "),
                        if b - a > 1 { "s" } else { "" }
                    ),
                )
                .label(format!("YAML reads {} list items here: {}", b - a + 1, pieces.join(", ")))
                .help(format!(
                    "inside a flow list `[...]` every `,` separates items, even inside parentheses; quote the expression so YAML keeps it whole: `[{}]`",
                    fixed.join(", ")
                )),
            );
            self.split.extend(items[a..=b].iter().map(|n| n.span));
        }
        true
    }

    /// In a flow mapping, `key` (`b)`) closing a parenthesis that the previous entry's value
    /// (`min(a`) opened: the value was cut at its comma. Reported once; both pieces remembered.
    pub(super) fn split_in_map(&mut self, prev: Option<(&Node, &Node)>, key: &Node) -> bool {
        let Some((pk, pv)) = prev else { return false };
        if depth(pv) <= 0 || depth(key) >= 0 {
            return false;
        }
        let whole = format!("{}, {}", text(pv), text(key));
        self.diags.push(
            Diagnostic::error(
                Code::FlowComma,
                pv.span.to(key.span),
                format!("YAML split the expression `{whole}` at its comma"),
            )
            .label(format!(
                "YAML reads `{}: {}` and a key `{}`",
                text(pk),
                text(pv),
                text(key)
            ))
            .help(format!(
                "inside a flow mapping `{{...}}` every `,` separates entries, even inside parentheses; quote the expression so YAML keeps it whole: `{}: \"{whole}\"`",
                text(pk)
            )),
        );
        self.split.push(pv.span);
        true
    }

    /// The source text of a node as written.
    fn source_of(&self, node: &Node) -> String {
        self.text
            .get(node.span.start..node.span.end)
            .unwrap_or(text(node))
            .to_string()
    }
}
