//! Derivations (paper eqs. 1–7): quantities, clock rates, attended and envelope
//! extents, bytes, ρ (eq. 3), catalogs 𝓛 (eq. 4) and widths K_r (eq. 7), verdicts, M_reserve
//! (eq. 6) at step and chunk granularity and the host-launch ratio (eq. 5).
//!
//! Runs after [`crate::validate`], so every name resolves and definitions are acyclic; what can
//! still fail is arithmetic (overflow, division by zero) and value constraints (zero strides,
//! retention larger than the envelope...), reported as diagnostics.

pub mod arena;
pub mod reach;
pub mod soundness;
pub mod types;

use std::collections::HashMap;

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::diag::{Code, Diagnostic};
use crate::expr::{self, Env};
use crate::ir::*;
use types::*;

/// Default largest catalog accepted as capturable (`capture_limit:` overrides it).
pub const DEFAULT_CAPTURE_LIMIT: u64 = 64;
/// Most classes enumerated per callable when summing M_reserve.
pub const MAX_ENUMERATED_CLASSES: u64 = 100_000;
/// Most attended extents listed per region catalog.
pub const MAX_LISTED_EXTENTS: u64 = 100_000;

/// Derive the base operating point and every declared operating point.
pub fn derive_all(spec: &Spec) -> Result<(Derived, Vec<Derived>), Vec<Diagnostic>> {
    let base = derive_at(spec, None)?;
    let mut ops = Vec::new();
    let mut errs = Vec::new();
    for op in &spec.operating_points {
        match derive_at(spec, Some(op)) {
            Ok(d) => ops.push(d),
            Err(e) => errs.extend(e),
        }
    }
    if errs.is_empty() {
        Ok((base, ops))
    } else {
        Err(errs)
    }
}

/// Derive at one operating point (`None` = base).
pub fn derive_at(spec: &Spec, op: Option<&OperatingPoint>) -> Result<Derived, Vec<Diagnostic>> {
    let mut d = Deriver {
        spec,
        op,
        env: HashMap::new(),
        diags: Vec::new(),
    };
    let out = d.run();
    match out {
        Some(v) if d.diags.is_empty() => Ok(v),
        _ => {
            if d.diags.is_empty() {
                d.diags.push(Diagnostic::error(
                    Code::Inconsistent,
                    spec.family.span,
                    "spec could not be derived",
                ));
            }
            Err(d.diags)
        }
    }
}

/// Warnings about derived numbers.
pub fn warnings(spec: &Spec, derived: &Derived) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (r, dr) in spec.regions.iter().zip(&derived.regions) {
        for (s, ds) in r.stock.iter().zip(&dr.stock) {
            if ds.rho.num < ds.rho.den {
                out.push(
                    Diagnostic::warning(
                        Code::Suspicious,
                        s.span,
                        format!(
                            "stock constant `{}` of region `{}` reserves less than the declared live extent (ρ = {:.2})",
                            s.name.value,
                            r.name.value,
                            ds.rho.as_f64()
                        ),
                    )
                    .label("smaller than the envelope")
                    .help("check the stock constant and the retention policy: the stock implementation would have truncated earlier than the contract says"),
                );
            }
        }
    }
    for (c, dc) in spec.callables.iter().zip(&derived.callables) {
        let varying = dc.region_widths.iter().any(|w| !w.pinned);
        if varying && c.admit.is_none() {
            out.push(
                Diagnostic::warning(
                    Code::Suspicious,
                    c.name.span,
                    format!(
                        "callable `{}` has a varying extent but no admission predicate",
                        c.name.value
                    ),
                )
                .label("partial flushes are only bounded by the stride")
                .help("declare `admit: f <= STRIDE` so partial flushes at turn ends stay in a finite catalog"),
            );
        }
    }
    out
}

struct Deriver<'s> {
    spec: &'s Spec,
    op: Option<&'s OperatingPoint>,
    env: HashMap<String, i64>,
    diags: Vec<Diagnostic>,
}

struct ClassEnv<'a> {
    env: &'a HashMap<String, i64>,
    extents: &'a [(String, u64)],
}

impl Env for ClassEnv<'_> {
    fn name(&self, name: &str) -> Option<i64> {
        self.env.get(name).copied()
    }
    fn extent(&self, region: &str) -> Option<i64> {
        self.extents
            .iter()
            .find(|(r, _)| r == region)
            .and_then(|(_, v)| i64::try_from(*v).ok())
    }
}

fn mul_all(vals: impl IntoIterator<Item = u64>) -> Option<u64> {
    vals.into_iter().try_fold(1u64, |a, b| a.checked_mul(b))
}

impl<'s> Deriver<'s> {
    fn at(&self) -> String {
        match self.op {
            Some(op) => format!(" (at operating point `{}`)", op.name.value),
            None => String::new(),
        }
    }

    fn push(&mut self, mut d: Diagnostic) {
        d.message.push_str(&self.at());
        if self.diags.len() < 1000 && !self.diags.contains(&d) {
            self.diags.push(d);
        }
    }

    fn overflow(&mut self, span: Span, what: &str) {
        self.push(
            Diagnostic::error(Code::Arithmetic, span, format!("{what} overflows 64 bits"))
                .label("too large")
                .help("check the magnitudes of the extents and shapes involved"),
        );
    }

    fn eval(&mut self, e: &Expr) -> Option<i64> {
        match expr::eval(e, &|n: &str| self.env.get(n).copied()) {
            Ok(v) => Some(v),
            Err(err) => {
                self.push(err.to_diagnostic());
                None
            }
        }
    }

