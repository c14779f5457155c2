//! The carry (paper eq. 2): retention written back in place at one fixed address, plus the
//! shadow auditor that checks it against the stock concatenation at every application.
//!
//! A cache is `outer` rows (e.g. layers × 2 × heads) of frames of `inner` 32-bit words; the frame
//! axis is the inner-but-one axis, as in `(layers, 2, heads, frames, 128)`. When the live extent
//! ℓ exceeds `L = head + tail`, retention keeps `H[·, 0:head] ‖ H[·, ℓ−tail:ℓ]`, with `(head,
//! tail)` the contract's [`Keep`] on the region's storage order:
//!
//! * prepend order, paper rule: `head = retained, tail = prompt` (newest first, prompt tail);
//! * prepend order, vendor slicing (minicpmo-utils 1.0.7) and append order:
//!   `head = prompt, tail = retained`.
//!
//! One kernel, `carry.retain`, takes the pair as it is declared.
//!
//! **In-place choice.** The carry region *is* the live region (one envelope of `capacity`
//! frames per row; the model writes new frames into its spare capacity). The head of the kept
//! frames is already in place; the tail window moves left by `ℓ − L` frames inside the same row.
//! The kernel moves it in passes of `ℓ − L` frames (one block per row, a barrier between passes),
//! so every pass reads frames no pass has written yet: no temporary, no second buffer, and the
//! address never changes. A separate carry region (`Carry::separate`) is also supported and
//! copies both parts in one pass each. Turn reset copies the saved base state into the same
//! bytes.
//!
//! One function launches `carry.retain` and `carry.retain_layers`: [`write_back_layered_rows`]
//! (one block of rows: [`write_back_rows`]), which validates the geometry and checks every range
//! the kernel will touch against the backend's live buffers before launching, so both backends
//! refuse a bad write-back alike, with a typed error. [`Carry`] calls `write_back_rows` with its
//! regions' addresses; the model calls [`write_back`] (re-exported as `ops::carry::write_back`)
//! and, for one session's rows of a batched workspace, [`write_back_layers`] (every layer in one
//! launch), which check their [`crate::ops::Tensor`] views and go through it.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;

use dcc_kernels::carry::Retention;

use crate::DevPtr;
use crate::backend::{AllocKind, Backend, DeviceBuffer};
use crate::contract::Keep;
use crate::error::{Error, Result};
use crate::ops::Ctx;

mod write_back;

pub use write_back::{
    Layers, Staged, kept, write_back, write_back_layered_rows, write_back_layers,
    write_back_layers_staged, write_back_rows, write_back_staged,
};

/// Geometry and policy of one carried cache.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CarrySpec {
    /// The kept slices, `H[·, 0:head] ‖ H[·, ℓ−tail:ℓ]` on the storage order (with the declared
    /// prompt and retained frames).
    pub keep: Keep,
    /// Rows (product of the axes outside the frame axis).
    pub outer: usize,
    /// 32-bit words per frame (product of the axes inside the frame axis × dtype bytes / 4).
    pub inner: usize,
    /// Envelope frames per row of the live region (`ℓ` never exceeds it).
    pub capacity: usize,
}

impl CarrySpec {
    /// `L = head + tail`.
    pub fn bound(&self) -> usize {
        self.keep.head + self.keep.tail
    }

    /// The geometry of a retention at extent `extent` under this declaration (`None` while
    /// `extent ≤ L`).
    pub fn retention(&self, extent: usize) -> Option<Retention> {
        Retention::new(self.keep.head, self.keep.tail, extent)
    }

    /// Bytes of the live region (`outer × capacity × inner` words).
    pub fn live_bytes(&self) -> usize {
        self.outer * self.capacity * self.inner * 4
    }

    /// Bytes of a separate carry region (`outer × L × inner` words).
    pub fn carry_bytes(&self) -> usize {
        self.outer * self.bound() * self.inner * 4
    }
}

/// The stock path: a fresh tensor holding the declared concatenation of `h` (rows of
/// `row_stride` words, extent `extent`), as `torch.cat` would produce it.
pub fn stock_concat(
    spec: &CarrySpec,
    h: &[u32],
    row_stride: usize,
    extent: usize,
) -> Option<Vec<u32>> {
    let r = spec.retention(extent)?;
    let inner = spec.inner;
    let mut out = Vec::with_capacity(spec.outer * r.kept() * inner);
    for row in 0..spec.outer {
        let base = row * row_stride;
        out.extend_from_slice(h.get(base..base + r.head * inner)?);
        out.extend_from_slice(
            h.get(base + r.tail_src * inner..base + (r.tail_src + r.tail_len) * inner)?,
        );
    }
    Some(out)
}

/// First elementwise disagreement found by the auditor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// 1-based retention application.
    pub application: u64,
    /// Chunk index the caller passed to `retain`.
    pub chunk: u64,
    pub row: usize,
    pub frame: usize,
    pub word: usize,
    pub expected: u32,
    pub got: u32,
}

