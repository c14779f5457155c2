//! The memory ledger: live and peak bytes by [`AllocKind`], and the per-backend state every
//! buffer and graph shares (the registry of live allocations, the capture gate).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use super::{AllocKind, bounds, gate};

/// Counts every byte a backend allocates, by kind, with the peak of the total, registers every
/// live allocation (address → length, identity) for the backends' bounds checks (`bounds.rs`),
/// and holds the capture gate, which a [`DeviceBuffer`](super::DeviceBuffer) dropped on another thread waits on.
#[derive(Debug, Default)]
pub struct MemCounter {
    /// The live allocations; a buffer is unregistered by [`DeviceBuffer`](super::DeviceBuffer)'s `Drop`, before its
    /// owner frees the memory.
    pub(crate) registry: bounds::Registry,
    /// Capture exclusivity ([`gate::CaptureGate`]).
    pub(crate) gate: gate::CaptureGate,
    live: [AtomicUsize; 8],
    peak: [AtomicUsize; 8],
    live_total: AtomicUsize,
    peak_total: AtomicUsize,
    allocations: AtomicU64,
}

impl MemCounter {
    pub(crate) fn add(&self, kind: AllocKind, bytes: usize) {
        let i = kind.index();
        let now = self.live[i].fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak[i].fetch_max(now, Ordering::Relaxed);
        let total = self.live_total.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak_total.fetch_max(total, Ordering::Relaxed);
        self.allocations.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts a new peak window: every peak becomes the live count now.
    pub(crate) fn reset_peak(&self) {
        for k in AllocKind::ALL {
            let live = self.live[k.index()].load(Ordering::Relaxed);
            self.peak[k.index()].store(live, Ordering::Relaxed);
        }
        let total = self.live_total.load(Ordering::Relaxed);
        self.peak_total.store(total, Ordering::Relaxed);
    }

    pub(crate) fn sub(&self, kind: AllocKind, bytes: usize) {
        self.live[kind.index()].fetch_sub(bytes, Ordering::Relaxed);
        self.live_total.fetch_sub(bytes, Ordering::Relaxed);
    }

    pub(crate) fn report(&self) -> MemoryReport {
        let mut by_kind = BTreeMap::new();
        for k in AllocKind::ALL {
            let live = self.live[k.index()].load(Ordering::Relaxed);
            let peak = self.peak[k.index()].load(Ordering::Relaxed);
            if peak > 0 {
                by_kind.insert(k, KindUsage { live, peak });
            }
        }
        MemoryReport {
            by_kind,
            live_total: self.live_total.load(Ordering::Relaxed),
            peak_total: self.peak_total.load(Ordering::Relaxed),
            allocations: self.allocations.load(Ordering::Relaxed),
            device_free: None,
            device_total: None,
        }
    }
}

/// Live and peak bytes of one kind.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub struct KindUsage {
    pub live: usize,
    pub peak: usize,
}

/// The runtime's memory ledger.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MemoryReport {
    pub by_kind: BTreeMap<AllocKind, KindUsage>,
    pub live_total: usize,
    pub peak_total: usize,
    /// Number of allocations made (graph memory entries included).
    pub allocations: u64,
    /// `cuMemGetInfo` (free, total) on CUDA; `None` on Host.
    pub device_free: Option<usize>,
    pub device_total: Option<usize>,
}

impl MemoryReport {
    pub fn live(&self, kind: AllocKind) -> usize {
        self.by_kind.get(&kind).map_or(0, |u| u.live)
    }
}

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = 1024.0 * 1024.0;
        write!(
            f,
            "live {:.3} MiB, peak {:.3} MiB (",
            self.live_total as f64 / MIB,
            self.peak_total as f64 / MIB
        )?;
        for (i, (k, u)) in self.by_kind.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{} {}/{} B", k.name(), u.live, u.peak)?;
        }
        write!(f, ")")?;
        if let (Some(free), Some(total)) = (self.device_free, self.device_total) {
            write!(
                f,
                "; cuMemGetInfo free {:.1} / total {:.1} MiB",
                free as f64 / MIB,
                total as f64 / MIB
            )?;
        }
        Ok(())
    }
}
