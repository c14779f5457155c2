//! `dcc-bench sessions`' result object: one entry per run (time-multiplexed or batched), the
//! sessions per GPU at real time and the out-of-memory count per arm, one entry per session.

use std::collections::BTreeMap;

use dcc_models::token2wav::serve::{Arm, GroupPhases};
use dcc_runtime::stats;
use serde_json::{Value, json};

use super::super::error::BenchError;
use super::super::{Res, num};
use super::{REALTIME_P95_MS, RunResult};

/// A run's name in reports: the arm, `<arm> batched` for batched rounds.
fn label(arm: Arm, batched: bool) -> String {
    if batched {
        format!("{} batched", arm.name())
    } else {
        arm.name().to_string()
    }
}

/// A percentile in ms, `None` without samples.
fn pct(v: &[f64], q: f64) -> Res<Option<f64>> {
    match stats::percentile(v, q) {
        Ok(p) => Ok(Some(p)),
        Err(stats::StatsError::Empty) => Ok(None),
        Err(error) => Err(BenchError::Stats {
            arm: "sessions",
            what: "chunk latency",
            error,
        }),
    }
}

/// The result object of a run: one entry per (arm, N) run in `runs`, the sessions per GPU at
/// real time and the out-of-memory count per arm, and one entry per session in `sessions`;
/// `ok` says whether every completed session equals alone and the other arms, every mel is
/// finite and nothing failed but running out of memory (`ok` in: what the measuring said).
pub(super) fn report(
    head: Value,
    arms: &[Arm],
    runs: &[RunResult],
    alone_sha: &BTreeMap<(&'static str, usize), String>,
    mut ok: bool,
) -> Res<Value> {
    let d = head["chunk_s"].as_f64().unwrap_or(1.0);
    let mut runs_json = Vec::new();
    let mut at_realtime: BTreeMap<String, Option<usize>> = BTreeMap::new();
    let mut oom_at: BTreeMap<String, Option<usize>> = BTreeMap::new();
    for arm in arms {
        let batched = head["batched"] == true && arm.state_rule();
        let multiplexed = !(batched && head["batched_only"] == true);
        for b in multiplexed
            .then_some(false)
            .into_iter()
            .chain(batched.then_some(true))
        {
            at_realtime.insert(label(*arm, b), None);
            oom_at.insert(label(*arm, b), None);
        }
    }
    for r in runs {
        let (p50, p95, p99) = (
            pct(&r.latency_ms, 0.5)?,
            pct(&r.latency_ms, 0.95)?,
            pct(&r.latency_ms, 0.99)?,
        );
        let rate =
            (r.failure.is_none() && r.wall_s > 0.0).then(|| r.latency_ms.len() as f64 / r.wall_s);
        let identical: Vec<bool> = r
            .shas
            .iter()
            .enumerate()
            .map(|(k, sha)| alone_sha.get(&(r.arm.name(), k)) == Some(sha))
            .collect();
        let realtime = r.failure.is_none()
            && rate.is_some_and(|c| c >= r.n as f64 / d)
            && p95.is_some_and(|p| p <= REALTIME_P95_MS)
            && r.misses.unwrap_or(0) == 0;
        if realtime {
            let best = at_realtime.entry(label(r.arm, r.batched)).or_default();
            *best = Some(best.map_or(r.n, |b| b.max(r.n)));
        }
        if let Some((true, _)) = r.failure {
            oom_at.insert(label(r.arm, r.batched), Some(r.n));
        }
        for p in &r.problems {
            eprintln!(
                "dcc-bench sessions: {} × {}: {p}",
                label(r.arm, r.batched),
                r.n
            );
            ok = false;
        }
        ok &= identical.iter().all(|&x| x);
        runs_json.push(json!({
            "arm": r.arm.name(),
            "n": r.n,
            "batched": r.batched,
            "batch_histogram": r.batched.then(|| {
                r.batches.iter().map(|(b, k)| (b.to_string(), *k)).collect::<BTreeMap<_, _>>()
            }),
            "not_batchable": r.batched.then_some(&r.not_batchable),
            "batch_calls": r.batch_replays.map(|c| c.0),
            "batch_replays": r.batch_replays.map(|c| c.1),
            "batch_encoder_calls": r.encoder_replays.map(|c| c.0),
            "batch_encoder_replays": r.encoder_replays.map(|c| c.1),
            "batch_mib": r.batched.then(|| num(r.batch_mib)),
            "group_phases_ms": r.phases.as_ref().map(phases_json),
            "status": match &r.failure {
                None => "ok",
                Some((true, _)) => "out of memory",
                Some((false, _)) => "error",
            },
            "error": r.failure.as_ref().map(|f| f.1.clone()),
            "peak_mib": num(r.peak_mib),
            "cumemgetinfo_used_mib": r.used_mib.map(num),
            "per_session_mib": num(r.per_session_mib),
            "p50_ms": p50.map(num),
            "p95_ms": p95.map(num),
            "p99_ms": p99.map(num),
            "chunks_per_s": rate.map(num),
            "deadline_misses": r.misses,
            "realtime": realtime,
            "identical_to_alone": identical,
        }));
    }
    // one entry per session: equal to alone in every run it took part in, and the same audio
    // under every arm
    let mut sessions_json = Vec::new();
    let n_ran = runs
        .iter()
        .filter(|r| r.failure.is_none())
        .map(|r| r.n)
        .max();
    for k in 0..n_ran.unwrap_or(0) {
        let mut per_run = Vec::new();
        let mut same = true;
        for r in runs.iter().filter(|r| r.failure.is_none() && k < r.n) {
            let alone = alone_sha.get(&(r.arm.name(), k));
            let eq = alone == Some(&r.shas[k]);
            same &= eq;
            per_run.push(json!({"arm": r.arm.name(), "n": r.n, "batched": r.batched, "mel_sha256": r.shas[k], "identical_to_alone": eq}));
        }
        let alone: BTreeMap<&str, &String> = alone_sha
            .iter()
            .filter(|((_, i), _)| *i == k)
            .map(|((arm, _), sha)| (*arm, sha))
            .collect();
        let across = alone
            .values()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            <= 1;
        ok &= across;
        sessions_json.push(json!({
            "index": k,
            "identical_to_alone": same,
            "identical_across_arms": across,
            "alone_mel_sha256": alone,
            "runs": per_run,
        }));
    }
    for r in runs
        .iter()
        .filter(|r| matches!(r.failure, Some((false, _))))
    {
        eprintln!(
            "dcc-bench sessions: {} × {}: failed",
            label(r.arm, r.batched),
            r.n
        );
        ok = false;
    }
    Ok(json!({
        "run": head,
        "runs": runs_json,
        "sessions_at_realtime": at_realtime,
        "out_of_memory_at": oom_at,
        "sessions": sessions_json,
        "ok": ok,
    }))
}

/// A batched run's group phases, each the mean per group in ms (`groups`: how many were timed).
fn phases_json(p: &GroupPhases) -> Value {
    let p = p.mean();
    json!({
        "groups": p.groups,
        "stage": num(p.stage_ms),
        "encode_host": num(p.encode_host_ms),
        "encode_device": num(p.encode_device_ms),
        "between": num(p.between_ms),
        "flow_host": num(p.flow_host_ms),
        "flow_device": num(p.flow_device_ms),
        "finish": num(p.finish_ms),
    })
}
