//! The position of an offset view (`at:` of a `view:`): `VAR mod M`, `VAR + SHIFT mod M`,
//! `K * VAR + SHIFT mod M` — slot `(K·VAR + SHIFT) mod M`, VAR counting the callable's calls.

use super::{Tok, parser};
use crate::diag::{Code, Diagnostic};
use crate::ir::{BinOp, Expr, ExprKind, OffsetAt, Span, Spanned};

const HELP: &str = "an offset is `VAR mod M`, `VAR + SHIFT mod M` or `K * VAR + SHIFT mod M`, e.g. `t mod 4` or `2 * t mod 250`: VAR (a fresh name) counts the callable's calls, K is how many slots the offset moves per call";

/// Parse an offset view's position: `t mod 4`, `t + 2 mod 4`, `2 * t - 1 mod m`.
pub fn parse_offset(text: &str, base: usize) -> Result<OffsetAt, Diagnostic> {
    let mut p = parser(text, base)?;
    if p.toks.is_empty() {
        return Err(p.err_here("an offset").help(HELP));
    }
    let lhs = p.expr(0).map_err(|d| d.help(HELP))?;
    match p.peek() {
        Some(Tok::Name(w)) if w == "mod" => {
            p.bump();
        }
        _ => return Err(p.err_here("`mod`").help(HELP)),
    }
    let modulus = p.expr(0)?;
    p.finish()?;
    let (first, shift) = split_first(lhs);
    let span = first.span;
    let (scale, var) = match first.kind {
        ExprKind::Name(v) => (None, Spanned::new(v, span)),
        ExprKind::Binary(BinOp::Mul, k, v) => match v.kind {
            ExprKind::Name(name) => (Some(*k), Spanned::new(name, v.span)),
            _ => return Err(not_the_variable(span)),
        },
        _ => return Err(not_the_variable(span)),
    };
    Ok(OffsetAt {
        var,
        scale,
        shift,
        modulus,
        span: p.whole,
    })
}

fn not_the_variable(span: Span) -> Diagnostic {
    Diagnostic::error(
        Code::BadExpression,
        span,
        "an offset starts with the call variable",
    )
    .label("expected `VAR` or `K * VAR` here")
    .help(HELP)
}

/// The first term of a sum `a ± b ± c` and the rest (`±b ± c`) as one expression.
fn split_first(e: Expr) -> (Expr, Option<Expr>) {
    match e.kind {
        ExprKind::Binary(op @ (BinOp::Add | BinOp::Sub), a, b) => {
            let (first, rest) = split_first(*a);
            let b = *b;
            let shift = match rest {
                None if op == BinOp::Sub => Expr {
                    span: b.span,
                    kind: ExprKind::Neg(Box::new(b)),
                },
                None => b,
                Some(r) => Expr {
                    span: r.span.to(b.span),
                    kind: ExprKind::Binary(op, Box::new(r), Box::new(b)),
                },
            };
            (first, Some(shift))
        }
        kind => (Expr { kind, span: e.span }, None),
    }
}
