//! The view model the templates render: every value already computed and every piece of text
//! already spelled as Rust (literals, paths, doc lines), so templates only lay items out.

use std::collections::BTreeMap;

use crate::Checked;
use crate::derive::arena::ARENA_ALIGN;
use crate::derive::types::{
    ArenaSlot, ArgSig, ClassSig, Derivation, Derived, DerivedArena, DerivedRegion, Ratio,
};
use crate::expr;
use crate::ir::{
    ArgSource, CacheOrder, CmpOp, DType, Effects, Granularity, LayoutDim, Lifetime, Mutability,
    Placement, Verdict, default_layout,
};

use super::GenError;

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
}

pub struct OperatingPointView {
    pub module: String,
    pub docs: Vec<String>,
    pub consts: Vec<ConstView>,
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
    /// Compile-time checks of the layout `derive::arena` computed: aligned, disjoint, in bounds.
    pub arena_asserts: Vec<String>,
    pub callables: Vec<CallableView>,
    pub operating_points: Vec<OperatingPointView>,
}

/// The module name for a family (`token2wav`): a lowercase Rust identifier.
pub fn module_name(family: &str) -> Result<String, GenError> {
    let ok = !family.is_empty()
        && family
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !family.starts_with(|c: char| c.is_ascii_digit())
        && is_ident(family);
    if ok {
        Ok(family.to_string())
    } else {
        Err(GenError::BadName {
            what: "family".into(),
            name: family.into(),
        })
    }
}

fn is_ident(s: &str) -> bool {
    syn::parse_str::<syn::Ident>(s).is_ok()
}

/// `solver_workspace` → `SolverWorkspace`: the region and callable type names of generated
/// code (the macro names them with it too).
pub fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut up = true;
    for c in name.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn upper(name: &str) -> String {
    name.to_uppercase()
}

/// An integer literal, `_`-grouped by thousands from 10 000 up.
pub fn lit(v: u64) -> String {
    let s = v.to_string();
    if v < 10_000 {
        return s;
    }
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('_');
        }
        out.push(c);
    }
    out
}

fn lit_i(v: i64) -> String {
    if v < 0 {
        format!("-{}", lit(v.unsigned_abs()))
    } else {
        lit(v as u64)
    }
}

fn array(vals: &[u64]) -> String {
    let items: Vec<String> = vals.iter().map(|v| lit(*v)).collect();
    format!("[{}]", items.join(", "))
}

fn plain_list(vals: &[u64]) -> String {
    let items: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
    items.join(", ")
}

fn rust_str(s: &str) -> String {
    format!("{s:?}")
}

/// `402 = f_prompt (302) + f_retained (100)`.
pub fn explain(d: &Derivation) -> String {
    let mut s = String::new();
    let mut rest = d.formula.as_str();
    while let Some(c) = rest.chars().next() {
        if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '.'))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            s.push_str(word);
            if let Some((_, v)) = d.inputs.iter().find(|(n, _)| n == word) {
                s.push_str(&format!(" ({v})"));
            }
            rest = &rest[end..];
        } else {
            s.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    if s == d.value.to_string() {
        s
    } else {
        format!("{} = {}", d.value, s)
    }
}

fn doc_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

fn dtype_variant(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::U8 => "U8",
        DType::Bool => "Bool",
    }
}

fn elem_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F16 => "dcc::F16",
        DType::BF16 => "dcc::Bf16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::Bool => "bool",
    }
}

fn lifetime_variant(l: Lifetime) -> &'static str {
    match l {
        Lifetime::Operator => "Operator",
        Lifetime::Unit => "Unit",
        Lifetime::Turn => "Turn",
        Lifetime::Session => "Session",
        Lifetime::Process => "Process",
    }
}

fn mutability_variant(m: Mutability) -> &'static str {
    match m {
        Mutability::Immutable => "Immutable",
        Mutability::CopyOnWrite => "CopyOnWrite",
        Mutability::Mutable => "Mutable",
        Mutability::Scratch => "Scratch",
    }
}

