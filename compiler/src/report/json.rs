//! `dcc check --format json`: the derived numbers as one JSON object per spec.

use serde_json::{Value, json};

use crate::derive::types::*;
use crate::{Checked, Diagnostics};

pub(super) fn derivation_json(d: &Derivation) -> Value {
    json!({
        "value": d.value,
        "formula": d.formula,
        "explain": d.explain(),
        "inputs": d.inputs.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
    })
}

fn reserve_json(r: &Reserve) -> Value {
    json!({
        "granularity": r.granularity.name(),
        "staging_bytes": r.staging_bytes,
        "write_through_bytes": r.write_through_bytes,
        "total_bytes": r.total_bytes,
        "staging_unaliased_bytes": r.staging_unaliased_bytes,
        "complete": r.complete,
        "largest_input": r.largest_input.as_ref().map(|(n, b)| json!({"name": n, "bytes": b})),
        "host_launches_per_chunk": r.host_launches_per_chunk,
        "classes": r.classes.iter().map(|k| json!({
            "index": k.index,
            "extents": k.extents.iter().map(|(n, v)| json!({"region": n, "extent": v})).collect::<Vec<_>>(),
            "staging_bytes": k.staging_bytes,
            "args": k.args.iter().map(|a| json!({
                "name": a.name, "dims": a.dims, "dtype": a.dtype.name(), "aliased": a.aliased,
                "bound_to": a.bound_to, "bytes": a.bytes,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn regions_json(d: &Derived) -> Vec<Value> {
    d.regions
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "clock": r.axes,
                "dtype": r.dtype.name(),
                "lifetime": r.lifetime.name(),
                "mutability": r.mutability.name(),
                "placement": r.placement.name(),
                "order": r.order.map(|o| o.name()),
                "keep": r.keep.as_ref().map(|k| json!({
                    "head": k.head.value,
                    "tail": k.tail.value,
                    "prompt": k.prompt,
                    "retained": k.retained,
                    "rule": k.rule.name(),
                    "declared": k.declared,
                    "slices": k.slices(),
                    "describe": r.order.map(|o| k.describe(o)),
                })),
                "layout": r.dim_names,
                "attended_extent": r.attended_extent.value,
                "attended_min": r.attended_min.value,
                "envelope_axes": r.envelope_axes.iter().map(|e| e.value).collect::<Vec<_>>(),
                "envelope_extent": r.envelope_extent.value,
                "dims": r.dims,
                "tick_bytes": r.tick_bytes.value,
                "live_bytes": r.live_bytes,
                "attended_bytes": r.attended_bytes,
                "reserved_bytes": r.reserved_bytes(),
                "rho": r.rho().map(|x| x.rounded1()),
                "rho_exact": r.rho().map(|x| x.as_f64()),
                "stock": r.stock.iter().map(|s| json!({
                    "name": s.name,
                    "extents": s.extents,
                    "reserved": s.reserved.value,
                    "reserved_bytes": s.reserved_bytes,
                    "rho": s.rho.rounded1(),
                    "rho_exact": s.rho.as_f64(),
                    "rho_ratio": [s.rho.num, s.rho.den],
                })).collect::<Vec<_>>(),
                "catalog": r.catalog,
                "catalog_width": r.width.width.value,
                "window": r.width.window.value,
                "stride": r.width.stride.as_ref().map(|s| s.value),
                "pinned": r.width.pinned,
                "schedule": r.width.schedule,
                "unbounded": r.width.unbounded,
                "disabled": r.disabled,
                "derivations": {
                    "attended_extent": derivation_json(&r.attended_extent),
                    "envelope_extent": derivation_json(&r.envelope_extent),
                    "tick_bytes": derivation_json(&r.tick_bytes),
                    "catalog_width": derivation_json(&r.width.width),
                },
            })
        })
        .collect()
}

fn arena_json(a: &DerivedArena) -> Value {
    json!({
        "align": a.align,
        "live_bytes": a.live_bytes,
        "padding_bytes": a.padding(),
        "total_bytes": a.total_bytes,
        "session_bytes": a.session_bytes,
        "process_bytes": a.process_bytes(),
        "regions": a.slots.iter().map(|s| json!({
            "name": s.region,
            "offset": s.offset,
            "bytes": s.bytes,
            "padded_bytes": s.padded_bytes,
            "per_session": s.per_session,
        })).collect::<Vec<_>>(),
    })
}

fn callables_json(d: &Derived) -> Vec<Value> {
    d.callables
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "granularity": c.granularity.name(),
                "effects": c.effects.spelling(),
                "query": match c.query { crate::ir::QueryLength::Fixed => "fixed", crate::ir::QueryLength::Traffic => "traffic" },
                "reads": c.reads,
                "writes": c.writes,
                "specializing_region": c.specializing_region,
                "attended_extents": c.attended_extents,
                "catalog_size": derivation_json(&c.catalog_size),
                "region_widths": c.region_widths.iter().map(|w| json!({"region": w.region, "width": w.width, "pinned": w.pinned})).collect::<Vec<_>>(),
                "catalog_width": c.catalog_width,
                "configs": c.configs,
                "phases": c.phases,
                "specialized_steps": c.specialized_steps,
                "reachable": c.reachable,
                "lockstep": c.lockstep.iter().map(|g| json!({"regions": g.regions, "clock": g.base, "reachable": g.count})).collect::<Vec<_>>(),
                "classes": c.classes,
                "classes_bound": c.classes_bound,
                "flush_classes": c.flush_classes.as_ref().map(derivation_json),
                "flush_clock": c.flush_clock,
                "verdict": c.verdict.label(),
                "reason": c.reason,
                "steps": c.steps,
                "m_reserve_bytes": {
                    "step": c.reserve_step.total_bytes,
                    "chunk": c.reserve_chunk.total_bytes,
                },
                "m_reserve": {
                    "step": reserve_json(&c.reserve_step),
                    "chunk": reserve_json(&c.reserve_chunk),
                },
                "host_launch_ratio": {"chunk": c.launch_ratio.num, "step": c.launch_ratio.den, "value": c.launch_ratio.as_f64()},
                "batch": super::batch::callable_json(c.batch.as_ref()),
            })
        })
        .collect()
}

/// The JSON object for one checked spec (`dcc check --format json`).
///
/// `arena_bytes` is the bytes one session's arena allocates, alignment padding included: the
/// generated `ARENA_BYTES`, byte for byte. `arena` lays it out: `align`, `live_bytes` (Σ region
/// bytes), `padding_bytes`, `total_bytes` (= `arena_bytes`), `session_bytes` (the per-session
/// part: lifetime `turn`/`session`, the generated `SESSION_BYTES`), `process_bytes` (the
/// per-process part every session of a stream shares: lifetime `operator`/`unit`/`process`,
/// `PROCESS_BYTES`) and each arena region's `offset`, `bytes`, `padded_bytes` and
/// `per_session`, in offset order (the per-session part first).
///
/// Each entry of `callables` (and of `operating_points[].callables`) carries the catalog as
/// follows; `classes` is what the generated catalog lists, the rest says where it comes from:
///
/// - `specializing_region`: the varying region the callable reads with the most extents, ties
///   broken by name (when none varies, the pinned one with the largest extent), so the declaration order of `inputs:` and
///   `reads:` changes nothing; `attended_extents`: that region's attended extents 𝓛, ascending
///   (eq. 4), and `catalog_size`: their count K with its derivation.
/// - `region_widths`: K_r per region read (eq. 7; 1 when pinned).
/// - `catalog_width`: ∏ K_r over the regions read — eq. 7's width, the bound on the extent
///   tuples (9 for Token2Wav's encoder, whose two caches have K_r = 3 each).
///   `null` when the product overflows 64 bits (no error while `reachable` fits).
/// - `reachable`: the extent tuples a session can reach (derive/reach.rs): regions that advance
///   together (same base clock and the same trajectory in base ticks, or both at their bound
///   after the same single call) share one walk and reach one tuple per call that moves any of
///   them (`max K_r` for plain progressions), independent ones multiply; ≤ `catalog_width` (3
///   for the encoder). `lockstep`: the groups of more than one region that advance together,
///   each with its base `clock` and its `reachable` tuples.
/// - `configs`: |𝒬_o|, the query phases (1 without `phases:`); `phases`: their names;
///   `specialized_steps`: the step count `specialize: step` multiplies the step-granularity
///   catalog by. `classes`: the distinct signatures of the catalog at the declared granularity
///   (`first` at the first call's extents, `steady` and `flush` at the later ones, × steps when
///   specialised; the generated `CATALOG` lists exactly these when captured);
///   `classes_bound`: |𝒬_o| × `catalog_width` (× steps) (eq. 7). `classes` is null when 𝒬_o is
///   traffic-dependent or a region grows without bound (`out: unbounded`).
/// - `flush_classes`: the bound on extra classes from partial flushes (≤ the largest advance
///   s_r of the specializing region, capped by the admission bound converted to its clock and
///   by its window W_r), counted in ticks of `flush_clock`.
/// - `verdict`, `reason`: `captured` when `classes` ≤ the capture limit.
/// - `m_reserve`: eq. 6 per granularity, summed over the reachable classes (`complete` false
///   when they could not all be enumerated).
/// - `batch` (`null` unless the callable declares `batch:`): the batch `sizes`,
///   `rows_per_session` (the staged inputs' leading extent × `row_copies`, with its
///   `rows_per_session_derivation` and the `row_input` it is read from), `batchable` per class
///   (index of `m_reserve.<granularity>.classes`), `graphs` (each batchable class once per size,
///   every other class once), `rows` (B × rows per session, per size) and `m_reserve_rows` (the
///   largest).
///
/// `batching` (top level and per operating point; `null` when nothing is batched): the
/// `largest` batch size, `m_reserve_rows` (the most rows any batched graph presents), the
/// `slot_regions` a batch needs one copy of per batch slot (lifetime `operator`/`unit`, touched
/// by a batched callable), their aligned `slot_bytes`, `process_bytes_at_largest`
/// (`process_bytes` + (largest − 1) × `slot_bytes`) and `session_bytes` (unchanged by batching).
pub fn json(c: &Checked) -> Value {
    let d = &c.derived;
    json!({
        "family": c.family(),
        "file": c.source.path.display().to_string(),
        "spec_sha256": c.spec_sha256,
        "operating_point": d.operating_point,
        "quantities": d.quantities.iter().map(|q| json!({"name": q.name, "value": q.value, "formula": q.derivation.formula})).collect::<Vec<_>>(),
        "clocks": d.clocks.iter().map(|k| json!({"name": k.name, "base": k.base, "per_base": k.per_base, "factors": k.factors})).collect::<Vec<_>>(),
        "constants": d.constants.iter().map(|k| json!({"name": k.name, "dtype": k.dtype.name(), "shape": k.shape, "bytes": k.bytes, "placement": k.placement.name()})).collect::<Vec<_>>(),
        "regions": regions_json(d),
        "callables": callables_json(d),
        "arena_bytes": d.arena.total_bytes,
        "session_bytes": d.arena.session_bytes,
        "process_bytes": d.arena.process_bytes(),
        "arena": arena_json(&d.arena),
        "stock_bytes": d.stock_bytes,
        "capture_limit": d.capture_limit,
        "batching": super::batch::json(d),
        "operating_points": c.operating_points.iter().map(|op| json!({
            "name": op.operating_point,
            "overrides": op.overrides.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
            "regions": regions_json(op),
            "callables": callables_json(op),
            "arena_bytes": op.arena.total_bytes,
            "session_bytes": op.arena.session_bytes,
            "process_bytes": op.arena.process_bytes(),
            "arena": arena_json(&op.arena),
            "batching": super::batch::json(op),
        })).collect::<Vec<_>>(),
        "diagnostics": c.warnings.to_json(),
    })
}

/// The JSON object for a spec that failed to check.
pub fn json_errors(d: &Diagnostics) -> Value {
    json!({
        "family": Value::Null,
        "file": d.source.path.display().to_string(),
        "spec_sha256": crate::sha256_hex(d.source.text.as_bytes()),
        "regions": [],
        "callables": [],
        "diagnostics": d.to_json(),
    })
}

/// The JSON object of a spec that could not be read at all (`dcc check --format json` prints one
/// object per input, so a missing or unreadable file still has its line): the shape of
/// [`json_errors`], with the I/O error as its one diagnostic (code `io`, no position).
pub fn json_io_error(path: &std::path::Path, message: &str) -> Value {
    let file = path.display().to_string();
    json!({
        "family": Value::Null,
        "file": file,
        "spec_sha256": Value::Null,
        "regions": [],
        "callables": [],
        "diagnostics": [{
            "severity": "error",
            "code": "io",
            "message": message,
            "file": file,
            "line": Value::Null,
            "column": Value::Null,
            "label": Value::Null,
            "help": Value::Null,
        }],
    })
}
