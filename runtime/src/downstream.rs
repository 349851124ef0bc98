//! Clients of the downstream MCP servers a graph calls (contract §5).
//!
//! Started lazily on first use and shared by every call (requests are multiplexed). A server that
//! died is started again on its next use; a failed start is not remembered. A start is shared
//! too: it runs in a task of its own, the calls that need the server meanwhile await that one
//! start, and a call cancelled while it waits leaves the start going for the next call (one
//! child per start, however many calls give up on it). A child's stderr is drained continuously
//! into a bounded log, whose recent lines are appended to errors.
//!
//! A server with a locked contract (`Server::lock`) has its live `tools/list` compared with the
//! lock once, on its first connection, after the first call there has its answer: drift is a
//! warning in the log, never a failure or a delay.

pub(crate) mod tls;
mod trace_headers;

use crate::child::ChildProcess;
use crate::envsubst::{expand_env, redact};
use crate::failure::{Failure, FailureKind};
use crate::trace_context::TraceContext;
use crate::value::to_jvalue;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Server, ServerId, Transport};
use mcpgraph_compiler::lock::{self, LockedServer, LockedTool};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation, RequestParamsMeta,
};
use rmcp::service::{
    ClientInitializeError, Peer, RoleClient, RunningService, ServiceError, ServiceExt,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpError};
use rmcp::transport::worker::WorkerQuitReason;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::runtime::Handle;
use tokio::sync::watch;

/// Lines and bytes of a child's stderr kept for error messages.
const STDERR_LINES: usize = 50;
const STDERR_BYTES: usize = 16 * 1024;

pub struct Downstream {
    slots: Vec<Slot>,
}

struct Slot {
    server: Server,
    /// Never locked across an await: a call takes what it needs and waits outside.
    state: Mutex<SlotState>,
    /// The drift check has been started: it runs on the first connection only.
    drift_checked: AtomicBool,
}

/// A server's connection, as far as it has come.
enum SlotState {
    /// Not started, or its last start failed (a failed start is not remembered).
    Idle,
    /// A start in progress, or finished with no call there yet to take its outcome. The start
    /// runs in a task of its own, which `abort` ends at shutdown.
    Starting {
        start: SharedStart,
        abort: tokio::task::AbortHandle,
    },
    Ready(Arc<Connection>),
}

/// A start every call that needs the server awaits: its outcome is each waiter's.
type SharedStart = Shared<BoxFuture<'static, Result<Arc<Connection>, Failure>>>;

impl SlotState {
    /// A finished start becomes its outcome: the connection, or [`SlotState::Idle`] when it
    /// failed. The start is polled once, without waiting: one that ended while nobody awaited
    /// it (every waiter was cancelled) is finished too, and its failure must not be handed to
    /// a call that comes long after, when a new start may well succeed.
    fn settle(&mut self) {
        if let SlotState::Starting { start, .. } = self
            // Unconstrained: a poll of a task's handle spends tokio's co-op budget, and with it
            // spent a finished start would read as pending.
            && let Some(outcome) = tokio::task::unconstrained(start.clone()).now_or_never()
        {
            *self = match outcome {
                Ok(connection) => SlotState::Ready(connection),
                Err(_) => SlotState::Idle,
            };
        }
    }
}

pub(crate) struct Connection {
    service: RunningService<RoleClient, ClientConfig>,
    stderr: Arc<StderrLog>,
}

/// The tail of a child's stderr, and whether it has closed (the child exited).
#[derive(Default)]
struct StderrLog {
    lines: Mutex<(VecDeque<String>, usize, u64)>,
    closed: Option<watch::Sender<bool>>,
}

impl StderrLog {
    fn push(&self, line: String) {
        if let Ok(mut guard) = self.lines.lock() {
            let (lines, bytes, total) = &mut *guard;
            *bytes += line.len();
            *total += 1;
            lines.push_back(line);
            while lines.len() > STDERR_LINES || (*bytes > STDERR_BYTES && lines.len() > 1) {
                if let Some(old) = lines.pop_front() {
                    *bytes -= old.len();
                }
            }
        }
    }

    /// How many lines were ever written: lines after this mark are the current node's.
    fn mark(&self) -> u64 {
        self.lines.lock().map_or(0, |g| g.2)
    }

    fn since(&self, mark: u64) -> Vec<String> {
        self.lines.lock().map_or_else(
            |_| Vec::new(),
            |g| {
                let (lines, _, total) = &*g;
                let new = (total - mark).min(lines.len() as u64) as usize;
                lines.iter().skip(lines.len() - new).cloned().collect()
            },
        )
    }
}

