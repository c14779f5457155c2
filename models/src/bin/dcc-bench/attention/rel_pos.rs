//! `dcc-bench attention --rel-pos`: the encoder's relative-position attention (`attention.rel_pos`)
//! at its shapes, `--batch` sessions' entries in one launch (the batched encoder's call: 16
//! sessions are one launch of batch 16), 8 heads of 64 by default.
//!
//! Per batch and shape: device µs per launch (timed as `dcc-bench attention` times the DiT's
//! kernels) of the staged launch (`attention::rel_pos_dims`: each key tile's position rows staged
//! in shared memory, what `ops::rel_pos_attention` launches) and of the global-memory launch
//! (`attention::attention_dims`'s shared memory: each lane reads its position row from global
//! memory, the kernel as it was before the staging), the speed-up, and both outputs checked
//! against the host twin (`attention::rel_pos_attention`) bit for bit.

use std::io::Write;
use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::kernels::attention;
use dcc_runtime::{Arg, LaunchDims};
use serde_json::{Value, json};

use super::super::Res;
use super::super::cli::Format;
use super::super::error::BenchError;
use super::super::kernels::{Timing, time};
use super::{AttentionArgs, data};

/// Parses a `--rel-pos-shapes` entry `TQxTK` (`0 < tq <= tk <= 4096`).
pub fn shape(s: &str) -> Result<(usize, usize), String> {
    let (tq, tk) = s
        .trim()
        .split_once('x')
        .ok_or_else(|| format!("`{s}`: expected TQxTK, e.g. 50x452"))?;
    let n = |v: &str| v.trim().parse::<usize>().map_err(|e| format!("`{s}`: {e}"));
    let (tq, tk) = (n(tq)?, n(tk)?);
    if tq == 0 || tq > tk || tk > 4096 {
        return Err(format!("`{s}`: need 0 < tq <= tk <= 4096"));
    }
    Ok((tq, tk))
}

/// `(batch, heads, tq, tk, d)`.
type Shape = (usize, usize, usize, usize, usize);

/// Host operands: `q` `[batch·tq, heads·d]`, the biases `u`, `w` `[heads, d]`, the cache
/// `[batch, heads, tk, 2d]`, the projected positions `[2·tk − 1, heads·d]`.
struct HostData {
    q: Vec<f32>,
    u: Vec<f32>,
    w: Vec<f32>,
    kv: Vec<f32>,
    pos: Vec<f32>,
}

impl HostData {
    fn new(seed: u64, (b, h, tq, tk, d): Shape) -> HostData {
        let half = |v: Vec<f32>| v.into_iter().map(|x| 0.25 * x).collect();
        HostData {
            q: data(5 * seed + 1, b * tq * h * d),
            u: half(data(5 * seed + 2, h * d)),
            w: half(data(5 * seed + 3, h * d)),
            kv: data(5 * seed + 4, b * h * tk * 2 * d),
            pos: data(5 * seed + 5, (2 * tk - 1) * h * d),
        }
    }

    /// The host twin's output, entry by entry (as the kernel's twin runs it).
    fn twin(&self, (b, h, tq, tk, d): Shape) -> Vec<f32> {
        let hd = h * d;
        let entry = h * tk * 2 * d;
        let mut out = vec![0.0f32; b * tq * hd];
        for e in 0..b {
            let rows = e * tq * hd..(e + 1) * tq * hd;
            attention::rel_pos_attention(
                h,
                tq,
                tk,
                d,
                tk,
                &self.q[rows.clone()],
                hd,
                &self.u,
                &self.w,
                &self.kv[e * entry..(e + 1) * entry],
                &self.pos,
                &mut out[rows],
                hd,
            );
        }
        out
    }
}

/// One operand set on the device.
struct Operands {
    q: DeviceBuffer,
    u: DeviceBuffer,
    w: DeviceBuffer,
    kv: DeviceBuffer,
    pos: DeviceBuffer,
    out: DeviceBuffer,
}

impl Operands {
    fn new(be: &Arc<dyn Backend>, h: &HostData) -> Res<Operands> {
        let up = |v: &[f32]| be.alloc_from(v, AllocKind::Other);
        Ok(Operands {
            q: up(&h.q)?,
            u: up(&h.u)?,
            w: up(&h.w)?,
            kv: up(&h.kv)?,
            pos: up(&h.pos)?,
            out: up(&vec![f32::NAN; h.q.len()])?,
        })
    }

