//! dcc-models: decoder ports served by their native-clock contracts.

pub mod nn;
pub mod token2wav;
pub mod vocoder;
