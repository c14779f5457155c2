//! `dcc-bench` end to end on the Host backend with the tiny weights: bad weights, bad `--io`
//! files, missing vocoder weights and bad outputs stop the run with an exit code and a message
//! that names the file, the tensor and the values; a closed stdout is exit code 2, not a panic;
//! `--wav` writes the stream's audio. Most cases fail before the first arm (fast).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use safetensors::{Dtype, SafeTensors, tensor::TensorView};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

fn weights() -> PathBuf {
    testdata().join("weights.safetensors")
}

fn io() -> PathBuf {
    testdata().join("io.safetensors")
}

fn vocoder() -> PathBuf {
    testdata().join("vocoder.safetensors")
}

type Entry = (String, Dtype, Vec<usize>, Vec<u8>);

/// A copy of the safetensors file `src` at `dir/name`, every entry passed through `edit`.
fn rewrite(src: &Path, dir: &Path, name: &str, edit: impl Fn(&mut Entry)) -> PathBuf {
    let bytes = std::fs::read(src).unwrap();
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let mut owned: Vec<Entry> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.dtype(), t.shape().to_vec(), t.data().to_vec()))
        .collect();
    owned.iter_mut().for_each(&edit);
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    let out = dir.join(name);
    std::fs::write(&out, safetensors::serialize(views, None).unwrap()).unwrap();
    out
}

/// `dcc-bench <sub> --backend host` plus `args`, one chunk of B0, with the tiny vocoder (named,
/// since `w` may lie in a folder without one).
fn bench(sub: &str, w: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args([sub, "--backend", "host", "--weights"])
        .arg(w)
        .arg("--vocoder-weights")
        .arg(vocoder())
        .args(["--arms", "B0", "--chunks", "1", "--warmup", "0"])
        .args(args);
    c
}

fn run(mut c: Command) -> (i32, String) {
    let Output { status, stderr, .. } = c.output().unwrap();
    let e = String::from_utf8_lossy(&stderr).into_owned();
    assert!(!e.contains("panicked"), "{e}");
    (status.code().expect("exited, not killed"), e)
}

fn check_with(w: &Path, io: &Path) -> (i32, String) {
    let io = io.to_str().unwrap();
    run(bench(
        "check",
        w,
        &["--contract", "token2wav_tiny", "--io", io, "--tol", "1e-2"],
    ))
}

#[test]
fn tiny_weights_against_the_full_contract_stop_before_the_first_arm() {
    let (code, e) = run(bench(
        "token2wav",
        &weights(),
        &["--contract", "token2wav", "--busy-reps", "0"],
    ));
    assert_eq!(code, 1, "{e}");
    for want in [
        "ENC_DIM = 512, the weights have 64",
        "CONF_HEADS = 8, the weights have 2",
        "EST_LAYERS = 16, the weights have 2",
        "EST_HIDDEN = 512, the weights have 64",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
}

#[test]
fn an_all_nan_mel_fails_token2wav_naming_arm_chunk_tensor_and_index() {
    let dir = tempfile::tempdir().unwrap();
    // NaN bias of the estimator's last layer: every mel value is NaN.
    let w = rewrite(&weights(), dir.path(), "w.safetensors", |(n, d, _, b)| {
        if n == "decoder.estimator.final_layer.linear.bias" {
            assert_eq!(*d, Dtype::F32);
            b.chunks_exact_mut(4)
                .for_each(|x| x.copy_from_slice(&f32::NAN.to_le_bytes()));
        }
    });
    // the flow alone reports the mel and goes on to the verdict
    let args = ["--contract", "token2wav_tiny", "--busy-reps", "0"];
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args([
        "token2wav",
        "--backend",
        "host",
        "--no-vocoder",
        "--weights",
    ])
    .arg(&w)
    .args(["--arms", "B0", "--chunks", "1", "--warmup", "0"])
    .args(args);
    let (code, e) = run(c);
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains(
            "arm B0: chunk 0: tensor mel: 4000 of 4000 values are not finite, the first at index 0"
        ),
        "{e}"
    );
    // with the vocoder, no audio can be made of it: the stream stops there
    let (code, e) = run(bench("token2wav", &w, &args));
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains(
            "B0: the flow's mel of chunk 0: 4000 of 4000 values are not finite, the first at \
             index 0 (NaN)"
        ),
        "{e}"
    );
}

