//! ExactShapeReplay on synthetic multi-kernel callables: replay equals eager bit for bit at
//! every catalog class; misses, drift, host RNG and device RNG behave as specified.

mod common;

use std::borrow::Cow;
use std::sync::Arc;

use common::{bytes_of, data};
use dcc_runtime::backend::{AllocKind, Backend, DeviceBuffer};
use dcc_runtime::contract::{DType, Effects, Granularity, Signature, TensorSig, Verdict};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::replay::{
    Call, Catalog, ClassStatus, ExactShapeReplay, Fallback, Invocation, Mode, Outcome,
    OwnedSignature, ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::{DeviceRng, HostRng};
use dcc_runtime::{Arg, DevPtr, LaunchDims, Result};

const R: usize = 4;
const LS: [usize; 3] = [302, 352, 402];
const CAP: usize = 460;

macro_rules! sig {
    ($class:expr, $l:expr) => {
        Signature {
            callable: "synth",
            class: $class,
            attended: $l,
            inputs: &[
                TensorSig {
                    name: "x",
                    dims: &[R, $l],
                    strides: &[$l, 1],
                    dtype: DType::F32,
                    aliased: false,
                },
                TensorSig {
                    name: "carry",
                    dims: &[R, 402],
                    strides: &[402, 1],
                    dtype: DType::F32,
                    aliased: true,
                },
            ],
            scalars: &[3],
        }
    };
}

static CATALOG: [Signature; 3] = [sig!(0, 302), sig!(1, 352), sig!(2, 402)];

fn spec(effects: Effects, inc: u64) -> ReplaySpec {
    ReplaySpec {
        name: Cow::Borrowed("synth"),
        verdict: Verdict::Captured,
        granularity: Granularity::Chunk,
        effects,
        rng_increment: inc,
        writes: 2,
        catalog: Catalog::Static(&CATALOG),
    }
}

/// Four kernels per call: acc = x*1.5+0.25; acc = acc*0.5 + carry*0.75; sums = rowsum(acc);
/// acc = acc*0.999 - 0.125 (repeated `steps` times).
fn synth(call: &mut Call<'_>) -> Result<()> {
    let b = call.backend();
    let (x, carry) = (call.input(0)?, call.input(1)?);
    let (acc, sums) = (call.write(0)?, call.write(1)?);
    let l = call.dims(0)?[1];
    let n = (R * l) as i64;
    let dims = LaunchDims::linear(R * l, 128);
    // SAFETY (the four launches of `synth`): every caller of this callable (`invoke`, and the
    // stride-mismatch call that reaches it eagerly) binds x and carry to a `World`'s buffers (or
    // the engine's staging copies of the same shapes) and writes to its acc (R·CAP floats) and sums
    // (R floats). x has dims [R, l] with l <= 402 <= CAP in every test, so x and acc hold the R·l
    // floats AFFINE/MIX touch, carry (R·402 floats) holds the R·l that MIX reads, and ROW_SUM
    // writes R sums. out == in only elementwise (AFFINE, MIX allow it).
    unsafe {
        b.launch(
            &ks::AFFINE,
            dims,
            &[
                Arg::Ptr(acc),
                Arg::Ptr(x),
                Arg::I64(n),
                Arg::F32(1.5),
                Arg::F32(0.25),
            ],
        )
    }?;
    // SAFETY: as above.
    unsafe {
        b.launch(
            &ks::MIX,
            dims,
            &[
                Arg::Ptr(acc),
                Arg::Ptr(acc),
                Arg::Ptr(carry),
                Arg::I64(n),
                Arg::F32(0.5),
                Arg::F32(0.75),
            ],
        )
    }?;
    // SAFETY: as above: ROW_SUM reads R·l floats of acc and writes R floats of sums.
    unsafe {
        b.launch(
            &ks::ROW_SUM,
            LaunchDims::linear(R, 32),
            &[
                Arg::Ptr(sums),
                Arg::Ptr(acc),
                Arg::I64(R as i64),
                Arg::I64(l as i64),
            ],
        )
    }?;
    for _ in 0..call.scalar(0)? {
        // SAFETY: as above (in place, elementwise).
        unsafe {
            b.launch(
                &ks::AFFINE,
                dims,
                &[
                    Arg::Ptr(acc),
                    Arg::Ptr(acc),
                    Arg::I64(n),
                    Arg::F32(0.999),
                    Arg::F32(-0.125),
                ],
            )
        }?;
    }
    Ok(())
}

/// The buffers of one "world" (eager reference or engine).
struct World {
    x: DeviceBuffer,
    carry: DeviceBuffer,
    acc: DeviceBuffer,
    sums: DeviceBuffer,
}

impl World {
    fn new(b: &Arc<dyn Backend>) -> World {
        let carry = b.alloc_from(&data(7, R * 402), AllocKind::Arena).unwrap();
        World {
            x: b.alloc(R * CAP * 4, AllocKind::Other).unwrap(),
            carry,
            acc: b.alloc(R * CAP * 4, AllocKind::Arena).unwrap(),
            sums: b.alloc(R * 4, AllocKind::Arena).unwrap(),
        }
    }

    fn outputs(&self, b: &dyn Backend) -> (Vec<u8>, Vec<u8>) {
        (
            bytes_of(b, self.acc.ptr(), R * CAP * 4),
            bytes_of(b, self.sums.ptr(), R * 4),
        )
    }
}

/// Every written region of these tests is a whole buffer.
fn whole(b: &dyn Backend, p: DevPtr) -> WriteArg {
    WriteArg::to_end_of_buffer(b, p).unwrap()
}

fn invoke<F: Fn(&mut Call<'_>) -> Result<()>>(
    e: &mut ExactShapeReplay<F>,
    x: DevPtr,
    carry: DevPtr,
    writes: [DevPtr; 2],
    l: usize,
) -> Outcome {
    let dims = [R, l];
    let strides = [l, 1];
    let inputs = [
        TensorArg {
            ptr: x,
            dims: &dims,
            strides: &strides,
            dtype: DType::F32,
        },
        TensorArg {
            ptr: carry,
            dims: &[R, 402],
            strides: &[402, 1],
            dtype: DType::F32,
        },
    ];
    let writes = writes.map(|p| whole(&**e.backend(), p));
    e.call(&Invocation {
        inputs: &inputs,
        writes: &writes,
        scalars: &[3],
    })
    .unwrap()
}

type Engine = ExactShapeReplay<fn(&mut Call<'_>) -> Result<()>>;

fn engines(
    b: &Arc<dyn Backend>,
    effects: Effects,
    inc: u64,
    eager_rng: Option<DevPtr>,
    replay_rng: Option<DevPtr>,
    f: fn(&mut Call<'_>) -> Result<()>,
) -> (Engine, Engine) {
    // The eager reference is the same engine with an out-of-scope verdict: it never captures.
    let mut s = spec(effects, inc);
    s.verdict = Verdict::OutWidth;
    let eager =
        ExactShapeReplay::new(b.clone(), s, Arc::new(HostRng::new(1)), eager_rng, f).unwrap();
    let replay = ExactShapeReplay::new(
        b.clone(),
        spec(effects, inc),
        Arc::new(HostRng::new(1)),
        replay_rng,
        f,
    )
    .unwrap();
    (eager, replay)
}

fn replay_equals_eager_every_class(b: Arc<dyn Backend>) {
    let (we, wr) = (World::new(&b), World::new(&b));
    let (mut eager, mut replay) = engines(&b, Effects::NONE, 0, None, None, synth);
    let mut replays = 0;
    for call in 0..30u64 {
        let l = LS[(call % 3) as usize];
        let x = data(100 + call, R * l);
        b.upload(we.x.ptr(), &x).unwrap();
        b.upload(wr.x.ptr(), &x).unwrap();
        let oe = invoke(
            &mut eager,
            we.x.ptr(),
            we.carry.ptr(),
            [we.acc.ptr(), we.sums.ptr()],
            l,
        );
        let or = invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            l,
        );
        assert_eq!(oe, Outcome::Eager(Fallback::OutOfScope));
        if call < 3 {
            assert_eq!(or, Outcome::Eager(Fallback::Probation), "call {call}");
        } else {
            assert_eq!(
                or,
                Outcome::Replayed {
                    class: (call % 3) as u16
                },
                "call {call}"
            );
            replays += 1;
        }
        assert_eq!(
            we.outputs(&*b),
            wr.outputs(&*b),
            "call {call} (L = {l}) differs from eager"
        );
    }
    let r = replay.report();
    println!("{r}");
    assert_eq!(r.replays, replays);
    assert_eq!(r.classes_captured, 3);
    assert_eq!(r.fallback(Fallback::Probation), 3);
    assert_eq!(r.eager_calls(), 3);
    assert_eq!(
        r.staging_bytes,
        R * (302 + 352 + 402) * 4,
        "staging = one x per class; carry aliased"
    );
    assert!(r.graph_nodes >= 3 * 6);
    assert!(
        replay
            .classes()
            .iter()
            .all(|c| matches!(c, ClassStatus::Captured { nodes: 6 }))
    );
}

fn signature_miss_runs_eager(b: Arc<dyn Backend>) {
    let (we, wr) = (World::new(&b), World::new(&b));
    let (mut eager, mut replay) = engines(&b, Effects::NONE, 0, None, None, synth);
    for (i, l) in [302, 377, 302, 377, 402].into_iter().enumerate() {
        let x = data(i as u64, R * l);
        b.upload(we.x.ptr(), &x).unwrap();
        b.upload(wr.x.ptr(), &x).unwrap();
        invoke(
            &mut eager,
            we.x.ptr(),
            we.carry.ptr(),
            [we.acc.ptr(), we.sums.ptr()],
            l,
        );
        let o = invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            l,
        );
        if l == 377 {
            assert_eq!(o, Outcome::Eager(Fallback::SignatureMiss));
        }
        assert_eq!(we.outputs(&*b), wr.outputs(&*b));
    }
    let r = replay.report();
    assert_eq!(r.fallback(Fallback::SignatureMiss), 2);
    assert_eq!(r.replays, 1);
    // A stride that differs is a miss too (key includes strides).
    let inputs = [
        TensorArg {
            ptr: wr.x.ptr(),
            dims: &[R, 302],
            strides: &[303, 1],
            dtype: DType::F32,
        },
        TensorArg {
            ptr: wr.carry.ptr(),
            dims: &[R, 402],
            strides: &[402, 1],
            dtype: DType::F32,
        },
    ];
    let o = replay
        .call(&Invocation {
            inputs: &inputs,
            writes: &[whole(&*b, wr.acc.ptr()), whole(&*b, wr.sums.ptr())],
            scalars: &[3],
        })
        .unwrap();
    assert_eq!(o, Outcome::Eager(Fallback::SignatureMiss));
    // So is a scalar.
    let inputs = [inputs[0], inputs[1]];
    let inputs = [
        TensorArg {
            strides: &[302, 1],
            ..inputs[0]
        },
        inputs[1],
    ];
    let o = replay
        .call(&Invocation {
            inputs: &inputs,
            writes: &[whole(&*b, wr.acc.ptr()), whole(&*b, wr.sums.ptr())],
            scalars: &[4],
        })
        .unwrap();
    assert_eq!(o, Outcome::Eager(Fallback::SignatureMiss));
    // And a dtype.
    let inputs = [
        TensorArg {
            dtype: DType::I32,
            ..inputs[0]
        },
        inputs[1],
    ];
    let o = replay
        .call(&Invocation {
            inputs: &inputs,
            writes: &[whole(&*b, wr.acc.ptr()), whole(&*b, wr.sums.ptr())],
            scalars: &[3],
        })
        .unwrap();
    assert_eq!(o, Outcome::Eager(Fallback::SignatureMiss));
}

fn moved_buffer_is_never_replayed(b: Arc<dyn Backend>) {
    let (we, wr) = (World::new(&b), World::new(&b));
    let moved_acc = b.alloc(R * CAP * 4, AllocKind::Arena).unwrap();
    let moved_carry = b.alloc_from(&data(7, R * 402), AllocKind::Arena).unwrap();
    let (mut eager, mut replay) = engines(&b, Effects::NONE, 0, None, None, synth);
    let l = 352;
    let step = |i: u64,
                eager: &mut ExactShapeReplay<_>,
                replay: &mut ExactShapeReplay<_>,
                acc: DevPtr,
                carry: DevPtr| {
        let x = data(i, R * l);
        b.upload(we.x.ptr(), &x).unwrap();
        b.upload(wr.x.ptr(), &x).unwrap();
        invoke(
            eager,
            we.x.ptr(),
            we.carry.ptr(),
            [we.acc.ptr(), we.sums.ptr()],
            l,
        );
        let o = invoke(replay, wr.x.ptr(), carry, [acc, wr.sums.ptr()], l);
        let got = (
            bytes_of(&*b, acc, R * CAP * 4),
            bytes_of(&*b, wr.sums.ptr(), R * 4),
        );
        assert_eq!(we.outputs(&*b), got, "call {i}");
        o
    };
    assert_eq!(
        step(0, &mut eager, &mut replay, wr.acc.ptr(), wr.carry.ptr()),
        Outcome::Eager(Fallback::Probation)
    );
    assert_eq!(
        step(1, &mut eager, &mut replay, wr.acc.ptr(), wr.carry.ptr()),
        Outcome::Replayed { class: 1 }
    );
    // The written region moves: detected, counted, the class dropped; eager result still right.
    b.dtod(moved_acc.ptr(), wr.acc.ptr(), R * CAP * 4).unwrap();
    assert_eq!(
        step(2, &mut eager, &mut replay, moved_acc.ptr(), wr.carry.ptr()),
        Outcome::Eager(Fallback::AddressDrift)
    );
    // Never replayed again, even back at the old address.
    b.dtod(wr.acc.ptr(), moved_acc.ptr(), R * CAP * 4).unwrap();
    assert_eq!(
        step(3, &mut eager, &mut replay, wr.acc.ptr(), wr.carry.ptr()),
        Outcome::Eager(Fallback::ClassDropped)
    );
    // An aliased input moving drops its class too.
    let l2 = 402;
    let x = data(9, R * l2);
    b.upload(wr.x.ptr(), &x).unwrap();
    assert_eq!(
        invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            l2
        ),
        Outcome::Eager(Fallback::Probation)
    );
    assert_eq!(
        invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            l2
        ),
        Outcome::Replayed { class: 2 }
    );
    assert_eq!(
        invoke(
            &mut replay,
            wr.x.ptr(),
            moved_carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            l2
        ),
        Outcome::Eager(Fallback::AddressDrift)
    );
    let r = replay.report();
    println!("{r}");
    assert_eq!(r.fallback(Fallback::AddressDrift), 2);
    assert_eq!(r.fallback(Fallback::ClassDropped), 1);
    assert_eq!(r.classes_dropped, 2);
    assert_eq!(
        r.log.iter().filter(|l| l.event.contains("moved")).count(),
        2,
        "{:?}",
        r.log
    );
}

