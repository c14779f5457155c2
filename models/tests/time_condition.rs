//! The solver's time conditions (`Dit::time_condition`: the timestep embedding, its two-layer
//! MLP and every block's adaLN modulations, four launches a step) are read from the flow's table
//! of every step's, prepared when a state is created (`DeviceFlow::prepare_time_conditions`), or
//! computed step by step without one (`DeviceFlow::forget_time_conditions`): the same bits, four
//! launches a step fewer with the table (tiny model, Host, one B0 session; chunk 1 counted).

use std::sync::Arc;

use dcc_models::nn::WeightStore;
use dcc_models::token2wav::serve::{Arm, ContractView, Session, Token2WavTiny};
use dcc_models::token2wav::{DeviceFlow, DeviceLimits, FlowConfig, SolverParams};
use dcc_runtime::backend::Backend;
use dcc_runtime::ops::GemmPath;
use safetensors::SafeTensors;

mod common;
use common::{dir, floats, tokens};

/// `(launches of chunk 1, mel bits of chunks 0 and 1)` of a B0 session on `path`, its flow's
/// time-condition tables forgotten after the session's state prepared them when `forget`.
fn chunks(path: GemmPath, forget: bool) -> (u64, Vec<u32>) {
    let io = std::fs::read(dir().join("io.safetensors")).unwrap();
    let io = SafeTensors::deserialize(&io).unwrap();
    let mut prompt = tokens(&io, "prompt_tokens");
    prompt.extend_from_within(..3);
    let (mel, spk, stream) = (
        floats(&io, "prompt_mel"),
        floats(&io, "spk"),
        tokens(&io, "stream_tokens"),
    );
    let ws = WeightStore::load(dir().join("weights.safetensors")).unwrap();
    let cfg = FlowConfig::from_weights(&ws).unwrap();
    let contract = ContractView::of::<Token2WavTiny>().unwrap();
    let limits = DeviceLimits {
        max_call_tokens: prompt.len(),
        carry_frames: contract.keeps.carry.bound(),
    };
    let be: Arc<dyn Backend> = dcc_runtime::backend::host();
    let dev = Arc::new(DeviceFlow::new_on_path(be.clone(), &ws, &cfg, limits, path).unwrap());
    let mut s = Session::new(dev.clone(), contract, Arm::B0, SolverParams::default()).unwrap();
    if forget {
        dev.forget_time_conditions();
    }
    s.prime(&prompt, &mel, &spk).unwrap();
    let mut mels = s.chunk(&stream[..28], &spk, false).unwrap();
    let before = be.eager_launches();
    mels.extend(s.chunk(&stream[25..53], &spk, false).unwrap());
    let launches = be.eager_launches() - before;
    (launches, mels.iter().map(|v| v.to_bits()).collect())
}

#[test]
fn the_table_gives_the_bits_of_each_steps_own_time_condition() {
    let steps = SolverParams::default().n_steps as u64;
    for path in [GemmPath::Invariant, GemmPath::Half] {
        let (table, with) = chunks(path, false);
        let (own, without) = chunks(path, true);
        println!("{path:?}: launches per chunk {table} with the table, {own} without");
        assert_eq!(with, without, "{path:?}: the table changed the mel");
        assert_eq!(own - table, 4 * steps, "{path:?}: launches per chunk");
    }
}