#[test]
fn a_closed_stdout_is_exit_code_2_not_a_panic() {
    let mut c = bench(
        "check",
        &weights(),
        &[
            "--contract",
            "token2wav_tiny",
            "--io",
            io().to_str().unwrap(),
        ],
    );
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the table is written (as `| head -0` would).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!e.contains("panicked"), "{e}");
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("stdout"), "{e}");

    // A full stdout: the same.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let mut c = bench(
        "token2wav",
        &weights(),
        &[
            "--contract",
            "token2wav_tiny",
            "--busy-reps",
            "0",
            "--format",
            "json",
        ],
    );
    c.stdout(full);
    let (code, e) = run(c);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("stdout"), "{e}");
}

#[test]
fn weights_and_io_must_be_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let dev_zero = Path::new("/dev/zero");
    for w in [dev_zero, &fifo, dir.path()] {
        let (code, e) = check_with(w, &io());
        assert_eq!(code, 1, "{e}");
        assert!(e.contains("not a regular file"), "{e}");
        assert!(e.contains(&w.display().to_string()), "{e}");
    }
    for i in [dev_zero, &fifo] {
        let (code, e) = check_with(&weights(), i);
        assert_eq!(code, 1, "{e}");
        assert!(
            e.contains("--io") && e.contains("not a regular file"),
            "{e}"
        );
    }
}

#[test]
fn a_weight_of_another_dtype_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let w = rewrite(&weights(), dir.path(), "w.safetensors", |(n, d, _, _)| {
        if n == "encoder_proj.weight" {
            *d = Dtype::I32;
        }
    });
    let (code, e) = check_with(&w, &io());
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains("tensor `encoder_proj.weight` has dtype I32; expected F32, F16 or BF16"),
        "{e}"
    );
    assert!(e.contains(&w.display().to_string()), "{e}");
    assert!(!e.contains("missing"), "{e}");
}

#[test]
fn io_tensors_dtypes_and_sizes_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let i = rewrite(&io(), dir.path(), "io.safetensors", |(n, d, _, _)| {
        if n == "prompt_tokens" {
            *d = Dtype::F32;
        }
    });
    let (code, e) = check_with(&weights(), &i);
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains("tensor `prompt_tokens` has dtype F32") && e.contains("expected I32"),
        "{e}"
    );
    let i = rewrite(&io(), dir.path(), "io2.safetensors", |(n, _, s, b)| {
        if n == "spk" {
            b.truncate(4 * 191);
            *s = vec![191];
        }
    });
    let (code, e) = check_with(&weights(), &i);
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains("spk has 191 values; the contract wants 192"),
        "{e}"
    );
    let i = dir.path().join("junk");
    std::fs::write(&i, b"not safetensors").unwrap();
    let (code, e) = check_with(&weights(), &i);
    assert_eq!(code, 1, "{e}");
    assert!(e.contains(&i.display().to_string()), "{e}");
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

/// The samples a stream of `chunks` chunks returns, derived from the contract and the vocoder:
/// every chunk's frames (`CHUNK_TOKENS · UP_RATE`) at the vocoder's samples per frame, plus the
/// first chunk's leading silence (the vocoder's delay), which the final flush makes up for.
fn stream_samples(chunks: usize) -> usize {
    use dcc_generated::token2wav_tiny::{CHUNK_TOKENS, UP_RATE};
    let w = dcc_models::vocoder::VocoderWeights::load(vocoder()).unwrap();
    let cfg = dcc_models::vocoder::VocoderConfig::from_weights(&w).unwrap();
    let (hop, delay) = (cfg.hop(), cfg.limits().delay);
    assert_eq!((CHUNK_TOKENS * UP_RATE, hop, delay), (50, 480, 8));
    chunks * CHUNK_TOKENS * UP_RATE * hop + delay * hop
}

