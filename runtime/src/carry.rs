//! The carry (paper eq. 2): retention written back in place at one fixed address, plus the
//! shadow auditor that checks it against the stock concatenation at every application.
//!
//! A cache is `outer` rows (e.g. layers × 2 × heads) of frames of `inner` 32-bit words; the frame
//! axis is the inner-but-one axis, as in `(layers, 2, heads, frames, 128)`. When the live extent
//! ℓ exceeds `L = f_prompt + f_retained`, retention keeps
//!
//! * prepend order, paper slicing: `H[·, 0:f_ret] ‖ H[·, ℓ−f_prompt:ℓ]` (newest first, prompt
//!   tail) — kernel `carry.prepend`;
//! * prepend order, vendor slicing (minicpmo-utils 1.0.7): `H[·, :f_prompt] ‖ H[·, −f_ret:]` —
//!   kernel `carry.append`;
//! * append order: `H[·, :f_prompt] ‖ H[·, ℓ−f_ret:ℓ]` — kernel `carry.append`.
//!
//! **In-place choice.** The carry region *is* the live region (one envelope of `capacity`
//! frames per row; the model writes new frames into its spare capacity). The head of the kept
//! frames is already in place; the tail window moves left by `ℓ − L` frames inside the same row.
//! The kernel moves it in passes of `ℓ − L` frames (one block per row, a barrier between passes),
//! so every pass reads frames no pass has written yet: no temporary, no second buffer, and the
//! address never changes. A separate carry region (`Carry::separate`) is also supported and
//! copies both parts in one pass each. Turn reset copies the saved base state into the same
//! bytes.

use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::sync::Arc;

use dcc_kernels::carry::{self as kc, Retention};
use dcc_kernels::{Arg, KernelDef, LaunchDims};

use crate::DevPtr;
use crate::backend::{AllocKind, Backend, DeviceBuffer};
use crate::contract::{CacheOrder, Keep};
use crate::error::{Error, Result};

/// Which slicing a contract declares for its retention.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Slicing {
    /// Paper eq. 2 (`--retention paper`).
    Paper,
    /// minicpmo-utils 1.0.7 on the prepend cache: `[:f_prompt] ‖ [-f_retained:]`
    /// (`--retention vendor`).
    Vendor,
}

impl Slicing {
    /// The slicing a contract declares with a storage order and a keep rule
    /// ([`crate::contract::RegionInfo::order`] and `keep`): the order's natural rule is
    /// [`Slicing::Paper`]; on prepend storage the append rule (`head = prompt, tail = retained`)
    /// is [`Slicing::Vendor`]. `None` for a split the carry kernels do not implement on that
    /// order (e.g. newest frames at the head of append storage).
    pub fn of(order: CacheOrder, keep: &Keep) -> Option<Slicing> {
        if keep.is_natural(order) {
            return Some(Slicing::Paper);
        }
        let append = Keep::natural(CacheOrder::Append, keep.prompt, keep.retained);
        (order == CacheOrder::Prepend && (keep.head, keep.tail) == (append.head, append.tail))
            .then_some(Slicing::Vendor)
    }
}

/// Geometry and policy of one carried cache.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CarrySpec {
    pub order: CacheOrder,
    pub slicing: Slicing,
    pub f_prompt: usize,
    pub f_retained: usize,
    /// Rows (product of the axes outside the frame axis).
    pub outer: usize,
    /// 32-bit words per frame (product of the axes inside the frame axis × dtype bytes / 4).
    pub inner: usize,
    /// Envelope frames per row of the live region (`ℓ` never exceeds it).
    pub capacity: usize,
}

impl CarrySpec {
    /// `L = f_prompt + f_retained`.
    pub fn bound(&self) -> usize {
        self.f_prompt + self.f_retained
    }

    /// True when retention keeps the newest frames at the head (prepend kernel).
    fn newest_head(&self) -> bool {
        self.order == CacheOrder::Prepend && self.slicing == Slicing::Paper
    }

