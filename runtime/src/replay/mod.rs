//! `ExactShapeReplay`: one graph per exact catalog signature, replayed bit-identically to eager,
//! failing closed to eager whenever a premise does not hold.
//!
//! A callable is a closure that launches work on the backend through a [`Call`]: it takes every
//! tensor address from the call (never from its own captured variables), so the engine can hand
//! it staging buffers at capture and the caller's buffers when it runs eagerly. Every written
//! region comes with its extent ([`WriteArg`]): the bytes the callable may write there.
//!
//! Admission of one invocation, in order (paper eq. admit):
//!
//! 0. the callable is in scope (verdict `captured`) and has not been rejected for good;
//! 1. **signature**: the key, computed from integers only (device ordinal, dtypes, ranks, dims,
//!    strides, scalar args), matches a catalog entry exactly — else eager (`signature_miss`);
//! 2. **premises**, checked on every call of the class (the first included) before any byte
//!    moves; a broken one drops the class for good (logged; later calls: `class_dropped`) and
//!    this call runs eager, counted by its reason:
//!    * *address stability*: every written region and every contract-owned (aliased) input is
//!      at the address the class was captured with (`address_drift`);
//!    * *writes*: every written region lies inside one live buffer over its extent
//!      (`write_out_of_bounds`), and none overlaps the span of an input the engine stages, or
//!      starts where one starts (`write_overlaps_staged`): staged inputs are copied in and never
//!      back, so a replay would read a pre-call snapshot where eager reads the bytes just
//!      written, and a write through one would update the staging copy only;
//!    * *live buffers*: every allocation the class's graph touches is still the one it saw at
//!      capture, by allocation identity, so a buffer freed — also one the callable reaches by
//!      itself — or freed and reallocated at the same address is caught (`buffer_freed`);
//!
//!    other (staged) inputs are copied into the class's static staging buffers. A staging
//!    buffer places its copy at the caller's address modulo 256 ([`STAGING_ALIGN`]), so every
//!    operation of the graph sees each operand at the alignment eager execution sees (cuBLAS
//!    and cuBLASLt pick kernels by operand alignment, and another kernel rounds differently); a
//!    call whose staged input sits at another alignment than at capture runs eager, the class
//!    kept (`alignment_changed`);
//! 3. **effects and host values**, certified once per class before capture: a probationary
//!    eager call (this invocation's own execution) observes the host generator and the device
//!    Philox state. Host randomness read → the callable is rejected for good (`host_rng`).
//!    Device offset moved by other than the declared increment → class dropped
//!    (`rng_mismatch`). Then the class is captured (capture executes nothing); host/device
//!    generator states consumed by the capture pass are rewound to the post-probe snapshot, so
//!    probe + capture leave exactly the state eager execution leaves. The work of the capture
//!    pass must equal the probe's (below), else the callable is rejected for good
//!    (`host_state`).
//!
//! # Host values: declared, or refused
//!
//! A graph freezes every host value its work was recorded with. So a callable's per-call host
//! values are *declared*: they reach it only through the [`Call`] — the signature key (dims,
//! strides, dtypes), the call's scalars, the addresses and extents of its inputs and written
//! regions, the mode, and the engine's observed [`HostRng`]. Callables are `Fn`, not `FnMut`:
//! a closure cannot keep a plain mutable counter. Hidden host state (interior mutability, a
//! private generator, a clock, a value that depends on [`Call::mode`]) is *refused* where the
//! engine can see it: at the first call of each class the callable runs twice, as the probe
//! (eager) and as the capture pass, and both runs are traced by the backend (every stream
//! operation with every argument, [`Backend::begin_trace`]). The capture's trace, its staging
//! addresses mapped back to the caller's, must equal the probe's bit for bit; any difference
//! rejects the callable for good (`host_state`). Two limits remain the callable's contract:
//!
//! * a value read from outside the call that changes between calls but not between the probe
//!   and the capture (a shared struct updated later) cannot be observed by an engine that does
//!   not run the callable again; values a closure captures must stay constant for the engine's
//!   life. The one such value it does watch is device memory: a buffer the callable reaches by
//!   itself that is freed, or freed and reallocated, drops the class (`buffer_freed`);
//! * the capture pass is a second run: a callable with hidden state advances it once more than
//!   eager execution would, before it is rejected (the engine cannot rewind state it cannot
//!   see). That is why hidden state is refused, not tolerated.
//!
//! Capture is exclusive (the backend's threading contract, [`Backend`]): while a class
//! captures, other threads' work on the backend waits, so a graph holds the callable's work
//! only. The callable must issue its work from the calling thread.
//!
//! Every eager call is counted by its reason ([`Fallback`]); [`EngineReport`] summarizes.