/// Checks `wav`'s RIFF header for a 24 kHz mono file of `samples` samples of `bits` bits
/// (16: integer PCM, 32: float) and returns the data bytes.
fn wav_data(wav: &Path, samples: usize, bits: u16) -> Vec<u8> {
    let b = std::fs::read(wav).unwrap();
    let bytes = usize::from(bits / 8);
    assert_eq!(b.len(), 44 + bytes * samples, "{}", wav.display());
    assert_eq!(&b[0..4], b"RIFF");
    assert_eq!(u32_at(&b, 4) as usize, b.len() - 8);
    assert_eq!(&b[8..16], b"WAVEfmt ");
    let tag = if bits == 16 { 1 } else { 3 };
    assert_eq!(
        (u32_at(&b, 16), u16_at(&b, 20), u16_at(&b, 22)),
        (16, tag, 1)
    );
    assert_eq!(u32_at(&b, 24), 24_000);
    assert_eq!(u32_at(&b, 28) as usize, 24_000 * bytes);
    assert_eq!((u16_at(&b, 32), u16_at(&b, 34)), (bits / 8, bits));
    assert_eq!(&b[36..40], b"data");
    assert_eq!(u32_at(&b, 40) as usize, bytes * samples);
    b[44..].to_vec()
}

/// The issue's command, `dcc-bench token2wav --backend host --weights <tiny> --contract
/// token2wav_tiny --chunks N --wav OUT`, and what its JSON says.
fn token2wav_wav(chunks: usize, extra: &[&str]) -> (tempfile::TempDir, PathBuf, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("x.wav");
    let json = dir.path().join("x.json");
    let n = chunks.to_string();
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args(["token2wav", "--backend", "host", "--weights"])
        .arg(weights())
        .args(["--contract", "token2wav_tiny", "--chunks", &n, "--wav"])
        .arg(&wav)
        .arg("--json-out")
        .arg(&json)
        .args(extra);
    let (code, e) = run(c);
    assert_eq!(code, 0, "{e}");
    let out: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (dir, wav, out)
}

/// Every arm's stream: the sample count derived above, B0's PCM, and the audio columns.
fn check_arms(out: &serde_json::Value, chunks: usize) {
    let arms = out["arms"].as_array().unwrap();
    assert_eq!(arms.len(), 6, "{out}");
    for a in arms {
        assert_eq!(a["pcm_samples"], stream_samples(chunks), "{a}");
        assert_eq!(a["pcm_identical_to_b0"], true, "{a}");
        assert_eq!(a["pcm_sha256"], arms[0]["pcm_sha256"], "{a}");
        for k in [
            "vocoder_p50_ms",
            "vocoder_p95_ms",
            "e2e_p50_ms",
            "e2e_p95_ms",
            "ttfa_ms",
        ] {
            assert!(a[k].as_f64().is_some_and(|x| x > 0.0), "{k}: {a}");
        }
        assert!(
            a["e2e_p50_ms"].as_f64() >= a["vocoder_p50_ms"].as_f64(),
            "{a}"
        );
        assert_eq!(a["vocoder_ms"].as_array().unwrap().len(), chunks, "{a}");
        vocoder_catalog(a, chunks);
    }
    assert_eq!(out["ok"], true, "{out}");
}

/// An arm's vocoder catalog: none on an eager arm; on a replay arm, every call of the two
/// passes (warm-up and measured, each `chunks` chunks and the flush) counted as a replay or an
/// eager call, and, the warm-up having met every class of the measured pass, its steady state
/// (after its first chunk) all replays.
fn vocoder_catalog(a: &serde_json::Value, chunks: usize) {
    let keys = [
        "vocoder_classes_captured",
        "vocoder_replays",
        "vocoder_eager_calls",
        "vocoder_fallbacks_total",
        "vocoder_replays_steady",
        "vocoder_eager_steady",
        "vocoder_fallbacks_steady",
    ];
    if ["B0", "S"].contains(&a["arm"].as_str().unwrap()) {
        for k in keys {
            assert_eq!(a[k], serde_json::Value::Null, "{k}: {a}");
        }
        return;
    }
    let n = |k: &str| a[k].as_u64().unwrap_or_else(|| panic!("{k}: {a}"));
    assert!(n("vocoder_classes_captured") >= 1, "{a}");
    assert_eq!(
        n("vocoder_replays") + n("vocoder_eager_calls"),
        2 * (chunks as u64 + 1),
        "{a}"
    );
    let probation = a["vocoder_fallbacks_total"]["probation"].as_u64();
    assert_eq!(probation, Some(n("vocoder_classes_captured")), "{a}");
    assert_eq!(n("vocoder_replays_steady"), chunks as u64, "{a}");
    assert_eq!(n("vocoder_eager_steady"), 0, "{a}");
    assert_eq!(a["vocoder_fallbacks_steady"], serde_json::json!({}), "{a}");
}

