//! Quantities at an operating point and clock rates against their base clocks.

use std::collections::{HashMap, HashSet};

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};

use super::Deriver;
use super::types::*;
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl<'s> Deriver<'s> {
    pub(super) fn quantities(&mut self) -> Option<Vec<DerivedQuantity>> {
        // Effective definitions: base, with the operating point's overrides.
        let mut defs: Vec<(&'s Ident, &'s Expr)> = self
            .spec
            .quantities
            .iter()
            .map(|q| (&q.name, &q.expr))
            .collect();
        let pos: HashMap<&str, usize> = defs
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.value.as_str(), i))
            .collect();
        if let Some(op) = self.op {
            for o in &op.overrides {
                if let Some(&i) = pos.get(o.name.value.as_str()) {
                    defs[i].1 = &o.expr;
                }
            }
        }
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let idx: Vec<NodeIndex> = (0..defs.len()).map(|i| g.add_node(i)).collect();
        for (i, (_, e)) in defs.iter().enumerate() {
            for (n, _) in e.names() {
                if let Some(&j) = pos.get(n) {
                    // j must be evaluated before i.
                    g.add_edge(idx[j], idx[i], ());
                }
            }
        }
        let order = match toposort(&g, None) {
            Ok(o) => o,
            Err(cycle) => {
                let (name, e) = defs[g[cycle.node_id()]];
                self.push(
                    Diagnostic::error(
                        Code::Cycle,
                        e.span,
                        format!(
                            "quantity `{}` depends on itself through an override",
                            name.value
                        ),
                    )
                    .label("cyclic definition")
                    .help("give the override a literal value"),
                );
                return None;
            }
        };
        // A quantity that uses one that failed is not evaluated: its only error would be a
        // misleading "not a declared quantity" for a name that is declared.
        let mut failed: HashSet<&str> = HashSet::new();
        self.order = order.iter().map(|n| defs[g[*n]]).collect();
        for n in order {
            let (name, e) = defs[g[n]];
            if e.names().iter().any(|(m, _)| failed.contains(m)) {
                failed.insert(name.value.as_str());
                continue;
            }
            match self.eval(e) {
                Some(v) => {
                    self.env.insert(name.value.clone(), v);
                }
                None => {
                    failed.insert(name.value.as_str());
                }
            }
        }
        let ok = failed.is_empty();
        if !ok {
            return None;
        }
        let mut out = Vec::new();
        for (name, e) in &defs {
            let v = self.env.get(&name.value).copied().unwrap_or_default();
            out.push(DerivedQuantity {
                name: name.value.clone(),
                value: v,
                derivation: Derivation {
                    value: u64::try_from(v).unwrap_or(0),
                    formula: e.to_string(),
                    inputs: e
                        .names()
                        .iter()
                        .filter_map(|(n, _)| self.env.get(*n).map(|v| (n.to_string(), *v)))
                        .collect(),
                },
            });
        }
        Some(out)
    }

    pub(super) fn clocks(&mut self) -> Option<Vec<DerivedClock>> {
        let mut rates: HashMap<&str, (String, u64)> = HashMap::new();
        let mut ok = true;
        // Direct rates first.
        let mut direct: HashMap<&str, (&str, u64)> = HashMap::new();
        for c in &self.spec.clocks {
            if let ClockKind::Rate { rate, per } = &c.kind {
                match self.eval_at_least(rate, 1, &format!("the rate of clock `{}`", c.name.value))
                {
                    Some(v) => {
                        direct.insert(c.name.value.as_str(), (per.value.as_str(), v));
                    }
                    None => ok = false,
                }
            }
        }
        if !ok {
            return None;
        }
        let mut out = Vec::new();
        for c in &self.spec.clocks {
            let d = match &c.kind {
                ClockKind::Product(f) => DerivedClock {
                    name: c.name.value.clone(),
                    base: String::new(),
                    per_base: 1,
                    factors: f.iter().map(|i| i.value.clone()).collect(),
                },
                _ => {
                    // Follow the chain (acyclic, validated) to the base clock.
                    let mut cur = c.name.value.as_str();
                    let mut factor: u64 = 1;
                    let mut steps = 0;
                    while let Some((per, r)) = direct.get(cur) {
                        match factor.checked_mul(*r) {
                            Some(f) => factor = f,
                            None => {
                                self.overflow(c.span, "clock rate");
                                return None;
                            }
                        }
                        cur = per;
                        steps += 1;
                        if steps > self.spec.clocks.len() {
                            break;
                        }
                    }
                    DerivedClock {
                        name: c.name.value.clone(),
                        base: cur.to_string(),
                        per_base: factor,
                        factors: Vec::new(),
                    }
                }
            };
            rates.insert(c.name.value.as_str(), (d.base.clone(), d.per_base));
            out.push(d);
        }
        Some(out)
    }
}
