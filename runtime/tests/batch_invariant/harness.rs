//! The batch-invariance check: a layer run on one unit (112 rows, or one session's CFG pair of
//! batch entries) and on 8 units with that unit placed at several positions among random ones
//! must give the unit's slice of every buffer bit for bit.

use std::sync::Arc;

use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::ops::{Ctx, GemmPath, OpError};

use super::common::data;

/// Units in the batched run (the issue's `M = 8 × 112`).
pub const UNITS: usize = 8;
/// Where the checked unit sits in the batched run.
pub const POSITIONS: [usize; 3] = [0, 3, 7];

/// How a buffer's words are filled.
#[derive(Clone, Copy, Debug)]
pub enum Init {
    /// f32 in [-1, 1).
    F32,
    /// u32 ids below this bound.
    Ids(u32),
}

/// A buffer whose size scales with the units: `outer × units × inner` words, the unit `u`'s
/// part the `inner` words at `o·units·inner + u·inner` for every `o < outer` (`outer = 1`: the
/// unit axis leads; a transpose's output has its rows as `outer`).
#[derive(Clone, Copy, Debug)]
pub struct Batched {
    pub outer: usize,
    pub inner: usize,
    pub init: Init,
}

/// A unit-major buffer of `inner` f32 words per unit.
pub const fn per_unit(inner: usize) -> Batched {
    Batched {
        outer: 1,
        inner,
        init: Init::F32,
    }
}

/// The closure running the layer: `(ctx, batched buffers, shared buffers, units)`.
pub type Run<'a> =
    dyn Fn(&Ctx<'_>, &[DeviceBuffer], &[DeviceBuffer], usize) -> Result<(), OpError> + 'a;

/// A layer under test: its batched buffers (inputs and outputs alike: every one is compared,
/// so in-place outputs are covered and untouched inputs must stay as they were), shared inputs
/// (weights: the same data in every run) and how to run it.
pub struct Layer<'a> {
    pub name: String,
    pub batched: Vec<Batched>,
    pub shared: Vec<Vec<f32>>,
    pub run: &'a Run<'a>,
}

fn words(init: Init, seed: u64, n: usize) -> Vec<u32> {
    let v = data(seed, n);
    match init {
        Init::F32 => v.iter().map(|x| x.to_bits()).collect(),
        Init::Ids(bound) => v
            .iter()
            .map(|x| ((x + 1.0) * 0.5 * bound as f32) as u32 % bound.max(1))
            .collect(),
    }
}

/// Seed of buffer `i`, outer index `o`, unit `u` of the run with the checked unit at `pos`
/// (`None`: the checked unit itself, the same data in every run).
fn seed(i: usize, o: usize, unit: Option<(usize, usize)>) -> u64 {
    let base = 1_000_003 * (i as u64 + 1) + 7_919 * o as u64;
    match unit {
        None => base,
        Some((u, pos)) => base ^ (0xA5A5_0000 + 131 * u as u64 + 17 * pos as u64 + 1) << 20,
    }
}

/// Runs `layer` over `units` units with the checked unit at `pos`; returns that unit's words of
/// every batched buffer.
fn run_once(be: &Arc<dyn Backend>, layer: &Layer<'_>, units: usize, pos: usize) -> Vec<Vec<u32>> {
    let bufs: Vec<DeviceBuffer> = layer
        .batched
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mut v = Vec::with_capacity(b.outer * units * b.inner);
            for o in 0..b.outer {
                for u in 0..units {
                    let s = seed(i, o, (u != pos).then_some((u, pos)));
                    v.extend(words(b.init, s, b.inner));
                }
            }
            be.alloc_from(&v, AllocKind::Other).unwrap()
        })
        .collect();
    let shared: Vec<DeviceBuffer> = layer
        .shared
        .iter()
        .map(|v| be.alloc_from(v, AllocKind::Other).unwrap())
        .collect();
    let cx = Ctx::new(be.as_ref(), None).with_gemm(GemmPath::Invariant);
    (layer.run)(&cx, &bufs, &shared, units)
        .unwrap_or_else(|e| panic!("{} at {units} units: {e}", layer.name));
    be.synchronize().unwrap();
    layer
        .batched
        .iter()
        .zip(&bufs)
        .map(|(b, d)| {
            let all: Vec<u32> = be.download(d.ptr(), b.outer * units * b.inner).unwrap();
            (0..b.outer)
                .flat_map(|o| {
                    let at = (o * units + pos) * b.inner;
                    all[at..at + b.inner].to_vec()
                })
                .collect()
        })
        .collect()
}

/// Checks `layer` on `be`: alone, then at every position of [`POSITIONS`] among [`UNITS`]
/// units, every batched buffer's unit slice bit-equal to the alone run's.
pub fn check(be: &Arc<dyn Backend>, layer: &Layer<'_>) {
    let alone = run_once(be, layer, 1, 0);
    for pos in POSITIONS {
        let got = run_once(be, layer, UNITS, pos);
        for (i, (g, a)) in got.iter().zip(&alone).enumerate() {
            let bad: Vec<usize> = (0..g.len()).filter(|&j| g[j] != a[j]).collect();
            assert!(
                bad.is_empty(),
                "{} ({}): buffer {i}, unit at {pos} of {UNITS}: {} of {} words differ from the \
                 unit alone, first at {}: {:e} vs {:e}",
                layer.name,
                be.device_name(),
                bad.len(),
                g.len(),
                bad[0],
                f32::from_bits(g[bad[0]]),
                f32::from_bits(a[bad[0]])
            );
        }
    }
    println!(
        "batch-invariant ({}): {} — unit at {POSITIONS:?} of {UNITS} equals the unit alone",
        be.device_name(),
        layer.name
    );
}
