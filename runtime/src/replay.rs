//! `ExactShapeReplay`: one graph per exact catalog signature, replayed bit-identically to eager,
//! failing closed to eager whenever a premise does not hold.
//!
//! A callable is a closure that launches work on the backend through a [`Call`]: it takes every
//! tensor address from the call (never from its own captured variables), so the engine can hand
//! it staging buffers at capture and the caller's buffers when it runs eagerly.
//!
//! Admission of one invocation, in order (paper eq. admit):
//!
//! 0. the callable is in scope (verdict `captured`) and has not been rejected for good;
//! 1. **signature**: the key, computed from integers only (device ordinal, dtypes, ranks, dims,
//!    strides, scalar args), matches a catalog entry exactly — else eager (`signature_miss`);
//! 2. **address stability**: every written region and every contract-owned (aliased) input is at
//!    the address the class was captured with — else the class is dropped for good, the drift is
//!    logged, and this call runs eager (`address_drift`; later calls: `class_dropped`). Other
//!    inputs are copied into the class's static staging buffers;
//! 3. **effects**, certified once per class before capture: a probationary eager call (this
//!    invocation's own execution) observes the host generator and the device Philox state. Host
//!    randomness read → the callable is rejected for good (`host_rng`). Device offset moved by
//!    other than the declared increment → class dropped (`rng_mismatch`). Then the class is
//!    captured (capture executes nothing); host/device generator states consumed by the capture
//!    pass are rewound to the post-probe snapshot, so probe + capture leave exactly the state
//!    eager execution leaves.
//!
//! Every eager call is counted by its reason ([`Fallback`]); [`EngineReport`] summarizes.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use crate::DevPtr;
use crate::backend::{AllocKind, Backend, DeviceBuffer, Graph};
use crate::contract::{CallableInfo, DType, Effects, Granularity, Signature, Verdict};
use crate::error::{Error, Result};
use crate::rng::HostRng;

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

/// The arguments of one call of a wrapped callable.
#[derive(Copy, Clone, Debug)]
pub struct Invocation<'a> {
    /// In catalog order (`Signature::inputs`).
    pub inputs: &'a [TensorArg<'a>],
    /// Addresses of the written regions, in the callable's declared `writes` order.
    pub writes: &'a [DevPtr],
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
    writes: &'a [DevPtr],
    scalars: &'a [i64],
    host_rng: &'a HostRng,
    mode: Mode,
}

impl<'a> Call<'a> {
    pub fn backend(&self) -> &'a dyn Backend {
        self.backend
    }

    /// Address of input `i` (the caller's, or its staging buffer during capture).
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
            .copied()
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
    /// The class was dropped earlier (drift, RNG mismatch or failed capture).
    ClassDropped,
    /// The callable reads host randomness: rejected for good.
    HostRng,
    /// The device RNG offset moved by other than the declared increment.
    RngMismatch,
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
            Fallback::ClassDropped => "class_dropped",
            Fallback::HostRng => "host_rng",
            Fallback::RngMismatch => "rng_mismatch",
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

/// Static description of a wrapped callable.
#[derive(Copy, Clone, Debug)]
pub struct ReplaySpec {
    pub name: &'static str,
    pub verdict: Verdict,
    pub granularity: Granularity,
    pub effects: Effects,
    /// Declared device RNG offset increment per call (0 unless `effects` is `DeviceRng`).
    pub rng_increment: u64,
    /// Number of written regions the callable declares.
    pub writes: usize,
    pub catalog: &'static [Signature],
}

impl ReplaySpec {
    /// From generated contract data.
    pub fn from_callable(info: &'static CallableInfo, rng_increment: u64) -> ReplaySpec {
        ReplaySpec {
            name: info.name,
            verdict: info.verdict,
            granularity: info.granularity,
            effects: info.effects,
            rng_increment,
            writes: info.writes.len(),
            catalog: info.catalog,
        }
    }
}

struct Captured {
    graph: Graph,
    /// Staging buffers of non-aliased inputs (None for aliased ones).
    staging: Vec<Option<DeviceBuffer>>,
    /// Addresses baked into the graph, per input.
    bound_inputs: Vec<DevPtr>,
    bound_writes: Vec<DevPtr>,
}

