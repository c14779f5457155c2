//! Shared test harness: every test runs on the Host backend and, where a GPU exists, on CUDA.
//! Without a GPU the CUDA variant prints its skip reason and returns; with `DCC_REQUIRE_GPU=1`
//! (set on the GPU machine) a missing GPU fails the test instead.
#![allow(dead_code)]

use std::sync::Arc;

use dcc_runtime::backend::{self, Backend};

pub fn host() -> Arc<dyn Backend> {
    backend::host()
}

pub fn cuda() -> Option<Arc<dyn Backend>> {
    match backend::cuda(0) {
        Ok(b) => Some(b),
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
                    super::$name(b);
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