mod catalog;
mod engine;
mod premise;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use crate::DevPtr;
use crate::backend::Backend;
use crate::contract::{CallableInfo, DType, Effects, Granularity, Verdict};
use crate::error::{Error, Result};
use crate::rng::HostRng;

pub use catalog::{
    Catalog, CatalogIter, OwnedSignature, OwnedTensorSig, SignatureRef, TensorSigIter,
    TensorSigRef, TensorSigs,
};
pub use engine::{ExactShapeReplay, RngProbe};

/// Staging buffers hold their copy at the caller's address modulo this many bytes (the largest
/// alignment the backends' GEMM plans distinguish; every allocation is aligned to it).
pub const STAGING_ALIGN: u64 = 256;

/// One tensor argument of an invocation.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TensorArg<'a> {
    pub ptr: DevPtr,
    pub dims: &'a [usize],
    /// Element strides.
    pub strides: &'a [usize],
    pub dtype: DType,
}

impl TensorArg<'_> {
    /// Elements between the first and one past the last addressed element (saturating: a
    /// span past `usize::MAX` reads as `usize::MAX`, which no allocation or copy accepts).
    pub fn span_elems(&self) -> usize {
        if self.dims.contains(&0) {
            return 0;
        }
        self.dims
            .iter()
            .zip(self.strides)
            .fold(1usize, |acc, (d, s)| {
                acc.saturating_add((d - 1).saturating_mul(*s))
            })
    }

    pub fn span_bytes(&self) -> usize {
        self.span_elems().saturating_mul(self.dtype.size())
    }
}

/// One written region of an invocation: where, and how many bytes from there the callable may
/// write (its whole extent: the engine checks it against live buffers and staged inputs).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WriteArg {
    pub ptr: DevPtr,
    pub bytes: usize,
}

impl WriteArg {
    /// The written range from `ptr` to the end of the live allocation holding it (for a region
    /// that is a whole buffer of its own).
    pub fn to_end_of_buffer(backend: &dyn Backend, ptr: DevPtr) -> Result<WriteArg> {
        let a = backend.allocation(ptr, 0)?;
        // `ptr` lies in the allocation (checked), so this does not underflow.
        let bytes = (a.end() - ptr.0) as usize;
        Ok(WriteArg { ptr, bytes })
    }
}

/// The arguments of one call of a wrapped callable.
#[derive(Copy, Clone, Debug)]
pub struct Invocation<'a> {
    /// In catalog order (`Signature::inputs`).
    pub inputs: &'a [TensorArg<'a>],
    /// The written regions, in the callable's declared `writes` order.
    pub writes: &'a [WriteArg],
    pub scalars: &'a [i64],
}

/// How the callable is being run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Plain eager fallback.
    Eager,
    /// The probationary eager call before a class is captured.
    Probe,
    /// Recording into a graph: nothing executes.
    Capture,
}

/// What a callable sees: the backend and the addresses to use.
pub struct Call<'a> {
    backend: &'a dyn Backend,
    inputs: &'a [TensorArg<'a>],
    ptrs: &'a [DevPtr],
    writes: &'a [WriteArg],
    scalars: &'a [i64],
    host_rng: &'a HostRng,
    mode: Mode,
}

