//! The six arms of the paper's Table 5: the state rule (on or off) × replay (none, step clock,
//! chunk clock).

use dcc_runtime::contract::Granularity;

/// The six arms of Table 5.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Arm {
    /// Stock: `torch.cat` retention into fresh buffers, the 16 × 1000 envelope, eager.
    B0,
    /// State rule only (arena, in-place carry), eager.
    S,
    /// Replay at the step clock without the state rule (carries staged).
    R,
    /// Replay at the chunk clock without the state rule (carries staged).
    Rc,
    /// State rule + replay at the step clock.
    SR,
    /// State rule + replay at the chunk clock.
    SRc,
}

impl Arm {
    pub const ALL: [Arm; 6] = [Arm::B0, Arm::S, Arm::R, Arm::Rc, Arm::SR, Arm::SRc];

    pub fn name(self) -> &'static str {
        match self {
            Arm::B0 => "B0",
            Arm::S => "S",
            Arm::R => "R",
            Arm::Rc => "Rc",
            Arm::SR => "SR",
            Arm::SRc => "SRc",
        }
    }

    pub fn parse(s: &str) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether the arm places state by the contract (arena, in-place carry).
    pub fn state_rule(self) -> bool {
        matches!(self, Arm::S | Arm::SR | Arm::SRc)
    }

    /// The capture granularity of the arm's flow, `None` for eager arms.
    pub fn replay(self) -> Option<Granularity> {
        match self {
            Arm::B0 | Arm::S => None,
            Arm::R | Arm::SR => Some(Granularity::Step),
            Arm::Rc | Arm::SRc => Some(Granularity::Chunk),
        }
    }
}
