//! dcc-models: decoder ports served by their native-clock contracts.

pub mod fsio;
pub mod nn;
pub mod speech;
pub mod token2wav;
pub mod vocoder;
