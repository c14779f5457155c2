//! The solver's time conditions (`Dit::time_condition`: the timestep embedding, its two-layer
//! MLP and every block's adaLN modulations, four launches a step) are read from the flow's table
//! of every step's, prepared when a state is created (`DeviceFlow::prepare_time_conditions`), or
//! computed step by step without one (`DeviceFlow::forget_time_conditions`): the same bits, four
//! launches a step fewer with the table (tiny model, Host, one B0 session; chunk 1 counted).

use dcc_models::token2wav::SolverParams;
use dcc_runtime::ops::GemmPath;

mod common;
use common::b0_chunks;

/// `(launches of chunk 1, mel bits of chunks 0 and 1)` of a B0 session on `path`, its flow's
/// time-condition tables forgotten after the session's state prepared them when `forget`.
fn chunks(path: GemmPath, forget: bool) -> (u64, Vec<u32>) {
    let (launches, mels, _) = b0_chunks(path, |dev| {
        if forget {
            dev.forget_time_conditions();
        }
    });
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
