//! What an operating point changes besides quantities: regions switched off (`disable:`,
//! extent 0) and element types (`dtype:`, e.g. a `half` point). Bytes, ρ, M_reserve and the
//! arena follow, because every derivation reads the types and extents through here.

use super::Deriver;
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl Deriver<'_> {
    /// The operating point's name (`base` when none).
    pub(super) fn op_name(&self) -> &str {
        self.op.map_or("base", |o| o.name.value.as_str())
    }

    /// Whether the operating point switches region `name` off.
    pub(super) fn disabled(&self, name: &str) -> bool {
        self.op
            .is_some_and(|o| o.disable.iter().any(|d| d.value == name))
    }

    /// The element type of a region or constant named `name` declared as `declared`.
    fn named_dtype(&self, name: &str, declared: DType) -> DType {
        match self.op.and_then(|o| o.dtype.as_ref()) {
            Some(DTypeChange::AllF32(d)) if declared == DType::F32 => d.value,
            Some(DTypeChange::Named(list)) => list
                .iter()
                .find(|(n, _)| n.value == name)
                .map_or(declared, |(_, d)| d.value),
            _ => declared,
        }
    }

    pub(super) fn region_dtype(&self, r: &Region) -> DType {
        self.named_dtype(&r.name.value, r.dtype.value)
    }

    pub(super) fn constant_dtype(&self, c: &Constant) -> DType {
        self.named_dtype(&c.name.value, c.dtype.value)
    }

    /// The element type of input `input` of callable `callable`, a caller tensor declared as
    /// `declared`: `dtype: WORD` changes every f32 one, `dtype: {callable.input: WORD}` this one.
    pub(super) fn tensor_dtype(&self, callable: &str, input: &str, declared: DType) -> DType {
        match self.op.and_then(|o| o.dtype.as_ref()) {
            Some(DTypeChange::AllF32(d)) if declared == DType::F32 => d.value,
            Some(DTypeChange::Named(list)) => list
                .iter()
                .find(|(n, _)| {
                    n.value
                        .split_once('.')
                        .is_some_and(|(c, i)| c == callable && i == input)
                })
                .map_or(declared, |(_, d)| d.value),
            _ => declared,
        }
    }

    /// Every name under `disable:` is a region, every name under `dtype:` a region or a
    /// constant.
    pub(super) fn check_point(&mut self) {
        let Some(op) = self.op else { return };
        let spec = self.spec;
        for d in &op.disable {
            if spec.region(&d.value).is_none() {
                self.push(
                    Diagnostic::error(
                        Code::Undefined,
                        d.span,
                        format!("`disable:` names `{}`, which is not a region", d.value),
                    )
                    .label("not a region")
                    .help(format!(
                        "list regions of this spec: {}",
                        names(spec.regions.iter().map(|r| &r.name))
                    )),
                );
            }
        }
        let targets: Vec<&Spanned<DType>> = match &op.dtype {
            Some(DTypeChange::AllF32(d)) => vec![d],
            Some(DTypeChange::Named(list)) => list.iter().map(|(_, d)| d).collect(),
            None => Vec::new(),
        };
        for d in targets {
            if !matches!(d.value, DType::F64 | DType::F32 | DType::F16 | DType::BF16) {
                self.push(
                    Diagnostic::error(
                        Code::BadValue,
                        d.span,
                        format!("an operating point changes element types to a floating-point type, not `{}`", d.value.name()),
                    )
                    .label("not a floating-point type")
                    .help("use f16 or bf16 (a `half` point), f32 or f64; integer and bool data keep their declared type"),
                );
            }
        }
        if let Some(DTypeChange::Named(list)) = &op.dtype {
            for (n, _) in list {
                if let Some((c, i)) = n.value.split_once('.') {
                    let tensor = spec.callable(c).and_then(|k| {
                        k.inputs
                            .iter()
                            .find(|a| a.name.value == i)
                            .filter(|a| matches!(a.source, ArgSource::Tensor { .. }))
                    });
                    if tensor.is_none() {
                        self.push(
                            Diagnostic::error(
                                Code::Undefined,
                                n.span,
                                format!("`dtype:` names `{}`, which is not a caller tensor (`{{dtype, shape}}` input) of a callable", n.value),
                            )
                            .label("no such caller tensor")
                            .help("`CALLABLE.INPUT` names an input declared with `{dtype: .., shape: [..]}`; a region or constant input follows the region's or constant's own type"),
                        );
                    }
                    continue;
                }
                if spec.region(&n.value).is_none() && spec.constant(&n.value).is_none() {
                    self.push(
                        Diagnostic::error(
                            Code::Undefined,
                            n.span,
                            format!("`dtype:` names `{}`, which is neither a region nor a constant", n.value),
                        )
                        .label("unknown name")
                        .help("`dtype: {NAME: f16}` changes regions and constants; `dtype: f16` changes every f32 one, caller tensors included"),
                    );
                }
            }
        }
    }
}

fn names<'a>(it: impl Iterator<Item = &'a Ident>) -> String {
    let v: Vec<String> = it.map(|i| format!("`{}`", i.value)).collect();
    if v.is_empty() {
        "(none declared)".into()
    } else {
        v.join(", ")
    }
}
