//! The view model the templates render: every value already computed and every piece of text
//! already spelled as Rust (literals, paths, doc lines), so templates only lay items out.

use std::collections::BTreeMap;

use crate::Checked;
use crate::derive::types::DerivedArena;

use super::GenError;
use super::batch::{BatchView, batch_view, point_consts};
use super::callable::callable_view;
use super::region::region_view;
use super::spell::*;

/// `pub const NAME: TY = VALUE;` with doc lines.
pub struct ConstView {
    pub docs: Vec<String>,
    pub name: String,
    pub ty: String,
    pub value: String,
}

pub struct RegionView {
    pub name: String,
    pub ty: String,
    pub buf: String,
    pub docs: Vec<String>,
    pub elem: String,
    pub elems: String,
    pub consts: Vec<ConstView>,
}

pub struct TensorView {
    pub name: String,
    pub dims: String,
    pub strides: String,
    pub dtype: String,
    pub aliased: bool,
}

pub struct SigView {
    pub docs: Vec<String>,
    pub class: usize,
    pub attended: String,
    pub inputs: Vec<TensorView>,
    pub scalars: String,
}

pub struct CallableView {
    pub name: String,
    pub name_lit: String,
    pub ty: String,
    pub docs: Vec<String>,
    pub consts: Vec<ConstView>,
    pub catalog_static: String,
    pub classes: Vec<SigView>,
    pub admit_docs: Vec<String>,
    pub admit_param: String,
    pub admit_body: String,
    /// The typed I/O structs (`<Callable>Inputs`, `<Callable>Writes`), when they have fields.
    pub io: Vec<IoView>,
}

/// `<Callable>Inputs<T>` or `<Callable>Writes<T>`: one field per positional argument.
pub struct IoView {
    pub ty: String,
    pub docs: Vec<String>,
    pub fields: Vec<IoFieldView>,
    /// The field names as string literals, comma-separated.
    pub names: String,
}

pub struct IoFieldView {
    pub name: String,
    pub docs: Vec<String>,
}

pub struct OperatingPointView {
    pub module: String,
    /// The point's name as a string literal.
    pub name_lit: String,
    pub docs: Vec<String>,
    pub consts: Vec<ConstView>,
    /// Every callable at this point: its catalog and `CallableInfo` (`back/point.rs`).
    pub callables: Vec<super::point::PointCallableView>,
}

pub struct ModuleView {
    pub family: String,
    pub family_lit: String,
    pub spec_path_lit: String,
    pub sha256_lit: String,
    /// As a string literal.
    pub description: Option<String>,
    pub quantities: Vec<ConstView>,
    pub constants: Vec<ConstView>,
    pub regions: Vec<RegionView>,
    pub arena_regions: Vec<String>,
    pub arena_align: String,
    pub arena_docs: Vec<String>,
    pub arena_bytes: String,
    /// The per-session part's bytes (`SESSION_BYTES`) and the per-process part's
    /// (`PROCESS_BYTES`).
    pub session_bytes: String,
    pub process_bytes: String,
    /// Compile-time checks of the layout `derive::arena` computed: aligned, disjoint, in bounds.
    pub arena_asserts: Vec<String>,
    pub callables: Vec<CallableView>,
    /// The batched catalog's constants and `process_bytes` (`back/batch.rs`).
    pub batch: BatchView,
    pub operating_points: Vec<OperatingPointView>,
}

/// `{total} = carry 526909440 + attention_mask 256 (112 aligned up to 256) + ...`: the arena's
/// total as the sum of its regions' aligned sizes.
pub(super) fn arena_sum(a: &DerivedArena) -> String {
    if a.slots.is_empty() {
        return "0 (no arena regions)".into();
    }
    let terms: Vec<String> = a
        .slots
        .iter()
        .map(|s| {
            if s.padded_bytes == s.bytes {
                format!("{} {}", s.region, s.bytes)
            } else {
                format!(
                    "{} {} ({} aligned up to {})",
                    s.region, s.padded_bytes, s.bytes, a.align
                )
            }
        })
        .collect();
    format!("{} = {}", a.total_bytes, terms.join(" + "))
}

