//! End to end: spec → generated code (by `build.rs`, by `#[native_clock]` and committed in
//! `dcc-generated`) → compiled into this test → run on the Host backend.
//!
//! * The three copies of a contract agree (same layout, same catalog, same fingerprint), and
//!   the fingerprint matches the spec on disk today (so `build.rs` and the macro reran when it
//!   changed).
//! * An adapter built with `#[native_clock]` reads back its regions and catalogs.
//! * An arena allocated from the generated layout hands out the addresses the layout promises,
//!   bound through the typed `RegionBuf`s.
//! * `ExactShapeReplay` driven by the generated catalog captures every class and replays it
//!   bit-identically to eager.

use std::path::Path;
use std::sync::Arc;

use dcc_macros::native_clock;
use dcc_runtime::contract::{
    ArenaLayout, DType, NativeClock, NativeClockAdapter, RegionBuf, RegionLayout, Verdict,
};
use dcc_runtime::kernels::synthetic as ks;
use dcc_runtime::replay::{
    Call, ExactShapeReplay, Fallback, Invocation, Outcome, ReplaySpec, TensorArg, WriteArg,
};
use dcc_runtime::rng::HostRng;
use dcc_runtime::{Arena, Arg, Backend, LaunchDims, backend};
use dcc_tests::contracts;

fn spec_bytes(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../specs")
            .join(name),
    )
    .unwrap()
}

/// The Token2Wav adapter, as the model crate writes it.
#[native_clock(spec = "specs/token2wav.yaml")]
#[allow(dead_code)]
struct Token2WavAdapter {
    #[region(carry)]
    carry: contracts::token2wav::CarryBuf,
    #[region(solver_workspace)]
    workspace: RegionBuf<f32, { 458 * 16 * 2 * 8 * 128 }>, // one solver step (`lifetime: iteration`)
    #[region(attention_mask)]
    mask: RegionBuf<bool, 112>,
    #[region(conformer_cache)]
    conformer: RegionBuf<f32, { 6 * 8 * 201 * 128 }>,
    #[region(upsample_cache)]
    upsample: RegionBuf<f32, { 4 * 8 * 402 * 128 }>,
    #[region(estimator_conv_cache)]
    conv: RegionBuf<f32, { 10 * 16 * 2 * 2 * 2 * 512 }>,
    #[region(pre_lookahead_cache)]
    pre_lookahead: RegionBuf<f32, { 2 * 512 }>,
    #[region(up_layer_cache)]
    up_layer: RegionBuf<f32, { 4 * 512 }>,
    #[region(voc_mel)]
    voc_mel: RegionBuf<f32, { 55 * 80 }>,
    #[region(voc_source)]
    voc_source: RegionBuf<f32, { 52 * 480 }>,
    #[region(voc_phase)]
    voc_phase: RegionBuf<f64, 9>,
    #[region(voc_offsets)]
    voc_offsets: RegionBuf<i64, 5>,
    #[callable(encoder)]
    encoder: u8,
    #[callable(flow)]
    flow: u8,
    #[callable(vocoder, eager)]
    vocoder: u8,
    #[callable(vocoder_flush, eager)]
    vocoder_flush: u8,
}

