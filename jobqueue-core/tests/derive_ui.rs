//! `#[derive(Job)]`: what compiles, and what a misuse reports (one file per
//! misuse under `tests/ui/fail/`, its expected message beside it). Here in
//! the core crate, whose dependencies are all trybuild's build compiles.

#[test]
fn derive_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
