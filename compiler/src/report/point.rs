//! The text report of one operating point: quantities' effects, regions, the arena, callables
//! and every derivation.

use std::fmt::Write as _;

use super::*;
use crate::ir::Granularity;

pub(super) fn point(d: &Derived, full: bool) -> String {
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
            _ if r.disabled => "disabled".into(),
            _ if r.width.unbounded => "none (unbounded)".into(),
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
    let part = |per_session: bool| {
        let names: Vec<&str> = d
            .arena
            .slots
            .iter()
            .filter(|s| s.per_session == per_session)
            .map(|s| s.region.as_str())
            .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let _ = writeln!(
        o,
        "    per session: {} (lifetime turn/session: {})",
        fmt_bytes(d.arena.session_bytes),
        part(true)
    );
    let _ = writeln!(
        o,
        "    per process: {} (lifetime operator/iteration/unit/process, shared by the sessions of a stream: {})",
        fmt_bytes(d.arena.process_bytes()),
        part(false)
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
            c.catalog_width_text(),
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
    o.push_str(&super::batch::text(d, full));
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
        if r.disabled {
            let _ = writeln!(
                o,
                "    disabled             extent 0 at this operating point: no bytes, one extent"
            );
        }
        if r.width.unbounded {
            let _ = writeln!(
                o,
                "    retention none       the state grows for the whole session; storage is sized for {} frames (A_r above), not bounded by the contract",
                r.attended_extent.value
            );
        }
        if !r.width.pinned {
            let _ = writeln!(o, "    lower bound A_r⁻     {}", r.attended_min.explain());
        }
        if !r.width.schedule.is_empty() {
            let list: Vec<String> = r.width.schedule.iter().map(u64::to_string).collect();
            let _ = writeln!(
                o,
                "    advances             [{}] then {} per call",
                list.join(", "),
                r.width.stride.as_ref().map_or(0, |s| s.value)
            );
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
    if c.verdict == crate::ir::Verdict::OutUnbounded {
        return format!(
            "classes unbounded (a region grows for the whole session; ∏K_r {} within the sized storage)",
            c.catalog_width_text()
        );
    }
    let steps = match c.specialized_steps {
        Some(n) if c.granularity == crate::ir::Granularity::Step => format!(" × steps {n}"),
        _ => String::new(),
    };
    let phases = if c.phases.is_empty() {
        String::new()
    } else {
        format!(" [phases {}]", c.phases.join(", "))
    };
    let Some(n) = c.classes else {
        return format!(
            "classes unbounded (Q_o traffic-dependent; ∏K_r {}, {} reachable extent tuple{})",
            c.catalog_width_text(),
            c.reachable
                .map(|n| n.to_string())
                .unwrap_or_else(|| "more than 2^64".into()),
            if c.reachable == Some(1) { "" } else { "s" }
        );
    };
    if c.classes == c.classes_bound {
        return format!(
            "classes {n} (= |Q_o| {} × ∏K_r {}{steps}){phases}",
            c.configs,
            c.catalog_width_text()
        );
    }
    let why = if c.lockstep.is_empty() {
        crate::derive::PHASES_TEXT.to_string()
    } else {
        crate::derive::lockstep_text(&c.lockstep)
    };
    format!(
        "classes {n} (≤ |Q_o| {} × ∏K_r {}{steps}: {why}){phases}",
        c.configs,
        c.catalog_width_text(),
    )
}
