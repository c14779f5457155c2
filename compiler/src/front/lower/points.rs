//! Operating points: quantity overrides plus the reserved keys `disable:` (regions switched
//! off: extent 0) and `dtype:` (element types changed, e.g. a `half` point).

use super::super::yaml::{Node, NodeKind};
use super::{Lower, is_ident};
use crate::ir::{DTypeChange, OperatingPoint, Quantity};

impl Lower<'_> {
    pub(super) fn operating_point(&mut self, k: &Node, v: &Node) -> Option<OperatingPoint> {
        let name = self.ident(k, "an operating point name")?;
        let what = format!("operating point `{}`", name.value);
        let help = "an operating point maps quantity names to overrides, plus optional `disable: [REGION, ..]` and `dtype: bf16` (or `dtype: {NAME: f16}`)";
        let entries = self.entries(v, &what, help)?;
        let mut overrides = Vec::new();
        let mut disable = Vec::new();
        let mut dtype = None;
        let mut ok = true;
        for (key, kn, vn) in entries {
            match key {
                "disable" => match self.ident_list(vn, "a region name") {
                    Some(l) => disable = l,
                    None => ok = false,
                },
                "dtype" => match self.dtype_change(vn) {
                    Some(d) => dtype = Some(d),
                    None => ok = false,
                },
                _ => {
                    let qn = self.ident(kn, "a quantity name");
                    let e = self.expr(vn);
                    match (qn, e) {
                        (Some(name), Some(expr)) => overrides.push(Quantity { name, expr }),
                        _ => ok = false,
                    }
                }
            }
        }
        ok.then_some(OperatingPoint {
            name,
            overrides,
            disable,
            dtype,
        })
    }

    /// A region or constant name, or `CALLABLE.INPUT` for one caller tensor.
    fn dtype_target(&mut self, node: &Node) -> Option<crate::ir::Ident> {
        if let NodeKind::Scalar { text, .. } = &node.kind
            && let Some((c, i)) = text.split_once('.')
            && is_ident(c)
            && is_ident(i)
        {
            return Some(crate::ir::Spanned::new(text.clone(), node.span));
        }
        self.ident(node, "a region or constant name, or `CALLABLE.INPUT`")
    }

    /// `dtype: bf16` (every f32 region, constant and caller tensor) or `dtype: {NAME: f16}`.
    fn dtype_change(&mut self, node: &Node) -> Option<DTypeChange> {
        match &node.kind {
            NodeKind::Map(_) => {
                let help =
                    "map region or constant names to element types, e.g. `dtype: {kv_cache: f16}`";
                let entries = self.entries(node, "`dtype`", help)?;
                let mut out = Vec::new();
                let mut ok = true;
                for (_, kn, vn) in entries {
                    match (self.dtype_target(kn), self.dtype(vn)) {
                        (Some(n), Some(d)) => out.push((n, d)),
                        _ => ok = false,
                    }
                }
                ok.then_some(DTypeChange::Named(out))
            }
            NodeKind::Scalar { .. } => self.dtype(node).map(DTypeChange::AllF32),
            _ => {
                self.wrong_type(
                    node,
                    "a dtype or a mapping of names to dtypes",
                    "`dtype: bf16` changes every f32 region, constant and caller tensor; `dtype: {kv_cache: f16}` changes the named ones",
                );
                None
            }
        }
    }
}
