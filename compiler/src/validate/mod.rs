//! Validation of a lowered [`Spec`]: every name resolves, quantity definitions and clock rates
//! are acyclic (petgraph), and declarations are structurally consistent (`region.rs`: clock
//! axes, growth, retention, layout, stock; `callable.rs`: inputs, reads, writes, loop clock,
//! admission variable). Value checks (positive strides, retention vs envelope...) need
//! evaluated quantities and live in [`crate::derive`]; contracts that are well-formed but
//! impossible (units, retention against stride, empty admission) are [`crate::lint`]'s.

use std::collections::HashMap;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::diag::{Code, Diagnostic};
use crate::front::lower::suggest;
use crate::ir::*;

mod callable;
mod region;

/// Check a lowered spec; returns errors (and warnings). An empty list means it is well-formed.
pub fn validate(spec: &Spec) -> Vec<Diagnostic> {
    let mut v = V {
        spec,
        diags: Vec::new(),
        qset: spec
            .quantities
            .iter()
            .map(|q| q.name.value.as_str())
            .collect(),
    };
    v.duplicates();
    v.clocks();
    v.quantities();
    v.operating_points();
    for r in &spec.regions {
        v.region(r);
    }
    for c in &spec.constants {
        for e in &c.shape {
            v.expr_names(e, false, &[]);
        }
    }
    for c in &spec.callables {
        v.callable(c);
    }
    if let Some(cl) = &spec.capture_limit {
        v.expr_names(&cl.value, false, &[]);
    }
    v.diags
}

struct V<'s> {
    spec: &'s Spec,
    diags: Vec<Diagnostic>,
    /// Declared quantity names, for O(1) lookups.
    qset: std::collections::HashSet<&'s str>,
}

fn undefined(kind: &str, name: &Ident, known: &[&str], declare_under: &str) -> Diagnostic {
    let mut d = Diagnostic::error(
        Code::Undefined,
        name.span,
        format!("{kind} `{}` is not declared", name.value),
    )
    .label(format!("unknown {kind}"));
    let hint = if known.len() <= 500 {
        suggest(&name.value, known)
    } else {
        None
    };
    d = match hint {
        Some(s) => d.help(format!("did you mean `{s}`?")),
        None if known.is_empty() || known.len() > 12 => {
            d.help(format!("declare it under `{declare_under}:`"))
        }
        None => d.help(format!(
            "declare it under `{declare_under}:`, or use one of: {}",
            known.join(", ")
        )),
    };
    d
}

