//! `#[derive(Job)]`: what compiles, and what a misuse reports (one file per
//! misuse under `tests/ui/fail/`, its expected message beside it).

#[test]
fn derive_ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/fail/*.rs");
    cases.pass("tests/ui/pass/*.rs");
}
