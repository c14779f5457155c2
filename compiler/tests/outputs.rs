//! The `dcc` binary's outputs and inputs: nothing lost (a spec is never overwritten, an output
//! is replaced atomically or not at all), nothing falsely passed (a failed write, a closed or
//! full stdout, an unreadable input all end in a non-zero exit, never a hang or a panic).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn dcc() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dcc"))
}

/// A temp dir holding a copy of `specs/token2wav.yaml` as `spec.yaml`.
fn with_spec() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("spec.yaml");
    std::fs::copy(root().join("specs/token2wav.yaml"), &spec).unwrap();
    (dir, spec)
}

/// Waits for `child` at most 30 s, reading its pipes meanwhile (a hang fails the test instead
/// of blocking the suite).
fn finish(child: Child) -> Output {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    rx.recv_timeout(Duration::from_secs(30))
        .expect("dcc hung")
        .unwrap()
}

fn run(cmd: &mut Command) -> Output {
    finish(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Names in `dir`, sorted (to see that no temporary file was left behind).
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

#[test]
fn compile_refuses_to_overwrite_its_own_spec() {
    let (dir, spec) = with_spec();
    let original = std::fs::read(&spec).unwrap();
    let mut targets = vec![spec.clone(), dir.path().join(".").join("spec.yaml")];
    #[cfg(unix)]
    {
        let link = dir.path().join("link.yaml");
        std::os::unix::fs::symlink(&spec, &link).unwrap();
        targets.push(link);
    }
    let hard = dir.path().join("hard.yaml");
    std::fs::hard_link(&spec, &hard).unwrap();
    targets.push(hard);
    for target in &targets {
        let o = run(dcc().arg("compile").arg(&spec).arg("-o").arg(target));
        assert_eq!(o.status.code(), Some(2), "{}", target.display());
        assert!(
            stderr(&o).contains("refusing to overwrite a spec"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read(&spec).unwrap(), original);
    }
    // The spec reached through a symlink, written to its real path, is refused too.
    #[cfg(unix)]
    {
        let o = run(dcc()
            .arg("compile")
            .arg(dir.path().join("link.yaml"))
            .arg("-o")
            .arg(&spec));
        assert_eq!(o.status.code(), Some(2));
        assert_eq!(std::fs::read(&spec).unwrap(), original);
    }
}

#[test]
fn compile_refuses_directory_and_non_regular_outputs() {
    let (dir, spec) = with_spec();
    let mut targets = vec![(dir.path().to_path_buf(), "a directory")];
    #[cfg(unix)]
    {
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        targets.push((fifo, "not a regular file"));
        targets.push((PathBuf::from("/dev/null"), "not a regular file"));
        let link = dir.path().join("null-link.rs");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        targets.push((link, "not a regular file"));
    }
    for (target, kind) in &targets {
        let o = run(dcc().arg("compile").arg(&spec).arg("-o").arg(target));
        assert_eq!(o.status.code(), Some(2), "{}", target.display());
        assert!(stderr(&o).contains(kind), "{}", stderr(&o));
    }
}

#[test]
fn compile_output_is_atomic_and_written_only_on_change() {
    let (dir, spec) = with_spec();
    let stdout = run(dcc().arg("compile").arg(&spec));
    assert_eq!(stdout.status.code(), Some(0));
    let out = dir.path().join("out.rs");
    let o = run(dcc().arg("compile").arg(&spec).arg("-o").arg(&out));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).unwrap(), stdout.stdout);
    // `-` is stdout.
    let dash = run(dcc().arg("compile").arg(&spec).arg("-o").arg("-"));
    assert_eq!(dash.stdout, stdout.stdout);
    // No temporary file is left next to the output.
    assert_eq!(listing(dir.path()), ["out.rs", "spec.yaml"]);
    // Unchanged: not rewritten.
    let mtime = std::fs::metadata(&out).unwrap().modified().unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let o = run(dcc().arg("compile").arg(&spec).arg("-o").arg(&out));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), mtime);
    // A stale output is replaced whole.
    std::fs::write(&out, "stale").unwrap();
    let o = run(dcc().arg("compile").arg(&spec).arg("-o").arg(&out));
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(std::fs::read(&out).unwrap(), stdout.stdout);
    // An output in a missing directory fails with exit 2 and leaves nothing behind.
    let o = run(dcc()
        .arg("compile")
        .arg(&spec)
        .arg("-o")
        .arg(dir.path().join("missing/out.rs")));
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(listing(dir.path()), ["out.rs", "spec.yaml"]);
}

