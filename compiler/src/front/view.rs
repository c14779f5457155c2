//! `view: {axis: A, at: "t mod M", len: L}` on a region input: a window of one axis read at an
//! offset that moves with the call index (a delay ring read at `t mod 4`).

use super::lower::Lower;
use super::yaml::{Node, NodeKind};
use crate::diag::{Code, Diagnostic};
use crate::expr;
use crate::ir::{Expr, ExprKind, Span, View};

const VIEW_KEYS: &[&str] = &["axis", "at", "len"];

impl Lower<'_> {
    /// Lower a `view:` of input `what`; `on_region` is whether the input is bound to a region
    /// (only a region's axis can be viewed at an offset).
    pub(super) fn view(&mut self, node: &Node, what: &str, on_region: bool) -> Option<View> {
        if !on_region {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    node.span,
                    format!("{what} has a `view:` but is not bound to a region"),
                )
                .label("a view needs a region")
                .help("an offset view selects slots of a region's axis: bind the input with `region: NAME`, or remove `view:`"),
            );
            return None;
        }
        let owner = node.span;
        let f = self.fields(node, "`view`", owner, VIEW_KEYS, &["axis", "at"])?;
        let axis = f.get("axis").and_then(|n| self.ident(n, "a clock axis"));
        let at = f.get("at").and_then(|n| {
            let NodeKind::Scalar { text, .. } = &n.kind else {
                self.wrong_type(
                    n,
                    "an offset",
                    "write the offset as `VAR mod M`, e.g. `at: t mod 4`",
                );
                return None;
            };
            let text = text.clone();
            let mapped = self.text_base(n, &text).is_some();
            let mut o = self.with_base(n, &text, expr::parse_offset)?;
            o.span = n.span;
            if !mapped {
                o.var.span = n.span;
                for e in [&mut o.scale, &mut o.shift].into_iter().flatten() {
                    Self::fix_spans(e, n.span);
                }
                Self::fix_spans(&mut o.modulus, n.span);
            }
            Some(o)
        });
        let len = match f.get("len") {
            Some(n) => self.expr(n),
            None => Some(Expr {
                kind: ExprKind::Int(1),
                span: Span::new(owner.start, owner.start),
            }),
        };
        Some(View {
            axis: axis?,
            at: at?,
            len: len?,
            span: owner,
        })
    }
}
