//! The integer expression language: parsing (from a string with a base offset) and checked
//! evaluation.
//!
//! Grammar (whitespace-insensitive):
//!
//! ```text
//! expr  := term (('+' | '-') term)*
//! term  := unary (('*' | '/') unary)*
//! unary := '-' unary | atom
//! atom  := INT UNIT? | NAME | NAME '(' expr (',' expr)* ')' | '(' expr ')'
//! UNIT  := CLOCK ('/' CLOCK)?                         (a name right after a literal)
//! pred  := NAME CMP expr ('and' NAME CMP expr)*      CMP := < <= == >= >
//! rate  := expr 'per' NAME
//! at    := NAME (('+' | '-') expr)? 'mod' expr        (an offset view's position)
//! ```
//!
//! Functions: `min`, `max`, `ceil_div`, `floor_div`, and `extent(region)`. Integer literals
//! may use `_` separators and carry a clock unit (`50 frame`, `2 frame/token`); a name after a
//! literal is always a unit, except the keywords `per`, `and` and `mod`. `/` is exact division.

mod admit;
mod offset;

pub use admit::{Admitted, admitted};
pub use offset::parse_offset;

use crate::diag::{Code, Diagnostic};
use crate::ir::{BinOp, CmpOp, Expr, ExprKind, Func, Ident, Predicate, Span, Spanned, UnitName};

/// Deepest parenthesis/unary nesting accepted in one expression.
pub const MAX_EXPR_DEPTH: usize = 48;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Int(i64),
    Name(String),
    Op(char),
    Cmp(CmpOp),
    LParen,
    RParen,
    Comma,
}

struct Lexer;

impl Lexer {
    fn lex(s: &str, base: usize) -> Result<Vec<(Tok, Span)>, Diagnostic> {
        let mut out = Vec::new();
        let bytes = s.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let c = bytes[i];
            let start = i;
            match c {
                b' ' | b'\t' | b'\n' | b'\r' => {
                    i += 1;
                    continue;
                }
                b'0'..=b'9' => {
                    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                        i += 1;
                    }
                    let digits: String = s[start..i].chars().filter(|c| *c != '_').collect();
                    let sp = Span::new(base + start, base + i);
                    let v = digits.parse::<i64>().map_err(|_| {
                        Diagnostic::error(Code::Arithmetic, sp, "integer literal too large")
                            .label("does not fit in 64 bits")
                            .help("quantities are 64-bit signed integers; use a smaller number")
                    })?;
                    if i < bytes.len() && (bytes[i].is_ascii_alphabetic() || bytes[i] == b'.') {
                        let end = i + 1;
                        return Err(Diagnostic::error(
                            Code::BadExpression,
                            Span::new(base + start, base + end),
                            "expected an integer",
                        )
                        .label("not an integer")
                        .help("quantities are integers: write `50`, not `50.5` or `50x`; use a name for a symbolic value, and put a space before a clock unit (`50 frame`)"));
                    }
                    out.push((Tok::Int(v), sp));
                }
                b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_')
                    {
                        i += 1;
                    }
                    out.push((
                        Tok::Name(s[start..i].to_string()),
                        Span::new(base + start, base + i),
                    ));
                }
                b'+' | b'-' | b'*' | b'/' => {
                    i += 1;
                    out.push((Tok::Op(c as char), Span::new(base + start, base + i)));
                }
                b'(' => {
                    i += 1;
                    out.push((Tok::LParen, Span::new(base + start, base + i)));
                }
                b')' => {
                    i += 1;
                    out.push((Tok::RParen, Span::new(base + start, base + i)));
                }
                b',' => {
                    i += 1;
                    out.push((Tok::Comma, Span::new(base + start, base + i)));
                }
                b'<' | b'>' | b'=' => {
                    let two = i + 1 < bytes.len() && bytes[i + 1] == b'=';
                    let op = match (c, two) {
                        (b'<', true) => CmpOp::Le,
                        (b'<', false) => CmpOp::Lt,
                        (b'>', true) => CmpOp::Ge,
                        (b'>', false) => CmpOp::Gt,
                        (b'=', true) => CmpOp::Eq,
                        _ => {
                            return Err(Diagnostic::error(
                                Code::BadExpression,
                                Span::new(base + start, base + start + 1),
                                "`=` is not an operator",
                            )
                            .label("here")
                            .help("compare with `==`, `<=`, `<`, `>=` or `>`"));
                        }
                    };
                    i += if two { 2 } else { 1 };
                    out.push((Tok::Cmp(op), Span::new(base + start, base + i)));
                }
                _ => {
                    let ch = s[start..].chars().next().unwrap_or('?');
                    let end = start + ch.len_utf8();
                    return Err(Diagnostic::error(
                        Code::BadExpression,
                        Span::new(base + start, base + end),
                        format!("unexpected character `{ch}` in expression"),
                    )
                    .label("not part of the expression language")
                    .help("expressions use integers, names, `+ - * /`, parentheses and min/max/ceil_div/floor_div"));
                }
            }
        }
        Ok(out)
    }
}

