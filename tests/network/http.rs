//! `mcpgraph serve --http` as real clients see it: the Python `mcp` client in every protocol
//! mode (progress before the result, cancellation that stops the run), the security defaults
//! through raw HTTP/1.1 requests, what operators read (`/metrics`, JSON call logs), and the
//! SIGTERM drain.

use crate::common;

use crate::common::raw_http::Response;
use serde_json::{Value, json};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::served::{DEADLINE, Server, wait_until};

fn http_graph() -> PathBuf {
    common::root().join("tests/http/http.yaml")
}

pub(crate) fn mock() -> PathBuf {
    common::shared_dir().join("tools/mock-mcp-server.py")
}

fn python() -> PathBuf {
    let python = common::root().join("target/test-venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/test-setup first: {} is missing",
        python.display()
    );
    python
}

/// A file under the temp dir for this test alone (removed first).
fn temp_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mcpgraph-http-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// `mcpgraph ARGS` as the tests here start it: from the repository root, with the mock.
pub(crate) fn mcpgraph_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(common::mcpgraph());
    command
        .args(args)
        .current_dir(common::root())
        .env("MCPGRAPH_MOCK", mock())
        .envs(env.iter().copied());
    command
}

impl Server {
    /// Starts `mcpgraph serve ARGS` (which should include `--http 127.0.0.1:0`) and waits for
    /// the line naming the address.
    fn start(args: &[&str], env: &[(&str, &str)]) -> Server {
        let args: Vec<&str> = ["serve"].iter().chain(args).copied().collect();
        Server::start_command(&args, env)
    }

    /// [`Server::start`] of `mcpgraph ARGS`, the subcommand (or `-g`) included.
    fn start_command(args: &[&str], env: &[(&str, &str)]) -> Server {
        Server::start_with(mcpgraph_command(args, env))
    }

    /// Starts `mcpgraph serve ARGS` without waiting for anything.
    fn spawn(args: &[&str], env: &[(&str, &str)]) -> Server {
        let args: Vec<&str> = ["serve"].iter().chain(args).copied().collect();
        Server::spawn_with(mcpgraph_command(&args, env))
    }

    /// `/metrics`' body (without a token).
    fn metrics(&self) -> String {
        self.metrics_with(&[])
    }
}

/// [`common::raw_http::request`] to the server, within [`DEADLINE`].
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    common::raw_http::request(port, method, path, headers, body, DEADLINE)
}

fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> Response {
    request(port, "GET", path, headers, "")
}

/// A 2025-era `tools/call` POSTed to `/mcp` (stateless serving needs no initialize first).
fn post_call(port: u16, tool: &str, arguments: Value, headers: &[(&str, &str)]) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let mut all = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    all.extend_from_slice(headers);
    request(port, "POST", "/mcp", &all, &body.to_string())
}

/// The JSON-RPC answer in a response to [`post_call`]: the body when it is JSON (a quick
/// tool's call, docs/http.md), else an SSE `data:` line with an id (the call's notifications,
/// progress and log messages, come before it).
fn rpc_message(response: &Response) -> Value {
    if let Ok(message) = serde_json::from_str::<Value>(&response.body) {
        return message;
    }
    response
        .body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {response:?}"))
}

/// The value of the metric line `series` (name and labels exactly as rendered), if present.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// Runs tests/support/http_client.py with `args` and returns its JSON report.
fn python_client(args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = python_command(args, env).output().expect("python runs");
    report(output)
}

fn python_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(python());
    command
        .arg(common::root().join("tests/support/http_client.py"))
        .args(args)
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

fn report(output: std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "python client failed:\n{stdout}\n{stderr}"
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("python client printed no report ({e}):\n{stdout}\n{stderr}"))
}

