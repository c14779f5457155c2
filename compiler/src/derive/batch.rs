//! Cross-session batching (`batch: [1, 2, 4, 8, 16]`): the catalog of a batched callable is its
//! classes × its batch sizes, each batched signature a (class, B) pair, B sessions of one class
//! presenting their rows to one graph.
//!
//! * **Rows per session** come from the callable's staged inputs (`{dtype, shape}`, the tensors
//!   a session hands over each call): their leading axis is the session's rows (every staged
//!   input whose leading extent is not 1 must agree; a leading extent of 1 is a per-session
//!   vector such as a speaker embedding), times `row_copies` (the rows each one becomes inside
//!   the call: classifier-free guidance runs every frame twice). For Token2Wav's flow, `mu` is
//!   `[f_chunk, mel_bins]` and `row_copies: cfg`: 50 × 2 = 100 rows.
//! * **Which classes batch.** Sessions batch only with sessions of the same class. A class
//!   whose staged inputs have the steady shapes (the only phase, or `steady`) batches; one whose
//!   inputs differ (a `first` or `flush` phase with other lengths) is presented by one session
//!   at a time and runs alone, at B = 1. Graphs = Σ over classes of |sizes| or 1.
//! * **M_reserve in rows**: the largest row count any graph presents, largest B × rows.
//! * **Bytes.** The per-process regions whose lifetime is one call (`operator`, `unit`) and
//!   that a batched callable reads or writes hold one call's state: a batch of B needs B of
//!   them (one solver workspace per batch slot). The per-session part is unchanged (each
//!   session keeps its own), and `process` regions are one copy whatever B is.
//!
//! Bounds (**E0043**): a batched callable must be captured (batching replays graphs), its
//! graphs must stay within the capture limit, and its staged inputs must say its rows.

use super::Deriver;
use super::types::*;
use crate::diag::{Code, Diagnostic};
use crate::expr;
use crate::ir::*;

