//! Typed errors, no panics, on bad inputs, weights and contracts (cheap: loads the tiny weights,
//! runs nothing heavy).

use std::path::PathBuf;

use dcc_models::nn::{WeightError, WeightStore};
use dcc_models::token2wav::serve::{ContractView, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, FlowError, SolverParams};
use dcc_runtime::contract::{ArenaLayout, CacheOrder, RegionInfo};
use dcc_runtime::ops::RawTensor;

fn weights() -> WeightStore {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/token2wav_tiny/weights.safetensors");
    WeightStore::load(p).unwrap()
}

const LIMITS: DeviceLimits = DeviceLimits {
    max_call_tokens: 154,
    carry_frames: 402,
};

fn flow(ws: &WeightStore, limits: DeviceLimits) -> Result<DeviceFlow, FlowError> {
    let cfg = FlowConfig::from_weights(ws)?;
    DeviceFlow::new(dcc_runtime::backend::host(), ws, &cfg, limits)
}

/// The tiny contract's layout with region `name` replaced by `f(region)`.
fn edited(name: &str, f: impl Fn(RegionInfo) -> RegionInfo) -> ArenaLayout {
    let arena = ContractView::of::<Token2WavTiny>().unwrap().arena;
    let regions: Vec<RegionInfo> = arena
        .regions
        .iter()
        .map(|r| if r.name == name { f(*r) } else { *r })
        .collect();
    ArenaLayout {
        regions: Box::leak(regions.into_boxed_slice()),
        ..arena
    }
}

#[test]
fn missing_or_misshapen_weights_are_errors() {
    let ws = weights();
    let mut cfg = FlowConfig::tiny();
    cfg.encoder = FlowConfig::full().encoder;
    assert!(matches!(
        DeviceFlow::new(dcc_runtime::backend::host(), &ws, &cfg, LIMITS),
        Err(FlowError::Weight(WeightError::Shape { .. }))
    ));
    assert!(matches!(
        WeightStore::default().shape("x"),
        Err(WeightError::Missing { .. })
    ));
    assert!(matches!(
        FlowConfig::from_weights(&WeightStore::default()),
        Err(FlowError::Weight(WeightError::Missing { .. }))
    ));
    assert!(matches!(
        WeightStore::from_bytes(b"not a safetensors file"),
        Err(WeightError::Format { .. })
    ));
    assert_eq!(FlowConfig::full().dit.inner(), 512);
}

#[test]
fn device_flow_rejects_bad_inputs() {
    let ws = weights();
    let dev = flow(&ws, LIMITS).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let s = SolverParams::default();
    let mut st = dev.new_state_in_arena(s, &contract.arena).unwrap();
    let spk = vec![0.1f32; 192];
    let mel = vec![0.0f32; 8 * 80];
    // not primed yet
    assert!(matches!(
        dev.inference_chunk(&mut st, &[1; 7], &spk, false),
        Err(FlowError::NotPrimed)
    ));
    // more tokens than the flow's buffers hold; a token outside the vocabulary; a speaker
    // embedding of the wrong width; a prompt mel of the wrong length
    assert!(matches!(
        dev.setup_cache(&mut st, &[1; 155], &vec![0.0; 304 * 80], &spk),
        Err(FlowError::Input(_))
    ));
    assert!(matches!(
        dev.setup_cache(&mut st, &[9999; 7], &mel, &spk),
        Err(FlowError::Input(_))
    ));
    assert!(matches!(
        dev.setup_cache(&mut st, &[1; 7], &mel, &spk[..10]),
        Err(FlowError::Input(_))
    ));
    assert!(matches!(
        dev.setup_cache(&mut st, &[1; 7], &mel[..80], &spk),
        Err(FlowError::Input(_))
    ));
    dev.setup_cache(&mut st, &[1; 7], &mel, &spk).unwrap();
    assert_eq!(st.estimator_extent(), 8);
    // too short a chunk
    assert!(matches!(
        dev.inference_chunk(&mut st, &[1; 3], &spk, false),
        Err(FlowError::Input(_))
    ));
    // a state of another flow
    let other = flow(&ws, LIMITS).unwrap();
    assert!(matches!(
        other.inference_chunk(&mut st, &[1; 7], &spk, false),
        Err(FlowError::Input(_))
    ));
    // a callable's I/O of other dims is refused before anything is queued
    let be = dev.backend().clone();
    let mut io = dev.encoder_io(&st, 7, false).unwrap();
    io.carry = RawTensor::packed(io.carry.ptr(), &[2, 3, 201, 64]).unwrap();
    let n = be.eager_launches();
    // SAFETY: the I/O of `st`, a state of `dev`, with the carry's dims changed; the call
    // checks them before queueing anything.
    let r = unsafe { dev.encoder_call(&io) };
    assert!(matches!(r, Err(FlowError::Input(_))), "{r:?}");
    assert_eq!(be.eager_launches(), n);
}

