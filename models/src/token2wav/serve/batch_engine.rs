//! The batched `flow` call of a group of sessions, eager or through graphs.

use super::super::{BatchIo, BatchedFlow, FlowError};

/// The engines of batched calls.
pub struct GroupEngines {
    replay: bool,
}

impl GroupEngines {
    pub(super) fn new(replay: bool) -> GroupEngines {
        GroupEngines { replay }
    }

    /// Whether batched calls go through graphs.
    pub fn replays(&self) -> bool {
        self.replay
    }

    /// Device bytes of the captured graphs and their staging buffers.
    pub fn bytes(&self) -> usize {
        0
    }

    /// The batched call over every solver step of `io`'s members.
    pub(super) fn call(
        &mut self,
        flow: &BatchedFlow,
        io: &BatchIo<'_>,
    ) -> Result<usize, FlowError> {
        // SAFETY: the members are states of sessions of `flow`'s device (the batcher checks
        // the flow), borrowed by the caller for the call; their tensors lie in their arenas.
        unsafe { flow.call(io, 0..io.solver.n_steps) }
    }
}
