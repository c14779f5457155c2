//! The lint checks other than units: impossible retention contracts, aliasing of host
//! constants, admission predicates that admit nothing, offset views out of range.

use super::units::{Units, region_axes};
use crate::derive::types::Derived;
use crate::diag::{Code, Diagnostic};
use crate::expr::{self, Env};
use crate::ir::*;

/// Checks on the IR alone.
pub(super) fn declarations(spec: &Spec) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for r in &spec.regions {
        if let Retention::Ring { capacity } = &r.retention.value {
            for g in &r.growth {
                if let Growth::Grows { call: Some(c), .. } = &g.growth {
                    out.push(
                        Diagnostic::error(
                            Code::RingTooSmall,
                            c.span,
                            format!(
                                "region `{}` is a ring but declares `call:` frames",
                                r.name.value
                            ),
                        )
                        .label("`call:` frames live past the retained extent")
                        .with_secondary(capacity.span, "the ring's capacity is all the storage it has")
                        .help("a ring writes each call's frames into its fixed capacity, so nothing lives beyond it: remove `call:`, or use a window or prompt + history retention with an `envelope:` that holds the call's frames"),
                    );
                }
            }
        }
    }
    for c in &spec.callables {
        for a in &c.inputs {
            match &a.source {
                ArgSource::Constant(k) => {
                    if let (Some(al), Some(kc)) = (&a.alias, spec.constant(&k.value))
                        && al.value
                        && kc.placement.value == Placement::Host
                    {
                        out.push(
                            Diagnostic::error(
                                Code::AliasNonContract,
                                al.span,
                                format!(
                                    "input `{}` cannot be aliased: constant `{}` lives in host memory",
                                    a.name.value, k.value
                                ),
                            )
                            .label("aliasing needs a device address")
                            .with_secondary(kc.placement.span, "placed on the host here")
                            .help("a captured graph can only alias device memory: place the constant on the device (`placement: device`) or remove `alias: true` so it is staged"),
                        );
                    }
                }
                ArgSource::Region(name) => {
                    if let (Some(v), Some(r)) = (&a.view, spec.region(&name.value)) {
                        out.extend(view_declaration(spec, c, a, v, r));
                    }
                }
                ArgSource::Tensor { .. } => {}
            }
        }
    }
    out
}

/// An offset view names an axis of its region and a fresh call variable.
fn view_declaration(
    spec: &Spec,
    c: &Callable,
    a: &TensorArg,
    v: &View,
    r: &Region,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let axes = region_axes(spec, r);
    if !axes.contains(&v.axis.value) {
        out.push(
            Diagnostic::error(
                Code::View,
                v.axis.span,
                format!(
                    "`{}` is not an axis of region `{}`",
                    v.axis.value, r.name.value
                ),
            )
            .label("not a clock axis of the region")
            .with_secondary(r.clock_span, "the region's clock")
            .help(format!(
                "the view of input `{}` selects slots of one of the region's axes: {}",
                a.name.value,
                axes.join(", ")
            )),
        );
    }
    if spec.quantity(&v.at.var.value).is_some() {
        out.push(
            Diagnostic::error(
                Code::View,
                v.at.var.span,
                format!(
                    "`{}` is a quantity, not the call index of `{}`",
                    v.at.var.value, c.name.value
                ),
            )
            .label("the offset must move with the call index")
            .help("name the call index with a fresh name, e.g. `at: t mod 4`"),
        );
    }
    out
}

/// Quantities of one operating point as an expression environment.
struct Values<'d>(&'d Derived);

impl Env for Values<'_> {
    fn name(&self, name: &str) -> Option<i64> {
        self.0.quantity(name)
    }
}

