//! One region: attended and envelope extents, catalog and K_r (eq. 7), bytes, storage order,
//! stock ratios ρ (eq. 3), and the kept slices of a prompt + history retention (eq. 2).

use super::trajectory::Trajectory;
use super::types::*;
use super::{Deriver, MAX_LISTED_EXTENTS, beta, merge_inputs, mul_all, paren, paren_str};
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl<'s> Deriver<'s> {
    pub(super) fn axes(&self, r: &Region) -> Vec<String> {
        let mut out = Vec::new();
        for c in &r.clock {
            match self.spec.clock(&c.value).map(|k| &k.kind) {
                Some(ClockKind::Product(f)) => out.extend(f.iter().map(|i| i.value.clone())),
                _ => out.push(c.value.clone()),
            }
        }
        out
    }

    /// The largest value `e` takes in the query phases of the callables that read or write
    /// `r` (0 when none overrides anything it uses).
    fn phase_max(&self, r: &Region, e: &Expr) -> u64 {
        let name = &r.name.value;
        self.spec
            .callables
            .iter()
            .filter(|c| {
                c.read_regions().iter().any(|x| &x.value == name)
                    || c.writes.iter().any(|x| &x.value == name)
            })
            .filter_map(|c| self.phases.get(&c.name.value))
            .flatten()
            .filter_map(|p| crate::expr::eval(e, &|n: &str| p.env.get(n).copied()).ok())
            .filter_map(|v| u64::try_from(v).ok())
            .max()
            .unwrap_or(0)
    }

    /// A fixed extent's derivation: the expression, or, where a query phase presents more than
    /// the base value, that phase's value.
    fn fixed_derivation(&self, v: u64, e: &Expr) -> Derivation {
        let base = crate::expr::eval(e, &|n: &str| self.env.get(n).copied()).ok();
        if base.and_then(|b| u64::try_from(b).ok()) == Some(v) {
            return self.derivation(v, e.to_string(), &[e]);
        }
        Derivation {
            value: v,
            formula: format!("{v} (`{e}` in its largest query phase)"),
            inputs: Vec::new(),
        }
    }

    pub(super) fn region(&mut self, r: &Region) -> Option<DerivedRegion> {
        let axes = self.axes(r);
        let name = &r.name.value;
        // Per-axis values, in clock order.
        let mut fixed: Vec<Option<(u64, &Expr)>> = Vec::new();
        let mut grow: Option<(usize, u64, u64, u64, &AxisGrowth)> = None; // axis, from, by, call
        let mut prefix: Vec<u64> = Vec::new();
        let mut ok = true;
        for (i, a) in axes.iter().enumerate() {
            let Some(g) = r.growth.iter().find(|g| &g.axis.value == a) else {
                fixed.push(None);
                ok = false;
                continue;
            };
            match &g.growth {
                Growth::Fixed(e) => {
                    // An operating point may set a fixed extent to 0 (the region is off there).
                    let min = if self.op.is_some() { 0 } else { 1 };
                    let v =
                        self.eval_at_least(e, min, &format!("the extent of `{name}` along `{a}`"));
                    // A query phase of a callable touching the region may present more: the
                    // storage holds the largest.
                    let v = v.map(|v| v.max(self.phase_max(r, e)));
                    fixed.push(v.map(|v| (v, e)));
                    ok &= v.is_some();
                }
                Growth::Grows { from, by, call } => {
                    fixed.push(None);
                    let f = self.eval_at_least(from, 0, &format!("the start extent of `{name}`"));
                    // After leading advances the steady stride may be 0 (the axis stops).
                    let min = if g.advances.is_empty() { 1 } else { 0 };
                    let s = self.eval_at_least(by, min, &format!("the stride of `{name}`"));
                    let c = match call {
                        Some(c) => {
                            self.eval_at_least(c, 0, &format!("the per-call frames of `{name}`"))
                        }
                        None => Some(0),
                    };
                    for e in g.advances.all() {
                        match self.eval_at_least(e, 0, &format!("an advance of `{name}`")) {
                            Some(v) => prefix.push(v),
                            None => ok = false,
                        }
                    }
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
                    let d = self.fixed_derivation(v, e);
                    (d.clone(), d, true, None)
                }
                (Retention::Unbounded, Some((_, from, _, call, g))) => {
                    let Growth::Grows { from: fe, .. } = &g.growth else {
                        return None;
                    };
                    let lo = self.derivation(from, fe.to_string(), &[fe]);
                    // Nothing bounds the axis: the storage one session is sized for is the
                    // declared envelope, else the first call's frames.
                    let hi = match &r.envelope {
                        Some(env) => {
                            let v =
                                self.eval_at_least(env, 1, &format!("the envelope of `{name}`"))?;
                            let Some(a) = v.checked_sub(call).filter(|a| *a >= from) else {
                                self.push(
                                    Diagnostic::error(
                                        Code::RetentionExceedsEnvelope,
                                        env.span,
                                        format!("the envelope of `{name}` ({v}) cannot hold its first call ({from} + {call} frames)"),
                                    )
                                    .label(format!("envelope {v}"))
                                    .help(format!("raise `envelope:` to at least {}", from.saturating_add(call))),
                                );
                                return None;
                            };
                            let mut d =
                                self.derivation(a, format!("{} - call {call}", paren(env)), &[env]);
                            if call == 0 {
                                d.formula = env.to_string();
                            }
                            d
                        }
                        None => lo.clone(),
                    };
                    (hi, lo, false, None)
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
        // An operating point may switch the region off (`disable:`): extent 0, no bytes.
        let disabled = self.disabled(name);
        let (a_max, a_min, pinned) = if disabled {
            let zero = Derivation {
                value: 0,
                formula: format!("0 (disabled at operating point `{}`)", self.op_name()),
                inputs: Vec::new(),
            };
            (zero.clone(), zero, true)
        } else {
            (a_max, a_min, pinned)
        };
        let unbounded = matches!(r.retention.value, Retention::Unbounded) && !disabled;
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
        let trajectory = match grow {
            Some((_, _, s, _, _)) if !pinned => Some(Trajectory {
                from: a_min.value,
                prefix: prefix.clone(),
                by: s,
                cap: a_max.value,
            }),
            _ => None,
        };
        let (stride, width) = match (grow, &trajectory) {
            (Some((_, _, s, _, g)), Some(t)) => {
                let Growth::Grows { by, .. } = &g.growth else {
                    return None;
                };
                let sd = self.derivation(s, by.to_string(), &[by]);
                let k = t.width();
                let formula = if prefix.is_empty() {
                    format!("ceil_div(W_r {window_v}, {}) + 1", by)
                } else {
                    let list: Vec<String> = prefix.iter().map(u64::to_string).collect();
                    format!(
                        "distinct extents of {} + [{}] then + {} per call, up to {}",
                        a_min.value,
                        list.join(", "),
                        by,
                        a_max.value
                    )
                };
                let wd = Derivation {
                    value: k,
                    formula,
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
        let catalog = match &trajectory {
            Some(t) => t.catalog(MAX_LISTED_EXTENTS).unwrap_or_default(),
            None => vec![a_max.value],
        };
        // Envelope per axis. A region that lives one iteration of its writers' loop holds one
        // slice along that loop's clock: every iteration reuses it.
        let iteration = self.spec.iteration_axis(r);
        let mut env_axes: Vec<Derivation> = Vec::new();
        for (i, a) in axes.iter().enumerate() {
            if disabled && i == attended_axis {
                env_axes.push(a_max.clone());
                continue;
            }
            if iteration == Some(a.as_str())
                && let Some((v, e)) = fixed.get(i).copied().flatten()
            {
                let all = self.fixed_derivation(v, e);
                env_axes.push(Derivation {
                    value: 1,
                    formula: format!("one of {} (lifetime `iteration`)", all.formula),
                    inputs: all.inputs,
                });
                continue;
            }
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
                    (
                        Some(ce),
                        Retention::PromptHistory { .. }
                        | Retention::Window { .. }
                        | Retention::Unbounded,
                    ) => {
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
                env_axes.push(self.fixed_derivation(v, e));
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
        let dtype = self.region_dtype(r);
        let beta = beta(dtype);
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
        // A disabled region reserves nothing to compare with.
        let stock_decls: &[StockConstant] = if disabled { &[] } else { &r.stock };
        for s in stock_decls {
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
            dtype,
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
                schedule: if pinned { Vec::new() } else { prefix },
                unbounded,
            },
            disabled,
            stock,
        })
    }

    pub(super) fn constant(&mut self, c: &Constant) -> Option<DerivedConstant> {
        let mut shape = Vec::new();
        for (j, e) in c.shape.iter().enumerate() {
            shape.push(self.eval_at_least(
                e,
                1,
                &format!("dimension {j} of constant `{}`", c.name.value),
            )?);
        }
        let dtype = self.constant_dtype(c);
        let Some(bytes) = mul_all(shape.iter().copied()).and_then(|p| p.checked_mul(beta(dtype)))
        else {
            self.overflow(c.span, "the constant's bytes");
            return None;
        };
        Some(DerivedConstant {
            name: c.name.value.clone(),
            dtype,
            placement: c.placement.value,
            shape,
            bytes,
        })
    }
}
