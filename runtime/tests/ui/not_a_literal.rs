mcpgraph_runtime::graph!(42);

fn main() {}
