//! N sessions over one arena binding and one set of graphs produce the same bytes as each alone
//! (`SessionPool`); one stream that owns its arena and engine (`Session`) produces the same bytes
//! as a hand-built rig, holds exactly the device bytes it reports, and frees them when dropped.

mod common;

use std::borrow::Cow;
use std::sync::Arc;

use common::data;
use dcc_runtime::arena::Arena;
use dcc_runtime::backend::{AllocKind, Backend};
use dcc_runtime::contract::{
    ArenaLayout, DType, Effects, Granularity, Lifetime, RegionInfo, Signature, TensorSig, Verdict,
};
use dcc_runtime::kernels::{rng as kr, synthetic as ks};
use dcc_runtime::replay::{
    Call, Catalog, ExactShapeReplay, Invocation, Outcome, ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;
use dcc_runtime::session::{Session, SessionBytes, SessionPool};
use dcc_runtime::{Arg, LaunchDims, Result};

const N: usize = 1024;

static REGIONS: [RegionInfo; 4] = [
    RegionInfo {
        name: "state",
        dtype: DType::F32,
        dims: &[N],
        elems: N,
        bytes: N * 4,
        align: 256,
        offset: 0,
        attended: 0,
        lifetime: Lifetime::Session,
        order: None,
        keep: None,
        dim_names: &[],
    },
    RegionInfo {
        name: "out",
        dtype: DType::F32,
        dims: &[N],
        elems: N,
        bytes: N * 4,
        align: 256,
        offset: N * 4,
        attended: 0,
        lifetime: Lifetime::Turn,
        order: None,
        keep: None,
        dim_names: &[],
    },
    RegionInfo {
        name: "rng",
        dtype: DType::I64,
        dims: &[2],
        elems: 2,
        bytes: 16,
        align: 256,
        offset: 2 * N * 4,
        attended: 0,
        lifetime: Lifetime::Session,
        order: None,
        keep: None,
        dim_names: &[],
    },
    RegionInfo {
        name: "scratch",
        dtype: DType::F32,
        dims: &[N],
        elems: N,
        bytes: N * 4,
        align: 256,
        offset: 2 * N * 4 + 256,
        attended: 0,
        lifetime: Lifetime::Operator,
        order: None,
        keep: None,
        dim_names: &[],
    },
];
static LAYOUT: ArenaLayout = ArenaLayout {
    total_bytes: 3 * N * 4 + 256,
    align: 256,
    regions: &REGIONS,
};

static CATALOG: [Signature; 1] = [Signature {
    callable: "step",
    class: 0,
    attended: N,
    inputs: &[TensorSig {
        name: "x",
        dims: &[N],
        strides: &[1],
        dtype: DType::F32,
        aliased: false,
    }],
    scalars: &[],
}];

const SPEC: ReplaySpec = ReplaySpec {
    name: Cow::Borrowed("step"),
    verdict: Verdict::Captured,
    granularity: Granularity::Chunk,
    effects: Effects::DEVICE_RNG,
    rng_increment: 1,
    writes: 4,
    catalog: Catalog::Static(&CATALOG),
};

/// scratch = x + 0.1*uniform; state = state*0.9 + scratch*0.1; out = state*2 - 1; advance rng.
fn step(call: &mut Call<'_>) -> Result<()> {
    let b = call.backend();
    let (state, out, rng, scratch) = (
        call.write(0)?,
        call.write(1)?,
        call.write(2)?,
        call.write(3)?,
    );
    let d = LaunchDims::linear(N, 256);
    let n = N as i64;
    // SAFETY (the four launches of `step`): its only caller, `Rig::chunk`, binds input 0 to the
    // Rig's x (N floats; or the engine's staging copy of dims [N]) and the writes to the arena
    // regions state, out and scratch (N floats each, disjoint offsets in LAYOUT) and rng (16 bytes);
    // the arena outlives the engine (both owned by the Rig). ADD_UNIFORM writes scratch from x and
    // the rng state, N elements each.
    unsafe {
        b.launch(
            &kr::ADD_UNIFORM_F32,
            d,
            &[
                Arg::Ptr(scratch),
                Arg::Ptr(call.input(0)?),
                Arg::Ptr(rng),
                Arg::I64(n),
                Arg::F32(0.1),
            ],
        )
    }?;
    // SAFETY: as above: N floats of state (in place, elementwise, which MIX allows) and scratch.
    unsafe {
        b.launch(
            &ks::MIX,
            d,
            &[
                Arg::Ptr(state),
                Arg::Ptr(state),
                Arg::Ptr(scratch),
                Arg::I64(n),
                Arg::F32(0.9),
                Arg::F32(0.1),
            ],
        )
    }?;
    // SAFETY: as above: N floats of out from N floats of state.
    unsafe {
        b.launch(
            &ks::AFFINE,
            d,
            &[
                Arg::Ptr(out),
                Arg::Ptr(state),
                Arg::I64(n),
                Arg::F32(2.0),
                Arg::F32(-1.0),
            ],
        )
    }?;
    // SAFETY: as above: rng is the 16-byte `rng` region; ADVANCE adds to its second word.
    unsafe {
        b.launch(
            &kr::ADVANCE,
            LaunchDims::blocks(1, 1),
            &[Arg::Ptr(rng), Arg::U64(1)],
        )
    }
}

struct Rig {
    arena: Arena,
    engine: ExactShapeReplay<fn(&mut Call<'_>) -> Result<()>>,
    x: dcc_runtime::DeviceBuffer,
}

impl Rig {
    fn new(b: &Arc<dyn Backend>) -> Rig {
        let arena = Arena::new(b.clone(), &LAYOUT).unwrap();
        let engine = ExactShapeReplay::new(
            b.clone(),
            SPEC,
            Arc::new(HostRng::new(0)),
            Some(arena.ptr("rng").unwrap()),
            step as fn(&mut Call<'_>) -> Result<()>,
        )
        .unwrap();
        Rig {
            x: b.alloc(N * 4, AllocKind::Other).unwrap(),
            arena,
            engine,
        }
    }

    /// Initial state of session `s`.
    fn init(&self, b: &dyn Backend, s: u64) {
        b.upload(self.arena.ptr("state").unwrap(), &data(1000 + s, N))
            .unwrap();
        b.upload(self.arena.ptr("rng").unwrap(), &[77 + s, 0u64])
            .unwrap();
    }

    fn chunk(&mut self, b: &dyn Backend, s: u64, c: u64) -> (Outcome, Vec<u8>) {
        b.upload(self.x.ptr(), &data(s * 7919 + c, N)).unwrap();
        let a = &self.arena;
        let region = |name: &str| {
            let r = a.region(name).unwrap();
            WriteArg {
                ptr: r.ptr,
                bytes: r.bytes(),
            }
        };
        let writes = [
            region("state"),
            region("out"),
            region("rng"),
            region("scratch"),
        ];
        let inputs = [TensorArg {
            ptr: self.x.ptr(),
            dims: &[N],
            strides: &[1],
            dtype: DType::F32,
        }];
        let o = self
            .engine
            .call(&Invocation {
                inputs: &inputs,
                writes: &writes,
                scalars: &[],
            })
            .unwrap();
        (o, b.download::<u8>(writes[1].ptr, N * 4).unwrap())
    }
}

fn sessions_interleaved_equal_alone(b: Arc<dyn Backend>) {
    const S: u64 = 3;
    const C: u64 = 12;
    // Each session alone, in a rig of its own.
    let mut alone = Vec::new();
    for s in 0..S {
        let mut rig = Rig::new(&b);
        rig.init(&*b, s);
        alone.push((0..C).map(|c| rig.chunk(&*b, s, c).1).collect::<Vec<_>>());
    }
    // All sessions round-robin through one rig (one arena binding, one engine, one graph).
    let before = b.memory().live_total;
    let mut rig = Rig::new(&b);
    let mut pool = SessionPool::new(&rig.arena, &[]).unwrap();
    let one_rig = b.memory().live_total - before;
    let mut ids = Vec::new();
    for s in 0..S {
        rig.init(&*b, s);
        ids.push(pool.create().unwrap());
    }
    let after_sessions = b.memory().live_total;
    let mut replays = 0;
    for c in 0..C {
        for s in 0..S {
            pool.activate(ids[s as usize]).unwrap();
            let (o, out) = rig.chunk(&*b, s, c);
            replays += matches!(o, Outcome::Replayed { .. }) as u64;
            assert_eq!(
                out, alone[s as usize][c as usize],
                "session {s} chunk {c} differs from running alone"
            );
        }
    }
    let r = rig.engine.report();
    println!("{r}");
    println!(
        "sessions: {} B per extra session (state snapshot; arena {} B, rig {} B); {} sessions added {} B; {} switches",
        pool.bytes_per_session(),
        rig.arena.bytes(),
        one_rig,
        S,
        after_sessions - before - one_rig,
        pool.switches()
    );
    assert_eq!(
        replays,
        S * C - 1,
        "one graph serves every session after the first probe"
    );
    assert_eq!(r.classes_captured, 1);
    assert_eq!(
        pool.bytes_per_session(),
        N * 4 * 2 + 16,
        "turn + session regions only"
    );
    assert_eq!(
        after_sessions - before - one_rig,
        S as usize * pool.bytes_per_session()
    );
    // The arena never moved.
    assert_eq!(rig.arena.ptr("state").unwrap(), rig.arena.base());
}

both!(sessions_interleaved_equal_alone);

type Step = fn(&mut Call<'_>) -> Result<()>;

fn owned_session_reports_and_frees_what_it_holds(b: Arc<dyn Backend>) {
    const C: u64 = 4;
    let mut rig = Rig::new(&b);
    rig.init(&*b, 0);
    let want: Vec<Vec<u8>> = (0..C).map(|c| rig.chunk(&*b, 0, c).1).collect();
    drop(rig);

    let before = b.memory().live_total;
    let x = b.alloc(N * 4, AllocKind::Other).unwrap();
    let base = b.memory().live_total;
    let arena = Arena::new(b.clone(), &LAYOUT).unwrap();
    let rng = arena.ptr("rng").unwrap();
    let mut s: Session<Arena, Step> = Session::new(b.clone(), arena);
    let id = s.add_engine(SPEC, Some(rng), step as Step).unwrap();
    let held = |s: &Session<Arena, Step>| (b.memory().live_total - base, s.bytes());
    assert_eq!(
        held(&s),
        (
            LAYOUT.total_bytes,
            SessionBytes {
                state: LAYOUT.total_bytes,
                staging: 0,
                graphs: 0
            }
        ),
        "a new session holds its arena only"
    );
    b.upload(s.state().ptr("state").unwrap(), &data(1000, N))
        .unwrap();
    b.upload(rng, &[77u64, 0]).unwrap();
    for (c, want) in want.iter().enumerate() {
        b.upload(x.ptr(), &data(c as u64, N)).unwrap();
        let region = |name: &str| {
            let r = s.state().region(name).unwrap();
            WriteArg {
                ptr: r.ptr,
                bytes: r.bytes(),
            }
        };
        let writes = [
            region("state"),
            region("out"),
            region("rng"),
            region("scratch"),
        ];
        let inputs = [TensorArg {
            ptr: x.ptr(),
            dims: &[N],
            strides: &[1],
            dtype: DType::F32,
        }];
        s.call(
            id,
            &Invocation {
                inputs: &inputs,
                writes: &writes,
                scalars: &[],
            },
        )
        .unwrap();
        let out = b.download::<u8>(writes[1].ptr, N * 4).unwrap();
        assert_eq!(&out, want, "chunk {c} differs from the rig's");
    }
    let (ledger, bytes) = held(&s);
    println!(
        "{}\nsession: {bytes:?} ({ledger} B in the ledger)",
        s.reports()[0]
    );
    assert_eq!(
        ledger,
        bytes.total(),
        "the ledger holds what the session reports"
    );
    assert_eq!(
        bytes.staging,
        N * 4,
        "one staged input of the captured class"
    );
    assert_eq!(s.engines()[0].report().replays, C - 1);
    assert_eq!(
        s.fallbacks().values().sum::<u64>(),
        1,
        "{:?}",
        s.fallbacks()
    );
    drop(s);
    assert_eq!(
        b.memory().live_total,
        base,
        "dropping the session frees all it held"
    );
    drop(x);
    assert_eq!(b.memory().live_total, before);
}

both!(owned_session_reports_and_frees_what_it_holds);
