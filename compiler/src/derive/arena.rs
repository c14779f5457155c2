//! The session arena's layout: every arena region at a fixed offset, each offset a multiple of
//! [`ARENA_ALIGN`].
//!
//! Computed once, here, from the derived regions; `dcc check` reports it and the code generator
//! emits it (`REGIONS`, each region's `OFFSET`, `ARENA_BYTES`), so the total a person reads in
//! the report is the allocation the runtime makes, byte for byte.

use super::types::{ArenaSlot, DerivedArena, DerivedRegion};
use crate::ir::Placement;

/// Alignment of the arena and of every region offset in it, in bytes: the runtime's
/// allocations are [`dcc_vocab::ALLOC_ALIGN`]-aligned (256 B), so a region at such an offset is
/// as aligned as its own allocation would be.
pub const ARENA_ALIGN: u64 = dcc_vocab::ALLOC_ALIGN as u64;

/// Lays the arena regions (`placement: arena`) out in declaration order, each at the running
/// total rounded up to [`ARENA_ALIGN`]; the total is the last region's end rounded up too, so
/// two arenas placed back to back keep every offset aligned. `None` if a sum overflows `u64`.
pub fn layout(regions: &[DerivedRegion]) -> Option<DerivedArena> {
    let mut slots = Vec::new();
    let mut offset = 0u64;
    let mut live = 0u64;
    for r in regions.iter().filter(|r| r.placement == Placement::Arena) {
        let padded = r.live_bytes.checked_next_multiple_of(ARENA_ALIGN)?;
        slots.push(ArenaSlot {
            region: r.name.clone(),
            offset,
            bytes: r.live_bytes,
            padded_bytes: padded,
        });
        offset = offset.checked_add(padded)?;
        live = live.checked_add(r.live_bytes)?;
    }
    Some(DerivedArena {
        align: ARENA_ALIGN,
        slots,
        live_bytes: live,
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
    }
}
