//! `dcc-bench sessions`: flag checks, and the issue's command end to end on the Host backend
//! with the tiny model (four sessions, each identical to alone).

use serde_json::{Value, json};

use super::super::cli::{Command, parse_from};
use super::*;
use std::collections::BTreeMap;

fn parse(args: &[&str]) -> Result<SessionsArgs, clap::Error> {
    match parse_from(std::iter::once("dcc-bench").chain(args.iter().copied()))? {
        Command::Sessions(a) => Ok(a),
        _ => panic!("{args:?} did not parse as sessions"),
    }
}

#[test]
fn session_counts_are_checked() {
    let a = parse(&["sessions", "--weights", "w"]).unwrap();
    assert_eq!(a.sessions, vec![1, 2, 4]);
    assert_eq!(a.arms, vec![Arm::B0, Arm::SRc]);
    assert_eq!(a.cadence, Cadence::Max);
    let a = parse(&[
        "sessions",
        "--weights",
        "w",
        "--sessions",
        "8,1",
        "--cadence",
        "realtime",
    ])
    .unwrap();
    assert_eq!((a.sessions, a.cadence), (vec![8, 1], Cadence::Realtime));
    let e = parse(&["sessions", "--weights", "w", "--sessions", "0"]).unwrap_err();
    assert!(e.to_string().contains("0 sessions"), "{e}");
    let e = parse(&["sessions", "--weights", "w", "--sessions", "2,0"]).unwrap_err();
    assert!(e.to_string().contains("at least 1"), "{e}");
    let e = parse(&["sessions", "--weights", "w", "--sessions", "2,2"]).unwrap_err();
    assert!(e.to_string().contains("twice"), "{e}");
    let over = (MAX_SESSIONS + 1).to_string();
    assert!(parse(&["sessions", "--weights", "w", "--sessions", &over]).is_err());
    let e = parse(&["sessions", "--weights", "w", "--plot", "w"]).unwrap_err();
    assert!(e.to_string().contains("input"), "{e}");
    // batching is exact only on the invariant GEMMs, and needs a state-rule arm
    let e = parse(&["sessions", "--weights", "w", "--batch"]).unwrap_err();
    assert!(e.to_string().contains("--gemm invariant"), "{e}");
    let inv = [
        "sessions",
        "--weights",
        "w",
        "--batch",
        "--gemm",
        "invariant",
    ];
    assert!(parse(&inv).unwrap().batch);
    let e = parse(&[&inv[..], &["--arms", "B0,Rc"]].concat()).unwrap_err();
    assert!(e.to_string().contains("state rule"), "{e}");
    // --max-batch bounds the batch, needs --batch, and holds at least one session
    assert_eq!(
        parse(&[&inv[..], &["--max-batch", "4"]].concat())
            .unwrap()
            .max_batch,
        Some(4)
    );
    let e = parse(&[&inv[..], &["--max-batch", "0"]].concat()).unwrap_err();
    assert!(e.to_string().contains("at least one session"), "{e}");
    assert!(parse(&["sessions", "--weights", "w", "--max-batch", "2"]).is_err());
}

