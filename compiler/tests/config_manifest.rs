//! `dcc_compiler::Config` (build scripts): the manifest of written modules removes the module of
//! a spec dropped from the list, two specs of one family are refused, and no spec is overwritten.

use std::path::{Path, PathBuf};

use dcc_compiler::back::MANIFEST;
use dcc_compiler::{CompileError, Config};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A temp dir with copies of bundled specs, and a `Config` writing to `<dir>/out`.
fn setup(specs: &[&str]) -> (tempfile::TempDir, Vec<PathBuf>, Config) {
    let dir = tempfile::tempdir().unwrap();
    let paths = specs
        .iter()
        .map(|s| {
            let p = dir.path().join(s);
            std::fs::copy(root().join("specs").join(s), &p).unwrap();
            p
        })
        .collect();
    let mut config = Config::new();
    config
        .out_dir(dir.path().join("out"))
        .rerun_if_changed(false);
    (dir, paths, config)
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn manifest_removes_the_module_of_a_dropped_spec() {
    let (dir, specs, config) = setup(&["token2wav.yaml", "freeze_omni.yaml"]);
    let out = dir.path().join("out");
    let written = config.compile(&specs).unwrap();
    assert_eq!(
        written,
        [out.join("token2wav.rs"), out.join("freeze_omni.rs")]
    );
    assert_eq!(listing(&out), [MANIFEST, "freeze_omni.rs", "token2wav.rs"]);
    assert_eq!(
        std::fs::read_to_string(out.join(MANIFEST)).unwrap(),
        "freeze_omni.rs\ntoken2wav.rs\n"
    );
    // A file the manifest never listed is not ours: it stays.
    std::fs::write(out.join("hand_written.rs"), "// mine\n").unwrap();

    // Drop freeze_omni: its module goes, token2wav's stays untouched.
    let mtime = std::fs::metadata(out.join("token2wav.rs"))
        .unwrap()
        .modified()
        .unwrap();
    config.compile(&specs[..1]).unwrap();
    assert_eq!(listing(&out), [MANIFEST, "hand_written.rs", "token2wav.rs"]);
    assert_eq!(
        std::fs::read_to_string(out.join(MANIFEST)).unwrap(),
        "token2wav.rs\n"
    );
    assert_eq!(
        std::fs::metadata(out.join("token2wav.rs"))
            .unwrap()
            .modified()
            .unwrap(),
        mtime
    );
}

#[test]
fn manifest_never_removes_anything_outside_the_output_directory() {
    let (dir, specs, config) = setup(&["token2wav.yaml"]);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = dir.path().join("victim.rs");
    std::fs::write(&victim, "// keep\n").unwrap();
    let spec_like = out.join("notes.txt");
    std::fs::write(&spec_like, "keep\n").unwrap();
    std::fs::write(
        out.join(MANIFEST),
        format!("../victim.rs\n{}\nnotes.txt\n", victim.display()),
    )
    .unwrap();
    config.compile(&specs).unwrap();
    assert!(victim.exists());
    assert!(spec_like.exists());
    assert_eq!(
        std::fs::read_to_string(out.join(MANIFEST)).unwrap(),
        "token2wav.rs\n"
    );
}

#[test]
fn two_specs_of_one_family_are_refused_before_anything_is_written() {
    let (dir, specs, config) = setup(&["token2wav.yaml"]);
    let twin = dir.path().join("twin.yaml");
    std::fs::copy(&specs[0], &twin).unwrap();
    let err = config.compile(&[&specs[0], &twin]).unwrap_err();
    match &err {
        CompileError::DuplicateFamily {
            family,
            first,
            second,
        } => {
            assert_eq!(family, "token2wav");
            assert_eq!(first, &specs[0]);
            assert_eq!(second, &twin);
        }
        other => panic!("expected DuplicateFamily, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("token2wav.yaml") && text.contains("twin.yaml"),
        "{text}"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn an_output_that_is_a_spec_of_the_run_is_refused() {
    let (dir, _, config) = setup(&[]);
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    // The spec lives where its own module would be written.
    let spec = out.join("token2wav.rs");
    std::fs::copy(root().join("specs/token2wav.yaml"), &spec).unwrap();
    let original = std::fs::read(&spec).unwrap();
    let err = config.compile(&[&spec]).unwrap_err();
    assert!(matches!(err, CompileError::OutputIsInput { .. }), "{err:?}");
    assert_eq!(std::fs::read(&spec).unwrap(), original);
    assert_eq!(listing(&out), ["token2wav.rs"]);
}
