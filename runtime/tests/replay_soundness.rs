//! Every way a replayed graph could differ from eager without the engine noticing, one
//! regression test each (`replay_soundness_*`): on Host always, on CUDA where a GPU exists.

mod common;

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{bytes_of, data};
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::contract::{DType, Effects, Granularity, Signature, TensorSig, Verdict};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::replay::{
    Call, Catalog, ExactShapeReplay, Fallback, Invocation, Mode, Outcome, ReplaySpec, TensorArg,
    WriteArg,
};
use dcc_runtime::rng::HostRng;
use dcc_runtime::{Arg, DevPtr, Error, Gemm, LaunchDims, Result};

const N: usize = 256;

const fn tensor(name: &'static str, dims: &'static [usize], aliased: bool) -> TensorSig {
    TensorSig {
        name,
        dims,
        strides: &[1],
        dtype: DType::F32,
        aliased,
    }
}

const fn one_class(inputs: &'static [TensorSig]) -> [Signature; 1] {
    [Signature {
        callable: "t",
        class: 0,
        attended: 0,
        inputs,
        scalars: &[],
    }]
}

/// One staged input of N floats.
static STAGED: [Signature; 1] = one_class(&[tensor("x", &[N], false)]);
/// One staged input of N/2 floats.
static STAGED_HALF: [Signature; 1] = one_class(&[tensor("x", &[N / 2], false)]);
/// One aliased input of N floats.
static ALIASED: [Signature; 1] = one_class(&[tensor("c", &[N], true)]);

fn spec(catalog: &'static [Signature], writes: usize, verdict: Verdict) -> ReplaySpec {
    ReplaySpec {
        name: Cow::Borrowed("t"),
        verdict,
        granularity: Granularity::Chunk,
        effects: Effects::NONE,
        rng_increment: 0,
        writes,
        catalog: Catalog::Static(catalog),
    }
}

