//! Every registered CUDA module compiles under NVRTC, with the options the CUDA backend compiles
//! it with, for the GPUs the project runs on (`sm_90`: H100, H200), and its PTX defines every
//! entry its kernels name. NVRTC needs no GPU, so this runs wherever libnvrtc loads: CI installs
//! it (the `nvidia-cuda-nvrtc` wheel, `.ci/run`) and sets `DCC_REQUIRE_NVRTC=1`, so a kernel that
//! does not compile fails there, before any device run. Elsewhere without libnvrtc the test
//! prints its skip reason.
//!
//! With `DCC_PTX_DUMP=DIR` the test also writes each module's PTX to `DIR/<arch>/<module>.ptx`
//! (`/` in a module's name as `+`): `scripts/ptx-diff.sh` compares two trees' PTX that way, which
//! shows without a GPU that a restructuring of the CUDA source changes no instruction.

use dcc_runtime::backend::{compile_ptx, nvrtc_available};
use dcc_runtime::kernels;

/// The architectures the project's GPUs report (`sm_{major}{minor}`, as the backend compiles).
const ARCHES: &[&str] = &["sm_90"];

#[test]
fn every_module_compiles_under_nvrtc() {
    if !nvrtc_available() {
        assert!(
            std::env::var_os("DCC_REQUIRE_NVRTC").is_none(),
            "DCC_REQUIRE_NVRTC is set but libnvrtc does not load (LD_LIBRARY_PATH?)"
        );
        println!(
            "SKIP (nvrtc): libnvrtc does not load here; set LD_LIBRARY_PATH to a CUDA 13 NVRTC"
        );
        return;
    }
    let t = std::time::Instant::now();
    let sources = kernels::sources();
    let jobs: Vec<_> = ARCHES
        .iter()
        .flat_map(|a| sources.iter().map(move |s| (*s, *a)))
        .collect();
    // Modules compile independently: one NVRTC program per thread, as many threads as cores.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let failures: Vec<String> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                sc.spawn(|| {
                    let mut bad = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(src, arch)) = jobs.get(i) else {
                            return bad;
                        };
                        bad.extend(check(src, arch));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().expect("a compile thread panicked"))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    println!(
        "nvrtc: {} modules ({} kernels) compiled for {ARCHES:?} in {:.1} s",
        sources.len(),
        kernels::registry().count(),
        t.elapsed().as_secs_f64()
    );
}

/// What is wrong with `src` compiled for `arch`: it does not compile, or its PTX lacks an entry
/// one of its kernels names.
fn check(src: &'static kernels::CudaSource, arch: &str) -> Vec<String> {
    let ptx = match compile_ptx(src, arch) {
        Ok(p) => p,
        Err(e) => return vec![format!("{} ({arch}) does not compile: {e}", src.name)],
    };
    if let Some(dir) = std::env::var_os("DCC_PTX_DUMP") {
        let dir = std::path::Path::new(&dir).join(arch);
        let file = dir.join(format!("{}.ptx", src.name.replace('/', "+")));
        // Written beside and renamed over, so a dump holds whole files or none.
        let part = file.with_extension("ptx.part");
        let written = std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(&part, &ptx))
            .and_then(|()| std::fs::rename(&part, &file));
        if let Err(e) = written {
            return vec![format!("{}: {e}", file.display())];
        }
    }
    kernels::registry()
        .filter(|k| k.source.name == src.name)
        .filter(|k| !ptx.contains(&format!(".entry {}(", k.entry)))
        .map(|k| {
            format!(
                "{} ({arch}): no entry `{}` for {}",
                src.name, k.entry, k.name
            )
        })
        .collect()
}

/// The check can fail: a module with a syntax error is refused, with NVRTC's log.
#[test]
fn a_broken_module_is_refused() {
    if !nvrtc_available() {
        println!("SKIP (nvrtc): libnvrtc does not load here");
        return;
    }
    static BROKEN: kernels::CudaSource = kernels::CudaSource {
        name: "test/broken",
        code: "extern \"C\" __global__ void broken(float* y) { y[0] = undefined_name; }\n",
    };
    let e = compile_ptx(&BROKEN, "sm_90").expect_err("a broken module compiled");
    let msg = format!("{e}");
    // The module's name and NVRTC's log, with the line and the undefined identifier.
    assert!(msg.contains("test/broken"), "{msg}");
    assert!(msg.contains("undefined_name"), "{msg}");
}
