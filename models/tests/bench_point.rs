//! `dcc-bench --point` end to end on the Host backend with the tiny weights: `--gemm f16` lays
//! the sessions out at the contract's `half` point by default (reported as `"point": "half"`),
//! `--point base` forces the f32 cache, and both emit the same mel (the half point stores the
//! values the half path rounds to f16 anyway) with the half point's peak lower by the carry's
//! f16 savings; a point the contract lacks, or an f16 carry on an f32 GEMM path, is a usage
//! error (exit 2) on every subcommand, before the weights are read.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

/// `dcc-bench <sub> --backend host` over the tiny weights, without the vocoder, plus `args`.
fn bench(sub: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args([sub, "--backend", "host", "--weights"])
        .arg(testdata().join("weights.safetensors"))
        .args(["--contract", "token2wav_tiny", "--no-vocoder"])
        .args(args);
    c
}

fn run(mut c: Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().unwrap();
    let e = String::from_utf8_lossy(&stderr).into_owned();
    assert!(!e.contains("panicked"), "{e}");
    let o = String::from_utf8_lossy(&stdout).into_owned();
    (status.code().expect("exited, not killed"), o, e)
}

/// `check` of SRc on the f16 path against the vendor's fp16 mel, at `point` (`None`: the
/// default), as JSON.
fn check_f16(point: Option<&str>) -> serde_json::Value {
    let io = testdata().join("io_half.safetensors");
    let mut args = vec![
        "--gemm", "f16", "--arms", "SRc", "--chunks", "4", "--warmup", "3", "--tol", "1e-2",
        "--format", "json", "--io",
    ];
    args.push(io.to_str().unwrap());
    if let Some(p) = point {
        args.extend(["--point", p]);
    }
    let (code, out, e) = run(bench("check", &args));
    assert_eq!(code, 0, "{e}\n{out}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn f16_runs_at_the_half_point_unless_told_otherwise() {
    let half = check_f16(None);
    let base = check_f16(Some("base"));
    assert_eq!(half["run"]["point"], "half", "{half}");
    assert_eq!(half["run"]["gemm"], "f16");
    assert_eq!(base["run"]["point"], "base", "{base}");
    let (h, b) = (&half["arms"][0], &base["arms"][0]);
    assert_eq!(h["arm"], "SRc");
    assert_eq!(h["mel_sha256"], b["mel_sha256"], "half point ≠ f32 cache");
    // the half point replays its steady chunk like the base (no signature miss)
    assert!(h["replays"].as_u64().unwrap() > 0, "{h}");
    assert_eq!(h["replays"], b["replays"], "{h}\n{b}");
    // the carry's f16 bytes: tiny::Carry::BYTES / 2 = 4,116,480 B less per session
    let (hp, bp) = (
        h["peak_mib"].as_f64().unwrap(),
        b["peak_mib"].as_f64().unwrap(),
    );
    let saved = (bp - hp) * 1024.0 * 1024.0;
    assert!(
        saved >= 4_116_480.0,
        "peak {hp} MiB at half, {bp} MiB at base"
    );
}

#[test]
fn a_point_the_contract_lacks_is_a_usage_error() {
    let io = testdata().join("io.safetensors");
    let io = io.to_str().unwrap();
    for (sub, args, want) in [
        (
            "check",
            vec!["--io", io, "--point", "fast"],
            "contract `token2wav_tiny` has no operating point `fast` (its points: base, duplex, \
             half)",
        ),
        (
            "token2wav",
            vec!["--point", "half", "--gemm", "invariant"],
            "only --gemm f16",
        ),
        (
            "sessions",
            vec!["--sessions", "1", "--point", "nope"],
            "no operating point `nope`",
        ),
    ] {
        let (code, _, e) = run(bench(sub, &args));
        assert_eq!(code, 2, "{sub}: {e}");
        assert!(e.contains(want), "{sub}: `{e}` lacks `{want}`");
    }
    // the vendor-slicing contract declares no half point: f16 runs it at the base
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args(["check", "--backend", "host", "--weights"])
        .arg(testdata().join("weights.safetensors"))
        .args(["--contract", "token2wav_tiny_vendor", "--no-vocoder"])
        .args(["--io", io, "--gemm", "f16", "--point", "half"]);
    let (code, _, e) = run(c);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("its points: base, duplex"), "{e}");
}
