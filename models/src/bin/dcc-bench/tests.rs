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
    // The defaults: auto, all, tf32x3, tf32tiles, tf32auto, f16.
    assert_eq!((k.rows.clone(), k.variants.len()), (vec![5, 17], 6));
    assert!(super::kernels::run(&k).unwrap());
    // A tolerance no reordering meets fails the run.
    assert!(!super::kernels::run(&parse(&["--tol", "0", "--variants", "16x32"])).unwrap());
    // The half variants are judged at --half-tol, not --tol.
    let half = |tols: &[&'static str]| {
        let mut a = vec!["--variants", "f16_16x32,f16_64x64"];
        a.extend(tols);
        super::kernels::run(&parse(&a)).unwrap()
    };
    assert!(half(&["--tol", "0"]));
    assert!(!half(&["--half-tol", "0"]));
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

/// `check` with a `pcm.safetensors` beside `--io`: the vocoder on the vendor's mel (`feat_i`)
/// against the file's `pcm_<i>` and `pcm_flush`, gated by `--pcm-tol`; each arm's end-to-end
/// PCM against the same chunks, reported and gated only by `--e2e-pcm-tol`; a length mismatch
/// fails whatever the tolerance; a flush after more chunks than this run streamed is not
/// compared.
#[test]
fn check_compares_the_pcm_with_the_vendors_beside_io() {
    use dcc_models::speech::SpeechModel;
    use dcc_models::token2wav::serve::{ContractView, Token2WavTiny};
    use dcc_models::vocoder::StreamingVocoder;

    // the reference: this port's own eager vocoder over feat_0, feat_1 and the final flush
    // (so the vocoder check's figures are exact)
    let m = SpeechModel::load(
        dcc_runtime::backend::host(),
        testdata().join("weights.safetensors"),
        testdata().join("vocoder.safetensors"),
        ContractView::of::<Token2WavTiny>().unwrap(),
    )
    .unwrap();
    let bytes = std::fs::read(testdata().join("io.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let floats = |n: &str| -> Vec<f32> {
        let t = st.tensor(n).unwrap();
        t.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    let mut v = StreamingVocoder::new(m.flow().backend().clone(), m.vocoder().clone()).unwrap();
    let pcm: Vec<Vec<f32>> = vec![
        v.push(&floats("feat_0"), 80, false).unwrap(),
        v.push(&floats("feat_1"), 80, false).unwrap(),
        v.push(&[], 80, true).unwrap(),
    ];

    let dir = tempfile::tempdir().unwrap();
    let io = dir.path().join("io.safetensors");
    std::fs::copy(testdata().join("io.safetensors"), &io).unwrap();
    let write = |parts: &[(&str, Vec<f32>)]| write_pcm(dir.path(), parts);
    let check = |chunks: &str, tol: &str, extra: &[&str]| check_pcm(&io, chunks, tol, extra);

    // the stream as it was: every chunk and the flush compared, all exact
    write(&[
        ("pcm_0", pcm[0].clone()),
        ("pcm_1", pcm[1].clone()),
        ("pcm_flush", pcm[2].clone()),
    ]);
    let out = check("2", "0", &[]);
    assert_eq!(out["ok"], Value::Bool(true), "{out}");
    let vc = &out["vocoder_check"];
    assert_eq!(
        vc["rel_l2_per_chunk"],
        serde_json::json!([0.0, 0.0]),
        "{out}"
    );
    assert_eq!(
        (vc["rel_l2_flush"].clone(), vc["ok"].clone()),
        (0.0.into(), true.into())
    );
    assert!(
        out["run"]["pcm_reference"]
            .as_str()
            .unwrap()
            .ends_with("pcm.safetensors")
    );
    // the end-to-end PCM (the flow's mel within f32 rounding of feat_i): reported, not gated
    let a = &out["arms"][0];
    let per: Vec<f64> = a["pcm_rel_l2_per_chunk"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_f64().unwrap())
        .collect();
    assert_eq!(per.len(), 2, "{out}");
    assert!(per.iter().all(|e| *e > 0.0 && *e < 0.1), "{out}");
    assert_eq!(a["pcm_rel_l2_first"].as_f64(), Some(per[0]), "{out}");
    assert_eq!(
        a["pcm_rel_l2_median"].as_f64(),
        Some(0.5 * (per[0] + per[1]))
    );
    assert_eq!(
        a["pcm_rel_l2_grows"].as_bool(),
        Some(per[1] > per[0]),
        "{out}"
    );
    assert_eq!(out["run"]["e2e_pcm_tol"], Value::Null);
    // ... gated on request
    assert_eq!(check("2", "0", &["--e2e-pcm-tol", "0"])["ok"], false);
    let out = check("2", "0", &["--e2e-pcm-tol", "0.1"]);
    assert_eq!(
        (out["ok"].clone(), out["run"]["e2e_pcm_tol"].clone()),
        (true.into(), 0.1.into())
    );

    // one chunk of a two-chunk reference: the flush (after two chunks) is not compared
    let out = check("1", "0", &[]);
    assert_eq!(out["ok"], Value::Bool(true), "{out}");
    assert_eq!(out["vocoder_check"]["rel_l2_flush"], Value::Null, "{out}");
    assert_eq!(out["arms"][0]["pcm_rel_l2_flush"], Value::Null, "{out}");

    // chunk 1 louder by 1%: relative L2 1e-2, over 1e-3, within 0.1
    let loud: Vec<f32> = pcm[1].iter().map(|x| x * 1.01).collect();
    write(&[
        ("pcm_0", pcm[0].clone()),
        ("pcm_1", loud),
        ("pcm_flush", pcm[2].clone()),
    ]);
    let out = check("2", "1e-3", &[]);
    assert_eq!(out["ok"], Value::Bool(false), "{out}");
    // the mel's verdict stands on its own
    assert_eq!(out["mel_ok"], Value::Bool(true), "{out}");
    let e = out["vocoder_check"]["rel_l2_max"].as_f64().unwrap();
    assert!((e - 0.01 / 1.01).abs() < 1e-6, "{out}");
    assert_eq!(check("2", "0.1", &[])["ok"], Value::Bool(true));

    // a flush one sample short: a length mismatch, whatever the tolerance
    let mut short = pcm[2].clone();
    short.pop();
    write(&[
        ("pcm_0", pcm[0].clone()),
        ("pcm_1", pcm[1].clone()),
        ("pcm_flush", short),
    ]);
    let out = check("2", "1e9", &[]);
    assert_eq!(out["ok"], Value::Bool(false), "{out}");
    let mismatch = "chunk 2: pcm vs pcm_flush: cannot compare 3840 values with 3839";
    assert!(
        out["vocoder_check"]["problems"]
            .to_string()
            .contains(mismatch),
        "{out}"
    );
    assert!(
        out["arms"][0]["problems"].to_string().contains(mismatch),
        "{out}"
    );
}

/// The vocoder check against the vendor's own PCM: `--io` with the vendor golden's mel as its
/// `feat_0`, `feat_1` and its PCM beside it (`vocoder_golden.safetensors`, made by the vendor's
/// `Token2wav._stream_vocode` over the same weights): the port on the vendor's mel is within
/// 1e-5, whatever the flow's mel (far from that mel, so the mel tolerance is opened wide).
#[test]
fn the_vocoder_on_the_vendors_mel_matches_the_vendors_pcm() {
    let bytes = std::fs::read(testdata().join("vocoder_golden.safetensors")).unwrap();
    let g = SafeTensors::deserialize(&bytes).unwrap();
    let floats = |n: &str| -> Vec<f32> {
        let t = g.tensor(n).unwrap();
        t.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    };
    // `mel` [1, 80, 100] → two [80, 50] chunks, channel-major
    let mel = floats("mel");
    let half = |k: usize| -> Vec<f32> {
        (0..80)
            .flat_map(|c| mel[c * 100 + k * 50..c * 100 + k * 50 + 50].to_vec())
            .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let io = io_with_feats(dir.path(), &[("feat_0", half(0)), ("feat_1", half(1))]);
    write_pcm(
        dir.path(),
        &[
            ("pcm_0", floats("pcm.0")),
            ("pcm_1", floats("pcm.1")),
            ("pcm_flush", floats("pcm.2")),
        ],
    );
    let out = check_pcm(&io, "2", "1e-5", &["--tol", "1e9"]);
    assert_eq!(out["ok"], Value::Bool(true), "{out}");
    let vc = &out["vocoder_check"];
    assert_eq!(vc["ok"], Value::Bool(true), "{out}");
    assert!(vc["rel_l2_max"].as_f64().unwrap() <= 1e-5, "{out}");
    // the end-to-end PCM (the flow's mel, not the golden's) is far, and only reported
    assert!(
        out["arms"][0]["pcm_rel_l2_max"].as_f64().unwrap() > 0.1,
        "{out}"
    );
}

/// `pcm.safetensors` in `dir` holding `parts` (each `[1, n]` f32).
fn write_pcm(dir: &Path, parts: &[(&str, Vec<f32>)]) {
    let owned: Vec<(String, Vec<u8>, usize)> = parts
        .iter()
        .map(|(n, v)| {
            let b = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (n.to_string(), b, v.len())
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, b, len)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, vec![1, *len], b).unwrap(),
            )
        })
        .collect();
    let p = dir.join("pcm.safetensors");
    std::fs::write(p, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// A copy of the golden `io.safetensors` in `dir` with the named `feat_<i>` replaced (each
/// `[1, 80, frames]`).
fn io_with_feats(dir: &Path, feats: &[(&str, Vec<f32>)]) -> PathBuf {
    let bytes = std::fs::read(testdata().join("io.safetensors")).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, t) in st.tensors() {
        let (mut shape, mut data) = (t.shape().to_vec(), t.data().to_vec());
        if let Some((_, v)) = feats.iter().find(|(n, _)| *n == name) {
            shape = vec![1, 80, v.len() / 80];
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

/// `dcc-bench check` of arm B0 over `chunks` chunks with the vocoder, `--tol 1e-4` (unless
/// `extra` names another), `--pcm-tol tol` and `extra`.
fn check_pcm(io: &Path, chunks: &str, tol: &str, extra: &[&str]) -> Value {
    let weights = testdata().join("weights.safetensors");
    let mut args = vec![
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
        chunks,
        "--warmup",
        "0",
        "--pcm-tol",
        tol,
        "--format",
        "json",
    ];
    if !extra.contains(&"--tol") {
        args.extend(["--tol", "1e-4"]);
    }
    args.extend(extra);
    let o = parse_from(args).unwrap();
    let Command::Flow(o) = o else {
        panic!("check parsed as another command: {o:?}")
    };
    run(&o).unwrap()
}

/// The vocoder's weights: beside --weights unless named; none with --no-vocoder. `--wav`
/// writes the first arm unless `--wav-arm` names one, 16-bit unless `--wav-format float`.
#[test]
fn vocoder_and_wav_flags_resolve_as_documented() {
    use super::audio::{VocoderFile, WavChoice};
    use dcc_models::token2wav::serve::Arm;
    let opts = |args: &[&str]| match parse_from(["dcc-bench"].iter().chain(args)).unwrap() {
        Command::Flow(o) => o,
        other => panic!("parsed as {other:?}"),
    };
    let o = opts(&["token2wav", "--weights", "m/w.safetensors"]);
    let beside = VocoderFile {
        path: Path::new("m").join("vocoder.safetensors"),
        explicit: false,
    };
    assert_eq!(o.vocoder, Some(beside.clone()));
    assert_eq!((o.wav.clone(), o.pcm_tol), (None, None));
    let o = opts(&["check", "--weights", "m/w.safetensors", "--io", "i"]);
    assert_eq!((o.vocoder, o.pcm_tol), (Some(beside), Some(1e-3)));
    let o = opts(&["token2wav", "--weights", "w", "--vocoder-weights", "v.st"]);
    let named = VocoderFile {
        path: "v.st".into(),
        explicit: true,
    };
    assert_eq!(o.vocoder, Some(named));
    let o = opts(&["token2wav", "--weights", "w", "--no-vocoder"]);
    assert_eq!(o.vocoder, None);
    let o = opts(&[
        "token2wav",
        "--weights",
        "w",
        "--arms",
        "SR,B0",
        "--wav",
        "x.wav",
    ]);
    let w = o.wav.unwrap();
    assert_eq!((w.arm, w.format), (Arm::SR, WavChoice::Pcm16));
    let o = opts(&[
        "token2wav",
        "--weights",
        "w",
        "--wav",
        "x.wav",
        "--wav-arm",
        "Rc",
        "--wav-format",
        "float",
    ]);
    let w = o.wav.unwrap();
    assert_eq!((w.arm, w.format), (Arm::Rc, WavChoice::Float));
    for bad in [
        &[
            "token2wav",
            "--weights",
            "w",
            "--no-vocoder",
            "--vocoder-weights",
            "v",
        ][..],
        &["token2wav", "--weights", "w", "--wav-format", "float"],
        &["check", "--weights", "w", "--io", "i", "--wav", "x.wav"],
        &["token2wav", "--weights", "w", "--pcm-tol", "1"],
        &["check", "--weights", "w", "--io", "i", "--pcm-tol", "nan"],
    ] {
        assert!(
            parse_from(["dcc-bench"].iter().chain(bad)).is_err(),
            "{bad:?}"
        );
    }
}

/// The check's text: the mel's verdict judges the mel alone (a run failed by its PCM still says
/// its mel passed), the vocoder-on-vendor-mel line and each arm's end-to-end line stand apart,
/// and the audio table shows the vocoder's catalog (`-` on an eager arm).
#[test]
fn the_mel_verdict_line_judges_the_mel_alone() {
    let o = parse_from([
        "dcc-bench",
        "check",
        "--weights",
        "w",
        "--io",
        "i",
        "--tol",
        "1e-4",
    ])
    .unwrap();
    let Command::Flow(o) = o else {
        panic!("check parsed as another command: {o:?}")
    };
    let arm = |name: &str, catalog: bool| {
        let mut a = serde_json::json!({
            "arm": name, "mel_sha256": "0123456789abcdef0123", "rel_l2_max": 4.13e-7,
            "identical_to_b0": true, "pcm_sha256": "fedcba9876543210fedc", "pcm_samples": 10,
            "pcm_identical_to_b0": true, "pcm_rel_l2_max": 3.8e-3, "pcm_rel_l2_first": 1e-4,
            "pcm_rel_l2_median": 1e-3, "pcm_rel_l2_grows": true, "problems": [],
        });
        if catalog {
            a["vocoder_classes_captured"] = 3.into();
            a["vocoder_replays"] = 3.into();
            a["vocoder_replays_steady"] = 2.into();
            a["vocoder_eager_calls"] = 3.into();
            a["vocoder_eager_steady"] = 0.into();
            a["vocoder_fallbacks_total"] = serde_json::json!({"probation": 3});
            a["vocoder_fallbacks_steady"] = serde_json::json!({});
        }
        a
    };
    let out = serde_json::json!({
        "run": {"pcm_reference": "p/pcm.safetensors", "pcm_tol": 1e-3, "e2e_pcm_tol": null},
        "arms": [arm("B0", false), arm("SRc", true)],
        "vocoder_check": {"pcm_tol": 1e-3, "ok": false, "rel_l2_max": 2e-3,
                          "rel_l2_per_chunk": [1e-5, 2e-3], "rel_l2_flush": 1e-5},
        "mel_ok": true,
        "ok": false,
    });
    let mut text = Vec::new();
    super::report::write_table(&mut text, &out, &o).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        text.contains("check: every chunk within rel-L2 1e-4 of --io's feat_i: yes"),
        "{text}"
    );
    assert!(
        text.contains(
            "the vocoder on --io's feat_i (the vendor's mel), every chunk's PCM within rel-L2 \
             1e-3 of p/pcm.safetensors: NO (max 2.00e-3; per chunk 1.00e-5 2.00e-3; flush \
             1.00e-5)"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "end-to-end PCM of SRc vs p/pcm.safetensors: rel-L2 first 1.00e-4, median 1.00e-3, \
             max 3.80e-3, grows with the chunk index: yes; not gated"
        ),
        "{text}"
    );
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name) && l.contains("fedcba9876543210"))
            .unwrap_or_else(|| panic!("no audio row of {name}: {text}"))
            .split_whitespace()
            .rev()
            .take(5)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("SRc "),
        ["0", "probation=3", "3/0", "3/2", "3"],
        "{text}"
    );
    assert_eq!(row("B0 "), ["-", "-", "-", "-", "-"], "{text}");
    // the failed mel says so
    let mut out = out;
    out["mel_ok"] = false.into();
    let mut text = Vec::new();
    super::report::write_table(&mut text, &out, &o).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("of --io's feat_i: NO"), "{text}");
}