impl Downstream {
    pub fn new(servers: Vec<Server>) -> Self {
        Downstream {
            slots: servers
                .into_iter()
                .map(|server| Slot {
                    server,
                    state: Mutex::new(SlotState::Idle),
                    drift_checked: AtomicBool::new(false),
                })
                .collect(),
        }
    }

    /// Calls `tool` on server `id`; the node output as §3.3 of the contract extracts it.
    /// Connections are started on `runtime` (the runtime of the task that made the call, not the
    /// worker's: a worker busy evaluating could not drive them), and live there. `timeout_ms`
    /// bounds the request (the node's `timeoutMs`, else the server's). `slow_start` is told
    /// the server's name and how long this call waited when it waited for a slow start of the
    /// server ([`slow_start`]).
    #[expect(
        clippy::too_many_arguments,
        reason = "a call, its bounds and what it tells: one call site each"
    )]
    pub async fn call(
        &self,
        runtime: &Handle,
        id: ServerId,
        tool: &str,
        args: Map<String, Value>,
        timeout_ms: u64,
        trace: Option<&TraceContext>,
        slow_start: Option<&impl Fn(&str, Duration)>,
    ) -> Result<JValue, Failure> {
        self.call_inner(runtime, id, tool, args, timeout_ms, trace, slow_start)
            .await
            .map_err(redacted)
    }

    /// The `timeoutMs` of server `id`.
    pub fn timeout_ms(&self, id: ServerId) -> u64 {
        self.slots[id.0 as usize].server.timeout_ms
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "a call, its bounds and what it tells: one call site each"
    )]
    async fn call_inner(
        &self,
        runtime: &Handle,
        id: ServerId,
        tool: &str,
        args: Map<String, Value>,
        timeout_ms: u64,
        trace: Option<&TraceContext>,
        on_slow_start: Option<&impl Fn(&str, Duration)>,
    ) -> Result<JValue, Failure> {
        let slot = &self.slots[id.0 as usize];
        let (connection, waited) = self.connect(runtime, slot).await?;
        if let (Some(tell), Some(waited)) = (on_slow_start, waited)
            && waited >= slow_start(&slot.server)
        {
            tell(&slot.server.name, waited);
        }
        let mark = connection.stderr.mark();
        let mut params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        // The caller's trace context, as it came (trace_context.rs).
        if let Some(trace) = trace {
            params.set_traceparent(&trace.traceparent);
            if let Some(state) = &trace.tracestate {
                params.set_tracestate(state);
            }
        }
        let timeout = Duration::from_millis(timeout_ms);
        let peer = connection.service.peer().clone();
        // Dropping this future (time limit, cancellation) sends notifications/cancelled downstream.
        let outcome = tokio::time::timeout(timeout, peer.call_tool_once(params)).await;
        Self::check_drift(runtime, slot, &connection);
        let failure = match outcome {
            Ok(Ok(CallToolResponse::Complete(result))) => return extract(result),
            Ok(Ok(_)) => Failure::new(
                FailureKind::Protocol,
                "MCP tool call failed: the server answered with an incomplete result (input required or task), which mcpgraph does not support",
            ),
            Ok(Err(ServiceError::McpError(e))) => Failure::new(
                FailureKind::Protocol,
                format!("MCP error {}: {}", e.code.0, e.message),
            ),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                // The child is gone: give its stderr a moment to drain so the reason is shown.
                connection.wait_closed(Duration::from_millis(500)).await;
                Failure::new(
                    FailureKind::Connection,
                    "MCP error -32000: Connection closed",
                )
            }
            Ok(Err(ServiceError::Timeout { .. })) => {
                Failure::new(FailureKind::Timeout, timed_out(timeout_ms))
            }
            Ok(Err(ServiceError::Cancelled { .. })) => Failure::new(
                FailureKind::Connection,
                "MCP tool call failed: the call was cancelled",
            ),
            Ok(Err(_)) => Failure::new(
                FailureKind::Protocol,
                "MCP tool call failed: the server answered with something other than a tool result",
            ),
            Err(_) => Failure::new(FailureKind::Timeout, timed_out(timeout_ms)),
        };
        Err(failure.with_stderr(&connection.stderr.since(mark)))
    }

    /// The live connection of a slot, started (again) when there is none, with how long this
    /// call waited for a start (`None`: the connection was there). Every call that finds a
    /// start in progress awaits that start rather than making its own.
    async fn connect(
        &self,
        runtime: &Handle,
        slot: &Slot,
    ) -> Result<(Arc<Connection>, Option<Duration>), Failure> {
        let start = {
            let mut state = slot.lock_state();
            state.settle();
            match &*state {
                SlotState::Ready(c) if c.is_live() => return Ok((c.clone(), None)),
                SlotState::Starting { start, .. } => start.clone(),
                SlotState::Ready(_) | SlotState::Idle => {
                    if let SlotState::Ready(old) = std::mem::replace(&mut *state, SlotState::Idle) {
                        crate::metrics::downstream_restarted(&slot.server.name);
                        runtime.spawn(old.close());
                    }
                    let (start, abort) = begin_start(runtime, &slot.server);
                    *state = SlotState::Starting {
                        start: start.clone(),
                        abort,
                    };
                    start
                }
            }
        };
        let waiting = std::time::Instant::now();
        let outcome = start.await;
        let waited = waiting.elapsed();
        // The first waiter back records the outcome; a start whose waiters were all cancelled
        // is recorded by the next call (above).
        slot.lock_state().settle();
        outcome.map(|connection| (connection, Some(waited)))
    }

    /// Starts the drift check of a locked server once, after the first call on its first
    /// connection has its answer: a server that answers one request at a time never makes that
    /// call wait for the listing.
    fn check_drift(runtime: &Handle, slot: &Slot, connection: &Connection) {
        if let Some(locked) = &slot.server.lock
            && !slot.drift_checked.swap(true, Ordering::Relaxed)
        {
            // A peer, not the connection: a shutdown closes the connection it owns alone.
            let peer = connection.service.peer().clone();
            let (name, locked, timeout_ms) = (
                slot.server.name.clone(),
                locked.clone(),
                slot.server.timeout_ms,
            );
            runtime.spawn(async move { warn_of_drift(&name, &locked, &peer, timeout_ms).await });
        }
    }

    /// Closes every connection: each child's stdin is closed, then it gets a grace period,
    /// SIGTERM, and SIGKILL. A start still in progress is aborted: nobody will use it, and its
    /// child, dropped, is killed with its process group (child.rs).
    pub async fn shutdown(&self) {
        let mut closing = Vec::new();
        for slot in &self.slots {
            let state = {
                let mut state = slot.lock_state();
                state.settle();
                std::mem::replace(&mut *state, SlotState::Idle)
            };
            match state {
                SlotState::Ready(c) => closing.push(c.close()),
                SlotState::Starting { abort, .. } => abort.abort(),
                SlotState::Idle => {}
            }
        }
        futures::future::join_all(closing).await;
    }
}

