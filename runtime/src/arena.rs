//! The region arena: every contract region at the offset the generated [`ArenaLayout`] fixes.
//! There is no way to grow or move it: `ptr(region)` is the same for the whole life of the
//! arena, turn resets included (they write into the same bytes).
//!
//! The compiler lays a layout out in two parts by the regions' declared lifetime
//! ([`Lifetime::per_session`]): the **per-session part** `[0, session_bytes)` (regions of
//! lifetime `turn` / `session`, whose contents outlive a call) and the **per-process part**
//! `[session_bytes, total_bytes)` (lifetime `operator` / `unit` / `process`, dead once the call
//! that wrote them returns). An arena is either
//!
//! * **standalone** ([`Arena::new`]): one allocation of both parts, as laid out; or
//! * **in a process arena** ([`Arena::in_process`]): its own allocation of the per-session part
//!   only, the per-process regions resolving into a [`ProcessArena`] that every session of a
//!   device stream shares. Sessions time-multiplexed on one stream never run two calls at once,
//!   so a region that lives for one call is never live for two sessions at the same time; N
//!   sessions then cost `N × session_bytes + process_bytes` instead of `N × total_bytes`.
//!
//! [`Lifetime::per_session`]: crate::contract::Lifetime::per_session

use std::sync::Arc;

use crate::DevPtr;
use crate::backend::{AllocKind, Backend, DeviceBuffer};
use crate::contract::{ArenaLayout, RegionInfo, RegionLayout};
use crate::error::{Error, Result};

/// Largest region alignment an arena honours: every backend allocation is aligned to
/// [`dcc_vocab::ALLOC_ALIGN`] (256 B), the alignment the compiler lays regions out at.
pub const MAX_ALIGN: usize = dcc_vocab::ALLOC_ALIGN;

/// A contract region as a view into the arena: its static description plus its address.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Region {
    pub info: &'static RegionInfo,
    pub ptr: DevPtr,
}

impl Region {
    pub fn name(&self) -> &'static str {
        self.info.name
    }

    pub fn bytes(&self) -> usize {
        self.info.bytes
    }

    pub fn dims(&self) -> &'static [usize] {
        self.info.dims
    }

    /// Element strides of the packed (row-major) envelope.
    pub fn strides(&self) -> Vec<usize> {
        packed_strides(self.info.dims)
    }
}

/// Row-major element strides of `dims`.
pub fn packed_strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Checks that a layout is self-consistent: sizes, alignment, bounds, no overlap, unique names.
pub fn validate_layout(layout: &ArenaLayout) -> Result<()> {
    let bad = |m: String| Err(Error::Layout(m));
    if !layout.align.is_power_of_two() || layout.align > MAX_ALIGN {
        return bad(format!(
            "arena alignment {} (must be a power of two <= {MAX_ALIGN})",
            layout.align
        ));
    }
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    for r in layout.regions {
        let elems: Option<usize> = r.dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if elems != Some(r.elems) {
            return bad(format!(
                "region `{}`: dims {:?} hold {elems:?} elements, layout says {}",
                r.name, r.dims, r.elems
            ));
        }
        if r.elems.checked_mul(r.dtype.size()) != Some(r.bytes) {
            return bad(format!(
                "region `{}`: {} x {} bytes != {}",
                r.name,
                r.elems,
                r.dtype.size(),
                r.bytes
            ));
        }
        if !r.align.is_power_of_two() || r.align > MAX_ALIGN || r.offset % r.align != 0 {
            return bad(format!(
                "region `{}`: offset {} / alignment {}",
                r.name, r.offset, r.align
            ));
        }
        match r.offset.checked_add(r.bytes) {
            Some(end) if end <= layout.total_bytes => spans.push((r.offset, end, r.name)),
            _ => {
                return bad(format!(
                    "region `{}` ends past the arena ({} bytes)",
                    r.name, layout.total_bytes
                ));
            }
        }
        if r.attended > r.dims.iter().copied().max().unwrap_or(0) && r.attended != 0 {
            // Attended extent is a frame count along one axis; it cannot exceed every axis.
            return bad(format!(
                "region `{}`: attended extent {} exceeds every axis of {:?}",
                r.name, r.attended, r.dims
            ));
        }
    }
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return bad(format!("regions `{}` and `{}` overlap", w[0].2, w[1].2));
        }
    }
    let mut names: Vec<&str> = layout.regions.iter().map(|r| r.name).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return bad("duplicate region names".into());
    }
    Ok(())
}

