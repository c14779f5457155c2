//! Opt-in eager op profiles: a stream marker before every op, summed per category.

use std::sync::Mutex;

use crate::backend::{Backend, Marker};
use crate::error::Result;

/// One row of [`Profiler::end`]: an op category (kernel name, `gemm`, `gemv (rows = 1)`,
/// `memset`), its launches and the device milliseconds between each launch's marker and the
/// next.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    pub category: &'static str,
    pub launches: usize,
    pub ms: f64,
}

/// Records `(category, marker)` before every op queued outside a capture while a profile is
/// open ([`Profiler::begin`]..[`Profiler::end`]). Closed, it records nothing.
#[derive(Default)]
pub struct Profiler {
    marks: Mutex<Option<Vec<(&'static str, Marker)>>>,
}

impl Profiler {
    pub fn new() -> Profiler {
        Profiler::default()
    }

    /// Opens a profile (drops an open one). Queue the profiled work behind a long kernel so that
    /// the gaps between markers are device time, not host launch time.
    pub fn begin(&self) {
        *self.marks.lock().unwrap_or_else(|p| p.into_inner()) = Some(Vec::new());
    }

    /// Records a marker for `category` on `be`'s stream when a profile is open and `be` is not
    /// capturing (a marker is not stream work a graph may hold).
    pub fn mark(&self, be: &dyn Backend, category: &'static str) -> Result<()> {
        let mut g = self.marks.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = g.as_mut()
            && !be.is_capturing()
        {
            v.push((category, be.marker()?));
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
        for (i, (cat, m)) in marks.iter().enumerate() {
            let next = marks.get(i + 1).map_or(&end, |x| &x.1);
            let ms = be.elapsed_ms(m, next)?;
            match rows.iter_mut().find(|r| r.category == *cat) {
                Some(r) => {
                    r.launches += 1;
                    r.ms += ms;
                }
                None => rows.push(ProfileRow {
                    category: cat,
                    launches: 1,
                    ms,
                }),
            }
        }
        rows.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        Ok(rows)
    }
}
