//! The partial-flush bound of a callable: at a turn's end a call may advance by less than the
//! stride, landing on extents off the trajectory. Their number is bounded by the largest
//! advance s_r of the specializing region's trajectory, by the admission predicate (converted
//! to the region's clock through the declared rates) and by the region's window W_r (an extent
//! never leaves `[A_r⁻, A_r]`).

use super::types::*;
use super::{Deriver, merge_inputs, paren_str, reach, unit_word};
use crate::expr;
use crate::ir::*;

impl Deriver<'_> {
    /// The bound, or `None` when the specializing region is pinned. `st` is its track;
    /// `(ac, ap)` the admission clock and its ticks per base tick.
    pub(super) fn flush_bound(
        &self,
        c: &Callable,
        d: &DerivedRegion,
        st: &reach::Track,
        admit_clock: Option<(String, u64)>,
    ) -> Option<Derivation> {
        let s = d.width.stride.clone()?;
        // The largest advance of the trajectory (the steady stride for a plain progression).
        let mut s = s;
        if let Some(m) = d.width.schedule.iter().copied().max()
            && m > s.value
        {
            s = Derivation {
                value: m,
                formula: format!("max advance {m}"),
                inputs: Vec::new(),
            };
        }
        // The upper bound (`f < B` admits at most B − 1, and says so), and the lower bound of
        // every clause (`f > a`, `f >= a`, `f == a`): sizes below it are never flushed. The
        // lint stage rejects predicates that admit nothing.
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
        let w = d.width.window.value;
        let window = format!("W_r {w} {}", unit_word(w, &st.clock));
        let out = match bound {
            Some((b, e, bound_text)) => {
                let b = u64::try_from(b.max(0)).unwrap_or(0);
                let (ac, ap) = admit_clock
                    .clone()
                    .unwrap_or_else(|| (st.clock.clone(), st.per_base));
                // b ticks of the admission clock = b × p_r / p_a ticks of the region's clock
                // (whole ticks: a flush advances the region by whole ticks).
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
                let v = s.value.min(b_r);
                let mut out = if w < v {
                    self.derivation(
                        w,
                        format!("min(s_r {stride}, admit bound {admit}, {window})"),
                        &[e],
                    )
                } else {
                    self.derivation(v, format!("min(s_r {stride}, admit bound {admit})"), &[e])
                };
                out.inputs = merge_inputs(&out, &s);
                out
            }
            None if w < s.value => Derivation {
                value: w,
                formula: format!("min(s_r {stride}, {window})"),
                inputs: s.inputs.clone(),
            },
            None => Derivation {
                value: s.value,
                formula: format!("s_r {stride}"),
                inputs: s.inputs.clone(),
            },
        };
        // Sizes below the lower bound are not admitted: (lo_r − 1) fewer classes, with lo_r
        // the lower bound converted up to whole ticks of the region's clock.
        Some(if lowest > 1 {
            let (_, ap) = admit_clock.unwrap_or_else(|| (st.clock.clone(), st.per_base));
            let lo = u128::from(u64::try_from(lowest).unwrap_or(u64::MAX));
            let lo_r = (lo * u128::from(st.per_base)).div_ceil(u128::from(ap.max(1)));
            let skip = u64::try_from(lo_r.saturating_sub(1)).unwrap_or(u64::MAX);
            Derivation {
                value: out.value.saturating_sub(skip),
                formula: format!("{} - ({lo_r} - 1)", out.formula),
                inputs: out.inputs,
            }
        } else {
            out
        })
    }
}
