//! The catalog of one callable: every signature class — one per query phase, reachable
//! extent tuple and (with `specialize: step`, at step granularity) inner step index, equal
//! signatures counted once — with each argument's dims, dtype and bytes, and M_reserve (eq. 6)
//! summed over exactly those classes. The generated catalog lists the same classes.

use std::collections::{HashMap, HashSet};

use super::types::*;
use super::{ClassEnv, Deriver, MAX_ENUMERATED_CLASSES, beta, mul_all, reach};
use crate::diag::{Code, Diagnostic};
use crate::expr;
use crate::ir::*;

/// Most query configurations one phase may declare (combinations of its values).
const MAX_PHASE_VALUES: u64 = 4096;

/// What makes two classes one: the extent tuple, every argument's dims, the step index.
type SigKey = (Vec<u64>, Vec<Vec<u64>>, Option<u64>);

/// The quantity values one query phase presents its input shapes with.
#[derive(Clone, Debug)]
pub(super) struct PhaseEnv {
    /// `first`, `steady`, `flush`; empty without `phases:`.
    pub name: String,
    /// The name with the values of a several-valued phase (`flush (n_tokens = 5)`).
    pub label: String,
    /// `None` without `phases:` (one phase over every tuple).
    pub kind: Option<PhaseKind>,
    pub env: HashMap<String, i64>,
}

impl<'s> Deriver<'s> {
    /// The callable's effective phases: without `phases:` one, the base values; else `steady`
    /// (declared or the base values), then `first` and `flush` where declared. |Q_o| is their
    /// number.
    pub(super) fn phase_envs(&mut self, c: &'s Callable) -> Option<Vec<PhaseEnv>> {
        if c.phases.is_empty() {
            return Some(vec![PhaseEnv {
                name: String::new(),
                label: String::new(),
                kind: None,
                env: self.env.clone(),
            }]);
        }
        let mut out = Vec::new();
        for kind in PhaseKind::ALL {
            let declared = c.phases.iter().find(|p| p.kind.value == kind);
            if declared.is_none() && kind != PhaseKind::Steady {
                continue;
            }
            let what = format!("phase `{}` of `{}`", kind.name(), c.name.value);
            let overrides = declared.map(|p| p.overrides.as_slice()).unwrap_or_default();
            // Every override's values, then every combination of them.
            let mut sets: Vec<(&Ident, Vec<i64>)> = Vec::new();
            for o in overrides {
                if !self.order.iter().any(|(n, _)| n.value == o.name.value) {
                    self.push(
                        Diagnostic::error(
                            Code::Undefined,
                            o.name.span,
                            format!("{what} overrides `{}`, which is not a declared quantity", o.name.value),
                        )
                        .label("not a quantity")
                        .help("a phase overrides quantities its input shapes use, e.g. `first: {f_query: 100}`"),
                    );
                    return None;
                }
                sets.push((&o.name, self.phase_values(&o.values, &what)?));
            }
            let mut combos: Vec<Vec<(&Ident, i64)>> = vec![Vec::new()];
            for (name, values) in &sets {
                combos = combos
                    .iter()
                    .flat_map(|c| {
                        values.iter().map(move |v| {
                            let mut c = c.clone();
                            c.push((*name, *v));
                            c
                        })
                    })
                    .collect();
                if combos.len() as u64 > MAX_PHASE_VALUES {
                    let span = declared.map_or(c.name.span, |p| p.kind.span);
                    self.push(
                        Diagnostic::error(
                            Code::Inconsistent,
                            span,
                            format!("{what} has more than {MAX_PHASE_VALUES} query configurations"),
                        )
                        .label("too many combinations of values")
                        .help(
                            "a phase is one class per combination of its values; narrow the ranges",
                        ),
                    );
                    return None;
                }
            }
            let several = combos.len() > 1;
            for combo in combos {
                let env = self.env_with(&combo)?;
                let label = if several {
                    let vals: Vec<String> = combo
                        .iter()
                        .map(|(n, v)| format!("{} = {v}", n.value))
                        .collect();
                    format!("{} ({})", kind.name(), vals.join(", "))
                } else {
                    kind.name().to_string()
                };
                out.push(PhaseEnv {
                    name: kind.name().to_string(),
                    label,
                    kind: Some(kind),
                    env,
                });
            }
        }
        Some(out)
    }