enum Class {
    Fresh,
    Captured(Box<Captured>),
    Dropped(Fallback),
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

/// FNV-1a over integers.
struct KeyHasher(u64);

impl KeyHasher {
    fn new() -> Self {
        KeyHasher(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

fn dtype_code(d: DType) -> u64 {
    d as u8 as u64
}

/// The signature key: integers only, no tensor data.
fn key<'a>(
    device: u32,
    inputs: impl ExactSizeIterator<Item = (&'a [usize], &'a [usize], DType)>,
    scalars: &[i64],
) -> u64 {
    let mut h = KeyHasher::new();
    h.add(device as u64);
    h.add(inputs.len() as u64);
    for (dims, strides, dt) in inputs {
        h.add(dtype_code(dt));
        h.add(dims.len() as u64);
        dims.iter().for_each(|&d| h.add(d as u64));
        h.add(strides.len() as u64);
        strides.iter().for_each(|&s| h.add(s as u64));
    }
    h.add(scalars.len() as u64);
    scalars.iter().for_each(|&s| h.add(s as u64));
    h.0
}

fn matches(sig: &Signature, inv: &Invocation<'_>) -> bool {
    sig.inputs.len() == inv.inputs.len()
        && sig.scalars == inv.scalars
        && sig
            .inputs
            .iter()
            .zip(inv.inputs)
            .all(|(s, a)| s.dims == a.dims && s.strides == a.strides && s.dtype == a.dtype)
}

/// Where the engine reads the device generator state for effect certification.
pub type RngProbe = Option<DevPtr>;

/// Runs the callable once with the given addresses.
fn run<F>(
    f: &mut F,
    backend: &dyn Backend,
    host_rng: &HostRng,
    inv: &Invocation<'_>,
    ptrs: &[DevPtr],
    writes: &[DevPtr],
    mode: Mode,
) -> Result<()>
where
    F: FnMut(&mut Call<'_>) -> Result<()>,
{
    f(&mut Call {
        backend,
        inputs: inv.inputs,
        ptrs,
        writes,
        scalars: inv.scalars,
        host_rng,
        mode,
    })
}

/// The engine. `F` is the callable.
pub struct ExactShapeReplay<F> {
    backend: Arc<dyn Backend>,
    spec: ReplaySpec,
    f: F,
    host_rng: Arc<HostRng>,
    device_rng: RngProbe,
    keys: Vec<u64>,
    classes: Vec<Class>,
    report: EngineReport,
}

impl<F> ExactShapeReplay<F>
where
    F: FnMut(&mut Call<'_>) -> Result<()>,
{
    /// Wraps `f`. `device_rng` is the address of the device generator state the callable may
    /// advance (required when `spec.effects` is `DeviceRng`; with `None`, device randomness is
    /// unobservable and such a callable stays eager).
    pub fn new(
        backend: Arc<dyn Backend>,
        spec: ReplaySpec,
        host_rng: Arc<HostRng>,
        device_rng: RngProbe,
        f: F,
    ) -> Result<Self> {
        if spec.catalog.len() > usize::from(u16::MAX) + 1 {
            // Classes are numbered by u16 (`Outcome::Replayed`): a longer catalog would alias
            // class indices.
            return Err(Error::Invalid(format!(
                "{}: {} catalog classes (at most 65536)",
                spec.name,
                spec.catalog.len()
            )));
        }
        if spec.effects != Effects::DeviceRng && spec.rng_increment != 0 {
            return Err(Error::Invalid(format!(
                "{}: an RNG increment without device RNG effects",
                spec.name
            )));
        }
        let device = backend.device_ordinal();
        let keys = spec
            .catalog
            .iter()
            .map(|s| {
                key(
                    device,
                    s.inputs.iter().map(|t| (t.dims, t.strides, t.dtype)),
                    s.scalars,
                )
            })
            .collect();
        let classes = spec.catalog.iter().map(|_| Class::Fresh).collect();
        let report = EngineReport {
            callable: spec.name.to_string(),
            granularity: Some(spec.granularity),
            catalog_classes: spec.catalog.len(),
            ..Default::default()
        };
        let mut e = ExactShapeReplay {
            backend,
            spec,
            f,
            host_rng,
            device_rng,
            keys,
            classes,
            report,
        };
        if spec.effects == Effects::HostRng {
            e.reject(Fallback::HostRng, None, "declared host randomness".into());
        } else if spec.effects == Effects::DeviceRng && device_rng.is_none() {
            e.reject(
                Fallback::RngMismatch,
                None,
                "device RNG declared but no generator state given".into(),
            );
        }
        Ok(e)
    }

    pub fn spec(&self) -> &ReplaySpec {
        &self.spec
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// Counters so far.
    pub fn report(&self) -> EngineReport {
        let mut r = self.report.clone();
        r.classes_captured = 0;
        r.classes_dropped = 0;
        r.staging_bytes = 0;
        r.graph_nodes = 0;
        for c in &self.classes {
            match c {
                Class::Captured(c) => {
                    r.classes_captured += 1;
                    r.staging_bytes += c.staging.iter().flatten().map(|b| b.bytes()).sum::<usize>();
                    r.graph_nodes += c.graph.nodes();
                }
                Class::Dropped(_) => r.classes_dropped += 1,
                Class::Fresh => {}
            }
        }
        r
    }

    /// State of every catalog class, in catalog order.
    pub fn classes(&self) -> Vec<ClassStatus> {
        self.classes
            .iter()
            .map(|c| match c {
                Class::Fresh => ClassStatus::Fresh,
                Class::Captured(c) => ClassStatus::Captured {
                    nodes: c.graph.nodes(),
                },
                Class::Dropped(f) => ClassStatus::Dropped(*f),
            })
            .collect()
    }

    fn log(&mut self, class: Option<u16>, event: String) {
        self.report.log.push(LogEntry {
            call: self.report.calls,
            class,
            event,
        });
    }

    fn reject(&mut self, why: Fallback, class: Option<u16>, event: String) {
        self.report.rejected = Some(why);
        self.log(class, format!("rejected for good: {event}"));
        // Graphs already captured are released: nothing of this callable replays again.
        for c in &mut self.classes {
            *c = Class::Dropped(why);
        }
    }

    fn class_of(&self, inv: &Invocation<'_>) -> Option<u16> {
        let k = key(
            self.backend.device_ordinal(),
            inv.inputs.iter().map(|t| (t.dims, t.strides, t.dtype)),
            inv.scalars,
        );
        self.keys
            .iter()
            .zip(self.spec.catalog)
            .position(|(&ck, sig)| ck == k && matches(sig, inv))
            .map(|i| i as u16)
    }

    fn count(&mut self, why: Fallback) -> Outcome {
        *self.report.fallbacks.entry(why).or_insert(0) += 1;
        Outcome::Eager(why)
    }

    /// Runs the invocation eagerly at the caller's addresses (`Mode::Eager` or `Mode::Probe`).
    fn run_eager(&mut self, inv: &Invocation<'_>, mode: Mode) -> Result<()> {
        let ptrs: Vec<DevPtr> = inv.inputs.iter().map(|t| t.ptr).collect();
        run(
            &mut self.f,
            &*self.backend,
            &self.host_rng,
            inv,
            &ptrs,
            inv.writes,
            mode,
        )
    }

    fn eager(&mut self, inv: &Invocation<'_>, why: Fallback) -> Result<Outcome> {
        self.run_eager(inv, Mode::Eager)?;
        Ok(self.count(why))
    }

    fn read_device_rng(&self) -> Result<Option<[u64; 2]>> {
        match self.device_rng {
            Some(p) => {
                let v: Vec<u64> = self.backend.download(p, 2)?;
                Ok(Some([v[0], v[1]]))
            }
            None => Ok(None),
        }
    }

    /// Runs one invocation: replay if admitted, eager otherwise.
    pub fn call(&mut self, inv: &Invocation<'_>) -> Result<Outcome> {
        self.report.calls += 1;
        if self.spec.verdict != Verdict::Captured {
            return self.eager(inv, Fallback::OutOfScope);
        }
        if let Some(r) = self.report.rejected {
            return self.eager(inv, r);
        }
        if inv.writes.len() != self.spec.writes {
            return self.eager(inv, Fallback::Unkeyable);
        }
        let Some(class) = self.class_of(inv) else {
            return self.eager(inv, Fallback::SignatureMiss);
        };
        let ci = class as usize;
        match &self.classes[ci] {
            Class::Dropped(_) => self.eager(inv, Fallback::ClassDropped),
            Class::Fresh => self.probe_and_capture(inv, class),
            Class::Captured(c) => {
                let sig = &self.spec.catalog[ci];
                let drift_w = inv
                    .writes
                    .iter()
                    .zip(&c.bound_writes)
                    .position(|(a, b)| a != b);
                let drift_i = sig
                    .inputs
                    .iter()
                    .zip(inv.inputs)
                    .zip(&c.bound_inputs)
                    .position(|((s, a), b)| s.aliased && a.ptr != *b);
                let what = match (drift_w, drift_i) {
                    (Some(w), _) => Some(format!(
                        "written region {w} moved {} -> {}",
                        c.bound_writes[w], inv.writes[w]
                    )),
                    (None, Some(i)) => Some(format!(
                        "aliased input `{}` moved {} -> {}",
                        sig.inputs[i].name, c.bound_inputs[i], inv.inputs[i].ptr
                    )),
                    (None, None) => None,
                };
                if let Some(what) = what {
                    self.classes[ci] = Class::Dropped(Fallback::AddressDrift);
                    self.log(Some(class), format!("class dropped: {what}"));
                    return self.eager(inv, Fallback::AddressDrift);
                }
                let mut copied = 0u64;
                for ((stage, a), s) in c.staging.iter().zip(inv.inputs).zip(sig.inputs) {
                    if let (Some(buf), false) = (stage, s.aliased) {
                        let n = a.span_bytes();
                        self.backend.dtod(buf.ptr(), a.ptr, n)?;
                        copied += n as u64;
                    }
                }
                self.backend.launch_graph(&c.graph)?;
                self.report.staged_bytes_copied += copied;
                self.report.replays += 1;
                Ok(Outcome::Replayed { class })
            }
        }
    }

    /// The first call of a class: probe (this invocation's eager execution, both generators
    /// observed), then capture, then rewind whatever the capture pass consumed. A failure to
    /// capture drops the class (logged); an error of the backend itself is returned (the probe
    /// may have run).
    fn probe_and_capture(&mut self, inv: &Invocation<'_>, class: u16) -> Result<Outcome> {
        let ci = class as usize;
        // (iii) the probe.
        let t0 = Instant::now();
        let host_before = self.host_rng.state();
        let dev_before = self.read_device_rng()?;
        self.run_eager(inv, Mode::Probe)?;
        let host_after = self.host_rng.state();
        let dev_after = self.read_device_rng()?;
        self.report.probe_ms += t0.elapsed().as_secs_f64() * 1e3;
        if host_after != host_before {
            self.reject(
                Fallback::HostRng,
                Some(class),
                "the probe drew host randomness".into(),
            );
            return Ok(self.count(Fallback::HostRng));
        }
        if let (Some(b), Some(a)) = (dev_before, dev_after) {
            let want = if self.spec.effects == Effects::DeviceRng {
                self.spec.rng_increment
            } else {
                0
            };
            let delta = a[1].wrapping_sub(b[1]);
            if a[0] != b[0] || delta != want {
                self.classes[ci] = Class::Dropped(Fallback::RngMismatch);
                self.log(
                    Some(class),
                    format!(
                        "class dropped: device RNG moved seed {}->{}, offset +{delta}, declared +{want}",
                        b[0], a[0]
                    ),
                );
                return Ok(self.count(Fallback::RngMismatch));
            }
        }
        let outcome = self.count(Fallback::Probation);

        // Capture, then rewind what the capture pass consumed (nothing, for a callable that
        // only records stream work) to the post-probe state.
        let t1 = Instant::now();
        let captured = self.capture(inv, ci);
        let host_during = self.host_rng.state();
        self.host_rng.restore(host_after);
        if let (Some(p), Some(a)) = (self.device_rng, dev_after)
            && self.read_device_rng()? != Some(a)
        {
            self.backend.upload(p, &a)?;
        }
        self.report.capture_ms += t1.elapsed().as_secs_f64() * 1e3;
        if host_during != host_after {
            self.reject(
                Fallback::HostRng,
                Some(class),
                "the capture pass drew host randomness".into(),
            );
            return Ok(outcome);
        }
        match captured {
            Ok(c) => {
                self.log(Some(class), format!("captured: {} nodes", c.graph.nodes()));
                self.classes[ci] = Class::Captured(c);
            }
            Err(e) => {
                self.classes[ci] = Class::Dropped(Fallback::CaptureFailed);
                self.log(Some(class), format!("class dropped: capture failed: {e}"));
            }
        }
        Ok(outcome)
    }

    /// Records class `ci` at the invocation's shapes: staging buffers for the non-aliased
    /// inputs are allocated first (capture never allocates), aliased inputs and written regions
    /// are bound at the invocation's addresses. The capture is always ended once begun.
    fn capture(&mut self, inv: &Invocation<'_>, ci: usize) -> Result<Box<Captured>> {
        let sig = &self.spec.catalog[ci];
        let mut staging = Vec::with_capacity(sig.inputs.len());
        let mut bound_inputs = Vec::with_capacity(sig.inputs.len());
        for (s, a) in sig.inputs.iter().zip(inv.inputs) {
            if s.aliased {
                staging.push(None);
                bound_inputs.push(a.ptr);
            } else {
                let buf = self
                    .backend
                    .alloc(a.span_bytes().max(1), AllocKind::Staging)?;
                bound_inputs.push(buf.ptr());
                staging.push(Some(buf));
            }
        }
        let bound_writes = inv.writes.to_vec();
        self.backend.begin_capture()?;
        let recorded = run(
            &mut self.f,
            &*self.backend,
            &self.host_rng,
            inv,
            &bound_inputs,
            &bound_writes,
            Mode::Capture,
        );
        let graph = self.backend.end_capture();
        recorded?;
        Ok(Box::new(Captured {
            graph: graph?,
            staging,
            bound_inputs,
            bound_writes,
        }))
    }
}