/// The contract's solver workspace holds one solver step (`lifetime: iteration`): the state
/// rule's calls, which write each step back into the carry before the next, reuse that slice;
/// a call that leaves the write-back to its caller (the stock store's) needs a slice per step,
/// and is refused before anything is queued.
#[test]
fn a_one_step_workspace_serves_only_calls_that_write_back() {
    let ws = weights();
    let dev = flow(&ws, LIMITS).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let s = SolverParams::default();
    let mut st = dev.new_state_in_arena(s, &contract.arena).unwrap();
    dev.setup_cache(&mut st, &[1; 7], &vec![0.0f32; 8 * 80], &vec![0.1f32; 192])
        .unwrap();
    let mut io = dev.flow_io(&st, 8).unwrap();
    assert_eq!(io.ws.dims()[0], 1, "the contract's workspace is one step's");
    assert!(io.write_back);
    io.write_back = false;
    let be = dev.backend().clone();
    let n = be.eager_launches();
    // SAFETY: the I/O of `st`, a state of `dev`, with the write-back left to the caller; the
    // call checks the workspace's steps before queueing anything.
    let r = unsafe { dev.flow_call(&io, 0..s.n_steps) };
    match r {
        Err(FlowError::Input(m)) => assert!(
            m.contains("one slice serves every step only where each step is written back"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(be.eager_launches(), n);
}

/// Caches whose kept frames exceed the flow's capacity are refused.
#[test]
fn limits_must_hold_what_the_contract_keeps() {
    let dev = flow(
        &weights(),
        DeviceLimits {
            max_call_tokens: 10,
            carry_frames: 12,
        },
    )
    .unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let s = SolverParams::default();
    assert!(matches!(
        dev.new_state_in_arena(s, &contract.arena),
        Err(FlowError::Input(_))
    ));
    assert!(matches!(
        dev.new_state_stock(s, &contract.arena),
        Err(FlowError::Input(_))
    ));
}

/// The state rule takes every region from the contract by axis name and checks the storage
/// against the port's: a contract that stores the carry frame-major (not the port's `[step,
/// layer, cfg, head, frame, k‖v]`), declares it append-ordered, or keeps the conformer caches
/// off one trajectory is a typed error, never a misread arena.
#[test]
fn arena_state_checks_the_contract() {
    let dev = flow(&weights(), LIMITS).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let s = SolverParams::default();
    dev.new_state_in_arena(s, &contract.arena).unwrap();
    // the same bytes, `frame` moved to the front
    let frame_major = edited("carry", |ri| {
        let f = ri.axis("frame").unwrap();
        let order: Vec<usize> = std::iter::once(f)
            .chain((0..ri.dims.len()).filter(|&i| i != f))
            .collect();
        RegionInfo {
            dims: Box::leak(order.iter().map(|&i| ri.dims[i]).collect()),
            dim_names: Box::leak(order.iter().map(|&i| ri.dim_names[i]).collect()),
            ..ri
        }
    });
    let config = |layout: &ArenaLayout, what: &str| match dev.new_state_in_arena(s, layout) {
        Err(FlowError::Config(m)) => assert!(m.contains(what), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("{what}: accepted"),
    };
    config(&frame_major, "carry");
    let append = edited("carry", |ri| RegionInfo {
        order: Some(CacheOrder::Append),
        ..ri
    });
    config(&append, "carry");
    let off = edited("upsample_cache", |ri| RegionInfo {
        keep: ri.keep.map(|k| dcc_runtime::contract::Keep {
            tail: k.tail - 2,
            ..k
        }),
        ..ri
    });
    config(&off, "trajectory");
}

#[test]
fn rel_l2_of_different_lengths_is_an_error() {
    use dcc_models::token2wav::{LengthMismatch, rel_l2};
    assert_eq!(
        rel_l2(&[1.0, 2.0], &[1.0]),
        Err(LengthMismatch { got: 2, want: 1 })
    );
    assert_eq!(rel_l2(&[3.0, 4.0], &[3.0, 4.0]), Ok(0.0));
    assert_eq!(rel_l2(&[0.0, 0.0], &[3.0, 4.0]), Ok(1.0));
}

#[test]
fn config_errors_name_the_tensor_and_the_values() {
    // The tiny weights with the first encoder block's `pos_bias_u` one head wider.
    let ws = weights();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for name in ws.names() {
        let shape = ws.shape(name).unwrap().to_vec();
        let mut shape2 = shape.clone();
        if name == "encoder.encoders.0.self_attn.pos_bias_u" {
            shape2[0] += 1;
        }
        let n: usize = shape2.iter().product();
        let mut data = ws.get(name, &shape).unwrap();
        data.resize(n, 0.0);
        let bytes = data.iter().flat_map(|x| x.to_le_bytes()).collect();
        tensors.push((name.to_string(), shape2, bytes));
    }
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .map(|(n, s, b)| {
            let v = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.clone(), b);
            (n.clone(), v.unwrap())
        })
        .collect();
    let bytes = safetensors::serialize(views, None).unwrap();
    let odd = WeightStore::from_bytes(&bytes).unwrap();
    let e = FlowConfig::from_weights(&odd).unwrap_err().to_string();
    assert!(
        e.contains("`encoder.encoders.0.self_attn.pos_bias_u` is [3, 32]: 3 heads × d_k 32 != the encoder width 64"),
        "{e}"
    );
}