#[test]
fn token2wav_adapter_reads_back_layout_and_catalog() {
    type C = <Token2WavAdapter as NativeClockAdapter>::Contract;
    assert_eq!(C::FAMILY, "token2wav");
    assert_eq!(Token2WavAdapter::SPEC_PATH, "specs/token2wav.yaml");
    C::verify_spec(&spec_bytes("token2wav.yaml")).expect("macro saw today's spec");

    // Regions: the carry holds 402 frames, the workspace one solver step's 458 (`lifetime:
    // iteration`).
    let carry = Token2WavAdapter::region_of("carry").unwrap();
    assert_eq!(carry.name, "carry");
    assert_eq!(carry.attended, 402);
    // Storage order (`layout:`): [step, layer, cfg, head, frame, k‖v], as the port stores it.
    assert_eq!(carry.dims, &[10, 16, 2, 8, 402, 128]);
    assert_eq!(carry.axis("frame"), Some(4));
    assert_eq!(
        carry.strides(),
        [13_172_736, 823_296, 411_648, 51_456, 128, 1]
    );
    assert_eq!(
        carry.keep.map(|k| (k.head, k.tail)),
        Some((100, 302)),
        "the prepend order's natural rule: newest 100 at the head, the prompt at the tail"
    );
    let ws = Token2WavAdapter::region_of("workspace").unwrap();
    assert_eq!(ws.name, "solver_workspace");
    assert_eq!((ws.dims[0], ws.dims[4]), (1, 458));
    assert_eq!(ws.bytes, 458 * 131_072);
    // The conformer caches at their own clocks: 6 blocks on the token clock (151 + 50 tokens),
    // 4 up-blocks on the frame clock (302 + 100 frames).
    let conf = Token2WavAdapter::region_of("conformer").unwrap();
    assert_eq!(
        (conf.dims, conf.axis("token")),
        (&[6, 8, 201, 128][..], Some(2))
    );
    let up = Token2WavAdapter::region_of("upsample").unwrap();
    assert_eq!(
        (up.dims, up.axis("frame")),
        (&[4, 8, 402, 128][..], Some(2))
    );
    // The conv contexts: pinned windows (2 frames per step, 2 tokens, 4 frames), in storage order.
    let conv = Token2WavAdapter::region_of("conv").unwrap();
    assert_eq!(
        (
            conv.dims,
            conv.axis("step"),
            conv.axis("frame"),
            conv.attended
        ),
        (&[10, 16, 2, 2, 2, 512][..], Some(0), Some(4), 2)
    );
    let pre = Token2WavAdapter::region_of("pre_lookahead").unwrap();
    assert_eq!((pre.dims, pre.axis("token")), (&[2, 512][..], Some(0)));
    let upc = Token2WavAdapter::region_of("up_layer").unwrap();
    assert_eq!((upc.dims, upc.axis("frame")), (&[4, 512][..], Some(0)));
    assert_eq!(Token2WavAdapter::REGION_FIELDS.len(), 12);

    // The arena: one allocation, every region at an aligned offset, total = Σ aligned sizes.
    let arena = Token2WavAdapter::arena();
    let mut offset = 0;
    for r in arena.regions {
        assert_eq!(r.offset, offset, "{}", r.name);
        assert_eq!(r.offset % arena.align, 0);
        offset += r.bytes.div_ceil(arena.align) * arena.align;
    }
    assert_eq!(arena.total_bytes, offset);
    assert_eq!(arena.total_bytes, 601_218_560);

    // Catalogs: the 3 attended extents of the flow; the encoder's two caches advance together
    // on the token clock, so its catalog is the 3 reachable of eq. 7's 3 × 3 tuples, (151, 302),
    // (176, 352), (201, 402) (the pinned conv contexts add K_r = 1); the eager binding has none.
    let flow = Token2WavAdapter::catalog_of("flow").unwrap();
    let extents: Vec<usize> = flow.iter().map(|s| s.attended).collect();
    assert_eq!(extents, [302, 352, 402]);
    let enc = Token2WavAdapter::catalog_of("encoder").unwrap();
    assert_eq!(enc.len(), 3);
    assert_eq!(enc[0].scalars, &[151, 302]);
    assert_eq!(enc[1].scalars, &[176, 352]);
    assert_eq!(enc[2].scalars, &[201, 402]);
    for cat in [flow, enc] {
        assert!(cat.iter().enumerate().all(|(i, s)| s.class as usize == i));
    }
    let cache = flow[1].inputs.iter().find(|t| t.name == "cache").unwrap();
    assert_eq!(cache.dims, &[10, 16, 2, 8, 352, 128]);
    assert_eq!(
        cache.strides,
        carry.strides().as_slice(),
        "a view into the 402-frame carry"
    );
    assert!(cache.aliased);
    assert_eq!(flow[1].scalars, &[352]);
    assert!(Token2WavAdapter::catalog_of("vocoder").unwrap().is_empty());
    // The contract's vocoder catalog (bound eager here): the first chunk (empty histories) and
    // every later one (39 mel frames, 17,280 source samples).
    let voc = &contracts::token2wav::VOCODER_CATALOG;
    assert_eq!(voc.len(), 2);
    assert_eq!(voc[1].scalars, &[39, 17_280]);
    assert_eq!(
        Token2WavAdapter::callable_of("vocoder").unwrap().verdict,
        Verdict::Captured
    );
    assert_eq!(C::admit("flow", 50), Some(true));
    assert_eq!(C::admit("flow", 51), Some(false));
    assert_eq!(C::admit("nope", 1), None);
}

