//! How the back end spells values as Rust source: literals, paths of `dcc_runtime::contract`
//! items, doc lines and the names of generated items.

use crate::derive::types::{Derivation, Ratio};
use crate::ir::{
    CacheOrder, DType, Effects, Granularity, Lifetime, Mutability, Placement, Verdict,
};

use super::GenError;
use super::model::ConstView;

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

pub(super) fn is_ident(s: &str) -> bool {
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

pub(super) fn upper(name: &str) -> String {
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

pub(super) fn lit_i(v: i64) -> String {
    if v < 0 {
        format!("-{}", lit(v.unsigned_abs()))
    } else {
        lit(v as u64)
    }
}

pub(super) fn array(vals: &[u64]) -> String {
    let items: Vec<String> = vals.iter().map(|v| lit(*v)).collect();
    format!("[{}]", items.join(", "))
}

pub(super) fn plain_list(vals: &[u64]) -> String {
    let items: Vec<String> = vals.iter().map(|v| v.to_string()).collect();
    items.join(", ")
}

pub(super) fn rust_str(s: &str) -> String {
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

pub(super) fn doc_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

pub(super) fn dtype_variant(d: DType) -> &'static str {
    match d {
        DType::F32 => "F32",
        DType::F64 => "F64",
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::I32 => "I32",
        DType::I64 => "I64",
        DType::U8 => "U8",
        DType::Bool => "Bool",
    }
}

pub(super) fn elem_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "dcc::F16",
        DType::BF16 => "dcc::Bf16",
        DType::I32 => "i32",
        DType::I64 => "i64",
        DType::U8 => "u8",
        DType::Bool => "bool",
    }
}

pub(super) fn lifetime_variant(l: Lifetime) -> &'static str {
    match l {
        Lifetime::Operator => "Operator",
        Lifetime::Iteration => "Iteration",
        Lifetime::Unit => "Unit",
        Lifetime::Turn => "Turn",
        Lifetime::Session => "Session",
        Lifetime::Process => "Process",
    }
}

pub(super) fn mutability_variant(m: Mutability) -> &'static str {
    match m {
        Mutability::Immutable => "Immutable",
        Mutability::CopyOnWrite => "CopyOnWrite",
        Mutability::Mutable => "Mutable",
        Mutability::Scratch => "Scratch",
    }
}

pub(super) fn placement_variant(p: Placement) -> &'static str {
    match p {
        Placement::Arena => "Arena",
        Placement::Device => "Device",
        Placement::Host => "Host",
    }
}

pub(super) fn order_value(o: Option<CacheOrder>) -> String {
    match o {
        None => "::core::option::Option::None".into(),
        Some(CacheOrder::Prepend) => {
            "::core::option::Option::Some(dcc::CacheOrder::Prepend)".into()
        }
        Some(CacheOrder::Append) => "::core::option::Option::Some(dcc::CacheOrder::Append)".into(),
    }
}

pub(super) fn verdict_variant(v: Verdict) -> &'static str {
    match v {
        Verdict::Captured => "Captured",
        Verdict::OutWidth => "OutWidth",
        Verdict::OutQo => "OutQo",
        Verdict::OutUnbounded => "OutUnbounded",
        Verdict::OutEffects => "OutEffects",
    }
}

pub(super) fn granularity_variant(g: Granularity) -> &'static str {
    match g {
        Granularity::Step => "Step",
        Granularity::Chunk => "Chunk",
    }
}

/// An effect set as a const expression: `dcc::Effects::NONE`, `dcc::Effects::DEVICE_RNG`, or
/// the union of several.
pub(super) fn effects_value(e: Effects) -> String {
    let consts: Vec<String> = e
        .names()
        .map(|n| format!("dcc::Effects::{}", n.to_ascii_uppercase()))
        .collect();
    match consts.split_first() {
        None => "dcc::Effects::NONE".to_string(),
        Some((first, rest)) => rest
            .iter()
            .fold(first.clone(), |acc, c| format!("{acc}.union({c})")),
    }
}

pub(super) fn str_slice(names: &[String]) -> String {
    let items: Vec<String> = names.iter().map(|n| rust_str(n)).collect();
    format!("&[{}]", items.join(", "))
}

/// Row-major element strides of `dims`.
pub(super) fn packed_strides(dims: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1].saturating_mul(dims[i + 1]);
    }
    s
}

pub(super) fn c(docs: Vec<String>, name: &str, ty: &str, value: String) -> ConstView {
    ConstView {
        docs,
        name: name.to_string(),
        ty: ty.to_string(),
        value,
    }
}

pub(super) fn usize_c(docs: Vec<String>, name: &str, v: u64) -> ConstView {
    c(docs, name, "usize", lit(v))
}

pub(super) fn f64_lit(r: Ratio) -> String {
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
