//! The shared graph corpus (`../shared/conformance/graphs`) against `mcpgraph serve` and the
//! original's command line `mcpgraph -g`, through the corpus's own runner.

mod common;

fn run_corpus(command: &[&str]) {
    let runner = common::shared_dir().join("tools/run-conformance.py");
    let output = std::process::Command::new("python3")
        .arg(&runner)
        .arg("--")
        .args(command)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "graph corpus failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

#[test]
fn graph_corpus_passes_on_serve() {
    run_corpus(&[common::mcpgraph(), "serve", "{yaml}"]);
}

#[test]
fn graph_corpus_passes_on_the_original_command_line() {
    // No {yaml}: the runner appends `-g YAML`, exactly as for the original.
    run_corpus(&[common::mcpgraph()]);
}
