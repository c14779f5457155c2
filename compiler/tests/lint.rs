//! The lint stage: every file in `tests/lint/` parses and validates but describes an
//! impossible contract (or mixes clocks), and must be rejected by a lint with a `help:` line;
//! the rendering is snapshotted. `tests/lint_ok/` holds specs using the new constructs that
//! must check clean, with the numbers they imply.

use dcc_compiler::ir::Verdict;
use dcc_compiler::{Code, Severity, check_source};

#[test]
fn lint_corpus() {
    let mut n = 0;
    insta::glob!("lint/*.yaml", |path| {
        let text = std::fs::read_to_string(path).expect("read corpus file");
        let name = format!(
            "lint/{}",
            path.file_name().and_then(|s| s.to_str()).unwrap_or("?")
        );
        let d = match check_source(&name, &text) {
            Ok(_) => panic!("{name}: accepted"),
            Err(d) => d,
        };
        assert!(d.has_errors(), "{name}: no error");
        for item in &d.items {
            assert!(
                item.help.is_some(),
                "{name}: `{}` has no help",
                item.message
            );
        }
        let rendered = d.render();
        assert!(rendered.contains(&format!("--> {name}:")), "{rendered}");
        insta::assert_snapshot!(rendered);
        n += 1;
    });
    assert!(n >= 20, "only {n} lint cases");
}

fn clean(name: &str) -> dcc_compiler::Checked {
    let path = format!("tests/lint_ok/{name}");
    let text = std::fs::read_to_string(&path).expect("read spec");
    match check_source(&path, &text) {
        Ok(c) => {
            assert!(
                c.warnings
                    .items
                    .iter()
                    .all(|w| w.severity == Severity::Warning),
                "{path}"
            );
            c
        }
        Err(d) => panic!("{path} rejected:\n{}", d.render()),
    }
}

#[test]
fn host_rng_is_a_verdict_not_an_error() {
    let c = clean("host_rng_verdict.yaml");
    let dc = c.derived.callable("c").expect("callable c");
    assert_eq!(dc.verdict, Verdict::OutEffects);
    assert_eq!(dc.verdict.label(), "out: effects");
    assert_eq!(dc.effects.spelling(), "host_rng");
    insta::assert_snapshot!(format!("{}: {}", dc.verdict.label(), dc.reason));
}

#[test]
fn units_sets_bounds_and_views_check_clean() {
    let c = clean("units_and_sets.yaml");
    let q = |n: &str| c.derived.quantity(n).expect(n);
    // Units never change a value: 25 token × 2 frame/token = 50, 50 × 480 = 24,000.
    assert_eq!(
        (q("f_chunk"), q("s_chunk"), q("s_history")),
        (50, 24_000, 1_920)
    );
    let vocode = c.derived.callable("vocode").expect("vocode");
    assert_eq!(vocode.effects.spelling(), "[device_rng, host_rng]");
    assert_eq!(vocode.verdict, Verdict::OutEffects);
    // `f > f_min and f <= f_chunk` admits 11..=50: 40 flush sizes, not the 50 of `f <= f_chunk`.
    let decode = c.derived.callable("decode").expect("decode");
    let flush = decode.flush_classes.as_ref().expect("flush classes");
    assert_eq!(flush.value, 40, "{}", flush.formula);
    insta::assert_snapshot!(flush.explain());
    let tap = c.spec.callable("tap").expect("tap");
    let view = tap.inputs[0].view.as_ref().expect("view");
    assert_eq!(view.at.var.value, "t");
    assert_eq!(view.at.modulus.to_string(), "taps");
    let ring2 = c.spec.callable("ring2").expect("ring2");
    let view = ring2.inputs[0].view.as_ref().expect("view");
    assert_eq!(
        view.at.scale.as_ref().map(|e| e.to_string()),
        Some("2".into())
    );
    // Written two slots per call and read two slots per call: no drift warning.
    assert!(
        c.warnings
            .items
            .iter()
            .all(|w| !w.message.contains("repeats every")),
        "{}",
        c.warnings.render()
    );
}

#[test]
fn a_strict_upper_bound_prints_the_bound_it_admits() {
    let text = std::fs::read_to_string("tests/lint_ok/units_and_sets.yaml")
        .unwrap()
        .replace("admit: f > f_min and f <= f_chunk", "admit: f < f_chunk");
    let c = check_source("lt.yaml", &text).unwrap_or_else(|d| panic!("{}", d.render()));
    let flush = c
        .derived
        .callable("decode")
        .unwrap()
        .flush_classes
        .clone()
        .unwrap();
    assert_eq!(flush.value, 49);
    insta::assert_snapshot!(flush.explain());
}

#[test]
fn every_lint_has_its_own_code() {
    let codes = [
        Code::FlowComma,
        Code::UnitMismatch,
        Code::StrideExceedsWindow,
        Code::RingTooSmall,
        Code::EmptyAdmission,
        Code::View,
    ];
    let mut ids: Vec<&str> = codes.iter().map(|c| c.id()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), codes.len());
}

#[test]
fn a_view_out_of_step_with_its_ring_is_a_warning() {
    let text = std::fs::read_to_string("tests/lint_ok/units_and_sets.yaml")
        .unwrap()
        .replace("at: t + 1 mod taps", "at: t mod 3");
    let c =
        check_source("lint/view_period.yaml", &text).unwrap_or_else(|d| panic!("{}", d.render()));
    let w: Vec<_> = c
        .warnings
        .items
        .iter()
        .filter(|w| w.message.contains("repeats every"))
        .collect();
    assert_eq!(w.len(), 1, "{}", c.warnings.render());
    assert_eq!(w[0].severity, Severity::Warning);
    insta::assert_snapshot!(w[0].render(&c.source));
}

#[test]
fn a_history_window_fed_by_the_caller_may_be_shorter_than_the_stride() {
    // The vocoder's mel history: each call takes its new frames from the caller and keeps only
    // the window's tail for the next call, so the frames beyond the window are attended by the
    // call that writes them. Without the caller input the same region is E0038.
    let text = std::fs::read_to_string("tests/lint/stride_exceeds_window.yaml").unwrap();
    let fed = text.replace(
        "      kv: { region: cache }",
        "      kv: { region: cache }\n      fresh: { dtype: f32, shape: [f_chunk, 4] }",
    );
    assert_ne!(fed, text);
    let c = check_source("history.yaml", &fed).unwrap_or_else(|d| panic!("{}", d.render()));
    assert!(
        c.warnings
            .items
            .iter()
            .all(|w| w.code != Code::StrideExceedsWindow),
        "{}",
        c.warnings.render()
    );
    let Err(d) = check_source("stride.yaml", &text) else {
        panic!("stride.yaml: accepted");
    };
    assert!(d.items.iter().any(|i| i.code == Code::StrideExceedsWindow));
}