fn placement_variant(p: Placement) -> &'static str {
    match p {
        Placement::Arena => "Arena",
        Placement::Device => "Device",
        Placement::Host => "Host",
    }
}

fn order_value(o: Option<CacheOrder>) -> String {
    match o {
        None => "::core::option::Option::None".into(),
        Some(CacheOrder::Prepend) => {
            "::core::option::Option::Some(dcc::CacheOrder::Prepend)".into()
        }
        Some(CacheOrder::Append) => "::core::option::Option::Some(dcc::CacheOrder::Append)".into(),
    }
}

fn verdict_variant(v: Verdict) -> &'static str {
    match v {
        Verdict::Captured => "Captured",
        Verdict::OutWidth => "OutWidth",
        Verdict::OutQo => "OutQo",
    }
}

fn granularity_variant(g: Granularity) -> &'static str {
    match g {
        Granularity::Step => "Step",
        Granularity::Chunk => "Chunk",
    }
}

fn effects_variant(e: Effects) -> &'static str {
    match e {
        Effects::None => "None",
        Effects::DeviceRng => "DeviceRng",
        Effects::HostRng => "HostRng",
    }
}

fn str_slice(names: &[String]) -> String {
    let items: Vec<String> = names.iter().map(|n| rust_str(n)).collect();
    format!("&[{}]", items.join(", "))
}

/// Row-major element strides of `dims`.
fn packed_strides(dims: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1]);
    }
    s
}

