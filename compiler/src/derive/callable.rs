//! One callable: widths K_r, the reachable catalog 𝓛, the partial-flush bound, the verdict and
//! M_reserve (eq. 6) at step and chunk granularity.
//!
//! Nothing here depends on the order of a callable's `inputs:` and `reads:`: the specializing
//! region (whose extents are 𝓛 and whose trajectory bounds partial flushes) is the varying
//! region with the most extents, ties broken by name; when every region is pinned, the one
//! with the largest extent, ties broken by name.

use std::cmp::Reverse;

use super::types::*;
use super::{Deriver, MAX_ENUMERATED_CLASSES, lockstep_text, reach};
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl<'s> Deriver<'s> {
    #[allow(clippy::too_many_lines)]
    pub(super) fn callable(
        &mut self,
        c: &'s Callable,
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
        if let Some(sp) = &c.specialize
            && c.loop_clock.is_none()
        {
            self.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    sp.span,
                    format!("`{name}` specializes on its inner step, but declares no inner loop"),
                )
                .label("no `loop:` to take the step index from")
                .help("declare the inner loop clock (`loop: step`), whose rate is the step count, or remove `specialize:`"),
            );
            return None;
        }
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
        // eq. 7's bound; its overflow is no error while the reachable count fits.
        let catalog_width = region_widths
            .iter()
            .try_fold(1u64, |a, w| a.checked_mul(w.width));
        let phases = self.phases.remove(name)?;
        let configs = phases.len() as u64;
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
                prefix: d.width.schedule.clone(),
                by: if d.width.pinned {
                    None
                } else {
                    d.width.stride.as_ref().map(|s| s.value)
                },
                cap: d.attended_extent.value,
            });
        }
        let reach = reach::reachable(&tracks, MAX_ENUMERATED_CLASSES);
        if reach.count.is_none() {
            self.overflow(c.span, "the number of reachable extent tuples");
            return None;
        }
        let lockstep_text = lockstep_text(&reach.lockstep);
        // Varying regions first, by K_r; among pinned ones the largest extent; then the name.
        let spec_region = region_widths
            .iter()
            .max_by_key(|w| {
                let pinned_extent = match find(&w.region) {
                    Some(d) if w.pinned => d.attended_extent.value,
                    _ => 0,
                };
                (
                    !w.pinned,
                    w.width,
                    pinned_extent,
                    Reverse(w.region.as_str()),
                )
            })
            .map(|w| w.region.clone());
        let sr = spec_region.as_deref().and_then(find);
        let attended_extents = sr.map(|d| d.catalog.clone()).unwrap_or_default();
        let catalog_size = self.catalog_size(sr, spec_region.as_deref());
        // Partial flushes (flush.rs). The admission variable counts ticks of the finest clock
        // among the growing regions the callable reads or writes on the specializing region's
        // base clock (the frames the runtime presents).
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
                    && (k.per_base, Reverse(&k.name)) > (best.1, Reverse(&best.0))
                {
                    best = (k.name.clone(), k.per_base);
                }
            }
            best
        });
        let flush_clock = sr_track.map(|t| t.clock.clone());
        let flush_classes = match (sr, sr_track) {
            (Some(d), Some(st)) => self.flush_bound(c, d, st, admit_clock),
            _ => None,
        };
        let mut unbounded: Vec<&str> = Vec::new();
        for r in reads.iter().chain(&writes) {
            if find(r).is_some_and(|d| d.width.unbounded) && !unbounded.contains(&r.as_str()) {
                unbounded.push(r);
            }
        }
        // The catalog: every (phase, extent tuple, step) signature, at both granularities.
        let specialize = c.specialize.is_some();
        let (reserve_step, reserve_chunk) = self.reserves(
            c,
            &phases,
            &reach,
            &tracks,
            regions,
            consts,
            &reads,
            &writes,
            steps,
            limit,
            unbounded.is_empty(),
        )?;
        let per_step = |g: Granularity| {
            if specialize && g == Granularity::Step {
                steps
            } else {
                1
            }
        };
        let declared = match c.granularity.value {
            Granularity::Step => &reserve_step,
            Granularity::Chunk => &reserve_chunk,
        };
        let spec_steps = per_step(c.granularity.value);
        let (classes, classes_bound) = match c.query.value {
            QueryLength::Fixed => (
                Some(declared.signatures.unwrap_or_else(|| {
                    reach
                        .count
                        .and_then(|n| n.checked_mul(configs))
                        .and_then(|n| n.checked_mul(spec_steps))
                        .unwrap_or(u64::MAX)
                })),
                catalog_width
                    .and_then(|w| w.checked_mul(configs))
                    .and_then(|n| n.checked_mul(spec_steps)),
            ),
            QueryLength::Traffic => (None, None),
        };
        let (verdict, reason) = self.verdict(
            c,
            find,
            &region_widths,
            catalog_width,
            &lockstep_text,
            classes,
            classes_bound,
            configs,
            spec_steps,
            &unbounded,
            limit,
        );
        let classes = match verdict {
            Verdict::OutUnbounded => None,
            _ => classes,
        };
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
            phases: phases.iter().filter(|p| p.kind.is_some()).fold(
                Vec::new(),
                |mut v: Vec<String>, p| {
                    if !v.contains(&p.name) {
                        v.push(p.name.clone());
                    }
                    v
                },
            ),
            specialized_steps: if specialize { Some(steps) } else { None },
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
            batch: None,
        })
    }

    /// eq. 4 for a prompt + history region (`K = ceil(f_retained / f_chunk) + 1`), else the
    /// specializing region's K_r.
    fn catalog_size(&self, sr: Option<&DerivedRegion>, name: Option<&str>) -> Derivation {
        match (sr, name.and_then(|n| self.spec.region(n))) {
            (Some(d), Some(ir)) => match (&ir.retention.value, &d.width.stride) {
                (Retention::PromptHistory { retained, .. }, Some(s))
                    if d.width.schedule.is_empty() =>
                {
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
                    dd.inputs = super::merge_inputs(&dd, s);
                    dd
                }
                _ => d.width.width.clone(),
            },
            _ => Derivation::literal(1),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn verdict<'r>(
        &self,
        c: &Callable,
        find: impl Fn(&str) -> Option<&'r DerivedRegion>,
        region_widths: &[RegionWidth],
        catalog_width: Option<u64>,
        lockstep_text: &str,
        classes: Option<u64>,
        classes_bound: Option<u64>,
        configs: u64,
        spec_steps: u64,
        unbounded: &[&str],
        limit: u64,
    ) -> (Verdict, String) {
        let widths_text = region_widths
            .iter()
            .map(|w| match find(&w.region) {
                Some(d) if d.width.unbounded => format!(
                    "`{}`: retention none, grows by {} per call without bound",
                    w.region,
                    d.width.stride.as_ref().map(|s| s.value).unwrap_or(0)
                ),
                Some(d) if !d.width.pinned && d.width.schedule.is_empty() => format!(
                    "`{}`: K_r = ceil(W_r {} / s_r {}) + 1 = {}",
                    w.region,
                    d.width.window.value,
                    d.width.stride.as_ref().map(|s| s.value).unwrap_or(0),
                    w.width
                ),
                Some(d) if !d.width.pinned => format!(
                    "`{}`: K_r = {} extents of its schedule within W_r {}",
                    w.region, w.width, d.width.window.value
                ),
                _ => format!("`{}`: pinned, K_r = 1", w.region),
            })
            .collect::<Vec<_>>()
            .join("; ");
        let widths_text = if widths_text.is_empty() {
            "no region extent in the signature".to_string()
        } else {
            widths_text
        };
        let width_text = catalog_width
            .map(|w| w.to_string())
            .unwrap_or_else(|| "more than 2^64".into());
        let steps_text = if spec_steps > 1 {
            format!(" × steps {spec_steps}")
        } else {
            String::new()
        };
        // `= |Q_o| 1 × ∏K_r 3 (...)`, or with regions in lock-step
        // `reachable of ≤ |Q_o| 1 × ∏K_r 9 = 9 (...; a and b advance together on the token clock)`.
        let count_text = if classes.is_some() && classes == classes_bound {
            format!("= |Q_o| {configs} × ∏K_r {width_text}{steps_text} ({widths_text})")
        } else {
            let why = if lockstep_text.is_empty() {
                crate::derive::PHASES_TEXT.to_string()
            } else {
                lockstep_text.to_string()
            };
            format!(
                "reachable of ≤ |Q_o| {configs} × ∏K_r {width_text}{steps_text} = {} ({widths_text}; {why})",
                classes_bound
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "more than 2^64".into())
            )
        };
        if c.effects.value.contains(Effects::HOST_RNG) {
            return (
                Verdict::OutEffects,
                format!(
                    "draws from the host random generator (`effects: {}`): exact replay would freeze the host draws of the captured call into the graph, so the engine rejects the callable for good and it runs eager. To bring it in scope, move the draws to a device Philox stream (`effects: device_rng`)",
                    c.effects.value.spelling()
                ),
            );
        }
        if !unbounded.is_empty() {
            let list: Vec<String> = unbounded.iter().map(|r| format!("`{r}`")).collect();
            return (
                Verdict::OutUnbounded,
                format!(
                    "{} {} `retention: none`: the state grows for the whole session, so no finite catalog or fixed-size state covers a session ({widths_text}). To bring it in scope, bound it with a retention policy (ring, window or prompt + retained)",
                    list.join(", "),
                    if list.len() == 1 { "has" } else { "have" }
                ),
            );
        }
        match (c.query.value, classes) {
            (QueryLength::Traffic, _) => (
                Verdict::OutQo,
                format!(
                    "query length is traffic-dependent (`query: traffic`): Q_o is unbounded, so no finite catalog covers the calls even though ∏K_r = {width_text} ({widths_text}). To bring it in scope, fix the query length by the clocks (e.g. fixed-size query chunks) and declare `query: fixed`"
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
        }
    }
}
