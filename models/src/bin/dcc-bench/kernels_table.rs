//! The output of `dcc-bench kernels` ([`super::kernels`]): the DiT's linears summed per chunk
//! per implementation, the 3xTF32 pick table, and the table.

use std::io::Write;

use dcc_runtime::kernels::gemm::tf32_tiles::{self, BASE};
use serde_json::{Value, json};

use super::kernels::{DIT_LAYER, DIT_LAYERS_PER_CHUNK, SESSION_ROWS, TWIN_SHAPES};

/// The DiT's linears per chunk (`DIT_LAYER` × `DIT_LAYERS_PER_CHUNK` at `SESSION_ROWS` rows) in
/// ms, per implementation measured at every one of those shapes (`cublas`, `auto`, and each
/// variant): `{name: ms}`.
pub fn per_chunk(rows: &[Value]) -> Value {
    let mut out = serde_json::Map::new();
    let names: Vec<String> = rows
        .iter()
        .filter_map(|r| r["kernel"].as_str())
        .map(|n| n.split(' ').next().unwrap_or(n).to_string())
        .fold(Vec::new(), |mut v, n| {
            if !v.contains(&n) {
                v.push(n);
            }
            v
        });
    for name in names {
        let mut us = 0.0;
        let all = DIT_LAYER.iter().all(|&(i, o, count)| {
            let hit = rows.iter().find(|r| {
                r["in"] == i
                    && r["out"] == o
                    && r["rows"] == SESSION_ROWS
                    && r["kernel"].as_str().and_then(|k| k.split(' ').next()) == Some(&name)
            });
            match hit.and_then(|r| r["us"].as_f64()) {
                Some(t) => {
                    us += t * count as f64;
                    true
                }
                None => false,
            }
        });
        if all {
            out.insert(name, json!(us * DIT_LAYERS_PER_CHUNK as f64 / 1e3));
        }
    }
    Value::Object(out)
}

/// `tf32_tiles::PICK`, what `tf32auto` (and `ops::linear_tf32x3`) launches, top down: one
/// `{rows, out, kernel}` per row (from `rows` rows and `out` outputs on), then the base
/// (`rows` and `out` 0).
pub fn tf32_pick() -> Value {
    let name = |k: &str| k.trim_start_matches("gemm.linear_").to_string();
    let mut v: Vec<Value> = tf32_tiles::PICK
        .iter()
        .map(|p| json!({"rows": p.rows, "out": p.out, "kernel": name(p.variant.kernel.name)}))
        .collect();
    v.push(json!({"rows": 0, "out": 0, "kernel": name(BASE.kernel.name)}));
    Value::Array(v)
}

