//! Callable declarations: inputs and their sources, reads, writes, the loop clock, the
//! admission variable.

use super::{V, undefined};
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl V<'_> {
    pub(super) fn callable(&mut self, c: &Callable) {
        let regions = self.region_names();
        let constants: Vec<&str> = self
            .spec
            .constants
            .iter()
            .map(|k| k.name.value.as_str())
            .collect();
        let reads: Vec<&str> = c.read_regions().iter().map(|r| r.value.as_str()).collect();
        if let Some(e) = c.batch.as_ref().and_then(|b| b.row_copies.as_ref()) {
            self.expr_names(e, false, &[]);
        }
        for a in &c.inputs {
            if let Some(v) = &a.view {
                let at = &v.at;
                for e in [
                    Some(&v.len),
                    Some(&at.modulus),
                    at.scale.as_ref(),
                    at.shift.as_ref(),
                ]
                .into_iter()
                .flatten()
                {
                    self.expr_names(e, false, &[]);
                }
            }
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
