//! Reports of a [`Checked`] spec: a readable text report (tables, every derivation shown with its
//! formula and inputs) and a JSON object (`dcc check --format json`).

use std::fmt::Write as _;

use crate::Checked;
use crate::derive::types::*;

mod batch;
mod json;
mod point;

pub use json::{json, json_errors, json_io_error};
use point::point;

/// `526909440 B (527 MB, 502.5 MiB)`.
pub fn fmt_bytes(b: u64) -> String {
    let with_sep = group_digits(b);
    if b < 1000 {
        return format!("{with_sep} B");
    }
    let (v, unit) = if b >= 1_000_000_000 {
        (b as f64 / 1e9, "GB")
    } else if b >= 1_000_000 {
        (b as f64 / 1e6, "MB")
    } else {
        (b as f64 / 1e3, "kB")
    };
    let mib = b as f64 / (1024.0 * 1024.0);
    if mib >= 0.1 {
        format!("{with_sep} B ({} {unit}, {mib:.3} MiB)", sig3(v))
    } else {
        format!("{with_sep} B ({} {unit})", sig3(v))
    }
}

pub(super) fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub(super) fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub(super) fn list(v: &[u64], max: usize) -> String {
    if v.len() <= max {
        format!(
            "{{{}}}",
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        let head: Vec<String> = v[..3].iter().map(|x| x.to_string()).collect();
        let tail: Vec<String> = v[v.len() - 2..].iter().map(|x| x.to_string()).collect();
        format!(
            "{{{}, …, {}}} ({} extents)",
            head.join(", "),
            tail.join(", "),
            v.len()
        )
    }
}

pub(super) fn table(rows: &[Vec<String>], right: &[bool]) -> String {
    let cols = rows.iter().map(|r| r.len()).max().unwrap_or(0);
    let mut w = vec![0usize; cols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (ri, r) in rows.iter().enumerate() {
        out.push_str("  ");
        for (i, c) in r.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if right.get(i).copied().unwrap_or(false) {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            } else {
                out.push_str(c);
                if i + 1 < r.len() {
                    out.push_str(&" ".repeat(pad));
                }
            }
            if i + 1 < r.len() {
                out.push_str("  ");
            }
        }
        out.push('\n');
        if ri == 0 {
            out.push_str("  ");
            let total: usize = w.iter().sum::<usize>() + 2 * (cols.saturating_sub(1));
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

pub(super) fn rho_text(r: Ratio) -> String {
    format!("{:.1}×", r.rounded1())
}

pub(super) fn envelope_dims(r: &DerivedRegion) -> String {
    r.envelope_axes
        .iter()
        .map(|d| d.value.to_string())
        .collect::<Vec<_>>()
        .join("×")
}

/// The text report for one checked spec.
pub fn text(c: &Checked) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}  ({}, sha256 {})",
        c.family(),
        c.source.path.display(),
        &c.spec_sha256[..16.min(c.spec_sha256.len())]
    );
    if let Some(d) = &c.spec.description {
        let _ = writeln!(o, "  {}", d.trim());
    }
    let d = &c.derived;
    o.push_str("\nquantities\n");
    let mut rows = vec![vec!["name".into(), "value".into(), "definition".into()]];
    for q in &d.quantities {
        rows.push(vec![
            q.name.clone(),
            q.value.to_string(),
            if q.derivation.inputs.is_empty() {
                String::new()
            } else {
                q.derivation.explain()
            },
        ]);
    }
    o.push_str(&table(&rows, &[false, true, false]));
    o.push_str("\nclocks\n");
    let mut rows = vec![vec!["clock".into(), "relation".into()]];
    for k in &d.clocks {
        let rel = if !k.factors.is_empty() {
            format!("product {}", k.factors.join(" × "))
        } else if k.base == k.name {
            "base".into()
        } else {
            format!("{} per {}", k.per_base, k.base)
        };
        rows.push(vec![k.name.clone(), rel]);
    }
    o.push_str(&table(&rows, &[false, false]));
    if !d.constants.is_empty() {
        o.push_str("\ndevice-resident constants\n");
        let mut rows = vec![vec![
            "constant".into(),
            "dtype".into(),
            "shape".into(),
            "bytes".into(),
        ]];
        for k in &d.constants {
            rows.push(vec![
                k.name.clone(),
                k.dtype.name().into(),
                format!("{:?}", k.shape),
                group_digits(k.bytes),
            ]);
        }
        o.push_str(&table(&rows, &[false, false, false, true]));
    }
    o.push_str(&point(d, true));
    for op in &c.operating_points {
        o.push_str(&point(op, false));
    }
    if !c.warnings.items.is_empty() {
        o.push('\n');
        o.push_str(&c.warnings.render());
    }
    o
}
