//! `main` of a server built by `mcpgraph build`: the graph arrives checked, with every expression
//! parsed, so start-up reads no YAML and parses no JSONata or JSON Logic.

use crate::engine::Engine;
use crate::http::{HTTP_USAGE, HttpOptions, run_http};
use crate::serve::run_stdio;
use crate::server::GraphServer;
use mcpgraph_compiler::{Graph, SourceFile};
use std::process::ExitCode;
use std::sync::Arc;

/// Runs a built server: `graph_json` is the embedded IR, `tools` the tool names the generated
/// module was written for.
pub fn main(graph_json: &str, tools: &[&str]) -> ExitCode {
    let graph: Graph = match serde_json::from_str(graph_json) {
        Ok(g) => g,
        Err(e) => {
            eprintln!(
                "error: the embedded graph cannot be read ({e}); rebuild this server with the same mcpgraph version"
            );
            return ExitCode::from(1);
        }
    };
    if !graph
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .eq(tools.iter().copied())
    {
        eprintln!(
            "error: the embedded graph does not match its generated module; regenerate the crate"
        );
        return ExitCode::from(1);
    }
    let mut args = std::env::args().skip(1).peekable();
    let mut mcp_file = None;
    let mut http = false;
    let mut options = HttpOptions::default();
    while let Some(arg) = args.next() {
        match options.take_arg(&arg, &mut args, &mut http) {
            Ok(true) => continue,
            Ok(false) => {}
            Err(message) => return usage_error(&graph, &message),
        }
        match arg.as_str() {
            "-h" | "--help" => {
                print!("{}", usage(&graph));
                return ExitCode::SUCCESS;
            }
            "-V" | "--version" => {
                println!(
                    "{} {} (mcpgraph {})",
                    graph.server.name,
                    graph.server.version,
                    env!("CARGO_PKG_VERSION")
                );
                return ExitCode::SUCCESS;
            }
            "-m" | "--mcp" => match args.next() {
                Some(path) => mcp_file = Some(path),
                None => return usage_error(&graph, "-m needs a file"),
            },
            other => return usage_error(&graph, &format!("unexpected argument {other:?}")),
        }
    }
    let graph = match mcp_file {
        Some(path) => match with_mcp_file(graph, &path) {
            Ok(g) => g,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(1);
            }
        },
        None => graph,
    };
    let make_server = move || Ok(GraphServer::new(Arc::new(Engine::load(graph)?)));
    if http {
        run_http(make_server, options)
    } else {
        crate::serve::init_logging_as(options.log_format, "warn");
        run_stdio(make_server)
    }
}

/// Servers of an MCP JSON file replace the graph's servers that came from an MCP file at build
/// time; the graph file's own servers always win. A replaced server keeps its locked contract:
/// the graph was checked against it, so a replacement that differs is drift.
fn with_mcp_file(mut graph: Graph, path: &str) -> Result<Graph, String> {
    let file = SourceFile::read(std::path::Path::new(path)).map_err(|d| d.message)?;
    let servers = mcpgraph_compiler::mcp_file_servers(&file).map_err(|e| format!("{path}: {e}"))?;
    for mut server in servers {
        match graph.servers.iter_mut().find(|s| s.name == server.name) {
            Some(existing) if existing.external => {
                server.lock = existing.lock.take();
                *existing = server;
            }
            Some(_) => {}
            None => graph.servers.push(server),
        }
    }
    Ok(graph)
}

fn usage(graph: &Graph) -> String {
    let mut text = format!(
        "{} {} — an MCP server built by mcpgraph from {}\n\nUsage: {} [-m FILE] [--http [ADDR] ...]\n\nServes over stdio (newline-delimited JSON-RPC), or streamable HTTP with --http. Tools:\n",
        graph.server.title,
        graph.server.version,
        graph.source_name,
        std::env::args().next().unwrap_or_else(|| "server".into())
    );
    for tool in &graph.tools {
        text.push_str(&format!("  {:<24} {}\n", tool.name, tool.description));
    }
    text.push_str("\nOptions:\n  -m, --mcp <FILE>  An MCP JSON file ({\"mcpServers\": {...}}) replacing the downstream servers\n                    that came from an MCP file at build time\n  -h, --help        Print help\n  -V, --version     Print version\n");
    text.push_str(HTTP_USAGE);
    text
}

fn usage_error(graph: &Graph, message: &str) -> ExitCode {
    eprintln!("error: {message}\n\n{}", usage(graph));
    ExitCode::from(2)
}
