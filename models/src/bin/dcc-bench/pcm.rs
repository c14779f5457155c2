//! The PCM's checks and report: the vendor's PCM beside `--io` (`check`), every arm's PCM
//! against B0's, the JSON fields and the audio table.
//!
//! Against the vendor's PCM, `check` makes two figures. The vocoder port's fidelity: a fresh
//! eager vocoder over the vendor's own mel (`feat_<i>`, the mel the vendor's vocoder consumed),
//! chunk by chunk against `pcm_<i>` and `pcm_flush`, gated by `--pcm-tol`. And each arm's
//! end-to-end PCM against the same chunks, reported (first, median, max, whether it grows with
//! the chunk index) and gated only by `--e2e-pcm-tol`: the vocoder predicts F0 from the mel and
//! integrates it into a float64 phase that carries across chunks, so mel differences at float32
//! rounding turn into a phase offset that grows along the stream (on the full model, a mel
//! within 4e-7 of the vendor's gave end-to-end PCM 3.8e-3 apart). The end-to-end distance thus
//! measures the flow's rounding as much as the vocoder, and is no verdict on either.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use dcc_models::nn::weights::read_regular_file;
use dcc_models::speech::{SpeechError, SpeechModel};
use dcc_models::token2wav::rel_l2;
use dcc_models::vocoder::StreamingVocoder;
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

/// A stream's PCM (`part(i)`: chunk `i`'s, the flush the part after the last chunk) against
/// the reference: relative L2 per chunk, then the flush's (`None` where not compared);
/// mismatched lengths and non-finite samples go to `problems`.
fn compare<'a>(
    part: impl Fn(usize) -> &'a [f32],
    r: &PcmReference,
    problems: &mut Vec<String>,
) -> (Vec<f64>, Option<f64>) {
    let mut one = |i: usize, name: &str, want: &[f32]| -> Option<f64> {
        let got = part(i);
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

/// Whether every chunk (and the flush where comparable) was compared and is within `tol`
/// (`e <= tol` is false for NaN, as for the mel).
fn all_within(per_chunk: &[f64], flush: Option<f64>, r: &PcmReference, tol: f64) -> bool {
    let want = r.chunks.len() + usize::from(r.flush.is_some());
    per_chunk.len() + usize::from(flush.is_some()) == want
        && per_chunk.iter().chain(&flush).all(|e| *e <= tol)
}

/// The vocoder port's fidelity apart from the flow's: a fresh eager vocoder over `model`'s
/// weights runs the vendor's own mel (`feats`, `[mel bins, 50]` channel-major each, the
/// `feat_<i>` of `--io`), then the final empty flush, and each chunk's PCM is compared with the
/// reference's; within `tol` everywhere (and no problem) or not. A chunk the vocoder refuses
/// ends the run there, as a problem.
pub fn vocoder_check(
    model: &SpeechModel,
    feats: &[Vec<f32>],
    r: &PcmReference,
    tol: f64,
) -> Res<Value> {
    let vocoder_err = |e| BenchError::Vocoder(Box::new(SpeechError::from(e)));
    let be = model.flow().backend().clone();
    let mut v = StreamingVocoder::new(be, model.vocoder().clone()).map_err(vocoder_err)?;
    let bins = model.mel_bins();
    let mut problems = Vec::new();
    let mut parts: Vec<Vec<f32>> = Vec::new();
    for (i, mel) in feats.iter().take(r.chunks.len()).enumerate() {
        if let Some(p) = non_finite(i, &format!("feat_{i}"), mel) {
            problems.push(p);
        }
        match v.push(mel, bins, false) {
            Ok(pcm) => parts.push(pcm),
            Err(e) => {
                problems.push(format!("chunk {i}: the vocoder on feat_{i}: {e}"));
                break;
            }
        }
    }
    let complete = problems.is_empty() && parts.len() == r.chunks.len();
    let (per_chunk, flush) = if complete {
        // the final flush only where the reference's stream ends where this one does
        if r.flush.is_some() {
            match v.push(&[], bins, true) {
                Ok(pcm) => parts.push(pcm),
                Err(e) => problems.push(format!("the vocoder's final flush: {e}")),
            }
        }
        let empty: &[f32] = &[];
        compare(
            |i| parts.get(i).map_or(empty, Vec::as_slice),
            r,
            &mut problems,
        )
    } else {
        (Vec::new(), None)
    };
    let ok = problems.is_empty() && all_within(&per_chunk, flush, r, tol);
    let all = per_chunk.iter().copied().chain(flush);
    Ok(json!({
        "mel": "feat_<i> of --io",
        "pcm_tol": tol,
        "rel_l2_per_chunk": per_chunk.iter().map(|e| num(*e)).collect::<Vec<_>>(),
        "rel_l2_flush": flush.map_or(Value::Null, num),
        "rel_l2_max": stats::max(all).map_or(Value::Null, num),
        "problems": problems,
        "ok": ok,
    }))
}

/// The end-to-end distance's shape over the chunks: the first chunk's, the median, the
/// largest, and whether it grows with the chunk index (a positive least-squares slope over two
/// chunks or more): the signature of a phase offset integrating along the stream.
fn trend(per_chunk: &[f64]) -> BTreeMap<&'static str, Value> {
    let mut m = BTreeMap::new();
    let n = per_chunk.len();
    let mut sorted = per_chunk.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some(0.5 * (sorted[n / 2 - 1] + sorted[n / 2])),
    };
    let grows = (n >= 2).then(|| {
        let mx = (n - 1) as f64 / 2.0;
        let my = per_chunk.iter().sum::<f64>() / n as f64;
        let cov: f64 = per_chunk
            .iter()
            .enumerate()
            .map(|(i, e)| (i as f64 - mx) * (e - my))
            .sum();
        cov > 0.0
    });
    m.insert(
        "pcm_rel_l2_first",
        per_chunk.first().map_or(Value::Null, |e| num(*e)),
    );
    m.insert("pcm_rel_l2_median", median.map_or(Value::Null, num));
    m.insert("pcm_rel_l2_grows", json!(grows));
    m
}