fn mock_log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// One mode of the Python client: the tools listed, `sum_to_n` answered with every progress
/// notification before the result, and a cancelled `nap` whose run the server stops (the
/// downstream server is told, the call is counted cancelled, nothing is left in flight).
fn python_client_tour(mode: &str, expected_protocol: &str) {
    let log = temp_file(&format!("mock-{mode}.log"));
    let log_text = log.to_string_lossy().into_owned();
    let looping = Server::start(
        &[
            &common::root().join("examples/loop.yaml").to_string_lossy(),
            "--http",
            "127.0.0.1:0",
        ],
        &[],
    );
    let slow = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[("MCPGRAPH_MOCK_LOG", &log_text)],
    );
    let report = python_client(&["tour", mode, &looping.url(), &slow.url(), &log_text], &[]);

    assert_eq!(report["protocol"], expected_protocol, "{report}");
    assert_eq!(report["tools"], json!(["sum_to_n"]), "{report}");
    let events = report["events"].as_array().expect("events");
    let (result, progress) = events.split_last().expect("at least the result");
    assert_eq!(
        result,
        &json!({"result": {"sum": 5050}, "is_error": false}),
        "the result comes last: {report}"
    );
    // loop.yaml runs 2n+3 nodes for n, one notification each, all before the result.
    assert_eq!(progress.len(), 2 * 100 + 3, "{report}");
    for (i, event) in progress.iter().enumerate() {
        assert_eq!(event["progress"], json!(i as f64 + 1.0), "{report}");
    }
    assert_eq!(progress[0]["message"], "entry_sum (entry)");

    let cancel = &report["cancel"];
    assert_eq!(cancel["finished"], false, "{report}");
    assert!(cancel["seconds"].as_f64().unwrap() < 5.0, "{report}");
    wait_until("the mock server to be told of the cancellation", || {
        mock_log_lines(&log)
            .iter()
            .any(|m| m["method"] == "notifications/cancelled")
    });
    wait_until("the call to be counted cancelled", || {
        let text = slow.metrics();
        metric(
            &text,
            "mcpgraph_call_failures_total{tool=\"nap\",kind=\"cancelled\"}",
        ) == Some(1.0)
            && metric(&text, "mcpgraph_calls_in_flight") == Some(0.0)
    });
    let _ = std::fs::remove_file(&log);
}

#[test]
fn python_client_auto_mode() {
    python_client_tour("auto", "2026-07-28");
}

#[test]
fn python_client_2026_07_28_mode() {
    python_client_tour("2026-07-28", "2026-07-28");
}

#[test]
fn python_client_legacy_mode() {
    python_client_tour("legacy", "2025-11-25");
}

#[test]
fn bearer_token_guards_mcp_and_metrics_but_not_health() {
    let token = "s3cret-http-token";
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--auth-token-env",
            "MCPGRAPH_HTTP_TEST_TOKEN",
        ],
        &[("MCPGRAPH_HTTP_TEST_TOKEN", token)],
    );
    let port = server.port;
    let missing = post_call(port, "double", json!({"x": 4}), &[]);
    assert_eq!(missing.status, 401, "{missing:?}");
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Bearer realm=\"mcpgraph\"")
    );
    let wrong = post_call(
        port,
        "double",
        json!({"x": 4}),
        &[("Authorization", "Bearer not-the-token")],
    );
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert!(
        wrong
            .header("www-authenticate")
            .is_some_and(|v| v.contains("error=\"invalid_token\"")),
        "{wrong:?}"
    );
    let bearer = format!("Bearer {token}");
    let right = post_call(
        port,
        "double",
        json!({"x": 4}),
        &[("Authorization", &bearer)],
    );
    assert_eq!(right.status, 200, "{right:?}");
    assert_eq!(
        rpc_message(&right)["result"]["structuredContent"],
        json!({"doubled": 8})
    );

    assert_eq!(get(port, "/metrics", &[]).status, 401);
    let metrics = get(port, "/metrics", &[("Authorization", &bearer)]);
    assert_eq!(metrics.status, 200, "{metrics:?}");
    assert!(metrics.body.contains("mcpgraph_calls_in_flight"));
    assert_eq!(get(port, "/healthz", &[]).status, 200);
    assert_eq!(get(port, "/readyz", &[]).status, 200);

    // The Python client with the header: the call works; with a wrong token it does not.
    let url = server.url();
    let args = ["call", "auto", &url, "double", "{\"x\": 21}"];
    let ok = python_client(&args, &[("MCPGRAPH_TEST_TOKEN", token)]);
    assert_eq!(ok["result"], json!({"doubled": 42}), "{ok}");
    let refused = python_client(&args, &[("MCPGRAPH_TEST_TOKEN", "wrong")]);
    assert!(
        refused["error"].is_string() && refused.get("result").is_none(),
        "{refused}"
    );
}

