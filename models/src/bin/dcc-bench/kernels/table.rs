//! The table `dcc-bench kernels` prints (`--format table`) from its JSON object.

use std::io::Write;

use serde_json::Value;

use super::{DIT_LAYERS_PER_CHUNK, SESSION_ROWS, TWIN_SHAPES};

/// One line per timed launch (µs, TFLOP/s, ×cuBLAS, twin, base, err), then the twin check, the
/// DiT's linears per chunk and the verdict.
pub(super) fn table(w: &mut dyn Write, out: &Value) -> std::io::Result<()> {
    writeln!(
        w,
        "dcc-bench kernels on {} (median of {} samples of {} launches, operands rotated over {} MiB; \
         ×cuBLAS: cuBLAS µs / µs; twin: bit-equal to the host twin (tf32x3: within its bound of the \
         fp32 twin); base: a tf32x3 tile bit-equal to tf32x3; err: max |y − cuBLAS| / max |cuBLAS|)",
        out["device"].as_str().unwrap_or("?"),
        out["samples"],
        out["reps"],
        out["cold_mib"]
    )?;
    writeln!(
        w,
        "{:>11} {:>5}  {:<24} {:>9} {:>8} {:>7} {:>5} {:>5} {:>9}",
        "in → out", "rows", "kernel", "µs", "TFLOP/s", "×cuBLAS", "twin", "base", "err"
    )?;
    let rows = out["rows"].as_array().map_or(&[][..], |v| v.as_slice());
    let mut cublas_us = f64::NAN;
    for r in rows {
        let us = r["us"].as_f64().unwrap_or(f64::NAN);
        if r["kernel"] == "cublas" {
            cublas_us = us;
        }
        let yes = |v: &Value| match v.as_bool() {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        let (twin, base) = (yes(&r["twin_ok"]), yes(&r["eq_tf32x3"]));
        let err = r["rel_err_vs_cublas"]
            .as_f64()
            .map_or_else(|| "-".into(), |e| format!("{e:.1e}"));
        writeln!(
            w,
            "{:>11} {:>5}  {:<24} {:>9.2} {:>8.2} {:>7.2} {:>5} {:>5} {:>9}",
            format!("{} → {}", r["in"], r["out"]),
            r["rows"].as_u64().unwrap_or(0),
            r["kernel"].as_str().unwrap_or("?"),
            us,
            r["tflops"].as_f64().unwrap_or(f64::NAN),
            cublas_us / us,
            twin,
            base,
            err
        )?;
    }
    if let Some(t) = out["twin_check"].as_array() {
        let bad: Vec<String> = t
            .iter()
            .filter(|r| r["ok"] != Value::Bool(true))
            .map(|r| {
                format!(
                    "{} at {} × {} → {}",
                    r["kernel"], r["rows"], r["in"], r["out"]
                )
            })
            .collect();
        writeln!(
            w,
            "twin check: {} of {} launches pass against the host twin (every variant bit-equal, tf32x3 within its bound and its tiles bit-equal to it, at {:?}, rows × in → out){}",
            t.len() - bad.len(),
            t.len(),
            TWIN_SHAPES,
            if bad.is_empty() {
                String::new()
            } else {
                format!("; DIFFER: {}", bad.join(", "))
            }
        )?;
    }
    if let Some(m) = out["dit_per_chunk_ms"]
        .as_object()
        .filter(|m| !m.is_empty())
    {
        let parts: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{k} {:.2}", v.as_f64().unwrap_or(f64::NAN)))
            .collect();
        writeln!(
            w,
            "DiT linears per chunk at {SESSION_ROWS} rows ({DIT_LAYERS_PER_CHUNK} layer-steps × qkv, out, 2 convs, MLP up, down), ms: {}",
            parts.join(", ")
        )?;
    }
    writeln!(
        w,
        "{}",
        if out["ok"] == Value::Bool(true) {
            "ok: every kernel passes against its twin (where checked) and within --tol of cuBLAS"
        } else {
            "FAILED: a kernel differs from its twin or from cuBLAS beyond --tol"
        }
    )
}
