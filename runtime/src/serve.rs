//! Serving over stdio, with the lifecycle of contract §5: on stdin EOF, SIGTERM or SIGINT the
//! server stops taking calls, cancels runs, closes each downstream child (stdin closed, a grace
//! period, SIGTERM, SIGKILL, to its whole process group) and exits 0. `mcpgraph serve`, built servers and `graph!` programs
//! all start here.

use crate::engine::{CallError, CallOptions, Engine, LoadError};
use crate::envsubst::redact;
use crate::line_transport::LineTransport;
use crate::server::GraphServer;
use mcpgraph_compiler::Graph;
use rmcp::ServiceExt;
use serde_json::{Map, Value};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// The most a shutdown waits for downstream children before the process exits anyway.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);
/// How long runs still pending on worker threads may keep the process once serving ended.
const RUNTIME_GRACE: Duration = Duration::from_millis(100);

/// Why serving (or a process's one call) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("MCP handshake failed: {0}")]
    Handshake(#[source] Box<rmcp::service::ServerInitializeError>),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(transparent)]
    Http(#[from] HttpError),
}

/// Why HTTP serving could not start. (Defined here, with every other reason serving fails, so
/// that stdio serving knows nothing of HTTP: http.rs builds on this module, not the reverse.)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to serve on {addr} without a token: anyone who can reach it could call the tools. Give --auth-token-env VAR, or --allow-unauthenticated to serve it open"
    )]
    Unauthenticated { addr: SocketAddr },
    #[error("{0}")]
    RequestStateKey(String),
    #[error("{0}")]
    Serve(std::io::Error),
}

/// Logs go to stderr (stdout carries MCP only), quiet by default; `MCPGRAPH_LOG` or `RUST_LOG`
/// raise them (`MCPGRAPH_LOG=debug`, `RUST_LOG=mcpgraph=trace`). Every value expanded from a
/// `${VAR}` is written back as the variable: rmcp and the HTTP client log URLs and commands.
pub fn init_logging() {
    init_logging_as(LogFormat::Text, "warn");
}

/// How log lines are written: text for people, one JSON object per line for collectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl std::str::FromStr for LogFormat {
    type Err = String;

    fn from_str(text: &str) -> Result<LogFormat, String> {
        match text {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            other => Err(format!("unknown log format {other:?} (text or json)")),
        }
    }
}