    /// Queues `attention.rel_pos` over the set with `dims`.
    fn launch(&self, be: &dyn Backend, dims: LaunchDims, (b, h, tq, tk, d): Shape) -> Res<()> {
        let int = |v: usize| Arg::I64(v as i64);
        let args = [
            Arg::Ptr(self.out.ptr()),
            Arg::Ptr(self.q.ptr()),
            Arg::Ptr(self.u.ptr()),
            Arg::Ptr(self.w.ptr()),
            Arg::Ptr(self.kv.ptr()),
            Arg::Ptr(self.pos.ptr()),
            int(b),
            int(h),
            int(tq),
            int(tk),
            int(d),
            int(tk),
        ];
        // SAFETY: q and out hold b·tq rows of h·d floats, u and w h·d, kv b·h caches of tk
        // frames of 2d, pos 2·tk − 1 rows of h·d (HostData::new, uploaded by Operands::new):
        // what the kernel reads and writes at these arguments (cap = tk, 0 < tq <= tk by
        // `shape`); `dims` come from the kernel's launch functions (rel_pos_dims /
        // attention_dims); the buffers live as long as the operand set, past the timing's
        // synchronize.
        unsafe { be.launch(&attention::REL_POS, dims, &args) }?;
        Ok(())
    }
}

/// The two launches timed: `(staged, global)` at `--warps` rows per block or the pick of
/// `rel_pos_dims`.
fn launches(warps: Option<usize>, (b, h, tq, tk, d): Shape) -> Res<(LaunchDims, LaunchDims)> {
    let outer = b * h;
    let staged = match warps {
        Some(w) => attention::rel_pos_dims_with(w, outer, tq, tk, d),
        None => attention::rel_pos_dims(outer, tq, tk, d),
    }
    .map_err(dcc_runtime::Error::from)?;
    let w = staged.block.0 as usize / 32;
    let global =
        attention::attention_dims_with(w, outer, tq, tk, d).map_err(dcc_runtime::Error::from)?;
    Ok((staged, global))
}

/// One shape's operand sets on the device (several with `--cold-mib`) and the twin's output of
/// set 0.
struct Bench<'a> {
    be: &'a dyn Backend,
    timing: Timing,
    shape: Shape,
    sets: Vec<Operands>,
    want: Vec<f32>,
}

impl Bench<'_> {
    /// Times the staged and the global launch at `warps` rows per block (`None`: the pick of
    /// `rel_pos_dims`) and checks both outputs against the twin: the table row and whether both
    /// are bit-equal.
    fn row(&self, warps: Option<usize>) -> Res<(Value, bool)> {
        let (b, h, tq, tk, d) = self.shape;
        let (staged, global) = launches(warps, self.shape)?;
        let mut us = [0.0f64; 2];
        let mut bits = [false; 2];
        for (k, dims) in [staged, global].into_iter().enumerate() {
            let n_sets = self.sets.len();
            let ms = time(self.be, self.timing, &|n| {
                self.sets[n % n_sets].launch(self.be, dims, self.shape)
            })?;
            us[k] = ms * 1e3;
            self.sets[0].launch(self.be, dims, self.shape)?;
            self.be.synchronize()?;
            let got: Vec<f32> = self.be.download(self.sets[0].out.ptr(), self.want.len())?;
            bits[k] = got
                .iter()
                .zip(&self.want)
                .all(|(x, y)| x.is_finite() && x.to_bits() == y.to_bits());
        }
        let w = staged.block.0 / 32;
        for (k, name) in ["staged", "global"].into_iter().enumerate() {
            eprintln!(
                "batch {b:>3} tq {tq:>4} tk {tk:>4}  attention.rel_pos {name:<6} ({w} rows/block) {:>9.2} µs/launch{}",
                us[k],
                if bits[k] {
                    ""
                } else {
                    "  NOT equal to the twin"
                }
            );
        }
        let row = json!({
            "batch": b, "heads": h, "tq": tq, "tk": tk, "head_dim": d, "warps": w,
            "staged_shared_bytes": staged.shared_bytes,
            "global_shared_bytes": global.shared_bytes,
            "staged_us": us[0], "global_us": us[1], "speedup": us[1] / us[0],
            "staged_bit_equal_twin": bits[0], "global_bit_equal_twin": bits[1],
        });
        Ok((row, bits[0] && bits[1]))
    }
}

/// Runs `--rel-pos`; returns whether both launches equal the twin everywhere.
pub fn run(a: &AttentionArgs, be: Arc<dyn Backend>) -> Res<bool> {
    be.preload(&[&attention::REL_POS, &dcc_runtime::kernels::synthetic::SPIN])?;
    let timing = Timing {
        reps: a.reps,
        samples: a.samples,
    };
    let (h, d) = (a.heads, a.head_dim);
    let warps: Vec<Option<usize>> = if a.warps.is_empty() {
        vec![None]
    } else {
        a.warps.iter().copied().map(Some).collect()
    };
    let mut rows = Vec::new();
    let mut ok = true;
    for b in a.batches() {
        for &(tq, tk) in &a.rel_pos_shapes {
            let shape = (b, h, tq, tk, d);
            let set_bytes = 4 * (2 * b * tq * h * d + b * h * tk * 2 * d + (2 * tk - 1) * h * d);
            let n_sets = (a.cold_mib << 20).div_ceil(set_bytes).clamp(1, 64);
            let host: Vec<HostData> = (0..n_sets)
                .map(|n| HostData::new(n as u64, shape))
                .collect();
            let bench = Bench {
                be: be.as_ref(),
                timing,
                shape,
                sets: host
                    .iter()
                    .map(|x| Operands::new(&be, x))
                    .collect::<Res<Vec<_>>>()?,
                want: host[0].twin(shape),
            };
            for &w in &warps {
                let (row, equal) = bench.row(w)?;
                rows.push(row);
                ok &= equal;
            }
        }
    }
    let out = json!({
        "bench": "dcc-bench attention --rel-pos",
        "device": be.device_name(),
        "backend": a.backend.name(),
        "reps": a.reps,
        "samples": a.samples,
        "cold_mib": a.cold_mib,
        "rows": rows,
        "ok": ok,
    });
    let mut stdout = std::io::stdout().lock();
    match a.format {
        Format::Json => writeln!(stdout, "{out}"),
        Format::Table => table(&mut stdout, &out),
    }
    .and_then(|()| stdout.flush())
    .map_err(BenchError::Stdout)?;
    Ok(ok)
}

