//! The batched catalog as the runtime reads it: the generated constants agree with each other
//! and with the contract's quantities (the compiler derived them once; this checks the spelling).

use dcc_generated::{token2wav as full, token2wav_tiny as tiny};

#[test]
fn token2wav_flow_batches_at_1_to_32() {
    let sizes = [1, 2, 4, 8, 16, 20, 24, 26, 28, 30, 31, 32];
    assert_eq!(full::FLOW_BATCH, sizes);
    assert_eq!(full::FLOW_ROWS_PER_SESSION, full::F_CHUNK * full::CFG);
    assert_eq!(full::FLOW_BATCHABLE.len(), full::Flow::CLASSES);
    assert_eq!(
        full::FLOW_GRAPHS,
        full::Flow::CLASSES * full::FLOW_BATCH.len()
    );
    assert_eq!(full::M_RESERVE_ROWS, 32 * full::FLOW_ROWS_PER_SESSION);
    assert_eq!(full::BATCH_SLOT_REGIONS, &[full::SolverWorkspace::NAME]);
    assert_eq!(full::BATCH_SLOT_BYTES, full::SolverWorkspace::BYTES);
}

#[test]
fn tiny_flow_batches_at_1_to_4() {
    assert_eq!(tiny::FLOW_BATCH, &[1, 2, 4]);
    assert_eq!(tiny::FLOW_ROWS_PER_SESSION, tiny::F_CHUNK * tiny::CFG);
    assert_eq!(tiny::MAX_BATCH, 4);
    assert_eq!(tiny::FLOW_M_RESERVE_ROWS, 4 * tiny::FLOW_ROWS_PER_SESSION);
}

#[test]
fn rows_and_bytes_follow_the_batch_size() {
    for (b, rows) in full::FLOW_BATCH.iter().zip(full::FLOW_BATCH_ROWS) {
        assert_eq!(*rows, b * full::FLOW_ROWS_PER_SESSION);
        assert_eq!(
            full::process_bytes(*b),
            full::PROCESS_BYTES + (b - 1) * full::BATCH_SLOT_BYTES
        );
    }
    assert_eq!(full::process_bytes(1), full::PROCESS_BYTES);
    assert_eq!(full::process_bytes(0), full::PROCESS_BYTES, "0 counts as 1");
    assert_eq!(full::process_bytes(usize::MAX), usize::MAX, "saturates");
    assert_eq!(
        full::process_bytes(full::MAX_BATCH),
        full::PROCESS_BYTES_AT_BATCH
    );
    // The per-session part is what it was: batching does not touch a session's own state.
    assert_eq!(full::SESSION_BYTES + full::PROCESS_BYTES, full::ARENA_BYTES);
}
