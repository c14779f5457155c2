//! Backend semantics shared by Host and CUDA, kernel twins against the device, the arena.

mod common;

use std::sync::Arc;

use common::data;
use dcc_runtime::arena::{Arena, validate_layout};
use dcc_runtime::backend::{self, AllocKind, Backend, BackendKind, Gemm};
use dcc_runtime::contract::{ArenaLayout, DType, Lifetime, RegionInfo};
use dcc_runtime::kernels::{self, carry as kc, rng as kr, synthetic as ks};
use dcc_runtime::{Arg, DevPtr, Error, LaunchDims};

fn memory_is_counted(b: Arc<dyn Backend>) {
    let m0 = b.memory();
    let a = b.alloc(1 << 20, AllocKind::Arena).unwrap();
    let s = b.alloc(4096, AllocKind::Staging).unwrap();
    let m1 = b.memory();
    assert_eq!(
        m1.live(AllocKind::Arena) - m0.live(AllocKind::Arena),
        1 << 20
    );
    assert_eq!(
        m1.live(AllocKind::Staging) - m0.live(AllocKind::Staging),
        4096
    );
    assert!(m1.peak_total >= m1.live_total);
    drop((a, s));
    let m2 = b.memory();
    assert_eq!(m2.live_total, m0.live_total);
    assert!(m2.peak_total >= m0.live_total + (1 << 20) + 4096);
    if b.kind() == BackendKind::Cuda {
        assert!(m2.device_total.is_some() && m2.device_free.is_some());
        assert!(
            m2.live(AllocKind::Workspace) >= 32 << 20,
            "cuBLAS workspace is counted"
        );
    }
    println!("{}: {m2}", b.device_name());
}

fn capture_refuses_host_work(b: Arc<dyn Backend>) {
    let buf = b.alloc(64, AllocKind::Other).unwrap();
    b.begin_capture().unwrap();
    assert!(matches!(
        b.alloc(64, AllocKind::Other),
        Err(Error::Capturing(_))
    ));
    assert!(matches!(
        b.upload(buf.ptr(), &[1u32]),
        Err(Error::Capturing(_))
    ));
    assert!(matches!(
        b.download::<u32>(buf.ptr(), 1),
        Err(Error::Capturing(_))
    ));
    assert!(matches!(b.synchronize(), Err(Error::Capturing(_))));
    b.memset_d32(buf.ptr(), 7, 16).unwrap();
    let g = b.end_capture().unwrap();
    assert!(!b.is_capturing());
    assert_eq!(
        b.download::<u32>(buf.ptr(), 16).unwrap(),
        vec![0; 16],
        "capture executes nothing"
    );
    b.launch_graph(&g).unwrap();
    assert_eq!(b.download::<u32>(buf.ptr(), 16).unwrap(), vec![7; 16]);
    assert!(matches!(b.end_capture(), Err(Error::Capture(_))));
}