fn table(w: &mut dyn Write, out: &Value) -> std::io::Result<()> {
    writeln!(
        w,
        "dcc-bench attention --rel-pos on {} (median of {} samples of {} launches; staged: \
         position rows in shared memory, global: read from global memory; twin: bit-equal to \
         the host twin)",
        out["device"].as_str().unwrap_or("?"),
        out["samples"],
        out["reps"]
    )?;
    writeln!(
        w,
        "{:>5} {:>5} {:>5} {:>4} {:>5}  {:>10} {:>10} {:>8}  {:>5} {:>5}",
        "batch", "tq", "tk", "d", "rows", "staged µs", "global µs", "speedup", "twin", "twin"
    )?;
    let yes = |v: &Value| {
        if v.as_bool() == Some(true) {
            "yes"
        } else {
            "NO"
        }
    };
    for r in out["rows"].as_array().map_or(&[][..], |v| v.as_slice()) {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let n = |k: &str| r[k].as_u64().unwrap_or(0);
        writeln!(
            w,
            "{:>5} {:>5} {:>5} {:>4} {:>5}  {:>10.2} {:>10.2} {:>7.2}×  {:>5} {:>5}",
            n("batch"),
            n("tq"),
            n("tk"),
            n("head_dim"),
            n("warps"),
            f("staged_us"),
            f("global_us"),
            f("speedup"),
            yes(&r["staged_bit_equal_twin"]),
            yes(&r["global_bit_equal_twin"])
        )?;
    }
    writeln!(
        w,
        "{}",
        if out["ok"] == Value::Bool(true) {
            "ok: both launches equal the host twin bit for bit"
        } else {
            "FAILED: a launch is off the host twin"
        }
    )
}

#[cfg(test)]
mod tests {
    use super::super::super::cli::{Command, parse_from};
    use super::*;

    fn parse(extra: &[&str]) -> Result<AttentionArgs, clap::Error> {
        let base = ["dcc-bench", "attention", "--backend", "host", "--rel-pos"];
        match parse_from(base.iter().chain(extra))? {
            Command::Attention(a) => Ok(a),
            other => panic!("parsed as {other:?}"),
        }
    }

    /// On the Host both launches run the twin: the run passes at small shapes (a generic head
    /// dimension, forced rows per block); the defaults are the encoder's shapes for one and
    /// sixteen sessions, and the flags are range-checked.
    #[test]
    fn host_rel_pos_run_passes_and_flags_are_checked() {
        let a = parse(&[
            "--batch",
            "1,3",
            "--rel-pos-shapes",
            "5x37, 9x9",
            "--head-dim",
            "13",
            "--heads",
            "2",
            "--warps",
            "2,1",
            "--reps",
            "1",
            "--samples",
            "1",
        ])
        .unwrap();
        assert_eq!(a.rel_pos_shapes, vec![(5, 37), (9, 9)]);
        assert!(run(&a, dcc_runtime::backend::host()).unwrap());
        let d = parse(&[]).unwrap();
        assert!(d.rel_pos);
        assert_eq!(
            (d.batches(), d.rel_pos_shapes, d.warps, d.heads, d.head_dim),
            (vec![1, 16], vec![(25, 226), (50, 452)], vec![], 8, 64)
        );
        for bad in [
            &["--rel-pos-shapes", "10x5"][..],
            &["--rel-pos-shapes", "0x5"],
            &["--rel-pos-shapes", "5"],
            &["--rel-pos-shapes", "5x5000"],
            &["--warps", "0"],
            &["--warps", "9"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    /// Both launches share rows per block and grid; only the staged one holds the position rows.
    #[test]
    fn launches_differ_only_in_shared_memory() {
        for warps in [None, Some(1), Some(8)] {
            let (s, g) = launches(warps, (16, 8, 50, 452, 64)).unwrap();
            assert_eq!((s.grid, s.block), (g.grid, g.block));
            let w = s.block.0 as usize / 32;
            assert_eq!(
                s.shared_bytes as usize,
                attention::rel_pos_staged_bytes(w, 452, 64)
            );
            assert_eq!(
                g.shared_bytes as usize,
                attention::attention_shared_bytes(w, 452, 64)
            );
        }
    }
}
