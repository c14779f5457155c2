//! The arena a session allocates is the one `dcc check` reports: for every committed module of
//! `dcc-generated`, the compiled `ARENA` (total and every region's offset) equals the layout in
//! the JSON report of its spec.

use std::path::Path;

use dcc_runtime::contract::ArenaLayout;

fn check(spec_path: &str, arena: &ArenaLayout) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(spec_path);
    let checked = dcc_compiler::load_file(&path).unwrap_or_else(|e| panic!("{spec_path}: {e}"));
    let json = dcc_compiler::report::json(&checked);
    assert_eq!(
        json["arena_bytes"].as_u64(),
        Some(arena.total_bytes as u64),
        "{spec_path}: total"
    );
    assert_eq!(json["arena"]["align"].as_u64(), Some(arena.align as u64));
    let regions = json["arena"]["regions"].as_array().expect("arena regions");
    assert_eq!(regions.len(), arena.regions.len(), "{spec_path}: regions");
    for (r, info) in regions.iter().zip(arena.regions) {
        assert_eq!(r["name"].as_str(), Some(info.name), "{spec_path}");
        assert_eq!(
            r["offset"].as_u64(),
            Some(info.offset as u64),
            "{spec_path}: offset of `{}`",
            info.name
        );
        assert_eq!(r["bytes"].as_u64(), Some(info.bytes as u64), "{spec_path}");
    }
    dcc_runtime::arena::validate_layout(arena).unwrap_or_else(|e| panic!("{spec_path}: {e}"));
}

/// Checks each module and returns the specs it covered.
macro_rules! every_module {
    ($($m:ident),* $(,)?) => {{
        $(check(dcc_generated::$m::SPEC_PATH, &dcc_generated::$m::ARENA);)*
        vec![$(dcc_generated::$m::SPEC_PATH),*]
    }};
}

#[test]
fn generated_arenas_equal_the_reported_layout() {
    let mut covered = every_module!(
        cosyvoice2_flow,
        freeze_omni,
        language_backbone,
        mimi,
        moshi,
        speech_token_kv,
        token2wav,
        token2wav_tiny,
        token2wav_tiny_vendor,
    );
    // Every bundled spec is covered (a new one must be added above).
    let mut bundled: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs"))
            .expect("specs/")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .map(|n| format!("specs/{n}"))
            .collect();
    bundled.sort();
    covered.sort();
    assert_eq!(covered, bundled);
}
