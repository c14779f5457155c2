//! Per-thread machinery shared by both backends: the capture gate (a capture is exclusive) and
//! stream-operation traces (what the replay engine compares between two runs of a callable).
//!
//! **The gate.** A backend has one stream, and a capture records whatever reaches it. So while
//! one thread captures, every other thread's work on the backend waits: [`CaptureGate::enter`]
//! blocks until the capture ends, and [`CaptureGate::begin`] waits until work already admitted
//! has been issued. The capturing thread's own work passes ([`Pass::Capturing`]); the backend
//! records it (or refuses it, for allocation, host copies and synchronization). No other thread
//! can add a node to the graph, and none has its work silently swallowed by it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::{self, ThreadId};

use super::StreamOp;
use super::bounds::lock;
use crate::error::{Error, Result};

#[derive(Debug, Default)]
struct GateState {
    /// The thread capturing, or about to (waiting for `in_flight` to drain).
    owner: Option<ThreadId>,
    /// Operations of other threads admitted and not yet issued.
    in_flight: usize,
}

/// Capture exclusivity of one backend (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct CaptureGate {
    state: Mutex<GateState>,
    changed: Condvar,
}

/// How an operation was admitted by [`CaptureGate::enter`].
pub(crate) enum Pass<'a> {
    /// The calling thread is capturing: stream work is recorded, host work refused.
    Capturing,
    /// No capture is in progress; none starts until the guard (held only for its `Drop`)
    /// drops, once the operation has been issued.
    Eager(#[allow(dead_code)] InFlight<'a>),
}

impl Pass<'_> {
    pub(crate) fn capturing(&self) -> bool {
        matches!(self, Pass::Capturing)
    }
}

/// An admitted operation of a non-capturing thread; a capture begins only once none is left.
pub(crate) struct InFlight<'a>(&'a CaptureGate);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.in_flight -= 1;
        if s.in_flight == 0 {
            self.0.changed.notify_all();
        }
    }
}

/// Ends the capture of the calling thread when dropped (see [`CaptureGate::ending`]).
pub(crate) struct Ending<'a>(&'a CaptureGate);

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        if s.owner == Some(thread::current().id()) {
            s.owner = None;
            self.0.changed.notify_all();
        }
    }
}

impl CaptureGate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        lock(&self.state)
    }

    fn wait<'a>(&self, s: MutexGuard<'a, GateState>) -> MutexGuard<'a, GateState> {
        // Poisoning only means a panic elsewhere; the two fields stay consistent.
        self.changed.wait(s).unwrap_or_else(|p| p.into_inner())
    }

    /// Admits one operation of the calling thread: at once when it is the capturing thread or
    /// no capture is in progress, otherwise once the capture has ended. An operation must not
    /// enter the gate again while it holds a pass (a capture waiting for it would deadlock).
    pub(crate) fn enter(&self) -> Pass<'_> {
        let me = thread::current().id();
        let mut s = self.lock();
        loop {
            match s.owner {
                Some(o) if o == me => return Pass::Capturing,
                Some(_) => s = self.wait(s),
                None => {
                    s.in_flight += 1;
                    return Pass::Eager(InFlight(self));
                }
            }
        }
    }

    /// Makes the calling thread the capturing one: waits for another thread's capture to end
    /// and for every admitted operation to be issued. Fails when this thread already captures.
    pub(crate) fn begin(&self) -> Result<()> {
        let me = thread::current().id();
        let mut s = self.lock();
        loop {
            match s.owner {
                Some(o) if o == me => return Err(Error::Capture("already capturing".into())),
                Some(_) => s = self.wait(s),
                None => break,
            }
        }
        s.owner = Some(me);
        while s.in_flight > 0 {
            s = self.wait(s);
        }
        Ok(())
    }

    /// For the end of a capture: fails unless the calling thread captures; otherwise the
    /// returned guard ends its capture (lets other threads in) when dropped, whatever happens
    /// in between.
    pub(crate) fn ending(&self) -> Result<Ending<'_>> {
        if self.is_mine() {
            Ok(Ending(self))
        } else {
            Err(Error::Capture("not capturing".into()))
        }
    }

    /// Whether the calling thread is capturing.
    pub(crate) fn is_mine(&self) -> bool {
        self.lock().owner == Some(thread::current().id())
    }
}

/// Per-thread traces of issued stream operations ([`super::Backend::begin_trace`]).
#[derive(Debug, Default)]
pub(crate) struct Tracer {
    /// Threads tracing now: the common case (none) costs one atomic load per operation.
    active: AtomicUsize,
    traces: Mutex<HashMap<ThreadId, Vec<StreamOp>>>,
}

impl Tracer {
    pub(crate) fn begin(&self) {
        let mut t = lock(&self.traces);
        if t.insert(thread::current().id(), Vec::new()).is_none() {
            self.active.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn end(&self) -> Vec<StreamOp> {
        let mut t = lock(&self.traces);
        match t.remove(&thread::current().id()) {
            Some(v) => {
                self.active.fetch_sub(1, Ordering::Relaxed);
                v
            }
            None => Vec::new(),
        }
    }

    /// Appends the operation to the calling thread's trace, if it is tracing.
    pub(crate) fn record(&self, op: impl FnOnce() -> StreamOp) {
        if self.active.load(Ordering::Relaxed) == 0 {
            return;
        }
        if let Some(v) = lock(&self.traces).get_mut(&thread::current().id()) {
            v.push(op());
        }
    }
}