    /// Evaluate and require `>= min` (1 for sizes and strides, 0 for offsets).
    fn eval_at_least(&mut self, e: &Expr, min: i64, what: &str) -> Option<u64> {
        let v = self.eval(e)?;
        if v < min {
            let kind = if min >= 1 { "positive" } else { "non-negative" };
            self.push(
                Diagnostic::error(
                    Code::NotPositive,
                    e.span,
                    format!("{what} must be {kind}, but `{e}` = {v}"),
                )
                .label(format!("evaluates to {v}"))
                .help(if min >= 1 {
                    format!("{what} must be at least 1; check the quantities it uses")
                } else {
                    format!("{what} cannot be negative; check the quantities it uses")
                }),
            );
            return None;
        }
        u64::try_from(v).ok()
    }

    /// A derivation of `value` from a formula over expressions (names annotated with values).
    fn derivation(&self, value: u64, formula: String, exprs: &[&Expr]) -> Derivation {
        let mut inputs: Vec<(String, i64)> = Vec::new();
        for e in exprs {
            for (n, _) in e.names() {
                if !inputs.iter().any(|(m, _)| m == n)
                    && let Some(v) = self.env.get(n)
                {
                    inputs.push((n.to_string(), *v));
                }
            }
        }
        Derivation {
            value,
            formula,
            inputs,
        }
    }

