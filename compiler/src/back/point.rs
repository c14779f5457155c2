//! An operating point as data: its session arena (`operating_points::<point>::REGIONS` and
//! `ARENA`) and its callables (`<CALLABLE>_CATALOG`, `CALLABLES`, and `POINT`, the three as a
//! `dcc::OperatingPoint`), so a port that runs a point (a `half` point storing its caches as
//! f16, a point with fewer solver steps) lays its state out and keys its replay engines on the
//! contract at that point, element types, extents and offsets included, instead of adjusting
//! the base layout and catalogs by hand. A catalog the point does not change is the base's,
//! re-exported.

use crate::Checked;
use crate::derive::types::{Derived, DerivedKeep};
use crate::ir::Verdict;

use super::callable::sig_view;
use super::model::{ConstView, SigView};
use super::spell::*;

/// One callable at an operating point: its catalog (the point's own signatures, or the base's
/// re-exported when they are equal) and its `CallableInfo` spelled out.
pub struct PointCallableView {
    /// `FLOW_CATALOG`.
    pub catalog_static: String,
    pub name: String,
    /// The point's signatures; empty when `same` (or when not captured).
    pub classes: Vec<SigView>,
    /// The point's catalog equals the base's: re-exported, not spelled again.
    pub same: bool,
    /// `dcc::CallableInfo { .. }` at this point.
    pub info: String,
}

impl PointCallableView {
    /// The callable's name as a string literal.
    pub fn name_lit(&self) -> String {
        rust_str(&self.name)
    }
}

/// What identifies a signature: every field the runtime compares.
fn sig_key(s: &SigView) -> String {
    let inputs: Vec<String> = s
        .inputs
        .iter()
        .map(|t| {
            format!(
                "{} {} {} {} {}",
                t.name, t.dims, t.strides, t.dtype, t.aliased
            )
        })
        .collect();
    format!(
        "{} {} {} [{}]",
        s.class,
        s.attended,
        s.scalars,
        inputs.join("; ")
    )
}

/// The signatures of every callable of `d` (empty for a callable that is not captured).
fn classes_of(checked: &Checked, d: &Derived) -> Vec<(String, Vec<SigView>)> {
    d.callables
        .iter()
        .map(|dc| {
            let classes = if dc.verdict == Verdict::Captured {
                dc.reserve()
                    .classes
                    .iter()
                    .map(|cl| sig_view(checked, d, dc, cl))
                    .collect()
            } else {
                Vec::new()
            };
            (dc.name.clone(), classes)
        })
        .collect()
}

/// Every callable at the point `op`, its catalog compared with the base's.
pub(super) fn callables(checked: &Checked, op: &Derived) -> Vec<PointCallableView> {
    let base = classes_of(checked, &checked.derived);
    classes_of(checked, op)
        .into_iter()
        .zip(&op.callables)
        .map(|((name, classes), dc)| {
            let catalog_static = format!("{}_CATALOG", upper(&name));
            let same = base.iter().any(|(n, b)| {
                *n == name
                    && b.len() == classes.len()
                    && b.iter()
                        .zip(&classes)
                        .all(|(x, y)| sig_key(x) == sig_key(y))
            });
            let info = format!(
                "dcc::CallableInfo {{ name: {}, verdict: dcc::Verdict::{}, reason: {}, \
                 granularity: dcc::Granularity::{}, effects: {}, reads: {}, writes: {}, \
                 catalog: &{catalog_static} }}",
                rust_str(&dc.name),
                verdict_variant(dc.verdict),
                rust_str(&dc.reason),
                granularity_variant(dc.granularity),
                effects_value(dc.effects),
                str_slice(&dc.reads),
                str_slice(&dc.writes),
            );
            PointCallableView {
                catalog_static,
                name,
                classes: if same { Vec::new() } else { classes },
                same,
                info,
            }
        })
        .collect()
}

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
/// `REGIONS` / `ARENA` at this point (no region: an empty arena, as the base's).
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
