//! `notifications/cancelled` POSTed to a stateless `serve --http`, as the TypeScript SDKs send
//! it for a 2025-era call whose response stream they keep open (issue 24): the call named stops,
//! its downstream call is told, and it is counted cancelled; a cancellation from another client
//! (another credential) stops nothing. Raw HTTP/1.1, so the call's stream stays open while the
//! cancellation is sent on a connection of its own.

use crate::common;

use crate::common::raw_http::{Chunked, Response};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::served::{DEADLINE, Server, wait_until};
/// The nap of a call the tests cancel: far longer than [`DEADLINE`], so it ends in time only
/// if it is cancelled.
const LONG_NAP_MS: u64 = 30_000;

fn http_graph() -> PathBuf {
    common::root().join("tests/http/http.yaml")
}

/// A file under the temp dir for this test alone (removed first).
fn temp_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mcpgraph-cancel-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// `mcpgraph serve tests/http/http.yaml --http 127.0.0.1:0` with more arguments, its mock
/// server logging to `log`.
fn serve_http(args: &[&str], env: &[(&str, &str)], log: &Path) -> Server {
    let mut command = Command::new(common::mcpgraph());
    command
        .arg("serve")
        .arg(http_graph())
        .args(["--http", "127.0.0.1:0"])
        .args(args)
        .current_dir(common::root())
        .env(
            "MCPGRAPH_MOCK",
            common::shared_dir().join("tools/mock-mcp-server.py"),
        )
        .env("MCPGRAPH_MOCK_LOG", log)
        .envs(env.iter().copied());
    Server::start_with(command)
}

/// The value of the metric line `series` (name and labels exactly as rendered), if present.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// A POST to `/mcp` of `body` with `headers`, as a 2025-era client without a session sends it.
fn post(port: u16, body: &Value, headers: &[(&str, &str)]) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    let body = body.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream
}

/// Starts `tools/call` `nap` for `ms` with request id `id`; its response stream stays open
/// until [`answer`] reads it.
pub(crate) fn start_nap(port: u16, id: u64, ms: u64, headers: &[(&str, &str)]) -> TcpStream {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "nap", "arguments": {"ms": ms}}});
    post(port, &call, headers)
}

/// POSTs `notifications/cancelled` for request `id` and returns rmcp's answer.
fn cancel(port: u16, id: u64, headers: &[(&str, &str)]) -> Response {
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the user gave up"}});
    let mut stream = post(port, &notification, headers);
    let raw = read_to_close(&mut stream, "the cancellation's answer");
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let (status, headers) = common::raw_http::parse_head(head);
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Everything the server writes on `stream` until it closes it; fails the test if that takes
/// more than [`DEADLINE`] (an open event stream gets a keep-alive comment every 5 s, so no
/// single read waits that long).
fn read_to_close(stream: &mut TcpStream, what: &str) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return raw,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading {what} failed: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not end within {DEADLINE:?}; so far:\n{}",
            String::from_utf8_lossy(&raw)
        );
    }
}

/// The JSON-RPC answer to request `id` on a call's response stream (server-sent events), once
/// the stream has ended.
pub(crate) fn answer(mut stream: TcpStream, id: u64) -> Value {
    let what = format!("the stream of call {id}");
    let raw = read_to_close(&mut stream, &what);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response to call {id}: {text:?}"));
    let (status, headers) = common::raw_http::parse_head(head);
    assert_eq!(status, 200, "{text}");
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut decoded = Vec::new();
        Chunked::new(body.as_bytes())
            .read_to_end(&mut decoded)
            .unwrap();
        String::from_utf8_lossy(&decoded).into_owned()
    } else {
        body.to_string()
    };
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message["id"] == json!(id))
        .unwrap_or_else(|| panic!("no answer to call {id} on its stream:\n{text}"))
}

fn mock_log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

/// The id of the mock's `nap` call for `ms`, once the mock has received it.
pub(crate) fn downstream_nap(log: &Path, ms: u64) -> Value {
    let mut id = None;
    wait_until(
        &format!("the mock server to receive the nap of {ms} ms"),
        || {
            id = mock_log_lines(log).into_iter().find_map(|m| {
                let napping = m["method"] == "tools/call"
                    && m["params"]["name"] == "nap"
                    && m["params"]["arguments"]["ms"].as_f64() == Some(ms as f64);
                napping.then(|| m["id"].clone())
            });
            id.is_some()
        },
    );
    id.unwrap_or_default()
}

