//! Property test: no input panics or hangs. Mutations of the bundled specs (byte flips,
//! deletions, insertions of YAML-significant characters, truncations) and arbitrary strings are
//! fed to `check_source`; it must return `Ok` or `Err`, never panic.

use proptest::prelude::*;

fn corpus() -> Vec<String> {
    // The bundled specs and the specs that use every construct of the language (units, effect
    // sets, admission bounds, offset views; trajectories, `retention: none`, query phases,
    // `specialize: step`, dtype operating points; batch sizes).
    let dirs = [
        concat!(env!("CARGO_MANIFEST_DIR"), "/../specs"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/lint_ok"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/derive_lang"),
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/batch_ok"),
    ];
    let mut v: Vec<String> = dirs
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).unwrap())
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "yaml"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect();
    v.sort();
    v
}

const PIECES: &[&str] = &[
    "\t",
    ":",
    "- ",
    "[",
    "]",
    "{",
    "}",
    "\n",
    "  ",
    "&a ",
    "*a",
    "!t ",
    "#",
    "'",
    "\"",
    "0",
    "-1",
    "99999999999999999999",
    "/ 0",
    "*",
    "(",
    ")",
    "extent(carry)",
    "per",
    "f <= ",
    "---\n",
    ",",
    " frame",
    " token/frame",
    " mod ",
    " and f > ",
    "effects: [device_rng, host_rng]",
    "view: {axis: frame, at: t + 1 mod 4, len: 2}",
    "min(a, b)",
    "first: 0, ",
    "schedule: [25, 50], ",
    "retention: none",
    "phases: {first: {f_query: 100}, flush: {n_tok: {from: 1, to: 3}}}",
    "specialize: step",
    "dtype: bf16",
    "{kv: f16}",
    "batch: [1, 2, 4]",
    "row_copies: ",
    "18446744073709551615",
];

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("DCC_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(512),
        .. ProptestConfig::default()
    })]

    #[test]
    fn mutated_specs_never_panic(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), 0usize..4, 0usize..PIECES.len(), any::<u8>()), 1..8),
    ) {
        let specs = corpus();
        let mut text = specs[which.index(specs.len())].clone().into_bytes();
        for (idx, kind, piece, byte) in edits {
            if text.is_empty() { break; }
            let at = idx.index(text.len());
            match kind {
                0 => text[at] = byte,
                1 => { text.remove(at); }
                2 => { for (k, b) in PIECES[piece].bytes().enumerate() { text.insert(at + k, b); } }
                _ => text.truncate(at),
            }
        }
        let s = String::from_utf8_lossy(&text);
        if let Err(d) = dcc_compiler::check_source("fuzz.yaml", &s) {
            // Rendering must not panic either (spans always inside the text).
            let _ = d.render();
        }
    }

    #[test]
    fn arbitrary_strings_never_panic(s in "\\PC{0,400}") {
        let _ = dcc_compiler::check_source("fuzz.yaml", &s);
    }
}