/// Where a layout splits: the per-session part is `[0, session_bytes)`, the per-process part
/// `[session_bytes, total_bytes)`. The compiler lays every per-session region out before every
/// per-process one; a layout whose parts interleave (a hand-written one) cannot be split and is
/// refused. A layout without per-process regions splits at `total_bytes`.
pub fn session_bytes(layout: &ArenaLayout) -> Result<usize> {
    let split = layout
        .regions
        .iter()
        .filter(|r| !r.lifetime.per_session())
        .map(|r| r.offset)
        .min()
        .unwrap_or(layout.total_bytes);
    if let Some(r) = layout
        .regions
        .iter()
        .find(|r| r.lifetime.per_session() && r.offset + r.bytes > split)
    {
        return Err(Error::Layout(format!(
            "per-session region `{}` (lifetime {}) ends past {split}, where the per-process part \
             begins: the layout's parts interleave",
            r.name,
            r.lifetime.name()
        )));
    }
    Ok(split)
}

/// The per-process part of an arena layout: one allocation holding the regions of lifetime
/// `operator`, `unit` and `process`, shared (through an `Arc`) by every [`Arena`] placed in it
/// with [`Arena::in_process`]. Freed when the last of them and its creator let go.
pub struct ProcessArena {
    layout: ArenaLayout,
    /// Where the layout's per-process part begins.
    split: usize,
    /// `None` when the layout has no per-process regions.
    buf: Option<DeviceBuffer>,
}

impl ProcessArena {
    /// Validates and splits `layout`, and allocates its per-process part (zeroed), counted as
    /// [`AllocKind::Arena`].
    pub fn new(backend: &Arc<dyn Backend>, layout: &ArenaLayout) -> Result<Arc<ProcessArena>> {
        validate_layout(layout)?;
        let split = session_bytes(layout)?;
        let bytes = layout.total_bytes - split;
        let buf = if bytes == 0 {
            None
        } else {
            Some(backend.alloc(bytes, AllocKind::Arena)?)
        };
        Ok(Arc::new(ProcessArena {
            layout: *layout,
            split,
            buf,
        }))
    }

    /// Device bytes of the per-process part.
    pub fn bytes(&self) -> usize {
        self.layout.total_bytes - self.split
    }

    /// The layout it was placed for.
    pub fn layout(&self) -> &ArenaLayout {
        &self.layout
    }

    /// The per-process regions of `layout`, each with its offset inside the per-process part.
    fn regions_of(layout: &ArenaLayout, split: usize) -> Vec<(RegionInfo, usize)> {
        layout
            .regions
            .iter()
            .filter(|r| !r.lifetime.per_session())
            .map(|r| (RegionInfo { offset: 0, ..*r }, r.offset - split))
            .collect()
    }

    /// Whether the sessions of `layout` can use this part: the same per-process regions (name,
    /// dtype, dims, lifetime, ...) at the same offsets inside the part, and the same size.
    pub fn serves(&self, layout: &ArenaLayout) -> bool {
        let Ok(split) = session_bytes(layout) else {
            return false;
        };
        layout.total_bytes - split == self.bytes()
            && Self::regions_of(layout, split) == Self::regions_of(&self.layout, self.split)
    }

    /// Address of the per-process region `info` (an entry of a layout this part
    /// [`serves`](ProcessArena::serves), at or past that layout's split `split`). A part of
    /// zero bytes holds only empty regions: they sit at the null address, never dereferenced.
    fn ptr(&self, info: &RegionInfo, split: usize) -> DevPtr {
        match &self.buf {
            Some(b) => b.ptr().offset(info.offset - split),
            None => DevPtr::NULL,
        }
    }
}

impl std::fmt::Debug for ProcessArena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.buf {
            Some(b) => write!(f, "ProcessArena({} B at {})", self.bytes(), b.ptr()),
            None => write!(f, "ProcessArena(empty)"),
        }
    }
}