/// What the shadow auditor saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditReport {
    /// Retentions applied while auditing.
    pub applications: u64,
    /// Of those, how many matched the stock concatenation in every element.
    pub agreements: u64,
    /// Distinct carry addresses seen (1 when the carry never moved).
    pub addresses: BTreeSet<u64>,
    /// Turn resets seen.
    pub turn_resets: u64,
    pub first_divergence: Option<Divergence>,
}

impl std::fmt::Display for AuditReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "carry audit: {}/{} retentions agree, {} distinct address(es), {} turn reset(s)",
            self.agreements,
            self.applications,
            self.addresses.len(),
            self.turn_resets
        )?;
        if let Some(d) = &self.first_divergence {
            write!(
                f,
                "; first divergence at application {} (chunk {}), row {}, frame {}, word {}: expected {:#010x}, got {:#010x}",
                d.application, d.chunk, d.row, d.frame, d.word, d.expected, d.got
            )?;
        }
        Ok(())
    }
}

/// A carried cache at a fixed address, over buffers it borrows for its life (so they cannot be
/// freed under it). Every retention goes through [`write_back_rows`], which checks it first.
pub struct Carry<'a> {
    backend: Arc<dyn Backend>,
    spec: CarrySpec,
    live: DevPtr,
    carry: DevPtr,
    /// Frames per row of the carry region (`capacity` in place, `L` separate).
    carry_row_frames: usize,
    /// The (head, tail) the kernel is launched with: the declaration's, unless replaced by
    /// [`Carry::with_launch_keep`].
    launch_keep: Keep,
    extent: usize,
    base: Option<(DeviceBuffer, usize)>,
    audit: Option<AuditReport>,
    retentions: u64,
    _regions: PhantomData<&'a DeviceBuffer>,
}