    /// The kernel that implements this declaration.
    pub fn kernel(&self) -> &'static KernelDef {
        if self.newest_head() {
            &kc::PREPEND
        } else {
            &kc::APPEND
        }
    }

    /// The geometry of a retention at extent `extent` under this declaration.
    pub fn retention(&self, extent: usize) -> Option<Retention> {
        if self.newest_head() {
            Retention::prepend(self.f_prompt, self.f_retained, extent)
        } else {
            Retention::append(self.f_prompt, self.f_retained, extent)
        }
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
/// freed under it). Every retention launch is checked against their sizes first.
pub struct Carry<'a> {
    backend: Arc<dyn Backend>,
    spec: CarrySpec,
    live: DevPtr,
    carry: DevPtr,
    /// Bytes of the buffers at `live` and `carry` (checked at construction to hold the rows).
    live_region_bytes: usize,
    carry_region_bytes: usize,
    carry_row_stride: usize,
    kernel: &'static KernelDef,
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
        let rs = spec.capacity * spec.inner;
        Ok(Carry {
            backend,
            kernel: spec.kernel(),
            spec,
            live: region.ptr(),
            carry: region.ptr(),
            live_region_bytes: region.bytes(),
            carry_region_bytes: region.bytes(),
            carry_row_stride: rs,
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
        let (live_region_bytes, carry_region_bytes) = (live.bytes(), carry.bytes());
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
            kernel: spec.kernel(),
            carry_row_stride: spec.bound() * spec.inner,
            spec,
            live,
            carry,
            live_region_bytes,
            carry_region_bytes,
            extent: 0,
            base: None,
            audit: None,
            retentions: 0,
            _regions: PhantomData,
        })
    }

    fn check(spec: &CarrySpec) -> Result<()> {
        if spec.f_prompt == 0 && spec.f_retained == 0 || spec.outer == 0 || spec.inner == 0 {
            return Err(Error::Carry(format!("degenerate carry {spec:?}")));
        }
        // Every size the carry derives (`live_bytes`, and the i64 kernel arguments) must be
        // representable; `capacity > L` below then bounds `carry_bytes` too.
        let live = [spec.outer, spec.capacity, spec.inner, 4]
            .into_iter()
            .try_fold(1usize, usize::checked_mul)
            .filter(|&b| i64::try_from(b).is_ok());
        if live.is_none() || spec.f_prompt.checked_add(spec.f_retained).is_none() {
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

    /// Replaces the retention kernel (e.g. to reproduce an append/prepend mix-up; the auditor
    /// still checks against the declared slicing).
    /// Only the carry kernels (`carry.prepend`, `carry.append`) are launched: `retain` refuses
    /// any other kernel.
    pub fn with_kernel(mut self, kernel: &'static KernelDef) -> Carry<'a> {
        self.kernel = kernel;
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
        let bytes = self.spec.outer * self.carry_row_stride * 4;
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

    /// Checks a retention launch at `extent` against the regions before it is issued: the
    /// kernel is a carry kernel, the retention moves the window (ℓ > L), and every frame it
    /// reads or writes lies inside the buffers.
    fn check_launch(&self, extent: usize) -> Result<()> {
        let spec = &self.spec;
        if !std::ptr::eq(self.kernel, &kc::PREPEND) && !std::ptr::eq(self.kernel, &kc::APPEND) {
            return Err(Error::Carry(format!(
                "{} is not a carry kernel",
                self.kernel.name
            )));
        }
        let live_rs = spec.capacity * spec.inner;
        // `check` bounded outer × capacity × inner × 4, and capacity > L, so these do not
        // overflow.
        let fits = extent > spec.bound()
            && extent <= spec.capacity
            && spec.bound() * spec.inner <= self.carry_row_stride
            && spec.outer * live_rs * 4 <= self.live_region_bytes
            && spec.outer * self.carry_row_stride * 4 <= self.carry_region_bytes;
        if !fits {
            return Err(Error::Carry(format!(
                "retention at extent {extent} does not fit the regions ({spec:?}, {} / {} bytes)",
                self.live_region_bytes, self.carry_region_bytes
            )));
        }
        Ok(())
    }

    /// Applies retention if ℓ > L (returns whether it did). `chunk` labels the application in
    /// the audit report. With ℓ ≤ L nothing is written (a separate carry region is then not
    /// refreshed from the live region).
    pub fn retain(&mut self, chunk: u64) -> Result<bool> {
        let spec = self.spec;
        let extent = self.extent;
        let Some(declared) = spec.retention(extent) else {
            return Ok(false);
        };
        let live_rs = spec.capacity * spec.inner;
        let expected = match &self.audit {
            Some(_) => {
                let h: Vec<u32> = self.backend.download(self.live, spec.outer * live_rs)?;
                stock_concat(&spec, &h, live_rs, extent)
            }
            None => None,
        };
        self.check_launch(extent)?;
        // SAFETY: `check_launch` just established what the kernel's footprint needs: it is a
        // carry kernel (which keeps `head + tail_len = L` frames of each of `outer` rows: writes
        // dst frames [0, L), reads src frames [0, extent), both kernels alike), extent > L (so
        // the window moves left and every in-place pass is disjoint), L frames fit in a carry
        // row and `extent` frames in a live row, and `outer` rows of each stride lie inside the
        // borrowed buffers (checked for this backend and u32 alignment at construction, alive
        // for 'a, freed stream-ordered after this work). In place, dst == src with equal
        // strides, the aliasing the carry kernels are written for; separate regions do not
        // overlap (checked at construction).
        unsafe {
            self.backend.launch(
                self.kernel,
                LaunchDims::blocks(spec.outer.min(65_535) as u32, 256),
                &[
                    Arg::Ptr(self.carry),
                    Arg::Ptr(self.live),
                    Arg::I64(spec.outer as i64),
                    Arg::I64(self.carry_row_stride as i64),
                    Arg::I64(live_rs as i64),
                    Arg::I64(spec.inner as i64),
                    Arg::I64(spec.f_prompt as i64),
                    Arg::I64(spec.f_retained as i64),
                    Arg::I64(extent as i64),
                ],
            )
        }?;
        self.extent = declared.kept();
        self.retentions += 1;
        if let (Some(want), Some(report)) = (expected, self.audit.as_mut()) {
            let got: Vec<u32> = self
                .backend
                .download(self.carry, spec.outer * self.carry_row_stride)?;
            report.applications += 1;
            report.addresses.insert(self.carry.0);
            let kept = declared.kept() * spec.inner;
            let mut first = None;
            'rows: for row in 0..spec.outer {
                let g = &got[row * self.carry_row_stride..row * self.carry_row_stride + kept];
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slicing_from_a_keep_rule() {
        let (p, r) = (302, 100);
        let pre = CacheOrder::Prepend;
        let app = CacheOrder::Append;
        assert_eq!(
            Slicing::of(pre, &Keep::natural(pre, p, r)),
            Some(Slicing::Paper)
        );
        assert_eq!(
            Slicing::of(pre, &Keep::natural(app, p, r)),
            Some(Slicing::Vendor)
        );
        assert_eq!(
            Slicing::of(app, &Keep::natural(app, p, r)),
            Some(Slicing::Paper)
        );
        assert_eq!(Slicing::of(app, &Keep::natural(pre, p, r)), None);
        let split = Keep {
            head: 200,
            tail: 202,
            prompt: p,
            retained: r,
        };
        assert_eq!(Slicing::of(pre, &split), None);
    }
}
