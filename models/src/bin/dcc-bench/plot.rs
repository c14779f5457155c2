//! `dcc-bench sessions --plot`: peak memory and p95 chunk latency against the session count N,
//! one line per arm (and per batched arm), as a self-contained SVG written by hand (two panels;
//! N on a log₂ axis).
//! An arm that ran out of memory ends its line with a cross at that N, at the top of the panel.

use std::fmt::Write as _;

use serde_json::Value;

const W: f64 = 460.0;
const H: f64 = 320.0;
const PAD_L: f64 = 64.0;
const PAD_R: f64 = 16.0;
const PAD_T: f64 = 36.0;
const PAD_B: f64 = 44.0;
const COLORS: [&str; 6] = [
    "#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// One arm's points: `(N, value)` of its completed runs, and the N it ran out of memory at.
struct Series {
    arm: String,
    points: Vec<(f64, f64)>,
    oom: Option<f64>,
}

fn series(out: &Value, key: &str) -> Vec<Series> {
    let mut v: Vec<Series> = Vec::new();
    let runs = out["runs"].as_array().map_or(&[][..], |r| r.as_slice());
    for arm in out["run"]["arms"].as_array().into_iter().flatten() {
        let arm = arm.as_str().unwrap_or("");
        // the arm's time-multiplexed line, then its batched one if it ran batched
        let batched = runs
            .iter()
            .any(|r| r["arm"].as_str() == Some(arm) && r["batched"] == true);
        // `--batched-only`: no time-multiplexed line
        let multiplexed = !(batched && out["run"]["batched_only"] == true);
        for b in multiplexed
            .then_some(false)
            .into_iter()
            .chain(batched.then_some(true))
        {
            let mut s = Series {
                arm: if b {
                    format!("{arm} batched")
                } else {
                    arm.to_string()
                },
                points: Vec::new(),
                oom: None,
            };
            for r in runs {
                if r["arm"].as_str() != Some(arm) || (r["batched"] == true) != b {
                    continue;
                }
                let n = r["n"].as_f64().unwrap_or(0.0);
                match (r["status"].as_str(), r[key].as_f64()) {
                    (Some("ok"), Some(y)) if y.is_finite() => s.points.push((n, y)),
                    (Some("out of memory"), _) => s.oom = Some(n),
                    _ => {}
                }
            }
            v.push(s);
        }
    }
    v
}

/// A "nice" upper bound for an axis holding `max`.
fn nice(max: f64) -> f64 {
    if max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(max.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= max {
            return m * p;
        }
    }
    10.0 * p
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// One panel at horizontal offset `x0`: `key` of every run against N.
fn panel(o: &mut String, out: &Value, x0: f64, key: &str, title: &str, n_max: f64) {
    let ss = series(out, key);
    let y_max = nice(
        ss.iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let lx = n_max.max(2.0).log2();
    let px = |n: f64| x0 + PAD_L + (n.max(1.0).log2() / lx) * (W - PAD_L - PAD_R);
    let py = |y: f64| PAD_T + (1.0 - y / y_max) * (H - PAD_T - PAD_B);
    let _ = writeln!(
        o,
        r#"<text x="{:.1}" y="20" font-size="14" text-anchor="middle">{}</text>"#,
        x0 + W / 2.0,
        esc(title)
    );
    let (bx, by) = (x0 + PAD_L, H - PAD_B);
    let _ = writeln!(
        o,
        "<path d=\"M{bx:.1} {PAD_T:.1} V{by:.1} H{:.1}\" stroke=\"#000\" fill=\"none\"/>",
        x0 + W - PAD_R
    );
    for i in 0..=4 {
        let y = y_max * i as f64 / 4.0;
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            bx - 4.0,
            py(y) + 4.0,
            if y_max >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.2}")
            }
        );
    }
    let mut n = 1.0;
    while n <= n_max.max(1.0) {
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{n}</text>",
            px(n),
            by + 16.0
        );
        n *= 2.0;
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">sessions N</text>",
        x0 + W / 2.0,
        H - 8.0
    );
    for (i, s) in ss.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = s
            .points
            .iter()
            .map(|&(n, y)| format!("{:.1},{:.1}", px(n), py(y)))
            .collect();
        if !pts.is_empty() {
            let _ = writeln!(
                o,
                "<polyline points=\"{}\" stroke=\"{c}\" stroke-width=\"2\" fill=\"none\"/>",
                pts.join(" ")
            );
        }
        for &(n, y) in &s.points {
            let _ = writeln!(
                o,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>",
                px(n),
                py(y)
            );
        }
        if let Some(n) = s.oom {
            let (x, y) = (px(n), PAD_T + 6.0);
            let _ = writeln!(
                o,
                "<path d=\"M{:.1} {:.1} l8 8 m0 -8 l-8 8\" stroke=\"{c}\" stroke-width=\"2\"/>",
                x - 4.0,
                y - 4.0
            );
        }
        let ly = PAD_T + 4.0 + 16.0 * i as f64;
        let label = match s.oom {
            Some(n) => format!("{} (out of memory at N = {n})", s.arm),
            None => s.arm.clone(),
        };
        let _ = writeln!(
            o,
            "<text x=\"{:.1}\" y=\"{ly:.1}\" font-size=\"12\" fill=\"{c}\">{}</text>",
            bx + 10.0,
            esc(&label)
        );
    }
}

