//! Parsing, units after literals, offsets and evaluation.

use super::*;

fn ev(s: &str) -> Result<i64, String> {
    let e = parse_expr(s, 0).map_err(|d| d.message)?;
    eval(&e, &|n: &str| match n {
        "a" => Some(302),
        "b" => Some(100),
        _ => None,
    })
    .map_err(|e| e.message)
}

#[test]
fn arithmetic() {
    assert_eq!(ev("a + b"), Ok(402));
    assert_eq!(ev("2 * (a - b) / 4"), Ok(101));
    assert_eq!(ev("ceil_div(b, 30) + 1"), Ok(5));
    assert_eq!(ev("-a + 1_000"), Ok(698));
    assert!(ev("a / 0").is_err());
    assert!(ev("a / 4").is_err());
    assert!(ev("c").is_err());
    assert!(ev("9223372036854775807 + 1").is_err());
    assert!(ev("(a").is_err());
    assert!(ev("a b").is_err());
}

#[test]
fn display_roundtrip() {
    let e = parse_expr("2 * (f_chunk + 3) - a", 0).unwrap();
    assert_eq!(e.to_string(), "2 * (f_chunk + 3) - a");
}

#[test]
fn units_after_literals() {
    let e = parse_expr("2 * 25 token + 3", 0).unwrap();
    assert_eq!(e.to_string(), "2 * 25 token + 3");
    let r = parse_expr("2 frame/token", 0).unwrap();
    assert!(matches!(&r.kind, ExprKind::Measure(2, u) if u.to_string() == "frame/token"));
    assert_eq!(eval(&r, &|_: &str| None).unwrap(), 2);
    // `/` followed by a literal is a division, not a rate.
    let d = parse_expr("50 frame / 2", 0).unwrap();
    assert_eq!(eval(&d, &|_: &str| None).unwrap(), 25);
    // Keywords are never units.
    let (rate, clock) = parse_rate("2 per token", 0).unwrap();
    assert_eq!((rate.as_int(), clock.value.as_str()), (Some(2), "token"));
    let o = parse_offset("2 * t - 1 + 3 mod 250", 0).unwrap();
    assert_eq!(o.var.value, "t");
    assert_eq!(o.scale.map(|e| e.to_string()), Some("2".into()));
    let shift = o.shift.expect("shift");
    assert_eq!(eval(&shift, &|_: &str| None).unwrap(), 2);
    assert!(parse_offset("1 + t mod 4", 0).is_err());
    assert!(parse_offset("t * 2 mod 4", 0).is_err());
    let o = parse_offset("t + 2 mod 4", 0).unwrap();
    assert_eq!(o.var.value, "t");
    assert_eq!(o.shift.map(|e| e.to_string()), Some("2".into()));
    assert_eq!(o.modulus.as_int(), Some(4));
    assert!(parse_offset("t", 0).is_err());
    assert!(parse_offset("t mod", 0).is_err());
}

#[test]
fn predicate_and_rate() {
    let p = parse_predicate("f >= 1 and f <= f_chunk", 0).unwrap();
    assert_eq!(p.clauses.len(), 2);
    let (r, c) = parse_rate("2 per token", 0).unwrap();
    assert_eq!(r.as_int(), Some(2));
    assert_eq!(c.value, "token");
}
