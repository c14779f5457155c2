//! The PCM's checks and report: the vendor's PCM beside `--io` (`check`), every arm's PCM
//! against B0's, the JSON fields and the audio table.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use dcc_models::nn::weights::read_regular_file;
use dcc_models::token2wav::rel_l2;
use safetensors::Dtype;
use serde_json::{Value, json};

use super::audio::ArmAudio;
use super::error::BenchError;
use super::inputs::MAX_IO_BYTES;
use super::{Res, non_finite, num, pct};
use dcc_models::token2wav::serve::Arm;
use dcc_runtime::stats;

/// The vendor's PCM of a stream: `pcm_<i>` (what chunk `i` returned) and `pcm_flush` (what the
/// final empty call returned), each `[1, n]` f32.
pub struct PcmReference {
    pub path: PathBuf,
    pub chunks: Vec<Vec<f32>>,
    /// The flush, when the reference's stream ends where this run's does (no `pcm_<chunks>`):
    /// a flush after more chunks holds other frames.
    pub flush: Option<Vec<f32>>,
}

/// `pcm.safetensors` beside `io`, if there is one: its first `chunks` chunks (each one
/// required) and its flush.
pub fn read_reference(io: &Path, chunks: usize) -> Res<Option<PcmReference>> {
    let path = dcc_models::fsio::parent_dir(io).join("pcm.safetensors");
    if !path.exists() {
        return Ok(None);
    }
    let bytes = read_regular_file(&path, MAX_IO_BYTES).map_err(BenchError::PcmFile)?;
    let st =
        safetensors::SafeTensors::deserialize(&bytes).map_err(|error| BenchError::Safetensors {
            path: path.clone(),
            tensor: None,
            error,
        })?;
    let f = |n: &str| -> Res<Vec<f32>> {
        let t = st.tensor(n).map_err(|error| BenchError::Safetensors {
            path: path.clone(),
            tensor: Some(n.into()),
            error,
        })?;
        if t.dtype() != Dtype::F32 {
            return Err(BenchError::InputDtype {
                path: path.clone(),
                tensor: n.into(),
                want: Dtype::F32,
                got: t.dtype(),
                shape: t.shape().to_vec(),
            });
        }
        Ok(t.data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    };
    let chunks_ref = (0..chunks)
        .map(|i| f(&format!("pcm_{i}")))
        .collect::<Res<Vec<_>>>()?;
    let ends_here = st.tensor(&format!("pcm_{chunks}")).is_err();
    let flush = if ends_here {
        Some(f("pcm_flush")?)
    } else {
        None
    };
    Ok(Some(PcmReference {
        path,
        chunks: chunks_ref,
        flush,
    }))
}

/// One arm's PCM against the reference: relative L2 per chunk, then the flush's (`None` where
/// not compared); mismatched lengths and non-finite samples go to `problems`.
fn compare(a: &ArmAudio, r: &PcmReference, problems: &mut Vec<String>) -> (Vec<f64>, Option<f64>) {
    let mut one = |i: usize, name: &str, want: &[f32]| -> Option<f64> {
        let got = a.part(i);
        if let Some(p) = non_finite(i, "pcm", got) {
            problems.push(p);
        }
        if let Some(p) = non_finite(i, name, want) {
            problems.push(p);
        }
        match rel_l2(got, want) {
            Ok(e) => Some(e),
            Err(e) => {
                problems.push(format!("chunk {i}: pcm vs {name}: {e}"));
                None
            }
        }
    };
    let per_chunk = r
        .chunks
        .iter()
        .enumerate()
        .filter_map(|(i, want)| one(i, &format!("pcm_{i}"), want))
        .collect();
    let flush = r
        .flush
        .as_ref()
        .and_then(|want| one(r.chunks.len(), "pcm_flush", want));
    (per_chunk, flush)
}

/// One arm's audio fields for its JSON object, and whether its PCM is within the tolerance of
/// the reference (`reference`: the vendor's PCM and `--pcm-tol`; true without one). Problems
/// (non-finite samples, lengths that differ) go to `problems`, which fail the run.
pub fn arm_fields(
    arm: Arm,
    a: &ArmAudio,
    b0_sha: Option<&str>,
    reference: Option<(&PcmReference, f64)>,
    problems: &mut Vec<String>,
) -> Res<(BTreeMap<&'static str, Value>, bool)> {
    let rel = reference.map(|(r, _)| compare(a, r, problems));
    let within = match (&rel, reference) {
        (Some((per_chunk, flush)), Some((r, tol))) => {
            // every chunk compared (and the flush where it is comparable); `e <= tol` is false
            // for NaN, as for the mel
            let want = r.chunks.len() + usize::from(r.flush.is_some());
            per_chunk.len() + usize::from(flush.is_some()) == want
                && per_chunk.iter().chain(flush).all(|e| *e <= tol)
        }
        _ => true,
    };
    Ok((arm_json(arm, a, b0_sha, rel.as_ref())?, within))
}

/// The audio fields of one arm's JSON object.
fn arm_json(
    arm: Arm,
    a: &ArmAudio,
    b0_sha: Option<&str>,
    rel: Option<&(Vec<f64>, Option<f64>)>,
) -> Res<BTreeMap<&'static str, Value>> {
    let sha = a.sha256();
    let mut m = BTreeMap::new();
    m.insert(
        "vocoder_p50_ms",
        json!(pct(arm, "vocoder", &a.vocoder_ms, 0.5)?),
    );
    m.insert(
        "vocoder_p95_ms",
        json!(pct(arm, "vocoder", &a.vocoder_ms, 0.95)?),
    );
    m.insert("e2e_p50_ms", json!(pct(arm, "end-to-end", &a.e2e_ms, 0.5)?));
    m.insert(
        "e2e_p95_ms",
        json!(pct(arm, "end-to-end", &a.e2e_ms, 0.95)?),
    );
    m.insert("ttfa_ms", json!(a.ttfa_ms));
    m.insert("flush_ms", json!(a.flush_ms));
    m.insert("vocoder_ms", json!(a.vocoder_ms));
    m.insert("e2e_ms", json!(a.e2e_ms));
    m.insert("pcm_samples", json!(a.pcm.len()));
    m.insert("pcm_identical_to_b0", json!(b0_sha.map(|b| b == sha)));
    m.insert("pcm_sha256", json!(sha));
    if let Some((per_chunk, flush)) = rel {
        let all = per_chunk.iter().copied().chain(*flush);
        m.insert("pcm_rel_l2_max", stats::max(all).map_or(Value::Null, num));
        m.insert(
            "pcm_rel_l2_per_chunk",
            json!(per_chunk.iter().map(|e| num(*e)).collect::<Vec<_>>()),
        );
        m.insert("pcm_rel_l2_flush", flush.map_or(Value::Null, num));
    }
    Ok(m)
}