impl Slot {
    /// The slot's state. Nothing panics while holding it, so a poisoned lock still holds a
    /// consistent state.
    fn lock_state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How long a start may take before it is reported as slow (docs/semantics.md §22): half of the
/// server's `timeoutMs` (which bounds its start: the next one may fail), and at most 5 s.
pub(crate) fn slow_start(server: &Server) -> Duration {
    Duration::from_millis(server.timeout_ms / 2).min(Duration::from_secs(5))
}

/// Starts `server` in a task of its own on `runtime`: a waiter that is cancelled does not stop
/// it, so the next call finds it finished or still going instead of starting another child.
fn begin_start(runtime: &Handle, server: &Server) -> (SharedStart, tokio::task::AbortHandle) {
    let server = server.clone();
    let task = runtime.spawn(async move {
        let begun = std::time::Instant::now();
        let started = start(&server).await.map(Arc::new);
        let took = begun.elapsed();
        if started.is_ok() && took >= slow_start(&server) {
            tracing::warn!(
                target: "mcpgraph::downstream",
                "server `{}` took {:.1} s to start (its timeoutMs is {} ms)",
                server.name,
                took.as_secs_f64(),
                server.timeout_ms
            );
        }
        started
    });
    let abort = task.abort_handle();
    let shared = async move {
        task.await.unwrap_or_else(|e| {
            Err(Failure::new(
                FailureKind::Connection,
                format!("MCP client initialization failed: {e}"),
            ))
        })
    }
    .boxed()
    .shared();
    (shared, abort)
}

impl Connection {
    /// Whether the connection can still carry calls: its service runs and its transport is open.
    fn is_live(&self) -> bool {
        !self.service.is_closed() && !self.service.peer().is_transport_closed()
    }

