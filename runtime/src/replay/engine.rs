//! The engine: classes, probe and capture, replay.

use std::sync::Arc;
use std::time::Instant;

use crate::DevPtr;
use crate::backend::{Backend, DeviceBuffer, Graph};
use crate::contract::{Effects, Verdict};
use crate::error::{Error, Result};
use crate::rng::HostRng;

use super::premise::{self, key, matches};
use super::{
    Call, ClassStatus, EngineReport, Fallback, Invocation, LogEntry, Mode, Outcome, ReplaySpec,
    SignatureRef, WriteArg,
};

/// Where the engine reads the device generator state for effect certification.
pub type RngProbe = Option<DevPtr>;

/// Runs the callable once with the given addresses.
fn run<F>(
    f: &F,
    backend: &dyn Backend,
    host_rng: &HostRng,
    inv: &Invocation<'_>,
    ptrs: &[DevPtr],
    writes: &[WriteArg],
    mode: Mode,
) -> Result<()>
where
    F: Fn(&mut Call<'_>) -> Result<()>,
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

struct Captured {
    graph: Graph,
    /// Staging buffers of non-aliased inputs (None for aliased ones).
    staging: Vec<Option<DeviceBuffer>>,
    /// Addresses baked into the graph, per input (for a staged input: where its copy lives in
    /// its staging buffer, at the caller's address modulo `STAGING_ALIGN`).
    bound_inputs: Vec<DevPtr>,
    bound_writes: Vec<DevPtr>,
}

enum Class {
    Fresh,
    Captured(Box<Captured>),
    Dropped(Fallback),
}

/// The engine. `F` is the callable: `Fn`, so a closure keeps no plain mutable state between
/// calls (its per-call values come through the [`Call`]; module docs, "Host values").
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
    F: Fn(&mut Call<'_>) -> Result<()>,
{
    /// Wraps `f`. `device_rng` is the address of the device generator state the callable may
    /// advance (required when `spec.effects` contains `DEVICE_RNG`; with `None`, device randomness is
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
        if !spec.effects.contains(Effects::DEVICE_RNG) && spec.rng_increment != 0 {
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
        let effects = spec.effects;
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
        if effects.contains(Effects::HOST_RNG) {
            e.reject(Fallback::HostRng, None, "declared host randomness".into());
        } else if effects.contains(Effects::DEVICE_RNG) && device_rng.is_none() {
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

    /// Eager calls so far, by reason (the report's counters, without copying the log).
    pub fn fallbacks(&self) -> &std::collections::BTreeMap<Fallback, u64> {
        &self.report.fallbacks
    }

    /// Device bytes the engine holds now: `(staging, graphs)`, over its captured classes.
    pub fn device_bytes(&self) -> (usize, usize) {
        self.classes
            .iter()
            .filter_map(|c| match c {
                Class::Captured(c) => Some(c),
                _ => None,
            })
            .fold((0, 0), |(s, g), c| {
                let staged: usize = c.staging.iter().flatten().map(|b| b.bytes()).sum();
                (s + staged, g + c.graph.bytes())
            })
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
            .zip(self.spec.catalog.iter())
            .position(|(&ck, sig)| ck == k && matches(sig, inv))
            .map(|i| i as u16)
    }

    /// The signature of class `ci` (a class index the engine numbered from its catalog).
    fn signature(&self, ci: usize) -> Result<SignatureRef<'_>> {
        self.spec
            .catalog
            .get(ci)
            .ok_or_else(|| Error::Invalid(format!("{}: no catalog class {ci}", self.spec.name)))
    }

    fn count(&mut self, why: Fallback) -> Outcome {
        *self.report.fallbacks.entry(why).or_insert(0) += 1;
        Outcome::Eager(why)
    }

    /// Runs the invocation eagerly at the caller's addresses (`Mode::Eager` or `Mode::Probe`).
    fn run_eager(&mut self, inv: &Invocation<'_>, mode: Mode) -> Result<()> {
        let ptrs: Vec<DevPtr> = inv.inputs.iter().map(|t| t.ptr).collect();
        run(
            &self.f,
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

    /// Drops class `class` for good: its graph and staging buffers are released.
    fn drop_class(&mut self, class: u16, why: Fallback, what: String) {
        self.classes[class as usize] = Class::Dropped(why);
        self.log(Some(class), format!("class dropped: {what}"));
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
        let sig = self.signature(ci)?;
        // The premises of every call, before any byte moves (module docs, step 2).
        let broken = match &self.classes[ci] {
            Class::Dropped(_) => return self.eager(inv, Fallback::ClassDropped),
            Class::Captured(c) => drift(sig, inv, c).map(|what| (Fallback::AddressDrift, what)),
            Class::Fresh => None,
        }
        .or_else(|| premise::check_writes(&*self.backend, sig, inv));
        if let Some((why, what)) = broken {
            self.drop_class(class, why, what);
            return self.eager(inv, why);
        }
        match &self.classes[ci] {
            Class::Captured(_) => self.replay(inv, class),
            _ => self.probe_and_capture(inv, class),
        }
    }

    /// Replays captured class `class` for an invocation whose addresses and writes passed the
    /// premises; the alignment and live-buffer premises are checked here.
    fn replay(&mut self, inv: &Invocation<'_>, class: u16) -> Result<Outcome> {
        let ci = class as usize;
        let sig = self.signature(ci)?;
        let Class::Captured(c) = &self.classes[ci] else {
            return Err(Error::Invalid(format!("class {class} is not captured")));
        };
        if premise::misaligned(sig, inv, &c.bound_inputs).is_some() {
            return self.eager(inv, Fallback::AlignmentChanged);
        }
        if let Err(e) = c.graph.check_live() {
            self.drop_class(class, Fallback::BufferFreed, format!("graph: {e}"));
            return self.eager(inv, Fallback::BufferFreed);
        }
        let mut copied = 0u64;
        for ((stage, a), bound) in c.staging.iter().zip(inv.inputs).zip(&c.bound_inputs) {
            if stage.is_some() {
                let n = a.span_bytes();
                self.backend.dtod(*bound, a.ptr, n)?;
                copied += n as u64;
            }
        }
        match self.backend.launch_graph(&c.graph) {
            Ok(()) => {}
            // Freed by another thread since `check_live`: nothing ran (the staging copies only
            // wrote the engine's own buffers).
            Err(e @ (Error::Dangling(_) | Error::Reallocated(_))) => {
                self.drop_class(class, Fallback::BufferFreed, format!("graph launch: {e}"));
                return self.eager(inv, Fallback::BufferFreed);
            }
            Err(e) => return Err(e),
        }
        self.report.staged_bytes_copied += copied;
        self.report.replays += 1;
        Ok(Outcome::Replayed { class })
    }

    /// The first call of a class: probe (this invocation's eager execution, both generators
    /// observed, its work traced), then capture (traced), then rewind whatever the capture
    /// pass consumed; the two traces must agree. A failure to capture drops the class (logged);
    /// an error of the backend itself is returned (the probe may have run).
    fn probe_and_capture(&mut self, inv: &Invocation<'_>, class: u16) -> Result<Outcome> {
        let ci = class as usize;
        // (iii) the probe.
        let t0 = Instant::now();
        let host_before = self.host_rng.state();
        let dev_before = self.read_device_rng()?;
        self.backend.begin_trace();
        let probed = self.run_eager(inv, Mode::Probe);
        let probe_trace = self.backend.end_trace();
        probed?;
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
            let want = if self.spec.effects.contains(Effects::DEVICE_RNG) {
                self.spec.rng_increment
            } else {
                0
            };
            let delta = a[1].wrapping_sub(b[1]);
            if a[0] != b[0] || delta != want {
                self.drop_class(
                    class,
                    Fallback::RngMismatch,
                    format!(
                        "device RNG moved seed {}->{}, offset +{delta}, declared +{want}",
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
        self.backend.begin_trace();
        let captured = self.capture(inv, ci);
        let capture_trace = self.backend.end_trace();
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
                let sig = self.signature(ci)?;
                match premise::first_difference(
                    sig,
                    inv,
                    &c.bound_inputs,
                    &probe_trace,
                    capture_trace,
                ) {
                    Some(diff) => self.reject(
                        Fallback::HostState,
                        Some(class),
                        format!("the capture pass issued other work than the probe: {diff}"),
                    ),
                    None => {
                        self.log(Some(class), format!("captured: {} nodes", c.graph.nodes()));
                        self.classes[ci] = Class::Captured(c);
                    }
                }
            }
            Err(e) => {
                self.drop_class(
                    class,
                    Fallback::CaptureFailed,
                    format!("capture failed: {e}"),
                );
            }
        }
        Ok(outcome)
    }

    /// Records class `ci` at the invocation's shapes: staging buffers for the non-aliased
    /// inputs are allocated first (capture never allocates), each holding its copy at the
    /// caller's address modulo `STAGING_ALIGN`; aliased inputs and written regions are bound at
    /// the invocation's addresses. The capture is always ended once begun.
    fn capture(&mut self, inv: &Invocation<'_>, ci: usize) -> Result<Box<Captured>> {
        let sig = self.signature(ci)?;
        let mut staging = Vec::with_capacity(sig.inputs.len());
        let mut bound_inputs = Vec::with_capacity(sig.inputs.len());
        for (s, a) in sig.inputs.iter().zip(inv.inputs) {
            if s.aliased {
                staging.push(None);
                bound_inputs.push(a.ptr);
            } else {
                let (buf, at) = premise::stage(&*self.backend, a)?;
                bound_inputs.push(at);
                staging.push(Some(buf));
            }
        }
        self.backend.begin_capture()?;
        let recorded = run(
            &self.f,
            &*self.backend,
            &self.host_rng,
            inv,
            &bound_inputs,
            inv.writes,
            Mode::Capture,
        );
        let graph = self.backend.end_capture();
        recorded?;
        Ok(Box::new(Captured {
            graph: graph?,
            staging,
            bound_inputs,
            bound_writes: inv.writes.iter().map(|w| w.ptr).collect(),
        }))
    }
}

/// What moved since capture, if a written region or an aliased input did.
fn drift(sig: SignatureRef<'_>, inv: &Invocation<'_>, c: &Captured) -> Option<String> {
    if let Some(w) = inv
        .writes
        .iter()
        .zip(&c.bound_writes)
        .position(|(a, b)| a.ptr != *b)
    {
        return Some(format!(
            "written region {w} moved {} -> {}",
            c.bound_writes[w], inv.writes[w].ptr
        ));
    }
    sig.inputs
        .iter()
        .zip(inv.inputs)
        .zip(&c.bound_inputs)
        .position(|((s, a), b)| s.aliased && a.ptr != *b)
        .map(|i| {
            format!(
                "aliased input `{}` moved {} -> {}",
                sig.inputs.get(i).map_or("?", |t| t.name),
                c.bound_inputs[i],
                inv.inputs[i].ptr
            )
        })
}
