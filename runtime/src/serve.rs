//! Serving over stdio, with the lifecycle of contract §5: on stdin EOF, SIGTERM or SIGINT the
//! server stops taking calls, cancels runs, closes each downstream child (stdin closed, a grace
//! period, SIGTERM, SIGKILL) and exits 0.

use crate::engine::Engine;
use crate::program::Program;
use crate::server::{GraphServer, Identity};
use mcpgraph_compiler::{Checked, SourceFile, render};
use rmcp::ServiceExt;
use std::sync::Arc;
use std::time::Duration;

/// The most a shutdown waits for downstream children before the process exits anyway.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);

/// Logs go to stderr (stdout carries MCP only), quiet by default; `MCPGRAPH_LOG` or `RUST_LOG`
/// raise them (`MCPGRAPH_LOG=debug`, `RUST_LOG=mcpgraph=trace`).
pub fn init_logging() {
    let filter = std::env::var("MCPGRAPH_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "warn".to_string());
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .try_init();
}

/// The server for a checked graph file: a working one, or — when the graph does not check or its
/// schemas do not compile — one that reports why on every request.
pub fn server_for(checked: Checked, file: &SourceFile) -> GraphServer {
    let diagnostics = render::plain_list(&checked, file);
    let Some(graph) = checked.graph else {
        return GraphServer::broken(identity_of(file), diagnostics);
    };
    let server = graph.server.clone();
    let identity = Identity {
        name: server.name,
        version: server.version,
        title: server.title,
        instructions: server.instructions,
    };
    let prepared = Program::check_schemas(&graph)
        .and_then(|()| Program::new(graph))
        .and_then(|p| Engine::new(p).map_err(|e| e.to_string()));
    match prepared {
        Ok(engine) => GraphServer::new(Arc::new(engine)),
        Err(message) => GraphServer::broken(identity, message),
    }
}

/// What a graph that does not check can still say about itself.
fn identity_of(file: &SourceFile) -> Identity {
    Identity {
        name: "mcpgraph".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        title: format!("mcpgraph: {} (does not check)", file.name),
        instructions: None,
    }
}

/// Serves over stdin/stdout until stdin closes or a signal arrives.
pub async fn serve_stdio(server: GraphServer) -> Result<(), String> {
    let service = server
        .clone()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("MCP handshake failed: {e}"))?;
    let token = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {}
        () = signal() => {
            token.cancel();
        }
    }
    if let Some(engine) = server.engine() {
        let _ = tokio::time::timeout(SHUTDOWN_LIMIT, engine.shutdown()).await;
    }
    Ok(())
}

async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
