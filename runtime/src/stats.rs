//! Summary statistics of benchmark samples: one definition for every binary that reports them.
//!
//! # Percentiles
//!
//! [`percentile`] is **linear interpolation between closest ranks** (Hyndman and Fan's type 7,
//! the default of NumPy's `percentile`, R's `quantile` and spreadsheets' `PERCENTILE.INC`). For
//! samples sorted ascending, `x[0] ≤ … ≤ x[n−1]`, and `q ∈ [0, 1]`:
//!
//! ```text
//! h = (n − 1)·q,   i = ⌊h⌋,   p(q) = x[i] + (h − i)·(x[i+1] − x[i])     (p(1) = x[n−1])
//! ```
//!
//! Why this one rather than nearest rank: the benches summarize few samples (3 device-busy
//! repetitions, 24 chunks), where a nearest-rank percentile jumps by a whole gap between two
//! samples as `n` or `q` changes and picks one side of the two middle samples for an even-sized
//! median. Interpolation is continuous in `q`, its median of an even count is the mean of the two
//! middle samples (what Python's `statistics.median` reports, and so what the vendor's PyTorch
//! peer prints as its p50), and it is the convention a reader reproduces with NumPy.
//!
//! How the numbers printed before this module relate (`⌊·⌋`, `round` on `h = (n − 1)·q`):
//!
//! * `dcc-bench` p50/p95 were `x[⌊h⌋]`: the new value is the same when `h` is an integer and
//!   otherwise higher by `(h − ⌊h⌋)` of the gap to the next sample. Default 24 chunks: p50 was
//!   `x[11]`, now `(x[11] + x[12]) / 2`; p95 was `x[21]`, now `x[21] + 0.85·(x[22] − x[21])`.
//! * `dcc-bench` device-busy median was `x[n/2]`: the same for odd `n` (the default 3
//!   repetitions), the mean of the two middle samples for even `n`.
//! * `dcc-replay-bench` used `x[round(h)]`: the same when `h` is an integer (p50 of the default
//!   49 timed chunks), otherwise within one gap. Its p95 over 49 chunks (`h = 45.6`) was `x[46]`
//!   and is now `x[45] + 0.6·(x[46] − x[45])`; its device-busy median over the default 10
//!   repetitions was `x[5]` and is now `(x[4] + x[5]) / 2`.
//!
//! # NaN
//!
//! A NaN sample is never dropped: [`percentile`] refuses it ([`StatsError::NaN`], naming the
//! sample), because a timing that is not a number means the measurement is broken, and sorting
//! it anywhere would silently shift every rank; [`max`] returns NaN when any sample is NaN
//! (unlike `fold(0.0, f64::max)`, which discards it), because for an error metric "not a
//! number" is the answer to report.

/// Why a statistic has no value.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// The sample set is empty: no statistic of it exists.
    #[error("no samples")]
    Empty,
    /// Sample `index` is NaN.
    #[error("sample {index} is NaN")]
    NaN { index: usize },
    /// The requested quantile is NaN or outside `[0, 1]`.
    #[error("quantile {0} is not in [0, 1]")]
    Quantile(f64),
}

/// The `q`-quantile of `samples` (any order) by linear interpolation between closest ranks
/// (module docs). Infinite samples are allowed; the result is NaN only when it interpolates
/// between −∞ and +∞.
pub fn percentile(samples: &[f64], q: f64) -> Result<f64, StatsError> {
    if !(0.0..=1.0).contains(&q) {
        return Err(StatsError::Quantile(q));
    }
    if samples.is_empty() {
        return Err(StatsError::Empty);
    }
    if let Some(index) = samples.iter().position(|x| x.is_nan()) {
        return Err(StatsError::NaN { index });
    }
    let mut x = samples.to_vec();
    x.sort_by(f64::total_cmp);
    let h = (x.len() - 1) as f64 * q;
    let i = h.floor() as usize;
    let t = h - i as f64;
    if t == 0.0 || i + 1 == x.len() {
        return Ok(x[i]);
    }
    Ok(lerp(x[i], x[i + 1], t))
}

/// `a + t·(b − a)` for `a ≤ b`, `0 < t < 1`, exact at both ends and never outside `[a, b]`
/// (NumPy's form: from the nearer end, so rounding cannot step past it). An infinite end
/// dominates; between −∞ and +∞ there is no value (NaN).
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    if a == b {
        return a;
    }
    match (a.is_infinite(), b.is_infinite()) {
        (true, true) => return f64::NAN,
        (true, false) => return a,
        (false, true) => return b,
        (false, false) => {}
    }
    let d = b - a;
    let v = if t < 0.5 {
        a + d * t
    } else {
        b - d * (1.0 - t)
    };
    v.clamp(a, b)
}