    /// The server's contract as it is now (see [`contract`]).
    pub(crate) async fn contract(&self, timeout_ms: u64) -> Result<LockedServer, Failure> {
        contract(self.service.peer(), timeout_ms)
            .await
            .map_err(|f| f.with_stderr(&self.stderr.since(0)))
    }

    async fn wait_closed(&self, limit: Duration) {
        if let Some(sender) = &self.stderr.closed {
            let mut rx = sender.subscribe();
            let _ = tokio::time::timeout(limit, rx.wait_for(|closed| *closed)).await;
        }
    }

    pub(crate) async fn close(self: Arc<Self>) {
        match Arc::try_unwrap(self) {
            Ok(c) => {
                let _ = c.service.cancel().await;
            }
            Err(shared) => shared.service.cancellation_token().cancel(),
        }
    }
}

fn client_info(server: &Server) -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new(
            format!("mcpgraph-{}", server.name),
            env!("CARGO_PKG_VERSION"),
        ),
    )
}

/// Starts (or reaches) a server and completes the handshake within its `timeoutMs`.
pub(crate) async fn start(server: &Server) -> Result<Connection, Failure> {
    let failed = |message: String| Failure::new(FailureKind::Connection, message);
    let timeout = Duration::from_millis(server.timeout_ms);
    match &server.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let program = expand_env(command);
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args.iter().map(|a| expand_env(a)));
            cmd.envs(env.iter().map(|(k, v)| (k, expand_env(v))));
            if let Some(dir) = cwd {
                cmd.current_dir(expand_env(dir));
            }
            // The command as written: its expansion may hold a secret.
            let (transport, stderr) = ChildProcess::spawn(cmd).map_err(|e| {
                failed(format!(
                    "MCP client initialization failed: cannot start {command:?}: {}",
                    io_reason(&e)
                ))
            })?;
            let (closed_tx, _) = watch::channel(false);
            let log = Arc::new(StderrLog {
                closed: Some(closed_tx),
                ..StderrLog::default()
            });
            {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut lines = BufReader::new(stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        let line = line.trim_end().to_string();
                        if !line.is_empty() {
                            tracing::debug!(target: "mcpgraph::downstream", "{line}");
                            log.push(line);
                        }
                    }
                    if let Some(closed) = &log.closed {
                        closed.send_replace(true);
                    }
                });
            }
            let service =
                match tokio::time::timeout(timeout, client_info(server).serve(transport)).await {
                    Ok(Ok(service)) => service,
                    Ok(Err(e)) => {
                        return Err(failed(format!(
                            "MCP client initialization failed: {}",
                            init_reason(&e)
                        ))
                        .with_stderr(&log.since(0)));
                    }
                    Err(_) => {
                        return Err(no_initialize_answer(server).with_stderr(&log.since(0)));
                    }
                };
            Ok(Connection {
                service,
                stderr: log,
            })
        }
        Transport::Http {
            url,
            headers,
            ca_file,
        } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let ca_file = ca_file.as_deref().map(expand_env);
            let client = tls::http_client(ca_file.as_deref().map(std::path::Path::new)).map_err(
                |reason| {
                    failed(format!(
                        "MCP client initialization failed: server `{}`: {reason}",
                        server.name
                    ))
                },
            )?;
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                let name = http::HeaderName::try_from(name.as_str()).map_err(|_| {
                    failed(format!(
                        "MCP client initialization failed: {name:?} is not a valid HTTP header name"
                    ))
                })?;
                let value = http::HeaderValue::try_from(expand_env(value)).map_err(|_| {
                    failed(format!(
                        "MCP client initialization failed: the value of header {name} ({value:?} as written) is not a valid HTTP header value"
                    ))
                })?;
                custom.insert(name, value);
            }
            let config = StreamableHttpClientTransportConfig::with_uri(expand_env(url))
                .custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(
                trace_headers::TraceHeaders(client),
                config,
            );
            let reason = http_reason_of(&transport);
            let service =
                match tokio::time::timeout(timeout, client_info(server).serve(transport)).await {
                    Ok(Ok(service)) => service,
                    Ok(Err(e)) => {
                        // The URL as written: its expansion may hold a secret.
                        return Err(failed(format!(
                            "MCP client initialization failed: cannot reach {url}: {}",
                            reason(&e)
                        )));
                    }
                    Err(_) => return Err(no_initialize_answer(server)),
                };
            Ok(Connection {
                service,
                stderr: Arc::new(StderrLog::default()),
            })
        }
    }
}