/// One session's regions: in one device allocation ([`Arena::new`]), or its per-session part
/// in its own allocation and its per-process regions in a shared [`ProcessArena`]
/// ([`Arena::in_process`]).
pub struct Arena {
    backend: Arc<dyn Backend>,
    layout: ArenaLayout,
    /// The whole layout (standalone), or its per-session part.
    buf: DeviceBuffer,
    /// The shared per-process part, and where the layout splits.
    process: Option<(Arc<ProcessArena>, usize)>,
}

impl Arena {
    /// Validates the layout and allocates it whole (zeroed), counted as [`AllocKind::Arena`]:
    /// both parts in one allocation, for a session that shares nothing.
    pub fn new(backend: Arc<dyn Backend>, layout: &ArenaLayout) -> Result<Arena> {
        validate_layout(layout)?;
        let buf = backend.alloc(layout.total_bytes, AllocKind::Arena)?;
        Ok(Arena {
            backend,
            layout: *layout,
            buf,
            process: None,
        })
    }

    /// Validates the layout and allocates its per-session part (zeroed, counted as
    /// [`AllocKind::Arena`]); its per-process regions are `process`'s, which must
    /// [`serve`](ProcessArena::serves) this layout. Refused when the layout has no per-session
    /// region (a session would own nothing).
    pub fn in_process(
        backend: Arc<dyn Backend>,
        layout: &ArenaLayout,
        process: &Arc<ProcessArena>,
    ) -> Result<Arena> {
        validate_layout(layout)?;
        let split = session_bytes(layout)?;
        if !process.serves(layout) {
            return Err(Error::Layout(format!(
                "the process arena ({} B) was placed for other per-process regions than this \
                 layout's ({} B)",
                process.bytes(),
                layout.total_bytes - split
            )));
        }
        if split == 0 {
            return Err(Error::Layout(
                "the layout has no per-session region: a session would own nothing".into(),
            ));
        }
        let buf = backend.alloc(split, AllocKind::Arena)?;
        Ok(Arena {
            backend,
            layout: *layout,
            buf,
            process: Some((process.clone(), split)),
        })
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn layout(&self) -> &ArenaLayout {
        &self.layout
    }

    /// Address of the arena's own allocation (its first byte): the whole layout, or the
    /// per-session part.
    pub fn base(&self) -> DevPtr {
        self.buf.ptr()
    }

    /// Device bytes this arena allocated itself: the whole layout (standalone) or its
    /// per-session part (the per-process part is the [`ProcessArena`]'s).
    pub fn bytes(&self) -> usize {
        self.buf.bytes()
    }

    /// The shared per-process part, for an arena placed [`in_process`](Arena::in_process).
    pub fn process(&self) -> Option<&Arc<ProcessArena>> {
        self.process.as_ref().map(|(p, _)| p)
    }

    pub fn region(&self, name: &str) -> Result<Region> {
        let info = self
            .layout
            .region(name)
            .ok_or_else(|| Error::Layout(format!("no region `{name}`")))?;
        Ok(self.place(info))
    }

    /// Where `info` (an entry of this arena's layout) lives.
    fn place(&self, info: &'static RegionInfo) -> Region {
        let ptr = match &self.process {
            Some((p, split)) if !info.lifetime.per_session() => p.ptr(info, *split),
            _ => self.buf.ptr().offset(info.offset),
        };
        Region { info, ptr }
    }

    /// Address of a region; constant over the arena's life.
    pub fn ptr(&self, name: &str) -> Result<DevPtr> {
        Ok(self.region(name)?.ptr)
    }

    /// The region a generated [`RegionLayout`] type names, checked against this arena's layout.
    pub fn view<R: RegionLayout>(&self) -> Result<Region> {
        let r = self.region(R::NAME)?;
        if r.info.offset != R::OFFSET || r.info.bytes != R::BYTES || r.info.dtype != R::DTYPE {
            return Err(Error::Layout(format!(
                "region `{}` differs from its RegionLayout type",
                R::NAME
            )));
        }
        Ok(r)
    }

    /// Every region of the layout, where it lives (the per-process ones in the shared part for
    /// an arena placed [`in_process`](Arena::in_process)).
    pub fn regions(&self) -> impl Iterator<Item = Region> + '_ {
        self.layout.regions.iter().map(move |info| self.place(info))
    }