/// Two chunks (the tiny noise table's 101 frames hold two 50-frame chunks and the flush), all
/// six arms: the WAV holds 2 · 50 · 480 + 3,840 samples, 16-bit by default, and every arm's PCM
/// equals B0's.
#[test]
fn token2wav_writes_the_streams_wav_and_every_arm_equals_b0() {
    let (_dir, wav, out) = token2wav_wav(2, &["--warmup", "2", "--busy-reps", "0"]);
    check_arms(&out, 2);
    wav_data(&wav, stream_samples(2), 16);
    assert_eq!(out["run"]["wav"], wav.display().to_string());
}

/// The issue's command as written (four chunks, the default warm-up of four). The tiny vocoder's
/// noise table holds 101 frames; a stream of 200 frames reads it modulo its rows.
#[test]
fn token2wav_writes_the_wav_of_the_issues_command() {
    let (_dir, wav, out) = token2wav_wav(4, &[]);
    check_arms(&out, 4);
    wav_data(&wav, stream_samples(4), 16);
}

/// `--wav-format float` writes the samples as they are: the data chunk's SHA-256 is the PCM
/// SHA-256 the bench reports.
#[test]
fn a_float_wav_holds_the_reported_pcm() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("f.wav");
    let mut c = bench(
        "token2wav",
        &weights(),
        &[
            "--contract",
            "token2wav_tiny",
            "--busy-reps",
            "0",
            "--format",
            "json",
            "--wav-format",
            "float",
            "--wav",
        ],
    );
    c.arg(&wav);
    let o = c.output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let data = wav_data(&wav, stream_samples(1), 32);
    assert_eq!(
        out["arms"][0]["pcm_sha256"],
        dcc_runtime::sha256_hex(&data),
        "{out}"
    );
}

#[test]
fn missing_vocoder_weights_are_named_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    // weights in a folder without `vocoder.safetensors`: looked for beside them
    let w = dir.path().join("w.safetensors");
    std::fs::copy(weights(), &w).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args(["token2wav", "--backend", "host", "--weights"])
        .arg(&w)
        .args(["--wav", "/tmp/never-written.wav"]);
    let (code, e) = run(c);
    assert_eq!(code, 1, "{e}");
    let beside = dir.path().join("vocoder.safetensors");
    assert!(
        e.contains(&format!(
            "{}: no vocoder weights there (looked for beside --weights)",
            beside.display()
        )) && e.contains("--vocoder-weights FILE")
            && e.contains("--no-vocoder"),
        "{e}"
    );
    // a named file that is not there
    let missing = dir.path().join("no-such.safetensors");
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args(["check", "--backend", "host", "--weights"])
        .arg(weights())
        .arg("--io")
        .arg(io())
        .arg("--vocoder-weights")
        .arg(&missing);
    let (code, e) = run(c);
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains(&format!(
            "{}: no vocoder weights there (--vocoder-weights)",
            missing.display()
        )),
        "{e}"
    );
}

#[test]
fn wav_flags_are_checked_before_the_run() {
    let usage = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
        c.args(["token2wav", "--backend", "host", "--weights"])
            .arg(weights())
            .args(args);
        run(c)
    };
    let (code, e) = usage(&["--no-vocoder", "--wav", "/tmp/x.wav"]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--no-vocoder") && e.contains("--wav"), "{e}");
    let (code, e) = usage(&["--arms", "B0,S", "--wav", "/tmp/x.wav", "--wav-arm", "SRc"]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--wav-arm SRc is not one of --arms"), "{e}");
    let (code, e) = usage(&["--wav-arm", "B0"]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("--wav"), "{e}");
    let w = weights();
    let (code, e) = usage(&["--wav", w.to_str().unwrap()]);
    assert_eq!(code, 2, "{e}");
    assert!(e.contains("is the --weights file"), "{e}");
}
