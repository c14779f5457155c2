//! Every file in `tests/malformed/` must be rejected with at least one error whose rendering
//! names the file, line and column and carries a `help:` line; the rendering is snapshotted.
//! Generated inputs (10 MB, very deep nesting, huge expressions) must fail fast and cleanly.

use std::time::{Duration, Instant};

use dcc_compiler::{Code, check_source};

fn rejected(name: &str, text: &str) -> dcc_compiler::Diagnostics {
    match check_source(name, text) {
        Ok(_) => panic!("{name}: malformed spec was accepted"),
        Err(d) => {
            assert!(d.has_errors(), "{name}: no error reported");
            d
        }
    }
}

#[test]
fn malformed_corpus() {
    let mut n = 0;
    insta::glob!("malformed/*.yaml", |path| {
        let text = std::fs::read_to_string(path).expect("read corpus file");
        let name = format!(
            "malformed/{}",
            path.file_name().and_then(|s| s.to_str()).unwrap_or("?")
        );
        let d = rejected(&name, &text);
        let rendered = d.render();
        for item in &d.items {
            assert!(
                item.help.is_some(),
                "{name}: diagnostic `{}` has no help",
                item.message
            );
        }
        assert!(
            rendered.contains(&format!("--> {name}:")),
            "{name}: no location:\n{rendered}"
        );
        assert!(
            rendered.contains("help:"),
            "{name}: no help line:\n{rendered}"
        );
        insta::assert_snapshot!(rendered);
        n += 1;
    });
    assert!(n >= 25, "only {n} malformed specs");
}

#[test]
fn several_errors_in_one_run() {
    let text = std::fs::read_to_string("tests/malformed/33_several_errors.yaml").unwrap();
    let d = rejected("several.yaml", &text);
    assert!(d.error_count() >= 3, "{}", d.render());
}

#[test]
fn ten_megabyte_file_is_rejected_fast() {
    let mut text = String::from("family: big\n");
    while text.len() < 10 * 1024 * 1024 {
        text.push_str("# padding padding padding padding padding padding padding padding\n");
    }
    let t = Instant::now();
    let d = rejected("big.yaml", &text);
    assert_eq!(d.items[0].code, Code::FileTooLarge);
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn very_deep_nesting_is_rejected_fast() {
    for open in ["[", "{a: ", "- "] {
        let mut text = String::from("family: t\nx: ");
        for i in 0..100_000 {
            if open == "- " {
                text.push('\n');
                text.push_str(&" ".repeat(i % 200));
            }
            text.push_str(open);
        }
        let t = Instant::now();
        let d = rejected("deep.yaml", &text);
        assert!(t.elapsed() < Duration::from_secs(5), "{open}: too slow");
        assert!(!d.items.is_empty());
    }
}

#[test]
fn huge_expression_is_rejected() {
    let expr = vec!["1"; 100_000].join(" + ");
    let text = format!(
        "family: t\nclocks: {{f: base}}\nquantities:\n  n: {expr}\nregions: {{}}\ncallables: {{}}\n"
    );
    let d = rejected("expr.yaml", &text);
    assert_eq!(d.items[0].code, Code::BadExpression);
    let parens = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    let text = format!(
        "family: t\nclocks: {{f: base}}\nquantities:\n  n: {parens}\nregions: {{}}\ncallables: {{}}\n"
    );
    rejected("parens.yaml", &text);
}

#[test]
fn many_quantities_chain_does_not_overflow_the_stack() {
    // A long dependency chain is evaluated iteratively (topological order), not recursively.
    let mut text = String::from("family: t\nclocks: {f: base}\nquantities:\n  q0: 1\n");
    for i in 1..5000 {
        text.push_str(&format!("  q{i}: q{} + 1\n", i - 1));
    }
    text.push_str("regions: {}\ncallables: {}\n");
    let c = check_source("chain.yaml", &text).expect("valid chain");
    assert_eq!(c.derived.quantity("q4999"), Some(5000));
}

#[test]
fn thousands_of_errors_render_fast() {
    let mut text = String::from("family: t\nclocks: {f: base}\nquantities:\n");
    let mut i = 0;
    while text.len() < 1_000_000 {
        text.push_str(&format!("  q{i}: undefined_{i} + 1\n"));
        i += 1;
    }
    text.push_str("regions: {}\ncallables: {}\n");
    let t = Instant::now();
    let d = rejected("many.yaml", &text);
    let r = d.render();
    let _ = d.to_json();
    assert!(r.contains("more diagnostics not shown"));
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}
