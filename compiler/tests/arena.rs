//! The session arena is laid out once, by `derive::arena`: for every bundled spec, the total
//! `dcc check --format json` reports (at the base and at every operating point) is the
//! `ARENA_BYTES` the generated module declares, alignment padding included, and so are its
//! per-session and per-process parts (`SESSION_BYTES`, `PROCESS_BYTES`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn bundled_specs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("specs"))
        .expect("read specs/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no bundled specs");
    v
}

/// The value of the first `pub const ARENA_BYTES: usize = 1_141_379_328;` line at indentation
/// `indent` in `module`.
fn arena_bytes_in(module: &str, indent: &str) -> u64 {
    const_in(module, indent, "ARENA_BYTES")
}

/// The value of the first `pub const {name}: usize = …;` line at indentation `indent`.
fn const_in(module: &str, indent: &str, name: &str) -> u64 {
    let prefix = format!("{indent}pub const {name}: usize = ");
    let line = module
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line"));
    line[prefix.len()..]
        .trim_end_matches(';')
        .replace('_', "")
        .parse()
        .expect("an integer literal")
}

#[test]
fn check_json_total_equals_generated_arena_bytes() {
    for spec in bundled_specs() {
        let out = Command::new(env!("CARGO_BIN_EXE_dcc"))
            .args(["check", "--format", "json"])
            .arg(&spec)
            .output()
            .expect("run dcc check");
        assert!(out.status.success(), "dcc check {}", spec.display());
        let json: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("dcc check prints JSON");
        let checked = dcc_compiler::load_file(&spec).expect("bundled spec checks");
        let module = dcc_compiler::generate(&checked)
            .expect("generates")
            .into_values()
            .next()
            .expect("one module");
        let name = spec.display();
        let total = json["arena_bytes"].as_u64().expect("arena_bytes");
        assert_eq!(total, arena_bytes_in(&module, ""), "{name}: base");
        assert_eq!(json["arena"]["total_bytes"].as_u64(), Some(total), "{name}");
        assert_eq!(total % 256, 0, "{name}: the total is aligned");
        let live = json["arena"]["live_bytes"].as_u64().expect("live_bytes");
        let padding = json["arena"]["padding_bytes"].as_u64().expect("padding");
        assert_eq!(live + padding, total, "{name}");
        // The two parts: as generated, summing to the total, the per-session one aligned.
        let session = json["session_bytes"].as_u64().expect("session_bytes");
        let process = json["process_bytes"].as_u64().expect("process_bytes");
        assert_eq!(session, const_in(&module, "", "SESSION_BYTES"), "{name}");
        assert_eq!(process, const_in(&module, "", "PROCESS_BYTES"), "{name}");
        assert_eq!((session + process, session % 256), (total, 0), "{name}");
        // Offsets: aligned, in order, disjoint, inside the total; the per-session regions
        // (lifetime turn / session) before `session_bytes`, the others after it.
        let mut end = 0;
        for r in json["arena"]["regions"].as_array().expect("regions") {
            let (offset, bytes) = (r["offset"].as_u64().unwrap(), r["bytes"].as_u64().unwrap());
            assert_eq!(offset % 256, 0, "{name}: {r}");
            assert!(offset >= end, "{name}: {r} overlaps the region before");
            end = offset + bytes;
            let lifetime = json["regions"]
                .as_array()
                .expect("regions")
                .iter()
                .find(|x| x["name"] == r["name"])
                .and_then(|x| x["lifetime"].as_str())
                .unwrap_or_else(|| panic!("{name}: no lifetime for {r}"));
            let per_session = matches!(lifetime, "turn" | "session");
            assert_eq!(r["per_session"].as_bool(), Some(per_session), "{name}: {r}");
            assert_eq!(end <= session, per_session, "{name}: {r}");
        }
        assert!(end <= total, "{name}");
        // Every operating point: its own module in `operating_points`.
        for op in json["operating_points"]
            .as_array()
            .expect("operating_points")
        {
            let op_name = op["name"].as_str().expect("name");
            let at = module
                .find(&format!("    pub mod {op_name} {{"))
                .unwrap_or_else(|| panic!("{name}: no module for `{op_name}`"));
            assert_eq!(
                op["arena_bytes"].as_u64(),
                Some(arena_bytes_in(&module[at..], "        ")),
                "{name}: operating point `{op_name}`"
            );
            for key in ["session_bytes", "process_bytes"] {
                assert_eq!(
                    op[key].as_u64(),
                    Some(const_in(&module[at..], "        ", &key.to_uppercase())),
                    "{name}: operating point `{op_name}`: {key}"
                );
            }
        }
    }
}

#[test]
fn the_report_shows_the_allocated_total() {
    let checked = dcc_compiler::load_file(root().join("specs/token2wav_tiny.yaml")).unwrap();
    let text = dcc_compiler::report::text(&checked);
    // The attention mask's 112 bytes take 256 in the arena, and so do the vocoder's phase (72)
    // and counters (40); its mel history's 17,600 take 17,664: the total is what a session
    // allocates, not the sum of the regions' bytes.
    let a = &checked.derived.arena;
    assert_eq!(
        a.padding(),
        (256 - 112) + (17_664 - 17_600) + (256 - 72) + (256 - 40)
    );
    assert!(
        text.contains(&format!(
            "session arena: {} = live {} + alignment 608 (offsets aligned to 256 B)",
            dcc_compiler::report::fmt_bytes(a.total_bytes),
            group(a.live_bytes)
        )),
        "{text}"
    );
    // bytes per session apart from bytes per process: the solver workspace (lifetime
    // `iteration`) and the mask (`operator`) are the process's
    assert!(
        text.contains(&format!(
            "per session: {} (lifetime turn/session: carry, ",
            dcc_compiler::report::fmt_bytes(a.session_bytes)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "per process: {} (lifetime operator/iteration/unit/process, shared by the sessions \
             of a stream: solver_workspace, attention_mask)",
            dcc_compiler::report::fmt_bytes(a.process_bytes())
        )),
        "{text}"
    );
}

fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