pub fn table(w: &mut dyn Write, out: &Value) -> std::io::Result<()> {
    writeln!(
        w,
        "dcc-bench kernels on {} (median of {} samples of {} launches, operands rotated over {} MiB; \
         ×cuBLAS: cuBLAS µs / µs; twin: bit-equal to the host twin (tf32x3: within its bound of the \
         fp32 twin; f16_*: within its bound of the half twin); base: a tile bit-equal to its path's base, \
         tf32x3 or f16_64x64; \
         err: max |y − cuBLAS| / max |cuBLAS|)",
        out["device"].as_str().unwrap_or("?"),
        out["samples"],
        out["reps"],
        out["cold_mib"]
    )?;
    writeln!(
        w,
        "{:>11} {:>5}  {:<24} {:>9} {:>8} {:>7} {:>5} {:>5} {:>9}",
        "in → out", "rows", "kernel", "µs", "TFLOP/s", "×cuBLAS", "twin", "base", "err"
    )?;
    let rows = out["rows"].as_array().map_or(&[][..], |v| v.as_slice());
    let mut cublas_us = f64::NAN;
    for r in rows {
        let us = r["us"].as_f64().unwrap_or(f64::NAN);
        if r["kernel"] == "cublas" {
            cublas_us = us;
        }
        let yes = |v: &Value| match v.as_bool() {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        let (twin, base) = (yes(&r["twin_ok"]), yes(&r["eq_base"]));
        let err = r["rel_err_vs_cublas"]
            .as_f64()
            .map_or_else(|| "-".into(), |e| format!("{e:.1e}"));
        writeln!(
            w,
            "{:>11} {:>5}  {:<24} {:>9.2} {:>8.2} {:>7.2} {:>5} {:>5} {:>9}",
            format!("{} → {}", r["in"], r["out"]),
            r["rows"].as_u64().unwrap_or(0),
            r["kernel"].as_str().unwrap_or("?"),
            us,
            r["tflops"].as_f64().unwrap_or(f64::NAN),
            cublas_us / us,
            twin,
            base,
            err
        )?;
    }
    if let Some(t) = out["twin_check"].as_array() {
        let bad: Vec<String> = t
            .iter()
            .filter(|r| r["ok"] != Value::Bool(true))
            .map(|r| {
                format!(
                    "{} at {} × {} → {}",
                    r["kernel"], r["rows"], r["in"], r["out"]
                )
            })
            .collect();
        writeln!(
            w,
            "twin check: {} of {} launches pass against the host twin (every variant bit-equal, tf32x3 and f16_* within their bounds, the tiles bit-equal to tf32x3 or f16_64x64, at {:?}, rows × in → out){}",
            t.len() - bad.len(),
            t.len(),
            TWIN_SHAPES,
            if bad.is_empty() {
                String::new()
            } else {
                format!("; DIFFER: {}", bad.join(", "))
            }
        )?;
    }
    if let Some(m) = out["dit_per_chunk_ms"]
        .as_object()
        .filter(|m| !m.is_empty())
    {
        let parts: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{k} {:.2}", v.as_f64().unwrap_or(f64::NAN)))
            .collect();
        writeln!(
            w,
            "DiT linears per chunk at {SESSION_ROWS} rows ({DIT_LAYERS_PER_CHUNK} layer-steps × qkv, out, 2 convs, MLP up, down), ms: {}",
            parts.join(", ")
        )?;
    }
    if let Some(p) = out["tf32_pick"].as_array() {
        let rows: Vec<String> = p
            .iter()
            .map(|r| match (r["rows"].as_u64(), r["out"].as_u64()) {
                (Some(0), Some(0)) => format!("else {}", r["kernel"].as_str().unwrap_or("?")),
                (m, o) => format!(
                    "{} from {} rows and {} outputs",
                    r["kernel"].as_str().unwrap_or("?"),
                    m.unwrap_or(0),
                    o.unwrap_or(0)
                ),
            })
            .collect();
        writeln!(w, "tf32auto picks (first match): {}", rows.join("; "))?;
    }
    writeln!(
        w,
        "{}",
        if out["ok"] == Value::Bool(true) {
            "ok: every kernel passes against its twin (where checked) and within --tol of cuBLAS (f16_*: --half-tol)"
        } else {
            "FAILED: a kernel differs from its twin or from cuBLAS beyond --tol"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The printed pick table is `tf32_tiles::PICK` top down, then the base, and the table's
    /// line names every row; each row's shape picks its variant.
    #[test]
    fn pick_table_is_the_rule() {
        let p = tf32_pick();
        let rows = p.as_array().unwrap();
        assert_eq!(rows.len(), tf32_tiles::PICK.len() + 1);
        for (r, want) in rows.iter().zip(tf32_tiles::PICK) {
            let (m, o) = (want.rows, want.out);
            assert_eq!(
                (r["rows"].as_u64(), r["out"].as_u64()),
                (Some(m as u64), Some(o as u64))
            );
            let picked = tf32_tiles::pick(m, o).kernel.name;
            assert_eq!(picked.trim_start_matches("gemm.linear_"), r["kernel"]);
        }
        assert_eq!(rows.last().unwrap()["kernel"], "tf32x3");
        assert_eq!(rows[0]["kernel"], "tf32x3_t64x128w");
        let mut out = Vec::new();
        table(&mut out, &json!({"rows": [], "tf32_pick": p, "ok": true})).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(
                "tf32auto picks (first match): tf32x3_t64x128w from 896 rows and 512 outputs; \
                 tf32x3_t64x64r from 512 rows and 512 outputs; tf32x3_t32x32s6 from 512 rows and \
                 1 outputs; tf32x3_t32x64s4 from 224 rows and 2048 outputs; tf32x3_t32x32s6 from \
                 224 rows and 1 outputs; tf32x3_t32x64s4 from 1 rows and 1536 outputs; \
                 tf32x3_t16x32k128 from 1 rows and 1 outputs; else tf32x3"
            ),
            "{text}"
        );
    }
}