impl<'s> V<'s> {
    fn quantity_names(&self) -> Vec<&'s str> {
        self.spec
            .quantities
            .iter()
            .map(|q| q.name.value.as_str())
            .collect()
    }
    fn region_names(&self) -> Vec<&'s str> {
        self.spec
            .regions
            .iter()
            .map(|q| q.name.value.as_str())
            .collect()
    }
    fn clock_names(&self) -> Vec<&'s str> {
        self.spec
            .clocks
            .iter()
            .map(|q| q.name.value.as_str())
            .collect()
    }

    fn duplicates(&mut self) {
        // Regions and constants share a namespace (both can be callable inputs).
        let mut seen: HashMap<&str, (Span, &str)> = HashMap::new();
        let items = self
            .spec
            .regions
            .iter()
            .map(|r| (&r.name, "region"))
            .chain(self.spec.constants.iter().map(|c| (&c.name, "constant")));
        for (name, kind) in items {
            if let Some((first, fkind)) = seen.get(name.value.as_str()) {
                self.diags.push(
                    Diagnostic::error(
                        Code::DuplicateName,
                        name.span,
                        format!("{kind} `{}` has the same name as a {fkind}", name.value),
                    )
                    .label("second declaration")
                    .with_secondary(*first, "first declared here")
                    .help("regions and constants share one namespace; rename one of them"),
                );
            } else {
                seen.insert(name.value.as_str(), (name.span, kind));
            }
        }
        // Quantities and clocks must not collide with the built-in function names.
        for q in &self.spec.quantities {
            if matches!(
                q.name.value.as_str(),
                "min" | "max" | "ceil_div" | "floor_div" | "extent" | "per" | "and" | "mod"
            ) {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadValue,
                        q.name.span,
                        format!("`{}` is a reserved word", q.name.value),
                    )
                    .label("reserved")
                    .help("rename the quantity"),
                );
            }
        }
    }

    /// Check every name in `e` is a quantity; `extent(r)` only where allowed (`extent_ok`), and
    /// only for regions in `readable`.
    fn expr_names(&mut self, e: &Expr, extent_ok: bool, readable: &[&str]) {
        for (n, span) in e.names() {
            if !self.qset.contains(n) {
                let known = if self.qset.len() <= 500 {
                    self.quantity_names()
                } else {
                    Vec::new()
                };
                let id = Spanned::new(n.to_string(), span);
                self.diags
                    .push(undefined("quantity", &id, &known, "quantities"));
            }
        }
        for r in e.extents() {
            if !extent_ok {
                self.diags.push(
                    Diagnostic::error(
                        Code::Inconsistent,
                        r.span,
                        "`extent(...)` is only allowed in callable argument shapes",
                    )
                    .label("not allowed here")
                    .help("quantities and region declarations must not depend on a catalog class; use a quantity"),
                );
            } else if !readable.contains(&r.value.as_str()) {
                let regions = self.region_names();
                if regions.contains(&r.value.as_str()) {
                    self.diags.push(
                        Diagnostic::error(
                            Code::UndeclaredRegion,
                            r.span,
                            format!(
                                "`extent({})` names a region this callable does not read",
                                r.value
                            ),
                        )
                        .label("not read by this callable")
                        .help(format!(
                            "pass `{}` as an input or list it under `reads:`",
                            r.value
                        )),
                    );
                } else {
                    self.diags.push(undefined("region", r, &regions, "regions"));
                }
            }
        }
    }

    fn clocks(&mut self) {
        let names = self.clock_names();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for c in &self.spec.clocks {
            if let Some(first) = seen.get(c.name.value.as_str()) {
                self.diags.push(
                    Diagnostic::error(
                        Code::DuplicateName,
                        c.name.span,
                        format!("clock `{}` declared twice", c.name.value),
                    )
                    .with_secondary(*first, "first declared here")
                    .help("remove one declaration"),
                );
            }
            seen.insert(c.name.value.as_str(), c.name.span);
            match &c.kind {
                ClockKind::Base => {}
                ClockKind::Rate { rate, per } => {
                    self.expr_names(rate, false, &[]);
                    if !names.contains(&per.value.as_str()) {
                        self.diags.push(undefined("clock", per, &names, "clocks"));
                    } else if per.value == c.name.value {
                        self.diags.push(
                            Diagnostic::error(
                                Code::Clock,
                                per.span,
                                format!("clock `{}` is defined per itself", c.name.value),
                            )
                            .label("self-reference")
                            .help("derive it from another clock, or declare it `base`"),
                        );
                    } else if let Some(ClockKind::Product(_)) =
                        self.spec.clock(&per.value).map(|k| &k.kind)
                    {
                        self.diags.push(
                            Diagnostic::error(
                                Code::Clock,
                                per.span,
                                format!(
                                    "a rate cannot be relative to the product clock `{}`",
                                    per.value
                                ),
                            )
                            .label("product clock")
                            .help("express the rate against one of its scalar factors"),
                        );
                    }
                }
                ClockKind::Product(factors) => {
                    if factors.len() < 2 {
                        self.diags.push(
                            Diagnostic::error(
                                Code::Clock,
                                c.span,
                                "a product clock needs at least two factors",
                            )
                            .label("too few factors")
                            .help("write `[step, frame]`, or use the scalar clock directly"),
                        );
                    }
                    for (i, f) in factors.iter().enumerate() {
                        match self.spec.clock(&f.value) {
                            None => self.diags.push(undefined("clock", f, &names, "clocks")),
                            Some(k) if matches!(k.kind, ClockKind::Product(_)) => self.diags.push(
                                Diagnostic::error(
                                    Code::Clock,
                                    f.span,
                                    "a product clock's factors must be scalar clocks",
                                )
                                .label("this is a product clock")
                                .help("list its scalar factors instead"),
                            ),
                            _ => {}
                        }
                        if factors[..i].iter().any(|g| g.value == f.value) {
                            self.diags.push(
                                Diagnostic::error(
                                    Code::Clock,
                                    f.span,
                                    format!("clock `{}` appears twice in the product", f.value),
                                )
                                .label("repeated factor")
                                .help("each factor names a distinct axis"),
                            );
                        }
                    }
                }
            }
        }
        // Cycles among rates (`a: 2 per b`, `b: 3 per a`).
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let idx: Vec<NodeIndex> = (0..self.spec.clocks.len()).map(|i| g.add_node(i)).collect();
        for (i, c) in self.spec.clocks.iter().enumerate() {
            if let ClockKind::Rate { per, .. } = &c.kind
                && let Some(j) = self
                    .spec
                    .clocks
                    .iter()
                    .position(|d| d.name.value == per.value)
                && i != j
            {
                g.add_edge(idx[i], idx[j], ());
            }
        }
        for scc in tarjan_scc(&g) {
            if scc.len() > 1 {
                let mut members: Vec<usize> = scc.iter().map(|n| g[*n]).collect();
                members.sort_unstable();
                let names: Vec<String> = members
                    .iter()
                    .map(|i| format!("`{}`", self.spec.clocks[*i].name.value))
                    .collect();
                let first = &self.spec.clocks[members[0]];
                let mut d = Diagnostic::error(
                    Code::Cycle,
                    first.span,
                    format!("clock rates form a cycle: {}", names.join(" → ")),
                )
                .label("defined in terms of itself through this cycle")
                .help("one clock of the cycle must be `base`");
                for m in &members[1..] {
                    d = d.with_secondary(self.spec.clocks[*m].span, "part of the cycle");
                }
                self.diags.push(d);
            }
        }
    }

    fn quantities(&mut self) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for q in &self.spec.quantities {
            if let Some(first) = seen.get(q.name.value.as_str()) {
                self.diags.push(
                    Diagnostic::error(
                        Code::DuplicateName,
                        q.name.span,
                        format!("quantity `{}` declared twice", q.name.value),
                    )
                    .with_secondary(*first, "first declared here")
                    .help("remove one declaration"),
                );
            }
            seen.insert(q.name.value.as_str(), q.name.span);
            self.expr_names(&q.expr, false, &[]);
        }
        // Cycles among definitions.
        let qs = &self.spec.quantities;
        let mut g: DiGraph<usize, Span> = DiGraph::new();
        let idx: Vec<NodeIndex> = (0..qs.len()).map(|i| g.add_node(i)).collect();
        let pos: HashMap<&str, usize> = qs
            .iter()
            .enumerate()
            .map(|(i, q)| (q.name.value.as_str(), i))
            .collect();
        for (i, q) in qs.iter().enumerate() {
            for (n, span) in q.expr.names() {
                if let Some(&j) = pos.get(n) {
                    g.add_edge(idx[i], idx[j], span);
                }
            }
        }
        for scc in tarjan_scc(&g) {
            let is_cycle =
                scc.len() > 1 || scc.first().is_some_and(|n| g.find_edge(*n, *n).is_some());
            if !is_cycle {
                continue;
            }
            let mut members: Vec<usize> = scc.iter().map(|n| g[*n]).collect();
            members.sort_unstable();
            let names: Vec<String> = members
                .iter()
                .map(|i| format!("`{}`", qs[*i].name.value))
                .collect();
            let first = &qs[members[0]];
            let mut chain = names.join(" → ");
            chain.push_str(&format!(" → `{}`", first.name.value));
            let mut d = Diagnostic::error(
                Code::Cycle,
                first.expr.span,
                if members.len() == 1 {
                    format!(
                        "quantity `{}` is defined in terms of itself",
                        first.name.value
                    )
                } else {
                    format!("quantities are defined in a cycle: {chain}")
                },
            )
            .label("this definition depends on itself")
            .help("break the cycle: give one of these quantities a literal value");
            for m in &members[1..] {
                d = d.with_secondary(qs[*m].expr.span, "part of the cycle");
            }
            self.diags.push(d);
        }
    }

    fn operating_points(&mut self) {
        let known = self.quantity_names();
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for op in &self.spec.operating_points {
            if op.name.value == "base" {
                self.diags.push(
                    Diagnostic::error(
                        Code::BadValue,
                        op.name.span,
                        "`base` is the name of the default operating point",
                    )
                    .label("reserved")
                    .help("choose another name, e.g. `duplex`"),
                );
            }
            if let Some(first) = seen.get(op.name.value.as_str()) {
                self.diags.push(
                    Diagnostic::error(
                        Code::DuplicateName,
                        op.name.span,
                        format!("operating point `{}` declared twice", op.name.value),
                    )
                    .with_secondary(*first, "first declared here")
                    .help("remove one declaration"),
                );
            }
            seen.insert(op.name.value.as_str(), op.name.span);
            for o in &op.overrides {
                if !known.contains(&o.name.value.as_str()) {
                    self.diags
                        .push(
                            undefined("quantity", &o.name, &known, "quantities").help(format!(
                                "an operating point can only override declared quantities{}",
                                suggest(&o.name.value, &known)
                                    .map(|s| format!("; did you mean `{s}`?"))
                                    .unwrap_or_default()
                            )),
                        );
                }
                self.expr_names(&o.expr, false, &[]);
            }
        }
    }
}