/// Checks on the values of one operating point.
pub(super) fn derived(spec: &Spec, d: &Derived) -> Vec<Diagnostic> {
    let env = Values(d);
    let at = if d.operating_point == "base" {
        String::new()
    } else {
        format!(" at operating point `{}`", d.operating_point)
    };
    let val = |e: &Expr| expr::eval(e, &env).ok();
    let mut out = Vec::new();
    for r in &spec.regions {
        let Some((axis, by, call, advances)) = r.growth.iter().find_map(|g| match &g.growth {
            Growth::Grows { by, call, .. } => Some((&g.axis, by, call.as_ref(), &g.advances)),
            Growth::Fixed(_) => None,
        }) else {
            continue;
        };
        let Some(s) = val(by) else { continue };
        match &r.retention.value {
            Retention::Window { size, .. } => {
                // A writer that takes caller data receives each call's new frames from the
                // caller and keeps only the window's tail as history for the next call (the
                // vocoder's mel and source histories): the frames beyond the window are
                // attended by the call that writes them, so a stride beyond the window drops
                // nothing unattended.
                let fed_by_caller = spec.callables.iter().any(|c| {
                    c.writes.iter().any(|w| w.value == r.name.value)
                        && c.inputs
                            .iter()
                            .any(|a| matches!(a.source, ArgSource::Tensor { .. }))
                });
                if !fed_by_caller
                    && let Some(w) = val(size)
                    && s > w
                {
                    out.push(
                        Diagnostic::error(
                            Code::StrideExceedsWindow,
                            by.span,
                            format!(
                                "region `{}` advances {s} `{}` ticks per call, more than its window of {w}{at}",
                                r.name.value, axis.value
                            ),
                        )
                        .label(format!("stride {s}"))
                        .with_secondary(size.span, format!("window {w}"))
                        .help(format!(
                            "{} ticks of every call would leave the window before any call attends them: make the window at least the stride ({s}), or advance by at most {w} per call",
                            s.saturating_sub(w)
                        )),
                    );
                }
            }
            Retention::Ring { capacity } => {
                let cap = val(capacity);
                // The largest advance of the trajectory (`first`, `schedule`, then `by`): any
                // one call that writes more than the ring holds overwrites its own frames.
                let largest = advances
                    .all()
                    .chain([by])
                    .filter_map(|e| val(e).map(|v| (v, e)))
                    .max_by_key(|(v, _)| *v)
                    .map_or(by, |(_, e)| e);
                for (what, e) in [("advances", Some(largest)), ("presents", call)] {
                    let (Some(e), Some(cap)) = (e, cap) else {
                        continue;
                    };
                    if let Some(n) = val(e)
                        && n > cap
                    {
                        out.push(
                            Diagnostic::error(
                                Code::RingTooSmall,
                                e.span,
                                format!(
                                    "one call {what} {n} `{}` ticks, but the ring of `{}` holds {cap}{at}",
                                    axis.value, r.name.value
                                ),
                            )
                            .label(format!("{n} per call"))
                            .with_secondary(capacity.span, format!("ring of {cap}"))
                            .help(format!(
                                "a call would overwrite its own frames: make the ring at least {n}, or write at most {cap} per call"
                            )),
                        );
                    }
                }
            }
            Retention::Pinned | Retention::PromptHistory { .. } | Retention::Unbounded => {}
        }
    }
    for c in &spec.callables {
        if let Some(p) = &c.admit {
            out.extend(admission(p, c, &env, &at));
            if let Some((clock, span)) = admission_clock(spec, c, d) {
                let mut u = Units::new(spec);
                u.check_admission(c, &clock, span);
                out.extend(u.diags);
            }
        }
        for a in &c.inputs {
            if let (ArgSource::Region(name), Some(v)) = (&a.source, &a.view)
                && let Some(r) = spec.region(&name.value)
            {
                out.extend(view_range(a, v, r, &env, &at));
            }
        }
    }
    out
}

/// An admission predicate must admit at least one size.
fn admission(p: &Predicate, c: &Callable, env: &Values<'_>, at: &str) -> Option<Diagnostic> {
    let adm = expr::admitted(p, env).ok()?;
    let text = p
        .clauses
        .iter()
        .map(|(op, e)| format!("{} {} {e}", p.var.value, op.symbol()))
        .collect::<Vec<_>>()
        .join(" and ");
    let hi = adm.hi?;
    let (message, label) = if hi < 1 {
        (
            format!(
                "admission predicate `{text}` of callable `{}` admits no call{at}: its largest size is {hi}",
                c.name.value
            ),
            format!("largest admitted {} is {hi}", p.var.value),
        )
    } else if adm.is_empty() {
        (
            format!(
                "admission predicate `{text}` of callable `{}` admits no call{at}: it needs {} ≥ {} and {} ≤ {hi}",
                c.name.value, p.var.value, adm.lo, p.var.value
            ),
            "these bounds exclude each other".to_string(),
        )
    } else {
        return None;
    };
    Some(
        Diagnostic::error(Code::EmptyAdmission, p.span, message)
            .label(label)
            .help(format!(
                "`{}` counts the ticks one call presents (at least 1): bound it from above by a positive size, e.g. `admit: {} <= f_chunk`, and keep lower bounds below the upper one",
                p.var.value, p.var.value
            )),
    )
}

/// The clock an admission variable counts: the finest growing clock among the regions the
/// callable reads or writes whose extent is not pinned (as `derive` converts the bound), with the
/// span of that region's growing axis.
fn admission_clock(spec: &Spec, c: &Callable, d: &Derived) -> Option<(String, Span)> {
    let mut best: Option<(String, Span, u64)> = None;
    for name in c.read_regions().into_iter().chain(&c.writes) {
        let Some(r) = spec.region(&name.value) else {
            continue;
        };
        // `retention: none` is not pinned: its extent grows like a window's before it fills.
        let pinned = matches!(
            r.retention.value,
            Retention::Ring { .. } | Retention::Window { steady: true, .. } | Retention::Pinned
        );
        if pinned {
            continue;
        }
        let Some(g) = r
            .growth
            .iter()
            .find(|g| matches!(g.growth, Growth::Grows { .. }))
        else {
            continue;
        };
        let Some(k) = d.clocks.iter().find(|k| k.name == g.axis.value) else {
            continue;
        };
        if best.as_ref().is_none_or(|(_, _, p)| k.per_base > *p) {
            best = Some((g.axis.value.clone(), g.axis.span, k.per_base));
        }
    }
    best.map(|(c, s, _)| (c, s))
}

