//! The semantic lint stage: contracts that parse and validate but cannot describe a real model,
//! reported rustc-style with their own codes, so no impossible contract is accepted silently.
//!
//! It runs in two places of the pipeline:
//!
//! ```text
//! front → validate → lint::declarations → derive → lint::derived → report / back
//! ```
//!
//! - [`declarations`] needs only the IR: units ([`units`]: every quantity's unit inferred, every
//!   checked position against its clock, E0037), `call:` on a ring (E0039), `alias: true` on a
//!   host constant (E0033), offset views naming an axis the region does not have (E0041).
//! - [`derived`] needs evaluated quantities, and runs once per operating point: a window smaller
//!   than its stride (E0038), a ring smaller than one call's advance (E0039), an admission
//!   predicate that admits nothing (E0040), the admission bound's unit against the clock the
//!   admission variable counts (E0037), an offset view running past its axis (E0041).
//!
//! Errors stop the pipeline like validation errors do; a finding that repeats at several
//! operating points is reported once, at the first.

mod checks;
pub mod units;

use crate::derive::types::Derived;
use crate::diag::Diagnostic;
use crate::ir::Spec;

/// Lints that need only the IR (run after `validate`, before `derive`).
pub fn declarations(spec: &Spec) -> Vec<Diagnostic> {
    let mut u = units::Units::new(spec);
    u.check_declarations();
    let mut out = u.diags;
    out.extend(checks::declarations(spec));
    out
}

/// Lints that need derived values, at the base operating point and at each declared one
/// (`points` in that order); each finding once.
pub fn derived<'d>(spec: &Spec, points: impl IntoIterator<Item = &'d Derived>) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    for d in points {
        for item in checks::derived(spec, d) {
            if !out
                .iter()
                .any(|o| o.code == item.code && o.span == item.span)
            {
                out.push(item);
            }
        }
    }
    out
}
