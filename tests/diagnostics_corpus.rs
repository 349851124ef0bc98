//! The shared diagnostics corpus (`../shared/conformance/diagnostics`), run through the real
//! `mcpgraph check` binary by the corpus's own runner.

mod common;

#[test]
fn shared_diagnostics_corpus_passes() {
    let runner = common::shared_dir().join("tools/run-diagnostics.py");
    let output = std::process::Command::new("python3")
        .arg(&runner)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_mcpgraph"))
        .arg("check")
        .arg("{yaml}")
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "diagnostics corpus failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