    /// Zeroes a region in place (stream-ordered).
    pub fn zero(&self, name: &str) -> Result<()> {
        let r = self.region(name)?;
        if r.bytes() % 4 != 0 {
            return Err(Error::Layout(format!(
                "region `{name}` is not a whole number of words"
            )));
        }
        self.backend.memset_d32(r.ptr, 0, r.bytes() / 4)
    }
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Arena({} B at {}", self.bytes(), self.buf.ptr())?;
        match self.process() {
            Some(p) => write!(f, ", per-process part {p:?})"),
            None => write!(f, ")"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{DType, Lifetime};

    const fn region(name: &'static str, offset: usize, lifetime: Lifetime) -> RegionInfo {
        RegionInfo {
            name,
            dtype: DType::F32,
            dims: &[16],
            dim_names: &[],
            elems: 16,
            bytes: 64,
            align: 256,
            offset,
            attended: 0,
            lifetime,
            order: None,
            keep: None,
        }
    }

    static SPLIT: [RegionInfo; 3] = [
        region("cache", 0, Lifetime::Session),
        region("turn", 256, Lifetime::Turn),
        region("scratch", 512, Lifetime::Unit),
    ];
    const LAYOUT: ArenaLayout = ArenaLayout {
        total_bytes: 768,
        align: 256,
        regions: &SPLIT,
    };
    static MIXED: [RegionInfo; 2] = [
        region("scratch", 0, Lifetime::Unit),
        region("cache", 256, Lifetime::Session),
    ];

    #[test]
    fn sessions_in_one_process_arena_share_its_regions_only() {
        let b = crate::backend::host();
        assert_eq!(session_bytes(&LAYOUT).unwrap(), 512);
        let p = ProcessArena::new(&b, &LAYOUT).unwrap();
        assert_eq!(p.bytes(), 256);
        let base = b.memory().live(AllocKind::Arena);
        let x = Arena::in_process(b.clone(), &LAYOUT, &p).unwrap();
        let y = Arena::in_process(b.clone(), &LAYOUT, &p).unwrap();
        assert_eq!((x.bytes(), y.bytes()), (512, 512));
        assert_eq!(b.memory().live(AllocKind::Arena) - base, 1024);
        assert_eq!(x.ptr("scratch").unwrap(), y.ptr("scratch").unwrap());
        assert_ne!(x.ptr("cache").unwrap(), y.ptr("cache").unwrap());
        assert_eq!(x.ptr("turn").unwrap(), x.base().offset(256));
        assert_eq!(x.regions().count(), 3);
        // a standalone arena holds both parts in one allocation, as laid out
        let z = Arena::new(b.clone(), &LAYOUT).unwrap();
        assert_eq!(z.bytes(), 768);
        assert_eq!(z.ptr("scratch").unwrap(), z.base().offset(512));
        drop((x, y, z, p));
        assert_eq!(b.memory().live(AllocKind::Arena), 0);
    }

    #[test]
    fn interleaved_or_foreign_layouts_are_refused() {
        let b = crate::backend::host();
        let mixed = ArenaLayout {
            total_bytes: 512,
            align: 256,
            regions: &MIXED,
        };
        assert!(matches!(session_bytes(&mixed), Err(Error::Layout(m)) if m.contains("interleave")));
        assert!(ProcessArena::new(&b, &mixed).is_err());
        let p = ProcessArena::new(&b, &LAYOUT).unwrap();
        static OTHER: [RegionInfo; 2] = [
            region("cache", 0, Lifetime::Session),
            region("other", 256, Lifetime::Unit),
        ];
        let other = ArenaLayout {
            total_bytes: 512,
            align: 256,
            regions: &OTHER,
        };
        assert!(!p.serves(&other));
        assert!(Arena::in_process(b.clone(), &other, &p).is_err());
        // a layout without per-session regions gives a session nothing to own
        static NONE: [RegionInfo; 1] = [region("scratch", 0, Lifetime::Unit)];
        let none = ArenaLayout {
            total_bytes: 256,
            align: 256,
            regions: &NONE,
        };
        let q = ProcessArena::new(&b, &none).unwrap();
        assert!(Arena::in_process(b.clone(), &none, &q).is_err());
    }
}
