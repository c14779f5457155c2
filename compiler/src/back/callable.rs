//! The view of one callable: its constants, admission predicate and captured signatures.

use crate::Checked;
use crate::derive::types::{ArgSig, ClassSig, Derived, DerivedCallable};
use crate::expr;
use crate::ir::{ArgSource, CmpOp, LayoutDim, Verdict};

use super::GenError;
use super::io::io_views;
use super::model::{CallableView, SigView, TensorView};
use super::spell::*;

/// One input of a signature; `d` is the operating point whose regions lay the input out (the
/// base's `checked.derived`, or a point's).
pub(super) fn tensor_view(
    d: &Derived,
    source: Option<&ArgSource>,
    a: &ArgSig,
    loop_clock: Option<&str>,
) -> TensorView {
    let strides = match source {
        Some(ArgSource::Region(rn)) => match d.region(&rn.value) {
            Some(reg) => {
                // A view into the region's storage: the envelope's strides (storage order),
                // minus the loop axis when one step's slice is passed.
                let mut s = packed_strides(&reg.dims);
                if a.dims.len() + 1 == reg.dims.len()
                    && let Some(i) = reg.axes.iter().position(|x| Some(x.as_str()) == loop_clock)
                    && let Some(at) = reg.layout.iter().position(|l| *l == LayoutDim::Axis(i))
                {
                    s.remove(at);
                }
                s
            }
            None => packed_strides(&a.dims),
        },
        _ => packed_strides(&a.dims),
    };
    TensorView {
        name: rust_str(&a.name),
        dims: format!("&{}", array(&a.dims)),
        strides: format!("&{}", array(&strides)),
        dtype: format!("dcc::DType::{}", dtype_variant(a.dtype)),
        aliased: a.aliased,
    }
}

/// One class of `dc`'s catalog at the operating point `d` (`dc` is `d`'s callable).
pub(super) fn sig_view(
    checked: &Checked,
    d: &Derived,
    dc: &DerivedCallable,
    class: &ClassSig,
) -> SigView {
    let ir = checked.spec.callable(&dc.name);
    let loop_clock = ir
        .and_then(|c| c.loop_clock.as_ref())
        .map(|l| l.value.as_str());
    let inputs = class
        .args
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let source = ir.and_then(|c| c.inputs.get(i)).map(|t| &t.source);
            tensor_view(d, source, a, loop_clock)
        })
        .collect();
    let attended = match &dc.specializing_region {
        Some(r) => class
            .extents
            .iter()
            .find(|(n, _)| n == r)
            .map(|(_, v)| *v)
            .or_else(|| d.region(r).map(|x| x.attended_extent.value))
            .unwrap_or(0),
        None => 0,
    };
    // The varying extents in read order, then the inner step index of a `specialize: step`
    // class (its signature differs by step even where the shapes do not).
    let scalars: Vec<String> = class
        .extents
        .iter()
        .map(|(_, v)| lit(*v))
        .chain(class.step.map(lit))
        .collect();
    let ext: Vec<String> = class
        .extents
        .iter()
        .map(|(n, v)| format!("{n} = {v}"))
        .collect();
    let mut what = if ext.is_empty() {
        "no varying extent".to_string()
    } else {
        ext.join(", ")
    };
    if let Some(p) = &class.phase {
        what.push_str(&format!("; phase {p}"));
    }
    if let Some(k) = class.step {
        what.push_str(&format!("; step {k}"));
    }
    SigView {
        docs: vec![format!(
            "Class {}: {what}; staging {} B.",
            class.index, class.staging_bytes
        )],
        class: class.index,
        attended: lit(attended),
        inputs,
        scalars: format!("&[{}]", scalars.join(", ")),
    }
}

