//! The view of one region: its layout type's constants, each with the derivation it came from.

use crate::Checked;
use crate::derive::arena::ARENA_ALIGN;
use crate::derive::types::{ArenaSlot, DerivedRegion};
use crate::ir::default_layout;

use super::GenError;
use super::model::RegionView;
use super::spell::*;

pub(super) fn region_view(
    checked: &Checked,
    r: &DerivedRegion,
    ty: String,
    buf: String,
    elems: u64,
    slot: Option<&ArenaSlot>,
) -> Result<RegionView, GenError> {
    let ir = checked.spec.region(&r.name);
    let mut docs: Vec<String> = vec![format!("Layout of region `{}`.", r.name)];
    if let Some(text) = ir.and_then(|x| x.doc.as_deref()) {
        docs.extend(doc_lines(text));
    }
    docs.push(String::new());
    docs.push(format!(
        "Clock `{}`, lifetime `{}`, `{}`, placement `{}`, dtype `{}`; envelope dims `{:?}`.",
        r.axes.join(" × "),
        r.lifetime.name(),
        r.mutability.name(),
        r.placement.name(),
        r.dtype.name(),
        r.dims
    ));
    let n_axes = r.axes.len();
    let mut consts = vec![
        c(
            vec!["Region name in the spec.".into()],
            "NAME",
            "&'static str",
            rust_str(&r.name),
        ),
        c(
            vec![format!("Element type `{}`.", r.dtype.name())],
            "DTYPE",
            "dcc::DType",
            format!("dcc::DType::{}", dtype_variant(r.dtype)),
        ),
        c(
            vec![format!(
                "Envelope dims in storage order `[{}]`{}.",
                r.dim_names.join(", "),
                if r.layout == default_layout(r.axes.len(), r.shape.len()) {
                    " (clock axes, then the per-tick shape)"
                } else {
                    " (the spec's `layout:`)"
                }
            )],
            "DIMS",
            &format!("[usize; {}]", r.dims.len()),
            array(&r.dims),
        ),
        c(
            vec!["Element strides of the envelope storage (packed over `DIMS`).".into()],
            "STRIDES",
            &format!("[usize; {}]", r.dims.len()),
            array(&packed_strides(&r.dims)),
        ),
        c(
            vec!["Name of each storage dim: a clock axis or a shape entry as written.".into()],
            "DIM_NAMES",
            &format!("[&'static str; {}]", r.dims.len()),
            format!(
                "[{}]",
                r.dim_names
                    .iter()
                    .map(|n| rust_str(n))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        usize_c(
            vec![format!(
                "{} = {} (elements of the envelope).",
                elems,
                r.dims
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(" × ")
            )],
            "ELEMS",
            elems,
        ),
        usize_c(
            vec![format!(
                "{} = envelope {} × {} B per tick.",
                r.live_bytes, r.envelope_extent.value, r.tick_bytes.value
            )],
            "BYTES",
            r.live_bytes,
        ),
        usize_c(
            vec![format!("Offset alignment in the arena ({ARENA_ALIGN} B).")],
            "ALIGN",
            ARENA_ALIGN,
        ),
        usize_c(
            vec![if let Some(s) = slot {
                if s.per_session {
                    "Byte offset of the region in the session arena (its per-session part)."
                        .to_string()
                } else {
                    "Byte offset of the region in the session arena (its per-process part, from \
                     `SESSION_BYTES` on)."
                        .to_string()
                }
            } else {
                format!(
                    "Not in the arena (placement `{}`): its own allocation, offset 0.",
                    r.placement.name()
                )
            }],
            "OFFSET",
            slot.map_or(0, |s| s.offset),
        ),
        usize_c(
            vec![
                explain(&r.attended_extent),
                "Attended extent A_r: what consumers read along the growing axis.".into(),
            ],
            "ATTENDED",
            r.attended_extent.value,
        ),
    ];
    if r.growing_axis.is_some() {
        consts.push(usize_c(
            vec![
                explain(&r.attended_min),
                "Lowest attended extent once the retention policy fires (A_r⁻).".into(),
            ],
            "ATTENDED_MIN",
            r.attended_min.value,
        ));
    }
    let axes_doc: Vec<String> = r
        .axes
        .iter()
        .zip(&r.envelope_axes)
        .map(|(a, e)| format!("`{a}`: {}", explain(e)))
        .collect();
    let env_vals: Vec<u64> = r.envelope_axes.iter().map(|e| e.value).collect();
    consts.push(c(
        vec![
            format!(
                "Envelope per clock axis (what storage holds before truncation): {}.",
                env_vals
                    .iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(" × ")
            ),
            axes_doc.join("; "),
        ],
        "ENVELOPE_AXES",
        &format!("[usize; {n_axes}]"),
        array(&env_vals),
    ));
    consts.push(usize_c(
        vec![
            explain(&r.envelope_extent),
            "Envelope along the clock axes (∏ of `ENVELOPE_AXES`).".into(),
        ],
        "ENVELOPE",
        r.envelope_extent.value,
    ));
    consts.push(c(
        vec![format!("Per-tick element shape `{:?}`.", r.shape)],
        "SHAPE",
        &format!("[usize; {}]", r.shape.len()),
        array(&r.shape),
    ));
    consts.push(usize_c(
        vec![
            explain(&r.tick_bytes),
            "Bytes per clock tick: β × ∏ shape.".into(),
        ],
        "TICK_BYTES",
        r.tick_bytes.value,
    ));
    let listed = r.catalog.len() as u64 <= checked.derived.capture_limit;
    consts.push(c(
        if listed {
            vec![format!(
                "Attended extents a consumer can see (the region's catalog): {{{}}}.",
                plain_list(&r.catalog)
            )]
        } else {
            vec![format!(
                "Not listed: {} attended extents exceed the capture limit {}.",
                r.catalog.len(),
                checked.derived.capture_limit
            )]
        },
        "CATALOG",
        &format!("[usize; {}]", if listed { r.catalog.len() } else { 0 }),
        if listed {
            array(&r.catalog)
        } else {
            "[]".into()
        },
    ));
    consts.push(usize_c(
        vec![
            explain(&r.width.width),
            if r.width.pinned {
                "Catalog width K_r (pinned: W_r = 0).".into()
            } else {
                format!(
                    "Catalog width K_r = ceil(W_r / s_r) + 1, W_r = {}{}.",
                    explain(&r.width.window),
                    r.width
                        .stride
                        .as_ref()
                        .map(|s| format!(", s_r = {}", explain(s)))
                        .unwrap_or_default()
                )
            },
        ],
        "K",
        r.width.width.value,
    ));
    for s in &r.stock {
        let suffix = if s.name == "stock" {
            String::new()
        } else {
            format!("_{}", upper(&s.name))
        };
        consts.push(usize_c(
            vec![
                explain(&s.reserved),
                format!(
                    "Stock `{}` reservation along the clock axes `{:?}` (elements per tick).",
                    s.name, s.extents
                ),
            ],
            &format!("STOCK{suffix}"),
            s.reserved.value,
        ));
        consts.push(usize_c(
            vec![format!(
                "{} = {} × {} B per tick: bytes the stock `{}` reserves.",
                s.reserved_bytes, s.reserved.value, r.tick_bytes.value, s.name
            )],
            &format!("STOCK{suffix}_BYTES"),
            s.reserved_bytes,
        ));
        consts.push(c(
            vec![format!(
                "ρ = reserved {} / live {} ≈ {:.1}× (eq. 3, stock `{}`).",
                s.rho.num,
                s.rho.den,
                s.rho.rounded1(),
                s.name
            )],
            &format!("RHO{suffix}"),
            "f64",
            f64_lit(s.rho),
        ));
    }
    consts.push(c(
        vec![format!("Lifetime `{}`.", r.lifetime.name())],
        "LIFETIME",
        "dcc::Lifetime",
        format!("dcc::Lifetime::{}", lifetime_variant(r.lifetime)),
    ));
    consts.push(c(
        vec![format!("Mutability `{}`.", r.mutability.name())],
        "MUTABILITY",
        "dcc::Mutability",
        format!("dcc::Mutability::{}", mutability_variant(r.mutability)),
    ));
    consts.push(c(
        vec![format!("Placement `{}`.", r.placement.name())],
        "PLACEMENT",
        "dcc::Placement",
        format!("dcc::Placement::{}", placement_variant(r.placement)),
    ));
    consts.push(c(
        vec![match r.order {
            Some(o) => format!("Frame order `{}`.", o.name()),
            None => "No prompt + history frame order.".into(),
        }],
        "ORDER",
        "::core::option::Option<dcc::CacheOrder>",
        order_value(r.order),
    ));
    consts.push(c(
        match (&r.keep, r.order) {
            (Some(k), Some(o)) => vec![format!("Kept slices: {}.", k.describe(o))],
            _ => vec!["No prompt + history retention.".into()],
        },
        "KEEP",
        "::core::option::Option<dcc::Keep>",
        super::point::keep_value(&r.keep),
    ));
    consts.push(c(
        vec!["The region as data (its entry in `REGIONS` when in the arena).".into()],
        "INFO",
        "dcc::RegionInfo",
        format!(
            "dcc::RegionInfo {{ name: {name}::NAME, dtype: {name}::DTYPE, dims: &{name}::DIMS, dim_names: &{name}::DIM_NAMES, elems: {name}::ELEMS, bytes: {name}::BYTES, align: {name}::ALIGN, offset: {name}::OFFSET, attended: {name}::ATTENDED, lifetime: {name}::LIFETIME, order: {name}::ORDER, keep: {name}::KEEP }}",
            name = ty
        ),
    ));
    Ok(RegionView {
        name: r.name.clone(),
        elem: elem_type(r.dtype).to_string(),
        elems: lit(elems),
        ty,
        buf,
        docs,
        consts,
    })
}
