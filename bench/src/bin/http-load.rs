//! The HTTP load generator of bench/http.py:
//!
//! ```text
//! http-load URL TOOL ARGS_JSON EXPECTED_JSON CONCURRENCY CALLS [rmcp|plain]
//! ```
//!
//! CONCURRENCY independent clients (each its own HTTP connection pool, as separate users
//! are) connect to the streamable HTTP endpoint URL, warm up with a few calls each, then make
//! CALLS calls of TOOL with ARGS_JSON between them, each waiting for its answer before sending
//! the next. The clients are rmcp's (the default), or with `plain` a client that sends what the
//! TypeScript and Python SDKs send by default: `initialize`, then each `tools/call` as one POST
//! without a progress token, reading the whole answer (JSON or an SSE stream) so that its
//! connection is kept alive for the next. rmcp's client puts a progress token on every request,
//! which a graph server answers with a progress notification per node, and leaves each SSE
//! answer unread after its result, so its HTTP pool opens a new connection for every call. Every answer is checked: not `isError`, and its structuredContent equal to
//! EXPECTED_JSON. Prints one JSON line: calls, concurrency, calls_per_s, p50_ms, p99_ms, wrong
//! (wrong or failed answers). Exits 1 when a client cannot connect.

use mcpgraph_runtime::rmcp::ServiceExt;
use mcpgraph_runtime::rmcp::model::CallToolRequestParams;
use mcpgraph_runtime::rmcp::service::{RoleClient, RunningService};
use mcpgraph_runtime::rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Map, Value, json};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Barrier;

/// Calls each client makes before the measured part: connection set-up, first allocations and
/// the server's first run of the tool are not what a server under load spends its time on.
const WARMUP_CALLS: usize = 5;
const USAGE: &str =
    "usage: http-load URL TOOL ARGS_JSON EXPECTED_JSON CONCURRENCY CALLS [rmcp|plain]";

struct Load {
    url: String,
    tool: String,
    arguments: Map<String, Value>,
    expected: Value,
    concurrency: usize,
    calls: usize,
    /// `plain`: [`plain_client`] instead of rmcp's.
    plain: bool,
}

/// What one client measured.
struct Measured {
    latencies: Vec<Duration>,
    wrong: usize,
}