/// The SVG for a `dcc-bench sessions` result object.
pub fn svg(out: &Value) -> String {
    let n_max = out["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["n"].as_f64())
        .fold(1.0, f64::max);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" \
         font-family=\"sans-serif\">",
        2.0 * W,
        H + 20.0
    );
    let _ = writeln!(o, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>");
    panel(
        &mut o,
        out,
        0.0,
        "peak_mib",
        "peak device memory (MiB, ledger)",
        n_max,
    );
    panel(&mut o, out, W, "p95_ms", "p95 chunk latency (ms)", n_max);
    let h = &out["run"];
    let _ = writeln!(
        o,
        "<text x=\"8\" y=\"{:.1}\" font-size=\"11\" fill=\"#555\">{}</text>",
        H + 14.0,
        esc(&format!(
            "dcc-bench sessions on {}: contract {}, cadence {}, {} chunks",
            h["device"].as_str().unwrap_or(""),
            h["contract"].as_str().unwrap_or(""),
            h["cadence"].as_str().unwrap_or(""),
            h["chunks"]
        ))
    );
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn lines_per_arm_and_the_out_of_memory_mark() {
        let out = json!({
            "run": {"arms": ["B0", "SRc"], "device": "d", "contract": "c", "cadence": "max", "chunks": 4},
            "runs": [
                {"arm": "B0", "n": 1, "status": "ok", "peak_mib": 10.0, "p95_ms": 5.0},
                {"arm": "B0", "n": 2, "status": "out of memory", "peak_mib": 30.0, "p95_ms": null},
                {"arm": "SRc", "n": 1, "status": "ok", "peak_mib": 8.0, "p95_ms": 3.0},
                {"arm": "SRc", "n": 2, "status": "ok", "peak_mib": 9.0, "p95_ms": 4.0},
            ],
        });
        let s = super::svg(&out);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert_eq!(s.matches("<polyline").count(), 4, "{s}");
        // a batched arm adds its own line to each panel
        let mut batched = out.clone();
        let runs = batched["runs"].as_array_mut().unwrap();
        runs.push(json!({"arm": "SRc", "n": 1, "batched": true, "status": "ok", "peak_mib": 9.0, "p95_ms": 2.0}));
        runs.push(json!({"arm": "SRc", "n": 2, "batched": true, "status": "ok", "peak_mib": 9.5, "p95_ms": 2.5}));
        let b = super::svg(&batched);
        assert_eq!(b.matches("<polyline").count(), 6, "{b}");
        assert!(b.contains("SRc batched"), "{b}");
        assert!(s.contains("B0 (out of memory at N = 2)"));
        assert_eq!(s.matches("<circle").count(), 6);
        assert_eq!(super::nice(7.3), 10.0);
        assert_eq!(super::nice(0.0), 1.0);
    }
}
