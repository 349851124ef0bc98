//! The shared graph corpus (`../shared/conformance/graphs`) against `mcpgraph serve` and the
//! original's command line `mcpgraph -g`, through the corpus's own runner.

mod common;

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
