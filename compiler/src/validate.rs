//! Validation of a lowered [`Spec`]: every name resolves, quantity definitions and clock rates
//! are acyclic (petgraph), and declarations are structurally consistent. Value checks (positive
//! strides, retention vs envelope...) need evaluated quantities and live in [`crate::derive`].

use std::collections::HashMap;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::diag::{Code, Diagnostic};
use crate::front::lower::suggest;
use crate::ir::*;

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
                "min" | "max" | "ceil_div" | "floor_div" | "extent" | "per" | "and"
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

    /// Clock axes of a region, expanding product clocks.
    fn axes(&self, r: &Region) -> Vec<Ident> {
        let mut out = Vec::new();
        for c in &r.clock {
            match self.spec.clock(&c.value).map(|k| &k.kind) {
                Some(ClockKind::Product(f)) => {
                    out.extend(f.iter().map(|i| Spanned::new(i.value.clone(), c.span)))
                }
                _ => out.push(c.clone()),
            }
        }
        out
    }

    fn region(&mut self, r: &Region) {
        let clocks = self.clock_names();
        let mut axes_ok = true;
        for c in &r.clock {
            if !clocks.contains(&c.value.as_str()) {
                self.diags.push(undefined("clock", c, &clocks, "clocks"));
                axes_ok = false;
            }
        }
        if r.clock.is_empty() {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    r.clock_span,
                    format!("region `{}` has no clock", r.name.value),
                )
                .label("empty clock")
                .help(
                    "name the region's native clock, e.g. `clock: frame` or `clock: [step, frame]`",
                ),
            );
            axes_ok = false;
        }
        let axes = self.axes(r);
        for (i, a) in axes.iter().enumerate() {
            if axes[..i].iter().any(|b| b.value == a.value) {
                self.diags.push(
                    Diagnostic::error(
                        Code::Clock,
                        a.span,
                        format!("axis `{}` appears twice in the region's clock", a.value),
                    )
                    .label("repeated axis")
                    .help("each clock axis of a region is distinct"),
                );
                axes_ok = false;
            }
        }
        // Growth: one entry per axis, keyed by axis.
        for g in &r.growth {
            if axes_ok && !axes.iter().any(|a| a.value == g.axis.value) {
                let names: Vec<&str> = axes.iter().map(|a| a.value.as_str()).collect();
                self.diags.push(
                    Diagnostic::error(
                        Code::Inconsistent,
                        g.axis.span,
                        format!("`{}` is not an axis of this region's clock", g.axis.value),
                    )
                    .label("not a clock axis of the region")
                    .with_secondary(r.clock_span, "the region's clock")
                    .help(format!(
                        "growth keys must be the clock axes: {}",
                        names.join(", ")
                    )),
                );
            }
            match &g.growth {
                Growth::Fixed(e) => self.expr_names(e, false, &[]),
                Growth::Grows { from, by, call } => {
                    self.expr_names(from, false, &[]);
                    self.expr_names(by, false, &[]);
                    if let Some(c) = call {
                        self.expr_names(c, false, &[]);
                    }
                }
            }
        }
        if axes_ok {
            for a in &axes {
                if !r.growth.iter().any(|g| g.axis.value == a.value) {
                    self.diags.push(
                        Diagnostic::error(
                            Code::MissingKey,
                            r.growth_span,
                            format!("growth of axis `{}` is not declared", a.value),
                        )
                        .label(format!("`{}` missing here", a.value))
                        .help(format!(
                            "add `{}: EXTENT` (fixed) or `{}: {{from: .., by: ..}}` (growing) under `growth:`",
                            a.value, a.value
                        )),
                    );
                }
            }
        }
        let growing: Vec<&AxisGrowth> = r
            .growth
            .iter()
            .filter(|g| matches!(g.growth, Growth::Grows { .. }))
            .collect();
        if growing.len() > 1 {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    growing[1].span,
                    "more than one growing axis",
                )
                .label("second growing axis")
                .with_secondary(growing[0].span, "first growing axis")
                .help("Criterion 1 assumes single-mode truncation: one axis grows and the retention policy bounds it; fix the other axes"),
            );
        }
        match &r.retention.value {
            Retention::Pinned => {
                if let Some(g) = growing.first() {
                    self.diags.push(
                        Diagnostic::error(
                            Code::Inconsistent,
                            g.span,
                            "a pinned region cannot grow",
                        )
                        .label("growing axis")
                        .with_secondary(r.retention.span, "retention is `pinned`")
                        .help("give the axis a fixed extent, or declare a retention policy that bounds it (ring, window, prompt + retained)"),
                    );
                }
            }
            Retention::Ring { capacity: e } | Retention::Window { size: e, .. } => {
                self.expr_names(e, false, &[]);
                if growing.is_empty() {
                    self.growth_needed(r);
                }
            }
            Retention::PromptHistory {
                prompt,
                retained,
                keep,
                ..
            } => {
                self.expr_names(prompt, false, &[]);
                self.expr_names(retained, false, &[]);
                if let Some(k) = keep {
                    self.expr_names(&k.head, false, &[]);
                    self.expr_names(&k.tail, false, &[]);
                }
                if growing.is_empty() {
                    self.growth_needed(r);
                }
            }
        }
        for e in &r.shape {
            self.expr_names(e, false, &[]);
        }
        if let Some(l) = &r.layout
            && axes_ok
        {
            self.layout(r, &axes, l);
        }
        if let Some(e) = &r.envelope {
            self.expr_names(e, false, &[]);
        }
        for s in &r.stock {
            for e in &s.extents {
                self.expr_names(e, false, &[]);
            }
            if axes_ok && s.extents.len() != axes.len() {
                self.diags.push(
                    Diagnostic::error(
                        Code::Inconsistent,
                        s.span,
                        format!(
                            "stock constant `{}` has {} extent{}, but the region's clock has {} axis{}",
                            s.name.value,
                            s.extents.len(),
                            if s.extents.len() == 1 { "" } else { "s" },
                            axes.len(),
                            if axes.len() == 1 { "" } else { "es" }
                        ),
                    )
                    .label("one extent per clock axis expected")
                    .with_secondary(r.clock_span, "the region's clock")
                    .help("list the stock constant's extent along each clock axis, in clock order"),
                );
            }
        }
        if r.placement.value == Placement::Host && r.lifetime.value == Lifetime::Operator {
            // Harmless; nothing to report.
        }
    }

    /// `layout:` lists every clock axis once and every shape entry once, in `shape:` order.
    fn layout(&mut self, r: &Region, axes: &[Ident], l: &Spanned<Vec<Expr>>) {
        let names: Vec<&str> = axes.iter().map(|a| a.value.as_str()).collect();
        let Err(errs) = resolve_layout(&l.value, &names, &r.shape) else {
            return;
        };
        let expected: Vec<String> = names
            .iter()
            .map(|a| a.to_string())
            .chain(r.shape.iter().map(|e| e.to_string()))
            .collect();
        let help = format!(
            "`layout:` lists the region's clock axes ({}) by name and its shape entries as written in `shape:`, in their `shape:` order, each exactly once, outermost first, e.g. `layout: [{}]`",
            names.join(", "),
            expected.join(", ")
        );
        let at = |i: usize| l.value.get(i).map(|e| e.span).unwrap_or(l.span);
        for e in errs {
            let d = match e {
                LayoutError::AxisTwice { index, first } => Diagnostic::error(
                    Code::Inconsistent,
                    at(index),
                    format!(
                        "clock axis `{}` appears twice in the layout of `{}`",
                        l.value[index], r.name.value
                    ),
                )
                .label("repeated axis")
                .with_secondary(at(first), "first listed here"),
                LayoutError::ShapeMismatch { index, expected } => Diagnostic::error(
                    Code::Inconsistent,
                    at(index),
                    format!(
                        "layout entry `{}` of `{}` is not a clock axis, and the next shape entry is `{}`",
                        l.value[index], r.name.value, r.shape[expected]
                    ),
                )
                .label(format!("expected a clock axis or `{}`", r.shape[expected]))
                .with_secondary(r.shape[expected].span, "the shape entry expected here"),
                LayoutError::Extra { index } => Diagnostic::error(
                    Code::Inconsistent,
                    at(index),
                    format!(
                        "layout entry `{}` of `{}` is neither a clock axis nor a shape entry",
                        l.value[index], r.name.value
                    ),
                )
                .label("every clock axis and shape entry is already listed")
                .with_secondary(r.shape_span, "the shape"),
                LayoutError::MissingAxis { axis } => Diagnostic::error(
                    Code::MissingKey,
                    l.span,
                    format!(
                        "the layout of `{}` does not place clock axis `{}`",
                        r.name.value, names[axis]
                    ),
                )
                .label(format!("`{}` missing here", names[axis]))
                .with_secondary(r.clock_span, "the region's clock"),
                LayoutError::MissingShape { from } => Diagnostic::error(
                    Code::MissingKey,
                    l.span,
                    format!(
                        "the layout of `{}` does not place shape entr{} {}",
                        r.name.value,
                        if from + 1 == r.shape.len() { "y" } else { "ies" },
                        r.shape[from..]
                            .iter()
                            .map(|e| format!("`{e}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .label("shape entries missing here")
                .with_secondary(r.shape_span, "the shape"),
            };
            self.diags.push(d.help(help.clone()));
        }
    }

    fn growth_needed(&mut self, r: &Region) {
        self.diags.push(
            Diagnostic::error(
                Code::Inconsistent,
                r.retention.span,
                format!(
                    "retention `{}` bounds a growing axis, but no axis of `{}` grows",
                    r.retention.value.kind_name(),
                    r.name.value
                ),
            )
            .label("nothing to bound")
            .with_secondary(r.growth_span, "all axes fixed here")
            .help("declare the growing axis as `AXIS: {from: START, by: STRIDE}`, or use `retention: pinned`"),
        );
    }

    fn callable(&mut self, c: &Callable) {
        let regions = self.region_names();
        let constants: Vec<&str> = self
            .spec
            .constants
            .iter()
            .map(|k| k.name.value.as_str())
            .collect();
        let reads: Vec<&str> = c.read_regions().iter().map(|r| r.value.as_str()).collect();
        for a in &c.inputs {
            match &a.source {
                ArgSource::Region(r) => {
                    if !regions.contains(&r.value.as_str()) {
                        self.diags.push(
                            undefined("region", r, &regions, "regions")
                                .label("this callable reads an undeclared region"),
                        );
                    } else if let (Some(al), Some(reg)) = (&a.alias, self.spec.region(&r.value))
                        && al.value
                        && reg.placement.value == Placement::Host
                    {
                        self.diags.push(
                            Diagnostic::error(
                                Code::AliasNonContract,
                                al.span,
                                format!("input `{}` cannot be aliased: region `{}` lives in host memory", a.name.value, r.value),
                            )
                            .label("aliasing needs a device address")
                            .with_secondary(reg.placement.span, "placed on the host here")
                            .help("place the region in the arena (`placement: arena`) or set `alias: false` to stage it"),
                        );
                    }
                }
                ArgSource::Constant(k) => {
                    if !constants.contains(&k.value.as_str()) {
                        self.diags
                            .push(undefined("constant", k, &constants, "constants"));
                    }
                }
                ArgSource::Tensor { shape, .. } => {
                    for e in shape {
                        self.expr_names(e, true, &reads);
                    }
                    if let Some(al) = &a.alias
                        && al.value
                    {
                        self.diags.push(
                            Diagnostic::error(
                                Code::AliasNonContract,
                                al.span,
                                format!(
                                    "input `{}` is not contract-owned, so it cannot be aliased",
                                    a.name.value
                                ),
                            )
                            .label("`alias: true` on a caller-provided tensor")
                            .with_secondary(a.name.span, "declared with an explicit dtype/shape")
                            .help("only regions and constants (contract-owned, fixed addresses) can be aliased; remove `alias: true` (it will be staged), or bind it with `region: NAME`"),
                        );
                    }
                }
            }
        }
        for r in c.reads.iter() {
            if !regions.contains(&r.value.as_str()) {
                self.diags.push(
                    undefined("region", r, &regions, "regions")
                        .label("this callable reads an undeclared region"),
                );
            }
        }
        for (i, w) in c.writes.iter().enumerate() {
            if let Some(first) = c.writes[..i].iter().find(|f| f.value == w.value) {
                self.diags.push(
                    Diagnostic::error(
                        Code::DuplicateName,
                        w.span,
                        format!("callable `{}` lists `{}` twice in `writes:`", c.name.value, w.value),
                    )
                    .label("listed again here")
                    .with_secondary(first.span, "first listed here")
                    .help("list each written region once: the runtime binds one address per written region"),
                );
                continue;
            }
            match self.spec.region(&w.value) {
                None => self.diags.push(
                    undefined("region", w, &regions, "regions")
                        .label("this callable writes an undeclared region"),
                ),
                Some(reg) if reg.mutability.value == Mutability::Immutable => {
                    self.diags.push(
                        Diagnostic::error(
                            Code::Inconsistent,
                            w.span,
                            format!("callable `{}` writes the immutable region `{}`", c.name.value, w.value),
                        )
                        .label("write to an immutable region")
                        .with_secondary(reg.mutability.span, "declared immutable here")
                        .help("declare the region `mutable`, `copy_on_write` or `scratch`, or remove it from `writes:`"),
                    );
                }
                Some(_) => {}
            }
        }
        if let Some(l) = &c.loop_clock {
            let clocks = self.clock_names();
            match self.spec.clock(&l.value) {
                None => self.diags.push(undefined("clock", l, &clocks, "clocks")),
                Some(k) if !matches!(k.kind, ClockKind::Rate { .. }) => {
                    self.diags.push(
                        Diagnostic::error(
                            Code::Clock,
                            l.span,
                            format!("loop clock `{}` has no rate", l.value),
                        )
                        .label("not a derived clock")
                        .with_secondary(k.span, "declared here")
                        .help("declare the solver clock with its count per call, e.g. `step: n_steps per chunk`"),
                    );
                }
                Some(_) => {}
            }
        }
        if let Some(p) = &c.admit {
            if self.spec.quantity(&p.var.value).is_some() {
                self.diags.push(
                    Diagnostic::error(
                        Code::Inconsistent,
                        p.var.span,
                        format!("`{}` is a quantity, not the per-call variable", p.var.value),
                    )
                    .label("the predicate must constrain a per-call variable")
                    .help("name the per-call advance with a fresh name, e.g. `f <= f_chunk`"),
                );
            }
            for (_, e) in &p.clauses {
                self.expr_names(e, false, &[]);
            }
        }
        if let Some(e) = &c.configs {
            self.expr_names(e, false, &[]);
        }
        if c.inputs.is_empty() && c.reads.is_empty() {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    c.name.span,
                    format!("callable `{}` has no inputs", c.name.value),
                )
                .label("nothing to specialize")
                .help("list its tensor arguments under `inputs:`"),
            );
        }
    }
}