fn host_rng_callable(call: &mut Call<'_>) -> Result<()> {
    // Reads host randomness: a graph would freeze the drawn value.
    let a = 1.0 + call.host_rng().next_f32();
    let b = call.backend();
    let l = call.dims(0)?[1];
    // SAFETY: write 0 is a World's acc and input 0 its x (or the staging copy of [R, l]), R·CAP
    // floats each with l <= 402 in every call, so the R·l floats AFFINE touches lie inside both.
    unsafe {
        b.launch(
            &ks::AFFINE,
            LaunchDims::linear(R * l, 128),
            &[
                Arg::Ptr(call.write(0)?),
                Arg::Ptr(call.input(0)?),
                Arg::I64((R * l) as i64),
                Arg::F32(a),
                Arg::F32(0.0),
            ],
        )
    }
}

fn host_rng_is_rejected(b: Arc<dyn Backend>) {
    let (we, wr) = (World::new(&b), World::new(&b));
    let (mut eager, mut replay) = engines(&b, Effects::NONE, 0, None, None, host_rng_callable);
    for i in 0..6u64 {
        let x = data(i, R * 302);
        b.upload(we.x.ptr(), &x).unwrap();
        b.upload(wr.x.ptr(), &x).unwrap();
        invoke(
            &mut eager,
            we.x.ptr(),
            we.carry.ptr(),
            [we.acc.ptr(), we.sums.ptr()],
            302,
        );
        let o = invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            302,
        );
        assert_eq!(o, Outcome::Eager(Fallback::HostRng), "call {i}");
        assert_eq!(
            we.outputs(&*b),
            wr.outputs(&*b),
            "call {i}: host draws must match eager"
        );
    }
    let r = replay.report();
    assert_eq!(r.rejected, Some(Fallback::HostRng));
    assert_eq!(r.replays, 0);
    assert_eq!(r.classes_captured, 0);
    assert_eq!(r.fallback(Fallback::HostRng), 6);
}

