//! Reports of a [`Checked`] spec: a readable text report (tables, every derivation shown with its
//! formula and inputs) and a JSON object (`dcc check --format json`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::derive::types::*;
use crate::ir::Granularity;
use crate::{Checked, Diagnostics};

/// `526909440 B (527 MB, 502.5 MiB)`.
pub fn fmt_bytes(b: u64) -> String {
    let with_sep = group_digits(b);
    if b < 1000 {
        return format!("{with_sep} B");
    }
    let (v, unit) = if b >= 1_000_000_000 {
        (b as f64 / 1e9, "GB")
    } else if b >= 1_000_000 {
        (b as f64 / 1e6, "MB")
    } else {
        (b as f64 / 1e3, "kB")
    };
    let mib = b as f64 / (1024.0 * 1024.0);
    if mib >= 0.1 {
        format!("{with_sep} B ({} {unit}, {mib:.3} MiB)", sig3(v))
    } else {
        format!("{with_sep} B ({} {unit})", sig3(v))
    }
}

fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn list(v: &[u64], max: usize) -> String {
    if v.len() <= max {
        format!(
            "{{{}}}",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        let head: Vec<String> = v[..3].iter().map(|x| x.to_string()).collect();
        let tail: Vec<String> = v[v.len() - 2..].iter().map(|x| x.to_string()).collect();
        format!(
            "{{{}, …, {}}} ({} extents)",
            head.join(", "),
            tail.join(", "),
            v.len()
        )
    }
}

fn table(rows: &[Vec<String>], right: &[bool]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0usize; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        out.push_str("  ");
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if right.get(i).copied().unwrap_or(false) {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            } else {
                out.push_str(c);
                if i + 1 < r.len() {
                    out.push_str(&" ".repeat(pad));
                }
            }
            if i + 1 < r.len() {
                out.push_str("  ");
            }
        }
        out.push('\n');
        if ri == 0 {
            out.push_str("  ");
            let total: usize = w.iter().sum::<usize>() + 2 * (cols.saturating_sub(1));
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

fn rho_text(r: Ratio) -> String {
    format!("{:.1}×", r.rounded1())
}

fn envelope_dims(r: &DerivedRegion) -> String {
    r.envelope_axes
        .iter()
        .map(|d| d.value.to_string())
        .collect::<Vec<_>>()
        .join("×")
}

/// The text report for one checked spec.
pub fn text(c: &Checked) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}  ({}, sha256 {})",
        c.family(),
        c.source.path.display(),
        &c.spec_sha256[..16.min(c.spec_sha256.len())]
    );
    if let Some(d) = &c.spec.description {
        let _ = writeln!(o, "  {}", d.trim());
    }
    let d = &c.derived;
    o.push_str("\nquantities\n");
    let mut rows = vec![vec!["name".into(), "value".into(), "definition".into()]];
    for q in &d.quantities {
        rows.push(vec![
            q.name.clone(),
            q.value.to_string(),
            if q.derivation.inputs.is_empty() {
                String::new()
            } else {
                q.derivation.explain()
            },
        ]);
    }
    o.push_str(&table(&rows, &[false, true, false]));
    o.push_str("\nclocks\n");
    let mut rows = vec![vec!["clock".into(), "relation".into()]];
    for k in &d.clocks {
        let rel = if !k.factors.is_empty() {
            format!("product {}", k.factors.join(" × "))
        } else if k.base == k.name {
            "base".into()
        } else {
            format!("{} per {}", k.per_base, k.base)
        };
        rows.push(vec![k.name.clone(), rel]);
    }
    o.push_str(&table(&rows, &[false, false]));
    if !d.constants.is_empty() {
        o.push_str("\ndevice-resident constants\n");
        let mut rows = vec![vec![
            "constant".into(),
            "dtype".into(),
            "shape".into(),
            "bytes".into(),
        ]];
        for k in &d.constants {
            rows.push(vec![
                k.name.clone(),
                k.dtype.name().into(),
                format!("{:?}", k.shape),
                group_digits(k.bytes),
            ]);
        }
        o.push_str(&table(&rows, &[false, false, false, true]));
    }
    o.push_str(&point(d, true));
    for op in &c.operating_points {
        o.push_str(&point(op, false));
    }
    if !c.warnings.items.is_empty() {
        o.push('\n');
        o.push_str(&c.warnings.render());
    }
    o
}

