//! Region declarations: clock axes, growth per axis, retention against growth, layout, stock
//! constants.

use super::{V, undefined};
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl V<'_> {
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

    pub(super) fn region(&mut self, r: &Region) {
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
            Retention::Unbounded => {
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
        if r.lifetime.value == Lifetime::Iteration && axes_ok {
            self.iteration(r, &axes);
        }
    }

    /// `lifetime: iteration`: something writes the region, every callable that does declares
    /// the same inner loop (`loop:`), that loop's clock is an axis of the region, and the
    /// region's extent along it is fixed. The storage then holds one slice along that axis,
    /// which every iteration reuses.
    fn iteration(&mut self, r: &Region, axes: &[Ident]) {
        let name = &r.name.value;
        let spec = self.spec;
        let mut first: Option<&Ident> = None;
        let mut any = false;
        for c in spec.writers(name) {
            any = true;
            let at = c
                .writes
                .iter()
                .find(|w| &w.value == name)
                .map_or(c.name.span, |w| w.span);
            match (&c.loop_clock, first) {
                (None, _) => self.diags.push(
                    Diagnostic::error(
                        Code::Inconsistent,
                        r.lifetime.span,
                        format!(
                            "`{name}` lives one loop iteration, but callable `{}` writes it and declares no loop",
                            c.name.value
                        ),
                    )
                    .label("lifetime `iteration`")
                    .with_secondary(at, format!("`{}` writes it here", c.name.value))
                    .help(format!(
                        "declare the inner loop of `{}` (`loop: CLOCK`), or give `{name}` lifetime `unit` (one call)",
                        c.name.value
                    )),
                ),
                (Some(l), None) => first = Some(l),
                (Some(l), Some(f)) if l.value != f.value => self.diags.push(
                    Diagnostic::error(
                        Code::Inconsistent,
                        l.span,
                        format!(
                            "`{name}` lives one loop iteration, but its writers loop over `{}` and `{}`",
                            f.value, l.value
                        ),
                    )
                    .label(format!("`{}` loops over `{}`", c.name.value, l.value))
                    .with_secondary(f.span, format!("another writer loops over `{}`", f.value))
                    .help(format!(
                        "every callable that writes `{name}` must loop over the same clock, or give it lifetime `unit`"
                    )),
                ),
                (Some(_), Some(_)) => {}
            }
        }
        if !any {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    r.lifetime.span,
                    format!("`{name}` lives one loop iteration, but no callable writes it"),
                )
                .label("lifetime `iteration`")
                .help(format!(
                    "list `{name}` under `writes:` of the looping callable that fills it, or give it another lifetime"
                )),
            );
            return;
        }
        let Some(l) = first else {
            return;
        };
        if !axes.iter().any(|a| a.value == l.value) {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    r.lifetime.span,
                    format!(
                        "`{name}` lives one iteration of `{}`, which is not an axis of its clock",
                        l.value
                    ),
                )
                .label("lifetime `iteration`")
                .with_secondary(l.span, "the writer's loop")
                .help(format!(
                    "give `{name}` a clock with the loop's axis (e.g. a product clock `[{}, ...]`): one iteration writes one slice along it",
                    l.value
                )),
            );
        } else if let Some(g) = r
            .growth
            .iter()
            .find(|g| g.axis.value == l.value && matches!(g.growth, Growth::Grows { .. }))
        {
            self.diags.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    g.span,
                    format!(
                        "`{name}` lives one iteration of `{}`, but grows along it",
                        l.value
                    ),
                )
                .label(format!("grows along `{}`", l.value))
                .with_secondary(r.lifetime.span, "lifetime `iteration`")
                .help(format!(
                    "give `{}` a fixed extent (the iterations a call runs): the storage holds one of them",
                    l.value
                )),
            );
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
}
