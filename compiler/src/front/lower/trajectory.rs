//! Growth trajectories beyond one arithmetic progression: `first:` (what the first call adds)
//! and `schedule:` (the advances after it, before the steady `by`).

use super::super::yaml::Node;
use super::{Fields, Lower};
use crate::ir::Advances;

impl Lower<'_> {
    /// `first:` and `schedule:` of one growing axis; `None` after reporting a malformed entry.
    pub(super) fn advances(&mut self, f: &Fields<'_>) -> Option<Advances> {
        let first = match f.get("first") {
            Some(n) => Some(self.expr(n)?),
            None => None,
        };
        let schedule = match f.get("schedule") {
            Some(n) => self.schedule(n)?,
            None => Vec::new(),
        };
        Some(Advances { first, schedule })
    }

    fn schedule(&mut self, node: &Node) -> Option<Vec<crate::ir::Expr>> {
        self.expr_list(
            node,
            "the advances after the first call, in call order, e.g. `schedule: [25, 50]`",
        )
    }
}
