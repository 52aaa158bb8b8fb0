//! `#[derive(Job)]` misused: what each misuse reports (one file per misuse
//! under `tests/ui/fail/`, its expected message beside it). Here in the
//! core crate, whose dependencies are all trybuild's build compiles; only
//! failures, so that build is `cargo check` (no code generated, nothing
//! linked). What compiles is tested as ordinary code (tests/derive_pass/).

#[test]
fn derive_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
}