fn main() -> ExitCode {
    let load = match parse(std::env::args().skip(1).collect()) {
        Ok(load) => load,
        Err(message) => {
            eprintln!("http-load: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // reqwest, under rmcp's default client, needs a process-wide rustls provider.
    mcpgraph_runtime::init_tls();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("http-load: cannot start a tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(Arc::new(load))) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("http-load: {message}");
            ExitCode::from(1)
        }
    }
}

fn parse(mut args: Vec<String>) -> Result<Load, String> {
    let plain = match args.len() {
        7 => match args.pop().as_deref() {
            Some("plain") => true,
            Some("rmcp") => false,
            other => return Err(format!("the client is rmcp or plain, not {other:?}")),
        },
        _ => false,
    };
    let [url, tool, arguments, expected, concurrency, calls] = <[String; 6]>::try_from(args)
        .map_err(|args| format!("expected 6 or 7 arguments, got {}", args.len()))?;
    let arguments = match serde_json::from_str(&arguments) {
        Ok(Value::Object(map)) => map,
        Ok(_) => return Err("ARGS_JSON must be a JSON object".into()),
        Err(e) => return Err(format!("ARGS_JSON: {e}")),
    };
    let expected = serde_json::from_str(&expected).map_err(|e| format!("EXPECTED_JSON: {e}"))?;
    let concurrency: usize = concurrency
        .parse()
        .map_err(|e| format!("CONCURRENCY {concurrency:?}: {e}"))?;
    let calls: usize = calls.parse().map_err(|e| format!("CALLS {calls:?}: {e}"))?;
    if concurrency == 0 || calls < concurrency {
        return Err("CONCURRENCY must be at least 1 and at most CALLS".into());
    }
    Ok(Load {
        url,
        tool,
        arguments,
        expected,
        concurrency,
        calls,
        plain,
    })
}

async fn run(load: Arc<Load>) -> Result<Value, String> {
    // Every client connects and warms up, then all start the measured part together (the extra
    // party is this task, which starts the clock).
    let start = Arc::new(Barrier::new(load.concurrency + 1));
    let mut clients = Vec::with_capacity(load.concurrency);
    for index in 0..load.concurrency {
        let share =
            load.calls / load.concurrency + usize::from(index < load.calls % load.concurrency);
        let (load, start) = (load.clone(), start.clone());
        clients.push(tokio::spawn(async move {
            if load.plain {
                plain_client(&load, index, share, &start).await
            } else {
                client(&load, index, share, &start).await
            }
        }));
    }
    start.wait().await;
    let started = Instant::now();
    let mut latencies = Vec::with_capacity(load.calls);
    let mut wrong = 0;
    let mut failed = None;
    for client in clients {
        match client.await {
            Ok(Ok(measured)) => {
                latencies.extend(measured.latencies);
                wrong += measured.wrong;
            }
            Ok(Err(message)) => failed = Some(message),
            Err(e) => failed = Some(format!("a client task failed: {e}")),
        }
    }
    let elapsed = started.elapsed();
    if let Some(message) = failed {
        return Err(message);
    }
    latencies.sort_unstable();
    let percentile = |p: f64| {
        // Nearest rank: the smallest latency with at least p of the calls at or below it.
        let rank = ((p * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len());
        latencies[rank - 1].as_secs_f64() * 1000.0
    };
    Ok(json!({
        "calls": latencies.len(),
        "concurrency": load.concurrency,
        "calls_per_s": latencies.len() as f64 / elapsed.as_secs_f64(),
        "p50_ms": percentile(0.50),
        "p99_ms": percentile(0.99),
        "wrong": wrong,
    }))
}

/// One client: connects, warms up, waits for the others, makes its `share` of the calls.
async fn client(
    load: &Load,
    index: usize,
    share: usize,
    start: &Barrier,
) -> Result<Measured, String> {
    let connected = ().serve(StreamableHttpClientTransport::from_uri(load.url.as_str())).await;
    let client = match connected {
        Ok(client) => client,
        Err(e) => {
            // The others wait at the barrier for this one: take its place, then report.
            start.wait().await;
            return Err(format!(
                "client {index} cannot connect to {}: {e}",
                load.url
            ));
        }
    };
    let mut warm_wrong = 0;
    for _ in 0..WARMUP_CALLS {
        warm_wrong += usize::from(!call(&client, load).await);
    }
    start.wait().await;
    let mut measured = Measured {
        latencies: Vec::with_capacity(share),
        wrong: warm_wrong,
    };
    for _ in 0..share {
        let sent = Instant::now();
        let right = call(&client, load).await;
        measured.latencies.push(sent.elapsed());
        measured.wrong += usize::from(!right);
    }
    let _ = client.cancel().await;
    Ok(measured)
}

/// One call; whether its answer is the expected one.
async fn call(client: &RunningService<RoleClient, ()>, load: &Load) -> bool {
    let params =
        CallToolRequestParams::new(load.tool.clone()).with_arguments(load.arguments.clone());
    match client.call_tool(params).await {
        Ok(result) => {
            result.is_error != Some(true)
                && result.structured_content.as_ref() == Some(&load.expected)
        }
        Err(_) => false,
    }
}

/// One client as the TypeScript and Python SDKs are by default: `initialize` and
/// `notifications/initialized`, then one POST per call, no progress token, each answer read to
/// its end so that reqwest keeps the connection for the next call.
async fn plain_client(
    load: &Load,
    index: usize,
    share: usize,
    start: &Barrier,
) -> Result<Measured, String> {
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "http-load", "version": "1"}}});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let connected = async {
        post(&http, &load.url, &initialize)
            .await?
            .ok_or("no answer to initialize")?;
        post(&http, &load.url, &initialized).await?;
        Ok::<_, String>(())
    }
    .await;
    if let Err(e) = connected {
        start.wait().await;
        return Err(format!(
            "client {index} cannot connect to {}: {e}",
            load.url
        ));
    }
    let mut id = 0;
    let mut call = async || {
        id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": load.tool, "arguments": load.arguments}});
        match post(&http, &load.url, &request).await {
            Ok(Some(answer)) => {
                answer["id"] == json!(id)
                    && answer["result"]["isError"] != json!(true)
                    && answer["result"]["structuredContent"] == load.expected
            }
            _ => false,
        }
    };
    let mut warm_wrong = 0;
    for _ in 0..WARMUP_CALLS {
        warm_wrong += usize::from(!call().await);
    }
    start.wait().await;
    let mut measured = Measured {
        latencies: Vec::with_capacity(share),
        wrong: warm_wrong,
    };
    for _ in 0..share {
        let sent = Instant::now();
        let right = call().await;
        measured.latencies.push(sent.elapsed());
        measured.wrong += usize::from(!right);
    }
    Ok(measured)
}

/// The protocol version [`plain_client`] speaks: the 2025 one the SDKs' stable releases use.
const PROTOCOL: &str = "2025-06-18";

/// POSTs one message; the JSON-RPC answer in the body (a JSON body, or the last `data:` of an
/// SSE stream, read to its end), `None` for a notification's 202.
async fn post(http: &reqwest::Client, url: &str, message: &Value) -> Result<Option<Value>, String> {
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL)
        .body(message.to_string())
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|t| t.as_bytes().starts_with(b"text/event-stream"));
    let body = response.text().await.map_err(|e| e.to_string())?;
    if status.as_u16() == 202 {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(format!("HTTP {status}: {body}"));
    }
    let text = if sse {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .rfind(|data| data.contains("\"result\"") || data.contains("\"error\""))
            .unwrap_or_default()
            .to_string()
    } else {
        body
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| format!("{e}: {text}"))
}
