//! The `mcpgraph` command line as its users run it: transcripts (trycmd), `check` over the
//! corpora and the examples, `lock`, `build` and `emit`, `graph!` expansions. One test binary,
//! a module per subject (the tree is linked once; see ARCHITECTURE.md, "Tests").

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod build;
mod call_limits;
mod diagnostics_corpus;
mod examples;
mod graph_macro_expansion;
mod lock;
mod stub;
mod transcripts;
