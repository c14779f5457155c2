//! DOT graph of a spec: clocks (ellipses), regions (boxes), constants (dashed boxes) and
//! callables (hexagons); edges for clock rates, region clocks, reads and writes.

use std::fmt::Write as _;

use crate::Checked;
use crate::ir::{ArgSource, ClockKind};

fn q(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Render the region/callable/clock graph of a checked spec as Graphviz DOT.
pub fn dot(c: &Checked) -> String {
    let spec = &c.spec;
    let d = &c.derived;
    let mut o = String::new();
    let _ = writeln!(o, "digraph {} {{", q(&spec.family.value));
    let _ = writeln!(o, "  rankdir=LR;");
    let _ = writeln!(o, "  node [fontname=\"Helvetica\"];");
    for k in &spec.clocks {
        let _ = writeln!(
            o,
            "  {} [shape=ellipse, label={}];",
            q(&format!("clock:{}", k.name.value)),
            q(&format!("clock {}", k.name.value))
        );
    }
    for k in &spec.clocks {
        let from = q(&format!("clock:{}", k.name.value));
        match &k.kind {
            ClockKind::Base => {}
            ClockKind::Rate { rate, per } => {
                let _ = writeln!(
                    o,
                    "  {from} -> {} [label={}, style=dotted];",
                    q(&format!("clock:{}", per.value)),
                    q(&format!("{rate} per"))
                );
            }
            ClockKind::Product(f) => {
                for x in f {
                    let _ = writeln!(
                        o,
                        "  {from} -> {} [label=\"×\", style=dotted];",
                        q(&format!("clock:{}", x.value))
                    );
                }
            }
        }
    }
    for (r, dr) in spec.regions.iter().zip(&d.regions) {
        let id = q(&format!("region:{}", r.name.value));
        let mut label = format!(
            "{}\\nA={} env={}\\n{} B",
            r.name.value,
            dr.attended_extent.value,
            dr.envelope_axes
                .iter()
                .map(|e| e.value.to_string())
                .collect::<Vec<_>>()
                .join("x"),
            dr.live_bytes
        );
        if let Some(rho) = dr.rho() {
            let _ = write!(label, "\\nrho={:.1}", rho.rounded1());
        }
        let _ = writeln!(o, "  {id} [shape=box, label=\"{label}\"];");
        for k in &r.clock {
            let _ = writeln!(
                o,
                "  {id} -> {} [label=\"clock\", style=dashed];",
                q(&format!("clock:{}", k.value))
            );
        }
    }
    for k in &spec.constants {
        let _ = writeln!(
            o,
            "  {} [shape=box, style=dashed, label={}];",
            q(&format!("const:{}", k.name.value)),
            q(&format!("const {}", k.name.value))
        );
    }
    for (cl, dc) in spec.callables.iter().zip(&d.callables) {
        let id = q(&format!("callable:{}", cl.name.value));
        let _ = writeln!(
            o,
            "  {id} [shape=hexagon, label=\"{}\\n{}\\nK={} {}\"];",
            cl.name.value,
            dc.granularity.name(),
            dc.catalog_width_text(),
            dc.verdict.label()
        );
        for a in &cl.inputs {
            match &a.source {
                ArgSource::Region(r) => {
                    let _ = writeln!(
                        o,
                        "  {} -> {id} [label={}];",
                        q(&format!("region:{}", r.value)),
                        q(&format!("reads {}", a.name.value))
                    );
                }
                ArgSource::Constant(k) => {
                    let _ = writeln!(
                        o,
                        "  {} -> {id} [label={}];",
                        q(&format!("const:{}", k.value)),
                        q(&a.name.value)
                    );
                }
                ArgSource::Tensor { .. } => {}
            }
        }
        for r in &cl.reads {
            let _ = writeln!(
                o,
                "  {} -> {id} [label=\"reads\"];",
                q(&format!("region:{}", r.value))
            );
        }
        for w in &cl.writes {
            let _ = writeln!(
                o,
                "  {id} -> {} [label=\"writes\", color=red];",
                q(&format!("region:{}", w.value))
            );
        }
        if let Some(l) = &cl.loop_clock {
            let _ = writeln!(
                o,
                "  {id} -> {} [label=\"loop\", style=dotted];",
                q(&format!("clock:{}", l.value))
            );
        }
    }
    o.push_str("}\n");
    o
}
