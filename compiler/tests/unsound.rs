//! Unsound replay contracts are rejected: a callable may not stage (`alias: false`) an input
//! whose storage it writes, since replay would read a stale copy of what the graph writes.
//!
//! The fixture is the bundled tiny Token2Wav contract with the flow's carry input staged.

use std::path::{Path, PathBuf};
use std::process::Command;

use dcc_compiler::{Code, SourceFile, check_source};

const FIXTURE: &str = "unsound/token2wav_tiny_staged_write.yaml";

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn fixture() -> String {
    std::fs::read_to_string(tests_dir().join(FIXTURE)).expect("read the fixture")
}

/// The fixture is the bundled spec (from `family:` on) plus exactly one change, so it follows
/// the spec's edits.
#[test]
fn the_fixture_is_the_bundled_spec_with_the_carry_staged() {
    let bundled =
        std::fs::read_to_string(tests_dir().join("../../specs/token2wav_tiny.yaml")).unwrap();
    let text = fixture();
    // The fixture's own header, then the bundled spec from `family:` on.
    let (header, body) = text.split_at(text.find("\nfamily:").expect("a family") + 1);
    assert!(header.starts_with("# TEST FIXTURE") && header.contains("alias: false"));
    let bundled = &bundled[bundled.find("\nfamily:").expect("a family") + 1..];
    let staged =
        "      cache: { region: carry, alias: false }   # staged, yet `carry` is written\n";
    assert_eq!(body.matches(staged).count(), 1);
    assert_eq!(
        body.replace(staged, "      cache: { region: carry }\n"),
        bundled
    );
    // The bundled spec itself is sound.
    check_source("token2wav_tiny.yaml", bundled).expect("bundled spec checks");
}

#[test]
fn dcc_check_rejects_the_staged_write() {
    let out = Command::new(env!("CARGO_BIN_EXE_dcc"))
        .current_dir(tests_dir())
        .args(["check", FIXTURE])
        .output()
        .expect("run dcc check");
    assert_eq!(out.status.code(), Some(1), "spec errors exit 1");
    assert!(out.stdout.is_empty(), "no report for a rejected spec");
    let rendered = String::from_utf8(out.stderr).expect("UTF-8");
    insta::assert_snapshot!(rendered);

    let json = Command::new(env!("CARGO_BIN_EXE_dcc"))
        .current_dir(tests_dir())
        .args(["check", "--format", "json", FIXTURE])
        .output()
        .expect("run dcc check --format json");
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(v["diagnostics"][0]["code"], "E0036");
}

/// The check lives in `derive`, so the derivations never yield a catalog that stages written
/// storage, even for a caller that skips validation.
#[test]
fn derive_refuses_a_staged_write_on_its_own() {
    let source = SourceFile::new("fixture.yaml", fixture());
    let spec = dcc_compiler::front::parse(&source).expect("the fixture parses");
    let errs = dcc_compiler::derive::derive_all(&spec).expect_err("derive must refuse it");
    assert_eq!(errs.len(), 1);
    let d = &errs[0];
    assert_eq!(d.code, Code::StagedWrite);
    // Both places are shown: the write (primary) and the staged binding.
    let at = |s: dcc_compiler::ir::Span| &source.text[s.start..s.end];
    assert_eq!(at(d.span), "carry");
    assert_eq!(d.secondary.len(), 1);
    assert_eq!(at(d.secondary[0].span), "false");
    assert!(
        d.help
            .as_deref()
            .unwrap()
            .contains("remove `alias: false` from input `cache`")
    );
}

/// A host region is staged by default: writing it while reading it as an input is refused too,
/// with the binding (not an `alias:` that is not there) as the second place.
#[test]
fn a_written_host_region_read_as_an_input_is_refused() {
    let spec = "family: h\nclocks:\n  frame: base\nquantities:\n  n: 4\nregions:\n  r:\n    clock: frame\n    growth: { frame: n }\n    retention: pinned\n    lifetime: session\n    mutability: mutable\n    placement: host\n    dtype: f32\n    shape: [2]\n  s:\n    clock: frame\n    growth: { frame: n }\n    retention: pinned\n    lifetime: session\n    mutability: mutable\n    placement: arena\n    dtype: f32\n    shape: [2]\ncallables:\n  c:\n    granularity: step\n    effects: none\n    query: fixed\n    inputs:\n      x: { region: r }\n      y: { region: s }\n    writes: [s, r]\n";
    let d = check_source("h.yaml", spec).expect_err("refused");
    assert_eq!(d.items.len(), 1, "{}", d.render());
    let e = &d.items[0];
    assert_eq!(e.code, Code::StagedWrite);
    assert_eq!(&spec[e.span.start..e.span.end], "r");
    assert!(spec[e.secondary[0].span.start..e.secondary[0].span.end].starts_with("x"));
    assert!(e.secondary[0].message.contains("placed on the host"));
    assert!(e.help.as_deref().unwrap().contains("placement: arena"));
    // Staging a region the callable does not write is fine.
    let ok = spec.replace("writes: [s, r]", "writes: [s]");
    check_source("h.yaml", &ok).expect("a staged input that is not written is sound");
}
