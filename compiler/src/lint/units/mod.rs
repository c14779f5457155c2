//! Units: every quantity may carry a clock unit (`f_chunk: 50 frame`, `up_rate: 2
//! frame/token`); a literal without one is a unit-less count. Units are inferred through
//! expressions and checked where a value is read against a clock: growth, retention, envelope,
//! stock extents, offset views and admission bounds.
//!
//! A unit is a product of clock powers ([`Unit`]). `+ - min max` need equal units, except that a
//! count takes the other side's unit (`f_chunk + 3` is frames: the offset is read in the
//! clock it is added to); `*` and `/` (and `ceil_div` / `floor_div`) multiply and divide units,
//! so `25 token × 2 frame/token` is `50 frame`. A count is never a mismatch: specs without units
//! check exactly as before.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use crate::diag::{Code, Diagnostic};
use crate::ir::*;

mod convert;

/// A product of clock powers; empty is a unit-less count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unit(BTreeMap<String, i32>);

impl Unit {
    /// One tick of `clock`.
    pub fn clock(clock: &str) -> Unit {
        Unit(BTreeMap::from([(clock.to_string(), 1)]))
    }

    /// Whether this is a unit-less count.
    pub fn is_count(&self) -> bool {
        self.0.is_empty()
    }

    /// The clock, if this is exactly one tick of one clock.
    pub fn as_clock(&self) -> Option<&str> {
        match self.0.iter().next() {
            Some((c, 1)) if self.0.len() == 1 => Some(c),
            _ => None,
        }
    }

    fn combine(&self, other: &Unit, sign: i32) -> Unit {
        let mut out = self.0.clone();
        for (c, k) in &other.0 {
            let e = out.entry(c.clone()).or_insert(0);
            *e = e.saturating_add(sign.saturating_mul(*k));
            if *e == 0 {
                out.remove(c);
            }
        }
        Unit(out)
    }

    /// The product of two units.
    pub fn mul(&self, other: &Unit) -> Unit {
        self.combine(other, 1)
    }

    /// The quotient of two units.
    pub fn div(&self, other: &Unit) -> Unit {
        self.combine(other, -1)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("count");
        }
        let part = |c: &str, k: i32| {
            if k == 1 {
                c.to_string()
            } else {
                format!("{c}^{k}")
            }
        };
        let num: Vec<String> = self
            .0
            .iter()
            .filter(|(_, k)| **k > 0)
            .map(|(c, k)| part(c, *k))
            .collect();
        let den: Vec<String> = self
            .0
            .iter()
            .filter(|(_, k)| **k < 0)
            .map(|(c, k)| part(c, -*k))
            .collect();
        let num = if num.is_empty() {
            "1".to_string()
        } else {
            num.join("·")
        };
        if den.is_empty() {
            f.write_str(&num)
        } else {
            write!(f, "{num}/{}", den.join("·"))
        }
    }
}

/// An inferred unit and the span of the literal that introduced it (for "both spans").
#[derive(Clone, Debug)]
struct Typed {
    unit: Unit,
    origin: Option<Span>,
}

impl Typed {
    fn count() -> Typed {
        Typed {
            unit: Unit::default(),
            origin: None,
        }
    }
}

/// The unit checker over one spec.
pub(crate) struct Units<'s> {
    spec: &'s Spec,
    memo: HashMap<&'s str, Typed>,
    visiting: HashSet<&'s str>,
    pub(crate) diags: Vec<Diagnostic>,
}

impl<'s> Units<'s> {
    pub(crate) fn new(spec: &'s Spec) -> Self {
        Units {
            spec,
            memo: HashMap::new(),
            visiting: HashSet::new(),
            diags: Vec::new(),
        }
    }