/// An offset view stays inside its axis (largest offset + `len` ≤ extent), `M ≥ 1`, `K ≥ 1`,
/// `len ≥ 1`;
/// on a ring, it should repeat with the ring's write position (warning).
fn view_range(
    a: &TensorArg,
    v: &View,
    r: &Region,
    env: &Values<'_>,
    at: &str,
) -> Option<Diagnostic> {
    let m = expr::eval(&v.at.modulus, env).ok()?;
    let len = expr::eval(&v.len, env).ok()?;
    let k = match &v.at.scale {
        Some(e) => expr::eval(e, env).ok()?,
        None => 1,
    };
    let bad = |span: Span, message: String, label: String, help: String| {
        Some(
            Diagnostic::error(Code::View, span, message)
                .label(label)
                .help(help),
        )
    };
    if m < 1 {
        return bad(
            v.at.modulus.span,
            format!(
                "the offset of input `{}` is taken modulo {m}{at}",
                a.name.value
            ),
            "the modulus must be at least 1".into(),
            "`at: t mod M` takes M positions 0..M: M is the ring's period, e.g. `t mod 4`".into(),
        );
    }
    if k < 1 {
        return bad(
            v.at.scale.as_ref().map_or(v.at.span, |e| e.span),
            format!(
                "the offset of input `{}` moves {k} slots per call{at}",
                a.name.value
            ),
            "must be at least 1".into(),
            "`K * t mod M` moves the offset K slots per call, K ≥ 1 (a fixed slot needs no view: read the region)".into(),
        );
    }
    if len < 1 {
        return bad(
            v.len.span,
            format!(
                "the view of input `{}` is {len} slots long{at}",
                a.name.value
            ),
            "must be at least 1".into(),
            "`len:` is how many slots of the axis the call reads, at least 1".into(),
        );
    }
    let g = r.growth.iter().find(|g| g.axis.value == v.axis.value)?;
    let ring = matches!(
        (&g.growth, &r.retention.value),
        (Growth::Grows { .. }, Retention::Ring { .. })
    );
    let (extent, span) = match (&g.growth, &r.retention.value) {
        (Growth::Fixed(e), _) => (expr::eval(e, env).ok()?, e.span),
        (Growth::Grows { .. }, Retention::Ring { capacity }) => {
            (expr::eval(capacity, env).ok()?, capacity.span)
        }
        (Growth::Grows { .. }, Retention::Window { size, .. }) => {
            (expr::eval(size, env).ok()?, size.span)
        }
        _ => return None,
    };
    // The offsets (K·t + S) mod M are S mod g + multiples of g, g = gcd(K, M): the largest is
    // M − g + (S mod g).
    let shift = match &v.at.shift {
        Some(e) => expr::eval(e, env).ok()?,
        None => 0,
    };
    let step = gcd(m, k);
    let largest = (m - step).saturating_add(shift.rem_euclid(step));
    let last = largest.saturating_add(len);
    if last > extent {
        return bad(
            v.span,
            format!(
                "the view of input `{}` reaches slot {} of axis `{}`, which holds {extent}{at}",
                a.name.value,
                last - 1,
                v.axis.value
            ),
            format!(
                "offsets up to {largest} plus {len} slot{}",
                if len == 1 { "" } else { "s" }
            ),
            format!(
                "a view does not wrap around: keep its largest offset + `len` ≤ {extent} (a smaller modulus or a shorter view), or grow the axis"
            ),
        )
        .map(|d| d.with_secondary(span, format!("axis `{}` holds {extent}", v.axis.value)));
    }
    // The ring's write position advances by the stride each call and repeats every
    // extent / gcd(extent, stride) calls; a view repeating at another period reads the ring at
    // a delay that changes from call to call.
    let stride = match &g.growth {
        Growth::Grows { by, .. } => expr::eval(by, env).ok(),
        Growth::Fixed(_) => None,
    };
    if let (true, Some(s)) = (ring, stride)
        && s > 0
        && extent > 0
    {
        let period = extent / gcd(extent, s);
        let view_period = m / gcd(m, k);
        if period != view_period {
            return Some(
                Diagnostic::warning(
                    Code::Suspicious,
                    v.at.modulus.span,
                    format!(
                        "the view of input `{}` repeats every {view_period} calls, but the ring's write position repeats every {period}{at}",
                        a.name.value
                    ),
                )
                .label(format!("period {view_period}"))
                .with_secondary(span, format!("ring of {extent}, advanced by {s} per call"))
                .help(format!(
                    "a delay line reads its ring at the period it is written, so every call sees the same delay: move the offset by the ring's stride per call, modulo its capacity (`{s} * t mod {extent}`)"
                )),
            );
        }
    }
    None
}

fn gcd(a: i64, b: i64) -> i64 {
    let (mut a, mut b) = (a.unsigned_abs(), b.unsigned_abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    i64::try_from(a).unwrap_or(1).max(1)
}
