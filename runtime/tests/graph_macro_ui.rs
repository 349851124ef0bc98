//! `graph!`'s compile errors, as the user sees them (trybuild; `TRYBUILD=overwrite` to update).

#[test]
fn graph_macro_errors() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