struct P {
    toks: Vec<(Tok, Span)>,
    pos: usize,
    /// Span of the whole source text (for "unexpected end").
    whole: Span,
}

impl P {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn span(&self) -> Span {
        self.toks
            .get(self.pos)
            .map(|t| t.1)
            .unwrap_or(Span::new(self.whole.end, self.whole.end))
    }
    fn prev_end(&self) -> usize {
        if self.pos == 0 {
            self.whole.start
        } else {
            self.toks[self.pos - 1].1.end
        }
    }
    fn bump(&mut self) -> Option<(Tok, Span)> {
        let t = self.toks.get(self.pos).cloned();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn err_here(&self, what: &str) -> Diagnostic {
        let sp = self.span();
        let found = match self.peek() {
            None => "the end of the expression".to_string(),
            Some(Tok::Int(v)) => format!("`{v}`"),
            Some(Tok::Name(n)) => format!("`{n}`"),
            Some(Tok::Op(c)) => format!("`{c}`"),
            Some(Tok::Cmp(c)) => format!("`{}`", c.symbol()),
            Some(Tok::LParen) => "`(`".into(),
            Some(Tok::RParen) => "`)`".into(),
            Some(Tok::Comma) => "`,`".into(),
        };
        Diagnostic::error(
            Code::BadExpression,
            sp,
            format!("expected {what}, found {found}"),
        )
        .label(format!("expected {what}"))
        .help("expressions look like `f_prompt + f_retained`, `2 * (f_chunk + 3)` or `\"ceil_div(f_retained, f_chunk) + 1\"` (quoted: inside a YAML `[...]` or `{...}` an unquoted `,` splits it in two)")
    }

    /// Error once `depth` passes [`MAX_EXPR_DEPTH`], so deep nesting is a diagnostic, not a
    /// stack overflow.
    fn check_depth(&self, depth: usize) -> Result<(), Diagnostic> {
        if depth > MAX_EXPR_DEPTH {
            return Err(Diagnostic::error(
                Code::BadExpression,
                self.span(),
                format!("expression nested deeper than {MAX_EXPR_DEPTH} levels"),
            )
            .label("too deep")
            .help("simplify the expression or split it into named quantities"));
        }
        Ok(())
    }

    fn expr(&mut self, depth: usize) -> Result<Expr, Diagnostic> {
        self.check_depth(depth)?;
        let mut lhs = self.term(depth)?;
        while let Some(Tok::Op(c @ ('+' | '-'))) = self.peek() {
            let op = if *c == '+' { BinOp::Add } else { BinOp::Sub };
            self.bump();
            let rhs = self.term(depth)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    fn term(&mut self, depth: usize) -> Result<Expr, Diagnostic> {
        let mut lhs = self.unary(depth)?;
        while let Some(Tok::Op(c @ ('*' | '/'))) = self.peek() {
            let op = if *c == '*' { BinOp::Mul } else { BinOp::Div };
            self.bump();
            let rhs = self.unary(depth)?;
            let span = lhs.span.to(rhs.span);
            lhs = Expr {
                kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
                span,
            };
        }
        Ok(lhs)
    }

    fn unary(&mut self, depth: usize) -> Result<Expr, Diagnostic> {
        self.check_depth(depth)?;
        if let Some(Tok::Op('-')) = self.peek() {
            let start = self.span();
            self.bump();
            let inner = self.unary(depth + 1)?;
            let span = start.to(inner.span);
            return Ok(Expr {
                kind: ExprKind::Neg(Box::new(inner)),
                span,
            });
        }
        self.atom(depth)
    }

    fn atom(&mut self, depth: usize) -> Result<Expr, Diagnostic> {
        match self.peek().cloned() {
            Some(Tok::Int(v)) => {
                let (_, sp) = self.bump().unwrap_or((Tok::Int(v), self.whole));
                if let Some(unit) = self.unit() {
                    let span = sp.to(unit.den.as_ref().unwrap_or(&unit.num).span);
                    return Ok(Expr {
                        kind: ExprKind::Measure(v, Box::new(unit)),
                        span,
                    });
                }
                Ok(Expr {
                    kind: ExprKind::Int(v),
                    span: sp,
                })
            }
            Some(Tok::Name(n)) => {
                let (_, sp) = self.bump().unwrap_or((Tok::Comma, self.whole));
                if let Some(Tok::LParen) = self.peek() {
                    self.bump();
                    if n == "extent" {
                        let arg = match self.bump() {
                            Some((Tok::Name(r), rs)) => Spanned::new(r, rs),
                            _ => {
                                self.pos = self.pos.saturating_sub(1);
                                return Err(self.err_here("a region name"));
                            }
                        };
                        if !matches!(self.peek(), Some(Tok::RParen)) {
                            return Err(self.err_here("`)`"));
                        }
                        self.bump();
                        let span = Span::new(sp.start, self.prev_end());
                        return Ok(Expr {
                            kind: ExprKind::Extent(arg),
                            span,
                        });
                    }
                    let func = match n.as_str() {
                        "min" => Func::Min,
                        "max" => Func::Max,
                        "ceil_div" => Func::CeilDiv,
                        "floor_div" => Func::FloorDiv,
                        _ => {
                            return Err(Diagnostic::error(
                                Code::BadExpression,
                                sp,
                                format!("unknown function `{n}`"),
                            )
                            .label("not a built-in function")
                            .help("available functions: min, max, ceil_div, floor_div, extent(region)"));
                        }
                    };
                    let mut args = vec![self.expr(depth + 1)?];
                    while let Some(Tok::Comma) = self.peek() {
                        self.bump();
                        args.push(self.expr(depth + 1)?);
                    }
                    if !matches!(self.peek(), Some(Tok::RParen)) {
                        return Err(self.err_here("`,` or `)`"));
                    }
                    self.bump();
                    let span = Span::new(sp.start, self.prev_end());
                    if args.len() != 2 {
                        return Err(Diagnostic::error(
                            Code::BadExpression,
                            span,
                            format!("`{n}` takes 2 arguments, {} given", args.len()),
                        )
                        .label("wrong number of arguments")
                        .help(format!("write `{n}(a, b)` (quoted, `\"{n}(a, b)\"`, inside a YAML `[...]` or `{{...}}`)")));
                    }
                    return Ok(Expr {
                        kind: ExprKind::Call(func, args),
                        span,
                    });
                }
                Ok(Expr {
                    kind: ExprKind::Name(n),
                    span: sp,
                })
            }
            Some(Tok::LParen) => {
                let open = self.span();
                self.bump();
                let inner = self.expr(depth + 1)?;
                if !matches!(self.peek(), Some(Tok::RParen)) {
                    return Err(self
                        .err_here("`)`")
                        .with_secondary(open, "to close this parenthesis"));
                }
                self.bump();
                Ok(Expr {
                    kind: inner.kind,
                    span: Span::new(open.start, self.prev_end()),
                })
            }
            _ => Err(self.err_here("a number or a name")),
        }
    }

    /// The unit after a literal: `CLOCK` or `CLOCK/CLOCK`, if the next token is a name that is
    /// not a keyword.
    fn unit(&mut self) -> Option<UnitName> {
        let name = |t: Option<&(Tok, Span)>| match t {
            Some((Tok::Name(n), sp)) if !KEYWORDS.contains(&n.as_str()) => {
                Some(Spanned::new(n.clone(), *sp))
            }
            _ => None,
        };
        let num = name(self.toks.get(self.pos))?;
        self.pos += 1;
        let den = match self.toks.get(self.pos) {
            Some((Tok::Op('/'), _)) => name(self.toks.get(self.pos + 1)),
            _ => None,
        };
        if den.is_some() {
            self.pos += 2;
        }
        Some(UnitName { num, den })
    }

    fn finish(&self) -> Result<(), Diagnostic> {
        if self.pos < self.toks.len() {
            Err(self.err_here("an operator or the end of the expression"))
        } else {
            Ok(())
        }
    }
}

/// Words of the grammar that are never units or quantities.
pub const KEYWORDS: &[&str] = &["per", "and", "mod"];

/// Most tokens accepted in one expression (bounds the depth of left-nested operator chains).
pub const MAX_EXPR_TOKENS: usize = 256;

fn parser(text: &str, base: usize) -> Result<P, Diagnostic> {
    let toks = Lexer::lex(text, base)?;
    if toks.len() > MAX_EXPR_TOKENS {
        return Err(Diagnostic::error(
            Code::BadExpression,
            Span::new(base, base + text.len()),
            format!("expression longer than {MAX_EXPR_TOKENS} tokens"),
        )
        .label("too long")
        .help("split it into named quantities"));
    }
    Ok(P {
        toks,
        pos: 0,
        whole: Span::new(base, base + text.len()),
    })
}

/// Parse an expression written at byte offset `base` of the spec.
pub fn parse_expr(text: &str, base: usize) -> Result<Expr, Diagnostic> {
    let mut p = parser(text, base)?;
    if p.toks.is_empty() {
        return Err(p.err_here("an expression"));
    }
    let e = p.expr(0)?;
    p.finish()?;
    Ok(e)
}

/// Parse `EXPR per CLOCK` (a clock rate).
pub fn parse_rate(text: &str, base: usize) -> Result<(Expr, Ident), Diagnostic> {
    let mut p = parser(text, base)?;
    let e = p.expr(0)?;
    match p.bump() {
        Some((Tok::Name(w), _)) if w == "per" => {}
        _ => {
            p.pos = p.pos.saturating_sub(1);
            return Err(p
                .err_here("`per`")
                .help("a derived clock is written `RATE per CLOCK`, e.g. `frame: 2 per token`"));
        }
    }
    let clock = match p.bump() {
        Some((Tok::Name(c), sp)) => Spanned::new(c, sp),
        _ => {
            p.pos = p.pos.saturating_sub(1);
            return Err(p.err_here("a clock name"));
        }
    };
    p.finish()?;
    Ok((e, clock))
}

/// Parse an admission predicate (`f <= f_chunk`, `f >= 1 and f <= f_chunk`).
pub fn parse_predicate(text: &str, base: usize) -> Result<Predicate, Diagnostic> {
    let mut p = parser(text, base)?;
    let mut var: Option<Ident> = None;
    let mut clauses = Vec::new();
    loop {
        let v = match p.bump() {
            Some((Tok::Name(n), sp)) => Spanned::new(n, sp),
            _ => {
                p.pos = p.pos.saturating_sub(1);
                return Err(p
                    .err_here("the call variable")
                    .help("an admission predicate reads like `f <= f_chunk`: the per-call advance, a comparison, a bound"));
            }
        };
        if let Some(prev) = &var
            && prev.value != v.value
        {
            return Err(Diagnostic::error(
                Code::BadExpression,
                v.span,
                format!(
                    "admission predicate compares two different variables (`{}` and `{}`)",
                    prev.value, v.value
                ),
            )
            .label("second variable")
            .with_secondary(prev.span, "first variable")
            .help("constrain one per-call variable, e.g. `f >= 1 and f <= f_chunk`"));
        }
        let op = match p.bump() {
            Some((Tok::Cmp(op), _)) => op,
            _ => {
                p.pos = p.pos.saturating_sub(1);
                return Err(p.err_here("a comparison (`<=`, `<`, `==`, `>=`, `>`)"));
            }
        };
        let e = p.expr(0)?;
        clauses.push((op, e));
        if var.is_none() {
            var = Some(v);
        }
        match p.peek() {
            Some(Tok::Name(w)) if w == "and" => {
                p.bump();
            }
            None => break,
            _ => return Err(p.err_here("`and` or the end of the predicate")),
        }
    }
    let var = var.ok_or_else(|| p.err_here("a predicate"))?;
    Ok(Predicate {
        span: p.whole,
        var,
        clauses,
    })
}

/// Why an expression could not be evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError {
    pub span: Span,
    pub code: Code,
    pub message: String,
    pub help: String,
}

impl EvalError {
    fn new(span: Span, code: Code, message: impl Into<String>, help: impl Into<String>) -> Self {
        EvalError {
            span,
            code,
            message: message.into(),
            help: help.into(),
        }
    }

    /// As a diagnostic.
    pub fn to_diagnostic(&self) -> Diagnostic {
        Diagnostic::error(self.code, self.span, self.message.clone())
            .label("cannot evaluate this")
            .help(self.help.clone())
    }
}

/// Values an expression may refer to.
pub trait Env {
    /// Value of a quantity.
    fn name(&self, name: &str) -> Option<i64>;
    /// Value of `extent(region)` (the current catalog class), if bound.
    fn extent(&self, _region: &str) -> Option<i64> {
        None
    }
}

impl<F: Fn(&str) -> Option<i64>> Env for F {
    fn name(&self, name: &str) -> Option<i64> {
        self(name)
    }
}

/// Evaluate with checked 64-bit arithmetic.
pub fn eval(e: &Expr, env: &dyn Env) -> Result<i64, EvalError> {
    let overflow = |sp| {
        EvalError::new(
            sp,
            Code::Arithmetic,
            "arithmetic overflow",
            "the result does not fit in 64 bits; check the magnitudes of the quantities involved",
        )
    };
    match &e.kind {
        ExprKind::Int(v) | ExprKind::Measure(v, _) => Ok(*v),
        ExprKind::Name(n) => env.name(n).ok_or_else(|| {
            EvalError::new(
                e.span,
                Code::Undefined,
                format!("`{n}` is not a declared quantity"),
                format!("declare it under `quantities:` (e.g. `{n}: 10`) or fix the spelling"),
            )
        }),
        ExprKind::Extent(r) => env.extent(&r.value).ok_or_else(|| {
            EvalError::new(
                e.span,
                Code::Undefined,
                format!("`extent({})` has no value here", r.value),
                "`extent(region)` is only defined in callable argument shapes, for a region the callable reads",
            )
        }),
        ExprKind::Neg(x) => eval(x, env)?.checked_neg().ok_or_else(|| overflow(e.span)),
        ExprKind::Binary(op, a, b) => {
            let x = eval(a, env)?;
            let y = eval(b, env)?;
            match op {
                BinOp::Add => x.checked_add(y).ok_or_else(|| overflow(e.span)),
                BinOp::Sub => x.checked_sub(y).ok_or_else(|| overflow(e.span)),
                BinOp::Mul => x.checked_mul(y).ok_or_else(|| overflow(e.span)),
                BinOp::Div => {
                    if y == 0 {
                        return Err(EvalError::new(
                            b.span,
                            Code::Arithmetic,
                            "division by zero",
                            "the divisor evaluates to 0; check the quantities it uses",
                        ));
                    }
                    if x.checked_rem(y) != Some(0) {
                        return Err(EvalError::new(
                            e.span,
                            Code::Arithmetic,
                            format!("`/` must divide exactly, but {x} / {y} leaves a remainder"),
                            "use `ceil_div(a, b)` or `floor_div(a, b)` to round explicitly",
                        ));
                    }
                    x.checked_div(y).ok_or_else(|| overflow(e.span))
                }
            }
        }
        ExprKind::Call(f, args) => {
            let (Some(a0), Some(a1)) = (args.first(), args.get(1)) else {
                return Err(EvalError::new(
                    e.span,
                    Code::BadExpression,
                    "wrong number of arguments",
                    "built-in functions take two arguments",
                ));
            };
            let x = eval(a0, env)?;
            let y = eval(a1, env)?;
            match f {
                Func::Min => Ok(x.min(y)),
                Func::Max => Ok(x.max(y)),
                Func::CeilDiv | Func::FloorDiv => {
                    if y <= 0 {
                        return Err(EvalError::new(
                            a1.span,
                            Code::Arithmetic,
                            format!("`{}` needs a positive divisor, got {y}", f.name()),
                            "the divisor must be at least 1",
                        ));
                    }
                    let q = x.div_euclid(y);
                    let r = x.rem_euclid(y);
                    Ok(if *f == Func::CeilDiv && r != 0 {
                        q + 1
                    } else {
                        q
                    })
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
