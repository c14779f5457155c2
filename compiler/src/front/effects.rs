//! `effects:` — one word (`none`, `device_rng`, `host_rng`) or a list of effects
//! (`[device_rng, host_rng]`, `[]` for none), lowered to the [`Effects`] set.

use super::lower::{Lower, suggest};
use super::yaml::{Node, NodeKind};
use crate::diag::{Code, Diagnostic};
use crate::ir::{Effects, Spanned};

const HELP: &str = "effects is `none`, one effect (`device_rng`, `host_rng`) or a list of them, e.g. `effects: [device_rng, host_rng]`";

impl Lower<'_> {
    /// Lower an `effects:` value.
    pub(super) fn effects(&mut self, node: &Node) -> Option<Spanned<Effects>> {
        match &node.kind {
            NodeKind::Scalar { text, .. } if text == "none" => {
                Some(Spanned::new(Effects::NONE, node.span))
            }
            NodeKind::Scalar { .. } => self.effect(node).map(|e| Spanned::new(e.value, node.span)),
            NodeKind::Seq(items) => {
                let mut set = Effects::NONE;
                let mut ok = true;
                let mut seen: Vec<Spanned<Effects>> = Vec::new();
                for item in items {
                    let Some(e) = self.effect(item) else {
                        ok = false;
                        continue;
                    };
                    if let Some(first) = seen.iter().find(|s| s.value == e.value) {
                        self.diags.push(
                            Diagnostic::error(
                                Code::DuplicateName,
                                e.span,
                                format!("effect `{}` is listed twice", e.value.spelling()),
                            )
                            .label("listed again here")
                            .with_secondary(first.span, "first listed here")
                            .help("an effect set lists each effect once"),
                        );
                        ok = false;
                        continue;
                    }
                    set = set.union(e.value);
                    seen.push(e);
                }
                ok.then(|| Spanned::new(set, node.span))
            }
            NodeKind::Map(_) => {
                self.wrong_type(node, "an effect or a list of effects", HELP);
                None
            }
        }
    }

    /// One effect word inside a list (or alone). `none` is not an element of a list.
    fn effect(&mut self, node: &Node) -> Option<Spanned<Effects>> {
        let NodeKind::Scalar { text, .. } = &node.kind else {
            self.wrong_type(node, "an effect", HELP);
            return None;
        };
        if let Some((e, _)) = Effects::ALL.iter().find(|(_, n)| n == text) {
            return Some(Spanned::new(*e, node.span));
        }
        let names: Vec<&str> = Effects::ALL.iter().map(|(_, n)| *n).collect();
        let mut d = Diagnostic::error(
            Code::BadValue,
            node.span,
            format!("`{}` is not an effect", super::lower::clip(text)),
        )
        .label(format!("expected one of: {}", names.join(", ")));
        d = if text == "none" {
            d.help("`none` is the empty set: write `effects: none` or `effects: []`, not `none` inside a list")
        } else {
            match suggest(text, &names) {
                Some(s) => d.help(format!("did you mean `{s}`?")),
                None => d.help(HELP),
            }
        };
        self.diags.push(d);
        None
    }
}