    /// The integers a phase override takes.
    fn phase_values(&mut self, values: &PhaseValues, what: &str) -> Option<Vec<i64>> {
        match values {
            PhaseValues::One(e) => Some(vec![self.eval(e)?]),
            PhaseValues::List(l) => l.iter().map(|e| self.eval(e)).collect(),
            PhaseValues::Range { from, to, span } => {
                let (a, b) = (self.eval(from)?, self.eval(to)?);
                let n = i128::from(b) - i128::from(a) + 1;
                if n < 1 || n > i128::from(MAX_PHASE_VALUES) {
                    self.push(
                        Diagnostic::error(
                            Code::Inconsistent,
                            *span,
                            format!("{what}: the range {a} to {b} holds {} values", n.max(0)),
                        )
                        .label(if n < 1 { "empty range" } else { "too many values" })
                        .help(format!("a range is `{{from: LOW, to: HIGH}}` with LOW ≤ HIGH and at most {MAX_PHASE_VALUES} values, both ends included")),
                    );
                    return None;
                }
                Some((a..=b).collect())
            }
        }
    }

    /// The quantity values with `values` applied and every quantity defined from them
    /// re-evaluated (in the definitions' dependency order).
    fn env_with(&mut self, values: &[(&Ident, i64)]) -> Option<HashMap<String, i64>> {
        let mut env = self.env.clone();
        let mut changed: HashSet<&str> = HashSet::new();
        let order = self.order.clone();
        for (name, e) in order {
            if let Some((_, v)) = values.iter().find(|(n, _)| n.value == name.value) {
                env.insert(name.value.clone(), *v);
                changed.insert(name.value.as_str());
                continue;
            }
            if !e.names().iter().any(|(n, _)| changed.contains(n)) {
                continue;
            }
            match expr::eval(e, &|n: &str| env.get(n).copied()) {
                Ok(v) => {
                    env.insert(name.value.clone(), v);
                    changed.insert(name.value.as_str());
                }
                Err(err) => {
                    self.push(err.to_diagnostic());
                    return None;
                }
            }
        }
        Some(env)
    }

