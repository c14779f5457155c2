//! The on-disk PTX cache across processes, on the GPU: this test runs its own binary as child
//! processes (each opens a CUDA backend and loads the `synthetic` module) against one cache
//! directory. The first child compiles and writes one file; the second loads it without
//! rewriting it; a file whose digest line is right but whose PTX the driver refuses, and a file
//! with no digest line, are each compiled again and replaced by the same PTX; with
//! `DCC_CACHE_DIR=off` nothing is written (not even under `XDG_CACHE_HOME`). The file logic
//! itself is tested on Host in `dcc_runtime`'s unit tests.
//!
//! Without a GPU the test prints its skip reason (and fails under `DCC_REQUIRE_GPU=1`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The child: one CUDA backend that loads the synthetic module, then exits (run by
/// [`cuda_ptx_cache_serves_and_repairs_across_processes`] with `--ignored`).
#[test]
#[ignore = "a child process of cuda_ptx_cache_serves_and_repairs_across_processes"]
fn ptx_cache_child() {
    let cuda = dcc_runtime::backend::cuda(0).expect("the parent found a GPU");
    cuda.preload(dcc_runtime::kernels::synthetic::KERNELS)
        .expect("preload");
}

/// Runs the child with `env`, which must succeed.
fn child(env: &[(&str, &Path)]) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--ignored",
        "--exact",
        "ptx_cache_child",
        "--test-threads=1",
    ]);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn files(dir: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(dir) {
        Ok(d) => d.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn cuda_ptx_cache_serves_and_repairs_across_processes() {
    let Some(cuda) = common::cuda() else { return };
    drop(cuda);
    let root = std::env::temp_dir().join(format!("dcc-ptx-cache-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("cache");
    let env = [("DCC_CACHE_DIR", dir.as_path())];

    child(&env);
    let written = files(&dir);
    assert_eq!(written.len(), 1, "one module, one file: {written:?}");
    let file = &written[0];
    assert!(file.extension().is_some_and(|e| e == "ptx"), "{file:?}");
    let good = std::fs::read(file).unwrap();
    let stamp = std::fs::metadata(file).unwrap().modified().unwrap();

    // Served from the file: not rewritten.
    std::thread::sleep(std::time::Duration::from_millis(20));
    child(&env);
    assert_eq!(std::fs::metadata(file).unwrap().modified().unwrap(), stamp);
    assert_eq!(files(&dir).len(), 1);

    // An intact file of PTX the driver refuses, then a file without its digest line: each is
    // compiled again and replaced by the same PTX.
    let body = "this is not PTX\n";
    let refused = format!(
        "// dcc-ptx {}\n{body}",
        dcc_runtime::sha256_hex(body.as_bytes())
    );
    for bad in [refused.as_bytes(), b"truncated".as_slice()] {
        std::fs::write(file, bad).unwrap();
        child(&env);
        assert_eq!(std::fs::read(file).unwrap(), good, "not repaired");
        assert_eq!(files(&dir).len(), 1, "no temporary file left");
    }

    // Disabled: nothing written anywhere.
    let xdg = root.join("xdg");
    child(&[
        ("DCC_CACHE_DIR", Path::new("off")),
        ("XDG_CACHE_HOME", &xdg),
    ]);
    assert!(files(&xdg).is_empty());
    let _ = std::fs::remove_dir_all(&root);
    println!("PTX cache: written once, served, repaired twice, and off when told");
}