/// A server's contract as it is now: what it sent in `initialize` and every page of
/// `tools/list` (rmcp follows `nextCursor`), the listing within `timeout_ms`.
async fn contract(peer: &Peer<RoleClient>, timeout_ms: u64) -> Result<LockedServer, Failure> {
    let listing =
        tokio::time::timeout(Duration::from_millis(timeout_ms), peer.list_all_tools()).await;
    let listed = match listing {
        Ok(Ok(tools)) => tools,
        Ok(Err(e)) => {
            let (kind, reason) = match e {
                ServiceError::McpError(e) => (
                    FailureKind::Protocol,
                    format!("MCP error {}: {}", e.code.0, e.message),
                ),
                ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                    (FailureKind::Connection, "the connection closed".to_string())
                }
                _ => (
                    FailureKind::Protocol,
                    "the server answered with something other than a tool list".to_string(),
                ),
            };
            return Err(Failure::new(kind, format!("tools/list failed: {reason}")));
        }
        Err(_) => {
            return Err(Failure::new(
                FailureKind::Timeout,
                format!("no answer to tools/list within {timeout_ms} ms"),
            ));
        }
    };
    let info = peer.peer_info();
    let server_info = info
        .as_ref()
        .and_then(|i| i.server_info.as_ref())
        .and_then(|i| serde_json::to_value(i).ok())
        .map_or_else(|| Value::Object(Map::new()), |v| lock::canonical(&v));
    let mut tools = std::collections::BTreeMap::new();
    for tool in &listed {
        if let Some((name, tool)) = serde_json::to_value(tool)
            .ok()
            .and_then(|v| LockedTool::from_listed(&v))
        {
            tools.insert(name, tool);
        }
    }
    Ok(LockedServer {
        server_info,
        protocol_version: info.map(|i| i.protocol_version.to_string()),
        tools,
    })
}

/// Compares a server's live tools with its lock and logs one warning per tool that differs. A
/// server that cannot list its tools is only noted in the debug log: calls decide its fate.
async fn warn_of_drift(
    name: &str,
    locked: &LockedServer,
    peer: &Peer<RoleClient>,
    timeout_ms: u64,
) {
    let live = match contract(peer, timeout_ms).await {
        Ok(live) => live,
        Err(failure) => {
            let failure = redacted(failure);
            tracing::debug!(target: "mcpgraph::downstream", "server `{name}`: no drift check: {failure}");
            return;
        }
    };
    for (tool, change) in lock::diff_tools(locked, &live) {
        tracing::warn!(
            target: "mcpgraph::downstream",
            "server `{name}` differs from the lock: tool `{tool}` {change} (run `mcpgraph lock`, then check the graph)"
        );
    }
}

/// The text of a request that timed out (the original's words, with the bound).
pub fn timed_out(timeout_ms: u64) -> String {
    format!("MCP error -32001: Request timed out (timeoutMs {timeout_ms})")
}

/// A server that does not answer `initialize` within its timeout: kind `timeout` (extensions
/// §9), unlike one that cannot be started or answers with an error (`connection`).
fn no_initialize_answer(server: &Server) -> Failure {
    Failure::new(
        FailureKind::Timeout,
        format!(
            "MCP client initialization failed: no answer to initialize within {} ms",
            server.timeout_ms
        ),
    )
}

/// A failure's texts with every expanded `${VAR}` value written back as the variable.
pub(crate) fn redacted(failure: Failure) -> Failure {
    Failure {
        message: redact(&failure.message).into_owned(),
        stderr_tail: failure.stderr_tail.map(|t| redact(&t).into_owned()),
        ..failure
    }
}

/// Why the handshake with a downstream server failed, in our words: rmcp's texts name Rust
/// types (`Transport [rmcp::transport::worker::WorkerTransport<…>] error`), and the HTTP
/// client's carry the expanded URL.
fn init_reason(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => chain_reason(error.error.as_ref()),
        ClientInitializeError::ConnectionClosed(_) => {
            "the connection closed before the server answered initialize".to_string()
        }
        ClientInitializeError::JsonRpcError(e) => {
            format!("MCP error {}: {}", e.code.0, e.message)
        }
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "the server supports no protocol version this client does".to_string()
        }
        _ => "the server did not answer initialize with an initialize result".to_string(),
    }
}