/// Whether every arm's PCM equals B0's: `None` without B0 or without audio.
pub fn verdict(arms: &[Value]) -> Option<Result<(), Vec<String>>> {
    let mut differ = Vec::new();
    let mut any = false;
    for a in arms {
        match a["pcm_identical_to_b0"].as_bool() {
            Some(true) => any = true,
            Some(false) => differ.push(a["arm"].as_str().unwrap_or("?").to_string()),
            None => {}
        }
    }
    match (any, differ.is_empty()) {
        (false, true) => None,
        (_, true) => Some(Ok(())),
        _ => Some(Err(differ)),
    }
}

/// The audio table and the PCM verdict line (nothing for the flow alone).
pub fn write_table(w: &mut impl Write, out: &Value) -> std::io::Result<()> {
    let arms = out["arms"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if !arms.iter().any(|a| a.get("pcm_sha256").is_some()) {
        return Ok(());
    }
    let f = |v: &Value, p: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.p$}"));
    writeln!(
        w,
        "{:<4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:<17} {:>10} {:<6}",
        "arm",
        "voc p50",
        "voc p95",
        "e2e p50",
        "e2e p95",
        "TTFA ms",
        "samples",
        "pcm sha256",
        "pcm rel-L2",
        "=B0"
    )?;
    for a in arms {
        writeln!(
            w,
            "{:<4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:<17} {:>10} {:<6}",
            a["arm"].as_str().unwrap_or(""),
            f(&a["vocoder_p50_ms"], 2),
            f(&a["vocoder_p95_ms"], 2),
            f(&a["e2e_p50_ms"], 2),
            f(&a["e2e_p95_ms"], 2),
            f(&a["ttfa_ms"], 2),
            a["pcm_samples"].as_u64().unwrap_or(0),
            a["pcm_sha256"]
                .as_str()
                .and_then(|s| s.get(..16))
                .unwrap_or(""),
            match &a["pcm_rel_l2_max"] {
                Value::Number(x) => x.as_f64().map_or("-".into(), |x| format!("{x:.2e}")),
                Value::String(s) => s.clone(),
                _ => "-".into(),
            },
            match a["pcm_identical_to_b0"].as_bool() {
                Some(true) => "yes",
                Some(false) => "NO",
                None => "-",
            }
        )?;
    }
    if let (Some(path), Some(tol)) = (
        out["run"]["pcm_reference"].as_str(),
        out["run"]["pcm_tol"].as_f64(),
    ) {
        let within = arms.iter().all(|a| {
            a["pcm_rel_l2_max"].as_f64().is_some_and(|e| e <= tol)
                && a["problems"].as_array().is_none_or(Vec::is_empty)
        });
        writeln!(
            w,
            "check: every chunk's PCM within rel-L2 {tol:e} of {path}: {}",
            if within { "yes" } else { "NO" }
        )?;
    }
    match verdict(arms) {
        Some(Ok(())) => writeln!(w, "PCM: every arm equals B0 bit for bit: yes"),
        Some(Err(d)) => writeln!(
            w,
            "PCM: every arm equals B0 bit for bit: NO ({} differ)",
            d.join(", ")
        ),
        None => writeln!(w, "PCM: no B0 arm to compare with"),
    }
}
