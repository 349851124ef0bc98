mcpgraph_runtime::graph!("no/such/graph.yaml");

fn main() {
    let _ = Graph::new();
}