/// The request ids of the `notifications/cancelled` the mock has received.
fn cancelled_downstream(log: &Path) -> Vec<Value> {
    mock_log_lines(log)
        .into_iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .map(|m| m["params"]["requestId"].clone())
        .collect()
}

/// The whole path with a bearer token, as a TypeScript SDK client with one uses it: the
/// cancellation stops the call (its stream ends with the error), the downstream `nap` is
/// cancelled, and `/metrics` counts the call cancelled with nothing left in flight.
#[test]
fn a_posted_cancellation_stops_the_call_and_tells_the_downstream() {
    let log = temp_file("stops.log");
    let token = "cancel-test-token";
    let server = serve_http(
        &["--auth-token-env", "MCPGRAPH_CANCEL_TEST_TOKEN"],
        &[("MCPGRAPH_CANCEL_TEST_TOKEN", token)],
        &log,
    );
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    let call = start_nap(server.port, 7, LONG_NAP_MS, &auth);
    let nap = downstream_nap(&log, LONG_NAP_MS);

    let accepted = cancel(server.port, 7, &auth);
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let cancelled = answer(call, 7);
    assert_eq!(
        cancelled["error"]["message"],
        "Execution was cancelled",
        "{cancelled}\n{}",
        server.text()
    );
    wait_until("the mock server to be told of the cancellation", || {
        cancelled_downstream(&log).contains(&nap)
    });
    wait_until("the call to be counted cancelled", || {
        let text = server.metrics_with(&auth);
        metric(
            &text,
            "mcpgraph_call_failures_total{tool=\"nap\",kind=\"cancelled\"}",
        ) == Some(1.0)
            && metric(&text, "mcpgraph_calls_in_flight") == Some(0.0)
    });
    let _ = std::fs::remove_file(&log);
}

/// Two clients, each with a call of id 7 in flight: one client's cancellation stops its own
/// call only. The other's is still running afterwards, its downstream `nap` not cancelled, and
/// its own client's cancellation then stops it.
#[test]
fn a_cancellation_from_another_client_cancels_nothing() {
    let log = temp_file("scoped.log");
    let server = serve_http(&[], &[], &log);
    let alice = [("Authorization", "Bearer alice")];
    let bob = [("Authorization", "Bearer bob")];
    // Both naps outlast the test: neither ends on its own while it is looked at.
    let bob_ms = LONG_NAP_MS + 1;
    let alices_call = start_nap(server.port, 7, LONG_NAP_MS, &alice);
    let bobs_call = start_nap(server.port, 7, bob_ms, &bob);
    let alices_nap = downstream_nap(&log, LONG_NAP_MS);
    let bobs_nap = downstream_nap(&log, bob_ms);

    let accepted = cancel(server.port, 7, &alice);
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let alices_answer = answer(alices_call, 7);
    assert_eq!(
        alices_answer["error"]["message"],
        "Execution was cancelled",
        "{alices_answer}\n{}",
        server.text()
    );
    wait_until("the mock server to be told of Alice's cancellation", || {
        cancelled_downstream(&log).contains(&alices_nap)
    });
    // Bob's call is the one left in flight, and its nap was not cancelled.
    wait_until("Alice's call to leave the calls in flight", || {
        metric(&server.metrics_with(&[]), "mcpgraph_calls_in_flight") == Some(1.0)
    });
    assert!(
        !cancelled_downstream(&log).contains(&bobs_nap),
        "Bob's nap was cancelled: {:?}",
        mock_log_lines(&log)
    );
    // Bob's own cancellation stops it: his scope works too.
    let accepted = cancel(server.port, 7, &bob);
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let bobs_answer = answer(bobs_call, 7);
    assert_eq!(
        bobs_answer["error"]["message"],
        "Execution was cancelled",
        "{bobs_answer}\n{}",
        server.text()
    );
    wait_until("the mock server to be told of Bob's cancellation", || {
        cancelled_downstream(&log).contains(&bobs_nap)
    });
    let _ = std::fs::remove_file(&log);
}