/// [`init_logging`] in `format`, with `default` as the filter when the environment sets none
/// (HTTP serving logs each call: `warn,mcpgraph::call=info`), rmcp's warnings of each
/// cancellation left out ([`QUIET_RMCP`]).
pub fn init_logging_as(format: LogFormat, default: &str) {
    // Every process mcpgraph starts (serve, call, built servers) makes ring rustls' default, so
    // no HTTP client of it can lack a TLS provider (reqwest panics without one). A `graph!`
    // program, which does not come here, keeps its own choice.
    crate::init_tls();
    let configured = std::env::var("MCPGRAPH_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok();
    let filter = log_filter(configured, default);
    let builder = tracing_subscriber::fmt()
        .with_writer(|| RedactedStderr)
        .with_ansi(false)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// What the default filter adds for rmcp. Its service loop logs a WARN ("response error") for
/// every request the handler answers with an error, and a cancelled call is answered so (the
/// answer is then dropped: the client asked for none), so every cancellation, a client's right,
/// would log a warning. Its other warnings under this target (and its `client` and `server`
/// modules) are alike, about what a peer did: an answer that arrived for a downstream call
/// nobody waits for any more (cancelled, timed out), a request refused, a message out of turn;
/// what fails is reported by the calls themselves. `error` keeps rmcp's own failures.
const QUIET_RMCP: &str = "rmcp::service=error";

/// The filter: the one the environment set (`MCPGRAPH_LOG`, else `RUST_LOG`), taken as it is,
/// so that anyone raising the logs sees rmcp's warnings too; else `default` with [`GRAPH_LOG`]
/// and [`QUIET_RMCP`].
fn log_filter(configured: Option<String>, default: &str) -> String {
    configured.unwrap_or_else(|| format!("{default},{GRAPH_LOG},{QUIET_RMCP}"))
}

/// What the default filter adds for the graph's own `log:` lines (docs/semantics.md §22): info
/// and above are written, as the graph's author asked; debug ones when the filter says so.
const GRAPH_LOG: &str = "mcpgraph::log=info";

/// A whole process's one call (`mcpgraph call`): logging, a multi-threaded runtime, the
/// graph loaded, `tool` called, the downstream servers closed (at most [`SHUTDOWN_LIMIT`]).
pub fn call_once(
    graph: Graph,
    tool: &str,
    arguments: Map<String, Value>,
    options: CallOptions,
) -> Result<Value, ServeError> {
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    let outcome = runtime.block_on(async move {
        let engine = Engine::load(graph)?;
        let result = engine.call_with(tool, arguments, options).await;
        // Bounded as serving's shutdown is: a child that outlasts it is killed with its process
        // group when the runtime below drops its connection (see child.rs).
        let _ = tokio::time::timeout(SHUTDOWN_LIMIT, engine.shutdown()).await;
        // The spans still held go to the collector (telemetry.rs).
        crate::telemetry::flush().await;
        Ok(result?)
    });
    runtime.shutdown_timeout(RUNTIME_GRACE);
    outcome
}

/// A whole process's serving: logging, a multi-threaded runtime, the server `make_server`
/// builds (inside the runtime), serving until stdin closes or a signal arrives, then a bounded
/// shutdown. Exit 0, or 1 with the error on stderr.
pub fn run_stdio(make_server: impl FnOnce() -> Result<GraphServer, ServeError>) -> ExitCode {
    init_logging();
    run_serving(async move { serve_stdio(make_server()?).await })
}

/// A serving process's body on a multi-threaded runtime, bounded at its end; exit 0, or 1 with
/// the error on stderr. Shared by stdio and HTTP serving.
pub(crate) fn run_serving(
    serving: impl std::future::Future<Output = Result<(), ServeError>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(crate::placement::serving_workers())
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return exit_code(Err(ServeError::Runtime(e))),
    };
    let outcome = runtime.block_on(serving);
    // Runs still pending on worker threads must not keep the process alive.
    runtime.shutdown_timeout(RUNTIME_GRACE);
    exit_code(outcome)
}

/// stderr, through [`redact`]. The formatter writes each event in one call, so a value is never
/// split between two writes.
struct RedactedStderr;

impl std::io::Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

fn exit_code(outcome: Result<(), ServeError>) -> ExitCode {
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Serves over stdin/stdout until stdin closes or a signal arrives, then stops every run and
/// closes the downstream servers (at most [`SHUTDOWN_LIMIT`]).
pub async fn serve_stdio(server: GraphServer) -> Result<(), ServeError> {
    let (input, output) = crate::stdio::open();
    let transport = LineTransport::<rmcp::RoleServer, _, _>::new(input, output);
    let service = server
        .clone()
        .serve(transport)
        .await
        .map_err(|e| ServeError::Handshake(Box::new(e)))?;
    let token = service.cancellation_token();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    tokio::select! {
        _ = &mut waiting => {}
        () = shutdown_signal() => {
            token.cancel();
        }
    }
    // Every version's children: the current one's, and those of replaced versions still
    // finishing calls (`serve --watch`).
    let _ = tokio::time::timeout(SHUTDOWN_LIMIT, server.shutdown()).await;
    // The spans still held go to the collector (telemetry.rs).
    crate::telemetry::flush().await;
    Ok(())
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C elsewhere): the shutdown every serving process shares.
pub async fn shutdown_signal() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Log lines written to memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// What `filter` lets through of the warning rmcp's service loop logs for a request its
    /// handler answered with an error (a cancelled call), and of a warning of mcpgraph's own.
    fn logged(filter: &str) -> String {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(target: "rmcp::service", "response error");
            tracing::warn!(target: "mcpgraph::downstream", "a warning of our own");
        });
        let bytes = captured.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Quiet by default, every cancellation logged rmcp's WARN; a filter the environment sets
    /// is taken as it is, rmcp's warnings included.
    #[test]
    fn the_default_filter_leaves_out_rmcps_warning_of_each_cancellation() {
        let default = logged(&log_filter(None, "warn"));
        assert!(!default.contains("response error"), "{default}");
        assert!(default.contains("a warning of our own"), "{default}");
        let http_default = logged(&log_filter(None, "warn,mcpgraph::call=info"));
        assert!(!http_default.contains("response error"), "{http_default}");
        let configured = logged(&log_filter(Some("warn".to_string()), "warn"));
        assert!(configured.contains("response error"), "{configured}");
        assert!(configured.contains("a warning of our own"), "{configured}");
    }
}