/// `{total} = carry 526909440 + attention_mask 256 (112 aligned up to 256) + ...`: the arena's
/// total as the sum of its regions' aligned sizes.
fn arena_sum(a: &DerivedArena) -> String {
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
fn arena_asserts(types: &[String]) -> Vec<String> {
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

fn c(docs: Vec<String>, name: &str, ty: &str, value: String) -> ConstView {
    ConstView {
        docs,
        name: name.to_string(),
        ty: ty.to_string(),
        value,
    }
}

fn usize_c(docs: Vec<String>, name: &str, v: u64) -> ConstView {
    c(docs, name, "usize", lit(v))
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
    GenError::Eval(format!("{what}: arithmetic overflow"))
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
        if slot.is_some() {
            arena_regions.push(ty.clone());
        }
        regions.push(region_view(checked, r, ty, buf, elems, slot)?);
    }
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
        callables.push(callable_view(checked, d, dc, ty, catalog_static)?);
    }

    // Operating points: what differs from the base.
    let mut operating_points = Vec::new();
    let mut op_names = Names(BTreeMap::new());
    for op in &checked.operating_points {
        op_names.claim(
            &op.operating_point,
            format!("operating point `{}`", op.operating_point),
        )?;
        let overrides: Vec<String> = op
            .overrides
            .iter()
            .map(|(n, v)| format!("{n} = {v}"))
            .collect();
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
        if !is_ident(&op.operating_point)
            || op.operating_point.chars().any(|c| c.is_ascii_uppercase())
        {
            return Err(GenError::BadName {
                what: "operating point".into(),
                name: op.operating_point.clone(),
            });
        }
        operating_points.push(OperatingPointView {
            module: op.operating_point.clone(),
            docs: vec![
                format!(
                    "Operating point `{}` ({}): the values that differ from the base.",
                    op.operating_point,
                    overrides.join(", ")
                ),
                "Layout types and catalogs describe the base operating point.".into(),
            ],
            consts,
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
        arena_asserts,
        callables,
        operating_points,
    })
}

fn f64_lit(r: Ratio) -> String {
    if r.den == 0 {
        return "f64::INFINITY".into();
    }
    let v = r.as_f64();
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

fn region_view(
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
            vec![if slot.is_some() {
                "Byte offset of the region in the session arena.".to_string()
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
        match &r.keep {
            None => "::core::option::Option::None".into(),
            Some(k) => format!(
                "::core::option::Option::Some(dcc::Keep {{ head: {}, tail: {}, prompt: {}, retained: {} }})",
                lit(k.head.value),
                lit(k.tail.value),
                lit(k.prompt),
                lit(k.retained)
            ),
        },
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

fn tensor_view(
    checked: &Checked,
    source: Option<&ArgSource>,
    a: &ArgSig,
    loop_clock: Option<&str>,
) -> TensorView {
    let strides = match source {
        Some(ArgSource::Region(rn)) => match checked.derived.region(&rn.value) {
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

fn sig_view(
    checked: &Checked,
    dc: &crate::derive::types::DerivedCallable,
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
            tensor_view(checked, source, a, loop_clock)
        })
        .collect();
    let attended = match &dc.specializing_region {
        Some(r) => class
            .extents
            .iter()
            .find(|(n, _)| n == r)
            .map(|(_, v)| *v)
            .or_else(|| checked.derived.region(r).map(|x| x.attended_extent.value))
            .unwrap_or(0),
        None => 0,
    };
    let scalars: Vec<String> = class.extents.iter().map(|(_, v)| lit(*v)).collect();
    let ext: Vec<String> = class
        .extents
        .iter()
        .map(|(n, v)| format!("{n} = {v}"))
        .collect();
    SigView {
        docs: vec![format!(
            "Class {}: {}; staging {} B.",
            class.index,
            if ext.is_empty() {
                "no varying extent".to_string()
            } else {
                ext.join(", ")
            },
            class.staging_bytes
        )],
        class: class.index,
        attended: lit(attended),
        inputs,
        scalars: format!("&[{}]", scalars.join(", ")),
    }
}

fn callable_view(
    checked: &Checked,
    d: &Derived,
    dc: &crate::derive::types::DerivedCallable,
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
            .map(|cl| sig_view(checked, dc, cl))
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
            vec![format!("Effects `{}`.", dc.effects.name())],
            "EFFECTS",
            "dcc::Effects",
            format!("dcc::Effects::{}", effects_variant(dc.effects)),
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
                    format!("{} (no region extent)", dc.catalog_width)
                } else {
                    format!("{} = {}", dc.catalog_width, parts.join(" × "))
                }
            }],
            "CATALOG_WIDTH",
            dc.catalog_width,
        ),
        usize_c(
            vec!["|𝒬_o|: non-extent configurations.".into()],
            "CONFIGS",
            dc.configs,
        ),
    ];
    if let Some(n) = dc.classes {
        consts.push(usize_c(
            vec![if dc.classes == dc.classes_bound {
                format!(
                    "{n} = |𝒬_o| {} × ∏K_r {}: signature classes (eq. 7).",
                    dc.configs, dc.catalog_width
                )
            } else {
                format!(
                    "{n} ≤ |𝒬_o| {} × ∏K_r {}: the reachable signature classes (eq. 7 bounds them; {}).",
                    dc.configs,
                    dc.catalog_width,
                    crate::derive::lockstep_text(&dc.lockstep)
                )
            }],
            "CLASSES",
            n,
        ));
    }
    consts.push(usize_c(
        vec!["Solver steps per call (n_steps of the loop clock; 1 without a loop).".into()],
        "STEPS",
        dc.steps,
    ));
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
                let v = expr::eval(e, &env).map_err(|err| {
                    GenError::Eval(format!(
                        "the admission predicate of `{}`: {}",
                        dc.name, err.message
                    ))
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_group_thousands() {
        assert_eq!(lit(9999), "9999");
        assert_eq!(lit(10_000), "10_000");
        assert_eq!(lit(526_909_440), "526_909_440");
        assert_eq!(lit_i(-12_345), "-12_345");
    }

    #[test]
    fn explain_parenthesizes_inputs() {
        let d = Derivation {
            value: 402,
            formula: "f_prompt + f_retained".into(),
            inputs: vec![("f_prompt".into(), 302), ("f_retained".into(), 100)],
        };
        assert_eq!(explain(&d), "402 = f_prompt (302) + f_retained (100)");
        assert_eq!(explain(&Derivation::literal(7)), "7");
    }

    #[test]
    fn names() {
        assert_eq!(camel("solver_workspace"), "SolverWorkspace");
        assert!(module_name("token2wav").is_ok());
        assert!(module_name("type").is_err());
        assert!(module_name("Token").is_err());
        assert!(module_name("2x").is_err());
    }
}
