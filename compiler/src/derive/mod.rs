//! Derivations (DESIGN.md §3, paper eqs. 1–7). (In progress.)

pub mod types;

use crate::diag::Diagnostic;
use crate::ir::Spec;
use types::Derived;

/// Derive the base operating point and every declared operating point.
pub fn derive_all(_spec: &Spec) -> Result<(Derived, Vec<Derived>), Vec<Diagnostic>> {
    Err(Vec::new())
}

/// Warnings about derived numbers (e.g. ρ < 1).
pub fn warnings(_spec: &Spec, _derived: &Derived) -> Vec<Diagnostic> {
    Vec::new()
}
