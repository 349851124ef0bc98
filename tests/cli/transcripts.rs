//! CLI transcripts: `tests/cmd/*.toml`, run against the real binary by trycmd.

#[test]
fn cli_transcripts() {
    trycmd::TestCases::new()
        .env("NO_COLOR", "1")
        .case("tests/cmd/*.toml")
        .case("README.md");
}