const RNG_STATE: usize = 0;

/// Device randomness: acc = x + 0.5 * uniform (Philox at the device offset), then advance 1.
fn device_rng_callable(call: &mut Call<'_>) -> Result<()> {
    let b = call.backend();
    let l = call.dims(0)?[1];
    let state = call.write(1)?; // the second written region is the generator state
    // SAFETY: write 0 is a World's acc (R·CAP floats) and input 0 its x (or a staging copy of
    // [R, l]), l <= 402 < CAP, so R·l floats lie inside each; write 1 is a `DeviceRng::new` state
    // (16 bytes, alive for the whole test) whose [seed, offset] the kernel reads.
    unsafe {
        b.launch(
            &dcc_runtime::kernels::rng::ADD_UNIFORM_F32,
            LaunchDims::linear(R * l, 128),
            &[
                Arg::Ptr(call.write(0)?),
                Arg::Ptr(call.input(0)?),
                Arg::Ptr(state.offset(RNG_STATE)),
                Arg::I64((R * l) as i64),
                Arg::F32(0.5),
            ],
        )
    }?;
    // SAFETY: `state` is the 16-byte state of a `DeviceRng::new` (see above); ADVANCE adds to its
    // second word.
    unsafe {
        b.launch(
            &dcc_runtime::kernels::rng::ADVANCE,
            LaunchDims::blocks(1, 1),
            &[Arg::Ptr(state), Arg::U64(1)],
        )
    }
}

