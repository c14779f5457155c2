//! A callable's batch sizes (`batch: [1, 2, 4, 8, 16]`) and the rows each staged row becomes
//! inside the call (`row_copies: cfg`).
//!
//! The list is checked here, where every entry still has its span: it is non-empty, every entry
//! is an integer ≥ 1, the first is 1 (a session that cannot batch with others still runs, alone,
//! at B = 1) and the entries strictly increase (each size is one graph per class, so a repeat
//! would capture the same graph twice). What bounds the largest size (the capture limit on the
//! graphs) is checked in `derive`, which knows the classes.

use super::super::yaml::{Node, NodeKind};
use super::Lower;
use crate::diag::{Code, Diagnostic};
use crate::ir::{Batch, Spanned};

const HELP_LIST: &str = "write the batch sizes the callable's graphs are captured for as a list of integers starting at 1, e.g. `batch: [1, 2, 4, 8, 16]`";

impl Lower<'_> {
    /// `batch:` and `row_copies:` of callable `callable`: `Some(None)` when neither is written,
    /// `None` after an error.
    pub(super) fn batch(
        &mut self,
        node: Option<&Node>,
        copies: Option<&Node>,
        callable: &str,
    ) -> Option<Option<Batch>> {
        let row_copies = match copies {
            Some(n) => Some(self.expr(n)?),
            None => None,
        };
        let Some(node) = node else {
            if let Some(n) = copies {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadBatch,
                        n.span,
                        format!("`row_copies` of callable `{callable}` without `batch:`"),
                    )
                    .label("only batched rows are counted")
                    .help("declare the batch sizes (`batch: [1, 2, 4]`) or remove `row_copies`"),
                );
                return None;
            }
            return Some(None);
        };
        let NodeKind::Seq(items) = &node.kind else {
            self.wrong_type(node, "a list of batch sizes", HELP_LIST);
            return None;
        };
        if items.is_empty() {
            self.diags.push(
                Diagnostic::error(
                    Code::BadBatch,
                    node.span,
                    format!("callable `{callable}` declares no batch size"),
                )
                .label("empty list")
                .help("list at least `[1]` (one session per call), or remove `batch:`"),
            );
            return None;
        }
        let mut sizes: Vec<Spanned<u64>> = Vec::new();
        let mut ok = true;
        for item in items {
            match self.batch_size(item) {
                Some(v) => sizes.push(Spanned::new(v, item.span)),
                None => ok = false,
            }
        }
        if !ok {
            return None;
        }
        if let Some(first) = sizes.first()
            && first.value != 1
        {
            self.diags.push(
                Diagnostic::error(
                    Code::BadBatch,
                    first.span,
                    format!(
                        "the batch sizes of callable `{callable}` start at {}, not 1",
                        first.value
                    ),
                )
                .label("the first size must be 1")
                .help(format!(
                    "put 1 first (`batch: [1, {}]`): a session that cannot batch with others runs alone, at B = 1",
                    sizes
                        .iter()
                        .map(|s| s.value.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
            ok = false;
        }
        for w in sizes.windows(2) {
            if w[1].value <= w[0].value {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadBatch,
                        w[1].span,
                        format!(
                            "the batch sizes of callable `{callable}` must strictly increase, but {} follows {}",
                            w[1].value, w[0].value
                        ),
                    )
                    .label(if w[1].value == w[0].value {
                        "repeated"
                    } else {
                        "smaller than the size before it"
                    })
                    .with_secondary(w[0].span, "the size before")
                    .help("list each size once, in ascending order: every size is one captured graph per class"),
                );
                ok = false;
            }
        }
        ok.then_some(Some(Batch {
            sizes,
            row_copies,
            span: node.span,
        }))
    }

    /// One entry of the list: an integer literal ≥ 1.
    fn batch_size(&mut self, item: &Node) -> Option<u64> {
        let NodeKind::Scalar { text, plain: true } = &item.kind else {
            self.wrong_type(item, "a batch size (an integer)", HELP_LIST);
            return None;
        };
        match text.parse::<i64>() {
            Ok(v) if v >= 1 => u64::try_from(v).ok(),
            Ok(v) => {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadBatch,
                        item.span,
                        format!("batch size {v} is not a number of sessions"),
                    )
                    .label("must be at least 1")
                    .help(HELP_LIST),
                );
                None
            }
            Err(_) if text.bytes().all(|c| c.is_ascii_digit()) => {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadBatch,
                        item.span,
                        format!("batch size {} is too large", super::clip(text)),
                    )
                    .label("does not fit in 64 bits")
                    .help("a batch size counts the sessions of one call: keep it within what the capture limit and the device allow"),
                );
                None
            }
            Err(_) => {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadBatch,
                        item.span,
                        format!("`{}` is not a batch size", super::clip(text)),
                    )
                    .label("expected an integer literal")
                    .help(
                        "batch sizes are integers written out (`[1, 2, 4]`), not quantities: they choose graphs to capture, not model dimensions",
                    ),
                );
                None
            }
        }
    }
}
