//! Integer expressions of the spec language: arithmetic over quantities, literals with clock
//! units, `extent(region)` and the `min`/`max`/`ceil_div`/`floor_div` functions.

use std::fmt;

use super::{Ident, Span};

/// Binary operators of the integer expression language.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// Exact division: evaluating `a / b` with `b ∤ a` is an error (use `ceil_div`/`floor_div`).
    Div,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
        }
    }
    /// Binding power (higher binds tighter).
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Add | BinOp::Sub => 1,
            BinOp::Mul | BinOp::Div => 2,
        }
    }
}

/// Built-in functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Min,
    Max,
    /// `ceil_div(a, b)` = ⌈a/b⌉ for positive b.
    CeilDiv,
    /// `floor_div(a, b)` = ⌊a/b⌋ for positive b.
    FloorDiv,
}

impl Func {
    pub fn name(self) -> &'static str {
        match self {
            Func::Min => "min",
            Func::Max => "max",
            Func::CeilDiv => "ceil_div",
            Func::FloorDiv => "floor_div",
        }
    }
}

/// The unit written after a literal: one clock (`frame`) or a rate of two (`frame/token`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UnitName {
    pub num: Ident,
    pub den: Option<Ident>,
}

impl fmt::Display for UnitName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.num.value)?;
        if let Some(d) = &self.den {
            write!(f, "/{}", d.value)?;
        }
        Ok(())
    }
}

/// Shape of an integer expression over quantities.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ExprKind {
    /// Integer literal.
    Int(i64),
    /// Integer literal with a clock unit (`50 frame`, `2 frame/token`); evaluates to the
    /// literal, the unit only feeds the unit check (`lint::units`).
    Measure(i64, Box<UnitName>),
    /// Reference to a quantity.
    Name(String),
    /// `extent(region)`: the attended extent of a region along its growing axis, bound per
    /// catalog class (only meaningful inside callable argument shapes).
    Extent(Ident),
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Call(Func, Vec<Expr>),
}

/// An integer expression with its span.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

impl Expr {
    /// Every quantity name this expression mentions, with its span, in source order.
    pub fn names(&self) -> Vec<(&str, Span)> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<(&'a str, Span)>) {
        match &self.kind {
            ExprKind::Int(_) | ExprKind::Measure(..) | ExprKind::Extent(_) => {}
            ExprKind::Name(n) => out.push((n.as_str(), self.span)),
            ExprKind::Neg(e) => e.collect_names(out),
            ExprKind::Binary(_, a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| a.collect_names(out)),
        }
    }

    /// Every `extent(region)` this expression mentions.
    pub fn extents(&self) -> Vec<&Ident> {
        let mut out = Vec::new();
        self.collect_extents(&mut out);
        out
    }

    fn collect_extents<'a>(&'a self, out: &mut Vec<&'a Ident>) {
        match &self.kind {
            ExprKind::Int(_) | ExprKind::Measure(..) | ExprKind::Name(_) => {}
            ExprKind::Extent(r) => out.push(r),
            ExprKind::Neg(e) => e.collect_extents(out),
            ExprKind::Binary(_, a, b) => {
                a.collect_extents(out);
                b.collect_extents(out);
            }
            ExprKind::Call(_, args) => args.iter().for_each(|a| a.collect_extents(out)),
        }
    }

    /// Whether the expression is a bare literal.
    pub fn as_int(&self) -> Option<i64> {
        match self.kind {
            ExprKind::Int(v) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn go(e: &Expr, parent: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match &e.kind {
                ExprKind::Int(v) => write!(f, "{v}"),
                ExprKind::Measure(v, u) => write!(f, "{v} {u}"),
                ExprKind::Name(n) => f.write_str(n),
                ExprKind::Extent(r) => write!(f, "extent({})", r.value),
                ExprKind::Neg(x) => {
                    f.write_str("-")?;
                    go(x, 3, f)
                }
                ExprKind::Binary(op, a, b) => {
                    let p = op.precedence();
                    if p < parent {
                        f.write_str("(")?;
                    }
                    go(a, p, f)?;
                    write!(f, " {} ", op.symbol())?;
                    go(b, p + 1, f)?;
                    if p < parent {
                        f.write_str(")")?;
                    }
                    Ok(())
                }
                ExprKind::Call(func, args) => {
                    write!(f, "{}(", func.name())?;
                    for (i, a) in args.iter().enumerate() {
                        if i > 0 {
                            f.write_str(", ")?;
                        }
                        go(a, 0, f)?;
                    }
                    f.write_str(")")
                }
            }
        }
        go(self, 0, f)
    }
}
