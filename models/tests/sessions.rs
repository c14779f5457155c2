//! Sessions free what they allocate: 1,000 replay sessions of the tiny model (Host backend),
//! each created and dropped, leave the process's heap and the backend's device ledger where
//! they were after the first ten.
//!
//! Creating a session builds its state (the contract's arena, or the stock store's buffers)
//! and its replay engines (the stock arms derive a staged catalog from the contract's; the
//! step-clock arms name one engine per solver step). Nothing here runs the model: what is
//! measured is what building and dropping a session costs, so the loop is fast enough for CI.
//! While a session lives, the ledger holds exactly the bytes it reports (`Session::bytes`: its
//! state; no staging buffer or graph before a call) on top of the per-process bytes (weights,
//! the flow's workspace, the arena's per-process part: the regions whose lifetime is one call),
//! which is what the ledger returns to once it is dropped. A state-rule session's state is the
//! arena's per-session part, `SESSION_BYTES` of the generated module, byte for byte.
//!
//! Live heap bytes are counted by this binary's global allocator (every `alloc`, `dealloc` and
//! `realloc` of every thread: deterministic, unlike the RSS, which is printed for reference).
//! This file holds one test, so no other test's allocations run beside the loop.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{Arm, ContractView, Session, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, SolverParams};

/// The system allocator, counting the bytes it holds for the program.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// adds bookkeeping on an atomic counter (which does not allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `GlobalAlloc::alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator (so by `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`; on failure the old block stays allocated and uncounted
        // changes are none.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Sessions created and dropped.
const SESSIONS: usize = 1000;
/// Sessions after which the baseline is taken (lazy one-time allocations settle by then).
const WARM_UP: usize = 10;
/// Heap bytes the count may differ by between the two points (allocator noise: a collection
/// that grew once, never per session).
const HEAP_SLACK: isize = 4096;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/token2wav_tiny")
}

/// Resident pages of this process × the page size (from `/proc/self/statm`), if readable.
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

#[test]
fn a_thousand_replay_sessions_leave_heap_and_ledger_flat() {
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let limits = DeviceLimits {
        max_call_tokens: 154,
        carry_frames: contract.keeps.carry.bound(),
    };
    let be = dcc_runtime::backend::host();
    let dev = Arc::new(DeviceFlow::new(be.clone(), &ws, &cfg, limits).unwrap());
    // both stores (stock: R, Rc; state rule: SR, SRc) at both clocks
    let arms = [Arm::R, Arm::Rc, Arm::SR, Arm::SRc];
    // what the process holds without a session: the weights, the flow's workspace and the
    // arena's per-process part (placed up front here; the first state-rule session would)
    let shared = dev.process_arena(&contract.arena).unwrap();
    assert_eq!(shared.bytes(), dcc_generated::token2wav_tiny::PROCESS_BYTES);
    assert!(shared.bytes() > 0, "the solver workspace is per process");
    let process = be.memory().live_total;
    let mut per_session = Vec::new();
    let t0 = std::time::Instant::now();
    let mut at_warm_up = None;
    for i in 1..=SESSIONS {
        let arm = arms[i % arms.len()];
        let s = Session::new(dev.clone(), contract, arm, SolverParams::default()).unwrap();
        assert_eq!(s.arm(), arm);
        // a session holds exactly what it reports, and creating it captured nothing
        let held = be.memory().live_total - process;
        let bytes = s.bytes();
        assert_eq!(held, bytes.total(), "{arm:?}: ledger vs {bytes:?}");
        assert_eq!((bytes.staging, bytes.graphs), (0, 0), "{arm:?}");
        if arm.state_rule() {
            assert_eq!(
                bytes.state,
                dcc_generated::token2wav_tiny::SESSION_BYTES,
                "{arm:?}: a state-rule session holds the arena's per-session part"
            );
        }
        if i <= arms.len() {
            per_session.push((arm, held));
        }
        drop(s);
        if i == WARM_UP {
            at_warm_up = Some((LIVE.load(Ordering::Relaxed), be.memory().live_total));
        }
    }
    let (heap, ledger) = (LIVE.load(Ordering::Relaxed), be.memory().live_total);
    let (heap0, ledger0) = at_warm_up.unwrap();
    let secs = t0.elapsed().as_secs_f64();
    println!("per process: {process} B of device memory; per session: {per_session:?}");
    println!(
        "after {WARM_UP} sessions: heap {heap0} B, ledger {ledger0} B; after {SESSIONS}: heap \
         {heap} B ({:+} B), ledger {ledger} B ({:+} B); RSS {} KiB; {secs:.2} s",
        heap - heap0,
        ledger as i64 - ledger0 as i64,
        rss_bytes().map_or(-1, |b| (b / 1024) as i64)
    );
    assert_eq!(
        ledger, process,
        "device bytes still held after dropping every session"
    );
    assert!(
        (heap - heap0).abs() <= HEAP_SLACK,
        "heap grew by {} B over {} sessions ({:.1} B a session)",
        heap - heap0,
        SESSIONS - WARM_UP,
        (heap - heap0) as f64 / (SESSIONS - WARM_UP) as f64
    );
}
