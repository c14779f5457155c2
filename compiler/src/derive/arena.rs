//! The session arena's layout: every arena region at a fixed offset, each offset a multiple of
//! [`ARENA_ALIGN`], split in two parts by the regions' declared lifetime.
//!
//! * The **per-session part** (`[0, session_bytes)`): regions of lifetime `turn` or `session`
//!   ([`Lifetime::per_session`]), whose contents outlive a call; every session holds its own.
//! * The **per-process part** (`[session_bytes, total_bytes)`): regions of lifetime `operator`,
//!   `unit` or `process`, dead once the call that wrote them returns (or the process's by
//!   definition); sessions whose calls never overlap (time-multiplexed on one device stream)
//!   share one copy, so N sessions cost `N × session_bytes + process_bytes`.
//!
//! Computed once, here, from the derived regions; `dcc check` reports both parts and the code
//! generator emits them (`REGIONS`, each region's `OFFSET`, `SESSION_BYTES`, `PROCESS_BYTES`,
//! `ARENA_BYTES`), so the totals a person reads in the report are the allocations the runtime
//! makes, byte for byte. A runtime that serves one session may allocate both parts at once.
//!
//! [`Lifetime::per_session`]: crate::ir::Lifetime::per_session

use super::types::{ArenaSlot, DerivedArena, DerivedRegion};
use crate::ir::Placement;

/// Alignment of the arena and of every region offset in it, in bytes: the runtime's
/// allocations are [`dcc_vocab::ALLOC_ALIGN`]-aligned (256 B), so a region at such an offset is
/// as aligned as its own allocation would be.
pub const ARENA_ALIGN: u64 = dcc_vocab::ALLOC_ALIGN as u64;

/// Lays the arena regions (`placement: arena`) out: the per-session ones first, then the
/// per-process ones, each group in declaration order, each region at the running total rounded
/// up to [`ARENA_ALIGN`]. Each part's size is its last region's end rounded up too, so the
/// per-process part starts aligned and two arenas placed back to back keep every offset
/// aligned. `None` if a sum overflows `u64`.
pub fn layout(regions: &[DerivedRegion]) -> Option<DerivedArena> {
    let mut slots = Vec::new();
    let mut offset = 0u64;
    let mut live = 0u64;
    let mut session_bytes = 0u64;
    for per_session in [true, false] {
        for r in regions
            .iter()
            .filter(|r| r.placement == Placement::Arena && r.lifetime.per_session() == per_session)
        {
            let padded = r.live_bytes.checked_next_multiple_of(ARENA_ALIGN)?;
            slots.push(ArenaSlot {
                region: r.name.clone(),
                offset,
                bytes: r.live_bytes,
                padded_bytes: padded,
                per_session,
            });
            offset = offset.checked_add(padded)?;
            live = live.checked_add(r.live_bytes)?;
        }
        if per_session {
            session_bytes = offset;
        }
    }
    Some(DerivedArena {
        align: ARENA_ALIGN,
        slots,
        live_bytes: live,
        session_bytes,
        total_bytes: offset,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn offsets_are_aligned_and_the_total_covers_the_padding() {
        let checked = crate::check_source(
            "a.yaml",
            "family: a\nclocks:\n  frame: base\nquantities:\n  n: 3\nregions:\n  \
             small:\n    clock: frame\n    growth: { frame: n }\n    retention: pinned\n    \
             lifetime: session\n    mutability: mutable\n    placement: arena\n    dtype: f32\n    \
             shape: [1]\n  off:\n    clock: frame\n    growth: { frame: n }\n    retention: pinned\n    \
             lifetime: session\n    mutability: mutable\n    placement: host\n    dtype: f32\n    \
             shape: [1]\n  big:\n    clock: frame\n    growth: { frame: n }\n    retention: pinned\n    \
             lifetime: session\n    mutability: mutable\n    placement: arena\n    dtype: f32\n    \
             shape: [100]\ncallables: {}\n",
        )
        .expect("spec checks");
        let a = &checked.derived.arena;
        let got: Vec<(&str, u64, u64, u64)> = a
            .slots
            .iter()
            .map(|s| (s.region.as_str(), s.offset, s.bytes, s.padded_bytes))
            .collect();
        assert_eq!(got, [("small", 0, 12, 256), ("big", 256, 1200, 1280)]);
        assert_eq!(
            (a.live_bytes, a.total_bytes, a.padding()),
            (1212, 1536, 324)
        );
        assert_eq!(a.slot("off"), None);
        assert_eq!(a.slot("big").map(|s| s.offset), Some(256));
        assert_eq!((a.session_bytes, a.process_bytes()), (1536, 0));
    }

    #[test]
    fn call_lifetime_regions_form_the_per_process_part() {
        let region = |name: &str, lifetime: &str, floats: u32| {
            format!(
                "  {name}:\n    clock: frame\n    growth: {{ frame: n }}\n    retention: pinned\n    \
                 lifetime: {lifetime}\n    mutability: mutable\n    placement: arena\n    \
                 dtype: f32\n    shape: [{floats}]\n"
            )
        };
        let spec = format!(
            "family: a\nclocks:\n  frame: base\nquantities:\n  n: 3\nregions:\n{}{}{}{}{}\
             callables: {{}}\n",
            region("scratch", "unit", 100),
            region("cache", "session", 1),
            region("tmp", "operator", 1),
            region("turn_state", "turn", 100),
            region("table", "process", 1),
        );
        let checked = crate::check_source("a.yaml", &spec).expect("spec checks");
        let a = &checked.derived.arena;
        let got: Vec<(&str, u64, bool)> = a
            .slots
            .iter()
            .map(|s| (s.region.as_str(), s.offset, s.per_session))
            .collect();
        // per-session regions first (declaration order), then the per-process ones
        assert_eq!(
            got,
            [
                ("cache", 0, true),
                ("turn_state", 256, true),
                ("scratch", 1536, false),
                ("tmp", 2816, false),
                ("table", 3072, false),
            ]
        );
        assert_eq!(
            (a.session_bytes, a.process_bytes(), a.total_bytes),
            (1536, 1792, 3328)
        );
    }
}
