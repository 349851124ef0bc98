//! Embeds `examples/greeting_next.yaml`: `embed NAME [--formal]` calls the `greet` tool through
//! its typed method; `embed --serve` serves the graph over stdio like `mcpgraph serve`.

mcpgraph_runtime::graph!("../greeting_next.yaml");

#[tokio::main]
async fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let graph = Graph::new()?;
    if args.first().map(String::as_str) == Some("--serve") {
        return graph.serve_stdio().await;
    }
    let input = GreetInput {
        name: args.first().cloned().unwrap_or_else(|| "world".into()),
        formal: Some(args.iter().any(|a| a == "--formal")),
        ..GreetInput::default()
    };
    let output: GreetOutput = graph.greet(&input).await.map_err(|e| e.to_string())?;
    println!("{}", output.greeting);
    Ok(())
}