impl<'a> Carry<'a> {
    /// The carry is the live region itself (`outer` rows of `capacity` frames at the start of
    /// `region`, which must hold [`CarrySpec::live_bytes`]; checked).
    pub fn in_place(
        backend: Arc<dyn Backend>,
        spec: CarrySpec,
        region: &'a DeviceBuffer,
    ) -> Result<Carry<'a>> {
        Self::check(&spec)?;
        region.check_elems::<u32>(backend.kind(), 0, spec.live_bytes() / 4)?;
        Ok(Carry {
            backend,
            carry_row_frames: spec.capacity,
            launch_keep: spec.keep,
            spec,
            live: region.ptr(),
            carry: region.ptr(),
            extent: 0,
            base: None,
            audit: None,
            retentions: 0,
            _regions: PhantomData,
        })
    }

    /// A separate carry region of `outer` rows of `L` frames at the start of `carry` (which must
    /// hold [`CarrySpec::carry_bytes`]), fed from the start of `live` (which must hold
    /// [`CarrySpec::live_bytes`]); both checked, and they must not overlap.
    pub fn separate(
        backend: Arc<dyn Backend>,
        spec: CarrySpec,
        live: &'a DeviceBuffer,
        carry: &'a DeviceBuffer,
    ) -> Result<Carry<'a>> {
        Self::check(&spec)?;
        live.check_elems::<u32>(backend.kind(), 0, spec.live_bytes() / 4)?;
        carry.check_elems::<u32>(backend.kind(), 0, spec.carry_bytes() / 4)?;
        let (live, carry) = (live.ptr(), carry.ptr());
        let (lb, cb) = (spec.live_bytes() as u64, spec.carry_bytes() as u64);
        // Saturating: a range reaching past the address space overlaps everything after it.
        if live.0 < carry.0.saturating_add(cb) && carry.0 < live.0.saturating_add(lb) {
            return Err(Error::Carry(
                "a separate carry region must not overlap the live region".into(),
            ));
        }
        Ok(Carry {
            backend,
            carry_row_frames: spec.bound(),
            launch_keep: spec.keep,
            spec,
            live,
            carry,
            extent: 0,
            base: None,
            audit: None,
            retentions: 0,
            _regions: PhantomData,
        })
    }

    fn check(spec: &CarrySpec) -> Result<()> {
        if spec.bound() == 0 || spec.outer == 0 || spec.inner == 0 {
            return Err(Error::Carry(format!("degenerate carry {spec:?}")));
        }
        // Every size the carry derives (`live_bytes`, and the i64 kernel arguments) must be
        // representable; `capacity > L` below then bounds `carry_bytes` too.
        let live = [spec.outer, spec.capacity, spec.inner, 4]
            .into_iter()
            .try_fold(1usize, usize::checked_mul)
            .filter(|&b| i64::try_from(b).is_ok());
        if live.is_none() || spec.keep.head.checked_add(spec.keep.tail).is_none() {
            return Err(Error::Carry(format!("carry {spec:?} overflows its sizes")));
        }
        if spec.capacity <= spec.bound() {
            return Err(Error::Carry(format!(
                "capacity {} must exceed L = {}",
                spec.capacity,
                spec.bound()
            )));
        }
        Ok(())
    }

    /// Launches the kernel with another (head, tail) than the declaration's, e.g. the append
    /// rule on prepend storage, to reproduce a storage-order mix-up; the auditor still checks
    /// against the declaration. The kept frames `head + tail` must equal the declared `L`
    /// (checked at [`Carry::retain`]), so the launch stays inside the regions.
    pub fn with_launch_keep(mut self, keep: Keep) -> Carry<'a> {
        self.launch_keep = keep;
        self
    }

    /// Turns the shadow auditor on.
    pub fn with_audit(mut self) -> Carry<'a> {
        self.audit = Some(AuditReport::default());
        self
    }

    pub fn spec(&self) -> &CarrySpec {
        &self.spec
    }

    /// Address of the carry (constant).
    pub fn ptr(&self) -> DevPtr {
        self.carry
    }

    /// Address of the live region the model writes frames into.
    pub fn live_ptr(&self) -> DevPtr {
        self.live
    }

    /// Current attended extent ℓ.
    pub fn extent(&self) -> usize {
        self.extent
    }

    /// Declares that the live region now holds `extent` frames per row.
    pub fn set_extent(&mut self, extent: usize) -> Result<()> {
        if extent > self.spec.capacity {
            return Err(Error::Carry(format!(
                "extent {extent} exceeds the envelope of {}",
                self.spec.capacity
            )));
        }
        self.extent = extent;
        Ok(())
    }

    pub fn retentions(&self) -> u64 {
        self.retentions
    }

    pub fn audit(&self) -> Option<&AuditReport> {
        self.audit.as_ref()
    }

    /// Saves the current carry contents (the whole carry region, so `extent` frames per row)
    /// as the turn's base state. The base buffer is allocated on the first save and reused.
    pub fn save_base(&mut self) -> Result<()> {
        let bytes = self.spec.outer * self.carry_row_frames * self.spec.inner * 4;
        let buf = match self.base.take() {
            Some((buf, _)) => buf,
            None => self.backend.alloc(bytes, AllocKind::Session)?,
        };
        let copied = self.backend.dtod(buf.ptr(), self.carry, bytes);
        // A failed copy leaves no base (a reset would restore garbage).
        copied?;
        self.base = Some((buf, self.extent));
        Ok(())
    }

    /// Turn reset: writes the base state back into the same bytes (the address does not move).
    pub fn reset_turn(&mut self) -> Result<()> {
        let (buf, ext) = self
            .base
            .as_ref()
            .ok_or_else(|| Error::Carry("reset_turn before save_base".into()))?;
        self.backend.dtod(self.carry, buf.ptr(), buf.bytes())?;
        self.extent = *ext;
        if let Some(a) = self.audit.as_mut() {
            a.turn_resets += 1;
            a.addresses.insert(self.carry.0);
        }
        Ok(())
    }

    /// Applies retention if ℓ > L (returns whether it did), through [`write_back_rows`]. `chunk`
    /// labels the application in the audit report. With ℓ ≤ L nothing is written (a separate
    /// carry region is then not refreshed from the live region).
    pub fn retain(&mut self, chunk: u64) -> Result<bool> {
        let spec = self.spec;
        let extent = self.extent;
        let Some(declared) = spec.retention(extent) else {
            return Ok(false);
        };
        if self.launch_keep.bound() != spec.bound() {
            return Err(Error::Carry(format!(
                "launch keep {:?} does not keep the declared L = {} frames",
                self.launch_keep,
                spec.bound()
            )));
        }
        let live_rs = spec.capacity * spec.inner;
        let expected = match &self.audit {
            Some(_) => {
                let h: Vec<u32> = self.backend.download(self.live, spec.outer * live_rs)?;
                stock_concat(&spec, &h, live_rs, extent)
            }
            None => None,
        };
        let kept_frames = write_back_rows(
            &Ctx::new(&*self.backend, None),
            self.carry,
            self.carry_row_frames,
            self.live,
            spec.capacity,
            spec.outer,
            spec.inner,
            self.launch_keep,
            extent,
        )?;
        // The launch keeps `launch_keep.bound() = L` frames, as the declaration does.
        self.extent = kept_frames;
        self.retentions += 1;
        if let (Some(want), Some(report)) = (expected, self.audit.as_mut()) {
            let crs = self.carry_row_frames * spec.inner;
            let got: Vec<u32> = self.backend.download(self.carry, spec.outer * crs)?;
            report.applications += 1;
            report.addresses.insert(self.carry.0);
            let kept = declared.kept() * spec.inner;
            let mut first = None;
            'rows: for row in 0..spec.outer {
                let g = &got[row * crs..row * crs + kept];
                let w = &want[row * kept..(row + 1) * kept];
                if let Some(i) = g.iter().zip(w).position(|(a, b)| a != b) {
                    first = Some(Divergence {
                        application: report.applications,
                        chunk,
                        row,
                        frame: i / spec.inner,
                        word: i % spec.inner,
                        expected: w[i],
                        got: g[i],
                    });
                    break 'rows;
                }
            }
            match first {
                None => report.agreements += 1,
                Some(d) => {
                    if report.first_divergence.is_none() {
                        report.first_divergence = Some(d);
                    }
                }
            }
        }
        Ok(true)
    }
}
