//! The position of an offset view: `VAR mod M`, `VAR + SHIFT mod M` (`at:` of a `view:`).

use super::{KEYWORDS, Tok, parser};
use crate::diag::Diagnostic;
use crate::ir::{Expr, ExprKind, OffsetAt, Spanned};

/// Parse an offset view's position: `t mod 4`, `t + 2 mod 4`, `t - 1 mod m`.
pub fn parse_offset(text: &str, base: usize) -> Result<OffsetAt, Diagnostic> {
    let help = "an offset is written `VAR mod M` or `VAR + SHIFT mod M`, e.g. `t mod 4`: VAR counts the callable's calls";
    let mut p = parser(text, base)?;
    let var = match p.bump() {
        Some((Tok::Name(n), sp)) if !KEYWORDS.contains(&n.as_str()) => Spanned::new(n, sp),
        _ => {
            p.pos = p.pos.saturating_sub(1);
            return Err(p.err_here("the call variable").help(help));
        }
    };
    let shift = match p.peek() {
        Some(Tok::Op(c @ ('+' | '-'))) => {
            let neg = *c == '-';
            let at = p.span();
            p.bump();
            let e = p.expr(0)?;
            Some(if neg {
                let span = at.to(e.span);
                Expr {
                    kind: ExprKind::Neg(Box::new(e)),
                    span,
                }
            } else {
                e
            })
        }
        _ => None,
    };
    match p.peek() {
        Some(Tok::Name(w)) if w == "mod" => {
            p.bump();
        }
        _ => return Err(p.err_here("`mod`").help(help)),
    }
    let modulus = p.expr(0)?;
    p.finish()?;
    Ok(OffsetAt {
        var,
        shift,
        modulus,
        span: p.whole,
    })
}