fn device_rng_replays_same_draws(b: Arc<dyn Backend>) {
    let (we, wr) = (World::new(&b), World::new(&b));
    let (re, rr) = (
        DeviceRng::new(b.clone(), 42).unwrap(),
        DeviceRng::new(b.clone(), 42).unwrap(),
    );
    let (mut eager, mut replay) = engines(
        &b,
        Effects::DEVICE_RNG,
        1,
        Some(re.state_ptr()),
        Some(rr.state_ptr()),
        device_rng_callable,
    );
    let mut seen = std::collections::HashSet::new();
    for i in 0..120u64 {
        let l = LS[(i % 3) as usize];
        let x = data(i, R * l);
        b.upload(we.x.ptr(), &x).unwrap();
        b.upload(wr.x.ptr(), &x).unwrap();
        invoke(
            &mut eager,
            we.x.ptr(),
            we.carry.ptr(),
            [we.acc.ptr(), re.state_ptr()],
            l,
        );
        let o = invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), rr.state_ptr()],
            l,
        );
        if i >= 3 {
            assert!(matches!(o, Outcome::Replayed { .. }), "call {i}: {o:?}");
        }
        let (a, bb) = (
            bytes_of(&*b, we.acc.ptr(), R * l * 4),
            bytes_of(&*b, wr.acc.ptr(), R * l * 4),
        );
        assert_eq!(a, bb, "call {i}: replay drew other bytes than eager");
        seen.insert(a);
        assert_eq!(re.read().unwrap(), rr.read().unwrap());
    }
    assert_eq!(seen.len(), 120, "every call draws fresh randomness");
    assert_eq!(rr.read().unwrap(), (42, 120));
    let r = replay.report();
    assert_eq!(r.replays, 117);

    // A wrong declaration (increment 2, the callable advances 1) is caught by the probe.
    let rm = DeviceRng::new(b.clone(), 42).unwrap();
    let mut wrong = ExactShapeReplay::new(
        b.clone(),
        spec(Effects::DEVICE_RNG, 2),
        Arc::new(HostRng::new(1)),
        Some(rm.state_ptr()),
        device_rng_callable as fn(&mut Call<'_>) -> Result<()>,
    )
    .unwrap();
    for _ in 0..3 {
        invoke(
            &mut wrong,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), rm.state_ptr()],
            302,
        );
    }
    let r = wrong.report();
    assert_eq!(r.fallback(Fallback::RngMismatch), 1);
    assert_eq!(r.fallback(Fallback::ClassDropped), 2);
    assert_eq!(r.replays, 0);
    // Undeclared device randomness (effects None) is caught the same way.
    let mut undeclared = ExactShapeReplay::new(
        b.clone(),
        spec(Effects::NONE, 0),
        Arc::new(HostRng::new(1)),
        Some(rm.state_ptr()),
        device_rng_callable as fn(&mut Call<'_>) -> Result<()>,
    )
    .unwrap();
    assert_eq!(
        invoke(
            &mut undeclared,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), rm.state_ptr()],
            302
        ),
        Outcome::Eager(Fallback::RngMismatch)
    );
}

