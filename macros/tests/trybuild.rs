//! Compile-fail tests of `#[native_clock]`: every error is spanned on the user's tokens and
//! quotes the contract. Expected output lives next to each case (`tests/ui/*.stderr`); the
//! toolchain is pinned in `rust-toolchain.toml` so it is stable. Regenerate with
//! `TRYBUILD=overwrite cargo test -p dcc-macros --test trybuild` and review every diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass_*.rs");
    t.compile_fail("tests/ui/fail_*.rs");
}