impl Deriver<'_> {
    /// Derive every batched callable's catalog (into `callables`) and what batching costs the
    /// process; `None` after an error, `Some(None)` when nothing is batched.
    pub(super) fn batching(
        &mut self,
        callables: &mut [DerivedCallable],
        regions: &[DerivedRegion],
        arena: &DerivedArena,
        limit: u64,
    ) -> Option<Option<DerivedBatching>> {
        let spec = self.spec;
        let mut ok = true;
        for (c, dc) in spec.callables.iter().zip(callables.iter_mut()) {
            if let Some(b) = &c.batch {
                match self.batch(c, b, dc, limit) {
                    Some(db) => dc.batch = Some(db),
                    None => ok = false,
                }
            }
        }
        if !ok {
            return None;
        }
        let batched: Vec<&DerivedCallable> =
            callables.iter().filter(|c| c.batch.is_some()).collect();
        if batched.is_empty() {
            return Some(None);
        }
        let largest = batched
            .iter()
            .filter_map(|c| c.batch.as_ref()?.sizes.last().copied())
            .max()
            .unwrap_or(1);
        let m_reserve_rows = batched
            .iter()
            .filter_map(|c| c.batch.as_ref().map(|b| b.m_reserve_rows))
            .max()
            .unwrap_or(0);
        let touched = |name: &str| {
            batched
                .iter()
                .any(|c| c.reads.iter().chain(&c.writes).any(|r| r == name))
        };
        let mut slot_regions = Vec::new();
        let mut slot_bytes = 0u64;
        for s in arena.slots.iter().filter(|s| !s.per_session) {
            let per_call = regions
                .iter()
                .find(|r| r.name == s.region)
                .is_some_and(|r| {
                    matches!(
                        r.lifetime,
                        Lifetime::Operator | Lifetime::Iteration | Lifetime::Unit
                    )
                });
            if per_call && touched(&s.region) {
                slot_regions.push(s.region.clone());
                slot_bytes = slot_bytes.checked_add(s.padded_bytes)?;
            }
        }
        let mut out = DerivedBatching {
            largest,
            slot_regions,
            slot_bytes,
            process_bytes_at_largest: 0,
            m_reserve_rows,
        };
        let Some(at) = out.process_bytes_at(arena, largest) else {
            self.overflow(
                spec.family.span,
                "the per-process bytes at the largest batch",
            );
            return None;
        };
        out.process_bytes_at_largest = at;
        Some(Some(out))
    }

    /// One batched callable: its rows, classes, graphs and bounds.
    fn batch(
        &mut self,
        c: &Callable,
        b: &Batch,
        dc: &DerivedCallable,
        limit: u64,
    ) -> Option<DerivedBatch> {
        let name = &c.name.value;
        let reserve = dc.reserve();
        if dc.verdict != Verdict::Captured || !reserve.complete || reserve.classes.is_empty() {
            self.push(
                Diagnostic::error(
                    Code::BatchBound,
                    b.span,
                    format!(
                        "callable `{name}` declares batch sizes, but its graphs are not captured (verdict `{}`)",
                        dc.verdict.label()
                    ),
                )
                .label("batching replays captured graphs")
                .help(format!(
                    "remove `batch:` or make the catalog capturable: {}",
                    dc.reason
                )),
            );
            return None;
        }
        let copies = match &b.row_copies {
            Some(e) => Some((e, self.eval_at_least(e, 1, "`row_copies`")?)),
            None => None,
        };
        // The reference class: the steady phase's shapes (every class without phases).
        let steady = reserve
            .classes
            .iter()
            .find(|k| {
                k.phase
                    .as_deref()
                    .is_none_or(|p| p.split(", ").any(|x| x.starts_with("steady")))
            })
            .unwrap_or(&reserve.classes[0]);
        let staged = |k: &ClassSig| -> Vec<(String, Vec<u64>)> {
            k.args
                .iter()
                .filter(|a| a.bound_to.is_none())
                .map(|a| (a.name.clone(), a.dims.clone()))
                .collect()
        };
        let reference = staged(steady);
        let inputs: Vec<&TensorArg> = c
            .inputs
            .iter()
            .filter(|a| matches!(a.source, ArgSource::Tensor { .. }))
            .collect();
        if inputs.is_empty() {
            self.push(
                Diagnostic::error(
                    Code::BatchBound,
                    b.span,
                    format!("batched callable `{name}` has no staged input to count its rows by"),
                )
                .label("rows per session unknown")
                .help("a batched call stacks the sessions' staged inputs (`{dtype, shape}`) along their leading axis; declare them, or remove `batch:`"),
            );
            return None;
        }
        let lead = |dims: &[u64]| dims.first().copied().unwrap_or(1);
        let mut row_input: Option<(&str, u64)> = None;
        for (arg, dims) in &reference {
            let l = lead(dims);
            match row_input {
                _ if l == 1 => {}
                None => row_input = Some((arg, l)),
                Some((first, rows)) if rows != l => {
                    let span_of = |n: &str| {
                        inputs
                            .iter()
                            .find(|a| a.name.value == n)
                            .map(|a| a.span)
                            .unwrap_or(b.span)
                    };
                    self.push(
                        Diagnostic::error(
                            Code::BatchBound,
                            span_of(arg),
                            format!(
                                "the staged inputs of batched callable `{name}` disagree on the rows a session presents: `{first}` has {rows}, `{arg}` {l}"
                            ),
                        )
                        .label(format!("leading extent {l}"))
                        .with_secondary(span_of(first), format!("leading extent {rows}"))
                        .with_secondary(b.span, "batched here")
                        .help("a batched call stacks every staged input along its leading axis, so those axes must be the session's rows: give them one extent (1 for a per-session vector)"),
                    );
                    return None;
                }
                Some(_) => {}
            }
        }
        let (row_name, lead_rows) = row_input.map_or((None, 1), |(n, l)| (Some(n), l));
        let Some(rows_value) = lead_rows.checked_mul(copies.map_or(1, |(_, v)| v)) else {
            self.overflow(b.span, "the row count per session");
            return None;
        };
        let rows_per_session = self.rows_derivation(c, row_name, lead_rows, copies, rows_value);
        let batchable: Vec<bool> = reserve
            .classes
            .iter()
            .map(|k| staged(k) == reference)
            .collect();
        let sizes: Vec<u64> = b.sizes.iter().map(|s| s.value).collect();
        let per_class = sizes.len() as u64;
        let graphs = batchable
            .iter()
            .map(|&x| if x { per_class } else { 1 })
            .sum::<u64>();
        if graphs > limit {
            let classes = batchable.iter().filter(|&&x| x).count();
            let fit =
                limit.saturating_sub((batchable.len() - classes) as u64) / (classes.max(1) as u64);
            self.push(
                Diagnostic::error(
                    Code::BatchBound,
                    b.span,
                    format!(
                        "batched callable `{name}` needs {graphs} graphs ({classes} batchable classes × {per_class} sizes{}), more than the capture limit {limit}",
                        if classes < batchable.len() {
                            format!(" + {} classes alone", batchable.len() - classes)
                        } else {
                            String::new()
                        }
                    ),
                )
                .label(format!("{per_class} sizes"))
                .help(format!(
                    "keep at most {fit} sizes in `batch:`, or raise `capture_limit:` (every batch size is one captured graph per class)"
                )),
            );
            return None;
        }
        let mut rows = Vec::new();
        for &s in &sizes {
            let Some(r) = s.checked_mul(rows_value) else {
                self.overflow(b.span, "the row count of the largest batch");
                return None;
            };
            rows.push(r);
        }
        Some(DerivedBatch {
            m_reserve_rows: rows.last().copied().unwrap_or(rows_value),
            sizes,
            rows_per_session,
            row_input: row_name.map(str::to_string),
            row_copies: copies.map_or(1, |(_, v)| v),
            batchable,
            graphs,
            rows,
        })
    }

    /// `100 = f_chunk 50 * cfg 2`: the leading extent as the row input's shape expression when
    /// it evaluates to the class's value at this point (else the number), times `row_copies`.
    fn rows_derivation(
        &self,
        c: &Callable,
        row_input: Option<&str>,
        lead: u64,
        copies: Option<(&Expr, u64)>,
        value: u64,
    ) -> Derivation {
        let lead_expr = row_input
            .and_then(|n| c.inputs.iter().find(|a| a.name.value == n))
            .and_then(|a| match &a.source {
                ArgSource::Tensor { shape, .. } => shape.first(),
                _ => None,
            })
            .filter(|e| {
                expr::eval(e, &|n: &str| self.env.get(n).copied())
                    .is_ok_and(|v| u64::try_from(v) == Ok(lead))
            });
        let lead_text = lead_expr.map_or(lead.to_string(), super::paren);
        let mut exprs: Vec<&Expr> = lead_expr.into_iter().collect();
        let formula = match copies {
            Some((e, _)) => {
                exprs.push(e);
                format!("{lead_text} * {}", super::paren(e))
            }
            None => lead_text,
        };
        self.derivation(value, formula, &exprs)
    }
}
