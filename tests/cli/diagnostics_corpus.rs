//! The shared diagnostics corpus (`../shared/conformance/diagnostics`), run through the real
//! `mcpgraph check` binary by the corpus's own runner.

use crate::common;

#[test]
fn shared_diagnostics_corpus_passes() {
    common::run_shared_runner(
        "run-diagnostics.py",
        &["--", common::mcpgraph(), "check", "{yaml}"],
    );
}