pub(super) fn callable_view(
    checked: &Checked,
    d: &Derived,
    dc: &DerivedCallable,
    ty: String,
    catalog_static: String,
) -> Result<CallableView, GenError> {
    let ir = checked.spec.callable(&dc.name);
    let mut docs = vec![format!("Callable `{}`.", dc.name)];
    if let Some(text) = ir.and_then(|x| x.doc.as_deref()) {
        docs.extend(doc_lines(text));
    }
    docs.push(String::new());
    docs.push(format!(
        "Verdict `{}`: {}",
        dc.verdict.label(),
        dc.reason.replace('\n', " ")
    ));
    let captured = dc.verdict == Verdict::Captured;
    let classes: Vec<SigView> = if captured {
        dc.reserve()
            .classes
            .iter()
            .map(|cl| sig_view(checked, d, dc, cl))
            .collect()
    } else {
        Vec::new()
    };
    let listed = dc.attended_extents.len() as u64 <= d.capture_limit;
    let mut consts = vec![
        c(
            vec!["Callable name in the spec.".into()],
            "NAME",
            "&'static str",
            rust_str(&dc.name),
        ),
        c(
            vec![format!(
                "`{}`: {}",
                dc.verdict.label(),
                dc.reason.replace('\n', " ")
            )],
            "VERDICT",
            "dcc::Verdict",
            format!("dcc::Verdict::{}", verdict_variant(dc.verdict)),
        ),
        c(
            vec!["Why the verdict, in words.".into()],
            "REASON",
            "&'static str",
            rust_str(&dc.reason),
        ),
        c(
            vec![format!("Capture granularity `{}`.", dc.granularity.name())],
            "GRANULARITY",
            "dcc::Granularity",
            format!("dcc::Granularity::{}", granularity_variant(dc.granularity)),
        ),
        c(
            vec![format!("Effects `{}`.", dc.effects.spelling())],
            "EFFECTS",
            "dcc::Effects",
            effects_value(dc.effects),
        ),
        c(
            vec!["Regions read (region inputs first).".into()],
            "READS",
            "&'static [&'static str]",
            str_slice(&dc.reads),
        ),
        c(
            vec!["Write-through regions.".into()],
            "WRITES",
            "&'static [&'static str]",
            str_slice(&dc.writes),
        ),
        c(
            vec![match (&dc.specializing_region, listed) {
                (Some(r), true) => format!(
                    "𝓛: attended extents of `{r}` that specialize the signatures: {{{}}}.",
                    plain_list(&dc.attended_extents)
                ),
                (Some(r), false) => format!(
                    "Not listed: `{r}` has {} attended extents, more than the capture limit {}.",
                    dc.attended_extents.len(),
                    d.capture_limit
                ),
                (None, _) => "No region extent specializes the signature.".into(),
            }],
            "ATTENDED_EXTENTS",
            &format!(
                "[usize; {}]",
                if listed { dc.attended_extents.len() } else { 0 }
            ),
            if listed {
                array(&dc.attended_extents)
            } else {
                "[]".into()
            },
        ),
        usize_c(
            vec![
                explain(&dc.catalog_size),
                "K: size of the extent catalog (eq. 4).".into(),
            ],
            "K",
            dc.catalog_size.value,
        ),
        usize_c(
            vec![{
                let parts: Vec<String> = dc
                    .region_widths
                    .iter()
                    .map(|w| format!("K_{} {}", w.region, w.width))
                    .collect();
                if parts.is_empty() {
                    format!("{} (no region extent)", dc.catalog_width_text())
                } else {
                    format!("{} = {}", dc.catalog_width_text(), parts.join(" × "))
                }
            }],
            "CATALOG_WIDTH",
            dc.catalog_width.unwrap_or(u64::MAX),
        ),
        usize_c(
            vec![if dc.phases.is_empty() {
                "|𝒬_o|: non-extent configurations.".into()
            } else {
                format!("|𝒬_o|: the query phases ({}).", dc.phases.join(", "))
            }],
            "CONFIGS",
            dc.configs,
        ),
    ];
    if let Some(n) = dc.classes {
        consts.push(usize_c(
            vec![if dc.classes == dc.classes_bound {
                format!(
                    "{n} = |𝒬_o| {} × ∏K_r {}: signature classes (eq. 7).",
                    dc.configs,
                    dc.catalog_width_text()
                )
            } else {
                format!(
                    "{n} ≤ |𝒬_o| {} × ∏K_r {}: the reachable signature classes (eq. 7 bounds them; {}).",
                    dc.configs,
                    dc.catalog_width_text(),
                    crate::derive::lockstep_text(&dc.lockstep)
                )
            }],
            "CLASSES",
            n,
        ));
    }
    let mut steps_doc =
        vec!["Solver steps per call (n_steps of the loop clock; 1 without a loop).".to_string()];
    if dc.specialized_steps.is_some() {
        steps_doc.push(
            "`specialize: step`: at step granularity each step index is a class of its own; a signature's last scalar is its step index."
                .into(),
        );
    }
    consts.push(usize_c(steps_doc, "STEPS", dc.steps));
    let res = dc.reserve();
    consts.push(usize_c(
        vec![
            format!(
                "{} = staging {} + write-through {}",
                res.total_bytes, res.staging_bytes, res.write_through_bytes
            ),
            format!(
                "M_reserve (eq. 6) at the declared `{}` granularity, bytes.",
                dc.granularity.name()
            ),
        ],
        "M_RESERVE",
        res.total_bytes,
    ));
    consts.push(usize_c(
        vec!["Σ over classes of the non-aliased inputs' bytes (static staging buffers).".into()],
        "STAGING_BYTES",
        res.staging_bytes,
    ));
    consts.push(usize_c(
        vec!["Σ over write-through regions of their bytes.".into()],
        "WRITE_THROUGH_BYTES",
        res.write_through_bytes,
    ));
    consts.push(usize_c(
        vec!["Host graph launches per chunk at the declared granularity.".into()],
        "LAUNCHES_PER_CHUNK",
        res.host_launches_per_chunk,
    ));
    consts.push(c(
        vec![if captured {
            format!(
                "The captured signatures ({} classes), the static `{catalog_static}`.",
                classes.len()
            )
        } else {
            format!("Empty: `{}` is not captured.", dc.verdict.label())
        }],
        "CATALOG",
        "&'static [dcc::Signature]",
        format!("&{catalog_static}"),
    ));
    consts.push(c(
        vec!["The callable as data (its entry in `CALLABLES`).".into()],
        "INFO",
        "dcc::CallableInfo",
        format!(
            "dcc::CallableInfo {{ name: {t}::NAME, verdict: {t}::VERDICT, reason: {t}::REASON, granularity: {t}::GRANULARITY, effects: {t}::EFFECTS, reads: {t}::READS, writes: {t}::WRITES, catalog: {t}::CATALOG }}",
            t = ty
        ),
    ));

    // Admission predicate.
    let (admit_param, admit_body, admit_docs) = match ir.and_then(|x| x.admit.as_ref()) {
        None => (
            "_f".to_string(),
            "true".to_string(),
            vec!["No admission predicate declared: every call is admitted.".to_string()],
        ),
        Some(p) => {
            let env = |n: &str| d.quantity(n);
            let mut terms = Vec::new();
            let mut shown = Vec::new();
            for (op, e) in &p.clauses {
                let v = expr::eval(e, &env).map_err(|error| GenError::Admission {
                    callable: dc.name.clone(),
                    error,
                })?;
                let names: Vec<String> = e
                    .names()
                    .iter()
                    .filter_map(|(n, _)| d.quantity(n).map(|v| format!("{n} = {v}")))
                    .collect();
                shown.push(format!(
                    "{} {} {}{}",
                    p.var.value,
                    op.symbol(),
                    e,
                    if names.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", names.join(", "))
                    }
                ));
                terms.push(if v < 0 {
                    // `f` is a frame count (never negative).
                    match op {
                        CmpOp::Lt | CmpOp::Le | CmpOp::Eq => "false".to_string(),
                        CmpOp::Ge | CmpOp::Gt => "true".to_string(),
                    }
                } else {
                    format!("f {} {}", op.symbol(), lit(v as u64))
                });
            }
            (
                "f".to_string(),
                terms.join(" && "),
                vec![
                    format!("Admission predicate: `{}`.", shown.join(" and ")),
                    "`f` is the frames one call advances; partial flushes are bounded by it."
                        .into(),
                ],
            )
        }
    };
    let io = match ir {
        Some(c) => io_views(checked, dc, c, &ty, &catalog_static)?,
        None => Vec::new(),
    };
    Ok(CallableView {
        name: dc.name.clone(),
        name_lit: rust_str(&dc.name),
        ty,
        docs,
        consts,
        catalog_static,
        classes,
        admit_docs,
        admit_param,
        admit_body,
        io,
    })
}
