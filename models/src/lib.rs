//! dcc-models: decoder ports served by their native-clock contracts.

pub mod token2wav;