/// Compile-time checks that the generated layout is what the runtime needs (the runtime checks
/// the same at start-up): the first region at offset 0, each next one aligned and after the end
/// of the one before, the last one inside `ARENA_BYTES`, itself a multiple of the alignment.
pub(super) fn arena_asserts(types: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    match types.first() {
        None => out.push("ARENA_BYTES == 0".into()),
        Some(first) => out.push(format!("{first}::OFFSET == 0")),
    }
    for w in types.windows(2) {
        out.push(format!(
            "{n}::OFFSET.is_multiple_of(ARENA_ALIGN) && {p}::OFFSET + {p}::BYTES <= {n}::OFFSET",
            p = w[0],
            n = w[1]
        ));
    }
    if let Some(last) = types.last() {
        out.push(format!(
            "{last}::OFFSET + {last}::BYTES <= ARENA_BYTES && ARENA_BYTES.is_multiple_of(ARENA_ALIGN)"
        ));
    }
    out
}

/// Registry of top-level item names, to refuse a spec whose names would clash.
struct Names(BTreeMap<String, String>);

impl Names {
    fn claim(&mut self, item: &str, origin: String) -> Result<(), GenError> {
        if !is_ident(item) {
            return Err(GenError::BadName {
                what: origin,
                name: item.to_string(),
            });
        }
        if let Some(first) = self.0.get(item) {
            return Err(GenError::NameClash {
                item: item.to_string(),
                first: first.clone(),
                second: origin,
            });
        }
        self.0.insert(item.to_string(), origin);
        Ok(())
    }
}

fn overflow(what: &str) -> GenError {
    GenError::Overflow {
        what: what.to_string(),
    }
}

