//! Compiles the contracts this crate includes (`src/lib.rs`), as a user's build script would.

fn main() {
    if let Err(e) = dcc_compiler::Config::new()
        .compile(&["../../specs/moshi.yaml", "../../specs/freeze_omni.yaml"])
    {
        // Cargo shows build-script stderr: fail the build with the rendered diagnostics.
        eprintln!("{e}");
        std::process::exit(1);
    }
}
