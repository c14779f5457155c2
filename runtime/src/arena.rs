//! The region arena: one allocation per session, every contract region at the offset the
//! generated [`ArenaLayout`] fixes. There is no way to grow or move it: `ptr(region)` is the same
//! for the whole life of the arena, turn resets included (they write into the same bytes).

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

/// One session's regions in one device allocation.
pub struct Arena {
    backend: Arc<dyn Backend>,
    layout: ArenaLayout,
    buf: DeviceBuffer,
}

impl Arena {
    /// Validates the layout and allocates it (zeroed), counted as [`AllocKind::Arena`].
    pub fn new(backend: Arc<dyn Backend>, layout: &ArenaLayout) -> Result<Arena> {
        validate_layout(layout)?;
        let buf = backend.alloc(layout.total_bytes, AllocKind::Arena)?;
        Ok(Arena {
            backend,
            layout: *layout,
            buf,
        })
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    pub fn layout(&self) -> &ArenaLayout {
        &self.layout
    }

    /// Address of the arena (of its first byte).
    pub fn base(&self) -> DevPtr {
        self.buf.ptr()
    }

    pub fn bytes(&self) -> usize {
        self.layout.total_bytes
    }

    pub fn region(&self, name: &str) -> Result<Region> {
        let info = self
            .layout
            .region(name)
            .ok_or_else(|| Error::Layout(format!("no region `{name}`")))?;
        Ok(Region {
            info,
            ptr: self.buf.ptr().offset(info.offset),
        })
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

    pub fn regions(&self) -> impl Iterator<Item = Region> + '_ {
        let base = self.buf.ptr();
        self.layout.regions.iter().map(move |info| Region {
            info,
            ptr: base.offset(info.offset),
        })
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
        write!(
            f,
            "Arena({} B at {})",
            self.layout.total_bytes,
            self.buf.ptr()
        )
    }
}
