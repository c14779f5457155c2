//! The session arena at an operating point, as data: `operating_points::<point>::REGIONS` and
//! `ARENA`, so a port that runs a point (a `half` point storing its caches as f16, a point with
//! fewer solver steps) lays its state out from the contract at that point, element types and
//! offsets included, instead of adjusting the base layout by hand.

use crate::derive::types::{Derived, DerivedKeep};

use super::model::ConstView;
use super::spell::*;

/// `::core::option::Option::Some(dcc::Keep { .. })` (or `None`): a region's kept slices.
pub(super) fn keep_value(keep: &Option<DerivedKeep>) -> String {
    match keep {
        None => "::core::option::Option::None".into(),
        Some(k) => format!(
            "::core::option::Option::Some(dcc::Keep {{ head: {}, tail: {}, prompt: {}, retained: {} }})",
            lit(k.head.value),
            lit(k.tail.value),
            lit(k.prompt),
            lit(k.retained)
        ),
    }
}

/// `REGIONS` (every arena region at the point, in offset order, each `RegionInfo` spelled in
/// full) and `ARENA` (over them, `total_bytes` the point's `ARENA_BYTES`), the base module's
/// `REGIONS` / `ARENA` at this point. Empty when the point has no arena region.
pub(super) fn arena_consts(op: &Derived) -> Vec<ConstView> {
    let infos: Vec<String> = op
        .arena
        .slots
        .iter()
        .filter_map(|s| {
            let r = op.region(&s.region)?;
            let elems: u64 = r.dims.iter().product();
            Some(format!(
                "dcc::RegionInfo {{ name: {}, dtype: dcc::DType::{}, dims: &{}, dim_names: {}, \
                 elems: {}, bytes: {}, align: {}, offset: {}, attended: {}, lifetime: \
                 dcc::Lifetime::{}, order: {}, keep: {} }}",
                rust_str(&r.name),
                dtype_variant(r.dtype),
                array(&r.dims),
                str_slice(&r.dim_names),
                lit(elems),
                lit(r.live_bytes),
                lit(op.arena.align),
                lit(s.offset),
                lit(r.attended_extent.value),
                lifetime_variant(r.lifetime),
                order_value(r.order),
                keep_value(&r.keep),
            ))
        })
        .collect();
    if infos.is_empty() {
        return Vec::new();
    }
    let n = infos.len();
    vec![
        c(
            vec![
                "The arena regions at this operating point, in offset order (the per-session part \
                 first): element types, dims, bytes and offsets as this point derives them."
                    .into(),
            ],
            "REGIONS",
            &format!("[dcc::RegionInfo; {n}]"),
            format!("[{}]", infos.join(", ")),
        ),
        c(
            vec![
                "The session arena at this operating point: what a port running this point lays \
                 its state out from."
                    .into(),
            ],
            "ARENA",
            "dcc::ArenaLayout",
            format!(
                "dcc::ArenaLayout {{ total_bytes: ARENA_BYTES, align: {}, regions: &REGIONS }}",
                lit(op.arena.align)
            ),
        ),
    ]
}
