//! Typed errors, no panics, on bad inputs (cheap: loads the tiny weights, runs nothing heavy).

use std::path::PathBuf;

use dcc_models::token2wav::{
    DeviceFlow, DeviceLimits, Flow, FlowConfig, FlowError, Retention, SolverParams, WeightStore,
};

fn weights() -> WeightStore {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/token2wav_tiny/weights.safetensors");
    WeightStore::load(p).unwrap()
}

#[test]
fn flow_rejects_bad_inputs() {
    let ws = weights();
    let flow = Flow::from_store(&ws).unwrap();
    let s = SolverParams::default();
    let spk = vec![0.1f32; 192];
    let mel = vec![0.0f32; 8 * 80];
    // wrong mel length for 7 tokens (4 frames × 2 = 8 frames expected)
    assert!(matches!(
        flow.setup_cache(&[1; 7], &mel[..80], &spk, &s),
        Err(FlowError::Input(_))
    ));
    // token outside the vocabulary
    assert!(matches!(
        flow.setup_cache(&[6561, 0, 0, 0, 0, 0, 0], &mel, &spk, &s),
        Err(FlowError::Input(_))
    ));
    // wrong speaker width
    assert!(matches!(
        flow.setup_cache(&[1; 7], &mel, &spk[..10], &s),
        Err(FlowError::Input(_))
    ));
    // a cache primed for 10 steps used with 5
    let mut cache = flow.setup_cache(&[1; 7], &mel, &spk, &s).unwrap();
    let five = SolverParams { n_steps: 5, ..s };
    assert!(matches!(
        flow.inference_chunk(&[1; 7], &spk, &mut cache, false, &five),
        Err(FlowError::Input(_))
    ));
    // too short a chunk
    assert!(matches!(
        flow.inference_chunk(&[1; 3], &spk, &mut cache, false, &s),
        Err(FlowError::Input(_))
    ));
}

#[test]
fn missing_or_misshapen_weights_are_errors() {
    let ws = weights();
    let mut full = FlowConfig::tiny();
    full.encoder = FlowConfig::full().encoder;
    assert!(matches!(
        Flow::from_store_with(&ws, full),
        Err(FlowError::Shape { .. })
    ));
    assert!(matches!(
        WeightStore::default().shape("x"),
        Err(FlowError::Missing(_))
    ));
    assert!(matches!(
        Flow::from_store(&WeightStore::default()),
        Err(FlowError::Missing(_))
    ));
    assert_eq!(FlowConfig::full().dit.inner(), 512);
}

#[test]
fn device_flow_rejects_bad_inputs() {
    let flow = Flow::from_store(&weights()).unwrap();
    let limits = DeviceLimits {
        max_call_tokens: 10,
        carry_frames: 12,
    };
    let dev = DeviceFlow::new(dcc_runtime::backend::host(), &flow, limits).unwrap();
    let s = SolverParams::default();
    assert!(matches!(
        dev.new_state(s, Retention::paper(10, 4)),
        Err(FlowError::Input(_))
    ));
    assert!(matches!(
        dev.new_state(s, Retention::paper(5, 4)),
        Err(FlowError::Input(_))
    ));
    let mut st = dev.new_state(s, Retention::vendor(8, 4)).unwrap();
    let spk = vec![0.1f32; 192];
    assert!(matches!(
        dev.inference_chunk(&mut st, &[1; 7], &spk, false),
        Err(FlowError::Input(_))
    ));
    let mel = vec![0.0f32; 8 * 80];
    assert!(matches!(
        dev.setup_cache(&mut st, &[1; 11], &mel, &spk),
        Err(FlowError::Input(_))
    ));
    assert!(matches!(
        dev.setup_cache(&mut st, &[9999; 7], &mel, &spk),
        Err(FlowError::Input(_))
    ));
    dev.setup_cache(&mut st, &[1; 7], &mel, &spk).unwrap();
    assert_eq!(st.estimator_extent(), 8);
    assert!(matches!(
        dev.inference_chunk(&mut st, &[1; 7], &spk[..3], false),
        Err(FlowError::Input(_))
    ));
}

/// The state rule takes every region from the contract by axis name and checks the storage
/// against the port's: a contract that stores the carry frame-major (not the port's `[step,
/// layer, cfg, head, frame, k‖v]`) is a typed error, never a misread arena.
#[test]
fn arena_state_checks_the_contract_storage() {
    use dcc_models::token2wav::serve::{ContractView, Token2WavTiny};
    use dcc_runtime::contract::{ArenaLayout, RegionInfo};
    let flow = Flow::from_store(&weights()).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let r = contract.retention;
    let limits = DeviceLimits {
        max_call_tokens: 154,
        carry_frames: r.limit(),
    };
    let dev = DeviceFlow::new(dcc_runtime::backend::host(), &flow, limits).unwrap();
    let s = SolverParams::default();
    dev.new_state_in_arena(s, r, &contract.arena).unwrap();
    // the same bytes, `frame` moved to the front
    let leak = |v: Vec<RegionInfo>| -> &'static [RegionInfo] { Box::leak(v.into_boxed_slice()) };
    let regions = contract
        .arena
        .regions
        .iter()
        .map(|ri| {
            if ri.name != "carry" {
                return *ri;
            }
            let f = ri.axis("frame").unwrap();
            let order: Vec<usize> = std::iter::once(f)
                .chain((0..ri.dims.len()).filter(|&i| i != f))
                .collect();
            RegionInfo {
                dims: Box::leak(order.iter().map(|&i| ri.dims[i]).collect()),
                dim_names: Box::leak(order.iter().map(|&i| ri.dim_names[i]).collect()),
                ..*ri
            }
        })
        .collect();
    let frame_major = ArenaLayout {
        regions: leak(regions),
        ..contract.arena
    };
    match dev.new_state_in_arena(s, r, &frame_major) {
        Err(FlowError::Config(m)) => assert!(m.contains("carry"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a frame-major carry was accepted"),
    }
}