    /// Every unit check that needs no derived value: quantities, clock rates, operating points,
    /// region declarations and offset views.
    pub(crate) fn check_declarations(&mut self) {
        let spec = self.spec;
        for q in &spec.quantities {
            self.quantity(&q.name.value);
        }
        for c in &spec.clocks {
            if let ClockKind::Rate { rate, per } = &c.kind
                && let Some(t) = self.infer(rate)
            {
                let want = Unit::clock(&c.name.value).div(&Unit::clock(&per.value));
                if !t.unit.is_count() && t.unit != want {
                    let mut d = Diagnostic::error(
                        Code::UnitMismatch,
                        rate.span,
                        format!(
                            "the rate of clock `{}` is in `{}`, but `{} per {}` needs `{want}`",
                            c.name.value, t.unit, c.name.value, per.value
                        ),
                    )
                    .label(format!("in `{}`", t.unit));
                    d = self.origin_label(d, &t, rate.span);
                    self.diags.push(d.help(format!(
                        "a rate counts ticks of `{}` per tick of `{}`: give it the unit `{want}` (e.g. `2 {want}`) or none",
                        c.name.value, per.value
                    )));
                }
            }
        }
        for op in &spec.operating_points {
            for o in &op.overrides {
                let (Some(t), Some(base)) = (self.infer(&o.expr), self.quantity(&o.name.value))
                else {
                    continue;
                };
                if !t.unit.is_count() && !base.unit.is_count() && t.unit != base.unit {
                    let mut d = Diagnostic::error(
                        Code::UnitMismatch,
                        o.expr.span,
                        format!(
                            "operating point `{}` sets `{}` in `{}`, but `{}` is in `{}`",
                            op.name.value, o.name.value, t.unit, o.name.value, base.unit
                        ),
                    )
                    .label(format!("in `{}`", t.unit));
                    if let Some(b) = base.origin {
                        d = d.with_secondary(
                            b,
                            format!("`{}` is in `{}` here", o.name.value, base.unit),
                        );
                    }
                    let help = self.conversion(&t.unit, &base.unit, &o.expr);
                    self.diags.push(d.help(help));
                }
            }
        }
        for r in &spec.regions {
            self.region(r);
        }
        for c in &spec.callables {
            for a in &c.inputs {
                if let (ArgSource::Region(_), Some(v)) = (&a.source, &a.view) {
                    let what = format!("the view of input `{}`", a.name.value);
                    let axis = &v.axis;
                    self.expect(&v.len, &axis.value, axis.span, &format!("`len` of {what}"));
                    self.expect(
                        &v.at.modulus,
                        &axis.value,
                        axis.span,
                        &format!("the modulus of {what}"),
                    );
                    if let Some(s) = &v.at.shift {
                        self.expect(s, &axis.value, axis.span, &format!("the shift of {what}"));
                    }
                }
            }
        }
    }

    /// The admission bounds of `c` against `clock`, the clock its variable counts.
    pub(crate) fn check_admission(&mut self, c: &Callable, clock: &str, clock_span: Span) {
        if let Some(p) = &c.admit {
            for (op, e) in &p.clauses {
                let what = format!(
                    "the admission bound `{} {} {e}` of callable `{}`",
                    p.var.value,
                    op.symbol(),
                    c.name.value
                );
                self.expect(e, clock, clock_span, &what);
            }
        }
    }

    fn region(&mut self, r: &'s Region) {
        let axes = region_axes(self.spec, r);
        let mut growing: Option<(&str, Span)> = None;
        for g in &r.growth {
            let a = g.axis.value.as_str();
            let at = format!("axis `{a}` of region `{}`", r.name.value);
            match &g.growth {
                Growth::Fixed(e) => self.expect(e, a, g.axis.span, &format!("the extent of {at}")),
                Growth::Grows { from, by, call } => {
                    growing = Some((a, g.axis.span));
                    self.expect(from, a, g.axis.span, &format!("`from` of {at}"));
                    self.expect(by, a, g.axis.span, &format!("`by` of {at}"));
                    // The advances before the steady stride are counts of the same axis.
                    if let Some(f) = &g.advances.first {
                        self.expect(f, a, g.axis.span, &format!("`first` of {at}"));
                    }
                    for (i, e) in g.advances.schedule.iter().enumerate() {
                        self.expect(e, a, g.axis.span, &format!("`schedule[{i}]` of {at}"));
                    }
                    if let Some(c) = call {
                        self.expect(c, a, g.axis.span, &format!("`call` of {at}"));
                    }
                }
            }
        }
        if let Some((a, span)) = growing {
            let of = format!("region `{}` (its growing axis is `{a}`)", r.name.value);
            match &r.retention.value {
                Retention::Pinned | Retention::Unbounded => {}
                Retention::Ring { capacity } => {
                    self.expect(capacity, a, span, &format!("the ring of {of}"))
                }
                Retention::Window { size, .. } => {
                    self.expect(size, a, span, &format!("the window of {of}"))
                }
                Retention::PromptHistory {
                    prompt,
                    retained,
                    keep,
                    ..
                } => {
                    self.expect(prompt, a, span, &format!("`prompt` of {of}"));
                    self.expect(retained, a, span, &format!("`retained` of {of}"));
                    if let Some(k) = keep {
                        self.expect(&k.head, a, span, &format!("`keep.head` of {of}"));
                        self.expect(&k.tail, a, span, &format!("`keep.tail` of {of}"));
                    }
                }
            }
            if let Some(e) = &r.envelope {
                self.expect(e, a, span, &format!("the envelope of {of}"));
            }
        }
        for s in &r.stock {
            for (e, a) in s.extents.iter().zip(&axes) {
                let what = format!(
                    "stock constant `{}` of region `{}` along axis `{a}`",
                    s.name.value, r.name.value
                );
                self.expect(e, a, r.clock_span, &what);
            }
        }
    }

