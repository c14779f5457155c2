//! The batched catalog as Rust (`derive/batch.rs` computes every number): per batched callable
//! `<CALLABLE>_BATCH` (the sizes), `<CALLABLE>_ROWS_PER_SESSION`, `<CALLABLE>_BATCH_ROWS`,
//! `<CALLABLE>_BATCHABLE` (per class of `<CALLABLE>_CATALOG`), `<CALLABLE>_GRAPHS` and
//! `<CALLABLE>_M_RESERVE_ROWS`; for the contract `MAX_BATCH`, `M_RESERVE_ROWS`,
//! `BATCH_SLOT_REGIONS`, `BATCH_SLOT_BYTES`, `PROCESS_BYTES_AT_BATCH` and the `const fn
//! process_bytes(batch)` the template spells.
//!
//! The row maximum is `M_RESERVE_ROWS`, not `M_RESERVE`: a callable's `M_RESERVE` is eq. 6's
//! bytes (staging + write-through), a different quantity.

use crate::derive::types::{Derived, DerivedBatching};

use super::model::ConstView;
use super::spell::*;

/// The batching items of one module: constants (each with the name the registry must claim)
/// and, when anything is batched, the `process_bytes` function.
pub struct BatchView {
    pub consts: Vec<ConstView>,
    /// Whether to emit `process_bytes(batch)` and its compile-time check.
    pub process_fn: bool,
}

/// The batching constants of `d` (the base operating point).
pub fn batch_view(d: &Derived) -> BatchView {
    let mut consts = Vec::new();
    for dc in &d.callables {
        let Some(b) = &dc.batch else { continue };
        let u = upper(&dc.name);
        let sizes: Vec<u64> = b.sizes.clone();
        consts.push(c(
            vec![
                format!(
                    "Batch sizes of callable `{}`: the graphs of every batchable class are captured for B = {} sessions per call (`batch:`).",
                    dc.name,
                    plain_list(&sizes)
                ),
                "A session that cannot batch with others runs alone, at B = 1.".into(),
            ],
            &format!("{u}_BATCH"),
            "&[usize]",
            format!("&{}", array(&sizes)),
        ));
        consts.push(usize_c(
            vec![
                explain(&b.rows_per_session),
                format!(
                    "Rows one session presents to a batched `{}` call: the leading extent of its staged inputs{} × `row_copies`.",
                    dc.name,
                    b.row_input
                        .as_deref()
                        .map(|n| format!(" (`{n}`)"))
                        .unwrap_or_default()
                ),
            ],
            &format!("{u}_ROWS_PER_SESSION"),
            b.rows_per_session.value,
        ));
        consts.push(c(
            vec![format!(
                "Rows a batched `{}` call presents at each size of `{u}_BATCH`: B × {u}_ROWS_PER_SESSION.",
                dc.name
            )],
            &format!("{u}_BATCH_ROWS"),
            "&[usize]",
            format!("&{}", array(&b.rows)),
        ));
        consts.push(c(
            vec![format!(
                "Per class of `{u}_CATALOG`: whether sessions in it batch (its staged inputs have the steady shapes); a class that does not runs alone."
            )],
            &format!("{u}_BATCHABLE"),
            &format!("[bool; {}]", b.batchable.len()),
            format!(
                "[{}]",
                b.batchable
                    .iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
        consts.push(usize_c(
            vec![format!(
                "Graphs `{}` captures batched: each batchable class once per size, every other class once ({} of {} classes batch).",
                dc.name,
                b.batchable.iter().filter(|&&x| x).count(),
                b.batchable.len()
            )],
            &format!("{u}_GRAPHS"),
            b.graphs,
        ));
        consts.push(usize_c(
            vec![format!(
                "The largest row count a `{}` graph presents: {} × {} rows per session.",
                dc.name,
                sizes.last().copied().unwrap_or(1),
                b.rows_per_session.value
            )],
            &format!("{u}_M_RESERVE_ROWS"),
            b.m_reserve_rows,
        ));
    }
    let Some(bt) = &d.batching else {
        return BatchView {
            consts,
            process_fn: false,
        };
    };
    consts.extend(contract_consts(bt));
    BatchView {
        consts,
        process_fn: true,
    }
}

/// The contract-wide batching constants.
fn contract_consts(bt: &DerivedBatching) -> Vec<ConstView> {
    vec![
        usize_c(
            vec!["The largest batch size of any callable.".into()],
            "MAX_BATCH",
            bt.largest,
        ),
        usize_c(
            vec![
                "The largest row count any batched graph presents (what a batched GEMM's row \
                 dimension must hold)."
                    .into(),
            ],
            "M_RESERVE_ROWS",
            bt.m_reserve_rows,
        ),
        c(
            vec![
                "The per-process regions that get one copy per batch slot: lifetime `operator` or \
                 `unit` (dead once the call returns) and read or written by a batched callable."
                    .into(),
            ],
            "BATCH_SLOT_REGIONS",
            "&[&str]",
            str_slice(&bt.slot_regions),
        ),
        usize_c(
            vec![format!(
                "Bytes each batch slot beyond the first adds to the per-process part: {} (aligned).",
                if bt.slot_regions.is_empty() {
                    "no region".to_string()
                } else {
                    bt.slot_regions.join(" + ")
                }
            )],
            "BATCH_SLOT_BYTES",
            bt.slot_bytes,
        ),
        usize_c(
            vec![format!(
                "The per-process part at the largest batch (B = {}): PROCESS_BYTES + {} × \
                 BATCH_SLOT_BYTES. The per-session part does not grow: each session keeps its own.",
                bt.largest,
                bt.largest.saturating_sub(1)
            )],
            "PROCESS_BYTES_AT_BATCH",
            bt.process_bytes_at_largest,
        ),
    ]
}

/// The batching constants an operating point changes (bytes; rows follow the base).
pub fn point_consts(d: &Derived) -> Vec<ConstView> {
    let Some(bt) = &d.batching else {
        return Vec::new();
    };
    vec![
        usize_c(
            vec!["Bytes each batch slot beyond the first adds at this operating point.".into()],
            "BATCH_SLOT_BYTES",
            bt.slot_bytes,
        ),
        usize_c(
            vec![format!(
                "The per-process part at the largest batch (B = {}) at this operating point.",
                bt.largest
            )],
            "PROCESS_BYTES_AT_BATCH",
            bt.process_bytes_at_largest,
        ),
    ]
}
