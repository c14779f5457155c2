//! Validation: names resolve, no cycles, declarations are consistent. (In progress.)

use crate::diag::Diagnostic;
use crate::ir::Spec;

/// Check a lowered spec; returns errors and warnings.
pub fn validate(_spec: &Spec) -> Vec<Diagnostic> {
    Vec::new()
}
