//! The `batching` section of the report (text and JSON): per batched callable its sizes, rows
//! per session, graphs, rows per size and M_reserve in rows; for the process, the bytes at the
//! largest batch (`derive/batch.rs` computes every number).

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::*;

/// The text section, empty when no callable declares `batch:`. `full` adds each callable's
/// batchable classes and the row derivation.
pub(super) fn text(d: &Derived, full: bool) -> String {
    let Some(bt) = &d.batching else {
        return String::new();
    };
    let mut o = String::from("\nbatching (B sessions of one class share a graph)\n");
    let mut rows = vec![vec![
        "callable".into(),
        "sizes B".into(),
        "rows/session".into(),
        "graphs".into(),
        "rows per size".into(),
        "M_reserve rows".into(),
    ]];
    for c in &d.callables {
        let Some(b) = &c.batch else { continue };
        rows.push(vec![
            c.name.clone(),
            bracket(&b.sizes),
            b.rows_per_session.value.to_string(),
            b.graphs.to_string(),
            bracket(&b.rows),
            group_digits(b.m_reserve_rows),
        ]);
    }
    o.push_str(&table(&rows, &[false, false, true, true, false, true]));
    if full {
        for c in &d.callables {
            let Some(b) = &c.batch else { continue };
            let batchable = b.batchable.iter().filter(|&&x| x).count();
            let source = match &b.row_input {
                Some(n) => format!("staged input `{n}`'s leading extent"),
                None => "every staged input has leading extent 1".into(),
            };
            let _ = writeln!(
                o,
                "  {}: rows/session {} ({source}{}); {} of {} classes batch{}; graphs {} = {}",
                c.name,
                b.rows_per_session.explain(),
                if b.row_copies > 1 {
                    " × row_copies"
                } else {
                    ""
                },
                batchable,
                b.batchable.len(),
                if batchable == b.batchable.len() {
                    " (their staged inputs have one shape)".to_string()
                } else {
                    let alone: Vec<String> = b
                        .batchable
                        .iter()
                        .enumerate()
                        .filter(|(_, x)| !**x)
                        .map(|(i, _)| i.to_string())
                        .collect();
                    let (what, verb) = if alone.len() == 1 {
                        ("class", "presents")
                    } else {
                        ("classes", "present")
                    };
                    format!(
                        " ({what} {} {verb} other shapes and run alone)",
                        alone.join(", ")
                    )
                },
                b.graphs,
                graphs_formula(b, batchable),
            );
        }
    }
    let slots = if bt.slot_regions.is_empty() {
        "no per-call region is touched by a batched callable".to_string()
    } else {
        format!(
            "per-call regions, one copy per batch slot: {}",
            bt.slot_regions.join(", ")
        )
    };
    let _ = writeln!(
        o,
        "  per process at B = {}: {} = {} + {} × {} ({slots})",
        bt.largest,
        fmt_bytes(bt.process_bytes_at_largest),
        group_digits(d.arena.process_bytes()),
        bt.largest.saturating_sub(1),
        group_digits(bt.slot_bytes),
    );
    let _ = writeln!(
        o,
        "  per session: unchanged, {} (each session keeps its own state)",
        fmt_bytes(d.arena.session_bytes)
    );
    o
}

/// `[1, 2, 4, 8, 16]`.
fn bracket(v: &[u64]) -> String {
    let items: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// `3 classes × 5 sizes`, or `2 classes × 5 sizes + 3 alone`.
fn graphs_formula(b: &DerivedBatch, batchable: usize) -> String {
    let alone = b.batchable.len() - batchable;
    let mut s = format!("{batchable} classes × {} sizes", b.sizes.len());
    if alone > 0 {
        let _ = write!(s, " + {alone} alone");
    }
    s
}

/// A callable's `batch` object (`null` when it is not batched).
pub(super) fn callable_json(b: Option<&DerivedBatch>) -> Value {
    let Some(b) = b else { return Value::Null };
    json!({
        "sizes": b.sizes,
        "rows_per_session": b.rows_per_session.value,
        "rows_per_session_derivation": super::json::derivation_json(&b.rows_per_session),
        "row_input": b.row_input,
        "row_copies": b.row_copies,
        "batchable": b.batchable,
        "graphs": b.graphs,
        "rows": b.rows,
        "m_reserve_rows": b.m_reserve_rows,
    })
}

/// The spec's `batching` object (`null` when nothing is batched).
pub(super) fn json(d: &Derived) -> Value {
    let Some(bt) = &d.batching else {
        return Value::Null;
    };
    json!({
        "largest": bt.largest,
        "m_reserve_rows": bt.m_reserve_rows,
        "slot_regions": bt.slot_regions,
        "slot_bytes": bt.slot_bytes,
        "process_bytes_at_largest": bt.process_bytes_at_largest,
        "session_bytes": d.arena.session_bytes,
    })
}