/// The eager reference (out of scope: never captures) and the engine under test.
fn pair<F, G>(
    b: &Arc<dyn Backend>,
    catalog: &'static [Signature],
    writes: usize,
    eager: F,
    replay: G,
) -> (ExactShapeReplay<F>, ExactShapeReplay<G>)
where
    F: Fn(&mut Call<'_>) -> Result<()>,
    G: Fn(&mut Call<'_>) -> Result<()>,
{
    b.preload(ks::KERNELS).unwrap();
    let rng = || Arc::new(HostRng::new(1));
    (
        ExactShapeReplay::new(
            b.clone(),
            spec(catalog, writes, Verdict::OutWidth),
            rng(),
            None,
            eager,
        )
        .unwrap(),
        ExactShapeReplay::new(
            b.clone(),
            spec(catalog, writes, Verdict::Captured),
            rng(),
            None,
            replay,
        )
        .unwrap(),
    )
}

/// A 1-D f32 input of `n` floats at `ptr`.
fn vec_arg(ptr: DevPtr, dims: &[usize]) -> TensorArg<'_> {
    TensorArg {
        ptr,
        dims,
        strides: &[1],
        dtype: DType::F32,
    }
}

/// Calls the engine with writes given as (address, bytes the callable may write there).
fn call<F: Fn(&mut Call<'_>) -> Result<()>>(
    e: &mut ExactShapeReplay<F>,
    inputs: &[TensorArg<'_>],
    writes: &[(DevPtr, usize)],
) -> Result<Outcome> {
    let writes: Vec<WriteArg> = writes
        .iter()
        .map(|&(ptr, bytes)| WriteArg { ptr, bytes })
        .collect();
    e.call(&Invocation {
        inputs,
        writes: &writes,
        scalars: &[],
    })
}

/// `out[i] = in[i] * a + b` over `n` floats.
///
/// # Safety
/// `out` and `inp` each hold `n` floats in live buffers of `b` that outlive the work (and every
/// replay of a graph it is captured into); they are equal or disjoint.
unsafe fn affine(
    b: &dyn Backend,
    out: DevPtr,
    inp: DevPtr,
    n: usize,
    a: f32,
    c: f32,
) -> Result<()> {
    // SAFETY: forwarded from the caller.
    unsafe {
        b.launch(
            &ks::AFFINE,
            LaunchDims::linear(n, 128),
            &[
                Arg::Ptr(out),
                Arg::Ptr(inp),
                Arg::I64(n as i64),
                Arg::F32(a),
                Arg::F32(c),
            ],
        )
    }
}

fn f32_buf(b: &Arc<dyn Backend>, seed: u64, n: usize) -> DeviceBuffer {
    b.alloc_from(&data(seed, n), AllocKind::Other).unwrap()
}

/// Hole 1: a written region also bound as a staged (non-aliased) input; the callable updates
/// it through the input. Replay would update the staging copy and never the region.
fn replay_soundness_staged_write(b: Arc<dyn Backend>) {
    // SAFETY (the callable): input 0 is the test's `s` (N floats) or its staging copy of the
    // same dims; AFFINE in place over N floats.
    let through_input =
        |c: &mut Call<'_>| unsafe { affine(c.backend(), c.input(0)?, c.input(0)?, N, 0.5, 1.0) };
    let (mut eager, mut replay) = pair(&b, &STAGED, 1, through_input, through_input);
    let (se, sr) = (f32_buf(&b, 1, N), f32_buf(&b, 1, N));
    for i in 0..4 {
        call(&mut eager, &[vec_arg(se.ptr(), &[N])], &[(se.ptr(), N * 4)]).unwrap();
        let o = call(
            &mut replay,
            &[vec_arg(sr.ptr(), &[N])],
            &[(sr.ptr(), N * 4)],
        )
        .unwrap();
        let want = if i == 0 {
            Fallback::WriteOverlapsStaged
        } else {
            Fallback::ClassDropped
        };
        assert_eq!(o, Outcome::Eager(want), "call {i}");
        assert_eq!(
            bytes_of(&*b, se.ptr(), N * 4),
            bytes_of(&*b, sr.ptr(), N * 4),
            "call {i}: the written region differs from eager"
        );
    }
}

/// Hole 2: a staged input inside a written region: eager reads the bytes the callable just
/// wrote, a replay would read the pre-call snapshot. A staged input outside every write's
/// extent (same allocation) still replays.
fn replay_soundness_write_overlaps_staged_input(b: Arc<dyn Backend>) {
    // write 0: N floats updated in place; write 1: N/2 floats = 2 * input 0.
    // SAFETY (the callable): write 0 is N floats of the test's `s`/`t`, write 1 N/2 floats of
    // `o`, input 0 N/2 floats of `s`/`t` (or its staging copy); every range lies in its buffer.
    let f = |c: &mut Call<'_>| unsafe {
        affine(c.backend(), c.write(0)?, c.write(0)?, N, 0.5, 1.0)?;
        affine(c.backend(), c.write(1)?, c.input(0)?, N / 2, 2.0, 0.0)
    };
    let (mut eager, mut replay) = pair(&b, &STAGED_HALF, 2, f, f);
    let (se, sr) = (f32_buf(&b, 2, N), f32_buf(&b, 2, N));
    let (oe, or) = (f32_buf(&b, 3, N), f32_buf(&b, 3, N));
    let quarter = N / 4 * 4;
    for i in 0..4 {
        let xe = se.ptr().offset(quarter);
        let xr = sr.ptr().offset(quarter);
        call(
            &mut eager,
            &[vec_arg(xe, &[N / 2])],
            &[(se.ptr(), N * 4), (oe.ptr(), N * 2)],
        )
        .unwrap();
        let o = call(
            &mut replay,
            &[vec_arg(xr, &[N / 2])],
            &[(sr.ptr(), N * 4), (or.ptr(), N * 2)],
        )
        .unwrap();
        let want = if i == 0 {
            Fallback::WriteOverlapsStaged
        } else {
            Fallback::ClassDropped
        };
        assert_eq!(o, Outcome::Eager(want), "call {i}");
        assert_eq!(
            bytes_of(&*b, oe.ptr(), N * 4),
            bytes_of(&*b, or.ptr(), N * 4),
            "call {i}: the output differs from eager"
        );
    }
    // Disjoint: write 0 is the first N floats of a 2N-float buffer, input 0 lies after it.
    let (mut eager, mut replay) = pair(&b, &STAGED_HALF, 2, f, f);
    let (te, tr) = (f32_buf(&b, 4, 2 * N), f32_buf(&b, 4, 2 * N));
    let mut replays = 0;
    for i in 0..4 {
        let (xe, xr) = (te.ptr().offset(N * 4), tr.ptr().offset(N * 4));
        call(
            &mut eager,
            &[vec_arg(xe, &[N / 2])],
            &[(te.ptr(), N * 4), (oe.ptr(), N * 2)],
        )
        .unwrap();
        let o = call(
            &mut replay,
            &[vec_arg(xr, &[N / 2])],
            &[(tr.ptr(), N * 4), (or.ptr(), N * 2)],
        )
        .unwrap();
        replays += u32::from(matches!(o, Outcome::Replayed { .. }));
        assert_eq!(
            bytes_of(&*b, te.ptr(), 8 * N),
            bytes_of(&*b, tr.ptr(), 8 * N),
            "call {i}"
        );
        assert_eq!(
            bytes_of(&*b, oe.ptr(), N * 4),
            bytes_of(&*b, or.ptr(), N * 4),
            "call {i}"
        );
    }
    assert_eq!(replays, 3, "a staged input outside every write replays");
    assert_eq!(replay.report().fallback(Fallback::Probation), 1);
}

/// A written region whose extent leaves its buffer breaks the premise before any byte moves.
fn replay_soundness_write_out_of_bounds(b: Arc<dyn Backend>) {
    // SAFETY: write 0 is N floats of `o` (the declared extent is larger, never written), input 0
    // N floats of `x` or its staging copy.
    let f =
        |c: &mut Call<'_>| unsafe { affine(c.backend(), c.write(0)?, c.input(0)?, N, 2.0, 0.0) };
    let (mut eager, mut replay) = pair(&b, &STAGED, 1, f, f);
    let (x, oe, or) = (f32_buf(&b, 15, N), f32_buf(&b, 0, N), f32_buf(&b, 0, N));
    for i in 0..3 {
        call(&mut eager, &[vec_arg(x.ptr(), &[N])], &[(oe.ptr(), N * 4)]).unwrap();
        let o = call(
            &mut replay,
            &[vec_arg(x.ptr(), &[N])],
            &[(or.ptr(), N * 4 + 4)],
        )
        .unwrap();
        let want = if i == 0 {
            Fallback::WriteOutOfBounds
        } else {
            Fallback::ClassDropped
        };
        assert_eq!(o, Outcome::Eager(want), "call {i}");
        assert_eq!(
            bytes_of(&*b, oe.ptr(), N * 4),
            bytes_of(&*b, or.ptr(), N * 4)
        );
    }
}

/// A staged input that later sits at another alignment than at capture runs eager (counted),
/// and the class replays again once it is back.
fn replay_soundness_staging_alignment_changes(b: Arc<dyn Backend>) {
    // SAFETY: write 0 is N floats of `oe`/`or`, input 0 N floats inside `x` (N + 128 floats, offsets up to 260 bytes) or
    // its staging copy.
    let f =
        |c: &mut Call<'_>| unsafe { affine(c.backend(), c.write(0)?, c.input(0)?, N, 0.5, 2.0) };
    let (mut eager, mut replay) = pair(&b, &STAGED, 1, f, f);
    let (x, oe, or) = (
        f32_buf(&b, 16, N + 128),
        f32_buf(&b, 0, N),
        f32_buf(&b, 0, N),
    );
    let mut outcomes = Vec::new();
    for off in [4, 4, 8, 4, 260] {
        let p = x.ptr().offset(off);
        call(&mut eager, &[vec_arg(p, &[N])], &[(oe.ptr(), N * 4)]).unwrap();
        outcomes.push(call(&mut replay, &[vec_arg(p, &[N])], &[(or.ptr(), N * 4)]).unwrap());
        assert_eq!(
            bytes_of(&*b, oe.ptr(), N * 4),
            bytes_of(&*b, or.ptr(), N * 4),
            "offset {off}"
        );
    }
    let r = Outcome::Replayed { class: 0 };
    assert_eq!(
        outcomes,
        [
            Outcome::Eager(Fallback::Probation),
            r,
            Outcome::Eager(Fallback::AlignmentChanged),
            r,
            r
        ]
    );
}

/// Hole 3: host values the callable keeps itself (a counter, a private generator, behaviour
/// that depends on the mode) would be frozen into the graph.
fn replay_soundness_hidden_host_state(b: Arc<dyn Backend>) {
    fn run<F: Fn(&mut Call<'_>) -> Result<()>>(
        b: &Arc<dyn Backend>,
        what: &str,
        mk: impl Fn() -> F,
    ) {
        let (mut eager, mut replay) = pair(b, &STAGED, 1, mk(), mk());
        let (x, oe, or) = (f32_buf(b, 5, N), f32_buf(b, 6, N), f32_buf(b, 6, N));
        for i in 0..4 {
            call(&mut eager, &[vec_arg(x.ptr(), &[N])], &[(oe.ptr(), N * 4)]).unwrap();
            let o = call(&mut replay, &[vec_arg(x.ptr(), &[N])], &[(or.ptr(), N * 4)]).unwrap();
            let want = if i == 0 {
                Fallback::Probation
            } else {
                Fallback::HostState
            };
            assert_eq!(o, Outcome::Eager(want), "{what}: call {i}");
            if i == 0 {
                // The first call's probe runs before any second run of the callable.
                assert_eq!(
                    bytes_of(&**b, oe.ptr(), N * 4),
                    bytes_of(&**b, or.ptr(), N * 4),
                    "{what}: call {i}"
                );
            }
        }
        let r = replay.report();
        assert_eq!(r.rejected, Some(Fallback::HostState), "{what}");
        assert_eq!((r.replays, r.classes_captured), (0, 0), "{what}");
        assert!(
            r.log
                .iter()
                .any(|l| l.event.contains("other work than the probe")),
            "{what}: {:?}",
            r.log
        );
    }
    // SAFETY (the three callables): write 0 is N floats of `oe`/`or`, input 0 N floats of `x`
    // or its staging copy.
    run(&b, "counter", || {
        let n = Arc::new(AtomicU32::new(0));
        move |c: &mut Call<'_>| unsafe {
            let k = n.fetch_add(1, Ordering::Relaxed) as f32;
            affine(c.backend(), c.write(0)?, c.input(0)?, N, 1.0 + k, 0.0)
        }
    });
    run(&b, "private generator", || {
        let rng = HostRng::new(77);
        move |c: &mut Call<'_>| unsafe {
            affine(
                c.backend(),
                c.write(0)?,
                c.input(0)?,
                N,
                rng.next_f32(),
                0.0,
            )
        }
    });
    run(&b, "mode", || {
        |c: &mut Call<'_>| unsafe {
            let a = if c.mode() == Mode::Capture { 3.0 } else { 2.0 };
            affine(c.backend(), c.write(0)?, c.input(0)?, N, a, 0.0)
        }
    });
}

