//! `dcc-bench sessions`: flag checks, and the issue's command end to end on the Host backend
//! with the tiny model (four sessions, each identical to alone).

use serde_json::Value;

use super::super::cli::{Command, parse_from};
use super::*;

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