/// Allocates during capture (refused: capture never allocates), so every capture fails.
fn allocates_in_capture(call: &mut Call<'_>) -> Result<()> {
    if call.mode() == Mode::Capture {
        call.backend().alloc(16, AllocKind::Other)?;
    }
    synth(call)
}

/// Draws host randomness only while being captured.
fn host_rng_in_capture(call: &mut Call<'_>) -> Result<()> {
    if call.mode() == Mode::Capture {
        call.host_rng().next_u64();
    }
    synth(call)
}

fn failed_capture_drops_the_class(b: Arc<dyn Backend>) {
    let (we, wr) = (World::new(&b), World::new(&b));
    let (mut eager, mut replay) = engines(&b, Effects::NONE, 0, None, None, allocates_in_capture);
    let mut outcomes = Vec::new();
    for i in 0..4u64 {
        let x = data(40 + i, R * 352);
        b.upload(we.x.ptr(), &x).unwrap();
        b.upload(wr.x.ptr(), &x).unwrap();
        invoke(
            &mut eager,
            we.x.ptr(),
            we.carry.ptr(),
            [we.acc.ptr(), we.sums.ptr()],
            352,
        );
        outcomes.push(invoke(
            &mut replay,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            352,
        ));
        assert_eq!(we.outputs(&*b), wr.outputs(&*b), "call {i}");
        assert!(!b.is_capturing(), "a failed capture is always ended");
    }
    assert_eq!(
        outcomes,
        [
            Outcome::Eager(Fallback::Probation),
            Outcome::Eager(Fallback::ClassDropped),
            Outcome::Eager(Fallback::ClassDropped),
            Outcome::Eager(Fallback::ClassDropped),
        ]
    );
    assert_eq!(
        replay.classes()[1],
        ClassStatus::Dropped(Fallback::CaptureFailed)
    );
    let r = replay.report();
    assert_eq!(
        (r.replays, r.classes_captured, r.classes_dropped),
        (0, 0, 1)
    );
    assert!(
        r.log.iter().any(|l| l.event.contains("capture failed")),
        "{:?}",
        r.log
    );

    // Host randomness drawn by the capture pass only: rejected for good, and the host
    // generator is rewound to the state the probe left (what eager execution leaves).
    let rng = Arc::new(HostRng::new(5));
    let mut sneaky = ExactShapeReplay::new(
        b.clone(),
        spec(Effects::NONE, 0),
        rng.clone(),
        None,
        host_rng_in_capture as fn(&mut Call<'_>) -> Result<()>,
    )
    .unwrap();
    let o = invoke(
        &mut sneaky,
        wr.x.ptr(),
        wr.carry.ptr(),
        [wr.acc.ptr(), wr.sums.ptr()],
        302,
    );
    assert_eq!(o, Outcome::Eager(Fallback::Probation));
    assert_eq!(rng.state(), 5, "the capture pass's draw is rewound");
    assert_eq!(sneaky.report().rejected, Some(Fallback::HostRng));
    assert_eq!(
        invoke(
            &mut sneaky,
            wr.x.ptr(),
            wr.carry.ptr(),
            [wr.acc.ptr(), wr.sums.ptr()],
            302,
        ),
        Outcome::Eager(Fallback::HostRng)
    );
}

both!(
    failed_capture_drops_the_class,
    replay_equals_eager_every_class,
    signature_miss_runs_eager,
    moved_buffer_is_never_replayed,
    host_rng_is_rejected,
    device_rng_replays_same_draws,
);

const STEPS: usize = 10;
static STEP_CATALOG: [Signature; 1] = [Signature {
    callable: "solver",
    class: 0,
    attended: 512,
    inputs: &[TensorSig {
        name: "v",
        dims: &[512],
        strides: &[1],
        dtype: DType::F32,
        aliased: true,
    }],
    scalars: &[],
}];

/// One solver step: x = x*0.5 + v*0.5; x = x*0.98 + 0.01.
fn solver_step(call: &mut Call<'_>) -> Result<()> {
    let b = call.backend();
    let (x, v) = (call.write(0)?, call.input(0)?);
    let d = LaunchDims::linear(512, 128);
    // SAFETY: x (write 0) and v (input 0, or its staging copy of dims [512]) are buffers of 512
    // floats allocated by the test (`alloc_from(&data(_, 512))`); both kernels are elementwise
    // over 512, out == x in place, which they allow.
    unsafe {
        b.launch(
            &ks::MIX,
            d,
            &[
                Arg::Ptr(x),
                Arg::Ptr(x),
                Arg::Ptr(v),
                Arg::I64(512),
                Arg::F32(0.5),
                Arg::F32(0.5),
            ],
        )
    }?;
    // SAFETY: as above.
    unsafe {
        b.launch(
            &ks::AFFINE,
            d,
            &[
                Arg::Ptr(x),
                Arg::Ptr(x),
                Arg::I64(512),
                Arg::F32(0.98),
                Arg::F32(0.01),
            ],
        )
    }
}

/// The whole solver loop of a chunk.
fn solver_chunk(call: &mut Call<'_>) -> Result<()> {
    for _ in 0..STEPS {
        solver_step(call)?;
    }
    Ok(())
}

/// Paper eq. 5: same catalog at step and chunk granularity, host launches divided by n_steps.
fn step_and_chunk_granularity_agree(b: Arc<dyn Backend>) {
    let mk = |g: Granularity, f: fn(&mut Call<'_>) -> Result<()>| {
        let s = ReplaySpec {
            name: Cow::Borrowed("solver"),
            verdict: Verdict::Captured,
            granularity: g,
            effects: Effects::NONE,
            rng_increment: 0,
            writes: 1,
            catalog: Catalog::Static(&STEP_CATALOG),
        };
        ExactShapeReplay::new(b.clone(), s, Arc::new(HostRng::new(0)), None, f).unwrap()
    };
    let (mut step, mut chunk) = (
        mk(Granularity::Step, solver_step),
        mk(Granularity::Chunk, solver_chunk),
    );
    let v = b.alloc_from(&data(3, 512), AllocKind::Arena).unwrap();
    let (xs, xc) = (
        b.alloc_from(&data(4, 512), AllocKind::Arena).unwrap(),
        b.alloc_from(&data(4, 512), AllocKind::Arena).unwrap(),
    );
    let inputs = [TensorArg {
        ptr: v.ptr(),
        dims: &[512],
        strides: &[1],
        dtype: DType::F32,
    }];
    const CHUNKS: u64 = 6;
    for c in 0..CHUNKS {
        for _ in 0..STEPS {
            step.call(&Invocation {
                inputs: &inputs,
                writes: &[whole(&*b, xs.ptr())],
                scalars: &[],
            })
            .unwrap();
        }
        chunk
            .call(&Invocation {
                inputs: &inputs,
                writes: &[whole(&*b, xc.ptr())],
                scalars: &[],
            })
            .unwrap();
        assert_eq!(
            bytes_of(&*b, xs.ptr(), 2048),
            bytes_of(&*b, xc.ptr(), 2048),
            "chunk {c}"
        );
    }
    let (rs, rc) = (step.report(), chunk.report());
    println!("step:  {rs}\nchunk: {rc}");
    assert_eq!(
        (rs.classes_captured, rc.classes_captured),
        (1, 1),
        "same catalog at both clocks"
    );
    assert_eq!(rs.replays, CHUNKS * STEPS as u64 - 1);
    assert_eq!(rc.replays, CHUNKS - 1);
    assert_eq!((rs.graph_nodes, rc.graph_nodes), (2, 2 * STEPS));
    // Steady state: n_steps host graph launches per chunk at step granularity, one at chunk.
    // (the first chunk replays STEPS - 1 steps after the probe of its first step)
    assert_eq!(
        (rs.replays - (STEPS as u64 - 1)) / (CHUNKS - 1),
        STEPS as u64
    );
}

both!(step_and_chunk_granularity_agree);

/// Classes are numbered by u16: a catalog that would alias class numbers is refused.
#[test]
fn catalog_longer_than_u16_is_refused() {
    let b = common::host();
    let long = |n: usize| -> Catalog { vec![OwnedSignature::from(&CATALOG[0]); n].into() };
    let s = ReplaySpec {
        catalog: long(usize::from(u16::MAX) + 2),
        ..spec(Effects::NONE, 0)
    };
    let f: fn(&mut Call<'_>) -> Result<()> = synth;
    assert!(
        ExactShapeReplay::new(b.clone(), s.clone(), Arc::new(HostRng::new(0)), None, f).is_err()
    );
    let s = ReplaySpec {
        catalog: long(usize::from(u16::MAX) + 1),
        ..s
    };
    assert!(ExactShapeReplay::new(b, s, Arc::new(HostRng::new(0)), None, f).is_ok());
}

/// `DeviceRng`'s launches check their output buffers against the count.
#[test]
fn device_rng_checks_its_buffers() {
    let b = common::host();
    let rng = DeviceRng::new(b.clone(), 7).unwrap();
    let out = b.alloc(100 * 4, AllocKind::Other).unwrap();
    assert!(rng.uniform(&out, 101).is_err());
    rng.uniform(&out, 100).unwrap();
    let x = b.alloc(50 * 4, AllocKind::Other).unwrap();
    assert!(rng.add_uniform(&out, &x, 100, 0.5).is_err());
    rng.add_uniform(&out, &out, 100, 0.5).unwrap();
    rng.advance(1).unwrap();
    assert_eq!(rng.read().unwrap(), (7, 1));
}