/// Hole 4: another thread's work during a capture must neither be recorded into the graph nor
/// be lost: it waits for the capture to end, then runs. So does another thread's capture.
fn replay_soundness_capture_is_exclusive(b: Arc<dyn Backend>) {
    b.preload(ks::KERNELS).unwrap();
    let src = b.alloc_from(&[7u32; N], AllocKind::Other).unwrap();
    let dst = b.alloc(N * 4, AllocKind::Other).unwrap();
    let mine = b.alloc(N * 4, AllocKind::Other).unwrap();
    let theirs = b.alloc(N * 4, AllocKind::Other).unwrap();
    let (s, d, t) = (src.ptr(), dst.ptr(), theirs.ptr());
    b.begin_capture().unwrap();
    let done = Arc::new(AtomicU32::new(0));
    let copier = {
        let (b, done) = (b.clone(), done.clone());
        std::thread::spawn(move || {
            assert!(
                !b.is_capturing(),
                "a capture belongs to the thread that began it"
            );
            let r = b.dtod(d, s, N * 4);
            done.fetch_add(1, Ordering::SeqCst);
            r
        })
    };
    let capturer = {
        let (b, done) = (b.clone(), done.clone());
        std::thread::spawn(move || {
            b.begin_capture()?;
            let r = b.memset_d32(t, 9, N);
            let g = b.end_capture();
            done.fetch_add(1, Ordering::SeqCst);
            let g = r.and(g)?;
            // A graph stays on the thread that made it (not `Send`): launched here.
            let before = b.download::<u32>(t, N)?;
            b.launch_graph(&g)?;
            Ok::<_, Error>((g.nodes(), before))
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let done_during_capture = done.load(Ordering::SeqCst);
    b.memset_d32(mine.ptr(), 3, N).unwrap();
    let g = b.end_capture().unwrap();
    copier.join().unwrap().unwrap();
    let (their_nodes, before_launch) = capturer.join().unwrap().unwrap();
    b.synchronize().unwrap();
    assert_eq!(
        done_during_capture, 0,
        "another thread's work completed while this thread captured"
    );
    assert_eq!(g.nodes(), 1, "the graph holds this thread's work only");
    assert_eq!(their_nodes, 1, "and theirs holds theirs");
    assert_eq!(before_launch, vec![0; N], "their capture executed nothing");
    assert_eq!(
        b.download::<u32>(d, N).unwrap(),
        vec![7; N],
        "the copy landed"
    );
    b.upload(d, &[0u32; N]).unwrap();
    b.launch_graph(&g).unwrap();
    b.synchronize().unwrap();
    assert_eq!(b.download::<u32>(mine.ptr(), N).unwrap(), vec![3; N]);
    assert_eq!(b.download::<u32>(t, N).unwrap(), vec![9; N]);
    assert_eq!(
        b.download::<u32>(d, N).unwrap(),
        vec![0; N],
        "a replay never re-runs the other thread's copy"
    );
}

/// Hole 5a: a buffer the callable reaches by itself (weights it looks up) is replaced and the
/// old one freed: the class is dropped and the call runs eager.
fn replay_soundness_freed_buffer_is_fallback(b: Arc<dyn Backend>) {
    let weights = |cell: Arc<Mutex<DevPtr>>| {
        // SAFETY: write 0 is N floats of `oe`/`or`, input 0 N floats of `x` (or its staging
        // copy), the cell holds the address of a live weight buffer of N floats (the test
        // swaps it only between calls, for a buffer it keeps alive).
        move |c: &mut Call<'_>| unsafe {
            let w = *cell.lock().unwrap();
            c.backend().launch(
                &ks::MIX,
                LaunchDims::linear(N, 128),
                &[
                    Arg::Ptr(c.write(0)?),
                    Arg::Ptr(c.input(0)?),
                    Arg::Ptr(w),
                    Arg::I64(N as i64),
                    Arg::F32(1.0),
                    Arg::F32(1.0),
                ],
            )
        }
    };
    let (we, wr) = (f32_buf(&b, 8, N), f32_buf(&b, 8, N));
    let (ce, cr) = (
        Arc::new(Mutex::new(we.ptr())),
        Arc::new(Mutex::new(wr.ptr())),
    );
    let (mut eager, mut replay) = pair(&b, &STAGED, 1, weights(ce.clone()), weights(cr.clone()));
    let (x, oe, or) = (f32_buf(&b, 9, N), f32_buf(&b, 0, N), f32_buf(&b, 0, N));
    let step = |eager: &mut ExactShapeReplay<_>, replay: &mut ExactShapeReplay<_>| {
        call(eager, &[vec_arg(x.ptr(), &[N])], &[(oe.ptr(), N * 4)]).unwrap();
        let o = call(replay, &[vec_arg(x.ptr(), &[N])], &[(or.ptr(), N * 4)]).unwrap();
        assert_eq!(
            bytes_of(&*b, oe.ptr(), N * 4),
            bytes_of(&*b, or.ptr(), N * 4)
        );
        o
    };
    step(&mut eager, &mut replay);
    assert!(matches!(
        step(&mut eager, &mut replay),
        Outcome::Replayed { .. }
    ));
    // New weights (allocated before the old ones are freed: another address), old ones freed.
    let (we2, wr2) = (f32_buf(&b, 10, N), f32_buf(&b, 10, N));
    *ce.lock().unwrap() = we2.ptr();
    *cr.lock().unwrap() = wr2.ptr();
    drop((we, wr));
    assert_eq!(
        step(&mut eager, &mut replay),
        Outcome::Eager(Fallback::BufferFreed)
    );
    assert_eq!(
        step(&mut eager, &mut replay),
        Outcome::Eager(Fallback::ClassDropped)
    );
    let r = replay.report();
    assert_eq!(
        (r.fallback(Fallback::BufferFreed), r.classes_dropped),
        (1, 1)
    );
}

/// Hole 5b: an aliased input freed and reallocated at the same address passes every address
/// check, yet it is another buffer: the class is dropped.
fn replay_soundness_realloc_same_address(b: Arc<dyn Backend>) {
    // SAFETY: write 0 is N floats of `o`, input 0 the N floats of `c`.
    let f =
        |c: &mut Call<'_>| unsafe { affine(c.backend(), c.write(0)?, c.input(0)?, N, 2.0, 1.0) };
    let (_, mut replay) = pair(&b, &ALIASED, 1, f, f);
    let o = f32_buf(&b, 0, N);
    let mut carry = f32_buf(&b, 11, N);
    let addr = carry.ptr();
    for i in 0..2 {
        let r = call(&mut replay, &[vec_arg(addr, &[N])], &[(o.ptr(), N * 4)]).unwrap();
        assert_eq!(i == 1, matches!(r, Outcome::Replayed { .. }), "call {i}");
    }
    drop(carry);
    let mut spare = Vec::new();
    loop {
        let c = f32_buf(&b, 12, N);
        if c.ptr() == addr {
            carry = c;
            break;
        }
        assert!(spare.len() < 64, "the allocator never reused {addr}");
        spare.push(c);
    }
    let r = call(
        &mut replay,
        &[vec_arg(carry.ptr(), &[N])],
        &[(o.ptr(), N * 4)],
    )
    .unwrap();
    assert_eq!(r, Outcome::Eager(Fallback::BufferFreed));
    let want: Vec<f32> = data(12, N).iter().map(|v| v * 2.0 + 1.0).collect();
    assert_eq!(b.download::<f32>(o.ptr(), N).unwrap(), want);
}

/// Hole 5c (backend): a graph over a buffer freed and reallocated at the same address is
/// refused on both backends (whole allocations, with their identity).
fn replay_soundness_graph_refuses_reallocated_buffer(b: Arc<dyn Backend>) {
    let mut x = b.alloc(N * 4, AllocKind::Other).unwrap();
    let addr = x.ptr();
    b.begin_capture().unwrap();
    b.memset_d32(addr, 5, N).unwrap();
    let g = b.end_capture().unwrap();
    b.launch_graph(&g).unwrap();
    drop(x);
    let mut spare = Vec::new();
    loop {
        let y = b.alloc(N * 4, AllocKind::Other).unwrap();
        if y.ptr() == addr {
            x = y;
            break;
        }
        assert!(spare.len() < 64, "the allocator never reused {addr}");
        spare.push(y);
    }
    assert_eq!(g.check_live(), Err(Error::Reallocated(addr.0)));
    assert_eq!(b.launch_graph(&g), Err(Error::Reallocated(addr.0)));
    assert_eq!(b.download::<u32>(x.ptr(), N).unwrap(), vec![0; N]);
}

/// Hole 6: a staged GEMM operand at an address 4 bytes past a 256-byte boundary: the graph's
/// GEMMs see the operand at the same alignment as eager (cuBLAS/cuBLASLt plans depend on it),
/// and replay equals eager bit for bit.
fn replay_soundness_gemm_alignment(b: Arc<dyn Backend>) {
    const M: usize = 24;
    const K: usize = 40;
    const NN: usize = 12;
    static GEMM: [Signature; 1] = one_class(&[
        tensor("a", &[M * K], false),
        tensor("b", &[K * NN], true),
        tensor("bias", &[M], true),
    ]);
    let seen = Arc::new(AtomicU64::new(u64::MAX));
    let f = |seen: Arc<AtomicU64>| {
        move |c: &mut Call<'_>| {
            if c.mode() == Mode::Capture {
                seen.store(c.input(0)?.0 % 256, Ordering::SeqCst);
            }
            let g = Gemm {
                trans_a: false,
                trans_b: false,
                m: M,
                n: NN,
                k: K,
                alpha: 1.0,
                a: c.input(0)?,
                lda: M,
                stride_a: 0,
                b: c.input(1)?,
                ldb: K,
                stride_b: 0,
                beta: 0.0,
                c: c.write(0)?,
                ldc: M,
                stride_c: 0,
                batch: 1,
            };
            c.backend().gemm(&g)?;
            c.backend().gemm_bias(
                &Gemm {
                    c: c.write(1)?,
                    ..g
                },
                c.input(2)?,
            )
        }
    };
    let (mut eager, mut replay) = pair(&b, &GEMM, 2, f(Arc::default()), f(seen.clone()));
    let a = b.alloc(M * K * 4 + 256, AllocKind::Other).unwrap();
    let a4 = a.ptr().offset(4);
    let (bm, bias) = (f32_buf(&b, 13, K * NN), f32_buf(&b, 14, M));
    let outs: Vec<DeviceBuffer> = (0..4).map(|i| f32_buf(&b, 20 + i, M * NN)).collect();
    for i in 0..4u64 {
        b.upload(a4, &data(30 + i, M * K)).unwrap();
        let inputs = |p| {
            [
                vec_arg(p, &[M * K]),
                vec_arg(bm.ptr(), &[K * NN]),
                vec_arg(bias.ptr(), &[M]),
            ]
        };
        let w = |j: usize| (outs[j].ptr(), M * NN * 4);
        call(&mut eager, &inputs(a4), &[w(0), w(1)]).unwrap();
        let o = call(&mut replay, &inputs(a4), &[w(2), w(3)]).unwrap();
        assert_eq!(
            i > 0,
            matches!(o, Outcome::Replayed { .. }),
            "call {i}: {o:?}"
        );
        for j in 0..2 {
            assert_eq!(
                bytes_of(&*b, outs[j].ptr(), M * NN * 4),
                bytes_of(&*b, outs[j + 2].ptr(), M * NN * 4),
                "call {i}: GEMM {j} differs from eager"
            );
        }
    }
    assert_eq!(
        seen.load(Ordering::SeqCst),
        4,
        "the staged operand keeps the caller's alignment"
    );
}

both!(
    replay_soundness_staged_write,
    replay_soundness_write_overlaps_staged_input,
    replay_soundness_write_out_of_bounds,
    replay_soundness_staging_alignment_changes,
    replay_soundness_hidden_host_state,
    replay_soundness_capture_is_exclusive,
    replay_soundness_freed_buffer_is_fallback,
    replay_soundness_realloc_same_address,
    replay_soundness_graph_refuses_reallocated_buffer,
    replay_soundness_gemm_alignment,
);