#[test]
fn build_script_macro_and_committed_modules_agree() {
    use contracts::token2wav as built;
    use dcc_generated::token2wav as committed;
    type M = <Token2WavAdapter as NativeClockAdapter>::Contract;
    built::Contract::verify_spec(&spec_bytes("token2wav.yaml")).expect("build.rs reran");
    assert_eq!(built::SPEC_SHA256, committed::SPEC_SHA256);
    assert_eq!(M::SPEC_SHA256, committed::SPEC_SHA256);
    assert_eq!(built::ARENA, committed::ARENA);
    assert_eq!(M::ARENA, committed::ARENA);
    assert_eq!(built::CALLABLES, committed::CALLABLES);
    assert_eq!(M::CALLABLES, &committed::CALLABLES[..]);
    assert_eq!(built::Carry::ATTENDED, 402);
    assert_eq!(built::SolverWorkspace::ENVELOPE_AXES, [1, 458]);
    assert_eq!(built::Flow::ATTENDED_EXTENTS, [302, 352, 402]);
    // The typed I/O structs name the catalog's inputs and the declared writes, in their order.
    for sig in &built::FLOW_CATALOG {
        let names: Vec<&str> = sig.inputs.iter().map(|t| t.name).collect();
        assert_eq!(names, built::FlowInputs::NAMES);
    }
    for sig in &built::ENCODER_CATALOG {
        let names: Vec<&str> = sig.inputs.iter().map(|t| t.name).collect();
        assert_eq!(names, built::EncoderInputs::NAMES);
    }
    assert_eq!(built::Flow::WRITES, built::FlowWrites::NAMES);
    assert_eq!(built::Encoder::WRITES, built::EncoderWrites::NAMES);
    assert_eq!(
        built::FlowInputs::from_array([0, 1, 2, 3, 4]),
        built::FlowInputs {
            mu: 0,
            cond: 1,
            spk: 2,
            cache: 3,
            conv_cache: 4
        }
    );
    let writes = built::FlowWrites {
        solver_workspace: "ws",
        carry: "carry",
        estimator_conv_cache: "conv",
    };
    assert_eq!(writes.into_array(), ["ws", "carry", "conv"]);
    assert_eq!(
        built::FlowWrites::try_from_fn(|i| ["a", "b", "c"].get(i).copied().ok_or(i)),
        Ok(built::FlowWrites {
            solver_workspace: "a",
            carry: "b",
            estimator_conv_cache: "c"
        })
    );
    assert_eq!(
        built::FlowWrites::try_from_fn(|i| if i < 2 { Ok(i) } else { Err(i) }),
        Err(2),
        "the first error stops"
    );
    assert_eq!(
        <built::Carry as RegionLayout>::INFO,
        *built::ARENA.region("carry").unwrap()
    );
    for (b, c) in [
        (
            contracts::freeze_omni::ARENA,
            dcc_generated::freeze_omni::ARENA,
        ),
        (
            contracts::language_backbone::ARENA,
            dcc_generated::language_backbone::ARENA,
        ),
    ] {
        assert_eq!(b, c);
    }
}

/// A small contract end to end on the Host backend.
#[native_clock(spec = "specs/freeze_omni.yaml")]
struct CodecAdapter {
    #[region(codec_context)]
    context: contracts::freeze_omni::CodecContextBuf,
    #[callable(codec_decode)]
    decode: u32,
}

/// One kernel over the context region: ctx = ctx * 0.5 + 0.25, over the attended frames. Reads
/// its arguments by name through the generated I/O structs.
fn decode(call: &mut Call<'_>) -> dcc_runtime::Result<()> {
    use contracts::freeze_omni::{CodecDecodeInputs, CodecDecodeWrites};
    let ctx = CodecDecodeWrites::try_from_fn(|i| call.write(i))?.codec_context;
    let dims = CodecDecodeInputs::try_from_fn(|i| call.dims(i))?.context;
    let frames = dims[0];
    let n = frames * dims[1];
    // SAFETY: the engines of this test bind the write `codec_context` to an arena's region of
    // that name and the input `context` to the same region with the catalog's dims
    // [frames, 512], frames = 40 or 50; the
    // region is sized for the retention window codec_chunk + codec_pad = 50 frames of 512 floats
    // (`fo::CodecContext::ELEMS`), so n = frames·512 floats lie inside it. The arenas outlive
    // the engines' graphs; AFFINE is elementwise, so in place is allowed.
    unsafe {
        call.backend().launch(
            &ks::AFFINE,
            LaunchDims::linear(n, 128),
            &[
                Arg::Ptr(ctx),
                Arg::Ptr(ctx),
                Arg::I64(n as i64),
                Arg::F32(0.5),
                Arg::F32(0.25),
            ],
        )
    }
}

