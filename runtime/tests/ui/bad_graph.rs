// The path is relative to the runtime's Cargo.toml (CARGO_MANIFEST_DIR), as in a user's crate.
mcpgraph_runtime::graph!("../compiler/tests/codes/E0205.yaml");

fn main() {
    // No follow-on error: the stub still has `Graph::new`.
    let _ = Graph::new();
}
