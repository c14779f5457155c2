//! A callable's query phases (`phases: {first: {..}, steady: {..}, flush: {..}}`) and its
//! loop specialisation (`specialize: step`).

use super::super::yaml::{Node, NodeKind};
use super::Lower;
use crate::diag::{Code, Diagnostic};
use crate::ir::{Phase, PhaseKind, PhaseOverride, PhaseValues, Spanned, Specialize};

const RANGE_KEYS: &[&str] = &["from", "to"];

impl Lower<'_> {
    /// `phases:`: each phase maps quantity names to the values its input shapes use.
    pub(super) fn phases(&mut self, node: &Node, callable: &str) -> Option<Vec<Phase>> {
        let help = "phases map `first`, `steady` or `flush` to quantity overrides of the input shapes, e.g. `phases: {first: {f_query: 100}, steady: {f_query: 50}}`";
        let entries = self.entries(node, "`phases`", help)?;
        let options: Vec<(&str, PhaseKind)> =
            PhaseKind::ALL.iter().map(|p| (p.name(), *p)).collect();
        let mut out = Vec::new();
        let mut ok = true;
        for (key, k, v) in entries {
            let kind = self.word(k, "query phase", &options);
            let what = format!("phase `{key}` of callable `{callable}`");
            let overrides = self.phase_overrides(v, &what);
            match (kind, overrides) {
                (Some(kind), Some(overrides)) => out.push(Phase { kind, overrides }),
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// `{NAME: EXPR | [EXPR, ..] | {from: EXPR, to: EXPR}, ..}`.
    fn phase_overrides(&mut self, node: &Node, what: &str) -> Option<Vec<PhaseOverride>> {
        let help = "a phase maps quantity names to a value (`f_query: 100`), a list of values (`f_query: [28, 56]`) or a range (`f_query: {from: 1, to: 54}`)";
        let entries = self.entries(node, what, help)?;
        let mut out = Vec::new();
        let mut ok = true;
        for (_, k, v) in entries {
            let name = self.ident(k, "a quantity name");
            let values = match &v.kind {
                NodeKind::Seq(_) => self
                    .expr_list(v, "the phase's values of the quantity")
                    .map(PhaseValues::List),
                NodeKind::Map(_) => {
                    let f = self.fields(v, "a range of values", k.span, RANGE_KEYS, RANGE_KEYS);
                    f.and_then(|f| {
                        let from = f.get("from").and_then(|n| self.expr(n));
                        let to = f.get("to").and_then(|n| self.expr(n));
                        Some(PhaseValues::Range {
                            from: from?,
                            to: to?,
                            span: v.span,
                        })
                    })
                }
                _ => self.expr(v).map(PhaseValues::One),
            };
            match (name, values) {
                (Some(name), Some(values)) => out.push(PhaseOverride { name, values }),
                _ => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// `configs: N` counted N query configurations that no class, M_reserve term or generated
    /// signature ever had; the phases that present them are declared instead. Always `false`
    /// (after the error).
    pub(super) fn configs_replaced(&mut self, node: &Node) -> bool {
        self.diags.push(
            Diagnostic::error(
                Code::UnknownKey,
                node.span,
                "`configs:` is no longer accepted: declare the query phases instead",
            )
            .label("replaced by `phases:`")
            .help("write the shapes each phase presents, e.g. `phases: {first: {f_query: 100}, steady: {f_query: 50}, flush: {f_query: 28}}`; every phase is a class of the catalog, of M_reserve and of the generated signature table"),
        );
        false
    }

    /// `specialize: step`.
    pub(super) fn specialize(&mut self, node: &Node) -> Option<Spanned<Specialize>> {
        self.word(node, "loop specialisation", &[("step", Specialize::Step)])
    }
}
