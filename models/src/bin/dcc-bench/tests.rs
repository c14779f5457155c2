//! `dcc-bench check` end to end on the Host backend with the tiny golden model: the verdict
//! fails on a NaN or a length mismatch whatever `--tol` says, and passes on the real outputs.

use std::path::{Path, PathBuf};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use serde_json::Value;

use super::cli::{Command, parse_from};
use super::run;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

/// A copy of the golden `io.safetensors` in `dir` with `feat_0` replaced by `feat0(feat_0)`.
fn io_with(dir: &Path, feat0: impl Fn(Vec<f32>) -> Vec<f32>) -> PathBuf {
    let bytes = std::fs::read(testdata().join("io.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in st.tensors() {
        let (mut shape, mut data) = (t.shape().to_vec(), t.data().to_vec());
        if name == "feat_0" {
            let v: Vec<f32> = data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            let v = feat0(v);
            shape = vec![v.len()];
            data = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        }
        owned.push((name, t.dtype(), shape, data));
    }
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let out = dir.join("io.safetensors");
    std::fs::write(&out, safetensors::serialize(views, None).unwrap()).unwrap();
    out
}

/// `dcc-bench check` of arm B0 on one chunk, the tolerance huge.
fn check(io: &Path) -> Value {
    let weights = testdata().join("weights.safetensors");
    let o = parse_from([
        "dcc-bench",
        "check",
        "--backend",
        "host",
        "--weights",
        weights.to_str().unwrap(),
        "--io",
        io.to_str().unwrap(),
        "--contract",
        "token2wav_tiny",
        "--arms",
        "B0",
        "--chunks",
        "1",
        "--warmup",
        "0",
        "--tol",
        "1e300",
        "--format",
        "json",
    ])
    .unwrap();
    let Command::Flow(o) = o else {
        panic!("check parsed as another command: {o:?}")
    };
    run(&o).unwrap()
}

/// `dcc-bench kernels` on Host at small shapes with tails: every variant bit-equal to the
/// ordered host loops within the tolerance, and the row count and shapes as asked.
#[test]
fn kernels_bench_runs_on_host() {
    let parse = |extra: &[&str]| {
        let base = [
            "dcc-bench",
            "kernels",
            "--backend",
            "host",
            "--shapes",
            "64x40,37x33",
            "--rows",
            "5,17",
            "--reps",
            "2",
        ];
        match parse_from(base.iter().chain(extra)).unwrap() {
            Command::Kernels(k) => k,
            other => panic!("parsed as {other:?}"),
        }
    };
    let k = parse(&[]);
    assert_eq!(k.shapes, vec![(64, 40), (37, 33)]);
    assert_eq!((k.rows.clone(), k.variants.len()), (vec![5, 17], 5));
    assert!(super::kernels::run(&k).unwrap());
    // A tolerance no reordering meets fails the run.
    assert!(!super::kernels::run(&parse(&["--tol", "0", "--variants", "16x32"])).unwrap());
    for bad in [
        &["--shapes", "64"][..],
        &["--variants", "7x7"],
        &["--rows", "0"],
        &["--tol", "nan"],
    ] {
        let args = ["dcc-bench", "kernels"].iter().chain(bad);
        assert!(parse_from(args).is_err(), "{bad:?}");
    }
}

#[test]
fn check_fails_on_nan_or_length_mismatch_whatever_the_tolerance() {
    let dir = tempfile::tempdir().unwrap();
    // The real outputs pass (so the failures below are the outputs' doing).
    let out = check(&testdata().join("io.safetensors"));
    assert_eq!(out["ok"], Value::Bool(true), "{out}");
    let e = out["arms"][0]["rel_l2_max"].as_f64().unwrap();
    assert!(e < 1e-4, "{out}");

    // A NaN in the reference makes the chunk's error NaN: reported as "NaN", never 0 or a
    // finite maximum, and the check fails.
    let io = io_with(dir.path(), |mut v| {
        v[7] = f32::NAN;
        v
    });
    let out = check(&io);
    assert_eq!(out["ok"], Value::Bool(false), "{out}");
    assert_eq!(out["arms"][0]["rel_l2_max"], "NaN", "{out}");
    assert_eq!(out["arms"][0]["rel_l2_per_chunk"][0], "NaN", "{out}");
    let problems = out["arms"][0]["problems"].to_string();
    assert!(
        problems.contains("tensor feat_0") && problems.contains("index 7"),
        "{out}"
    );

    // One value short: a length mismatch, named in `problems`.
    let io = io_with(dir.path(), |mut v| {
        v.pop();
        v
    });
    let out = check(&io);
    assert_eq!(out["ok"], Value::Bool(false), "{out}");
    let problems = out["arms"][0]["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(|p| p
            .as_str()
            .unwrap()
            .contains("cannot compare 4000 values with 3999")),
        "{out}"
    );
}
