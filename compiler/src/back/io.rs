//! The typed I/O structs of a callable: `<Callable>Inputs<T>` (one field per declared input, in
//! the spec's `inputs:` order, which is the catalog's `Signature::inputs` order) and
//! `<Callable>Writes<T>` (one field per written region, in `writes:` order).
//!
//! The replay engine takes positional slices (`Invocation { inputs, writes, .. }`) and hands a
//! callable positional accessors (`Call::input(i)`, `Call::write(i)`); these structs let an
//! adapter build and read them by name, so reordering the spec's inputs is a compile error in
//! the adapter rather than a silent swap of two addresses.

use crate::Checked;
use crate::derive::types::DerivedCallable;
use crate::ir::{ArgSource, Callable, Expr};

use super::GenError;
use super::model::{IoFieldView, IoView};
use super::spell::*;

/// The field name of a spec name: a plain Rust identifier (not a keyword), else an error.
fn field_name(name: &str, what: String) -> Result<String, GenError> {
    if is_ident(name) {
        Ok(name.to_string())
    } else {
        Err(GenError::BadName {
            what,
            name: name.to_string(),
        })
    }
}

fn shape_text(shape: &[Expr]) -> String {
    let items: Vec<String> = shape.iter().map(|e| e.to_string()).collect();
    format!("[{}]", items.join(", "))
}

/// The views of `<Ty>Inputs` and `<Ty>Writes`; a struct with no field is not emitted.
pub(super) fn io_views(
    checked: &Checked,
    dc: &DerivedCallable,
    ir: &Callable,
    ty: &str,
    catalog_static: &str,
) -> Result<Vec<IoView>, GenError> {
    let mut out = Vec::new();
    let classes = &dc.reserve().classes;
    if !ir.inputs.is_empty() {
        let mut fields = Vec::new();
        for (k, a) in ir.inputs.iter().enumerate() {
            let name = field_name(
                &a.name.value,
                format!("input `{}` of callable `{}`", a.name.value, dc.name),
            )?;
            // The dims, when every class passes the same.
            let dims: Vec<&Vec<u64>> = classes
                .iter()
                .filter_map(|c| c.args.get(k).map(|x| &x.dims))
                .collect();
            let fixed = match dims.split_first() {
                Some((first, rest)) if rest.iter().all(|d| d == first) => Some(array(first)),
                _ => None,
            };
            let placement = |region: &str| {
                checked
                    .derived
                    .region(region)
                    .map(|r| r.placement)
                    .or_else(|| {
                        checked
                            .derived
                            .constants
                            .iter()
                            .find(|c| c.name == region)
                            .map(|c| c.placement)
                    })
            };
            let doc = match &a.source {
                ArgSource::Region(r) | ArgSource::Constant(r) => {
                    let what = if matches!(a.source, ArgSource::Region(_)) {
                        "region"
                    } else {
                        "constant"
                    };
                    let aliased = placement(&r.value).is_some_and(|p| a.aliased(p));
                    format!(
                        "`{}`: {what} `{}`, {}, {}.",
                        a.name.value,
                        r.value,
                        match fixed {
                            Some(d) => format!("dims `{d}`"),
                            None => format!("dims by class in `{catalog_static}`"),
                        },
                        if aliased {
                            "aliased (passed by address, never staged)"
                        } else {
                            "staged (`alias: false`: copied into the class's static buffer before a replay)"
                        }
                    )
                }
                ArgSource::Tensor { dtype, shape } => format!(
                    "`{}`: caller tensor `{}` `{}`{}, staged (copied into the class's static buffer before a replay).",
                    a.name.value,
                    dtype.value.name(),
                    shape_text(shape),
                    fixed.map(|d| format!(" = `{d}`")).unwrap_or_default()
                ),
            };
            fields.push(IoFieldView {
                name,
                docs: vec![doc],
            });
        }
        out.push(IoView {
            ty: format!("{ty}Inputs"),
            docs: vec![
                format!(
                    "The inputs of callable `{}`, by name, in the spec's `inputs:` order: field `k` is `{catalog_static}[class].inputs[k]`.",
                    dc.name
                ),
                String::new(),
                "Build an `Invocation`'s `inputs` with `into_array`; read a `Call`'s addresses back with `try_from_fn(|i| call.input(i))`.".into(),
            ],
            names: names_lit(&fields),
            fields,
        });
    }
    if !ir.writes.is_empty() {
        let mut fields: Vec<IoFieldView> = Vec::new();
        for w in &ir.writes {
            let name = field_name(
                &w.value,
                format!("written region `{}` of callable `{}`", w.value, dc.name),
            )?;
            if fields.iter().any(|f| f.name == name) {
                return Err(GenError::NameClash {
                    item: format!("{ty}Writes::{name}"),
                    first: format!("the first `{name}` in `writes:` of `{}`", dc.name),
                    second: format!("the second `{name}` in `writes:` of `{}`", dc.name),
                });
            }
            let inputs: Vec<String> = ir
                .inputs
                .iter()
                .filter(|a| matches!(&a.source, ArgSource::Region(r) if r.value == w.value))
                .map(|a| format!("`{}`", a.name.value))
                .collect();
            let placement = checked
                .derived
                .region(&w.value)
                .map(|r| r.placement.name())
                .unwrap_or("?");
            fields.push(IoFieldView {
                name,
                docs: vec![format!(
                    "Region `{}` (placement `{placement}`), written in place{}.",
                    w.value,
                    if inputs.is_empty() {
                        String::new()
                    } else {
                        format!("; also read as input {}", inputs.join(", "))
                    }
                )],
            });
        }
        out.push(IoView {
            ty: format!("{ty}Writes"),
            docs: vec![
                format!(
                    "The regions callable `{}` writes, by name, in the spec's `writes:` order: an `Invocation`'s `writes` and `Call::write(k)`.",
                    dc.name
                ),
                String::new(),
                "Build the `writes` with `into_array`; read a `Call`'s addresses back with `try_from_fn(|i| call.write(i))`.".into(),
            ],
            names: names_lit(&fields),
            fields,
        });
    }
    Ok(out)
}

fn names_lit(fields: &[IoFieldView]) -> String {
    let items: Vec<String> = fields.iter().map(|f| rust_str(&f.name)).collect();
    items.join(", ")
}
