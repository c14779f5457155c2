//! Compiles the bundled specs into `$OUT_DIR/dcc/<family>.rs` (included by `src/lib.rs` with
//! `dcc_runtime::include_contracts!`). Cargo reruns this script when a spec changes
//! (`cargo:rerun-if-changed`, printed by `Config::compile`), so the constants follow the spec.

fn main() {
    if let Err(e) = dcc_compiler::Config::new().compile(&[
        "../specs/token2wav.yaml",
        "../specs/freeze_omni.yaml",
        "../specs/language_backbone.yaml",
    ]) {
        // Cargo shows build-script stderr; fail the build with the rendered diagnostics.
        eprintln!("{e}");
        std::process::exit(1);
    }
}