/// A graph is bound to the addresses it saw: after the caller "moves" its buffer, replay still
/// writes the old one (the hazard the engine's address check exists for).
fn graph_is_bound_to_captured_pointers(b: Arc<dyn Backend>) {
    let x = b.alloc_from(&[1.0f32; 256], AllocKind::Other).unwrap();
    let old = b.alloc(1024, AllocKind::Other).unwrap();
    let new = b.alloc(1024, AllocKind::Other).unwrap();
    // First use of a kernel inside a capture is refused on both backends (NVRTC/module load
    // must stay out of capture): preload, or run the callable eagerly first (the engine's probe).
    b.begin_capture().unwrap();
    assert!(matches!(
        // SAFETY: a zero-element AFFINE (touches nothing) on buffers allocated just above; it is
        // refused anyway (first use inside capture).
        unsafe {
            b.launch(
                &ks::AFFINE,
                LaunchDims::linear(1, 1),
                &[
                    Arg::Ptr(old.ptr()),
                    Arg::Ptr(x.ptr()),
                    Arg::I64(0),
                    Arg::F32(0.0),
                    Arg::F32(0.0),
                ],
            )
        },
        Err(Error::Capturing(_))
    ));
    let _ = b.end_capture();
    b.preload(&[&ks::AFFINE]).unwrap();
    b.begin_capture().unwrap();
    // SAFETY: `old` (1024 B) and `x` (256 floats) were allocated just above; AFFINE touches
    // 256 floats of each. Both live until the end of the test except for the deliberate replay
    // after `drop(old)` below: that breaks the "alive for every replay" clause on purpose, and is
    // sound only because both backends refuse it (`Error::Dangling`) before anything runs: both
    // re-check every allocation the capture touched, whole and by identity.
    unsafe {
        b.launch(
            &ks::AFFINE,
            LaunchDims::linear(256, 128),
            &[
                Arg::Ptr(old.ptr()),
                Arg::Ptr(x.ptr()),
                Arg::I64(256),
                Arg::F32(2.0),
                Arg::F32(1.0),
            ],
        )
    }
    .unwrap();
    let g = b.end_capture().unwrap();
    assert_eq!(g.nodes(), 1);
    b.launch_graph(&g).unwrap();
    assert_eq!(b.download::<f32>(old.ptr(), 256).unwrap(), vec![3.0; 256]);
    assert_eq!(
        b.download::<f32>(new.ptr(), 256).unwrap(),
        vec![0.0; 256],
        "replay never sees the new buffer"
    );
    // Freed: both backends refuse rather than writing through a dangling pointer.
    let addr = old.ptr().0;
    drop(old);
    assert_eq!(b.launch_graph(&g).unwrap_err(), Error::Dangling(addr));
}

