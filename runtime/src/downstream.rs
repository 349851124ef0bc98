//! Clients of the downstream MCP servers a graph calls (contract §5).
//!
//! Started lazily on first use and shared by every call (requests are multiplexed). A server that
//! died is started again on its next use; a failed start is not remembered. A child's stderr is
//! drained continuously into a bounded log, whose recent lines are appended to errors.

use crate::envsubst::expand_env;
use crate::failure::{Failure, FailureKind};
use crate::value::to_jvalue;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Server, ServerId, Transport};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    Implementation,
};
use rmcp::service::{RoleClient, RunningService, ServiceError, ServiceExt};
use rmcp::transport::TokioChildProcess;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
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
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
}

struct Connection {
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
                    connection: tokio::sync::Mutex::new(None),
                })
                .collect(),
        }
    }

    /// Calls `tool` on server `id`; the node output as §3.3 of the contract extracts it.
    /// Connections are started on `runtime` (the runtime of the task that made the call, not the
    /// worker's: a worker busy evaluating could not drive them), and live there.
    pub async fn call(
        &self,
        runtime: &Handle,
        id: ServerId,
        tool: &str,
        args: Map<String, Value>,
    ) -> Result<JValue, Failure> {
        let slot = &self.slots[id.0 as usize];
        let connection = self.connect(runtime, slot).await?;
        let mark = connection.stderr.mark();
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        let timeout = Duration::from_millis(slot.server.timeout_ms);
        let peer = connection.service.peer().clone();
        // Dropping this future (time limit, cancellation) sends notifications/cancelled downstream.
        let outcome = tokio::time::timeout(timeout, peer.call_tool_once(params)).await;
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
            Ok(Err(e)) => {
                let kind = match e {
                    ServiceError::Timeout { .. } => FailureKind::Timeout,
                    ServiceError::Cancelled { .. } => FailureKind::Connection,
                    _ => FailureKind::Protocol,
                };
                Failure::new(kind, format!("MCP tool call failed: {e}"))
            }
            Err(_) => Failure::new(
                FailureKind::Timeout,
                format!(
                    "MCP error -32001: Request timed out (timeoutMs {})",
                    slot.server.timeout_ms
                ),
            ),
        };
        Err(failure.with_stderr(&connection.stderr.since(mark)))
    }

    /// The live connection of a slot, started (again) when there is none.
    async fn connect(&self, runtime: &Handle, slot: &Slot) -> Result<Arc<Connection>, Failure> {
        let mut guard = slot.connection.lock().await;
        if let Some(c) = guard.as_ref()
            && !c.service.is_closed()
            && !c.service.peer().is_transport_closed()
        {
            return Ok(c.clone());
        }
        if let Some(old) = guard.take() {
            runtime.spawn(old.close());
        }
        let server = slot.server.clone();
        let started = runtime
            .spawn(async move { start(&server).await })
            .await
            .map_err(|e| {
                Failure::new(
                    FailureKind::Connection,
                    format!("MCP client initialization failed: {e}"),
                )
            })??;
        let connection = Arc::new(started);
        *guard = Some(connection.clone());
        Ok(connection)
    }

    /// Closes every connection: each child's stdin is closed, then it gets a grace period,
    /// SIGTERM, and SIGKILL.
    pub async fn shutdown(&self) {
        let mut closing = Vec::new();
        for slot in &self.slots {
            if let Some(c) = slot.connection.lock().await.take() {
                closing.push(c.close());
            }
        }
        futures::future::join_all(closing).await;
    }
}

impl Connection {
    async fn wait_closed(&self, limit: Duration) {
        if let Some(sender) = &self.stderr.closed {
            let mut rx = sender.subscribe();
            let _ = tokio::time::timeout(limit, rx.wait_for(|closed| *closed)).await;
        }
    }

    async fn close(self: Arc<Self>) {
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

async fn start(server: &Server) -> Result<Connection, Failure> {
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
            let mut cmd = tokio::process::Command::new(&program);
            cmd.args(args.iter().map(|a| expand_env(a)));
            cmd.envs(env.iter().map(|(k, v)| (k, expand_env(v))));
            if let Some(dir) = cwd {
                cmd.current_dir(expand_env(dir));
            }
            let (transport, stderr) = TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| {
                    failed(format!(
                        "MCP client initialization failed: cannot start {program:?}: {e}"
                    ))
                })?;
            let (closed_tx, _) = watch::channel(false);
            let log = Arc::new(StderrLog {
                closed: Some(closed_tx),
                ..StderrLog::default()
            });
            if let Some(stderr) = stderr {
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
                        return Err(failed(format!("MCP client initialization failed: {e}"))
                            .with_stderr(&log.since(0)));
                    }
                    Err(_) => {
                        return Err(failed(format!(
                        "MCP client initialization failed: no answer to initialize within {} ms",
                        server.timeout_ms
                    ))
                    .with_stderr(&log.since(0)));
                    }
                };
            Ok(Connection {
                service,
                stderr: log,
            })
        }
        Transport::Http { url, headers } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut custom = std::collections::HashMap::new();
            for (name, value) in headers {
                let name = http::HeaderName::try_from(name.as_str())
                    .map_err(|e| failed(format!("header {name:?}: {e}")))?;
                let value = http::HeaderValue::try_from(expand_env(value))
                    .map_err(|e| failed(format!("header value: {e}")))?;
                custom.insert(name, value);
            }
            let config = StreamableHttpClientTransportConfig::with_uri(expand_env(url))
                .custom_headers(custom);
            let transport = StreamableHttpClientTransport::from_config(config);
            let service = match tokio::time::timeout(timeout, client_info(server).serve(transport))
                .await
            {
                Ok(Ok(service)) => service,
                Ok(Err(e)) => {
                    return Err(failed(format!("MCP client initialization failed: {e}")));
                }
                Err(_) => {
                    return Err(failed(format!(
                        "MCP client initialization failed: no answer to initialize within {} ms",
                        server.timeout_ms
                    )));
                }
            };
            Ok(Connection {
                service,
                stderr: Arc::new(StderrLog::default()),
            })
        }
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