    fn quantities(&mut self) -> Option<Vec<DerivedQuantity>> {
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
        let mut ok = true;
        for n in order {
            let (name, e) = defs[g[n]];
            match self.eval(e) {
                Some(v) => {
                    self.env.insert(name.value.clone(), v);
                }
                None => ok = false,
            }
        }
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

    fn clocks(&mut self) -> Option<Vec<DerivedClock>> {
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

    fn axes(&self, r: &Region) -> Vec<String> {
        let mut out = Vec::new();
        for c in &r.clock {
            match self.spec.clock(&c.value).map(|k| &k.kind) {
                Some(ClockKind::Product(f)) => out.extend(f.iter().map(|i| i.value.clone())),
                _ => out.push(c.value.clone()),
            }
        }
        out
    }

    fn region(&mut self, r: &Region) -> Option<DerivedRegion> {
        let axes = self.axes(r);
        let name = &r.name.value;
        // Per-axis values, in clock order.
        let mut fixed: Vec<Option<(u64, &Expr)>> = Vec::new();
        let mut grow: Option<(usize, u64, u64, u64, &AxisGrowth)> = None; // axis, from, by, call
        let mut ok = true;
        for (i, a) in axes.iter().enumerate() {
            let Some(g) = r.growth.iter().find(|g| &g.axis.value == a) else {
                fixed.push(None);
                ok = false;
                continue;
            };
            match &g.growth {
                Growth::Fixed(e) => {
                    let v =
                        self.eval_at_least(e, 1, &format!("the extent of `{name}` along `{a}`"));
                    fixed.push(v.map(|v| (v, e)));
                    ok &= v.is_some();
                }
                Growth::Grows { from, by, call } => {
                    fixed.push(None);
                    let f = self.eval_at_least(from, 0, &format!("the start extent of `{name}`"));
                    let s = self.eval_at_least(by, 1, &format!("the stride of `{name}`"));
                    let c = match call {
                        Some(c) => {
                            self.eval_at_least(c, 0, &format!("the per-call frames of `{name}`"))
                        }
                        None => Some(0),
                    };
                    match (f, s, c) {
                        (Some(f), Some(s), Some(c)) => grow = Some((i, f, s, c, g)),
                        _ => ok = false,
                    }
                }
            }
        }
        if !ok {
            return None;
        }
        let attended_axis = grow.map(|g| g.0).unwrap_or(axes.len().saturating_sub(1));
        // Retention bound A, lower bound A⁻, extra envelope, stride.
        let mut keep: Option<DerivedKeep> = None;
        let (a_max, a_min, pinned, order): (Derivation, Derivation, bool, Option<CacheOrder>) =
            match (&r.retention.value, grow) {
                (Retention::Pinned, _) => {
                    let (v, e) = fixed.get(attended_axis).copied().flatten()?;
                    let d = self.derivation(v, e.to_string(), &[e]);
                    (d.clone(), d, true, None)
                }
                (Retention::Ring { capacity }, Some(_)) => {
                    let v =
                        self.eval_at_least(capacity, 1, &format!("the ring capacity of `{name}`"))?;
                    let d = self.derivation(v, capacity.to_string(), &[capacity]);
                    (d.clone(), d, true, None)
                }
                (Retention::Window { size, steady }, Some((_, from, _, _, g))) => {
                    let v = self.eval_at_least(size, 1, &format!("the window of `{name}`"))?;
                    let d = self.derivation(v, size.to_string(), &[size]);
                    if *steady {
                        (d.clone(), d, true, None)
                    } else {
                        let Growth::Grows { from: fe, .. } = &g.growth else {
                            return None;
                        };
                        let lo = self.derivation(from, fe.to_string(), &[fe]);
                        (d, lo, false, None)
                    }
                }
                (
                    Retention::PromptHistory {
                        prompt,
                        retained,
                        order,
                        keep: declared_keep,
                    },
                    Some((_, from, _, _, g)),
                ) => {
                    let p =
                        self.eval_at_least(prompt, 0, &format!("the prompt extent of `{name}`"))?;
                    let k = self.eval_at_least(
                        retained,
                        0,
                        &format!("the retained extent of `{name}`"),
                    )?;
                    let Some(sum) = p.checked_add(k) else {
                        self.overflow(r.retention.span, "the retention bound");
                        return None;
                    };
                    let d = self.derivation(
                        sum,
                        format!("{} + {}", paren(prompt), paren(retained)),
                        &[prompt, retained],
                    );
                    let Growth::Grows { from: fe, .. } = &g.growth else {
                        return None;
                    };
                    let lo = self.derivation(from, fe.to_string(), &[fe]);
                    keep = Some(self.keep(
                        r,
                        prompt,
                        retained,
                        p,
                        k,
                        *order,
                        declared_keep.as_ref(),
                    )?);
                    (d, lo, false, Some(*order))
                }
                (_, None) => return None, // validated: cannot happen
            };
        if a_min.value > a_max.value {
            let sp = grow.map(|g| g.4.span).unwrap_or(r.growth_span);
            self.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    sp,
                    format!(
                        "`{name}` starts at extent {} but its retention bound is {}",
                        a_min.value, a_max.value
                    ),
                )
                .label("starts beyond the retention bound")
                .with_secondary(r.retention.span, format!("bound {} here", a_max.value))
                .help("the growth must start at or below the retention bound (`from` ≤ the retained extent)"),
            );
            return None;
        }
        // Catalog width (eq. 7).
        let window_v = a_max.value - a_min.value;
        let window = Derivation {
            value: window_v,
            formula: if pinned {
                "0 (pinned)".into()
            } else {
                format!("({}) - ({})", a_max.formula, a_min.formula)
            },
            inputs: merge_inputs(&a_max, &a_min),
        };
        let (stride, width) = match grow {
            Some((_, _, s, _, g)) if !pinned => {
                let Growth::Grows { by, .. } = &g.growth else {
                    return None;
                };
                let sd = self.derivation(s, by.to_string(), &[by]);
                let k = window_v.div_ceil(s) + 1;
                let wd = Derivation {
                    value: k,
                    formula: format!("ceil_div(W_r {window_v}, {}) + 1", by),
                    inputs: sd.inputs.clone(),
                };
                (Some(sd), wd)
            }
            _ => (
                None,
                Derivation {
                    value: 1,
                    formula: "1 (pinned: W_r = 0)".into(),
                    inputs: Vec::new(),
                },
            ),
        };
        let catalog = if width.value <= MAX_LISTED_EXTENTS {
            match &stride {
                Some(s) => {
                    let mut v: Vec<u64> = (0..width.value.saturating_sub(1))
                        .map(|k| a_min.value + k * s.value)
                        .collect();
                    v.push(a_max.value);
                    v
                }
                None => vec![a_max.value],
            }
        } else {
            Vec::new()
        };
        // Envelope per axis.
        let mut env_axes: Vec<Derivation> = Vec::new();
        for (i, a) in axes.iter().enumerate() {
            if Some(i) == grow.map(|g| g.0) {
                let (_, _, _, call, g) = grow?;
                let Growth::Grows { call: ce, .. } = &g.growth else {
                    return None;
                };
                let need = match &r.retention.value {
                    Retention::Ring { .. } => a_max.value,
                    _ => a_max.value.checked_add(call)?,
                };
                let mut d = match (ce, &r.retention.value) {
                    (Some(ce), Retention::PromptHistory { .. } | Retention::Window { .. }) => {
                        let mut d = self.derivation(
                            need,
                            format!("{} + {}", a_max.formula, paren(ce)),
                            &[ce],
                        );
                        d.inputs = merge_inputs(&a_max, &d);
                        d
                    }
                    _ => a_max.clone(),
                };
                if let Some(env) = &r.envelope {
                    let declared =
                        self.eval_at_least(env, 1, &format!("the envelope of `{name}`"))?;
                    if declared < need {
                        self.push(
                            Diagnostic::error(
                                Code::RetentionExceedsEnvelope,
                                r.retention.span,
                                format!(
                                    "retention of `{name}` needs {need} along `{a}`, but the declared envelope holds {declared}"
                                ),
                            )
                            .label(if d.inputs.is_empty() { format!("needs {need}") } else { format!("needs {}", d.explain()) })
                            .with_secondary(env.span, format!("envelope {declared} declared here"))
                            .help(format!(
                                "raise `envelope:` to at least {need}, or shrink the retention (new frames must fit before truncation)"
                            )),
                        );
                        return None;
                    }
                    d = self.derivation(declared, env.to_string(), &[env]);
                }
                env_axes.push(d);
            } else {
                let (v, e) = fixed.get(i).copied().flatten()?;
                env_axes.push(self.derivation(v, e.to_string(), &[e]));
            }
        }
        let Some(env_prod) = mul_all(env_axes.iter().map(|d| d.value)) else {
            self.overflow(r.span, "the envelope");
            return None;
        };
        let envelope_extent = Derivation {
            value: env_prod,
            formula: if env_axes.len() == 1 {
                env_axes[0].formula.clone()
            } else {
                env_axes
                    .iter()
                    .map(|d| paren_str(&d.formula))
                    .collect::<Vec<_>>()
                    .join(" × ")
            },
            inputs: env_axes.iter().fold(Vec::new(), |mut acc, d| {
                for i in &d.inputs {
                    if !acc.iter().any(|(n, _): &(String, i64)| n == &i.0) {
                        acc.push(i.clone());
                    }
                }
                acc
            }),
        };
        // Shape and bytes.
        let mut shape = Vec::new();
        for (j, e) in r.shape.iter().enumerate() {
            shape.push(self.eval_at_least(e, 1, &format!("dimension {j} of `{name}`'s shape"))?);
        }
        let beta = beta(r.dtype.value);
        let Some(tick) = mul_all(shape.iter().copied()).and_then(|p| p.checked_mul(beta)) else {
            self.overflow(r.shape_span, "the element shape");
            return None;
        };
        let tick_bytes = Derivation {
            value: tick,
            formula: format!(
                "{}{} {}",
                if shape.is_empty() {
                    String::new()
                } else {
                    format!(
                        "{} × ",
                        shape
                            .iter()
                            .map(|v| v.to_string())
                            .collect::<Vec<_>>()
                            .join(" × ")
                    )
                },
                beta,
                "B"
            ),
            inputs: Vec::new(),
        };
        let Some(live_bytes) = env_prod.checked_mul(tick) else {
            self.overflow(r.span, "the region's bytes");
            return None;
        };
        let attended_prod = mul_all(env_axes.iter().enumerate().map(|(i, d)| {
            if i == attended_axis {
                a_max.value
            } else {
                d.value
            }
        }));
        let Some(attended_bytes) = attended_prod.and_then(|p| p.checked_mul(tick)) else {
            self.overflow(r.span, "the region's attended bytes");
            return None;
        };
        // Storage order (`layout:`), validated.
        let axis_names: Vec<&str> = axes.iter().map(String::as_str).collect();
        let layout = match &r.layout {
            Some(l) => resolve_layout(&l.value, &axis_names, &r.shape).ok()?,
            None => default_layout(axes.len(), shape.len()),
        };
        let mut dims: Vec<u64> = Vec::with_capacity(layout.len());
        let mut dim_names: Vec<String> = Vec::with_capacity(layout.len());
        for l in &layout {
            match *l {
                LayoutDim::Axis(i) => {
                    dims.push(env_axes.get(i)?.value);
                    dim_names.push(axes.get(i)?.clone());
                }
                LayoutDim::Shape(j) => {
                    dims.push(*shape.get(j)?);
                    dim_names.push(r.shape.get(j)?.to_string());
                }
            }
        }
        // Stock constants (eq. 3).
        let mut stock = Vec::new();
        for s in &r.stock {
            let mut ext = Vec::new();
            for e in &s.extents {
                ext.push(self.eval_at_least(
                    e,
                    1,
                    &format!("stock constant `{}`", s.name.value),
                )?);
            }
            let Some(prod) = mul_all(ext.iter().copied()) else {
                self.overflow(s.span, "the stock constant");
                return None;
            };
            let Some(rb) = prod.checked_mul(tick) else {
                self.overflow(s.span, "the stock constant's bytes");
                return None;
            };
            let exprs: Vec<&Expr> = s.extents.iter().collect();
            let reserved = self.derivation(
                prod,
                s.extents.iter().map(paren).collect::<Vec<_>>().join(" × "),
                &exprs,
            );
            stock.push(StockRatio {
                name: s.name.value.clone(),
                extents: ext,
                reserved,
                reserved_bytes: rb,
                rho: Ratio {
                    num: prod,
                    den: env_prod,
                },
            });
        }
        Some(DerivedRegion {
            name: name.clone(),
            dtype: r.dtype.value,
            lifetime: r.lifetime.value,
            mutability: r.mutability.value,
            placement: r.placement.value,
            order,
            keep,
            axes,
            growing_axis: grow.map(|g| g.0),
            attended_extent: a_max,
            attended_min: a_min,
            envelope_axes: env_axes,
            envelope_extent,
            shape,
            tick_bytes,
            layout,
            dim_names,
            dims,
            live_bytes,
            attended_bytes,
            catalog,
            width: CatalogWidth {
                window,
                stride,
                width,
                pinned,
            },
            stock,
        })
    }