#[test]
fn host_arena_and_replay_follow_the_generated_contract() {
    use contracts::freeze_omni as fo;
    let b: Arc<dyn Backend> = backend::host();
    b.preload(ks::KERNELS).unwrap();
    let layout: ArenaLayout = CodecAdapter::arena();
    assert_eq!(layout.total_bytes, fo::ARENA_BYTES);

    // Two worlds: eager reference and replay, each with its own arena.
    let (ea, ra) = (
        Arena::new(b.clone(), &layout).unwrap(),
        Arena::new(b.clone(), &layout).unwrap(),
    );
    let adapter = CodecAdapter {
        context: RegionBuf::bind(&ra, "codec_context").unwrap(),
        decode: 7,
    };
    assert_eq!(
        adapter.context.ptr(),
        ra.base().offset(fo::CodecContext::OFFSET)
    );
    assert_eq!(
        adapter.context,
        fo::CodecContextBuf::at::<fo::CodecContext>(ra.base())
    );
    // A buffer type of another size is refused at run time too.
    assert!(RegionBuf::<f32, 100>::bind(&ra, "codec_context").is_err());
    assert_eq!(adapter.decode, 7);

    let info = CodecAdapter::callable_of("decode").unwrap();
    assert_eq!(info.catalog.len(), 2);
    let mut eager_spec = ReplaySpec::from_callable(info, 0);
    eager_spec.verdict = Verdict::OutWidth; // never captures: the eager reference
    let mut eager = ExactShapeReplay::new(
        b.clone(),
        eager_spec,
        Arc::new(HostRng::new(1)),
        None,
        decode,
    )
    .unwrap();
    let mut replay = ExactShapeReplay::new(
        b.clone(),
        ReplaySpec::from_callable(info, 0),
        Arc::new(HostRng::new(1)),
        None,
        decode,
    )
    .unwrap();

    let codes_e = b.alloc(40 * 8, dcc_runtime::AllocKind::Staging).unwrap();
    let codes_r = b.alloc(40 * 8, dcc_runtime::AllocKind::Staging).unwrap();
    let init: Vec<f32> = (0..fo::CodecContext::ELEMS)
        .map(|i| i as f32 * 0.001)
        .collect();
    b.upload(ea.ptr("codec_context").unwrap(), &init).unwrap();
    b.upload(ra.ptr("codec_context").unwrap(), &init).unwrap();

    let mut replays = 0;
    for call in 0..8usize {
        // The generated catalog says which frames each class attends (40 then 50).
        let sig = &info.catalog[usize::from(call > 0)];
        let frames = sig.attended;
        let run = |e: &mut ExactShapeReplay<_>, arena: &Arena, codes: dcc_runtime::DevPtr| {
            let ctx = arena.ptr("codec_context").unwrap();
            let sigs = fo::CodecDecodeInputs::from_array([&sig.inputs[0], &sig.inputs[1]]);
            assert_eq!(
                sigs.map(|t| t.name),
                fo::CodecDecodeInputs::from_array(fo::CodecDecodeInputs::NAMES)
            );
            let ctx_dims = [frames, 512];
            assert_eq!(sigs.context.dims, &ctx_dims);
            let inputs = fo::CodecDecodeInputs {
                codes: TensorArg {
                    ptr: codes,
                    dims: sigs.codes.dims,
                    strides: sigs.codes.strides,
                    dtype: DType::I64,
                },
                context: TensorArg {
                    ptr: ctx,
                    dims: &ctx_dims,
                    strides: &[512, 1],
                    dtype: DType::F32,
                },
            }
            .into_array();
            let region = arena.region("codec_context").unwrap();
            let writes = fo::CodecDecodeWrites {
                codec_context: WriteArg {
                    ptr: ctx,
                    bytes: region.bytes(),
                },
            }
            .into_array();
            e.call(&Invocation {
                inputs: &inputs,
                writes: &writes,
                scalars: &[frames as i64],
            })
            .unwrap()
        };
        assert_eq!(
            run(&mut eager, &ea, codes_e.ptr()),
            Outcome::Eager(Fallback::OutOfScope)
        );
        let out = run(&mut replay, &ra, codes_r.ptr());
        if call < 2 {
            assert_eq!(out, Outcome::Eager(Fallback::Probation), "call {call}");
        } else {
            assert_eq!(out, Outcome::Replayed { class: 1 }, "call {call}");
            replays += 1;
        }
        let e: Vec<f32> = b
            .download(ea.ptr("codec_context").unwrap(), fo::CodecContext::ELEMS)
            .unwrap();
        let r: Vec<f32> = b
            .download(ra.ptr("codec_context").unwrap(), fo::CodecContext::ELEMS)
            .unwrap();
        assert!(
            e.iter().zip(&r).all(|(a, b)| a.to_bits() == b.to_bits()),
            "call {call}: replay differs from eager"
        );
    }
    let report = replay.report();
    assert_eq!(report.replays, replays);
    assert_eq!(report.classes_captured, 2);
}