/// The median: [`percentile`] at `q = 0.5` (for an even count, the mean of the two middle
/// samples).
pub fn median(samples: &[f64]) -> Result<f64, StatsError> {
    percentile(samples, 0.5)
}

/// The largest sample; NaN if any sample is NaN; `None` for no samples.
pub fn max(samples: impl IntoIterator<Item = f64>) -> Option<f64> {
    samples.into_iter().fold(None, |m, x| match m {
        None => Some(x),
        Some(m) if m.is_nan() || x.is_nan() => Some(f64::NAN),
        Some(m) => Some(m.max(x)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_input_has_no_statistic() {
        assert_eq!(percentile(&[], 0.5), Err(StatsError::Empty));
        assert_eq!(median(&[]), Err(StatsError::Empty));
        assert_eq!(max([]), None);
    }

    #[test]
    fn nan_is_never_dropped() {
        assert_eq!(
            percentile(&[1.0, f64::NAN, 3.0], 0.5),
            Err(StatsError::NaN { index: 1 })
        );
        // Even where the NaN would sort outside the interpolated ranks.
        assert_eq!(
            percentile(&[1.0, 2.0, 3.0, 4.0, f64::NAN], 0.0),
            Err(StatsError::NaN { index: 4 })
        );
        assert_eq!(median(&[f64::NAN]), Err(StatsError::NaN { index: 0 }));
        for v in [
            vec![f64::NAN, 1.0],
            vec![1.0, f64::NAN],
            vec![0.0, f64::NAN, 5.0],
        ] {
            assert!(max(v.iter().copied()).unwrap().is_nan(), "{v:?}");
        }
        // The reduction this replaces loses it.
        assert_eq!([1.0, f64::NAN].into_iter().fold(0.0, f64::max), 1.0);
    }

    #[test]
    fn quantile_outside_the_unit_interval_is_refused() {
        for q in [-0.1, 1.000_001, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                percentile(&[1.0], q),
                Err(StatsError::Quantile(_))
            ));
        }
    }

    #[test]
    fn linear_interpolation_between_closest_ranks() {
        // NumPy: np.percentile([15, 20, 35, 40, 50], [0, 5, 30, 40, 50, 95, 100]).
        let x = [50.0, 15.0, 40.0, 20.0, 35.0];
        let want = [
            (0.0, 15.0),
            (0.05, 16.0),
            (0.3, 23.0),
            (0.4, 29.0),
            (0.5, 35.0),
            (0.95, 48.0),
            (1.0, 50.0),
        ];
        for (q, p) in want {
            let got = percentile(&x, q).unwrap();
            assert!((got - p).abs() < 1e-12, "q {q}: {got} vs {p}");
        }
        // Even count: the median is the mean of the two middle samples.
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Ok(2.5));
        assert_eq!(median(&[7.0]), Ok(7.0));
        // 24 samples 0..24 (the default chunk count): p95 is 21 + 0.85.
        let v: Vec<f64> = (0..24).map(f64::from).collect();
        assert!((percentile(&v, 0.95).unwrap() - 21.85).abs() < 1e-12);
        assert_eq!(median(&v), Ok(11.5));
    }

    #[test]
    fn interpolation_stays_between_neighbours() {
        let (a, b) = (0.1f64, 0.1f64 + 3.0 * f64::EPSILON);
        for k in 1..100 {
            let q = k as f64 / 100.0;
            let p = percentile(&[a, b], q).unwrap();
            assert!(a <= p && p <= b, "q {q}: {p}");
        }
        let inf = f64::INFINITY;
        assert_eq!(percentile(&[inf, inf], 0.5), Ok(inf));
        assert_eq!(percentile(&[1.0, inf], 0.5), Ok(inf));
        assert_eq!(percentile(&[1.0, inf], 0.0), Ok(1.0));
        assert_eq!(percentile(&[-inf, 1.0], 0.5), Ok(-inf));
        assert!(percentile(&[-inf, inf], 0.5).unwrap().is_nan());
        assert_eq!(max([1.0, inf, 2.0]), Some(inf));
        assert_eq!(max([-3.0, -1.0, -2.0]), Some(-1.0));
    }
}
