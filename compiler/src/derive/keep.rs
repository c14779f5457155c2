//! The kept slices of a prompt + history retention (paper eq. 2): the declared `keep:`, checked
//! against the attended extent, or the storage order's natural rule.

use super::Deriver;
use super::types::*;
use crate::diag::{Code, Diagnostic};
use crate::ir::*;

impl Deriver<'_> {
    /// The kept slices of a prompt + history retention: the declared `keep:` (whose head and
    /// tail must add up to the attended extent) or the order's natural rule.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn keep(
        &mut self,
        r: &Region,
        prompt: &Expr,
        retained: &Expr,
        p: u64,
        k: u64,
        order: CacheOrder,
        declared: Option<&Keep>,
    ) -> Option<DerivedKeep> {
        let name = &r.name.value;
        let pd = self.derivation(p, prompt.to_string(), &[prompt]);
        let kd = self.derivation(k, retained.to_string(), &[retained]);
        let (natural, swapped) = match order {
            CacheOrder::Prepend => ((kd.clone(), pd.clone()), (pd, kd)),
            CacheOrder::Append => ((pd.clone(), kd.clone()), (kd, pd)),
        };
        let Some(kp) = declared else {
            return Some(DerivedKeep {
                head: natural.0,
                tail: natural.1,
                prompt: p,
                retained: k,
                rule: KeepRule::Natural,
                declared: false,
            });
        };
        let h = self.eval_at_least(&kp.head, 0, &format!("the kept head of `{name}`"));
        let t = self.eval_at_least(&kp.tail, 0, &format!("the kept tail of `{name}`"));
        let (h, t) = (h?, t?);
        let bound = p.checked_add(k)?;
        if h.checked_add(t) != Some(bound) {
            let sum = h
                .checked_add(t)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "more than 2^64".into());
            let rule = |(a, b): (&Derivation, &Derivation)| {
                format!("`keep: {{head: {}, tail: {}}}`", a.formula, b.formula)
            };
            self.push(
                Diagnostic::error(
                    Code::Inconsistent,
                    kp.span,
                    format!(
                        "`{name}` keeps head {h} + tail {t} = {sum} frames, but its attended extent is prompt {p} + retained {k} = {bound}"
                    ),
                )
                .label(format!("keeps {sum} frames"))
                .with_secondary(prompt.span.to(retained.span), format!("attended extent {bound}"))
                .help(format!(
                    "`head` + `tail` must equal `prompt` + `retained`: on `order: {}` storage the natural rule is {} (the default when `keep:` is omitted), the `{}` rule is {}",
                    order.name(),
                    rule((&natural.0, &natural.1)),
                    order.other().name(),
                    rule((&swapped.0, &swapped.1)),
                )),
            );
            return None;
        }
        let rule = if (h, t) == (natural.0.value, natural.1.value) {
            KeepRule::Natural
        } else if (h, t) == (swapped.0.value, swapped.1.value) {
            KeepRule::Swapped
        } else {
            KeepRule::Split
        };
        Some(DerivedKeep {
            head: self.derivation(h, kp.head.to_string(), &[&kp.head]),
            tail: self.derivation(t, kp.tail.to_string(), &[&kp.tail]),
            prompt: p,
            retained: k,
            rule,
            declared: true,
        })
    }
}