impl<'a> Call<'a> {
    pub fn backend(&self) -> &'a dyn Backend {
        self.backend
    }

    /// Address of input `i` (the caller's, or its staging copy during capture). An input is
    /// read, never written, over its span: a staging copy holds only the span and is never
    /// copied back. Whatever the callable writes is a written region ([`Call::write`]), declared
    /// with its extent, which the engine checks against every staged input.
    pub fn input(&self, i: usize) -> Result<DevPtr> {
        self.ptrs
            .get(i)
            .copied()
            .ok_or_else(|| Error::Invalid(format!("no input {i}")))
    }

    /// Shape of input `i`.
    pub fn dims(&self, i: usize) -> Result<&'a [usize]> {
        self.inputs
            .get(i)
            .map(|t| t.dims)
            .ok_or_else(|| Error::Invalid(format!("no input {i}")))
    }

    /// Address of written region `i`.
    pub fn write(&self, i: usize) -> Result<DevPtr> {
        self.writes
            .get(i)
            .map(|w| w.ptr)
            .ok_or_else(|| Error::Invalid(format!("no written region {i}")))
    }

    /// Bytes the callable may write at written region `i`.
    pub fn write_bytes(&self, i: usize) -> Result<usize> {
        self.writes
            .get(i)
            .map(|w| w.bytes)
            .ok_or_else(|| Error::Invalid(format!("no written region {i}")))
    }

    pub fn scalar(&self, i: usize) -> Result<i64> {
        self.scalars
            .get(i)
            .copied()
            .ok_or_else(|| Error::Invalid(format!("no scalar {i}")))
    }

    /// Host randomness: the engine watches it, and a callable that draws from it is rejected.
    pub fn host_rng(&self) -> &'a HostRng {
        self.host_rng
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// Why a call ran eagerly.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fallback {
    /// The callable's verdict is not `captured` (catalog too wide or query length dynamic).
    OutOfScope,
    /// The arguments cannot be keyed: the number of written regions differs from the
    /// declaration (a different number of inputs or scalars is a [`Fallback::SignatureMiss`]).
    Unkeyable,
    /// No catalog entry has this exact signature.
    SignatureMiss,
    /// First call of a class: the probationary eager call, followed by capture.
    Probation,
    /// A written region or aliased input moved: the class was dropped on this call.
    AddressDrift,
    /// A written region does not lie inside one live buffer over its extent: the class was
    /// dropped on this call.
    WriteOutOfBounds,
    /// A written region overlaps an input the engine stages (or is bound to one): a replay
    /// would read the pre-call snapshot, or write the staging copy only. The class was dropped
    /// on this call.
    WriteOverlapsStaged,
    /// A buffer the class's graph touches was freed, or freed and reallocated (same address
    /// included), since capture: the class was dropped on this call.
    BufferFreed,
    /// A staged input sits at another alignment (address modulo [`STAGING_ALIGN`]) than at
    /// capture; the class is kept.
    AlignmentChanged,
    /// The class was dropped earlier (by any reason above, an RNG mismatch or a failed
    /// capture).
    ClassDropped,
    /// The callable reads host randomness: rejected for good.
    HostRng,
    /// The device RNG offset moved by other than the declared increment.
    RngMismatch,
    /// The capture pass issued other work than the probe at the same invocation: the callable
    /// depends on host state it keeps itself. Rejected for good.
    HostState,
    /// Capture failed (staging allocation, recording or instantiation; the error is in the
    /// log); the class is dropped. Counted on the later calls of the class as
    /// [`Fallback::ClassDropped`]; the call that tried to capture is its probe.
    CaptureFailed,
}