    /// The unit of quantity `name` (a count for an unknown name: validate reported it).
    fn quantity(&mut self, name: &str) -> Option<Typed> {
        if let Some(t) = self.memo.get(name) {
            return Some(t.clone());
        }
        let spec = self.spec;
        let q = spec.quantities.iter().find(|q| q.name.value == name)?;
        if !self.visiting.insert(q.name.value.as_str()) {
            return Some(Typed::count());
        }
        let t = self.infer(&q.expr);
        self.visiting.remove(q.name.value.as_str());
        let t = t.unwrap_or_else(Typed::count);
        self.memo.insert(q.name.value.as_str(), t.clone());
        Some(t)
    }

    /// The unit of `e`; `None` when a mismatch inside it was reported.
    fn infer(&mut self, e: &Expr) -> Option<Typed> {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::Extent(_) => Some(Typed::count()),
            ExprKind::Measure(_, u) => {
                let num = self.unit_clock(&u.num)?;
                let unit = match &u.den {
                    None => num,
                    Some(d) => num.div(&self.unit_clock(d)?),
                };
                Some(Typed {
                    unit,
                    origin: Some(e.span),
                })
            }
            ExprKind::Name(n) => Some(self.quantity(n).unwrap_or_else(Typed::count)),
            ExprKind::Neg(x) => self.infer(x),
            ExprKind::Binary(op, a, b) => {
                let (ta, tb) = (self.infer(a), self.infer(b));
                let (ta, tb) = (ta?, tb?);
                match op {
                    BinOp::Add | BinOp::Sub => self.same(op.symbol(), a, ta, b, tb),
                    BinOp::Mul => Some(product(&ta, &tb, Unit::mul)),
                    BinOp::Div => Some(product(&ta, &tb, Unit::div)),
                }
            }
            ExprKind::Call(f, args) => {
                let (Some(a), Some(b)) = (args.first(), args.get(1)) else {
                    return Some(Typed::count());
                };
                let (ta, tb) = (self.infer(a), self.infer(b));
                let (ta, tb) = (ta?, tb?);
                match f {
                    Func::Min | Func::Max => self.same(f.name(), a, ta, b, tb),
                    Func::CeilDiv | Func::FloorDiv => Some(product(&ta, &tb, Unit::div)),
                }
            }
        }
    }

    /// A clock named as a unit: it must be a declared scalar clock.
    fn unit_clock(&mut self, c: &Ident) -> Option<Unit> {
        match self.spec.clock(&c.value).map(|k| &k.kind) {
            Some(ClockKind::Product(f)) => {
                let factors: Vec<&str> = f.iter().map(|i| i.value.as_str()).collect();
                self.diags.push(
                    Diagnostic::error(
                        Code::UnitMismatch,
                        c.span,
                        format!("the product clock `{}` is not a unit", c.value),
                    )
                    .label("a product clock")
                    .help(format!(
                        "a unit is one scalar clock: use one of its factors ({})",
                        factors.join(", ")
                    )),
                );
                None
            }
            Some(_) => Some(Unit::clock(&c.value)),
            None => {
                let names: Vec<&str> = self
                    .spec
                    .clocks
                    .iter()
                    .map(|k| k.name.value.as_str())
                    .collect();
                let mut d = Diagnostic::error(
                    Code::Undefined,
                    c.span,
                    format!("unit `{}` is not a declared clock", c.value),
                )
                .label("a name after a number is its unit");
                d = match crate::front::lower::suggest(&c.value, &names) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!(
                        "units are clocks ({}); to multiply by a quantity write `*`, e.g. `2 * {}`",
                        names.join(", "),
                        c.value
                    )),
                };
                self.diags.push(d);
                None
            }
        }
    }

    /// `a OP b` for an operator that needs equal units (`+ - min max`).
    fn same(&mut self, op: &str, a: &Expr, ta: Typed, b: &Expr, tb: Typed) -> Option<Typed> {
        if tb.unit.is_count() || ta.unit == tb.unit {
            return Some(ta);
        }
        if ta.unit.is_count() {
            return Some(tb);
        }
        let mut d = Diagnostic::error(
            Code::UnitMismatch,
            b.span,
            format!("`{op}` combines `{}` with `{}`", ta.unit, tb.unit),
        )
        .label(format!("in `{}`", tb.unit))
        .with_secondary(a.span, format!("in `{}`", ta.unit));
        d = self.origin_label(d, &tb, b.span);
        d = self.origin_label(d, &ta, a.span);
        let help = self.conversion(&tb.unit, &ta.unit, b);
        self.diags.push(d.help(help));
        None
    }

    /// Check that `e` is in `clock` (or a count); `clock_span` is where `clock` was declared for
    /// this position, `what` names the position.
    fn expect(&mut self, e: &Expr, clock: &str, clock_span: Span, what: &str) {
        let Some(t) = self.infer(e) else { return };
        let want = Unit::clock(clock);
        if t.unit.is_count() || t.unit == want {
            return;
        }
        let mut d = Diagnostic::error(
            Code::UnitMismatch,
            e.span,
            format!("{what} is in `{}`, but must be in `{clock}`", t.unit),
        )
        .label(format!("in `{}`, expected `{clock}`", t.unit));
        d = self.origin_label(d, &t, e.span);
        d = d.with_secondary(clock_span, format!("`{clock}` expected because of this"));
        let help = self.conversion(&t.unit, &want, e);
        self.diags.push(d.help(help));
    }

    /// Point at where `t`'s unit was written, when that is not the expression itself.
    fn origin_label(&self, d: Diagnostic, t: &Typed, at: Span) -> Diagnostic {
        match t.origin {
            Some(o) if o != at && !(o.start >= at.start && o.end <= at.end) => {
                d.with_secondary(o, format!("`{}` comes from here", t.unit))
            }
            _ => d,
        }
    }
}

fn product(a: &Typed, b: &Typed, op: fn(&Unit, &Unit) -> Unit) -> Typed {
    Typed {
        unit: op(&a.unit, &b.unit),
        origin: a.origin.or(b.origin),
    }
}

/// The clock axes of a region, product clocks expanded.
pub(crate) fn region_axes(spec: &Spec, r: &Region) -> Vec<String> {
    let mut out = Vec::new();
    for c in &r.clock {
        match spec.clock(&c.value).map(|k| &k.kind) {
            Some(ClockKind::Product(f)) => out.extend(f.iter().map(|i| i.value.clone())),
            _ => out.push(c.value.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_algebra() {
        let (t, f) = (Unit::clock("token"), Unit::clock("frame"));
        let rate = f.div(&t);
        assert_eq!(rate.to_string(), "frame/token");
        assert_eq!(t.mul(&rate), f);
        assert!(f.div(&f).is_count());
        assert_eq!(Unit::default().div(&f).to_string(), "1/frame");
        assert_eq!(f.mul(&f).to_string(), "frame^2");
        assert_eq!(f.as_clock(), Some("frame"));
        assert_eq!(rate.as_clock(), None);
    }
}