#[test]
fn foreign_origins_are_refused_unless_allowed() {
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--allowed-origin",
            "http://app.example.com:3000",
        ],
        &[],
    );
    let port = server.port;
    let evil = post_call(
        port,
        "double",
        json!({"x": 1}),
        &[("Origin", "http://evil.example.com")],
    );
    assert_eq!(evil.status, 403, "{evil:?}");
    let allowed = post_call(
        port,
        "double",
        json!({"x": 1}),
        &[("Origin", "http://app.example.com:3000")],
    );
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert_eq!(
        rpc_message(&allowed)["result"]["structuredContent"],
        json!({"doubled": 2})
    );
    let none = post_call(port, "double", json!({"x": 1}), &[]);
    assert_eq!(none.status, 200, "{none:?}");
}

#[test]
fn foreign_hosts_are_refused_unless_allowed() {
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--allowed-host",
            "mcp.example.com",
        ],
        &[],
    );
    let port = server.port;
    let evil = post_call(
        port,
        "double",
        json!({"x": 1}),
        &[("Host", "evil.example.com")],
    );
    assert_eq!(evil.status, 403, "{evil:?}");
    let allowed = post_call(
        port,
        "double",
        json!({"x": 1}),
        &[("Host", "mcp.example.com")],
    );
    assert_eq!(allowed.status, 200, "{allowed:?}");
    assert_eq!(
        rpc_message(&allowed)["result"]["structuredContent"],
        json!({"doubled": 2})
    );
}

/// RFC 9112 §3.2: a request with two `Host` headers is answered 400, on every path; `/metrics`
/// takes `/mcp`'s Host and Origin rules (a DNS-rebinding page must not read tool names).
#[test]
fn two_hosts_are_refused_and_metrics_checks_host_and_origin() {
    let server = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let port = server.port;
    let own = format!("127.0.0.1:{port}");
    for path in ["/mcp", "/metrics", "/healthz"] {
        let twice = get(port, path, &[("Host", &own), ("Host", "evil.example")]);
        assert_eq!(twice.status, 400, "{path}: {twice:?}");
    }
    let rebound = get(
        port,
        "/metrics",
        &[("Host", &format!("evil.example:{port}"))],
    );
    assert_eq!(rebound.status, 403, "{rebound:?}");
    let foreign = get(port, "/metrics", &[("Origin", "http://evil.example")]);
    assert_eq!(foreign.status, 403, "{foreign:?}");
    let own_origin = format!("http://127.0.0.1:{port}");
    let page = get(port, "/metrics", &[("Origin", &own_origin)]);
    assert_eq!(page.status, 200, "{page:?}");
    assert_eq!(get(port, "/metrics", &[]).status, 200);
}

#[test]
fn off_loopback_needs_a_token_or_an_explicit_waiver() {
    let graph = http_graph().to_string_lossy().into_owned();
    let mut refused = Server::spawn(&[&graph, "--http", "0.0.0.0:0"], &[]);
    let status = refused.wait_exit(DEADLINE).expect("serve exits");
    assert_eq!(status.code(), Some(1), "{}", refused.text());
    wait_until("the refusal on stderr", || {
        let text = refused.text();
        text.contains("refusing to serve on 0.0.0.0:") && text.contains("without a token")
    });

    let mut open = Server::spawn(
        &[&graph, "--http", "0.0.0.0:0", "--allow-unauthenticated"],
        &[],
    );
    let mut port = None;
    wait_until("the open server's address line", || {
        port = open.lines().iter().find_map(|line| {
            let (_, address) = line.split_once(" at http://0.0.0.0:")?;
            address.split_once("/mcp")?.0.parse::<u16>().ok()
        });
        assert!(matches!(open.child.try_wait(), Ok(None)), "{}", open.text());
        port.is_some()
    });
    open.port = port.unwrap();
    let answer = post_call(open.port, "double", json!({"x": 5}), &[]);
    assert_eq!(
        rpc_message(&answer)["result"]["structuredContent"],
        json!({"doubled": 10})
    );
}

#[test]
fn an_unset_token_variable_is_a_usage_error() {
    assert!(std::env::var_os("MCPGRAPH_HTTP_TEST_UNSET_VAR").is_none());
    let mut server = Server::spawn(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--auth-token-env",
            "MCPGRAPH_HTTP_TEST_UNSET_VAR",
        ],
        &[],
    );
    let status = server.wait_exit(DEADLINE).expect("serve exits");
    assert_eq!(status.code(), Some(2), "{}", server.text());
    wait_until("the message naming the variable", || {
        server.text().contains("MCPGRAPH_HTTP_TEST_UNSET_VAR")
    });
}

