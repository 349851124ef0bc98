//! `graph-macro-corpus NAME`: serves the embedded graph NAME over stdio, as `mcpgraph serve`
//! would serve the file.

#[tokio::main]
async fn main() -> Result<(), String> {
    let name = std::env::args()
        .nth(1)
        .ok_or("usage: graph-macro-corpus NAME")?;
    mcpgraph_graph_macro_corpus::serve(&name).await
}