/// Four tiny-config sessions on the Host, 2 measured chunks after 1 warm-up, batched on the
/// invariant GEMM, with `extra` arguments: the run must pass; its JSON report.
fn tiny_batched(extra: &[&str]) -> Value {
    let w = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/token2wav_tiny/weights.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let base = [
        "sessions",
        "--backend",
        "host",
        "--weights",
        w.to_str().unwrap(),
        "--contract",
        "token2wav_tiny",
        "--sessions",
        "4",
        "--chunks",
        "2",
        "--warmup",
        "1",
        "--batch",
        "--gemm",
        "invariant",
        "--json-out",
        out.to_str().unwrap(),
    ];
    let a = parse(&[&base[..], extra].concat()).unwrap();
    assert!(run(&a).unwrap());
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

#[test]
fn max_batch_bounds_the_batched_calls() {
    let v = tiny_batched(&["--arms", "S", "--max-batch", "3"]);
    // the tiny contract's sizes are 1, 2, 4: at most 3 leaves 1 and 2, so four sessions make
    // two pairs a round
    assert_eq!(v["run"]["batch_sizes"], json!([1, 2]), "{v}");
    let batched = &v["runs"].as_array().unwrap()[1];
    assert_eq!(batched["batch_histogram"], json!({"2": 4}), "{v}");
    assert!(
        v["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["identical_to_alone"] == true)
    );
}

#[test]
fn batched_sessions_are_identical_to_alone_and_counted() {
    let v = tiny_batched(&["--arms", "SRc", "--format", "json"]);
    assert_eq!(v["run"]["batched"], true, "{v}");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{v}");
    let batched = &runs[1];
    assert_eq!(
        (batched["arm"].clone(), batched["batched"].clone()),
        (json!("SRc"), json!(true))
    );
    // four sessions in lockstep: one batch of four per measured round, none alone, and the
    // rounds replay the graph the warm-up's second round captured
    assert_eq!(batched["batch_histogram"], json!({"4": 2}), "{v}");
    assert_eq!(batched["not_batchable"], json!({}), "{v}");
    assert_eq!(
        batched["identical_to_alone"],
        json!([true, true, true, true]),
        "{v}"
    );
    assert!(batched["batch_calls"].as_u64() > Some(0), "{v}");
    // the measured rounds' two groups, timed: a time-multiplexed run has no groups
    let ph = &batched["group_phases_ms"];
    assert_eq!(ph["groups"], json!(2), "{v}");
    for k in [
        "stage",
        "encode_host",
        "encode_device",
        "flow_host",
        "flow_device",
    ] {
        assert!(ph[k].as_f64().is_some_and(|x| x >= 0.0), "{k}: {v}");
    }
    // on Host the stream is the calling thread: the flow's markers bracket its whole run
    assert!(ph["flow_device"].as_f64() > Some(0.0), "{v}");
    assert_eq!(runs[0]["group_phases_ms"], json!(null), "{v}");
    let ses = v["sessions"].as_array().unwrap();
    assert!(ses.iter().all(|x| x["identical_to_alone"] == true), "{v}");
    assert_eq!(
        v["sessions_at_realtime"].as_object().unwrap().len(),
        2,
        "{v}"
    );
}

#[test]
fn batched_only_skips_the_multiplexed_run() {
    let v = tiny_batched(&["--arms", "SRc", "--batched-only"]);
    assert_eq!(v["run"]["batched_only"], true, "{v}");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{v}");
    assert_eq!(runs[0]["batched"], true, "{v}");
    assert_eq!(
        runs[0]["identical_to_alone"],
        json!([true, true, true, true]),
        "{v}"
    );
    // one real-time entry: the batched arm's only
    let rt = v["sessions_at_realtime"].as_object().unwrap();
    assert_eq!(rt.keys().collect::<Vec<_>>(), ["SRc batched"], "{v}");
    // it needs --batch
    assert!(parse(&["sessions", "--weights", "w", "--batched-only"]).is_err());
}

#[test]
fn a_chunk_is_one_second_of_audio_in_the_bundled_contracts() {
    for f in ["token2wav", "token2wav_tiny", "token2wav_tiny_vendor"] {
        assert_eq!(chunk_seconds(f), 1.0, "{f}");
    }
}

#[test]
fn issue_command_reports_four_sessions_identical_to_alone() {
    let w = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/token2wav_tiny/weights.safetensors");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let svg = dir.path().join("plot.svg");
    let a = parse(&[
        "sessions",
        "--backend",
        "host",
        "--weights",
        w.to_str().unwrap(),
        "--contract",
        "token2wav_tiny",
        "--sessions",
        "4",
        "--chunks",
        "4",
        "--format",
        "json",
        "--json-out",
        out.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ])
    .unwrap();
    assert!(run(&a).unwrap());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ses = v["sessions"].as_array().unwrap();
    assert_eq!(ses.len(), 4);
    assert!(ses.iter().all(|x| x["identical_to_alone"] == true), "{v}");
    assert!(
        ses.iter().all(|x| x["identical_across_arms"] == true),
        "{v}"
    );
    // the sessions really differ from one another
    let shas: std::collections::BTreeSet<String> = ses
        .iter()
        .map(|x| x["alone_mel_sha256"]["SRc"].to_string())
        .collect();
    assert_eq!(shas.len(), 4);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r["status"] == "ok"));
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("SRc") && svg.trim_end().ends_with("</svg>"));
}

/// A run of `n` sessions that completed, every session's mel `sha`.
fn done(arm: Arm, n: usize, ms: f64, sha: &str) -> RunResult {
    RunResult {
        arm,
        n,
        batched: false,
        batches: BTreeMap::new(),
        not_batchable: BTreeMap::new(),
        batch_replays: None,
        encoder_replays: None,
        phases: None,
        batch_mib: 0.0,
        failure: None,
        latency_ms: vec![ms; 4 * n],
        wall_s: 4.0 * n as f64 * ms / 1e3,
        misses: None,
        peak_mib: 100.0 * n as f64,
        used_mib: None,
        per_session_mib: 100.0,
        shas: (0..n).map(|k| format!("{sha}{k}")).collect(),
        problems: Vec::new(),
    }
}

