//! Opt-in eager op profiles: a stream marker before every op, summed per category.

use std::sync::Mutex;

use crate::backend::{Backend, Marker};
use crate::error::Result;

/// What one op must do at least, for the roofline: floating-point operations (a multiply-add
/// counts 2; comparisons, exponentials and copies count 0) and bytes of device memory (each
/// operand element read once, each output element written once; caches and re-reads not
/// counted). Ops declare it before they launch ([`crate::ops::Ctx`]); the profile sums it per
/// category.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    pub flops: f64,
    pub bytes: f64,
}

impl Work {
    /// `flops` floating-point operations over `elems` 4-byte elements of traffic.
    pub fn f32(flops: usize, elems: usize) -> Work {
        Work {
            flops: flops as f64,
            bytes: 4.0 * elems as f64,
        }
    }
}

/// One row of [`Profiler::end`]: an op category (kernel name, `gemm`, `gemv (rows = 1)`,
/// `memset`), its launches, the device milliseconds between each launch's marker and the
/// next, and the [`Work`] its ops declared.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    pub category: &'static str,
    pub launches: usize,
    pub ms: f64,
    pub flops: f64,
    pub bytes: f64,
}

impl ProfileRow {
    /// Achieved TFLOP/s (0 for an op that declares no arithmetic).
    pub fn tflops(&self) -> f64 {
        if self.ms > 0.0 {
            self.flops / (self.ms * 1e9)
        } else {
            0.0
        }
    }
    /// Achieved GB/s of declared traffic.
    pub fn gbps(&self) -> f64 {
        if self.ms > 0.0 {
            self.bytes / (self.ms * 1e6)
        } else {
            0.0
        }
    }
}

/// One marked op: its category, the marker before it, the work it declared.
type Mark = (&'static str, Marker, Work);

/// Records `(category, marker)` before every op queued outside a capture while a profile is
/// open ([`Profiler::begin`]..[`Profiler::end`]). Closed, it records nothing.
#[derive(Default)]
pub struct Profiler {
    marks: Mutex<Option<Vec<Mark>>>,
    /// The work the next marked op declared ([`Profiler::declare`]).
    pending: Mutex<Work>,
}

impl Profiler {
    pub fn new() -> Profiler {
        Profiler::default()
    }

    /// Opens a profile (drops an open one). Queue the profiled work behind a long kernel so that
    /// the gaps between markers are device time, not host launch time.
    pub fn begin(&self) {
        *self.marks.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = Work::default();
    }

    /// Declares the [`Work`] of the op about to be marked (the next [`Profiler::mark`] takes
    /// it).
    pub fn declare(&self, w: Work) {
        *self.pending.lock().unwrap_or_else(|p| p.into_inner()) = w;
    }

    /// Records a marker for `category` on `be`'s stream when a profile is open and `be` is not
    /// capturing (a marker is not stream work a graph may hold).
    pub fn mark(&self, be: &dyn Backend, category: &'static str) -> Result<()> {
        let w = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        let mut g = self.marks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = g.as_mut()
            && !be.is_capturing()
        {
            v.push((category, be.marker()?, w));
        }
        Ok(())
    }

    /// Closes the profile: device ms from each op's marker to the next (the last op's to a
    /// marker recorded now), summed per category, largest first. Waits for the stream.
    pub fn end(&self, be: &dyn Backend) -> Result<Vec<ProfileRow>> {
        let marks = self
            .marks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_default();
        let end = be.marker()?;
        let mut rows: Vec<ProfileRow> = Vec::new();
        for (i, (cat, m, w)) in marks.iter().enumerate() {
            let next = marks.get(i + 1).map_or(&end, |x| &x.1);
            let ms = be.elapsed_ms(m, next)?;
            match rows.iter_mut().find(|r| r.category == *cat) {
                Some(r) => {
                    r.launches += 1;
                    r.ms += ms;
                    r.flops += w.flops;
                    r.bytes += w.bytes;
                }
                None => rows.push(ProfileRow {
                    category: cat,
                    launches: 1,
                    ms,
                    flops: w.flops,
                    bytes: w.bytes,
                }),
            }
        }
        rows.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        Ok(rows)
    }
}