/// One arm's audio fields for its JSON object, and whether its end-to-end PCM is within the
/// tolerance of the reference (`reference`: the vendor's PCM and `--e2e-pcm-tol`; true without
/// one or without a tolerance: not gated). Problems (non-finite samples, lengths that differ)
/// go to `problems`, which fail the run.
pub fn arm_fields(
    arm: Arm,
    a: &ArmAudio,
    b0_sha: Option<&str>,
    reference: Option<(&PcmReference, Option<f64>)>,
    problems: &mut Vec<String>,
) -> Res<(BTreeMap<&'static str, Value>, bool)> {
    let rel = reference.map(|(r, _)| compare(|i| a.part(i), r, problems));
    let within = match (&rel, reference) {
        (Some((per_chunk, flush)), Some((r, Some(tol)))) => all_within(per_chunk, *flush, r, tol),
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
    let c = a.catalog.as_ref();
    m.insert(
        "vocoder_classes_captured",
        json!(c.map(|c| c.classes_captured)),
    );
    m.insert("vocoder_replays", json!(c.map(|c| c.replays)));
    m.insert("vocoder_eager_calls", json!(c.map(|c| c.eager_calls)));
    m.insert(
        "vocoder_fallbacks_total",
        json!(c.map(|c| &c.fallbacks_total)),
    );
    m.insert("vocoder_replays_steady", json!(c.map(|c| c.replays_steady)));
    m.insert("vocoder_eager_steady", json!(c.map(|c| c.eager_steady)));
    m.insert(
        "vocoder_fallbacks_steady",
        json!(c.map(|c| &c.fallbacks_steady)),
    );
    if let Some((per_chunk, flush)) = rel {
        let all = per_chunk.iter().copied().chain(*flush);
        m.insert("pcm_rel_l2_max", stats::max(all).map_or(Value::Null, num));
        m.insert(
            "pcm_rel_l2_per_chunk",
            json!(per_chunk.iter().map(|e| num(*e)).collect::<Vec<_>>()),
        );
        m.insert("pcm_rel_l2_flush", flush.map_or(Value::Null, num));
        m.extend(trend(per_chunk));
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
        "{:<4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:<17} {:>10} {:<6} {:>7} {:>7} {:>9} {:<20} {:<20}",
        "arm",
        "voc p50",
        "voc p95",
        "e2e p50",
        "e2e p95",
        "TTFA ms",
        "samples",
        "pcm sha256",
        "pcm rel-L2",
        "=B0",
        "v.class",
        "v.repl",
        "v.eager",
        "v.fallbacks (total)",
        "v.fallbacks (steady)"
    )?;
    // the vocoder's catalog: `-` on an eager arm (no engines); replays and eager calls as
    // total/steady
    let n = |v: &Value| v.as_u64().map_or("-".to_string(), |x| x.to_string());
    let pair = |t: &Value, s: &Value| match (t.as_u64(), s.as_u64()) {
        (Some(t), Some(s)) => format!("{t}/{s}"),
        _ => "-".into(),
    };
    let fb = |v: &Value| match v.as_object() {
        Some(m) if m.is_empty() => "0".to_string(),
        Some(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        None => "-".into(),
    };
    for a in arms {
        writeln!(
            w,
            "{:<4} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:<17} {:>10} {:<6} {:>7} {:>7} {:>9} {:<20} {:<20}",
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
            },
            n(&a["vocoder_classes_captured"]),
            pair(&a["vocoder_replays"], &a["vocoder_replays_steady"]),
            pair(&a["vocoder_eager_calls"], &a["vocoder_eager_steady"]),
            fb(&a["vocoder_fallbacks_total"]),
            fb(&a["vocoder_fallbacks_steady"]),
        )?;
    }
    if let Some(path) = out["run"]["pcm_reference"].as_str() {
        write_reference_lines(w, out, arms, path)?;
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

/// The two figures against the vendor's PCM: the vocoder on the vendor's mel (gated by
/// `--pcm-tol`), then each arm's end-to-end distance (gated only by `--e2e-pcm-tol`).
fn write_reference_lines(
    w: &mut impl Write,
    out: &Value,
    arms: &[Value],
    path: &str,
) -> std::io::Result<()> {
    let e = |v: &Value| match v {
        Value::Number(x) => x.as_f64().map_or("-".into(), |x| format!("{x:.2e}")),
        Value::String(s) => s.clone(),
        _ => "-".into(),
    };
    let yes = |b: bool| if b { "yes" } else { "NO" };
    let vc = &out["vocoder_check"];
    if let Some(tol) = vc["pcm_tol"].as_f64() {
        let per: Vec<String> = vc["rel_l2_per_chunk"]
            .as_array()
            .into_iter()
            .flatten()
            .map(e)
            .collect();
        writeln!(
            w,
            "check: the vocoder on --io's feat_i (the vendor's mel), every chunk's PCM within \
             rel-L2 {tol:e} of {path}: {} (max {}; per chunk {}; flush {})",
            yes(vc["ok"].as_bool() == Some(true)),
            e(&vc["rel_l2_max"]),
            if per.is_empty() {
                "-".into()
            } else {
                per.join(" ")
            },
            e(&vc["rel_l2_flush"]),
        )?;
    }
    let gate = out["run"]["e2e_pcm_tol"].as_f64();
    for a in arms {
        let grows = match a["pcm_rel_l2_grows"].as_bool() {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        };
        let verdict = match gate {
            Some(tol) => format!(
                "within --e2e-pcm-tol {tol:e}: {}",
                yes(a["pcm_rel_l2_max"].as_f64().is_some_and(|x| x <= tol)
                    && a["problems"].as_array().is_none_or(Vec::is_empty))
            ),
            None => "not gated (the phase integrates the flow's rounding; --e2e-pcm-tol)".into(),
        };
        writeln!(
            w,
            "end-to-end PCM of {} vs {path}: rel-L2 first {}, median {}, max {}, grows with the \
             chunk index: {grows}; {verdict}",
            a["arm"].as_str().unwrap_or(""),
            e(&a["pcm_rel_l2_first"]),
            e(&a["pcm_rel_l2_median"]),
            e(&a["pcm_rel_l2_max"]),
        )?;
    }
    Ok(())
}
