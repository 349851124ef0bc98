//! `main` of a server built by `mcpgraph build`: the graph arrives checked, with every expression
//! parsed, so start-up reads no YAML and parses no JSONata or JSON Logic. The command line is
//! parsed by hand (a built server does not link clap): the HTTP flags by the runtime's table of
//! them (`http/flags.rs`), the same one `mcpgraph serve` builds its clap arguments from, with
//! clap's words for every refusal.

use crate::engine::Engine;
use crate::http::flags::{FlagError, HttpFlags, next_value, two_columns, usage_rows};
use crate::http::run_http;
use crate::serve::run_stdio;
use crate::server::GraphServer;
use mcpgraph_compiler::{Graph, SourceFile};
use std::process::ExitCode;
use std::sync::Arc;

/// Runs a server built by `mcpgraph build --native`: `graph_json` is the embedded IR, `tools`
/// the tool names the generated module was written for.
pub fn main(graph_json: &str, tools: &[&str]) -> ExitCode {
    main_native(graph_json, tools, None)
}

/// [`main`] with the graph's expressions and rules compiled to Rust (`build --native`), given
/// to the graph before it is served.
pub fn main_native(
    graph_json: &str,
    tools: &[&str],
    natives: Option<&'static crate::native::Natives>,
) -> ExitCode {
    let mut graph: Graph = match serde_json::from_str(graph_json) {
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
    if let Some(natives) = natives {
        crate::native::attach(&mut graph, natives);
    }
    run(graph)
}

/// Runs a server made by `mcpgraph build` from the stub: the graph attached to its own file
/// (`attached.rs`), which is checked before anything else happens; a server whose attachment is
/// missing, cut, changed or from another version says which and exits 1.
pub fn main_attached() -> ExitCode {
    let graph = crate::attached::own_payload().and_then(|payload| {
        serde_json::from_slice::<Graph>(&payload).map_err(|_| {
            let exe = std::env::current_exe().unwrap_or_default();
            (
                exe,
                crate::attached::AttachedError::Corrupted(
                    "its graph's checksum matches but the graph does not read as this version's IR",
                ),
            )
        })
    });
    match graph {
        Ok(graph) => run(graph),
        Err((exe, error)) => {
            eprintln!("error: {}", error.message(&exe));
            ExitCode::from(1)
        }
    }
}

/// The command line of a built server, then serving: the same for both kinds of build.
fn run(graph: Graph) -> ExitCode {
    // Lossy rather than `std::env::args`, which panics on an argument that is not UTF-8: such
    // an argument is then refused (or names a file that is not found) like any other.
    let mut args = std::env::args_os()
        .skip(1)
        .map(|arg| arg.to_string_lossy().into_owned())
        .peekable();
    let mut mcp_file = None;
    let mut flags = HttpFlags::default();
    while let Some(arg) = args.next() {
        match flags.take_arg(&arg, &mut args) {
            Ok(true) => continue,
            Ok(false) => {}
            Err(error) => return usage_error(&graph, &error),
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
            "-m" | "--mcp" => match next_value(&mut args) {
                Some(path) => mcp_file = Some(path),
                None => {
                    let error = FlagError::MissingValue {
                        flag: "--mcp <FILE>".to_string(),
                    };
                    return usage_error(&graph, &error);
                }
            },
            other => {
                let error = FlagError::UnexpectedArgument {
                    argument: other.to_string(),
                };
                return usage_error(&graph, &error);
            }
        }
    }
    let flags = match flags.finish() {
        Ok(flags) => flags,
        Err(error) => return usage_error(&graph, &error),
    };
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
    if flags.http {
        run_http(make_server, flags.options)
    } else {
        crate::serve::init_logging_as(flags.options.log_format, "warn");
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

/// The help: the tools, then the options (the HTTP ones from the table), each list in two
/// columns as wide as its longest entry, as clap lays out `mcpgraph serve --help`.
fn usage(graph: &Graph) -> String {
    let program = std::env::args_os()
        .next()
        .map(|arg| arg.to_string_lossy().into_owned())
        .unwrap_or_else(|| "server".into());
    let mut text = format!(
        "{} {} — an MCP server built by mcpgraph from {}\n\nUsage: {program} [-m <FILE>] [--http [<ADDR>] ...]\n\nServes over stdio (newline-delimited JSON-RPC), or streamable HTTP with --http. Tools:\n",
        graph.server.title, graph.server.version, graph.source_name,
    );
    let tools: Vec<(String, String)> = graph
        .tools
        .iter()
        .map(|tool| (tool.name.clone(), tool.description.clone()))
        .collect();
    text.push_str(&two_columns(&tools));
    let mut options = vec![
        (
            "-m, --mcp <FILE>".to_string(),
            "An MCP JSON file ({\"mcpServers\": {...}}) replacing the downstream servers that came from an MCP file at build time".to_string(),
        ),
        ("-h, --help".to_string(), "Print help".to_string()),
        ("-V, --version".to_string(), "Print version".to_string()),
    ];
    options.extend(usage_rows());
    text.push_str("\nOptions:\n");
    text.push_str(&two_columns(&options));
    text
}

fn usage_error(graph: &Graph, error: &FlagError) -> ExitCode {
    eprintln!("error: {error}\n\n{}", usage(graph));
    ExitCode::from(2)
}