/// The original's command line takes `serve`'s HTTP flags too (issue 24, item 4): `-g FILE
/// --http ADDR` serves over HTTP, as `serve FILE --http ADDR` does.
#[test]
fn the_original_command_line_serves_http() {
    let graph = common::root().join("examples/loop.yaml");
    let server = Server::start_command(
        &["-g", &graph.to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let response = post_call(server.port, "sum_to_n", json!({"n": 10}), &[]);
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(
        rpc_message(&response)["result"]["structuredContent"]["sum"],
        55,
        "{}",
        response.body
    );
}

#[test]
fn bodies_over_the_limit_are_refused() {
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--max-body",
            "1000",
        ],
        &[],
    );
    let padding = "x".repeat(5000);
    let large = post_call(server.port, "double", json!({"x": 1, "pad": padding}), &[]);
    assert_eq!(large.status, 413, "{large:?}");
    let small = post_call(server.port, "double", json!({"x": 1}), &[]);
    assert_eq!(small.status, 200, "{small:?}");
}

/// A `Content-Length` over the limit is answered 413 at once, before any of the body is sent
/// (issue 24, item 6): the server used to wait for the body it would refuse, forever if none
/// came. The read times out (the test fails) where it would hang.
#[test]
fn a_content_length_over_the_limit_is_refused_before_the_body() {
    use std::io::{Read, Write};
    let server = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connects");
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 999999999\r\n\r\n",
        server.port
    );
    stream.write_all(head.as_bytes()).unwrap();
    // The head, then the body its Content-Length announces: not to the end of the stream,
    // which the server may keep open.
    let mut raw = Vec::new();
    let mut buffer = [0u8; 4096];
    let complete = |raw: &[u8]| {
        let text = String::from_utf8_lossy(raw);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return false;
        };
        let (_, headers) = common::raw_http::parse_head(head);
        let length = headers
            .iter()
            .find(|(name, _)| name == "content-length")
            .and_then(|(_, value)| value.parse::<usize>().ok());
        length.is_none_or(|length| body.len() >= length)
    };
    while !complete(raw.as_slice()) {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => raw.extend_from_slice(&buffer[..read]),
            Err(error) => panic!(
                "no answer within {DEADLINE:?} to a head announcing 999999999 bytes ({error}): \
                 the server waits for the body; read so far: {:?}",
                String::from_utf8_lossy(&raw)
            ),
        }
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no response head: {text:?}"));
    let (status, _) = common::raw_http::parse_head(head);
    assert_eq!(status, 413, "{text}");
    assert!(
        body.contains("4194304") && body.contains("--max-body"),
        "the answer names the limit and the flag: {text}"
    );
}

/// A body must arrive within `--header-timeout` of its head: one announced and never sent is
/// answered 408 and the connection closed. Before, it held its connection (and, busy, its
/// place at the cap) for as long as the client kept it open.
#[test]
fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    use std::io::Write;
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--header-timeout",
            "1",
        ],
        &[],
    );
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).expect("connects");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"",
        server.port
    );
    stream.write_all(head.as_bytes()).unwrap();
    let (status, body) = read_answer(&mut stream);
    assert_eq!(status, 408, "{body}");
    assert!(
        body.contains("did not arrive within 1 s") && body.contains("--header-timeout"),
        "the answer names the limit and the flag: {body}"
    );
    assert_closed(&mut stream, "a connection whose body did not arrive");
}

