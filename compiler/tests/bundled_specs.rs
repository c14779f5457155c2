//! The bundled specs reproduce the paper's numbers (Table 2, Table 3, eq. 4) — derived, not
//! stored: change a quantity in the spec and these fail.

use dcc_compiler::ir::Verdict;
use dcc_compiler::{Checked, load_file};

fn spec(name: &str) -> Checked {
    let path = format!("{}/../specs/{name}.yaml", env!("CARGO_MANIFEST_DIR"));
    match load_file(&path) {
        Ok(c) => c,
        Err(e) => panic!("{path}: {e}"),
    }
}

#[test]
fn token2wav_table2_and_catalog() {
    let c = spec("token2wav");
    let d = &c.derived;
    let carry = d.region("carry").unwrap();
    assert_eq!(carry.attended_extent.value, 402);
    assert_eq!(
        carry.attended_extent.explain(),
        "402 = f_prompt 302 + f_retained 100"
    );
    assert_eq!(carry.catalog, vec![302, 352, 402]);
    let ws = d.region("solver_workspace").unwrap();
    let env: Vec<u64> = ws.envelope_axes.iter().map(|e| e.value).collect();
    assert_eq!(env, vec![10, 458]);
    assert_eq!(ws.tick_bytes.value, 131_072);
    assert_eq!(ws.rho().unwrap().rounded1(), 3.5);
    let mask = d.region("attention_mask").unwrap();
    let rhos: Vec<f64> = mask.stock.iter().map(|s| s.rho.rounded1()).collect();
    assert_eq!(rhos, vec![8.9, 17.9]);
    let flow = d.callable("flow").unwrap();
    assert_eq!(flow.attended_extents, vec![302, 352, 402]);
    assert_eq!(flow.catalog_width, 3);
    assert_eq!(flow.catalog_size.value, 3);
    assert_eq!(flow.verdict, Verdict::Captured);
    assert_eq!(flow.launch_ratio.den, 10);
    // Chunk granularity: the stacked carry over all solver steps is one input (≈527 MB).
    assert_eq!(
        flow.reserve_chunk.largest_input,
        Some(("cache".to_string(), 10 * 402 * 131_072))
    );
    assert_eq!(
        flow.reserve_step.largest_input,
        Some(("cache".to_string(), 402 * 131_072))
    );
    // The carry is aliased, so it never enters the staging term.
    assert!(flow.reserve_chunk.staging_bytes < 1_000_000);
    assert_eq!(flow.reserve_chunk.classes.len(), 3);
    assert_eq!(flow.flush_classes.as_ref().map(|f| f.value), Some(50));
    // Duplex operating point: 5 solver steps.
    let duplex = &c.operating_points[0];
    assert_eq!(duplex.operating_point, "duplex");
    let ws = duplex.region("solver_workspace").unwrap();
    assert_eq!(ws.envelope_axes[0].value, 5);
    assert_eq!(ws.rho().unwrap().rounded1(), 7.0);
    assert_eq!(c.spec.constants.len(), 3);
}

#[test]
fn table3_verdicts() {
    let cases = [
        ("moshi", 1, Verdict::Captured),
        ("token2wav", 3, Verdict::Captured),
        ("freeze_omni", 2, Verdict::Captured),
        ("speech_token_kv", 1, Verdict::OutQo),
        ("language_backbone", 2001, Verdict::OutWidth),
    ];
    for (name, k, verdict) in cases {
        let c = spec(name);
        let main = c
            .derived
            .callables
            .iter()
            .find(|x| x.catalog_width == k)
            .unwrap_or_else(|| panic!("{name}: no callable with K = {k}"));
        assert_eq!(main.verdict, verdict, "{name}");
        assert!(!main.reason.is_empty());
    }
    let lb = spec("language_backbone");
    let r = &lb.derived.regions[0];
    assert_eq!(
        (r.width.window.value, r.width.stride.as_ref().unwrap().value),
        (2000, 1)
    );
    let st = spec("speech_token_kv");
    assert_eq!(st.derived.callables[0].classes, None);
}

#[test]
fn cli_json_and_exit_codes() {
    use std::process::Command;
    let exe = env!("CARGO_BIN_EXE_dcc");
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new(exe)
        .current_dir(root)
        .args([
            "check",
            "specs/token2wav.yaml",
            "specs/moshi.yaml",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let objs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), 2);
    let t = &objs[0];
    assert_eq!(t["family"], "token2wav");
    assert_eq!(t["spec_sha256"].as_str().unwrap().len(), 64);
    let ws = t["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "solver_workspace")
        .unwrap();
    assert_eq!(ws["rho"], 3.5);
    for key in [
        "attended_extent",
        "envelope_extent",
        "live_bytes",
        "reserved_bytes",
    ] {
        assert!(ws.get(key).is_some(), "{key}");
    }
    let flow = t["callables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "flow")
        .unwrap();
    assert_eq!(flow["attended_extents"], serde_json::json!([302, 352, 402]));
    assert_eq!(flow["verdict"], "captured");
    assert!(flow["m_reserve_bytes"]["chunk"].as_u64().is_some());
    assert!(t["diagnostics"].is_array());

    let bad = Command::new(exe)
        .current_dir(root)
        .args([
            "check",
            "compiler/tests/malformed/09_undefined_quantity.yaml",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("error[E0021]"));
    let missing = Command::new(exe)
        .args(["check", "/nonexistent/spec.yaml"])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(2));
    let usage = Command::new(exe).args(["frobnicate"]).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    let dot = Command::new(exe)
        .current_dir(root)
        .args(["graph", "specs/token2wav.yaml"])
        .output()
        .unwrap();
    assert_eq!(dot.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&dot.stdout).starts_with("digraph"));
}