/// [`http_reason`] for the HTTP client the transport was built with, whatever its type.
fn http_reason_of<C: StreamableHttpClient>(
    _transport: &StreamableHttpClientTransport<C>,
) -> fn(&ClientInitializeError) -> String {
    http_reason::<C>
}

/// Why the handshake with an HTTP server failed: the HTTP client's error, whose texts carry the
/// expanded URL, read from its parts.
fn http_reason<C: StreamableHttpClient>(error: &ClientInitializeError) -> String {
    if let ClientInitializeError::TransportError { error, .. } = error {
        let error = error.error.as_ref();
        // The handshake's own send fails with the HTTP error; a worker that quit, with why.
        if let Some(e) = error.downcast_ref::<StreamableHttpError<C::Error>>() {
            return http_error_reason(e);
        }
        if let Some(quit) = error.downcast_ref::<WorkerQuitReason<StreamableHttpError<C::Error>>>()
        {
            return match quit {
                WorkerQuitReason::Fatal { error, .. } => http_error_reason(error),
                _ => "the connection closed before the server answered initialize".to_string(),
            };
        }
    }
    init_reason(error)
}

fn http_error_reason<E: std::error::Error + Send + Sync + 'static>(
    error: &StreamableHttpError<E>,
) -> String {
    match error {
        StreamableHttpError::Client(e) => chain_reason(e),
        StreamableHttpError::Io(e) => io_reason(e),
        StreamableHttpError::HttpStatus(status) => {
            format!("the server answered HTTP {}", status.status)
        }
        StreamableHttpError::AuthRequired(_) => {
            "the server requires authorization (HTTP 401)".to_string()
        }
        StreamableHttpError::InsufficientScope(_) => {
            "the server refused the credentials' scope (HTTP 403)".to_string()
        }
        StreamableHttpError::SessionExpired => {
            "the server ended the session (HTTP 404)".to_string()
        }
        StreamableHttpError::UnexpectedContentType(content_type) => format!(
            "the server answered with content type {}",
            content_type.as_deref().unwrap_or("(none)")
        ),
        other => chain_reason(other),
    }
}

/// The innermost cause of a transport error (the operating system's "Connection refused",
/// an HTTP status, a certificate the TLS handshake refused): outer layers add type names and
/// the URL.
fn chain_reason(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    loop {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return tls::tls_reason(tls);
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>() {
            return match tls::wrapped(io) {
                Some(tls) => tls::tls_reason(tls),
                None => io_reason(io),
            };
        }
        match current.source() {
            Some(next) => current = next,
            None => break,
        }
    }
    let text = current.to_string();
    if text.contains("::") || text.contains("://") {
        "the transport failed".to_string()
    } else {
        text
    }
}

fn io_reason(error: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::NotFound => "no such file or command".to_string(),
        ErrorKind::PermissionDenied => "permission denied".to_string(),
        ErrorKind::ConnectionRefused => "connection refused".to_string(),
        ErrorKind::ConnectionReset => "connection reset".to_string(),
        ErrorKind::TimedOut => "timed out".to_string(),
        _ => error.to_string(),
    }
}

/// A downstream result → node output (contract §3.3): `structuredContent` if present; else the
/// first content item (a non-empty text parsed as JSON when it parses, else the string; an empty
/// text or a non-text item as the item object); no content → undefined. `isError` fails the node.
pub fn extract(result: CallToolResult) -> Result<JValue, Failure> {
    if result.is_error == Some(true) {
        let first_text = result
            .content
            .iter()
            .find_map(|c| {
                serde_json::to_value(c)
                    .ok()
                    .and_then(|v| v.get("text").and_then(Value::as_str).map(str::to_string))
            })
            .unwrap_or_else(|| "Tool call failed".to_string());
        let full = serde_json::to_string_pretty(&result).unwrap_or_default();
        return Err(Failure::new(
            FailureKind::Tool,
            format!("{first_text}\n\nTool call result:\n{full}"),
        ));
    }
    if let Some(structured) = &result.structured_content {
        return Ok(to_jvalue(structured));
    }
    let Some(first) = result.content.first() else {
        return Ok(JValue::Undefined);
    };
    let item = serde_json::to_value(first).unwrap_or(Value::Null);
    match item.get("text").and_then(Value::as_str) {
        Some(text) if !text.is_empty() => Ok(serde_json::from_str::<Value>(text)
            .map_or_else(|_| JValue::string(text), |v| to_jvalue(&v))),
        _ => Ok(to_jvalue(&item)),
    }
}
