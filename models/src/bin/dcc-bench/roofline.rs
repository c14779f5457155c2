//! The profile as a roofline: per op category, what its ops declared (floating-point
//! operations, bytes of device memory; `dcc_runtime::ops::Work`), what that achieved in the
//! measured device time, and how close it came to the device's limit for it.

use dcc_runtime::ops::ProfileRow;

/// A device's limits: FP32 on CUDA cores (no tensor cores) and memory bandwidth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    pub tflops: f64,
    pub gbps: f64,
}

/// The vendor's datasheet figures for the devices the bench is run on, by name as the driver
/// reports it (NVIDIA H100 SXM5 and H200 SXM: 67 TFLOP/s FP32, 3.35 / 4.8 TB/s; H100 PCIe:
/// 51 TFLOP/s, 2.0 TB/s; A100 SXM4: 19.5 TFLOP/s, 2.04 TB/s (80 GB) / 1.56 TB/s (40 GB)).
/// `None` for any other device: the table then shows achieved rates only.
pub fn peak(device: &str) -> Option<Peak> {
    let p = |tflops, gbps| Some(Peak { tflops, gbps });
    if device.contains("H200") {
        p(67.0, 4800.0)
    } else if device.contains("H100") && device.contains("PCIe") {
        p(51.0, 2000.0)
    } else if device.contains("H100") {
        p(67.0, 3350.0)
    } else if device.contains("A100") && device.contains("80GB") {
        p(19.5, 2039.0)
    } else if device.contains("A100") {
        p(19.5, 1555.0)
    } else {
        None
    }
}

/// The resource that bounds a row, and the share of the device's limit achieved on it: the time
/// the declared work needs at the peak rates (the larger of compute and memory time) over the
/// measured time.
pub fn bound(r: &ProfileRow, p: Peak) -> (&'static str, f64) {
    let compute_ms = r.flops / (p.tflops * 1e9);
    let memory_ms = r.bytes / (p.gbps * 1e6);
    let (what, ideal) = if compute_ms >= memory_ms {
        ("fp32", compute_ms)
    } else {
        ("memory", memory_ms)
    };
    (
        what,
        if r.ms > 0.0 {
            100.0 * ideal / r.ms
        } else {
            0.0
        },
    )
}

/// The profile table (stderr lines), largest share first: launches, µs, share of the chunk,
/// declared GFLOP and MB, achieved TFLOP/s and GB/s, and with a known device its bound and the
/// percentage of that limit achieved.
pub fn table(rows: &[ProfileRow], device: &str) -> Vec<String> {
    let total: f64 = rows.iter().map(|r| r.ms).sum();
    let pk = peak(device);
    let mut out = vec![format!(
        "{:<36} {:>8} {:>10} {:>9} {:>7} {:>9} {:>9} {:>8} {:>8} {:>7} {:>7}",
        "category",
        "launches",
        "total µs",
        "µs/launch",
        "share",
        "GFLOP",
        "MB",
        "TFLOP/s",
        "GB/s",
        "bound",
        "% peak"
    )];
    for r in rows {
        let (what, pct) = match pk {
            Some(p) => {
                let (w, pct) = bound(r, p);
                (w, format!("{pct:.1}%"))
            }
            None => ("-", "-".into()),
        };
        out.push(format!(
            "{:<36} {:>8} {:>10.1} {:>9.2} {:>6.1}% {:>9.3} {:>9.2} {:>8.2} {:>8.1} {:>7} {:>7}",
            r.category,
            r.launches,
            r.ms * 1e3,
            r.ms * 1e3 / r.launches as f64,
            100.0 * r.ms / total,
            r.flops / 1e9,
            r.bytes / 1e6,
            r.tflops(),
            r.gbps(),
            what,
            pct
        ));
    }
    let flops: f64 = rows.iter().map(|r| r.flops).sum();
    let bytes: f64 = rows.iter().map(|r| r.bytes).sum();
    out.push(format!(
        "{:<36} {:>8} {:>10.1} {:>9} {:>7} {:>9.3} {:>9.2} {:>8.2} {:>8.1}",
        "total",
        rows.iter().map(|r| r.launches).sum::<usize>(),
        total * 1e3,
        "",
        "",
        flops / 1e9,
        bytes / 1e6,
        if total > 0.0 {
            flops / (total * 1e9)
        } else {
            0.0
        },
        if total > 0.0 {
            bytes / (total * 1e6)
        } else {
            0.0
        },
    ));
    match pk {
        Some(p) => out.push(format!(
            "peak of {device}: {} TFLOP/s FP32 (CUDA cores), {} GB/s (datasheet); % peak = the declared work's time at those rates over the measured time",
            p.tflops, p.gbps
        )),
        None => out.push(format!("no peak figures for {device}: achieved rates only")),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ms: f64, flops: f64, bytes: f64) -> ProfileRow {
        ProfileRow {
            category: "x",
            launches: 2,
            ms,
            flops,
            bytes,
        }
    }

    #[test]
    fn bound_picks_the_slower_resource() {
        let p = peak("NVIDIA H100 80GB HBM3").unwrap();
        // 67 GFLOP in 2 ms: 1 ms ideal at 67 TFLOP/s → 50 %, compute-bound
        assert_eq!(bound(&row(2.0, 67e9, 1e6), p), ("fp32", 50.0));
        // 3.35 GB in 4 ms: 1 ms ideal at 3,350 GB/s → 25 %, memory-bound
        let (w, pct) = bound(&row(4.0, 1e6, 3.35e9), p);
        assert_eq!(w, "memory");
        assert!((pct - 25.0).abs() < 1e-9);
        assert_eq!(peak("NVIDIA H200").unwrap().gbps, 4800.0);
        assert_eq!(peak("host"), None);
    }

    #[test]
    fn table_has_a_row_per_category_a_total_and_the_peak_line() {
        let t = table(&[row(1.0, 1e9, 1e6)], "NVIDIA H100 80GB HBM3");
        assert_eq!(t.len(), 4);
        assert!(t[1].starts_with("x "));
        assert!(t[1].contains("1.00"), "{}", t[1]); // 1 GFLOP in 1 ms = 1 TFLOP/s
        assert!(t[2].starts_with("total"));
        assert!(t[3].contains("67 TFLOP/s"));
        assert!(
            table(&[], "host")
                .last()
                .unwrap()
                .contains("achieved rates only")
        );
    }
}
