//! Sessions: N sessions share one arena binding (and so every captured graph) and own only a
//! snapshot of their state. Switching restores a session's state into the bound addresses.
//!
//! What a session owns: the arena regions whose lifetime outlives a chunk (`turn`, `session`)
//! plus any extra ranges (e.g. a device RNG state kept outside the arena). `process` regions
//! (constants) are shared; `operator`/`unit` regions are dead between chunks and not saved.

use std::sync::Arc;

use crate::DevPtr;
use crate::arena::Arena;
use crate::backend::{AllocKind, Backend, DeviceBuffer};
use crate::contract::Lifetime;
use crate::error::{Error, Result};

/// Index of a session in its pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SessionId(pub usize);

/// Sessions time-multiplexed over one bound state.
pub struct SessionPool {
    backend: Arc<dyn Backend>,
    ranges: Vec<(DevPtr, usize)>,
    bytes: usize,
    snapshots: Vec<DeviceBuffer>,
    active: Option<SessionId>,
    switches: u64,
}

impl SessionPool {
    /// Session-owned state: the arena's `turn` and `session` regions plus `extra` ranges.
    pub fn new(arena: &Arena, extra: &[(DevPtr, usize)]) -> Result<SessionPool> {
        let mut ranges: Vec<(DevPtr, usize)> = arena
            .regions()
            .filter(|r| matches!(r.info.lifetime, Lifetime::Turn | Lifetime::Session))
            .map(|r| (r.ptr, r.bytes()))
            .collect();
        ranges.extend_from_slice(extra);
        Self::from_ranges(arena.backend().clone(), ranges)
    }

    /// Session-owned state given as explicit ranges.
    pub fn from_ranges(
        backend: Arc<dyn Backend>,
        ranges: Vec<(DevPtr, usize)>,
    ) -> Result<SessionPool> {
        let bytes = ranges
            .iter()
            .try_fold(0usize, |acc, r| acc.checked_add(r.1))
            .ok_or_else(|| Error::Invalid("session state ranges overflow usize".into()))?;
        if bytes == 0 {
            return Err(Error::Invalid("a session pool with no state to own".into()));
        }
        Ok(SessionPool {
            backend,
            ranges,
            bytes,
            snapshots: Vec::new(),
            active: None,
            switches: 0,
        })
    }

    /// Device bytes each session adds (its snapshot).
    pub fn bytes_per_session(&self) -> usize {
        self.bytes
    }

    pub fn len(&self) -> usize {
        self.snapshots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty()
    }

    pub fn active(&self) -> Option<SessionId> {
        self.active
    }

    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// A new session whose state is a copy of the current bound state (e.g. freshly reset).
    pub fn create(&mut self) -> Result<SessionId> {
        let buf = self.backend.alloc(self.bytes, AllocKind::Session)?;
        self.copy(&buf, true)?;
        self.snapshots.push(buf);
        Ok(SessionId(self.snapshots.len() - 1))
    }

    /// Copies between the bound ranges and a snapshot (`save`: bound → snapshot).
    fn copy(&self, snap: &DeviceBuffer, save: bool) -> Result<()> {
        let mut off = 0;
        for &(p, n) in &self.ranges {
            let s = snap.ptr().offset(off);
            if save {
                self.backend.dtod(s, p, n)?
            } else {
                self.backend.dtod(p, s, n)?
            }
            off += n;
        }
        Ok(())
    }

    /// Makes `id` the bound session: saves the active one's state, restores `id`'s.
    pub fn activate(&mut self, id: SessionId) -> Result<()> {
        if id.0 >= self.snapshots.len() {
            return Err(Error::Invalid(format!("no session {}", id.0)));
        }
        if self.active == Some(id) {
            return Ok(());
        }
        if let Some(cur) = self.active {
            self.copy(&self.snapshots[cur.0], true)?;
        }
        self.copy(&self.snapshots[id.0], false)?;
        self.active = Some(id);
        self.switches += 1;
        Ok(())
    }
}
