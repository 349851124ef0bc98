// trybuild compiles this in target/tests/trybuild/mcpgraph-runtime: paths are relative to it.
mcpgraph_runtime::graph!("../../../../compiler/tests/codes/E0205.yaml");

fn main() {
    // No follow-on error: the stub still has `Graph::new`.
    let _ = Graph::new();
}
