//! Shared test harness: every test runs on the Host backend and, where a GPU exists, on CUDA.
//! Without a GPU the CUDA variant prints its skip reason and returns; with `DCC_REQUIRE_GPU=1`
//! (set on the GPU machine) a missing GPU fails the test instead.
#![allow(dead_code)]

use std::cell::Cell;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};

use dcc_runtime::backend::{self, Backend};

pub fn host() -> Arc<dyn Backend> {
    backend::host()
}

/// The GPU's turn: the CUDA variants of one test binary run one at a time, whatever
/// `--test-threads` says. Several of them assert what no other thread's GPU work may disturb (a
/// capture is exclusive, a freed block is the next allocation's), and the device and its
/// allocator are one per process; the Host variants still run in parallel.
static GPU: Mutex<()> = Mutex::new(());

thread_local! {
    /// How many [`Gpu`] values this thread holds: only the first takes the turn, so a test that
    /// asks again (a helper taking its own) does not wait for itself.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// The CUDA backend for one test, holding the GPU's turn until dropped; derefs to the backend.
pub struct Gpu {
    backend: Arc<dyn Backend>,
    _turn: Option<MutexGuard<'static, ()>>,
}

impl Gpu {
    /// The backend, for a function that takes it by value.
    pub fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }
}

impl Deref for Gpu {
    type Target = Arc<dyn Backend>;

    fn deref(&self) -> &Arc<dyn Backend> {
        &self.backend
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get().saturating_sub(1)));
    }
}

/// The CUDA backend and the GPU's turn ([`Gpu`]), or `None` (printing why) where no GPU exists;
/// with `DCC_REQUIRE_GPU=1` a missing GPU fails the test instead.
pub fn cuda() -> Option<Gpu> {
    // a test that panicked while holding the turn poisons it; the next one still runs
    let turn = (HELD.with(Cell::get) == 0).then(|| GPU.lock().unwrap_or_else(|p| p.into_inner()));
    match backend::cuda(0) {
        Ok(backend) => {
            HELD.with(|h| h.set(h.get() + 1));
            Some(Gpu {
                backend,
                _turn: turn,
            })
        }
        Err(e) => {
            if std::env::var("DCC_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("DCC_REQUIRE_GPU=1 but no GPU: {e}");
            }
            println!("SKIP (cuda): {e}");
            None
        }
    }
}

/// `both!(f)` makes `f::host` and `f::cuda` tests calling `f(backend)`.
#[macro_export]
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn host() {
                super::$name(super::common::host());
            }
            #[test]
            fn cuda() {
                if let Some(b) = super::common::cuda() {
                    super::$name(b.backend());
                }
            }
        }
    )*};
}

/// Deterministic pseudo-random floats in [-1, 1).
pub fn data(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

pub fn bytes_of(b: &dyn Backend, p: dcc_runtime::DevPtr, n: usize) -> Vec<u8> {
    b.download::<u8>(p, n).expect("download")
}