pub fn build(checked: &Checked, spec_path: &str) -> Result<ModuleView, GenError> {
    let spec = &checked.spec;
    let d = &checked.derived;
    let mut names = Names(BTreeMap::new());
    for fixed in [
        "dcc",
        "FAMILY",
        "SPEC_SHA256",
        "SPEC_PATH",
        "DESCRIPTION",
        "ARENA_ALIGN",
        "ARENA_BYTES",
        "REGIONS",
        "ARENA",
        "CALLABLES",
        "Contract",
        "operating_points",
        "OPERATING_POINTS",
    ] {
        names.claim(fixed, format!("the generated item `{fixed}`"))?;
    }

    // Quantities.
    let mut quantities = Vec::new();
    for q in &d.quantities {
        let item = upper(&q.name);
        names.claim(&item, format!("quantity `{}`", q.name))?;
        let mut docs = vec![if q.derivation.inputs.is_empty()
            && q.derivation.formula == q.value.to_string()
        {
            format!("{} (declared `{}`)", q.value, q.name)
        } else {
            explain(&q.derivation)
        }];
        if !q.derivation.inputs.is_empty() {
            docs.push(format!("Quantity `{}`.", q.name));
        }
        let (ty, value) = if q.value >= 0 {
            ("usize", lit(q.value as u64))
        } else {
            ("i64", lit_i(q.value))
        };
        quantities.push(c(docs, &item, ty, value));
    }

    // Device-resident constants.
    let mut constants = Vec::new();
    for k in &d.constants {
        let item = upper(&k.name);
        names.claim(&item, format!("constant `{}`", k.name))?;
        let mut docs: Vec<String> = spec
            .constant(&k.name)
            .and_then(|c| c.doc.as_deref())
            .map(doc_lines)
            .unwrap_or_default();
        let mut shape_prod = vec![k.dtype.size().to_string()];
        shape_prod.splice(0..0, k.shape.iter().map(|v| v.to_string()));
        docs.push(format!(
            "Device-resident constant `{}`: `{}` `{:?}`, {} = {} B.",
            k.name,
            k.dtype.name(),
            k.shape,
            k.bytes,
            shape_prod.join(" × ")
        ));
        constants.push(c(
            docs,
            &item,
            "dcc::ConstantInfo",
            format!(
                "dcc::ConstantInfo {{ name: {}, dtype: dcc::DType::{}, dims: &{}, bytes: {} }}",
                rust_str(&k.name),
                dtype_variant(k.dtype),
                array(&k.shape),
                lit(k.bytes)
            ),
        ));
    }

    // Regions and the arena (offsets and total: `derive::arena`).
    let mut regions = Vec::new();
    let mut arena_regions = Vec::new();
    for r in &d.regions {
        let ty = camel(&r.name);
        let buf = format!("{ty}Buf");
        names.claim(&ty, format!("region `{}`", r.name))?;
        names.claim(&buf, format!("region `{}` (buffer type)", r.name))?;
        let elems = r
            .dims
            .iter()
            .try_fold(1u64, |a, &x| a.checked_mul(x))
            .ok_or_else(|| overflow(&format!("elements of region `{}`", r.name)))?;
        let slot = d.arena.slot(&r.name);
        if let Some(s) = slot {
            arena_regions.push((s.offset, ty.clone()));
        }
        regions.push(region_view(checked, r, ty, buf, elems, slot)?);
    }
    // in offset order: the per-session part, then the per-process part
    arena_regions.sort();
    let arena_regions: Vec<String> = arena_regions.into_iter().map(|(_, t)| t).collect();
    let arena_asserts = arena_asserts(&arena_regions);
    let arena_docs = vec![
        format!(
            "Bytes of one session's arena: every arena region at a fixed offset aligned to {} B.",
            d.arena.align
        ),
        arena_sum(&d.arena),
    ];

    // Callables.
    let mut callables = Vec::new();
    for dc in &d.callables {
        let ty = camel(&dc.name);
        names.claim(&ty, format!("callable `{}`", dc.name))?;
        let catalog_static = format!("{}_CATALOG", upper(&dc.name));
        names.claim(&catalog_static, format!("callable `{}` (catalog)", dc.name))?;
        let view = callable_view(checked, d, dc, ty, catalog_static)?;
        for io in &view.io {
            names.claim(&io.ty, format!("callable `{}` (I/O struct)", dc.name))?;
        }
        callables.push(view);
    }

    // The batched catalog (`derive/batch.rs`).
    let batch = batch_view(d);
    for k in &batch.consts {
        names.claim(&k.name, format!("the batching constant `{}`", k.name))?;
    }
    if batch.process_fn {
        names.claim(
            "process_bytes",
            "the generated function `process_bytes`".into(),
        )?;
    }

    // Operating points: what differs from the base.
    let mut operating_points = Vec::new();
    let mut op_names = Names(BTreeMap::new());
    for op in &checked.operating_points {
        op_names.claim(
            &op.operating_point,
            format!("operating point `{}`", op.operating_point),
        )?;
        let mut overrides: Vec<String> = op
            .overrides
            .iter()
            .map(|(n, v)| format!("{n} = {v}"))
            .collect();
        // Regions switched off and element types changed at this point.
        for r in &op.regions {
            if r.disabled {
                overrides.push(format!("`{}` disabled", r.name));
            } else if let Some(b) = d.region(&r.name)
                && b.dtype != r.dtype
            {
                overrides.push(format!("`{}` {}", r.name, r.dtype.name()));
            }
        }
        let mut consts = Vec::new();
        for q in &op.quantities {
            if d.quantity(&q.name) != Some(q.value) {
                let docs = vec![if q.derivation.inputs.is_empty() {
                    format!("{} (override of `{}`)", q.value, q.name)
                } else {
                    explain(&q.derivation)
                }];
                let (ty, value) = if q.value >= 0 {
                    ("usize", lit(q.value as u64))
                } else {
                    ("i64", lit_i(q.value))
                };
                consts.push(c(docs, &upper(&q.name), ty, value));
            }
        }
        for r in &op.regions {
            let u = upper(&r.name);
            if let Some(b) = d.region(&r.name)
                && b.dtype != r.dtype
            {
                consts.push(c(
                    vec![format!(
                        "Element type of region `{}` at this operating point (`{}` at the base).",
                        r.name,
                        b.dtype.name()
                    )],
                    &format!("{u}_DTYPE"),
                    "dcc::DType",
                    format!("dcc::DType::{}", dtype_variant(r.dtype)),
                ));
            }
            consts.push(c(
                vec![
                    format!(
                        "Envelope dims of region `{}` at this operating point.",
                        r.name
                    ),
                    r.axes
                        .iter()
                        .zip(&r.envelope_axes)
                        .map(|(a, e)| format!("`{a}`: {}", explain(e)))
                        .collect::<Vec<_>>()
                        .join("; "),
                ],
                &format!("{u}_DIMS"),
                &format!("[usize; {}]", r.dims.len()),
                array(&r.dims),
            ));
            consts.push(usize_c(
                vec![format!(
                    "Bytes of region `{}`: {} × {} B per tick.",
                    r.name, r.envelope_extent.value, r.tick_bytes.value
                )],
                &format!("{u}_BYTES"),
                r.live_bytes,
            ));
            if let Some(s) = r.stock.first() {
                consts.push(c(
                    vec![format!(
                        "ρ = reserved {} / live {} ≈ {:.1}× (over-reservation of the stock `{}`).",
                        s.rho.num,
                        s.rho.den,
                        s.rho.rounded1(),
                        s.name
                    )],
                    &format!("{u}_RHO"),
                    "f64",
                    f64_lit(s.rho),
                ));
            }
        }
        consts.push(usize_c(
            vec![
                "Bytes of one session's arena at this operating point.".into(),
                arena_sum(&op.arena),
            ],
            "ARENA_BYTES",
            op.arena.total_bytes,
        ));
        consts.push(usize_c(
            vec![
                "Bytes of the arena's per-session part at this operating point (lifetime turn / \
                 session: one per session)."
                    .into(),
            ],
            "SESSION_BYTES",
            op.arena.session_bytes,
        ));
        consts.push(usize_c(
            vec![
                "Bytes of the arena's per-process part at this operating point (lifetime \
                 operator / unit / process: shared by the sessions of a stream)."
                    .into(),
            ],
            "PROCESS_BYTES",
            op.arena.process_bytes(),
        ));
        consts.extend(point_consts(op));
        consts.extend(super::point::arena_consts(op));
        if !is_ident(&op.operating_point)
            || op.operating_point.chars().any(|c| c.is_ascii_uppercase())
        {
            return Err(GenError::BadName {
                what: "operating point".into(),
                name: op.operating_point.clone(),
            });
        }
        let point_callables = super::point::callables(checked, op);
        // the point module's own items may not clash either (an overridden quantity named
        // `point` would)
        let mut point_names = Names(BTreeMap::new());
        let origin = |what: &str| format!("{what} of operating point `{}`", op.operating_point);
        for k in &consts {
            point_names.claim(&k.name, origin(&format!("the constant `{}`", k.name)))?;
        }
        for fixed in ["CALLABLES", "POINT", "dcc"] {
            point_names.claim(fixed, origin(&format!("the generated item `{fixed}`")))?;
        }
        for cl in &point_callables {
            point_names.claim(
                &cl.catalog_static,
                origin(&format!("callable `{}` (catalog)", cl.name)),
            )?;
        }
        operating_points.push(OperatingPointView {
            module: op.operating_point.clone(),
            name_lit: rust_str(&op.operating_point),
            docs: vec![
                format!(
                    "Operating point `{}` ({}): the values that differ from the base.",
                    op.operating_point,
                    overrides.join(", ")
                ),
                "Layout types describe the base operating point; `ARENA` is the session arena at \
                 this one, `CALLABLES` the callables with their catalogs keyed on this point's \
                 dtypes and extents (a catalog the point leaves unchanged is the base's, \
                 re-exported), and `POINT` all three as data."
                    .into(),
            ],
            consts,
            callables: point_callables,
        });
    }

    Ok(ModuleView {
        family: spec.family.value.clone(),
        family_lit: rust_str(&spec.family.value),
        spec_path_lit: rust_str(spec_path),
        sha256_lit: rust_str(&checked.spec_sha256),
        description: spec.description.as_ref().map(|s| rust_str(s.trim())),
        quantities,
        constants,
        regions,
        arena_regions,
        arena_align: lit(d.arena.align),
        arena_docs,
        arena_bytes: lit(d.arena.total_bytes),
        session_bytes: lit(d.arena.session_bytes),
        process_bytes: lit(d.arena.process_bytes()),
        arena_asserts,
        callables,
        batch,
        operating_points,
    })
}
