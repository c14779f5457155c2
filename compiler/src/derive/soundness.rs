//! Replay soundness of a callable's bindings: no input the replay engine stages may share
//! storage with a region the callable writes.
//!
//! Exact replay copies every staged (non-aliased) input into a static buffer before the graph
//! runs, and the graph reads that copy; written regions are bound by address and written in
//! place. If a staged input and a write share bytes, the graph reads a snapshot taken before
//! the call while the eager callable reads the storage as it writes it, so replay would differ
//! from eager. Such a contract is rejected here, in `derive`, so no caller of the derivations
//! (the CLI, build scripts, the macro) can obtain a catalog that stages written storage.

use crate::diag::{Code, Diagnostic};
use crate::ir::{ArgSource, Callable, Placement};

use super::types::{DerivedArena, DerivedRegion};

/// Whether regions `a` and `b` can share bytes: the same region, or two arena regions whose
/// spans `[offset, offset + bytes)` intersect. Regions outside the arena have allocations of
/// their own.
pub fn storage_overlaps(a: &str, b: &str, arena: &DerivedArena) -> bool {
    if a == b {
        return true;
    }
    match (arena.slot(a), arena.slot(b)) {
        (Some(x), Some(y)) => {
            x.bytes > 0
                && y.bytes > 0
                && x.offset < y.offset.saturating_add(y.bytes)
                && y.offset < x.offset.saturating_add(x.bytes)
        }
        _ => false,
    }
}

/// One error per (staged input, write) pair of `c` that share storage.
pub fn staged_writes(
    c: &Callable,
    regions: &[DerivedRegion],
    arena: &DerivedArena,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for a in &c.inputs {
        let ArgSource::Region(r) = &a.source else {
            continue; // constants are immutable; caller tensors are not contract storage
        };
        let Some(placement) = regions
            .iter()
            .find(|d| d.name == r.value)
            .map(|d| d.placement)
        else {
            continue;
        };
        if a.aliased(placement) {
            continue;
        }
        for w in &c.writes {
            if !storage_overlaps(&r.value, &w.value, arena) {
                continue;
            }
            let (staged_span, staged_label) = match &a.alias {
                Some(al) => (al.span, format!("input `{}` is staged here", a.name.value)),
                None => (
                    a.span,
                    format!(
                        "input `{}` is staged: region `{}` is placed on the host",
                        a.name.value, r.value
                    ),
                ),
            };
            let what = if r.value == w.value {
                format!("region `{}`", w.value)
            } else {
                format!(
                    "region `{}`, whose arena bytes overlap those of region `{}`,",
                    w.value, r.value
                )
            };
            let fix = if a.alias.is_some() && placement != Placement::Host {
                format!(
                    "remove `alias: false` from input `{}` (a device region is aliased by default, so the graph reads the storage it writes), or remove `{}` from `writes:`",
                    a.name.value, w.value
                )
            } else {
                format!(
                    "place region `{}` in the arena (`placement: arena`) so input `{}` can be aliased, or remove `{}` from `writes:`",
                    r.value, a.name.value, w.value
                )
            };
            out.push(
                Diagnostic::error(
                    Code::StagedWrite,
                    w.span,
                    format!(
                        "callable `{}` writes {what} in place, but its input `{}` stages that storage",
                        c.name.value, a.name.value
                    ),
                )
                .label("written in place here")
                .with_secondary(staged_span, staged_label)
                .help(format!(
                    "replay copies a staged input into a static buffer before the graph runs, so the graph would read a stale copy of what it writes and diverge from eager; {fix}"
                )),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::types::ArenaSlot;

    fn slot(region: &str, offset: u64, bytes: u64) -> ArenaSlot {
        ArenaSlot {
            region: region.into(),
            offset,
            bytes,
            padded_bytes: bytes,
            per_session: true,
        }
    }

    #[test]
    fn overlap_is_by_bytes_in_the_arena_and_by_name_elsewhere() {
        let arena = DerivedArena {
            align: 256,
            slots: vec![slot("a", 0, 512), slot("b", 256, 512), slot("c", 768, 256)],
            live_bytes: 1280,
            session_bytes: 1024,
            total_bytes: 1024,
        };
        assert!(storage_overlaps("a", "a", &arena));
        assert!(storage_overlaps("a", "b", &arena));
        assert!(storage_overlaps("b", "a", &arena));
        assert!(
            !storage_overlaps("a", "c", &arena),
            "adjacent, not overlapping"
        );
        assert!(!storage_overlaps("b", "c", &arena));
        assert!(storage_overlaps("host_only", "host_only", &arena));
        assert!(!storage_overlaps("host_only", "a", &arena));
    }
}