/// A body that is not one JSON-RPC message gets 400 and a JSON-RPC error, as over stdio
/// (issue 24, item 19): it used to get 415 and a line of text. rmcp's own checks still come
/// first, and a well-formed message is served.
#[test]
fn bodies_that_are_not_one_json_rpc_message_get_a_json_rpc_error() {
    let server = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let port = server.port;
    let json_headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let cases = [
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
            -32700,
            Value::Null,
        ),
        ("not json", -32700, Value::Null),
        ("[]", -32600, Value::Null),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
            -32600,
            json!(1),
        ),
        (
            r#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#,
            -32600,
            json!(3),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            -32600,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            -32600,
            Value::Null,
        ),
        (r#"{"jsonrpc":"2.0","id":"q"}"#, -32600, json!("q")),
        (
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":[1]}"#,
            -32602,
            json!(4),
        ),
    ];
    for (body, code, id) in cases {
        let response = request(port, "POST", "/mcp", &json_headers, body);
        assert_eq!(response.status, 400, "{body}: {response:?}");
        assert!(
            response
                .header("content-type")
                .is_some_and(|t| t.starts_with("application/json")),
            "{body}: {response:?}"
        );
        let message: Value = serde_json::from_str(&response.body)
            .unwrap_or_else(|e| panic!("{body}: the answer is not JSON ({e}): {response:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{body}: {message}");
        assert_eq!(message["error"]["code"], code, "{body}: {message}");
        assert_eq!(message["id"], id, "{body}: {message}");
        let text = message["error"]["message"].as_str().unwrap_or_default();
        let prefix = match code {
            -32700 => "Parse error: ",
            -32600 => "Invalid Request: ",
            _ => "Invalid params: ",
        };
        assert!(text.starts_with(prefix), "{body}: {message}");
    }

    // rmcp's checks come first: a body that is not JSON, sent as something else, or from a
    // foreign Host, is refused for that.
    let text_plain = [
        ("Content-Type", "text/plain"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let as_text = request(port, "POST", "/mcp", &text_plain, "not json");
    assert_eq!(as_text.status, 415, "{as_text:?}");
    let foreign = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Host", "evil.example.com"),
    ];
    let rebound = request(port, "POST", "/mcp", &foreign, "not json");
    assert_eq!(rebound.status, 403, "{rebound:?}");

    // A well-formed message passes as it came.
    let ping = request(
        port,
        "POST",
        "/mcp",
        &json_headers,
        r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    );
    assert_eq!(ping.status, 200, "{ping:?}");
    assert_eq!(rpc_message(&ping)["id"], 9, "{ping:?}");
    let call = post_call(port, "double", json!({"x": 3}), &[]);
    assert_eq!(
        rpc_message(&call)["result"]["structuredContent"],
        json!({"doubled": 6}),
        "{call:?}"
    );
}

/// How a call is answered (docs/http.md): a tool whose runs are short, once a run has shown
/// it, with one JSON body; the first call, a call that asks for progress (whose notifications
/// come first) and every call of a tool that waits on a downstream server, with an event
/// stream. Every answer is checked as a client reads it.
#[test]
fn quick_calls_are_answered_with_one_json_body() {
    let server = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let content_type = |response: &Response| response.header("content-type").map(str::to_owned);
    let double = |x: u64| {
        let response = post_call(server.port, "double", json!({"x": x}), &[]);
        assert_eq!(response.status, 200, "{response:?}");
        assert_eq!(
            rpc_message(&response)["result"]["structuredContent"],
            json!({"doubled": x * 2}),
            "{response:?}"
        );
        response
    };
    // Nothing is known of the tool before its first run: a stream.
    let first = double(1);
    assert_eq!(
        content_type(&first).as_deref(),
        Some("text/event-stream"),
        "{first:?}"
    );
    // Its runs take microseconds: the next answer, or one soon after on a busy machine (a run
    // of a millisecond or more keeps the stream), is one JSON body, the whole JSON-RPC answer.
    let json = (2..22)
        .map(double)
        .find(|response| content_type(response).as_deref() == Some("application/json"))
        .expect("a call of a quick tool answered with one JSON body within 20 calls");
    let message: Value = serde_json::from_str(&json.body).expect("the body is one JSON message");
    assert_eq!(message["jsonrpc"], "2.0", "{json:?}");
    assert_eq!(message["id"], 1, "{json:?}");
    assert_eq!(message["result"]["isError"], false, "{json:?}");

    // Asking for progress: the notifications come first, so the answer is a stream.
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "double", "arguments": {"x": 5}, "_meta": {"progressToken": "p7"}}});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let progress = request(server.port, "POST", "/mcp", &headers, &body.to_string());
    assert_eq!(
        content_type(&progress).as_deref(),
        Some("text/event-stream"),
        "{progress:?}"
    );
    let first_event = progress
        .body
        .lines()
        .find_map(|line| line.strip_prefix("data:"))
        .and_then(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .unwrap_or_else(|| panic!("no event in {progress:?}"));
    assert_eq!(
        first_event["method"], "notifications/progress",
        "{progress:?}"
    );
    assert_eq!(
        rpc_message(&progress)["result"]["structuredContent"],
        json!({"doubled": 10}),
        "{progress:?}"
    );

    // A tool that waits on a downstream server: a stream every time, however short its runs.
    for _ in 0..3 {
        let nap = post_call(server.port, "nap", json!({"ms": 1}), &[]);
        assert_eq!(
            content_type(&nap).as_deref(),
            Some("text/event-stream"),
            "{nap:?}"
        );
        assert_eq!(
            rpc_message(&nap)["result"]["structuredContent"]["napped"],
            1,
            "{nap:?}"
        );
    }
}

