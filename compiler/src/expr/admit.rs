//! The sizes an admission predicate admits, from all of its clauses (`< <= == >= >`).

use super::{Env, EvalError, eval};
use crate::ir::{CmpOp, Predicate};

/// The sizes an admission predicate admits: the integers in `[lo, hi]`; `hi = None` when no
/// clause bounds them from above. `lo` is at least 1: a call presents at least one tick.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    pub lo: i64,
    pub hi: Option<i64>,
}

impl Admitted {
    /// Whether no size is admitted.
    pub fn is_empty(&self) -> bool {
        self.hi.is_some_and(|h| h < self.lo)
    }

    /// How many sizes in `1..=cap` are admitted.
    pub fn count_up_to(&self, cap: u64) -> u64 {
        let cap = i64::try_from(cap).unwrap_or(i64::MAX);
        let hi = self.hi.map_or(cap, |h| h.min(cap));
        u64::try_from(hi.saturating_sub(self.lo).saturating_add(1)).unwrap_or(0)
    }
}

/// Evaluate every clause of `p` (all of `< <= == >= >`) into the admitted interval.
pub fn admitted(p: &Predicate, env: &dyn Env) -> Result<Admitted, EvalError> {
    let mut lo: i64 = 1;
    let mut hi: Option<i64> = None;
    let upper = |v: i64, hi: &mut Option<i64>| *hi = Some(hi.map_or(v, |h| h.min(v)));
    for (op, e) in &p.clauses {
        let v = eval(e, env)?;
        match op {
            CmpOp::Lt => upper(v.saturating_sub(1), &mut hi),
            CmpOp::Le => upper(v, &mut hi),
            CmpOp::Eq => {
                upper(v, &mut hi);
                lo = lo.max(v);
            }
            CmpOp::Ge => lo = lo.max(v),
            CmpOp::Gt => lo = lo.max(v.saturating_add(1)),
        }
    }
    Ok(Admitted { lo, hi })
}
