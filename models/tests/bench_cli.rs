//! `dcc-bench` end to end on the Host backend with the tiny weights: bad weights, bad `--io`
//! files and bad outputs stop the run with an exit code and a message that names the file, the
//! tensor and the values; a closed stdout is exit code 2, not a panic. Most cases fail before the
//! first arm (fast); the two that run one chunk of one arm are the slow ones.

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

/// `dcc-bench <sub> --backend host --contract token2wav_tiny` plus `args`, one chunk of B0.
fn bench(sub: &str, w: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dcc-bench"));
    c.args([sub, "--backend", "host", "--weights"])
        .arg(w)
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
    let (code, e) = run(bench(
        "token2wav",
        &w,
        &["--contract", "token2wav_tiny", "--busy-reps", "0"],
    ));
    assert_eq!(code, 1, "{e}");
    assert!(
        e.contains(
            "arm B0: chunk 0: tensor mel: 4000 of 4000 values are not finite, the first at index 0"
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
