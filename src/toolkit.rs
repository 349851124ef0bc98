//! `mcpgraph toolkit FILE [-m mcp.json]`: the authoring toolkit, an MCP server over stdio with
//! the original `mcpgraphtoolkit`'s 13 tools (same names, arguments and result shapes) and four
//! of ours (checkGraph, drawGraph, buildGraph, lockGraph). Every edit goes through the compiler
//! before anything is written (docs/toolkit.md).
//!
//! ```text
//! server.rs          the rmcp ServerHandler: a call typed, dispatched to its tool's work, answered
//! tools.rs           the tools declared once: names, typed arguments and their checks, schemas
//! run.rs             the graph's current version loaded into an engine; runGraphTool
//! history.rs         runGraphTool's records, each with the context its node saw
//! store.rs           the graph file: reads, and edits serialised, checked and written atomically
//!                    (the first one creating the file, when the toolkit started on none)
//! output_schemas.rs  (a test) every tool's results, success and failure, fit its outputSchema
//! ```

mod history;
#[cfg(test)]
mod output_schemas;
mod run;
mod server;
pub mod store;
mod tools;

use mcpgraph_runtime::LineTransport;
use mcpgraph_runtime::rmcp::{RoleServer, ServiceExt};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The most a shutdown waits for downstream children before the process exits anyway.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);

/// Serves the toolkit for `graph` until stdin closes or SIGTERM/SIGINT arrives; exit 0, or 1
/// with the reason on stderr. A `graph` that does not exist yet, in a directory that does, is a
/// graph without tools, which the first edit writes (`store::read_graph`).
pub fn main(graph: PathBuf, mcp: Option<PathBuf>) -> ExitCode {
    mcpgraph_runtime::init_logging();
    if let Err(d) = store::read_graph(&graph) {
        eprintln!("error[{}]: {}", d.code, d.message);
        return ExitCode::from(1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(serve(graph, mcp));
    runtime.shutdown_timeout(Duration::from_millis(100));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

async fn serve(graph: PathBuf, mcp: Option<PathBuf>) -> Result<(), String> {
    let toolkit = server::Toolkit::new(graph, mcp);
    let (input, output) = mcpgraph_runtime::stdio::open();
    let transport = LineTransport::<RoleServer, _, _>::new(input, output);
    let service = toolkit
        .clone()
        .serve(transport)
        .await
        .map_err(|e| format!("MCP handshake failed: {e}"))?;
    let token = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {}
        () = mcpgraph_runtime::shutdown_signal() => token.cancel(),
    }
    let _ = tokio::time::timeout(SHUTDOWN_LIMIT, toolkit.shutdown()).await;
    Ok(())
}