fn point(d: &Derived, full: bool) -> String {
    let mut o = String::new();
    let title = if d.overrides.is_empty() {
        format!("operating point `{}`", d.operating_point)
    } else {
        format!(
            "operating point `{}` ({})",
            d.operating_point,
            d.overrides
                .iter()
                .map(|(n, v)| format!("{n} = {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let _ = writeln!(o, "\n== {title} ==");
    o.push_str("\nregions\n");
    let mut rows = vec![vec![
        "region".into(),
        "clock".into(),
        "retention".into(),
        "attended".into(),
        "envelope".into(),
        "live bytes".into(),
        "stock".into(),
        "reserved bytes".into(),
        "ρ".into(),
        "K_r".into(),
    ]];
    for r in &d.regions {
        let ret = match (r.width.pinned, r.order) {
            (_, Some(ord)) => match &r.keep {
                Some(k) if k.rule == crate::ir::KeepRule::Swapped => format!(
                    "prompt+history ({}, {} rule)",
                    ord.name(),
                    ord.other().name()
                ),
                Some(k) if k.rule == crate::ir::KeepRule::Split => {
                    format!("prompt+history ({}, split)", ord.name())
                }
                _ => format!("prompt+history ({})", ord.name()),
            },
            (true, None) => "pinned".into(),
            (false, None) => "window".into(),
        };
        if r.stock.is_empty() {
            rows.push(vec![
                r.name.clone(),
                r.axes.join("×"),
                ret.clone(),
                r.attended_extent.value.to_string(),
                envelope_dims(r),
                group_digits(r.live_bytes),
                "-".into(),
                "-".into(),
                "-".into(),
                r.width.width.value.to_string(),
            ]);
        }
        for (i, s) in r.stock.iter().enumerate() {
            let first = i == 0;
            rows.push(vec![
                if first { r.name.clone() } else { String::new() },
                if first {
                    r.axes.join("×")
                } else {
                    String::new()
                },
                if first { ret.clone() } else { String::new() },
                if first {
                    r.attended_extent.value.to_string()
                } else {
                    String::new()
                },
                if first {
                    envelope_dims(r)
                } else {
                    String::new()
                },
                if first {
                    group_digits(r.live_bytes)
                } else {
                    String::new()
                },
                format!(
                    "{} {}",
                    s.name,
                    s.extents
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join("×")
                ),
                group_digits(s.reserved_bytes),
                rho_text(s.rho),
                if first {
                    r.width.width.value.to_string()
                } else {
                    String::new()
                },
            ]);
        }
    }
    o.push_str(&table(
        &rows,
        &[
            false, false, false, true, true, true, false, true, true, true,
        ],
    ));
    let _ = writeln!(
        o,
        "  session arena: {} = live {} + alignment {} (offsets aligned to {} B)   stock reservations: {}",
        fmt_bytes(d.arena.total_bytes),
        group_digits(d.arena.live_bytes),
        group_digits(d.arena.padding()),
        d.arena.align,
        fmt_bytes(d.stock_bytes)
    );
    o.push_str("\ncallables\n");
    let mut rows = vec![vec![
        "callable".into(),
        "capture".into(),
        "effects".into(),
        "𝓛".into(),
        "∏K_r".into(),
        "classes".into(),
        "verdict".into(),
        "M_reserve step".into(),
        "M_reserve chunk".into(),
    ]];
    for c in &d.callables {
        rows.push(vec![
            c.name.clone(),
            c.granularity.name().into(),
            c.effects.spelling(),
            list(&c.attended_extents, 6),
            c.catalog_width.to_string(),
            c.classes
                .map(|n| n.to_string())
                .unwrap_or_else(|| "unbounded".into()),
            c.verdict.label().into(),
            group_digits(c.reserve_step.total_bytes),
            group_digits(c.reserve_chunk.total_bytes),
        ]);
    }
    o.push_str(&table(
        &rows,
        &[false, false, false, false, true, true, false, true, true],
    ));
    if !full {
        o.push_str("\nderivations\n");
        for r in &d.regions {
            let _ = writeln!(o, "  {}: envelope {}", r.name, r.envelope_extent.explain());
            for s in &r.stock {
                let _ = writeln!(
                    o,
                    "    ρ[{}] = {} / {} = {:.3} ≈ {}",
                    s.name,
                    s.reserved.explain(),
                    r.envelope_extent.value,
                    s.rho.as_f64(),
                    rho_text(s.rho)
                );
            }
        }
        return o;
    }
    o.push_str("\nregion derivations\n");
    for r in &d.regions {
        let _ = writeln!(
            o,
            "  {} ({}, {}, {}, {})",
            r.name,
            r.lifetime.name(),
            r.mutability.name(),
            r.placement.name(),
            r.dtype.name()
        );
        let _ = writeln!(
            o,
            "    attended extent A_r  {}",
            r.attended_extent.explain()
        );
        if !r.width.pinned {
            let _ = writeln!(o, "    lower bound A_r⁻     {}", r.attended_min.explain());
        }
        let axes: Vec<String> = r
            .axes
            .iter()
            .zip(&r.envelope_axes)
            .map(|(a, e)| format!("{a} {}", e.value))
            .collect();
        let _ = writeln!(
            o,
            "    envelope             {}   [{}]",
            r.envelope_extent.explain(),
            axes.join(", ")
        );
        let _ = writeln!(o, "    bytes per tick β∏    {}", r.tick_bytes.explain());
        let _ = writeln!(
            o,
            "    storage layout       [{}] = {:?}{}",
            r.dim_names.join(", "),
            r.dims,
            if r.layout == crate::ir::default_layout(r.axes.len(), r.shape.len()) {
                ""
            } else {
                "   (declared `layout:`)"
            }
        );
        if let (Some(k), Some(ord)) = (&r.keep, r.order) {
            let _ = writeln!(o, "    kept slices          {}", k.describe(ord));
        }
        let _ = writeln!(
            o,
            "    live bytes           {} × {} = {}",
            r.envelope_extent.value,
            r.tick_bytes.value,
            fmt_bytes(r.live_bytes)
        );
        let w = &r.width;
        match &w.stride {
            Some(s) => {
                let _ = writeln!(
                    o,
                    "    catalog width K_r    {}   (W_r = {}, s_r = {})",
                    w.width.explain(),
                    w.window.value,
                    s.explain()
                );
            }
            None => {
                let _ = writeln!(o, "    catalog width K_r    {}", w.width.explain());
            }
        }
        let _ = writeln!(o, "    attended extents     {}", list(&r.catalog, 12));
        for s in &r.stock {
            let _ = writeln!(
                o,
                "    ρ[{}]{}= reserved {} / live {} = {:.3} ≈ {}   ({} reserved)",
                s.name,
                " ".repeat(14usize.saturating_sub(s.name.chars().count())),
                s.reserved.explain(),
                r.envelope_extent.value,
                s.rho.as_f64(),
                rho_text(s.rho),
                fmt_bytes(s.reserved_bytes)
            );
        }
    }
    o.push_str("\ncallable derivations\n");
    for c in &d.callables {
        let _ = writeln!(
            o,
            "  {} (capture: {}, effects: {}, query: {})",
            c.name,
            c.granularity.name(),
            c.effects.spelling(),
            match c.query {
                crate::ir::QueryLength::Fixed => "fixed",
                crate::ir::QueryLength::Traffic => "traffic",
            }
        );
        if let Some(r) = &c.specializing_region {
            let _ = writeln!(
                o,
                "    𝓛 ({r})  {}   K = {}",
                list(&c.attended_extents, 12),
                c.catalog_size.explain()
            );
        }
        for w in &c.region_widths {
            let _ = writeln!(
                o,
                "    K_{} = {}{}",
                w.region,
                w.width,
                if w.pinned { " (pinned)" } else { "" }
            );
        }
        let _ = writeln!(o, "    {}", classes_text(c));
        if let Some(f) = &c.flush_classes {
            let _ = writeln!(
                o,
                "    partial flushes add ≤ {} classes{}: {}",
                f.value,
                c.flush_clock
                    .as_ref()
                    .map(|k| format!(" on the {k} clock"))
                    .unwrap_or_default(),
                f.explain()
            );
        }
        let _ = writeln!(o, "    verdict: {} — {}", c.verdict.label(), c.reason);
        for r in [&c.reserve_step, &c.reserve_chunk] {
            let g = match r.granularity {
                Granularity::Step => "step ",
                Granularity::Chunk => "chunk",
            };
            let _ = writeln!(
                o,
                "    M_reserve[{g}] = staging {} + write-through {} = {}{}",
                group_digits(r.staging_bytes),
                group_digits(r.write_through_bytes),
                fmt_bytes(r.total_bytes),
                if r.complete {
                    ""
                } else {
                    "  (over the extent catalog only)"
                }
            );
            let _ = writeln!(
                o,
                "        without aliasing: staging {}; largest input {}; {} host graph launch{} per chunk",
                group_digits(r.staging_unaliased_bytes),
                r.largest_input
                    .as_ref()
                    .map(|(n, b)| format!("`{n}` {}", fmt_bytes(*b)))
                    .unwrap_or_else(|| "-".into()),
                r.host_launches_per_chunk,
                if r.host_launches_per_chunk == 1 {
                    ""
                } else {
                    "es"
                }
            );
        }
        let _ = writeln!(
            o,
            "    host launches chunk/step = {}/{} (1/n_steps)",
            c.launch_ratio.num, c.launch_ratio.den
        );
    }
    o
}

/// `classes 3 (≤ |Q_o| 1 × ∏K_r 9: conformer_cache and upsample_cache advance together on the
/// token clock)`, `classes 3 (= |Q_o| 1 × ∏K_r 3)`: the reachable catalog beside eq. 7's bound.
fn classes_text(c: &DerivedCallable) -> String {
    let Some(n) = c.classes else {
        return format!(
            "classes unbounded (Q_o traffic-dependent; ∏K_r {}, {} reachable extent tuple{})",
            c.catalog_width,
            c.reachable
                .map(|n| n.to_string())
                .unwrap_or_else(|| "more than 2^64".into()),
            if c.reachable == Some(1) { "" } else { "s" }
        );
    };
    if c.classes == c.classes_bound {
        return format!(
            "classes {n} (= |Q_o| {} × ∏K_r {})",
            c.configs, c.catalog_width
        );
    }
    format!(
        "classes {n} (≤ |Q_o| {} × ∏K_r {}: {})",
        c.configs,
        c.catalog_width,
        crate::derive::lockstep_text(&c.lockstep)
    )
}

fn derivation_json(d: &Derivation) -> Value {
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
        "regions": a.slots.iter().map(|s| json!({
            "name": s.region,
            "offset": s.offset,
            "bytes": s.bytes,
            "padded_bytes": s.padded_bytes,
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
            })
        })
        .collect()
}

/// The JSON object for one checked spec (`dcc check --format json`).
///
/// `arena_bytes` is the bytes one session's arena allocates, alignment padding included: the
/// generated `ARENA_BYTES`, byte for byte. `arena` lays it out: `align`, `live_bytes` (Σ region
/// bytes), `padding_bytes`, `total_bytes` (= `arena_bytes`) and each arena region's `offset`,
/// `bytes` and `padded_bytes`, in offset order.
///
/// Each entry of `callables` (and of `operating_points[].callables`) carries the catalog as
/// follows; `classes` is what the generated catalog lists, the rest says where it comes from:
///
/// - `specializing_region`: the first varying region the callable reads (the first region read
///   when all are pinned); `attended_extents`: that region's attended extents 𝓛, ascending
///   (eq. 4), and `catalog_size`: their count K with its derivation.
/// - `region_widths`: K_r per region read (eq. 7; 1 when pinned).
/// - `catalog_width`: ∏ K_r over the regions read — eq. 7's width, the bound on the extent
///   tuples (9 for Token2Wav's encoder, whose two caches have K_r = 3 each).
/// - `reachable`: the extent tuples a session can reach (derive/reach.rs): regions that advance
///   together (same base clock, start and stride in base ticks) share one walk and reach
///   `max K_r` tuples between them, independent ones multiply; ≤ `catalog_width` (3 for the
///   encoder). `lockstep`: the groups of more than one region that advance together, each with
///   its base `clock` and its `reachable` tuples.
/// - `configs`: |𝒬_o|. `classes`: |𝒬_o| × `reachable`, the signature classes of the catalog
///   (the generated `CATALOG` lists exactly these when captured); `classes_bound`:
///   |𝒬_o| × `catalog_width` (eq. 7). Both are null when 𝒬_o is traffic-dependent.
/// - `flush_classes`: the bound on extra classes from partial flushes (≤ s_r of the
///   specializing region, capped by the admission bound converted to its clock), counted in
///   ticks of `flush_clock`.
/// - `verdict`, `reason`: `captured` when `classes` ≤ the capture limit.
/// - `m_reserve`: eq. 6 per granularity, summed over the reachable classes (`complete` false
///   when they could not all be enumerated).
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
        "arena": arena_json(&d.arena),
        "stock_bytes": d.stock_bytes,
        "capture_limit": d.capture_limit,
        "operating_points": c.operating_points.iter().map(|op| json!({
            "name": op.operating_point,
            "overrides": op.overrides.iter().map(|(n, v)| json!({"name": n, "value": v})).collect::<Vec<_>>(),
            "regions": regions_json(op),
            "callables": callables_json(op),
            "arena_bytes": op.arena.total_bytes,
            "arena": arena_json(&op.arena),
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
