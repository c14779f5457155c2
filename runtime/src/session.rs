//! Sessions: what one stream owns on the device, in one of two shapes.
//!
//! * [`Session`]: one stream owns its state (an [`Arena`] laid out by the contract, or whatever
//!   buffers a model's store keeps) and the replay engines bound to that state's addresses.
//!   It is the unit a server creates per stream and drops when the stream ends: dropping it
//!   frees the engines (their graphs and staging buffers) first, then the state, and never
//!   panics. It reports the device bytes it holds ([`SessionBytes`]); everything else in the
//!   backend's ledger (weights, a model's shared workspace) is per-process.
//! * [`SessionPool`]: N streams share one arena binding (and so every captured graph) and own
//!   only a snapshot of their state. Switching restores a session's state into the bound
//!   addresses.
//!
//! What a pooled session owns: the arena regions whose lifetime outlives a chunk (`turn`,
//! `session`: [`Lifetime::per_session`](crate::contract::Lifetime::per_session), the same split the compiler lays the arena out by)
//! plus any extra ranges (e.g. a device RNG state kept outside the arena). `process`
//! regions (constants) are shared; `operator`/`unit` regions are dead between chunks and not
//! saved.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::DevPtr;
use crate::arena::Arena;
use crate::backend::{AllocKind, Backend, DeviceBuffer};
use crate::error::{Error, Result};
use crate::replay::{
    Call, EngineReport, ExactShapeReplay, Fallback, Invocation, Outcome, ReplaySpec, RngProbe,
};
use crate::rng::HostRng;

/// The device state a [`Session`] owns, as far as the session needs to know it.
pub trait SessionState {
    /// Device bytes the state holds now (its arena, or its buffers).
    fn device_bytes(&self) -> usize;
}

impl SessionState for Arena {
    fn device_bytes(&self) -> usize {
        self.bytes()
    }
}

/// Device bytes one [`Session`] holds: what creating it added to the backend's ledger, plus
/// what its engines allocated since (staging buffers at capture) and what its state grew by.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionBytes {
    /// The state ([`SessionState::device_bytes`]).
    pub state: usize,
    /// The static staging buffers of the engines' captured classes.
    pub staging: usize,
    /// Device bytes attributed to the engines' graphs.
    pub graphs: usize,
}

impl SessionBytes {
    pub fn total(&self) -> usize {
        self.state + self.staging + self.graphs
    }
}

/// An engine of a [`Session`], in the order the session built them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EngineId(usize);

/// One stream: its own state `S` and the replay engines (callables of type `F`) bound to it.
///
/// The engines are built on the session's backend and observe one host generator per session
/// ([`Session::host_rng`]), so a callable that draws from it is caught whichever engine runs it.
pub struct Session<S, F> {
    backend: Arc<dyn Backend>,
    host_rng: Arc<HostRng>,
    /// Dropped before `state` ([`Drop`]): their graphs bind the state's addresses.
    engines: Vec<ExactShapeReplay<F>>,
    state: S,
}

impl<S: SessionState, F> Session<S, F>
where
    F: Fn(&mut Call<'_>) -> Result<()>,
{
    /// A session owning `state`, with no engine yet.
    pub fn new(backend: Arc<dyn Backend>, state: S) -> Session<S, F> {
        Session {
            backend,
            host_rng: Arc::new(HostRng::new(0)),
            engines: Vec::new(),
            state,
        }
    }

    /// Wraps `f` in an engine of this session (see [`ExactShapeReplay::new`]). The callable
    /// may reach the session's state only through the addresses its calls bind.
    pub fn add_engine(&mut self, spec: ReplaySpec, device_rng: RngProbe, f: F) -> Result<EngineId> {
        let e = ExactShapeReplay::new(
            self.backend.clone(),
            spec,
            self.host_rng.clone(),
            device_rng,
            f,
        )?;
        self.engines.push(e);
        Ok(EngineId(self.engines.len() - 1))
    }

    /// Runs one invocation of engine `id`: replay if admitted, eager otherwise.
    pub fn call(&mut self, id: EngineId, inv: &Invocation<'_>) -> Result<Outcome> {
        self.engines
            .get_mut(id.0)
            .ok_or_else(|| Error::Invalid(format!("no engine {}", id.0)))?
            .call(inv)
    }

    /// Engine `id`.
    pub fn engine(&self, id: EngineId) -> Option<&ExactShapeReplay<F>> {
        self.engines.get(id.0)
    }

    /// Every engine, in the order they were added.
    pub fn engines(&self) -> &[ExactShapeReplay<F>] {
        &self.engines
    }

    /// The engines' reports, in the order they were added.
    pub fn reports(&self) -> Vec<EngineReport> {
        self.engines.iter().map(|e| e.report()).collect()
    }

    /// Eager calls of all engines, by reason.
    pub fn fallbacks(&self) -> BTreeMap<Fallback, u64> {
        let mut m = BTreeMap::new();
        for e in &self.engines {
            for (k, v) in e.fallbacks() {
                *m.entry(*k).or_insert(0) += v;
            }
        }
        m
    }

    /// Device bytes the session holds now.
    pub fn bytes(&self) -> SessionBytes {
        let (staging, graphs) = self
            .engines
            .iter()
            .map(|e| e.device_bytes())
            .fold((0, 0), |(s, g), (es, eg)| (s + es, g + eg));
        SessionBytes {
            state: self.state.device_bytes(),
            staging,
            graphs,
        }
    }

    pub fn state(&self) -> &S {
        &self.state
    }

    pub fn state_mut(&mut self) -> &mut S {
        &mut self.state
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// The host generator every engine of the session observes.
    pub fn host_rng(&self) -> &Arc<HostRng> {
        &self.host_rng
    }
}

impl<S, F> Drop for Session<S, F> {
    /// The engines first (graphs, staging buffers), then the state: no graph outlives the
    /// buffers it was captured against. Freeing never fails, so this never panics.
    fn drop(&mut self) {
        self.engines.clear();
    }
}

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
            .filter(|r| r.info.lifetime.per_session())
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
