//! Randomness the replay engine can observe.
//!
//! * [`DeviceRng`]: counter-based Philox4x32-10 whose `[seed, offset]` live in device memory
//!   (16 bytes: its own allocation, or an arena region so sessions each own a stream). Kernels
//!   read the state from device memory and a captured `philox_advance` node moves the offset by
//!   the call's declared increment, so a graph replay draws exactly what eager would. Host and
//!   CUDA produce the same bits (`dcc_kernels::philox`).
//! * [`HostRng`]: a host-side generator (SplitMix64) standing for any host randomness a callable
//!   could read. Values drawn on the host during capture would be frozen into the graph, so the
//!   engine rejects any callable observed drawing from it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dcc_kernels::{Arg, LaunchDims, rng as k};

use crate::DevPtr;
use crate::backend::{AllocKind, Backend, DeviceBuffer};
use crate::error::{Error, Result};

/// Bytes of a device RNG state: `[seed: u64, offset: u64]`.
pub const STATE_BYTES: usize = 16;

/// The device generator state and the launches that use it.
///
/// The launches are safe: the state is 16 bytes this generator owns ([`DeviceRng::new`]) or was
/// promised ([`DeviceRng::at`]), and every output is a [`DeviceBuffer`] whose size, alignment
/// and backend are checked against the count before the launch.
pub struct DeviceRng {
    backend: Arc<dyn Backend>,
    state: DevPtr,
    _buf: Option<DeviceBuffer>,
}

impl DeviceRng {
    /// Allocates a state (counted as [`AllocKind::Rng`]) holding `[seed, 0]`.
    pub fn new(backend: Arc<dyn Backend>, seed: u64) -> Result<DeviceRng> {
        let buf = backend.alloc(STATE_BYTES, AllocKind::Rng)?;
        let rng = DeviceRng {
            state: buf.ptr(),
            backend,
            _buf: Some(buf),
        };
        rng.write(seed, 0)?;
        Ok(rng)
    }

    /// Uses 16 bytes at `state` (e.g. an arena region) as the generator state.
    ///
    /// # Safety
    /// `state` addresses 16 bytes (8-aligned) inside a live buffer of `backend` that stays
    /// alive, and is written by no other work, until every launch of this generator has
    /// completed (every replay of a graph one is captured into, too): the generator's launches
    /// read and advance `[seed, offset]` there unchecked.
    pub unsafe fn at(backend: Arc<dyn Backend>, state: DevPtr) -> DeviceRng {
        DeviceRng {
            backend,
            state,
            _buf: None,
        }
    }

    pub fn state_ptr(&self) -> DevPtr {
        self.state
    }

    /// Reads `(seed, offset)` (synchronizes).
    pub fn read(&self) -> Result<(u64, u64)> {
        let v: Vec<u64> = self.backend.download(self.state, 2)?;
        Ok((v[0], v[1]))
    }

    pub fn write(&self, seed: u64, offset: u64) -> Result<()> {
        self.backend.upload(self.state, &[seed, offset])
    }

    /// Checks that `buf` holds `n` floats on this generator's backend, for an `i64` count.
    fn check_floats(&self, buf: &DeviceBuffer, n: usize) -> Result<i64> {
        buf.check_elems::<f32>(self.backend.kind(), 0, n)?;
        i64::try_from(n).map_err(|_| Error::Invalid(format!("{n} floats overflow an i64 count")))
    }

    /// `out[0..n] = uniform[0, 1)` at the current offset; does not advance. `out` must hold `n`
    /// floats (checked).
    pub fn uniform(&self, out: &DeviceBuffer, n: usize) -> Result<()> {
        let count = self.check_floats(out, n)?;
        // SAFETY: the kernel reads the 16-byte state (owned by `self`, or promised by the caller
        // of `DeviceRng::at`) and writes `out[0..n]`, which the check above put inside the live
        // buffer `out` of this backend (f32-aligned); `out` is a different buffer from an owned
        // state. Freeing `out` later is stream-ordered after this work (Host: under the stream
        // lock; CUDA: `cuMemFreeAsync` on the same stream); replaying a graph captured here
        // after freeing `out` is refused by `launch_graph` on both backends (Host re-validates
        // the tape; CUDA re-checks the allocations the capture touched).
        unsafe {
            self.backend.launch(
                &k::UNIFORM_F32,
                LaunchDims::linear(n.div_ceil(4), 256),
                &[Arg::Ptr(self.state), Arg::Ptr(out.ptr()), Arg::I64(count)],
            )
        }
    }

    /// `out[i] = x[i] + scale * uniform_i` at the current offset; does not advance. `out` and
    /// `x` (which may be the same buffer) must hold `n` floats (checked).
    pub fn add_uniform(
        &self,
        out: &DeviceBuffer,
        x: &DeviceBuffer,
        n: usize,
        scale: f32,
    ) -> Result<()> {
        let count = self.check_floats(out, n)?;
        self.check_floats(x, n)?;
        // SAFETY: the kernel reads the state (as in `uniform`), reads `x[0..n]` and writes
        // `out[0..n]`, both inside their live buffers of this backend (checked above); the two
        // start at their buffers' starts, so they are the same range (the kernel reads `x[i]`
        // before writing `out[i]`, which allows it) or disjoint.
        unsafe {
            self.backend.launch(
                &k::ADD_UNIFORM_F32,
                LaunchDims::linear(n, 256),
                &[
                    Arg::Ptr(out.ptr()),
                    Arg::Ptr(x.ptr()),
                    Arg::Ptr(self.state),
                    Arg::I64(count),
                    Arg::F32(scale),
                ],
            )
        }
    }

    /// Advances the offset on the stream (a capturable kernel).
    pub fn advance(&self, increment: u64) -> Result<()> {
        // SAFETY: one thread adds to the second word of the 16-byte state, owned by `self`
        // (allocated in `new` with STATE_BYTES = 16 and kept alive in `_buf`) or promised live
        // and 8-aligned by the caller of `DeviceRng::at`.
        unsafe {
            self.backend.launch(
                &k::ADVANCE,
                LaunchDims::blocks(1, 1),
                &[Arg::Ptr(self.state), Arg::U64(increment)],
            )
        }
    }
}

/// Host randomness (SplitMix64) with an observable state.
#[derive(Debug, Default)]
pub struct HostRng {
    state: AtomicU64,
}

impl HostRng {
    pub fn new(seed: u64) -> HostRng {
        HostRng {
            state: AtomicU64::new(seed),
        }
    }

    pub fn next_u64(&self) -> u64 {
        let s = self
            .state
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform f32 in `[0, 1)`.
    pub fn next_f32(&self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / 16_777_216.0)
    }

    /// The generator state, for snapshots.
    pub fn state(&self) -> u64 {
        self.state.load(Ordering::Relaxed)
    }

    /// Rewinds to a snapshot.
    pub fn restore(&self, state: u64) {
        self.state.store(state, Ordering::Relaxed)
    }
}
