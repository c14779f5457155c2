//! dcc-tests: end-to-end tests (in `tests/tests/`) of the path spec → generated code → compile
//! → run, and the example of build-script integration:
//!
//! * `build.rs` compiles `specs/*.yaml` with `dcc_compiler::Config` into `$OUT_DIR/dcc/`;
//! * the modules below include them with `dcc_runtime::include_contracts!`;
//! * `tests/tests/end_to_end.rs` binds an adapter with `#[native_clock]` and checks that the
//!   build-script module, the macro's module and the committed `dcc-generated` module agree, and
//!   that a Host arena laid out by the contract hands out the addresses the layout promises.

/// The contracts `build.rs` generated from the bundled specs.
pub mod contracts {
    /// `specs/token2wav.yaml`.
    pub mod token2wav {
        dcc_runtime::include_contracts!("token2wav");
    }
    /// `specs/freeze_omni.yaml`.
    pub mod freeze_omni {
        dcc_runtime::include_contracts!("freeze_omni");
    }
    /// `specs/language_backbone.yaml`.
    pub mod language_backbone {
        dcc_runtime::include_contracts!("language_backbone");
    }
}
