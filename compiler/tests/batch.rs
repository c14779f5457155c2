//! Cross-session batching (`batch:`): every file in `tests/batch/` is a contract whose batch
//! declaration is malformed or cannot be served, rejected with a spanned error and a `help:`
//! line (snapshotted); `tests/batch_ok/` and the bundled Token2Wav contracts check clean with
//! the batched catalog's numbers asserted here.

use dcc_compiler::{Checked, Code, DerivedBatch, Severity, check_source, load_file};

#[test]
fn batch_corpus() {
    let mut n = 0;
    insta::glob!("batch/*.yaml", |path| {
        let text = std::fs::read_to_string(path).expect("read corpus file");
        let name = format!(
            "batch/{}",
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
    assert!(n >= 14, "only {n} batch cases");
}

#[test]
fn every_batch_code_is_exercised() {
    let codes = |file: &str| -> Vec<Code> {
        let path = format!("tests/batch/{file}");
        let text = std::fs::read_to_string(&path).expect("read corpus file");
        let d = check_source(&path, &text).expect_err("rejected");
        d.items.iter().map(|i| i.code).collect()
    };
    assert_eq!(codes("empty.yaml"), [Code::BadBatch]);
    assert_eq!(
        codes("not_increasing.yaml"),
        [Code::BadBatch, Code::BadBatch]
    );
    assert_eq!(codes("scalar.yaml"), [Code::WrongType]);
    assert_eq!(codes("too_many_graphs.yaml"), [Code::BatchBound]);
    assert_eq!(codes("rows_disagree.yaml"), [Code::BatchBound]);
    assert_eq!(codes("not_captured.yaml"), [Code::BatchBound]);
    assert_eq!(Code::BadBatch.id(), "E0042");
    assert_eq!(Code::BatchBound.id(), "E0043");
}

fn clean(path: &str) -> Checked {
    let text = std::fs::read_to_string(path).expect("read spec");
    match check_source(path, &text) {
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

fn batch<'c>(c: &'c Checked, callable: &str) -> &'c DerivedBatch {
    c.derived
        .callable(callable)
        .and_then(|dc| dc.batch.as_ref())
        .unwrap_or_else(|| panic!("`{callable}` is batched"))
}

#[test]
fn rows_graphs_and_slot_bytes_of_a_small_contract() {
    let c = clean("tests/batch_ok/sizes.yaml");
    let b = batch(&c, "decode");
    assert_eq!(b.sizes, [1, 2, 4]);
    // x is [f_chunk, 4]; spk's leading 1 is a per-session vector, not rows.
    assert_eq!(b.row_input.as_deref(), Some("x"));
    assert_eq!(b.rows_per_session.value, 100);
    assert_eq!(b.rows_per_session.explain(), "100 = f_chunk 50 * cfg 2");
    assert_eq!(b.batchable, [true, true, true]);
    assert_eq!(b.graphs, 9);
    assert_eq!(b.rows, [100, 200, 400]);
    assert_eq!(b.m_reserve_rows, 400);
    let bt = c.derived.batching.as_ref().expect("batching");
    // `work` (unit) scales with the batch, `shared` (process) and `cache` (session) do not.
    assert_eq!(bt.slot_regions, ["work"]);
    assert_eq!(bt.slot_bytes, 1024); // 56 × 4 × 4 = 896, aligned to 256
    assert_eq!(c.derived.arena.process_bytes(), 2048);
    assert_eq!(bt.process_bytes_at_largest, 2048 + 3 * 1024);
    assert_eq!(bt.process_bytes_at(&c.derived.arena, 0), Some(2048));
    assert_eq!(bt.process_bytes_at(&c.derived.arena, 2), Some(3072));
}

#[test]
fn only_classes_with_the_steady_shapes_batch() {
    let c = clean("tests/batch_ok/phases.yaml");
    let dc = c.derived.callable("flow").expect("flow");
    let b = batch(&c, "flow");
    let classes = &dc.reserve().classes;
    assert_eq!(b.batchable.len(), classes.len());
    for (k, &x) in classes.iter().zip(&b.batchable) {
        let rows = k.args[0].dims[0];
        assert_eq!(
            x,
            rows == 50,
            "class {} ({:?}): rows {rows}",
            k.index,
            k.phase
        );
    }
    let batchable = b.batchable.iter().filter(|&&x| x).count() as u64;
    assert!(batchable >= 1 && batchable < classes.len() as u64);
    assert_eq!(b.graphs, batchable * 3 + (classes.len() as u64 - batchable));
    assert_eq!(b.rows_per_session.value, 50);
    // No per-call region: batching adds no bytes.
    let bt = c.derived.batching.as_ref().expect("batching");
    assert!(bt.slot_regions.is_empty());
    assert_eq!(bt.process_bytes_at_largest, c.derived.arena.process_bytes());
}

#[test]
fn token2wav_batches_the_flow_at_32() {
    let c = load_file("../specs/token2wav.yaml").expect("bundled spec checks");
    for name in ["encoder", "vocoder", "vocoder_flush"] {
        let dc = c.derived.callable(name).expect("callable");
        assert!(dc.batch.is_none(), "`{name}` stays at the implicit [1]");
    }
    let b = batch(&c, "flow");
    // powers of two to 16, then sizes closing in on 32 (any class of 54 sessions or more runs
    // in ⌈N / 32⌉ calls)
    let sizes: [u64; 12] = [1, 2, 4, 8, 16, 20, 24, 26, 28, 30, 31, 32];
    assert_eq!(b.sizes, sizes);
    assert_eq!(b.row_input.as_deref(), Some("mu"));
    assert_eq!(b.rows_per_session.explain(), "100 = f_chunk 50 * cfg 2");
    assert_eq!(b.batchable, [true, true, true]); // carry extents 302, 352, 402
    assert_eq!(b.graphs, 36);
    assert_eq!(b.rows, sizes.iter().map(|b| b * 100).collect::<Vec<_>>());
    assert_eq!(b.m_reserve_rows, 3200);
    let bt = c.derived.batching.as_ref().expect("batching");
    assert_eq!(bt.largest, 32);
    assert_eq!(bt.m_reserve_rows, 3200);
    // One solver workspace per batch slot; the 112-byte attention mask is read by no callable.
    assert_eq!(bt.slot_regions, ["solver_workspace"]);
    // One solver step's workspace (`lifetime: iteration`): 458 frames × 131,072 B.
    assert_eq!(bt.slot_bytes, 60_030_976);
    assert_eq!(c.derived.arena.process_bytes(), 60_031_232);
    assert_eq!(bt.process_bytes_at_largest, 60_031_232 + 31 * 60_030_976);
    assert_eq!(c.derived.arena.session_bytes, 541_187_328);
    // The duplex point runs 5 steps, one at a time: the same workspace, and the rows stay.
    let duplex = &c.operating_points[0];
    let bd = duplex.batching.as_ref().expect("batching at duplex");
    assert_eq!(bd.slot_bytes, 60_030_976);
    assert_eq!(bd.process_bytes_at_largest, 60_031_232 + 31 * 60_030_976);
    let fd = duplex.callable("flow").and_then(|f| f.batch.as_ref());
    assert_eq!(fd.map(|b| b.m_reserve_rows), Some(3200));
}

#[test]
fn token2wav_tiny_batches_the_flow_at_4() {
    let c = load_file("../specs/token2wav_tiny.yaml").expect("bundled spec checks");
    let b = batch(&c, "flow");
    assert_eq!(b.sizes, [1, 2, 4]);
    assert_eq!(b.graphs, 9);
    let f_chunk = c.derived.quantity("f_chunk").expect("f_chunk") as u64;
    let cfg = c.derived.quantity("cfg").expect("cfg") as u64;
    assert_eq!(b.rows_per_session.value, f_chunk * cfg);
    assert_eq!(b.m_reserve_rows, 4 * f_chunk * cfg);
}

#[test]
fn reports() {
    insta::glob!("batch_ok/*.yaml", |path| {
        let c = load_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let text = dcc_compiler::report::text(&c);
        // The file path differs between machines; the rest is the rendered report.
        let text = text.replace(&path.display().to_string(), "<spec>");
        insta::assert_snapshot!(text);
    });
}

/// The `batching` sections of `dcc check specs/token2wav.yaml` (the base, `duplex` and
/// `half`).
#[test]
fn token2wav_report_has_a_batching_section() {
    let c = load_file("../specs/token2wav.yaml").expect("bundled spec checks");
    let text = dcc_compiler::report::text(&c);
    let sections: Vec<&str> = text
        .split("\nbatching ")
        .skip(1)
        .map(|s| s.split("\n\n").next().unwrap_or(s))
        .collect();
    assert_eq!(sections.len(), 3, "base, duplex and half");
    insta::assert_snapshot!(sections.join("\n---\n"));
}

#[test]
fn json_report_carries_the_batched_catalog() {
    let c = load_file("../specs/token2wav.yaml").expect("bundled spec checks");
    let j = dcc_compiler::report::json(&c);
    let flow = j["callables"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == "flow"))
        .expect("flow");
    let b = &flow["batch"];
    let sizes: [u64; 12] = [1, 2, 4, 8, 16, 20, 24, 26, 28, 30, 31, 32];
    assert_eq!(b["sizes"], serde_json::json!(sizes));
    assert_eq!(b["rows_per_session"], 100);
    assert_eq!(b["rows_per_session_derivation"]["formula"], "f_chunk * cfg");
    assert_eq!(b["graphs"], 36);
    assert_eq!(
        b["rows"],
        serde_json::json!(sizes.iter().map(|b| b * 100).collect::<Vec<_>>())
    );
    assert_eq!(b["m_reserve_rows"], 3200);
    assert_eq!(b["batchable"], serde_json::json!([true, true, true]));
    let encoder = &j["callables"][0];
    assert_eq!(encoder["name"], "encoder");
    assert!(encoder["batch"].is_null());
    let bt = &j["batching"];
    assert_eq!(bt["largest"], 32);
    assert_eq!(bt["m_reserve_rows"], 3200);
    assert_eq!(bt["slot_regions"], serde_json::json!(["solver_workspace"]));
    assert_eq!(bt["slot_bytes"], 60_030_976u64);
    assert_eq!(bt["process_bytes_at_largest"], 1_920_991_488u64);
    assert_eq!(
        j["operating_points"][0]["batching"]["slot_bytes"],
        60_030_976u64
    );
    // A contract with nothing batched says so.
    let moshi = dcc_compiler::report::json(&load_file("../specs/moshi.yaml").expect("moshi"));
    assert!(moshi["batching"].is_null());
}

fn module(path: &str) -> String {
    let checked = load_file(path).expect("spec checks");
    let files = dcc_compiler::generate(&checked).expect("generates");
    files.into_values().next().expect("one module")
}

/// What the runtime reads: the lines of the generated Token2Wav module, verbatim.
#[test]
fn the_generated_module_spells_the_batched_catalog() {
    let m = module("../specs/token2wav.yaml");
    let has = |s: &str| assert!(m.contains(s), "generated token2wav lacks:\n{s}");
    has("pub const FLOW_BATCH: &[usize] = &[1, 2, 4, 8, 16, 20, 24, 26, 28, 30, 31, 32];");
    has(
        "/// 100 = f_chunk (50) * cfg (2)\n///\n/// Rows one session presents to a batched `flow` call",
    );
    has("pub const FLOW_ROWS_PER_SESSION: usize = 100;");
    has(
        "pub const FLOW_BATCH_ROWS: &[usize] = &[\n    100, 200, 400, 800, 1600, 2000, 2400, 2600, 2800, 3000, 3100, 3200,\n];",
    );
    has("pub const FLOW_BATCHABLE: [bool; 3] = [true, true, true];");
    has("pub const FLOW_GRAPHS: usize = 36;");
    has("pub const FLOW_M_RESERVE_ROWS: usize = 3200;");
    has("pub const MAX_BATCH: usize = 32;");
    has("pub const M_RESERVE_ROWS: usize = 3200;");
    has("pub const BATCH_SLOT_REGIONS: &[&str] = &[\"solver_workspace\"];");
    has("pub const BATCH_SLOT_BYTES: usize = 60_030_976;");
    has("pub const PROCESS_BYTES_AT_BATCH: usize = 1_920_991_488;");
    has("pub const fn process_bytes(batch: usize) -> usize {");
    has("const _: () = assert!(process_bytes(MAX_BATCH) == PROCESS_BYTES_AT_BATCH);");
    // The duplex point's workspace is one step's too.
    has("        pub const BATCH_SLOT_BYTES: usize = 60_030_976;");
    // Nothing else is batched, and a contract without `batch:` has no batching items.
    assert!(!m.contains("ENCODER_BATCH") && !m.contains("VOCODER_BATCH"));
    let moshi = module("../specs/moshi.yaml");
    assert!(!moshi.contains("MAX_BATCH") && !moshi.contains("fn process_bytes"));
}

#[test]
fn a_quantity_named_like_a_batching_constant_is_refused() {
    let text = std::fs::read_to_string("tests/batch_ok/sizes.yaml").expect("read spec");
    let text = text.replace("  cfg: 2\n", "  cfg: 2\n  max_batch: 4\n");
    let checked = check_source("clash.yaml", &text).expect("spec is valid");
    let err = dcc_compiler::generate(&checked).unwrap_err().to_string();
    assert!(err.contains("`MAX_BATCH`"), "{err}");
}
