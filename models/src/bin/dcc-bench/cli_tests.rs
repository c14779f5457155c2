//! Parsing tests of the command line (`cli.rs`).

use super::*;

fn parse(args: &[&str]) -> Result<Opts, clap::Error> {
    match parse_from(std::iter::once("dcc-bench").chain(args.iter().copied()))? {
        Command::Flow(o) => Ok(o),
        Command::Kernels(k) => panic!("{args:?} parsed as kernels: {k:?}"),
        Command::Attention(a) => panic!("{args:?} parsed as attention: {a:?}"),
        Command::Sessions(a) => panic!("{args:?} parsed as sessions: {a:?}"),
    }
}

fn err(args: &[&str]) -> String {
    match parse(args) {
        Ok(o) => panic!("{args:?} parsed: {o:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_are_the_documented_ones() {
    let o = parse(&["token2wav", "--weights", "w"]).unwrap();
    assert_eq!(o.check_tol, None);
    assert_eq!(o.arms, Arm::ALL.to_vec());
    assert_eq!((o.chunks, o.warmup, o.busy_reps), (24, 4, 3));
    assert_eq!(o.backend, BackendChoice::Cuda);
    assert_eq!(o.contract, ContractChoice::Auto);
    assert!(!o.json && !o.profile && o.io.is_none() && o.json_out.is_none());

    let o = parse(&["check", "--weights", "w", "--io", "i"]).unwrap();
    assert_eq!(o.check_tol, Some(1e-3));
    assert_eq!(o.arms, vec![Arm::B0, Arm::SRc]);
    assert_eq!(o.busy_reps, 0);
    assert_eq!(o.io.as_deref(), Some(Path::new("i")));
}

/// `--gemm f16` is judged at --half-tol (default 1e-2), whatever --tol says; the other paths
/// at --tol.
#[test]
fn the_half_path_is_checked_at_its_own_tolerance() {
    let args = |gemm: &'static str, extra: &'static [&'static str]| {
        let mut a = vec!["check", "--weights", "w", "--io", "i", "--tol", "1e-4"];
        a.extend(["--gemm", gemm]);
        a.extend(extra);
        a
    };
    let o = parse(&args("f16", &[])).unwrap();
    assert_eq!((o.gemm, o.check_tol), (GemmChoice::F16, Some(1e-2)));
    assert_eq!(o.gemm.path(), dcc_runtime::ops::GemmPath::Half);
    let o = parse(&args("f16", &["--half-tol", "3e-3"])).unwrap();
    assert_eq!(o.check_tol, Some(3e-3));
    let o = parse(&args("invariant", &["--half-tol", "3e-3"])).unwrap();
    assert_eq!(o.check_tol, Some(1e-4));
    assert!(err(&args("f16", &["--half-tol", "-1"])).contains("negative"));
}

#[test]
fn the_scripts_invocations_parse() {
    let o = parse(&[
        "check",
        "--backend",
        "cuda",
        "--weights",
        "t/w",
        "--io",
        "t/io",
        "--contract",
        "token2wav_tiny_vendor",
        "--chunks",
        "6",
        "--tol",
        "1e-4",
        "--arms",
        "B0,S,R,Rc,SR,SRc",
        "--json-out",
        "tiny.json",
    ])
    .unwrap();
    assert_eq!(o.contract, ContractChoice::Token2wavTinyVendor);
    assert_eq!((o.chunks, o.check_tol), (6, Some(1e-4)));
    assert_eq!(o.arms.len(), 6);
    assert_eq!(o.json_out.as_deref(), Some(Path::new("tiny.json")));
    let o = parse(&[
        "token2wav",
        "--backend",
        "host",
        "--weights",
        "w",
        "--io",
        "io",
        "--contract",
        "token2wav",
        "--chunks",
        "24",
        "--arms",
        "B0, SRc",
        "--format",
        "json",
        "--profile",
        "--busy-reps",
        "0",
    ])
    .unwrap();
    assert_eq!(o.arms, vec![Arm::B0, Arm::SRc]);
    assert!(o.json && o.profile);
    assert_eq!((o.backend, o.busy_reps), (BackendChoice::Host, 0));
}

#[test]
fn tolerance_must_be_finite_and_non_negative() {
    for bad in ["nan", "NaN", "inf", "-inf", "-1e-3", "x"] {
        let e = err(&["check", "--weights", "w", "--io", "i", "--tol", bad]);
        assert!(e.contains("--tol"), "{bad}: {e}");
    }
    assert!(err(&["check", "--weights", "w", "--io", "i", "--tol", "inf"]).contains("finite"));
    assert!(err(&["check", "--weights", "w", "--io", "i", "--tol", "-1"]).contains("negative"));
    for good in ["0", "1e9", "0.5"] {
        parse(&["check", "--weights", "w", "--io", "i", "--tol", good]).unwrap();
    }
}

#[test]
fn counts_are_bounded() {
    let max = MAX_CHUNKS.to_string();
    let over = (MAX_CHUNKS + 1).to_string();
    assert!(err(&["token2wav", "--weights", "w", "--chunks", "0"]).contains("--chunks"));
    assert!(err(&["token2wav", "--weights", "w", "--chunks", &over]).contains("--chunks"));
    assert!(err(&["token2wav", "--weights", "w", "--chunks", "-3"]).contains("-3"));
    assert!(err(&["token2wav", "--weights", "w", "--warmup", &over]).contains("--warmup"));
    let reps = (MAX_BUSY_REPS + 1).to_string();
    assert!(err(&["token2wav", "--weights", "w", "--busy-reps", &reps]).contains("--busy-reps"));
    let o = parse(&[
        "token2wav",
        "--weights",
        "w",
        "--chunks",
        &max,
        "--warmup",
        "0",
    ])
    .unwrap();
    assert_eq!((o.chunks, o.warmup), (MAX_CHUNKS, 0));
}

#[test]
fn flags_of_the_other_command_and_unknown_values_are_refused() {
    assert!(err(&["check", "--weights", "w", "--io", "i", "--profile"]).contains("--profile"));
    assert!(
        err(&["check", "--weights", "w", "--io", "i", "--busy-reps", "2"]).contains("--busy-reps")
    );
    assert!(err(&["token2wav", "--weights", "w", "--tol", "1"]).contains("--tol"));
    assert!(err(&["check", "--weights", "w"]).contains("--io"));
    assert!(err(&["token2wav"]).contains("--weights"));
    assert!(err(&["token2wav", "--weights", "w", "--arms", "B0,X"]).contains("unknown arm `X`"));
    assert!(err(&["token2wav", "--weights", "w", "--arms", "B0,SRc,B0"]).contains("twice"));
    assert!(err(&["token2wav", "--weights", "w", "--backend", "tpu"]).contains("--backend"));
    assert!(err(&["token2wav", "--weights", "w", "--contract", "moshi"]).contains("--contract"));
    assert!(err(&["token2wav", "--weights", "w", "--format", "yaml"]).contains("--format"));
    assert!(err(&["bench", "--weights", "w"]).contains("bench"));
}

#[test]
fn json_out_never_replaces_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let w = dir.path().join("w.safetensors");
    let io = dir.path().join("io.safetensors");
    std::fs::write(&w, b"w").unwrap();
    std::fs::write(&io, b"io").unwrap();
    let (ws, ios) = (w.to_str().unwrap(), io.to_str().unwrap());
    let e = err(&["check", "--weights", ws, "--io", ios, "--json-out", ios]);
    assert!(e.contains("--io file"), "{e}");
    let e = err(&["token2wav", "--weights", ws, "--json-out", ws]);
    assert!(e.contains("--weights file"), "{e}");
    // The same file by another path: a `.` component, and a hard link.
    let dotted = dir.path().join(".").join("w.safetensors");
    let e = err(&[
        "token2wav",
        "--weights",
        ws,
        "--json-out",
        dotted.to_str().unwrap(),
    ]);
    assert!(e.contains("--weights file"), "{e}");
    let link = dir.path().join("link.json");
    std::fs::hard_link(&io, &link).unwrap();
    let e = err(&[
        "check",
        "--weights",
        ws,
        "--io",
        ios,
        "--json-out",
        link.to_str().unwrap(),
    ]);
    assert!(e.contains("--io file"), "{e}");
    // A directory, or a file in a directory that does not exist.
    let d = dir.path().to_str().unwrap();
    assert!(err(&["token2wav", "--weights", ws, "--json-out", d]).contains("directory"));
    let missing = dir.path().join("no/such/dir/out.json");
    let e = err(&[
        "token2wav",
        "--weights",
        ws,
        "--json-out",
        missing.to_str().unwrap(),
    ]);
    assert!(e.contains("does not exist"), "{e}");
    // A fresh file beside the inputs is fine.
    let out = dir.path().join("out.json");
    parse(&[
        "check",
        "--weights",
        ws,
        "--io",
        ios,
        "--json-out",
        out.to_str().unwrap(),
    ])
    .unwrap();
}

#[test]
fn help_is_well_formed() {
    Cli::command().debug_assert();
}
