//! A callable's query phases (`phases: {first: {..}, steady: {..}, flush: {..}}`) and its
//! loop specialisation (`specialize: step`).

use super::super::yaml::Node;
use super::Lower;
use crate::ir::{Phase, PhaseKind, Spanned, Specialize};

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
            let overrides = self.quantities(v, &what);
            match kind {
                Some(kind) => out.push(Phase { kind, overrides }),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    /// `specialize: step`.
    pub(super) fn specialize(&mut self, node: &Node) -> Option<Spanned<Specialize>> {
        self.word(node, "loop specialisation", &[("step", Specialize::Step)])
    }
}
