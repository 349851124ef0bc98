//! The shared graph corpus (`../shared/conformance/graphs`) against `mcpgraph serve` and the
//! original's command line `mcpgraph -g`, through the corpus's own runner; and our own cases for
//! the language extensions (`tests/conformance`, which the original cannot run) against `serve`.

use crate::common;

fn run_corpus(command: &[&str]) {
    let mut args = vec!["--"];
    args.extend_from_slice(command);
    common::run_shared_runner("run-conformance.py", &args);
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

/// The extensions' cases (`tests/conformance/*.cases.json`, the contract in
/// `../shared/spec/extensions.md`) through the same runner, every cases file of the directory.
#[test]
fn extension_cases_pass_on_serve() {
    let dir = common::root().join("tests/conformance");
    let dir = dir.to_string_lossy();
    common::run_shared_runner(
        "run-conformance.py",
        &["--dir", &dir, "--", common::mcpgraph(), "serve", "{yaml}"],
    );
}