#[test]
fn specs_are_read_only_from_regular_files_of_bounded_size() {
    let (dir, _) = with_spec();
    let mut inputs = vec![dir.path().to_path_buf()];
    #[cfg(unix)]
    {
        let fifo = dir.path().join("fifo.yaml");
        mkfifo(&fifo);
        inputs.push(fifo);
        inputs.push(PathBuf::from("/dev/zero"));
    }
    for input in &inputs {
        for cmd in ["check", "compile", "graph"] {
            let o = run(dcc().arg(cmd).arg(input));
            assert_eq!(o.status.code(), Some(2), "{cmd} {}", input.display());
            assert!(stderr(&o).contains("cannot read"), "{}", stderr(&o));
        }
    }
    // A 4 GiB (sparse) file is refused by its size, without reading it.
    let big = dir.path().join("big.yaml");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(4 << 30)
        .unwrap();
    let start = Instant::now();
    let o = run(dcc().arg("check").arg(&big));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("error[E0003]"), "{}", stderr(&o));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn closed_stdout_and_stderr_exit_cleanly() {
    let (_dir, spec) = with_spec();
    for cmd in [
        &["check"][..],
        &["compile"],
        &["graph"],
        &["check", "--format", "json"],
    ] {
        let mut child = dcc()
            .args(cmd)
            .arg(&spec)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = finish(child);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
    // A spec with errors and a closed stderr: exit 1 (not a panic's 101).
    let bad = spec.with_file_name("bad.yaml");
    std::fs::write(&bad, "family: [\n").unwrap();
    let mut child = dcc()
        .arg("check")
        .arg(&bad)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    assert_eq!(finish(child).status.code(), Some(1));
}

#[cfg(target_os = "linux")]
#[test]
fn full_stdout_is_exit_2() {
    let (_dir, spec) = with_spec();
    for cmd in ["check", "compile", "graph"] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = finish(
            dcc()
                .arg(cmd)
                .arg(&spec)
                .stdout(full)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        assert!(
            stderr(&o).contains("cannot write to stdout"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn over_long_identifier_is_a_dcc_diagnostic_with_a_span() {
    let (dir, spec) = with_spec();
    let text = std::fs::read_to_string(&spec).unwrap();
    let at = text.find("quantities:\n").unwrap() + "quantities:\n".len();
    let long = format!(
        "{}  {}: 3\n{}",
        &text[..at],
        "q".repeat(100_000),
        &text[at..]
    );
    let line = text[..at].lines().count() + 1;
    let path = dir.path().join("long.yaml");
    std::fs::write(&path, long).unwrap();
    let o = run(dcc().arg("check").arg(&path));
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains("error[E0008]"), "{err}");
    assert!(err.contains("100000 characters"), "{err}");
    assert!(err.contains(&format!("long.yaml:{line}:3")), "{err}");
    assert!(!err.contains("invalid YAML"), "{err}");
}

#[test]
fn check_json_prints_one_object_per_input_in_order() {
    let (dir, spec) = with_spec();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "family: [\n").unwrap();
    let missing = dir.path().join("missing.yaml");
    let inputs = [&spec, &missing, &bad, &spec];
    let o = run(dcc()
        .args(["check", "--format", "json"])
        .args(inputs.iter().map(|p| p.as_os_str())));
    assert_eq!(o.status.code(), Some(2));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), inputs.len(), "{text}");
    for (v, p) in lines.iter().zip(inputs) {
        assert_eq!(v["file"], p.display().to_string());
    }
    assert_eq!(lines[0]["family"], "token2wav");
    assert_eq!(lines[3]["family"], "token2wav");
    assert_eq!(lines[1]["family"], serde_json::Value::Null);
    assert_eq!(lines[1]["diagnostics"][0]["code"], "io");
    assert!(
        lines[1]["diagnostics"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("No such file"))
    );
    assert_eq!(lines[2]["diagnostics"][0]["code"], "E0001");
    assert!(
        lines[0]["diagnostics"]
            .as_array()
            .is_none_or(|d| d.iter().all(|d| d["severity"] != "error"))
    );
}
