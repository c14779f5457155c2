//! Output: the table on stdout, and `--json-out` written atomically.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::Res;
use super::cli::Opts;
use super::error::BenchError;

fn fmt_map(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "0".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes `text` to `path` whole or not at all ([`dcc_models::fsio::write_atomic`]); a failure
/// names the path ([`BenchError::Write`]).
pub fn write_atomic(path: &Path, text: &str) -> Res<()> {
    dcc_models::fsio::write_atomic(path, text.as_bytes()).map_err(|error| BenchError::Write {
        path: path.to_path_buf(),
        error,
    })
}
/// Writes the results table to `w`; a write error (a closed pipe, a full disk) is returned,
/// never a panic.
pub fn write_table(w: &mut impl Write, out: &Value, o: &Opts) -> std::io::Result<()> {
    let h = &out["run"];
    writeln!(
        w,
        "{} on {} ({}), contract {} at point {} (gemm {}; {} retention, {} + {} frames), {} config, {} measured chunks after {} warm-up, inputs {}",
        h["bench"].as_str().unwrap_or(""),
        h["device"].as_str().unwrap_or(""),
        h["backend"].as_str().unwrap_or(""),
        h["contract"].as_str().unwrap_or(""),
        h["point"].as_str().unwrap_or(""),
        h["gemm"].as_str().unwrap_or(""),
        h["retention"].as_str().unwrap_or(""),
        h["prompt_frames"],
        h["retained_frames"],
        h["config"].as_str().unwrap_or(""),
        h["chunks"],
        h["warmup"],
        h["inputs"].as_str().unwrap_or(""),
    )?;
    let f = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
    writeln!(
        w,
        "{:<4} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>9} {:>9} {:<20} {:<17} {:>10} {:<6}",
        "arm",
        "p50 ms",
        "p95 ms",
        "busy ms",
        "speedup",
        "peak MiB",
        "dPeak",
        "cuMem MiB",
        "launch/c",
        "kern/c",
        "replays",
        "classes",
        "capt ms",
        "fallbacks (steady)",
        "mel sha256",
        "rel-L2 max",
        "=B0"
    )?;
    for a in out["arms"].as_array().into_iter().flatten() {
        let fb: BTreeMap<String, u64> =
            serde_json::from_value(a["fallbacks_steady"].clone()).unwrap_or_default();
        writeln!(
            w,
            "{:<4} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>8} {:>8} {:>7} {:>9} {:>9} {:<20} {:<17} {:>10} {:<6}",
            a["arm"].as_str().unwrap_or(""),
            f(&a["p50_ms"], 2),
            f(&a["p95_ms"], 2),
            f(&a["device_busy_ms"], 2),
            a["speedup_vs_b0"]
                .as_f64()
                .map_or("-".into(), |x| format!("{x:.2}x")),
            f(&a["peak_mib"], 1),
            f(&a["dpeak_vs_b0_mib"], 1),
            f(&a["cumemgetinfo_used_mib"], 0),
            f(&a["launches_per_chunk"], 1),
            f(&a["kernels_per_chunk"], 0),
            a["replays"].as_u64().unwrap_or(0),
            a["classes_captured"].as_u64().unwrap_or(0),
            f(&a["capture_ms"], 1),
            fmt_map(&fb),
            &a["mel_sha256"].as_str().unwrap_or("")[..16],
            match &a["rel_l2_max"] {
                Value::Number(x) => x.as_f64().map_or("-".into(), |x| format!("{x:.2e}")),
                // "NaN", "inf": a non-finite error, printed as such.
                Value::String(s) => s.clone(),
                _ => "-".into(),
            },
            match a["identical_to_b0"].as_bool() {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            }
        )?;
    }
    super::pcm::write_table(w, out)?;
    if let Some(tol) = o.check_tol {
        // the mel's verdict alone: the PCM's has its own line above
        writeln!(
            w,
            "check: every chunk within rel-L2 {:e} of --io's feat_i: {}",
            tol,
            if out["mel_ok"].as_bool() == Some(true) {
                "yes"
            } else {
                "NO"
            }
        )?;
    }
    Ok(())
}
