//! Resident memory after each start-up step of a built server (to find what touches memory).

use mcpgraph_compiler::{SourceFile, compile};

fn rss() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = |k: &str| {
        status
            .lines()
            .find(|l| l.starts_with(k))
            .unwrap_or_default()
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_string()
    };
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    let file = rollup
        .lines()
        .find(|l| l.starts_with("Pss_File"))
        .unwrap_or_default()
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    format!("RSS {} kB (file {file} kB)", line("VmRSS:"))
}

fn main() {
    println!("start: {}", rss());
    let text =
        std::fs::read_to_string(std::env::args().nth(1).expect("a graph")).expect("readable");
    let graph = compile(&SourceFile::new("g.yaml", text), None)
        .graph
        .expect("checks");
    let json = serde_json::to_string(&graph).expect("serializes");
    println!(
        "compiled (not part of a built server's start-up): {}",
        rss()
    );
    let graph: mcpgraph_compiler::Graph = serde_json::from_str(&json).expect("deserializes");
    println!("IR deserialized: {}", rss());
    mcpgraph_runtime::init_logging();
    println!("logging: {}", rss());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("tokio runtime: {}", rss());
    let engine = mcpgraph_runtime::Engine::load(graph).expect("engine");
    println!("Engine::load (program, workers): {}", rss());
    let tool = engine.graph().tools[0].name.clone();
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::env::args().nth(2).unwrap_or_else(|| "{}".into()))
            .expect("JSON args");
    // Part of the first call's validator build, alone: jsonschema checks a schema against its
    // draft's meta-schema before compiling it (no switch turns this off).
    if std::env::var_os("STARTUP_RSS_META_FIRST").is_some() {
        let _ = jsonschema::meta::is_valid(&serde_json::json!({"type": "string"}));
        println!("the 2020-12 meta-schema validator alone: {}", rss());
    }
    let _ = rt.block_on(engine.call(&tool, args.clone(), Default::default(), None));
    println!("after the first call of {tool}: {}", rss());
    for _ in 0..1000 {
        let _ = rt.block_on(engine.call(&tool, args.clone(), Default::default(), None));
    }
    println!("after 1000 calls of {tool}: {}", rss());
}