impl Fallback {
    pub const fn name(self) -> &'static str {
        match self {
            Fallback::OutOfScope => "out_of_scope",
            Fallback::Unkeyable => "unkeyable",
            Fallback::SignatureMiss => "signature_miss",
            Fallback::Probation => "probation",
            Fallback::AddressDrift => "address_drift",
            Fallback::WriteOutOfBounds => "write_out_of_bounds",
            Fallback::WriteOverlapsStaged => "write_overlaps_staged",
            Fallback::BufferFreed => "buffer_freed",
            Fallback::AlignmentChanged => "alignment_changed",
            Fallback::ClassDropped => "class_dropped",
            Fallback::HostRng => "host_rng",
            Fallback::RngMismatch => "rng_mismatch",
            Fallback::HostState => "host_state",
            Fallback::CaptureFailed => "capture_failed",
        }
    }
}

/// How one invocation was served.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Replayed { class: u16 },
    Eager(Fallback),
}

/// Description of a wrapped callable. It owns what it does not borrow from the generated
/// contract (a name made at run time, a derived [`Catalog`]), so an engine built from it frees
/// everything when dropped.
#[derive(Clone, Debug)]
pub struct ReplaySpec {
    /// The callable's name, or a name of the caller's (e.g. one engine per solver step).
    pub name: Cow<'static, str>,
    pub verdict: Verdict,
    pub granularity: Granularity,
    pub effects: Effects,
    /// Declared device RNG offset increment per call (0 unless `effects` contains `DEVICE_RNG`).
    pub rng_increment: u64,
    /// Number of written regions the callable declares.
    pub writes: usize,
    /// The signatures the engine keys on, by class.
    pub catalog: Catalog,
}

impl ReplaySpec {
    /// From generated contract data.
    pub fn from_callable(info: &'static CallableInfo, rng_increment: u64) -> ReplaySpec {
        ReplaySpec {
            name: Cow::Borrowed(info.name),
            verdict: info.verdict,
            granularity: info.granularity,
            effects: info.effects,
            rng_increment,
            writes: info.writes.len(),
            catalog: Catalog::Static(info.catalog),
        }
    }
}

/// Public state of one catalog class.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ClassStatus {
    /// Not seen yet.
    Fresh,
    /// Captured: replays from now on while its addresses hold.
    Captured { nodes: usize },
    /// Dropped for good, with the reason.
    Dropped(Fallback),
}

/// One line of the engine's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogEntry {
    pub call: u64,
    pub class: Option<u16>,
    pub event: String,
}

/// The engine's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineReport {
    pub callable: String,
    pub granularity: Option<Granularity>,
    pub catalog_classes: usize,
    pub classes_captured: usize,
    pub classes_dropped: usize,
    pub calls: u64,
    pub replays: u64,
    pub fallbacks: BTreeMap<Fallback, u64>,
    /// Static staging bytes held by captured classes.
    pub staging_bytes: usize,
    /// Bytes copied into staging buffers over all replays.
    pub staged_bytes_copied: u64,
    /// Graph nodes over all captured classes.
    pub graph_nodes: usize,
    /// Wall time of probe calls and of captures (instantiation included).
    pub probe_ms: f64,
    pub capture_ms: f64,
    pub rejected: Option<Fallback>,
    pub log: Vec<LogEntry>,
}

impl EngineReport {
    pub fn eager_calls(&self) -> u64 {
        self.fallbacks.values().sum()
    }

    pub fn fallback(&self, f: Fallback) -> u64 {
        self.fallbacks.get(&f).copied().unwrap_or(0)
    }
}

impl fmt::Display for EngineReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} calls, {} replays, {} eager; classes {}/{} captured, {} dropped; staging {} B; capture {:.3} ms (probe {:.3} ms); {} graph nodes",
            self.callable,
            self.calls,
            self.replays,
            self.eager_calls(),
            self.classes_captured,
            self.catalog_classes,
            self.classes_dropped,
            self.staging_bytes,
            self.capture_ms,
            self.probe_ms,
            self.graph_nodes
        )?;
        if !self.fallbacks.is_empty() {
            write!(f, "; fallbacks")?;
            for (k, v) in &self.fallbacks {
                write!(f, " {}={v}", k.name())?;
            }
        }
        if let Some(r) = self.rejected {
            write!(f, "; REJECTED ({})", r.name())?;
        }
        Ok(())
    }
}