#[test]
fn readyz_reports_whether_the_graph_checks() {
    let good = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let ready = get(good.port, "/readyz", &[]);
    assert_eq!(ready.status, 200, "{ready:?}");
    let broken = Server::start(
        &[
            &common::root()
                .join("tests/http/broken.yaml")
                .to_string_lossy(),
            "--http",
            "127.0.0.1:0",
        ],
        &[],
    );
    let not_ready = get(broken.port, "/readyz", &[]);
    assert_eq!(not_ready.status, 503, "{not_ready:?}");
    assert_eq!(get(broken.port, "/healthz", &[]).status, 200);
}

#[test]
fn metrics_and_json_logs_show_each_call() {
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--log-format",
            "json",
        ],
        &[],
    );
    let ok = post_call(server.port, "double", json!({"x": 2}), &[]);
    assert_eq!(
        rpc_message(&ok)["result"]["structuredContent"],
        json!({"doubled": 4})
    );
    let failed = post_call(server.port, "boom", json!({}), &[]);
    let failed = rpc_message(&failed);
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert!(
        failed["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("boom")),
        "{failed}"
    );

    let text = server.metrics();
    assert_eq!(
        metric(
            &text,
            "mcpgraph_calls_total{tool=\"double\",outcome=\"ok\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "mcpgraph_call_failures_total{tool=\"boom\",kind=\"expression\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "mcpgraph_call_duration_seconds_bucket{tool=\"double\",le=\"+Inf\"}"
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(&text, "mcpgraph_calls_in_flight"),
        Some(0.0),
        "{text}"
    );

    let mut calls: Vec<Value> = Vec::new();
    wait_until("two JSON call log lines", || {
        calls = server
            .lines()
            .iter()
            .filter(|line| line.starts_with('{'))
            .map(|line| {
                serde_json::from_str::<Value>(line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
            })
            .filter(|v| v["target"] == "mcpgraph::call")
            .collect();
        calls.len() == 2
    });
    let duration = |call: &Value| -> f64 {
        // A number, or the number as a string (the log writes it with fixed decimals).
        match &call["duration_ms"] {
            Value::Number(n) => n.as_f64().unwrap(),
            Value::String(s) => s.parse().unwrap_or_else(|_| panic!("{call}")),
            _ => panic!("no duration_ms: {call}"),
        }
    };
    let double = calls
        .iter()
        .find(|c| c["tool"] == "double")
        .expect("double");
    assert_eq!(double["outcome"], "ok", "{double}");
    assert!(duration(double) >= 0.0);
    assert!(double.get("failure_kind").is_none(), "{double}");
    let boom = calls.iter().find(|c| c["tool"] == "boom").expect("boom");
    assert_eq!(boom["outcome"], "error", "{boom}");
    assert_eq!(boom["failure_kind"], "expression", "{boom}");
    assert!(duration(boom) >= 0.0);
}

/// Starts the Python client calling `nap` with `ms` in the background, and waits until the
/// server has the call in flight.
fn nap_in_flight(server: &Server, ms: u64, deadline_seconds: &str) -> Child {
    let url = server.url();
    let arguments = json!({"ms": ms}).to_string();
    let client = python_command(
        &["call", "2026-07-28", &url, "nap", &arguments],
        &[("MCPGRAPH_TEST_DEADLINE", deadline_seconds)],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("python runs");
    wait_until("the call to be in flight", || {
        metric(&server.metrics(), "mcpgraph_calls_in_flight") == Some(1.0)
    });
    client
}

/// Kills a background client if the test fails before it is waited for.
struct Reap(Option<Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn sigterm_lets_calls_in_flight_finish() {
    let mut server = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[],
    );
    let mut client = Reap(Some(nap_in_flight(&server, 1000, "8")));
    server.terminate();
    let port = server.port;
    wait_until("new connections to be refused", || {
        TcpStream::connect(("127.0.0.1", port)).is_err()
    });
    assert!(
        matches!(client.0.as_mut().unwrap().try_wait(), Ok(None)),
        "the call ended before the listener closed"
    );
    let output = client.0.take().unwrap().wait_with_output().unwrap();
    let report = report(output);
    assert_eq!(report["result"], json!({"napped": 1000}), "{report}");
    let status = server.wait_exit(DEADLINE).expect("serve exits");
    assert!(status.success(), "{status}\n{}", server.text());
}

#[test]
fn the_drain_timeout_cancels_what_is_left() {
    let mut server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--drain-timeout",
            "0.2",
        ],
        &[],
    );
    let mut client = Reap(Some(nap_in_flight(&server, 10_000, "8")));
    let signalled = Instant::now();
    server.terminate();
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("serve exits within 5 s of SIGTERM");
    assert!(status.success(), "{status}\n{}", server.text());
    assert!(signalled.elapsed() < Duration::from_secs(5));
    let output = client.0.take().unwrap().wait_with_output().unwrap();
    let report = report(output);
    assert!(
        report.get("result").is_none() && report["error"].is_string(),
        "the client should see the call fail: {report}"
    );
    assert!(
        !report["error"].as_str().unwrap().contains("TimeoutError"),
        "the client was never answered: {report}"
    );
    let log = server.text();
    assert!(
        log.lines()
            .any(|l| l.contains("tool=nap") && l.contains("failure_kind=\"cancelled\"")),
        "{log}"
    );
}

/// `GET /healthz` as raw HTTP/1.1, the head whole, the connection kept open after the answer.
fn healthz_request(port: u16) -> String {
    format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n")
}

/// Reads one answer from `stream`: its head and the `Content-Length` bytes of body after it,
/// leaving the connection as the server keeps it. Fails after [`DEADLINE`] without one.
fn read_answer(stream: &mut TcpStream) -> (u16, String) {
    use std::io::Read;
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut raw = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let (status, headers) = common::raw_http::parse_head(head);
            let length = headers
                .iter()
                .find(|(name, _)| name == "content-length")
                .and_then(|(_, value)| value.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("an answer without a Content-Length: {text:?}"));
            if body.len() >= length {
                return (status, body.to_string());
            }
        }
        match stream.read(&mut buffer) {
            Ok(0) => panic!("the connection closed before a whole answer: {text:?}"),
            Ok(read) => raw.extend_from_slice(&buffer[..read]),
            Err(error) => panic!("no whole answer within {DEADLINE:?} ({error}): {text:?}"),
        }
    }
}

/// Fails, naming `what`, unless the server closes `stream` within [`DEADLINE`]: the read
/// times out where the server keeps the connection open.
fn assert_closed(stream: &mut TcpStream, what: &str) {
    use std::io::Read;
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => {}
        // Closed with bytes it had not read.
        Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(error) => panic!(
            "{what} is still open after {DEADLINE:?} ({error}); read: {:?}",
            String::from_utf8_lossy(&rest)
        ),
    }
}