    /// The kept slices of a prompt + history retention: the declared `keep:` (whose head and
    /// tail must add up to the attended extent) or the order's natural rule.
    #[allow(clippy::too_many_arguments)]
    fn keep(
        &mut self,
        r: &Region,
        prompt: &Expr,
        retained: &Expr,
        p: u64,
        k: u64,
        order: CacheOrder,
        declared: Option<&Keep>,
    ) -> Option<DerivedKeep> {
        let name = &r.name.value;
        let pd = self.derivation(p, prompt.to_string(), &[prompt]);
        let kd = self.derivation(k, retained.to_string(), &[retained]);
        let (natural, swapped) = match order {
            CacheOrder::Prepend => ((kd.clone(), pd.clone()), (pd, kd)),
            CacheOrder::Append => ((pd.clone(), kd.clone()), (kd, pd)),
        };
        let Some(kp) = declared else {
            return Some(DerivedKeep {
                head: natural.0,
                tail: natural.1,
                prompt: p,
                retained: k,
                rule: KeepRule::Natural,
                declared: false,
            });
        };
        let h = self.eval_at_least(&kp.head, 0, &format!("the kept head of `{name}`"));
        let t = self.eval_at_least(&kp.tail, 0, &format!("the kept tail of `{name}`"));
        let (h, t) = (h?, t?);
        let bound = p.checked_add(k)?;
        if h.checked_add(t) != Some(bound) {
            let sum = h
                .checked_add(t)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "more than 2^64".into());
            let rule = |(a, b): (&Derivation, &Derivation)| {
                format!("`keep: {{head: {}, tail: {}}}`", a.formula, b.formula)
            };
            self.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    kp.span,
                    format!(
                        "`{name}` keeps head {h} + tail {t} = {sum} frames, but its attended extent is prompt {p} + retained {k} = {bound}"
                    ),
                )
                .label(format!("keeps {sum} frames"))
                .with_secondary(prompt.span.to(retained.span), format!("attended extent {bound}"))
                .help(format!(
                    "`head` + `tail` must equal `prompt` + `retained`: on `order: {}` storage the natural rule is {} (the default when `keep:` is omitted), the `{}` rule is {}",
                    order.name(),
                    rule((&natural.0, &natural.1)),
                    order.other().name(),
                    rule((&swapped.0, &swapped.1)),
                )),
            );
            return None;
        }
        let rule = if (h, t) == (natural.0.value, natural.1.value) {
            KeepRule::Natural
        } else if (h, t) == (swapped.0.value, swapped.1.value) {
            KeepRule::Swapped
        } else {
            KeepRule::Split
        };
        Some(DerivedKeep {
            head: self.derivation(h, kp.head.to_string(), &[&kp.head]),
            tail: self.derivation(t, kp.tail.to_string(), &[&kp.tail]),
            prompt: p,
            retained: k,
            rule,
            declared: true,
        })
    }

    fn constant(&mut self, c: &Constant) -> Option<DerivedConstant> {
        let mut shape = Vec::new();
        for (j, e) in c.shape.iter().enumerate() {
            shape.push(self.eval_at_least(
                e,
                1,
                &format!("dimension {j} of constant `{}`", c.name.value),
            )?);
        }
        let Some(bytes) =
            mul_all(shape.iter().copied()).and_then(|p| p.checked_mul(beta(c.dtype.value)))
        else {
            self.overflow(c.span, "the constant's bytes");
            return None;
        };
        Some(DerivedConstant {
            name: c.name.value.clone(),
            dtype: c.dtype.value,
            placement: c.placement.value,
            shape,
            bytes,
        })
    }

    #[allow(clippy::too_many_lines)]
    fn callable(
        &mut self,
        c: &Callable,
        regions: &[DerivedRegion],
        consts: &[DerivedConstant],
        clocks: &[DerivedClock],
        limit: u64,
    ) -> Option<DerivedCallable> {
        let name = &c.name.value;
        let find = |r: &str| regions.iter().find(|d| d.name == r);
        let steps = match &c.loop_clock {
            Some(l) => match self.spec.clock(&l.value).map(|k| &k.kind) {
                Some(ClockKind::Rate { rate, .. }) => {
                    self.eval_at_least(rate, 1, &format!("the step count of `{name}`"))?
                }
                _ => 1,
            },
            None => 1,
        };
        let reads: Vec<String> = c.read_regions().iter().map(|r| r.value.clone()).collect();
        let writes: Vec<String> = c.writes.iter().map(|r| r.value.clone()).collect();
        let mut region_widths = Vec::new();
        for r in &reads {
            let d = find(r)?;
            region_widths.push(RegionWidth {
                region: r.clone(),
                width: d.width.width.value,
                pinned: d.width.pinned,
            });
        }
        let Some(catalog_width) = mul_all(region_widths.iter().map(|w| w.width)) else {
            self.overflow(c.span, "the catalog width");
            return None;
        };
        let configs = match &c.configs {
            Some(e) => self.eval_at_least(e, 1, &format!("|Q_o| of `{name}`"))?,
            None => 1,
        };
        // The reachable catalog: walk the regions' clock trajectories (reach.rs).
        let clock_of = |axis: &str| clocks.iter().find(|k| k.name == axis);
        let mut tracks: Vec<reach::Track> = Vec::new();
        for r in &reads {
            if tracks.iter().any(|t| &t.region == r) {
                continue; // one region read twice has one extent
            }
            let d = find(r)?;
            let axis = d
                .growing_axis
                .and_then(|i| d.axes.get(i))
                .cloned()
                .unwrap_or_default();
            let (base, per_base) = clock_of(&axis)
                .filter(|k| k.factors.is_empty())
                .map(|k| (k.base.clone(), k.per_base.max(1)))
                .unwrap_or_default();
            tracks.push(reach::Track {
                region: r.clone(),
                clock: axis,
                base,
                per_base: per_base.max(1),
                from: d.attended_min.value,
                by: if d.width.pinned {
                    None
                } else {
                    d.width.stride.as_ref().map(|s| s.value)
                },
                cap: d.attended_extent.value,
            });
        }
        let reach = reach::reachable(&tracks, MAX_ENUMERATED_CLASSES);
        let (classes, classes_bound) = match c.query.value {
            QueryLength::Fixed => (
                reach.count.and_then(|n| configs.checked_mul(n)),
                configs.checked_mul(catalog_width),
            ),
            QueryLength::Traffic => (None, None),
        };
        let lockstep_text = lockstep_text(&reach.lockstep);
        let spec_region = region_widths
            .iter()
            .find(|w| !w.pinned)
            .or(region_widths.first())
            .map(|w| w.region.clone());
        let sr = spec_region.as_deref().and_then(find);
        let attended_extents = sr.map(|d| d.catalog.clone()).unwrap_or_default();
        let catalog_size = match (sr, spec_region.as_deref().and_then(|n| self.spec.region(n))) {
            (Some(d), Some(ir)) => match (&ir.retention.value, &d.width.stride) {
                (Retention::PromptHistory { retained, .. }, Some(s)) => {
                    let g = ir.growing_axis().and_then(|i| ir.growth.get(i));
                    let by = g.and_then(|g| match &g.growth {
                        Growth::Grows { by, .. } => Some(by),
                        _ => None,
                    });
                    let mut dd = self.derivation(
                        d.width.width.value,
                        format!(
                            "ceil_div({}, {}) + 1",
                            retained,
                            by.map(|b| b.to_string()).unwrap_or(s.formula.clone())
                        ),
                        &[retained],
                    );
                    dd.inputs = merge_inputs(&dd, s);
                    dd
                }
                _ => d.width.width.clone(),
            },
            _ => Derivation::literal(1),
        };
        // Partial flushes: at most s_r extra classes, capped by the admission predicate. The
        // admission variable counts ticks of the finest clock among the growing regions the
        // callable reads or writes on the specializing region's base clock (the frames the
        // runtime presents); its bound is converted to the specializing region's clock.
        let sr_track = sr.and_then(|d| tracks.iter().find(|t| t.region == d.name));
        let admit_clock = sr_track.map(|st| {
            let mut best = (st.clock.clone(), st.per_base);
            for r in reads.iter().chain(&writes) {
                let Some(d) = find(r) else { continue };
                if d.width.pinned {
                    continue;
                }
                let Some(axis) = d.growing_axis.and_then(|i| d.axes.get(i)) else {
                    continue;
                };
                if let Some(k) = clock_of(axis)
                    && k.factors.is_empty()
                    && !st.base.is_empty()
                    && k.base == st.base
                    && k.per_base > best.1
                {
                    best = (k.name.clone(), k.per_base);
                }
            }
            best
        });
        let flush_clock = sr_track.map(|t| t.clock.clone());
        let flush_classes = match (sr.and_then(|d| d.width.stride.clone()), sr_track) {
            (Some(s), Some(st)) => {
                // The upper bound (`f < B` admits at most B − 1, and says so), and the lower
                // bound of every clause (`f > a`, `f >= a`, `f == a`): sizes below it are never
                // flushed. The lint stage rejects predicates that admit nothing.
                let bound = c.admit.as_ref().and_then(|p| {
                    p.clauses
                        .iter()
                        .filter_map(|(op, e)| {
                            let v = expr::eval(e, &|n: &str| self.env.get(n).copied()).ok()?;
                            match op {
                                CmpOp::Le | CmpOp::Eq => Some((v, e, e.to_string())),
                                CmpOp::Lt => Some((v.saturating_sub(1), e, format!("{e} - 1"))),
                                _ => None,
                            }
                        })
                        .min_by_key(|(v, _, _)| *v)
                });
                let lowest = c
                    .admit
                    .as_ref()
                    .and_then(|p| expr::admitted(p, &|n: &str| self.env.get(n).copied()).ok())
                    .map_or(1, |a| a.lo);
                let stride = format!(
                    "{} {}",
                    paren_str(&s.formula),
                    unit_word(s.value, &st.clock)
                );
                let flush = match bound {
                    Some((b, e, bound_text)) => {
                        let b = u64::try_from(b.max(0)).unwrap_or(0);
                        let (ac, ap) = admit_clock
                            .clone()
                            .unwrap_or_else(|| (st.clock.clone(), st.per_base));
                        // b ticks of the admission clock = b × p_r / p_a ticks of the region's
                        // clock (whole ticks: a flush advances the region by whole ticks).
                        let num = u128::from(b) * u128::from(st.per_base);
                        let b_r = u64::try_from(num / u128::from(ap.max(1))).unwrap_or(u64::MAX);
                        let exact = num % u128::from(ap.max(1)) == 0;
                        let admit = if ac == st.clock {
                            format!("{} {}", paren_str(&bound_text), unit_word(b, &ac))
                        } else {
                            format!(
                                "{} {} = {}{} {}",
                                paren_str(&bound_text),
                                unit_word(b, &ac),
                                if exact { "" } else { "⌊…⌋ " },
                                b_r,
                                unit_word(b_r, &st.clock)
                            )
                        };
                        let mut d = self.derivation(
                            s.value.min(b_r),
                            format!("min(s_r {stride}, admit bound {admit})"),
                            &[e],
                        );
                        d.inputs = merge_inputs(&d, &s);
                        d
                    }
                    None => Derivation {
                        value: s.value,
                        formula: format!("s_r {stride}"),
                        inputs: s.inputs.clone(),
                    },
                };
                // Sizes below the lower bound are not admitted: (lowest − 1) fewer classes
                // (the bound converted up to whole ticks of the region's clock).
                Some(if lowest > 1 {
                    let (_, ap) = admit_clock
                        .clone()
                        .unwrap_or_else(|| (st.clock.clone(), st.per_base));
                    let lo = u128::from(u64::try_from(lowest).unwrap_or(u64::MAX));
                    let lo_r = (lo * u128::from(st.per_base)).div_ceil(u128::from(ap.max(1)));
                    let skip = u64::try_from(lo_r.saturating_sub(1)).unwrap_or(u64::MAX);
                    Derivation {
                        value: flush.value.saturating_sub(skip),
                        formula: format!("{} - ({lowest} - 1)", flush.formula),
                        inputs: flush.inputs,
                    }
                } else {
                    flush
                })
            }
            _ => None,
        };
        // Verdict.
        let widths_text = region_widths
            .iter()
            .map(|w| {
                let d = find(&w.region);
                match d {
                    Some(d) if !d.width.pinned => format!(
                        "`{}`: K_r = ceil(W_r {} / s_r {}) + 1 = {}",
                        w.region,
                        d.width.window.value,
                        d.width.stride.as_ref().map(|s| s.value).unwrap_or(0),
                        w.width
                    ),
                    _ => format!("`{}`: pinned, K_r = 1", w.region),
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        let widths_text = if widths_text.is_empty() {
            "no region extent in the signature".to_string()
        } else {
            widths_text
        };
        // `= |Q_o| 1 × ∏K_r 3 (...)`, or with regions in lock-step
        // `reachable of ≤ |Q_o| 1 × ∏K_r 9 = 9 (...; a and b advance together on the token clock)`.
        let count_text = if reach.count == Some(catalog_width) {
            format!("= |Q_o| {configs} × ∏K_r {catalog_width} ({widths_text})")
        } else {
            format!(
                "reachable of ≤ |Q_o| {configs} × ∏K_r {catalog_width} = {} ({widths_text}; {lockstep_text})",
                classes_bound
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "more than 2^64".into())
            )
        };
        let (verdict, reason) = match (c.query.value, classes) {
            _ if c.effects.value.contains(Effects::HOST_RNG) => (
                Verdict::OutEffects,
                format!(
                    "draws from the host random generator (`effects: {}`): exact replay would freeze the host draws of the captured call into the graph, so the engine rejects the callable for good and it runs eager. To bring it in scope, move the draws to a device Philox stream (`effects: device_rng`)",
                    c.effects.value.spelling()
                ),
            ),
            (QueryLength::Traffic, _) => (
                Verdict::OutQo,
                format!(
                    "query length is traffic-dependent (`query: traffic`): Q_o is unbounded, so no finite catalog covers the calls even though ∏K_r = {catalog_width} ({widths_text}). To bring it in scope, fix the query length by the clocks (e.g. fixed-size query chunks) and declare `query: fixed`"
                ),
            ),
            (QueryLength::Fixed, Some(n)) if n <= limit => (
                Verdict::Captured,
                format!(
                    "{n} signature class{} {count_text}, within the capture limit {limit}: every signature is known before traffic arrives",
                    if n == 1 { "" } else { "es" }
                ),
            ),
            (QueryLength::Fixed, n) => (
                Verdict::OutWidth,
                format!(
                    "{} signature classes {count_text} exceed the capture limit {limit}. Coarsen the stride (s_r comparable to W_r) or pin the extent (ring) to bring it in scope; padding to fewer shapes would forfeit exactness",
                    n.map(|n| n.to_string())
                        .unwrap_or_else(|| "more than 2^64".into())
                ),
            ),
        };
        // Class enumeration for M_reserve: exactly the reachable tuples.
        let tuples = reach.tuples.as_deref();
        let enumerable = tuples.is_some();
        let keep_sigs = tuples.is_some_and(|t| t.len() as u64 <= limit);
        let loop_axis = c.loop_clock.as_ref().map(|l| l.value.clone());
        let mut reserves = Vec::new();
        for g in [Granularity::Step, Granularity::Chunk] {
            let mut staging: u64 = 0;
            let mut staging_all: u64 = 0;
            let mut largest: Option<(String, u64)> = None;
            let mut sigs = Vec::new();
            for (idx, tuple) in tuples.unwrap_or_default().iter().enumerate() {
                // The varying regions' extents, in read order.
                let extents: Vec<(String, u64)> = tracks
                    .iter()
                    .zip(tuple)
                    .filter(|(t, _)| t.by.is_some())
                    .map(|(t, &v)| (t.region.clone(), v))
                    .collect();
                // Pinned regions read at their bound.
                let mut all_ext = extents.clone();
                for r in &reads {
                    if let Some(d) = find(r)
                        && d.width.pinned
                    {
                        all_ext.push((r.clone(), d.attended_extent.value));
                    }
                }
                let mut args = Vec::new();
                for a in &c.inputs {
                    let sig =
                        self.arg_sig(a, g, loop_axis.as_deref(), &all_ext, regions, consts)?;
                    args.push(sig);
                }
                let mut st: u64 = 0;
                let mut all: u64 = 0;
                for a in &args {
                    all = all.checked_add(a.bytes)?;
                    if !a.aliased {
                        st = st.checked_add(a.bytes)?;
                    }
                    if largest.as_ref().is_none_or(|(_, b)| a.bytes > *b) {
                        largest = Some((a.name.clone(), a.bytes));
                    }
                }
                staging = staging.checked_add(st)?;
                staging_all = staging_all.checked_add(all)?;
                if keep_sigs {
                    sigs.push(ClassSig {
                        index: idx,
                        extents,
                        args,
                        staging_bytes: st,
                    });
                }
            }
            let mut wt: u64 = 0;
            for w in &writes {
                wt = wt.checked_add(find(w)?.live_bytes)?;
            }
            reserves.push(Reserve {
                granularity: g,
                staging_bytes: staging,
                write_through_bytes: wt,
                total_bytes: staging.checked_add(wt)?,
                staging_unaliased_bytes: staging_all,
                complete: enumerable && c.query.value == QueryLength::Fixed,
                largest_input: largest,
                host_launches_per_chunk: if g == Granularity::Step { steps } else { 1 },
                classes: sigs,
            });
        }
        let reserve_chunk = reserves.pop()?;
        let reserve_step = reserves.pop()?;
        Some(DerivedCallable {
            name: name.clone(),
            granularity: c.granularity.value,
            effects: c.effects.value,
            query: c.query.value,
            reads,
            writes,
            attended_extents,
            specializing_region: spec_region,
            catalog_size,
            region_widths,
            catalog_width,
            configs,
            reachable: reach.count,
            lockstep: reach.lockstep,
            classes,
            classes_bound,
            flush_classes,
            flush_clock,
            verdict,
            reason,
            steps,
            reserve_step,
            reserve_chunk,
            launch_ratio: Ratio { num: 1, den: steps },
        })
    }

    fn arg_sig(
        &mut self,
        a: &TensorArg,
        g: Granularity,
        loop_axis: Option<&str>,
        extents: &[(String, u64)],
        regions: &[DerivedRegion],
        consts: &[DerivedConstant],
    ) -> Option<ArgSig> {
        let (dims, dtype, bound, placement) = match &a.source {
            ArgSource::Region(r) => {
                let d = regions.iter().find(|d| d.name == r.value)?;
                let ext = extents
                    .iter()
                    .find(|(n, _)| n == &r.value)
                    .map(|(_, v)| *v)
                    .unwrap_or(d.attended_extent.value);
                let attended_axis = d.growing_axis.unwrap_or(d.axes.len().saturating_sub(1));
                // In storage order: a view of the region's envelope at the class's extent.
                let mut dims = Vec::new();
                for l in &d.layout {
                    match *l {
                        LayoutDim::Axis(i) => {
                            let ax = d.axes.get(i)?;
                            if g == Granularity::Step && loop_axis == Some(ax.as_str()) {
                                continue; // one step's slice
                            }
                            if i == attended_axis {
                                dims.push(ext);
                            } else {
                                dims.push(d.envelope_axes.get(i).map(|e| e.value).unwrap_or(1));
                            }
                        }
                        LayoutDim::Shape(j) => dims.push(*d.shape.get(j)?),
                    }
                }
                (dims, d.dtype, Some(r.value.clone()), d.placement)
            }
            ArgSource::Constant(k) => {
                let d = consts.iter().find(|d| d.name == k.value)?;
                (d.shape.clone(), d.dtype, Some(k.value.clone()), d.placement)
            }
            ArgSource::Tensor { dtype, shape } => {
                let mut dims = Vec::new();
                for e in shape {
                    let env = ClassEnv {
                        env: &self.env,
                        extents,
                    };
                    match expr::eval(e, &env) {
                        Ok(v) if v >= 1 => dims.push(v as u64),
                        Ok(v) => {
                            self.push(
                                Diagnostic::error(
                                    Code::NotPositive,
                                    e.span,
                                    format!(
                                        "dimension of input `{}` must be positive, but `{e}` = {v}",
                                        a.name.value
                                    ),
                                )
                                .label(format!("evaluates to {v}"))
                                .help("check the quantities and extents it uses"),
                            );
                            return None;
                        }
                        Err(err) => {
                            self.push(err.to_diagnostic());
                            return None;
                        }
                    }
                }
                (dims, dtype.value, None, Placement::Device)
            }
        };
        let aliased = a.aliased(placement);
        let bytes = mul_all(dims.iter().copied()).and_then(|p| p.checked_mul(beta(dtype)));
        let Some(bytes) = bytes else {
            self.overflow(a.span, "the input's bytes");
            return None;
        };
        Some(ArgSig {
            name: a.name.value.clone(),
            dims,
            dtype,
            aliased,
            bound_to: bound,
            bytes,
        })
    }

    fn run(&mut self) -> Option<Derived> {
        let quantities = self.quantities()?;
        let clocks = self.clocks();
        let mut regions = Vec::new();
        let mut ok = clocks.is_some();
        for r in &self.spec.regions {
            match self.region(r) {
                Some(d) => regions.push(d),
                None => ok = false,
            }
        }
        let mut constants = Vec::new();
        for c in &self.spec.constants {
            match self.constant(c) {
                Some(d) => constants.push(d),
                None => ok = false,
            }
        }
        let limit = match &self.spec.capture_limit {
            Some(e) => self.eval_at_least(&e.value, 1, "the capture limit"),
            None => Some(DEFAULT_CAPTURE_LIMIT),
        };
        if !ok {
            return None;
        }
        let limit = limit?;
        let mut callables = Vec::new();
        for c in &self.spec.callables {
            match self.callable(c, &regions, &constants, clocks.as_deref()?, limit) {
                Some(d) => callables.push(d),
                None => ok = false,
            }
        }
        if !ok {
            if self.diags.is_empty() {
                self.push(
                    Diagnostic::error(
                        Code::Arithmetic,
                        self.spec.family.span,
                        "byte counts overflow 64 bits",
                    )
                    .help("check the magnitudes of the shapes and extents"),
                );
            }
            return None;
        }
        let Some(arena) = arena::layout(&regions) else {
            self.push(
                Diagnostic::error(
                    Code::Arithmetic,
                    self.spec.family.span,
                    "the session arena's bytes overflow 64 bits",
                )
                .help("check the magnitudes of the arena regions' shapes and extents"),
            );
            return None;
        };
        let unsound: Vec<Diagnostic> = self
            .spec
            .callables
            .iter()
            .flat_map(|c| soundness::staged_writes(c, &regions, &arena))
            .collect();
        if !unsound.is_empty() {
            unsound.into_iter().for_each(|d| self.push(d));
            return None;
        }
        let stock_bytes = regions
            .iter()
            .filter_map(|r| r.reserved_bytes())
            .try_fold(0u64, |a, b| a.checked_add(b))?;
        let overrides = self
            .op
            .map(|op| {
                op.overrides
                    .iter()
                    .map(|o| {
                        (
                            o.name.value.clone(),
                            self.env.get(&o.name.value).copied().unwrap_or_default(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Derived {
            operating_point: self
                .op
                .map(|o| o.name.value.clone())
                .unwrap_or_else(|| "base".into()),
            overrides,
            quantities,
            clocks: clocks?,
            regions,
            constants,
            callables,
            arena,
            stock_bytes,
            capture_limit: limit,
        })
    }
}

/// β: bytes per element, as the exact `u64` arithmetic of the derivations uses it.
fn beta(d: DType) -> u64 {
    // Lossless: an element is at most 8 bytes.
    d.size() as u64
}

fn paren(e: &Expr) -> String {
    match e.kind {
        ExprKind::Binary(..) => format!("({e})"),
        _ => e.to_string(),
    }
}

fn paren_str(s: &str) -> String {
    if s.contains(' ') && !(s.starts_with('(') && s.ends_with(')')) {
        format!("({s})")
    } else {
        s.to_string()
    }
}

/// `tokens` / `token`: the unit of `n` ticks of `clock`.
fn unit_word(n: u64, clock: &str) -> String {
    if n == 1 || clock.ends_with('s') {
        clock.to_string()
    } else {
        format!("{clock}s")
    }
}

/// `conformer_cache and upsample_cache advance together on the token clock` (public: the
/// report and the generated docs say it the same way).
pub fn lockstep_text(groups: &[reach::LockstepGroup]) -> String {
    groups
        .iter()
        .map(|g| {
            let list = match g.regions.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    format!("{} and {last}", rest.join(", "))
                }
                _ => g.regions.join(""),
            };
            format!("{list} advance together on the {} clock", g.base)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn merge_inputs(a: &Derivation, b: &Derivation) -> Vec<(String, i64)> {
    let mut out = a.inputs.clone();
    for i in &b.inputs {
        if !out.iter().any(|(n, _)| n == &i.0) {
            out.push(i.clone());
        }
    }
    out
}
