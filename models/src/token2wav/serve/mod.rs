//! Serving the flow under its native-clock contract: the `#[native_clock]` adapters
//! ([`adapter`]), the six arms of the paper's Table 5 factorial ([`Arm`]) and a streaming
//! [`Session`] that runs one arm.
//!
//! * **State rule** (arms S, SR, SRc): the carries, the solver workspace, the conformer caches,
//!   the conv contexts (`estimator_conv_cache`, `pre_lookahead_cache`, `up_layer_cache`) and the
//!   attention mask live in one region arena laid out by the contract ([`ArenaLayout`] of the
//!   adapter); addresses never change, carries are written back in place.
//! * **Stock** (arms B0, R, Rc): the vendor's 16 × 1000 estimator envelope; after every call the
//!   kept frames are materialized into fresh buffers (`torch.cat`), so carry addresses drift and
//!   replay must stage them: the catalog is the contract's with every carry input staged
//!   (`aliased: false`) and described by its real compact layout, so the staging copy is exact;
//!   the conv contexts stay in fixed session buffers (aliased, as the contract declares). That
//!   catalog is derived per session and owned by its engines ([`Catalog::Owned`]).
//! * **Replay** (R, SR: step clock, one engine per solver step; Rc, SRc: chunk clock, one engine
//!   for the whole loop): the contract's `encoder` and `flow` callables are wrapped by
//!   [`ExactShapeReplay`] engines of the session ([`dcc_runtime::session::Session`]); the
//!   closures take every tensor address from the [`Call`], by name through the contract's typed
//!   I/O structs ([`EncoderInputs`], [`FlowInputs`], ...). The prompt-priming pass and
//!   `last_chunk` calls run eager by construction.
//!
//! Retention is read from the contract: each cache region's storage order and kept slices
//! ([`Keeps`]: the `carry` region's `head ‖ tail` of its prepend storage — paper eq. 2 keeps
//! `head = retained, tail = prompt`, minicpmo-utils 1.0.7 `head = prompt, tail = retained` —
//! and the conformer caches' on their own clocks), handed to the carry as declared.
//!
//! Signature keys are built from the contract's regions as the port stores them (the spec's
//! `layout:`, e.g. `carry` = `[step, layer, cfg, head, frame, k‖v]`) and from the tensors the
//! callables really read (`tokens`; `mu`, `cond` as `[frames, mel]`; `spk` as `[1, spk_dim]`),
//! so they equal the generated catalog's with no special case.
//!
//! [`ArenaLayout`]: dcc_runtime::contract::ArenaLayout
//! [`Catalog::Owned`]: dcc_runtime::replay::Catalog::Owned
//! [`ExactShapeReplay`]: dcc_runtime::replay::ExactShapeReplay
//! [`Call`]: dcc_runtime::replay::Call
//! [`Keeps`]: super::Keeps

pub mod adapter;
mod arms;
mod batch;
mod batch_engine;
mod engines;
mod session;
mod streams;

pub use adapter::{
    BASE_POINT, ContractView, EncoderInputs, EncoderWrites, FlowInputs, FlowWrites, Token2Wav,
    Token2WavAdapter, Token2WavTiny, Token2WavTinyVendor,
};
pub use arms::Arm;
pub use batch::{BatchStats, Batcher, GroupPhases, NotBatchable, Request};
pub use batch_engine::{GroupEngines, GroupReport};
pub use engines::Callable;
pub use session::{Session, SessionStats};
pub use streams::StreamInputs;