/// A connection that has not sent a whole request head within `--header-timeout` is closed,
/// before any token is asked for, while a client with the token is served (issue 24, item 6):
/// such connections stayed open forever, and a few hundred of them took every file descriptor
/// from the real clients. The clock starts again after each answer, so an idle keep-alive
/// connection is closed the same way.
#[test]
fn connections_without_a_whole_request_head_are_closed() {
    use std::io::Write;
    let token = "header-timeout-token";
    let server = Server::start(
        &[
            &http_graph().to_string_lossy(),
            "--http",
            "127.0.0.1:0",
            "--auth-token-env",
            "MCPGRAPH_HTTP_TEST_TOKEN",
            "--header-timeout",
            "1",
        ],
        &[("MCPGRAPH_HTTP_TEST_TOKEN", token)],
    );
    let port = server.port;
    let mut half = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
    );
    half.write_all(head.as_bytes()).unwrap();

    let bearer = format!("Bearer {token}");
    let call = post_call(
        port,
        "double",
        json!({"x": 4}),
        &[("Authorization", &bearer)],
    );
    assert_eq!(call.status, 200, "{call:?}");
    assert_eq!(
        rpc_message(&call)["result"]["structuredContent"],
        json!({"doubled": 8}),
        "{call:?}"
    );
    assert_closed(&mut half, "a connection that sent half a request head");

    let mut kept = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    kept.write_all(healthz_request(port).as_bytes()).unwrap();
    assert_eq!(read_answer(&mut kept), (200, "ok\n".to_string()));
    assert_closed(&mut kept, "an idle keep-alive connection");
}