fn gemm_replay_equals_eager(b: Arc<dyn Backend>) {
    let (m, n, k, batch) = (33, 17, 29, 3);
    let av = data(1, m * k * batch);
    let bv = data(2, k * n * batch);
    let a = b.alloc_from(&av, AllocKind::Other).unwrap();
    let bb = b.alloc_from(&bv, AllocKind::Other).unwrap();
    let c1 = b.alloc(m * n * batch * 4, AllocKind::Other).unwrap();
    let c2 = b.alloc(m * n * batch * 4, AllocKind::Other).unwrap();
    let desc = |c: DevPtr| Gemm {
        trans_a: false,
        trans_b: true,
        m,
        n,
        k,
        alpha: 1.0,
        a: a.ptr(),
        lda: m,
        stride_a: m * k,
        b: bb.ptr(),
        ldb: n,
        stride_b: k * n,
        beta: 0.0,
        c,
        ldc: m,
        stride_c: m * n,
        batch,
    };
    b.gemm(&desc(c1.ptr())).unwrap();
    b.begin_capture().unwrap();
    b.gemm(&desc(c2.ptr())).unwrap();
    let g = b.end_capture().unwrap();
    b.launch_graph(&g).unwrap();
    let (e, r) = (
        b.download::<f32>(c1.ptr(), m * n * batch).unwrap(),
        b.download::<f32>(c2.ptr(), m * n * batch).unwrap(),
    );
    assert_eq!(
        e.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        r.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    // Against a float64 reference (column-major, B transposed).
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for t in 0..batch {
        for j in 0..n {
            for i in 0..m {
                let want: f64 = (0..k)
                    .map(|p| av[t * m * k + i + p * m] as f64 * bv[t * k * n + j + p * n] as f64)
                    .sum();
                let got = e[t * m * n + i + j * m] as f64;
                num += (got - want).powi(2);
                den += want * want;
            }
        }
    }
    let rel = (num / den).sqrt();
    println!("{} gemm rel err {rel:e}", b.device_name());
    assert!(rel < 1e-6, "float32 GEMM (TF32 off) rel err {rel}");
}

/// `gemm_bias` (one stream op: cuBLASLt's bias epilogue on CUDA) against the bias-copy path
/// (`C := bias` broadcast, then `gemm` with `beta = 1`): bit for bit on Host, within float32
/// rounding of a float64 reference on CUDA; captured replay equals eager; odd leading dimensions.
fn gemm_bias_matches_copy_then_beta_one(b: Arc<dyn Backend>) {
    let (m, n, k) = (37, 11, 70);
    let (lda, ldb, ldc) = (k + 3, k + 1, m + 5);
    let av = data(21, m * lda);
    let bv = data(22, n * ldb);
    let biasv = data(23, m);
    let a = b.alloc_from(&av, AllocKind::Other).unwrap();
    let bb = b.alloc_from(&bv, AllocKind::Other).unwrap();
    let bias = b.alloc_from(&biasv, AllocKind::Other).unwrap();
    let mut pre = vec![0.0f32; n * ldc];
    for j in 0..n {
        pre[j * ldc..j * ldc + m].copy_from_slice(&biasv);
    }
    let c0 = b.alloc_from(&pre, AllocKind::Other).unwrap();
    let c1 = b.alloc(n * ldc * 4, AllocKind::Other).unwrap();
    let c2 = b.alloc(n * ldc * 4, AllocKind::Other).unwrap();
    // Linear layout: C (m = out) = Wᵀ-op(A) · X (B), A stored [m, k] row-major = k×m column-major.
    let desc = |c: DevPtr, beta: f32| Gemm {
        trans_a: true,
        trans_b: false,
        m,
        n,
        k,
        alpha: 1.0,
        a: a.ptr(),
        lda,
        stride_a: 0,
        b: bb.ptr(),
        ldb,
        stride_b: 0,
        beta,
        c,
        ldc,
        stride_c: 0,
        batch: 1,
    };
    b.gemm(&desc(c0.ptr(), 1.0)).unwrap();
    b.gemm_bias(&desc(c1.ptr(), 0.0), bias.ptr()).unwrap();
    assert!(b.gemm_bias(&desc(c1.ptr(), 1.0), bias.ptr()).is_err());
    b.begin_capture().unwrap();
    b.gemm_bias(&desc(c2.ptr(), 0.0), bias.ptr()).unwrap();
    let g = b.end_capture().unwrap();
    b.launch_graph(&g).unwrap();
    let get = |c: &dcc_runtime::backend::DeviceBuffer| b.download::<f32>(c.ptr(), n * ldc).unwrap();
    let (r0, r1, r2) = (get(&c0), get(&c1), get(&c2));
    let bits = |v: &[f32], j: usize| {
        v[j * ldc..j * ldc + m]
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    };
    for j in 0..n {
        assert_eq!(bits(&r1, j), bits(&r2, j), "replay != eager, column {j}");
        if b.kind() == dcc_runtime::backend::BackendKind::Host {
            assert_eq!(
                bits(&r0, j),
                bits(&r1, j),
                "Host: bias epilogue != beta = 1"
            );
        }
    }
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for j in 0..n {
        for i in 0..m {
            let want: f64 = (0..k)
                .map(|p| av[i * lda + p] as f64 * bv[j * ldb + p] as f64)
                .sum::<f64>()
                + biasv[i] as f64;
            num += (r1[j * ldc + i] as f64 - want).powi(2);
            den += want * want;
        }
    }
    let rel = (num / den).sqrt();
    println!("{} gemm_bias rel err {rel:e}", b.device_name());
    assert!(rel < 1e-6, "gemm_bias rel err {rel}");
}

fn arena_layout_is_checked_and_stable(b: Arc<dyn Backend>) {
    static OK: [RegionInfo; 2] = [
        RegionInfo {
            name: "a",
            dtype: DType::F32,
            dims: &[4, 8],
            elems: 32,
            bytes: 128,
            align: 256,
            offset: 0,
            attended: 8,
            lifetime: Lifetime::Session,
            order: None,
            keep: None,
            dim_names: &[],
        },
        RegionInfo {
            name: "b",
            dtype: DType::I32,
            dims: &[16],
            elems: 16,
            bytes: 64,
            align: 256,
            offset: 256,
            attended: 0,
            lifetime: Lifetime::Unit,
            order: None,
            keep: None,
            dim_names: &[],
        },
    ];
    static BAD: [RegionInfo; 2] = [
        RegionInfo {
            name: "a",
            dtype: DType::F32,
            dims: &[4, 8],
            elems: 32,
            bytes: 128,
            align: 64,
            offset: 0,
            attended: 8,
            lifetime: Lifetime::Session,
            order: None,
            keep: None,
            dim_names: &[],
        },
        RegionInfo {
            name: "b",
            dtype: DType::I32,
            dims: &[16],
            elems: 16,
            bytes: 64,
            align: 64,
            offset: 64,
            attended: 0,
            lifetime: Lifetime::Unit,
            order: None,
            keep: None,
            dim_names: &[],
        },
    ];
    let ok = ArenaLayout {
        total_bytes: 320,
        align: 256,
        regions: &OK,
    };
    let bad = ArenaLayout {
        total_bytes: 320,
        align: 256,
        regions: &BAD,
    };
    assert!(validate_layout(&ok).is_ok());
    assert!(matches!(validate_layout(&bad), Err(Error::Layout(m)) if m.contains("overlap")));
    let short = ArenaLayout {
        total_bytes: 300,
        ..ok
    };
    assert!(validate_layout(&short).is_err());
    let arena = Arena::new(b.clone(), &ok).unwrap();
    let pa = arena.ptr("a").unwrap();
    assert_eq!(arena.ptr("b").unwrap(), arena.base().offset(256));
    b.upload(pa, &[1.0f32; 32]).unwrap();
    arena.zero("a").unwrap();
    assert_eq!(b.download::<f32>(pa, 32).unwrap(), vec![0.0; 32]);
    assert_eq!(arena.ptr("a").unwrap(), pa);
    assert!(arena.ptr("zz").is_err());
    assert_eq!(b.memory().live(AllocKind::Arena), 320);
}

both!(
    memory_is_counted,
    capture_refuses_host_work,
    graph_is_bound_to_captured_pointers,
    gemm_replay_equals_eager,
    gemm_bias_matches_copy_then_beta_one,
    arena_layout_is_checked_and_stable,
);

/// Runs the same launch on Host and CUDA with the same initial buffers and compares every byte.
fn same_on_both(
    cuda: &Arc<dyn Backend>,
    host: &Arc<dyn Backend>,
    bufs: &[Vec<u32>],
    launch: &dyn Fn(&dyn Backend, &[DevPtr]),
) {
    let mut outs = Vec::new();
    for b in [cuda, host] {
        let dev: Vec<_> = bufs
            .iter()
            .map(|v| b.alloc_from(v, AllocKind::Other).unwrap())
            .collect();
        let ptrs: Vec<DevPtr> = dev.iter().map(|d| d.ptr()).collect();
        launch(&**b, &ptrs);
        outs.push(
            dev.iter()
                .zip(bufs)
                .map(|(d, v)| b.download::<u32>(d.ptr(), v.len()).unwrap())
                .collect::<Vec<_>>(),
        );
    }
    assert_eq!(outs[0], outs[1]);
}

#[test]
fn cuda_kernels_match_host_twins() {
    let Some(cuda) = common::cuda() else { return };
    let host = backend::host();
    let n = 10_007usize;
    let f = |s| data(s, n).iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
    let l = |n: usize| LaunchDims::linear(n, 256);
    same_on_both(&cuda, &host, &[f(1), f(2)], &|b, p| {
        // SAFETY: `same_on_both` allocates p[0], p[1] from the two vectors of n floats; AFFINE
        // touches n of each.
        unsafe {
            b.launch(
                &ks::AFFINE,
                l(n),
                &[
                    Arg::Ptr(p[0]),
                    Arg::Ptr(p[1]),
                    Arg::I64(n as i64),
                    Arg::F32(1.37),
                    Arg::F32(-0.61),
                ],
            )
        }
        .unwrap()
    });
    same_on_both(&cuda, &host, &[f(1), f(2), f(3)], &|b, p| {
        // SAFETY: three buffers of n floats from `same_on_both`; MIX touches n of each.
        unsafe {
            b.launch(
                &ks::MIX,
                l(n),
                &[
                    Arg::Ptr(p[0]),
                    Arg::Ptr(p[1]),
                    Arg::Ptr(p[2]),
                    Arg::I64(n as i64),
                    Arg::F32(0.3),
                    Arg::F32(0.7),
                ],
            )
        }
        .unwrap()
    });
    same_on_both(&cuda, &host, &[f(1), f(2)], &|b, p| {
        // SAFETY: two buffers of n = 10007 words: ROW_SUM writes 97 and reads 97·103 = 9991 <= n.
        unsafe {
            b.launch(
                &ks::ROW_SUM,
                l(97),
                &[Arg::Ptr(p[0]), Arg::Ptr(p[1]), Arg::I64(97), Arg::I64(103)],
            )
        }
        .unwrap()
    });
    same_on_both(&cuda, &host, &[f(4)], &|b, p| {
        // SAFETY: one buffer of n words; HASH rewrites n of them in place (elementwise).
        unsafe {
            b.launch(
                &ks::HASH,
                l(n),
                &[Arg::Ptr(p[0]), Arg::I64(n as i64), Arg::U32(99)],
            )
        }
        .unwrap()
    });
    let state = vec![0xdead_beef, 0x1234, 77, 0]; // seed 0x00001234deadbeef, offset 77
    same_on_both(&cuda, &host, &[state.clone(), f(5)], &|b, p| {
        // SAFETY: p[0] holds the 4-word (16-byte) state, p[1] n words; BITS_U32 writes n.
        unsafe {
            b.launch(
                &kr::BITS_U32,
                l(n / 4 + 1),
                &[Arg::Ptr(p[0]), Arg::Ptr(p[1]), Arg::I64(n as i64)],
            )
        }
        .unwrap()
    });
    same_on_both(&cuda, &host, &[state.clone(), f(5)], &|b, p| {
        // SAFETY: p[0] is the 16-byte state, p[1] holds n floats; UNIFORM_F32 writes n.
        unsafe {
            b.launch(
                &kr::UNIFORM_F32,
                l(n / 4 + 1),
                &[Arg::Ptr(p[0]), Arg::Ptr(p[1]), Arg::I64(n as i64)],
            )
        }
        .unwrap();
        // SAFETY: p[0] is the 16-byte state; ADVANCE adds to its second word.
        unsafe {
            b.launch(
                &kr::ADVANCE,
                LaunchDims::blocks(1, 1),
                &[Arg::Ptr(p[0]), Arg::U64(3)],
            )
        }
        .unwrap();
    });
    same_on_both(&cuda, &host, &[f(6), f(7), state], &|b, p| {
        // SAFETY: p[0] and p[1] hold n floats each, p[2] the 16-byte state.
        unsafe {
            b.launch(
                &kr::ADD_UNIFORM_F32,
                l(n),
                &[
                    Arg::Ptr(p[0]),
                    Arg::Ptr(p[1]),
                    Arg::Ptr(p[2]),
                    Arg::I64(n as i64),
                    Arg::F32(0.25),
                ],
            )
        }
        .unwrap()
    });
    // The carry kernel, in place, every shift from 1 to past the window (one pass, many
    // passes), with the prepend rule (head = retained, tail = prompt) and the append rule.
    let (outer, inner, fp, fr, cap) = (5usize, 16usize, 30usize, 10usize, 90usize);
    for ext in [fp + fr + 1, fp + fr + 3, fp + fr + 10, fp + fr + 31, cap] {
        for (head, tail) in [(fr, fp), (fp, fr)] {
            same_on_both(
                &cuda,
                &host,
                &[f(ext as u64)[..outer * cap * inner].to_vec()],
                &|b, p| {
                    let rs = (cap * inner) as i64;
                    // SAFETY: p[0] holds outer·cap·inner words (the slice passed above), rows of stride
                    // cap·inner; the carry kernel touches frames [0, ext) of each of `outer` rows in place, with
                    // head + tail < ext <= cap.
                    unsafe {
                        b.launch(
                            &kc::RETAIN,
                            LaunchDims::blocks(outer as u32, 256),
                            &[
                                Arg::Ptr(p[0]),
                                Arg::Ptr(p[0]),
                                Arg::I64(outer as i64),
                                Arg::I64(rs),
                                Arg::I64(rs),
                                Arg::I64(inner as i64),
                                Arg::I64(head as i64),
                                Arg::I64(tail as i64),
                                Arg::I64(ext as i64),
                            ],
                        )
                    }
                    .unwrap()
                },
            );
        }
    }
}

#[test]
fn cuda_all_registered_modules_compile() {
    let Some(cuda) = common::cuda() else { return };
    let all: Vec<&'static kernels::KernelDef> = kernels::registry().collect();
    let t = std::time::Instant::now();
    cuda.preload(&all).unwrap();
    println!(
        "{}: {} kernels in {} modules compiled and loaded in {:.1} ms",
        cuda.device_name(),
        all.len(),
        kernels::sources().len(),
        t.elapsed().as_secs_f64() * 1e3
    );
}

/// Both backends refuse every copy, memset, GEMM and launch that would leave their buffers,
/// whatever the arguments (huge counts, addresses near `u64::MAX`, batches past the end,
/// misalignment), before touching memory, during capture as well as eagerly (CUDA checks
/// against its registry of live allocations before issuing the call); and a graph whose
/// buffer was freed after capture is refused at replay before any of it runs.
fn refuses_out_of_bounds_arguments(b: Arc<dyn Backend>) {
    let a = b.alloc(64, AllocKind::Other).unwrap();
    let c = b.alloc(64, AllocKind::Other).unwrap();
    let oob = |r: dcc_runtime::Result<()>| {
        assert!(
            matches!(
                r,
                Err(Error::OutOfBounds(_) | Error::Dangling(_) | Error::Invalid(_))
            ),
            "{r:?}"
        )
    };
    // Copies: one byte too many, a count that would wrap the address space, a wild address,
    // overlapping ranges.
    oob(b.dtod(c.ptr(), a.ptr(), 65));
    oob(b.dtod(c.ptr(), a.ptr().offset(8), 64));
    oob(b.dtod(c.ptr().offset(8), a.ptr(), 64));
    oob(b.dtod(c.ptr(), a.ptr(), usize::MAX));
    oob(b.dtod(DevPtr(u64::MAX - 3), a.ptr(), 1));
    oob(b.dtod(a.ptr().offset(8), a.ptr(), 16));
    oob(b.htod(DevPtr(u64::MAX - 3), &[0u8; 8]));
    oob(b.htod(a.ptr().offset(60), &[0u8; 8]));
    let mut sink = [0u8; 8];
    assert!(b.dtoh(&mut sink, DevPtr(u64::MAX - 3)).is_err());
    oob(b.dtoh(&mut sink, a.ptr().offset(60)));
    oob(b.memset_d32(a.ptr(), 0, 17));
    oob(b.memset_d32(a.ptr(), 0, usize::MAX / 2));
    oob(b.memset_d32(a.ptr().offset(2), 0, 1));
    oob(b.memset_d32(DevPtr(u64::MAX - 3), 0, 1));
    // A launch whose pointer argument no live buffer owns.
    b.preload(&[&ks::AFFINE]).unwrap();
    // SAFETY: a zero-element AFFINE touches nothing; it is refused anyway (the wild pointer
    // starts in no live buffer).
    oob(unsafe {
        b.launch(
            &ks::AFFINE,
            LaunchDims::linear(1, 1),
            &[
                Arg::Ptr(DevPtr(u64::MAX - 3)),
                Arg::Ptr(a.ptr()),
                Arg::I64(0),
                Arg::F32(0.0),
                Arg::F32(0.0),
            ],
        )
    });
    // GEMM: 4x4 fits in 64 bytes; 5x4, a second batch, a leading dimension too small, or a
    // misaligned operand does not.
    let g = Gemm {
        trans_a: false,
        trans_b: false,
        m: 4,
        n: 4,
        k: 4,
        alpha: 1.0,
        a: a.ptr(),
        lda: 4,
        stride_a: 16,
        b: a.ptr(),
        ldb: 4,
        stride_b: 16,
        beta: 0.0,
        c: c.ptr(),
        ldc: 4,
        stride_c: 16,
        batch: 1,
    };
    b.gemm(&g).unwrap();
    b.gemm_bias(&g, a.ptr()).unwrap();
    oob(b.gemm(&Gemm {
        m: 5,
        lda: 5,
        ldc: 5,
        ..g
    }));
    oob(b.gemm(&Gemm { batch: 2, ..g }));
    oob(b.gemm(&Gemm { lda: 3, ..g }));
    oob(b.gemm(&Gemm {
        k: 1 << 40,
        lda: 4,
        ldb: 1 << 40,
        ..g
    }));
    oob(b.gemm(&Gemm {
        a: a.ptr().offset(1),
        ..g
    }));
    oob(b.gemm(&Gemm {
        trans_a: true,
        a: a.ptr().offset(16),
        ..g
    }));
    oob(b.gemm(&Gemm {
        c: DevPtr(u64::MAX - 3),
        ..g
    }));
    // gemm_bias: the bias (m floats) past the end, misaligned, an operand past the end, a
    // second batch.
    oob(b.gemm_bias(&g, a.ptr().offset(16 * 4)));
    oob(b.gemm_bias(&g, a.ptr().offset(4)));
    oob(b.gemm_bias(
        &Gemm {
            m: 5,
            lda: 5,
            ldc: 5,
            ..g
        },
        a.ptr(),
    ));
    oob(b.gemm_bias(
        &Gemm {
            b: a.ptr().offset(16),
            ..g
        },
        a.ptr(),
    ));
    oob(b.gemm_bias(&Gemm { batch: 2, ..g }, a.ptr()));
    b.begin_capture().unwrap();
    oob(b.gemm(&Gemm { batch: 2, ..g }));
    oob(b.gemm_bias(&g, a.ptr().offset(16 * 4)));
    oob(b.dtod(c.ptr(), a.ptr(), 65));
    oob(b.memset_d32(c.ptr(), 0, 17));
    drop(b.end_capture());
    // The buffers are untouched by every refused call (the accepted GEMMs read zeros and wrote
    // zeros).
    b.synchronize().unwrap();
    assert!(
        b.download::<u8>(c.ptr(), 64)
            .unwrap()
            .iter()
            .all(|&x| x == 0)
    );

    // A graph over a buffer that is then freed: replay is refused before any of it runs.
    b.upload(a.ptr(), &[1.0f32; 16]).unwrap();
    let d = b.alloc(64, AllocKind::Other).unwrap();
    let e = b.alloc(64, AllocKind::Other).unwrap();
    b.begin_capture().unwrap();
    b.memset_d32(c.ptr(), 9, 16).unwrap();
    b.gemm(&Gemm { c: d.ptr(), ..g }).unwrap();
    b.dtod(e.ptr(), d.ptr(), 64).unwrap();
    let graph = b.end_capture().unwrap();
    assert_eq!(graph.nodes(), 3);
    b.launch_graph(&graph).unwrap();
    assert_eq!(b.download::<u32>(c.ptr(), 16).unwrap(), vec![9; 16]);
    assert_eq!(b.download::<f32>(e.ptr(), 16).unwrap(), vec![4.0; 16]);
    b.memset_d32(c.ptr(), 0, 16).unwrap();
    let freed = d.ptr().0;
    drop(d);
    assert_eq!(b.launch_graph(&graph).unwrap_err(), Error::Dangling(freed));
    assert_eq!(
        b.download::<u32>(c.ptr(), 16).unwrap(),
        vec![0; 16],
        "nothing of the refused replay ran"
    );
    drop((graph, e));
}

both!(refuses_out_of_bounds_arguments);
