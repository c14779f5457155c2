//! `dcc-bench sessions`' table: one row per arm and session count, the out-of-memory lines,
//! the sessions per GPU at real time and the identity checks.

use std::io::Write;

use serde_json::Value;

use super::MIB;
use super::sessions::REALTIME_P95_MS;

/// The results as a table.
pub fn table(w: &mut impl Write, out: &Value) -> std::io::Result<()> {
    let h = &out["run"];
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    writeln!(
        w,
        "{} on {} ({}), contract {} at point {} ({} config), cadence {}, {} measured chunks after {} warm-up, chunk = {} s of audio, inputs {}",
        s(&h["bench"]),
        s(&h["device"]),
        s(&h["backend"]),
        s(&h["contract"]),
        s(&h["point"]),
        s(&h["config"]),
        s(&h["cadence"]),
        h["chunks"],
        h["warmup"],
        h["chunk_s"],
        s(&h["inputs"]),
    )?;
    let mib = |v: &Value| {
        v.as_u64()
            .map_or("-".into(), |b| format!("{:.1}", b as f64 / MIB))
    };
    writeln!(
        w,
        "contract arena: {} MiB per session, {} MiB per process",
        mib(&h["contract_session_bytes"]),
        mib(&h["contract_process_bytes"]),
    )?;
    let f = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
    writeln!(
        w,
        "{:<11} {:>5} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9} {:>6}",
        "arm",
        "N",
        "peak MiB",
        "cuMem MiB",
        "MiB/sess",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "chunks/s",
        "misses",
        "realtime",
        "=alone"
    )?;
    let label = |r: &Value| {
        let arm = s(&r["arm"]);
        if r["batched"] == true {
            format!("{arm} batched")
        } else {
            arm
        }
    };
    let mut batch_lines = Vec::new();
    for r in out["runs"].as_array().into_iter().flatten() {
        if r["status"] != "ok" {
            writeln!(
                w,
                "{:<11} {:>5} {} at N = {}: {}",
                label(r),
                r["n"],
                s(&r["status"]),
                r["n"],
                s(&r["error"])
            )?;
            continue;
        }
        let same = r["identical_to_alone"].as_array().map_or(0, |v| {
            v.iter().filter(|x| x.as_bool() == Some(true)).count()
        });
        if r["batched"] == true {
            batch_lines.push(format!(
                "{} N = {}: batched calls by size {}, alone by reason {}, graph replays {}/{} \
                 batched calls, batch buffers and graphs {} MiB",
                label(r),
                r["n"],
                r["batch_histogram"],
                r["not_batchable"],
                r["batch_replays"],
                r["batch_calls"],
                f(&r["batch_mib"], 1),
            ));
        }
        writeln!(
            w,
            "{:<11} {:>5} {:>10} {:>10} {:>10} {:>8} {:>8} {:>8} {:>9} {:>7} {:>9} {:>6}",
            label(r),
            r["n"],
            f(&r["peak_mib"], 1),
            f(&r["cumemgetinfo_used_mib"], 0),
            f(&r["per_session_mib"], 1),
            f(&r["p50_ms"], 2),
            f(&r["p95_ms"], 2),
            f(&r["p99_ms"], 2),
            f(&r["chunks_per_s"], 1),
            r["deadline_misses"]
                .as_u64()
                .map_or("-".into(), |m| m.to_string()),
            if r["realtime"] == true { "yes" } else { "no" },
            format!("{same}/{}", r["n"]),
        )?;
    }
    for line in batch_lines {
        writeln!(w, "{line}")?;
    }
    for (arm, n) in out["out_of_memory_at"].as_object().into_iter().flatten() {
        if let Some(n) = n.as_u64() {
            writeln!(w, "{arm}: out of memory at N = {n}")?;
        }
    }
    let rt: Vec<String> = out["sessions_at_realtime"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(arm, n)| {
            format!(
                "{arm} {}",
                n.as_u64().map_or("none".into(), |n| n.to_string())
            )
        })
        .collect();
    writeln!(
        w,
        "sessions per GPU at real time (aggregate rate ≥ N per chunk-duration, p95 ≤ {} ms): {}",
        REALTIME_P95_MS,
        rt.join(", ")
    )?;
    let ses = out["sessions"].as_array().map_or(&[][..], |v| v.as_slice());
    let eq = ses
        .iter()
        .filter(|x| x["identical_to_alone"] == true)
        .count();
    let across = ses
        .iter()
        .filter(|x| x["identical_across_arms"] == true)
        .count();
    writeln!(
        w,
        "sessions identical to alone: {eq}/{}; identical across arms: {across}/{}",
        ses.len(),
        ses.len()
    )
}
