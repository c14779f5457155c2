//! The committed modules in `generated/src/` are exactly what `dcc compile` produces today.
//!
//! Fails, naming the command to run, if one byte differs, if a bundled spec has no committed
//! module, or if a committed module has no spec.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn specs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("specs"))
        .expect("read specs/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no bundled specs found");
    v
}

#[test]
fn committed_modules_match_regeneration() {
    let mut failures = Vec::new();
    let mut modules = BTreeSet::new();
    for spec in specs() {
        let rel = format!("specs/{}", spec.file_name().unwrap().to_string_lossy());
        let checked = match dcc_compiler::load_file(&spec) {
            Ok(c) => c,
            Err(e) => panic!("bundled spec {rel} does not check:\n{e}"),
        };
        let files = dcc_compiler::generate(&checked)
            .unwrap_or_else(|e| panic!("cannot generate {rel}: {e}"));
        for (name, text) in files {
            modules.insert(name.clone());
            let committed = root().join("generated/src").join(&name);
            let cmd = format!(
                "cargo run -p dcc-compiler --bin dcc -- compile {rel} -o generated/src/{}",
                name.display()
            );
            match std::fs::read_to_string(&committed) {
                Ok(old) if old == text => {}
                Ok(old) => {
                    let line = old
                        .lines()
                        .zip(text.lines())
                        .position(|(a, b)| a != b)
                        .map(|i| i + 1)
                        .unwrap_or(old.lines().count().min(text.lines().count()) + 1);
                    failures.push(format!(
                        "generated/src/{} is stale (first difference at line {line}); run:\n    {cmd}",
                        name.display()
                    ));
                }
                Err(_) => failures.push(format!(
                    "generated/src/{} is missing; run:\n    {cmd}\nand add `pub mod {};` to generated/src/lib.rs",
                    name.display(),
                    name.file_stem().unwrap().to_string_lossy()
                )),
            }
        }
    }
    // No module without a spec, and lib.rs declares every module.
    let lib = std::fs::read_to_string(root().join("generated/src/lib.rs")).expect("lib.rs");
    for entry in std::fs::read_dir(root().join("generated/src")).expect("generated/src") {
        let name = PathBuf::from(entry.expect("entry").file_name());
        if name == Path::new("lib.rs") {
            continue;
        }
        if !modules.contains(&name) {
            failures.push(format!(
                "generated/src/{} has no spec in specs/; delete it (and its `pub mod` line)",
                name.display()
            ));
        }
    }
    for m in &modules {
        let stem = m.file_stem().unwrap().to_string_lossy();
        if !lib.contains(&format!("pub mod {stem};")) {
            failures.push(format!("generated/src/lib.rs lacks `pub mod {stem};`"));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

#[test]
fn generation_is_deterministic() {
    for spec in specs() {
        let a = dcc_compiler::generate(&dcc_compiler::load_file(&spec).unwrap()).unwrap();
        let b = dcc_compiler::generate(&dcc_compiler::load_file(&spec).unwrap()).unwrap();
        assert_eq!(a, b, "{}", spec.display());
    }
}
