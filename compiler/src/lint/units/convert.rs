//! The conversion a unit mismatch's `help:` proposes: along the declared clock rates, up the
//! rate tree from the value's clock (dividing by each rate) and down to the expected one
//! (multiplying), each rate written so that the result carries the expected unit.

use super::{Unit, Units};
use crate::ir::*;

impl Units<'_> {
    /// The `help:` that converts `e` (in `from`) into `to` with the declared clock rates.
    pub(super) fn conversion(&mut self, from: &Unit, to: &Unit, e: &Expr) -> String {
        let text = match &e.kind {
            ExprKind::Binary(..) => format!("({e})"),
            _ => e.to_string(),
        };
        // A rate `to/per` where a count of `to` is expected (a stride written per tick of the
        // driving clock instead of per call).
        if let Some(per) = to.div(from).as_clock() {
            return format!(
                "`{text}` is a rate, `{to}` per `{per}` tick, where a count of `{to}` ticks is expected: multiply it by the `{per}` ticks that count covers (`{text} * 1 {per}` for one `{per}` tick per call), or write the count in `{to}` directly"
            );
        }
        let (Some(f), Some(t)) = (from.as_clock(), to.as_clock()) else {
            return format!(
                "expected `{to}`, found `{from}`: multiply or divide by a rate (a quantity with a unit like `2 frame/token`) to get `{to}`"
            );
        };
        let Some((up, down)) = rate_path(self.spec, f, t) else {
            return format!(
                "`{f}` and `{t}` are unrelated clocks (no chain of declared rates leads from one to the other): write this value in `{t}`"
            );
        };
        let mut text = text;
        let mut notes = Vec::new();
        let mut exact = true;
        for (c, rate, per) in &up {
            text = format!("{text} / {}", self.factor(c, rate, per, &mut notes));
            exact = false;
        }
        for (c, rate, per) in &down {
            text = format!("{text} * {}", self.factor(c, rate, per, &mut notes));
        }
        let rates: Vec<String> = up
            .iter()
            .chain(&down)
            .map(|(c, rate, per)| format!("`{c}: {rate} per {per}`"))
            .collect();
        let mut help = format!(
            "convert with the declared rate{} ({}): write `{text}`",
            if rates.len() == 1 { "" } else { "s" },
            rates.join(", ")
        );
        if !exact {
            help.push_str(" (`/` must divide exactly; `ceil_div` or `floor_div` round)");
        }
        for n in notes {
            help.push_str("; ");
            help.push_str(&n);
        }
        help
    }

    /// How to write the rate of `c: rate per per` as a factor with the unit `c/per`.
    fn factor(&mut self, c: &str, rate: &Expr, per: &str, notes: &mut Vec<String>) -> String {
        let want = Unit::clock(c).div(&Unit::clock(per));
        match &rate.kind {
            ExprKind::Int(v) => format!("{v} {c}/{per}"),
            ExprKind::Measure(..) => rate.to_string(),
            ExprKind::Name(n) => {
                let unit = self.quantity(n).map(|t| t.unit).unwrap_or_default();
                let spec = self.spec;
                match spec.quantity(n).map(|q| &q.expr) {
                    _ if unit == want => {}
                    Some(Expr {
                        kind: ExprKind::Int(v),
                        ..
                    }) => notes.push(format!(
                        "declare the rate with its unit, `{n}: {v} {want}`, so the result is in `{c}`"
                    )),
                    _ => notes.push(format!(
                        "`{n}` is in `{unit}`: give the rate the unit `{want}` so the result is in `{c}`"
                    )),
                }
                n.clone()
            }
            _ => {
                notes.push(format!(
                    "the rate `{rate}` has no unit: name it as a quantity with the unit `{want}`"
                ));
                format!("({rate})")
            }
        }
    }
}

/// One declared rate hop: `(clock, rate, per)` for `clock: rate per per`.
pub(super) type Hop = (String, Expr, String);

/// The rate hops from clock `from` to clock `to`: first up the rate tree from `from` (each hop
/// divides by that clock's rate), then down to `to` (each hop multiplies). `None` when the two
/// clocks share no ancestor.
pub(super) fn rate_path(spec: &Spec, from: &str, to: &str) -> Option<(Vec<Hop>, Vec<Hop>)> {
    let chain = |start: &str| {
        let mut out: Vec<Hop> = Vec::new();
        let mut names = vec![start.to_string()];
        let mut cur = start.to_string();
        while let Some(ClockKind::Rate { rate, per }) = spec.clock(&cur).map(|k| &k.kind) {
            if names.contains(&per.value) || names.len() > spec.clocks.len() {
                break;
            }
            out.push((cur.clone(), rate.clone(), per.value.clone()));
            names.push(per.value.clone());
            cur = per.value.clone();
        }
        (names, out)
    };
    let (fa, fh) = chain(from);
    let (ta, th) = chain(to);
    let (i, j) = fa
        .iter()
        .enumerate()
        .find_map(|(i, n)| ta.iter().position(|m| m == n).map(|j| (i, j)))?;
    let up = fh[..i].to_vec();
    let mut down = th[..j].to_vec();
    down.reverse();
    Some((up, down))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_follow_the_declared_rates() {
        let text = "family: t\nclocks:\n  token: base\n  frame: up per token\n  sample: hop per frame\n  chunk: base\nquantities:\n  up: 2\n  hop: 480\nregions: {}\ncallables: {}\n";
        let spec = crate::front::parse(&crate::diag::SourceFile::new("t.yaml", text))
            .expect("spec parses");
        let names = |hops: &[Hop]| hops.iter().map(|h| h.0.clone()).collect::<Vec<_>>();
        let (up, down) = rate_path(&spec, "token", "sample").expect("related");
        assert!(up.is_empty());
        assert_eq!(names(&down), ["frame", "sample"]);
        let (up, down) = rate_path(&spec, "sample", "token").expect("related");
        assert_eq!(names(&up), ["sample", "frame"]);
        assert!(down.is_empty());
        assert!(rate_path(&spec, "chunk", "frame").is_none());
        let mut u = Units::new(&spec);
        let e = crate::expr::parse_expr("n", 0).expect("expr");
        let help = u.conversion(&Unit::clock("token"), &Unit::clock("sample"), &e);
        assert!(help.contains("write `n * up * hop`"), "{help}");
        assert!(help.contains("`up: 2 frame/token`"), "{help}");
        let help = u.conversion(&Unit::clock("sample"), &Unit::clock("token"), &e);
        assert!(help.contains("write `n / hop / up`"), "{help}");
        assert!(help.contains("must divide exactly"), "{help}");
    }
}