/// At most `--max-connections` are open at once. A connection arriving at the cap takes the
/// place of an idle one, the least recently active of the address holding the most places:
/// with the cap at 4 and four connections open that send nothing, a fifth is answered at once
/// and the oldest of the four is closed (issue 24: before, the fifth waited for the header
/// timeout, so a peer renewing its idle connections held every place). Busy connections keep
/// theirs: with four calls in flight, a fifth connection is answered only once one has ended,
/// and every call gets its whole answer.
#[test]
fn a_connection_at_the_cap_takes_the_place_of_an_idle_one() {
    use std::io::{ErrorKind, Read, Write};
    let graph = http_graph().to_string_lossy().into_owned();
    let log = temp_file("cap.log");
    let log_text = log.to_string_lossy().into_owned();
    let capped = Server::start(
        &[
            &graph,
            "--http",
            "127.0.0.1:0",
            "--max-connections",
            "4",
            "--header-timeout",
            "60",
        ],
        &[("MCPGRAPH_MOCK_LOG", &log_text)],
    );
    let port = capped.port;
    let mut idle: Vec<TcpStream> = (0..4)
        .map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connects"))
        .collect();
    let mut fifth = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    fifth.write_all(healthz_request(port).as_bytes()).unwrap();
    // Within DEADLINE, far under the header timeout: only an eviction answers it in time.
    assert_eq!(read_answer(&mut fifth), (200, "ok\n".to_string()));
    assert_closed(&mut idle[0], "the oldest idle connection");
    for stream in &mut idle[1..] {
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let still_open = stream.read(&mut [0u8; 1]).map_err(|error| error.kind());
        assert!(
            matches!(still_open, Err(ErrorKind::WouldBlock | ErrorKind::TimedOut)),
            "only one idle connection gives up its place: {still_open:?}"
        );
    }
    drop(idle);
    drop(fifth);

    // Four calls in flight, each on a connection of its own, each seen by the downstream
    // server before the fifth connection opens.
    const NAP_MS: u64 = 2_000;
    let started = Instant::now();
    let calls: Vec<(u64, TcpStream)> = (0..4)
        .map(|i| {
            let id = 10 + i;
            let stream = crate::cancel::start_nap(port, id, NAP_MS + i, &[]);
            crate::cancel::downstream_nap(&log, NAP_MS + i);
            (id, stream)
        })
        .collect();
    let mut fifth = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    fifth.write_all(healthz_request(port).as_bytes()).unwrap();
    assert_eq!(read_answer(&mut fifth), (200, "ok\n".to_string()));
    // No call can have ended, and so no place freed, sooner than its nap.
    assert!(
        started.elapsed() >= Duration::from_millis(NAP_MS),
        "the fifth connection was answered while four calls were in flight ({:?})",
        started.elapsed()
    );
    for (id, stream) in calls {
        let answer = crate::cancel::answer(stream, id);
        assert_eq!(
            answer["result"]["structuredContent"]["napped"],
            json!(NAP_MS + id - 10),
            "{answer}"
        );
    }
    let _ = std::fs::remove_file(&log);
}

/// Over HTTP the caller's trace context may come as headers (`traceparent`, `tracestate`): it
/// reaches the downstream MCP request in `_meta`, unchanged (docs/observability.md).
#[test]
fn a_traceparent_header_reaches_the_downstream_request() {
    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let log = temp_file("trace.log");
    let log_text = log.to_string_lossy().into_owned();
    let server = Server::start(
        &[&http_graph().to_string_lossy(), "--http", "127.0.0.1:0"],
        &[("MCPGRAPH_MOCK_LOG", &log_text)],
    );
    let call = post_call(
        server.port,
        "nap",
        json!({"ms": 1}),
        &[
            ("traceparent", PARENT),
            ("tracestate", "rojo=00f067aa0ba902b7"),
        ],
    );
    assert_eq!(call.status, 200, "{call:?}");
    assert_eq!(
        rpc_message(&call)["result"]["structuredContent"],
        json!({"napped": 1}),
        "{call:?}"
    );
    let nap = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|m| m["method"] == "tools/call" && m["params"]["name"] == "nap")
        .expect("the mock server received the nap");
    assert_eq!(
        nap["params"]["_meta"]["traceparent"],
        json!(PARENT),
        "{nap}"
    );
    assert_eq!(
        nap["params"]["_meta"]["tracestate"],
        json!("rojo=00f067aa0ba902b7"),
        "{nap}"
    );
    let _ = std::fs::remove_file(&log);
}