    /// M_reserve at step and chunk granularity over the catalog's classes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reserves(
        &mut self,
        c: &Callable,
        phases: &[PhaseEnv],
        reach: &reach::Reachable,
        tracks: &[reach::Track],
        regions: &[DerivedRegion],
        consts: &[DerivedConstant],
        reads: &[String],
        writes: &[String],
        steps: u64,
        limit: u64,
        bounded: bool,
    ) -> Option<(Reserve, Reserve)> {
        let find = |r: &str| regions.iter().find(|d| d.name == r);
        // Which tuples each phase is presented with.
        let mut plan: Vec<(&PhaseEnv, Vec<&Vec<u64>>)> = Vec::new();
        if let (Some(all), Some(later)) = (reach.tuples.as_ref(), reach.later.as_ref()) {
            if phases.iter().all(|p| p.kind.is_none()) {
                plan.extend(phases.iter().map(|p| (p, all.iter().collect())));
            } else {
                // Without a `first` phase the first call presents the steady shapes.
                let has_first = phases.iter().any(|p| p.kind == Some(PhaseKind::First));
                let mut first_and_later: Vec<&Vec<u64>> = vec![&reach.first];
                first_and_later.extend(later.iter().filter(|t| **t != reach.first));
                for p in phases {
                    let tuples = match p.kind {
                        Some(PhaseKind::First) => vec![&reach.first],
                        Some(PhaseKind::Steady) if !has_first => first_and_later.clone(),
                        _ => later.iter().collect(),
                    };
                    plan.push((p, tuples));
                }
            }
        }
        let specialize = c.specialize.is_some();
        let work = plan
            .iter()
            .map(|(_, t)| t.len() as u64)
            .sum::<u64>()
            .saturating_mul(if specialize { steps } else { 1 });
        let enumerable = !plan.is_empty() && work <= MAX_ENUMERATED_CLASSES;
        if !enumerable {
            plan.clear();
        }
        let loop_axis = c.loop_clock.as_ref().map(|l| l.value.as_str());
        let mut out = Vec::new();
        for g in [Granularity::Step, Granularity::Chunk] {
            let step_list: Vec<Option<u64>> = if specialize && g == Granularity::Step {
                (0..steps).map(Some).collect()
            } else {
                vec![None]
            };
            let mut staging: u64 = 0;
            let mut staging_all: u64 = 0;
            let mut largest: Option<(String, u64)> = None;
            let mut sigs: Vec<ClassSig> = Vec::new();
            let mut seen: HashMap<SigKey, usize> = HashMap::new();
            for (phase, tuples) in &plan {
                for tuple in tuples {
                    // The varying regions' extents, in read order.
                    let extents: Vec<(String, u64)> = tracks
                        .iter()
                        .zip(tuple.iter())
                        .filter(|(t, _)| t.by.is_some())
                        .map(|(t, &v)| (t.region.clone(), v))
                        .collect();
                    // Pinned regions read at their bound.
                    let mut all_ext = extents.clone();
                    for r in reads {
                        if let Some(d) = find(r)
                            && d.width.pinned
                        {
                            all_ext.push((r.clone(), d.attended_extent.value));
                        }
                    }
                    let mut args = Vec::new();
                    for a in &c.inputs {
                        args.push(self.arg_sig(
                            &c.name.value,
                            a,
                            g,
                            loop_axis,
                            &phase.env,
                            &all_ext,
                            regions,
                            consts,
                        )?);
                    }
                    for &step in &step_list {
                        let key = (
                            (*tuple).clone(),
                            args.iter().map(|a| a.dims.clone()).collect(),
                            step,
                        );
                        if let Some(&i) = seen.get(&key) {
                            let sig: &mut ClassSig = &mut sigs[i];
                            if let Some(p) = sig.phase.as_mut()
                                && !p.split("; ").any(|x| x == phase.label)
                            {
                                p.push_str("; ");
                                p.push_str(&phase.label);
                            }
                            continue;
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
                        seen.insert(key, sigs.len());
                        sigs.push(ClassSig {
                            index: sigs.len(),
                            extents: extents.clone(),
                            args: args.clone(),
                            staging_bytes: st,
                            phase: phase.kind.map(|_| phase.label.clone()),
                            step,
                        });
                    }
                }
            }
            let count = sigs.len() as u64;
            if count > limit {
                sigs.clear();
            }
            let mut wt: u64 = 0;
            for w in writes {
                wt = wt.checked_add(find(w)?.live_bytes)?;
            }
            out.push(Reserve {
                granularity: g,
                staging_bytes: staging,
                write_through_bytes: wt,
                total_bytes: staging.checked_add(wt)?,
                staging_unaliased_bytes: staging_all,
                complete: enumerable && bounded && c.query.value == QueryLength::Fixed,
                largest_input: largest,
                host_launches_per_chunk: if g == Granularity::Step { steps } else { 1 },
                classes: sigs,
                signatures: enumerable.then_some(count),
            });
        }
        let chunk = out.pop()?;
        let step = out.pop()?;
        Some((step, chunk))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn arg_sig(
        &mut self,
        callable: &str,
        a: &TensorArg,
        g: Granularity,
        loop_axis: Option<&str>,
        env: &HashMap<String, i64>,
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
                            // One step's slice drops the loop axis, never the attended one (a
                            // ring whose time axis is the loop clock keeps it).
                            if g == Granularity::Step
                                && loop_axis == Some(ax.as_str())
                                && i != attended_axis
                            {
                                continue;
                            }
                            // A fixed extent a query phase overrides is that phase's value.
                            let fixed = self
                                .spec
                                .region(&r.value)
                                .and_then(|ir| ir.growth.iter().find(|g| &g.axis.value == ax))
                                .and_then(|g| match &g.growth {
                                    Growth::Fixed(e) if !d.disabled => {
                                        expr::eval(e, &|n: &str| env.get(n).copied()).ok()
                                    }
                                    _ => None,
                                })
                                .and_then(|v| u64::try_from(v).ok());
                            if let Some(v) = fixed {
                                dims.push(v);
                            } else if i == attended_axis {
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
                    let env = ClassEnv { env, extents };
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
                (
                    dims,
                    self.tensor_dtype(callable, &a.name.value, dtype.value),
                    None,
                    Placement::Device,
                )
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
}
