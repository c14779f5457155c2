//! dcc-generated: the committed output of `dcc compile` for every bundled spec (`specs/*.yaml`).
//!
//! Each module is `@generated`; never edit one by hand. `tests/regen.rs` regenerates all of them
//! and fails, naming the command to run, if a single byte differs:
//!
//! ```text
//! cargo run -p dcc-compiler --bin dcc -- compile specs/<x>.yaml -o generated/src/<x>.rs
//! ```
//!
//! Every module depends only on the public API of `dcc-runtime` (`dcc_runtime::contract`).

#[rustfmt::skip]
pub mod cosyvoice2_flow;
#[rustfmt::skip]
pub mod freeze_omni;
#[rustfmt::skip]
pub mod language_backbone;
#[rustfmt::skip]
pub mod mimi;
#[rustfmt::skip]
pub mod moshi;
#[rustfmt::skip]
pub mod speech_token_kv;
#[rustfmt::skip]
pub mod token2wav;
#[rustfmt::skip]
pub mod token2wav_tiny;
#[rustfmt::skip]
pub mod token2wav_tiny_vendor;