#[test]
fn out_of_memory_keeps_the_smaller_counts_and_is_one_clean_line() {
    let head = json!({"chunk_s": 1.0, "arms": ["B0", "SRc"], "contract": "c"});
    let oom = RunResult {
        failure: Some((true, "CUDA driver: out of memory".into())),
        latency_ms: Vec::new(),
        shas: Vec::new(),
        ..done(Arm::B0, 4, 0.0, "")
    };
    let runs = [
        done(Arm::B0, 1, 30.0, "a"),
        done(Arm::B0, 2, 30.0, "a"),
        oom,
        done(Arm::SRc, 1, 20.0, "a"),
        done(Arm::SRc, 2, 20.0, "a"),
        done(Arm::SRc, 4, 300.0, "a"),
    ];
    let mut alone = BTreeMap::new();
    for arm in ["B0", "SRc"] {
        for k in 0..4 {
            alone.insert((arm, k), format!("a{k}"));
        }
    }
    let out = report(head.clone(), &[Arm::B0, Arm::SRc], &runs, &alone, true).unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["out_of_memory_at"]["B0"], 4);
    assert_eq!(out["out_of_memory_at"]["SRc"], Value::Null);
    // real time: 1 and 2 sessions at 30 ms keep up; 4 at 300 ms miss the p95 bound
    assert_eq!(out["sessions_at_realtime"]["B0"], 2);
    assert_eq!(out["sessions_at_realtime"]["SRc"], 2);
    let r = out["runs"].as_array().unwrap();
    assert_eq!(r.len(), 6);
    assert_eq!(r[2]["status"], "out of memory");
    assert_eq!(r[1]["status"], "ok");
    assert_eq!(out["sessions"].as_array().unwrap().len(), 4);
    let mut table = Vec::new();
    super::super::sessions_table::table(&mut table, &out).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(table.contains("B0: out of memory at N = 4\n"), "{table}");
    assert!(
        table.contains("sessions identical to alone: 4/4"),
        "{table}"
    );
    // a session whose mel differs from alone fails the run, and so does another error
    let mut bad = alone.clone();
    bad.insert(("SRc", 3), "x".into());
    let out = report(head.clone(), &[Arm::B0, Arm::SRc], &runs, &bad, true).unwrap();
    assert_eq!(out["ok"], false);
    assert_eq!(out["sessions"][3]["identical_to_alone"], false);
    let failed = RunResult {
        failure: Some((false, "bad input".into())),
        ..done(Arm::SRc, 8, 0.0, "")
    };
    let out = report(head, &[Arm::SRc], &[failed], &alone, true).unwrap();
    assert_eq!(out["ok"], false);
    assert_eq!(out["runs"][0]["status"], "error");
}

#[test]
fn batched_runs_are_reported_under_their_own_name() {
    let head = json!({"chunk_s": 1.0, "arms": ["SRc"], "contract": "c", "batched": true});
    let batched = RunResult {
        batched: true,
        batches: BTreeMap::from([(2, 3)]),
        not_batchable: BTreeMap::from([("reset", 1)]),
        batch_replays: Some((3, 2)),
        encoder_replays: Some((3, 1)),
        phases: None,
        ..done(Arm::SRc, 2, 10.0, "a")
    };
    let runs = [done(Arm::SRc, 2, 300.0, "a"), batched];
    let mut alone = BTreeMap::new();
    for k in 0..2 {
        alone.insert(("SRc", k), format!("a{k}"));
    }
    let out = report(head, &[Arm::SRc], &runs, &alone, true).unwrap();
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["sessions_at_realtime"]["SRc"], Value::Null);
    assert_eq!(out["sessions_at_realtime"]["SRc batched"], 2);
    let r = &out["runs"][1];
    assert_eq!(r["batch_histogram"], json!({"2": 3}));
    assert_eq!(r["not_batchable"], json!({"reset": 1}));
    assert_eq!(
        (r["batch_calls"].clone(), r["batch_replays"].clone()),
        (json!(3), json!(2))
    );
    assert_eq!(
        (
            r["batch_encoder_calls"].clone(),
            r["batch_encoder_replays"].clone()
        ),
        (json!(3), json!(1))
    );
    let mut table = Vec::new();
    super::super::sessions_table::table(&mut table, &out).unwrap();
    let table = String::from_utf8(table).unwrap();
    assert!(
        table.contains("SRc batched N = 2: batched calls by size"),
        "{table}"
    );
}
