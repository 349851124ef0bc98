//! Real MCP clients from npm against `serve --http` (issue 24, "Tests against real clients,
//! kept"): the official TypeScript SDK 1.x and its v2 client in both protocol eras, driven by
//! tests/support/ts_client.mjs, and the MCP Inspector CLI; pinned in tests/support/package.json
//! and installed by scripts/test-setup. Stateless serving and `--sessions`: the tools listed, a
//! call with every progress notification before its result, a cancelled call whose downstream
//! server is told, and an `ask` answered where the client's era and the serving mode allow it.
//! tests/serve/real_clients.rs has the same clients over stdio.

use crate::common;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::served::{Server, wait_until};

/// The clients tests/support/ts_client.mjs drives, and the revision each negotiates with
/// mcpgraph: the 1.x SDK speaks only the 2025 revisions; the v2 client speaks both, the 2025
/// handshake by default and 2026-07-28 when pinned to it.
const CLIENTS: [(&str, &str); 3] = [
    ("sdk1", "2025-11-25"),
    ("v2-legacy", "2025-11-25"),
    ("v2-modern", "2026-07-28"),
];

/// The bearer token of the cancellation tests' servers.
const TOKEN: &str = "real-clients-test-token";

fn support() -> PathBuf {
    common::root().join("tests/support")
}

fn example(name: &str) -> String {
    common::root()
        .join("examples")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A directory under the temp dir for this test alone (emptied first).
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mcpgraph-http-clients-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir.canonicalize().expect("the temporary directory")
}

/// `mcpgraph serve GRAPH --http 127.0.0.1:0 FLAGS` in `cwd` with `env` added, once it serves.
fn serve(graph: &str, flags: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Server {
    let mut command = Command::new(common::mcpgraph());
    command
        .arg("serve")
        .arg(graph)
        .args(["--http", "127.0.0.1:0"])
        .args(flags)
        .current_dir(cwd)
        .envs(env.iter().copied());
    Server::start_with(command)
}

/// `/metrics`' body, read with the tests' bearer token.
fn metrics(server: &Server) -> String {
    let bearer = format!("Bearer {TOKEN}");
    server.metrics_with(&[("Authorization", &bearer)])
}

/// The value of the metric line `series` (name and labels exactly as rendered), if present.
fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// Runs `node tests/support/ts_client.mjs CLIENT ARGS --url URL` with `env` added and returns
/// the client's report.
fn ts_client(client: &str, args: &[&str], url: &str, env: &[(&str, &str)]) -> Value {
    let installed = support().join("node_modules/@modelcontextprotocol/client");
    assert!(
        installed.exists(),
        "run scripts/test-setup first: {} is missing",
        installed.display()
    );
    let output = Command::new("node")
        .arg(support().join("ts_client.mjs"))
        .arg(client)
        .args(args)
        .args(["--url", url])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("node runs (scripts/test-setup installs the clients with npm)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "ts_client.mjs {client} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!("ts_client.mjs {client} printed no report ({e}):\n{stdout}\n{stderr}")
    })
}

/// `sum_to_n` {"n": 100} through `client` at `url`: loop.yaml runs 2n+3 nodes, one progress
/// notification each, and every one reaches the application's callback, in order, before the
/// result. (Over stdio the SDKs drop some on their side: tests/serve/real_clients.rs.)
fn sum_to_100(client: &str, protocol: &str, url: &str) -> Value {
    let report = ts_client(client, &["call", "sum_to_n", r#"{"n": 100}"#], url, &[]);
    assert_eq!(report["protocol"], protocol, "{report}");
    assert_eq!(report["tools"], json!(["sum_to_n"]), "{report}");
    let call = &report["calls"][0];
    let wire = call["wire"].as_array().expect("the wire");
    let (response, arrived) = wire.split_last().expect("at least the response");
    assert_eq!(
        response["error"],
        json!(false),
        "the response comes last: {report}"
    );
    let events = call["events"].as_array().expect("the events");
    let (result, progress) = events.split_last().expect("at least the result");
    assert_eq!(result["result"], json!({"sum": 5050}), "{report}");
    assert_eq!(result["isError"], json!(false), "{report}");
    assert_eq!(progress.len(), 2 * 100 + 3, "{report}");
    assert_eq!(arrived.len(), progress.len(), "{report}");
    for (i, event) in progress.iter().enumerate() {
        assert_eq!(event["progress"].as_f64(), Some(i as f64 + 1.0), "{report}");
    }
    assert_eq!(progress[0]["message"], "entry_sum (entry)", "{report}");
    report
}

#[test]
fn typescript_clients_over_stateless_http() {
    let server = serve(&example("loop.yaml"), &[], &common::root(), &[]);
    for (client, protocol) in CLIENTS {
        let report = sum_to_100(client, protocol, &server.url());
        assert_eq!(report["session"], Value::Null, "{report}");
    }
}

/// With `--sessions` the 2025-era clients get a session; 2026-07-28 requests stay stateless.
#[test]
fn typescript_clients_over_http_with_sessions() {
    let server = serve(&example("loop.yaml"), &["--sessions"], &common::root(), &[]);
    for (client, protocol) in CLIENTS {
        let report = sum_to_100(client, protocol, &server.url());
        if protocol == "2026-07-28" {
            assert_eq!(report["session"], Value::Null, "{report}");
        } else {
            assert!(report["session"].is_string(), "no session: {report}");
        }
    }
}

/// `client` calls tests/http/http.yaml's `nap` (a 10 s call of the shared mock server) and the
/// application cancels it (an AbortSignal) once the downstream call is under way. The call must
/// stop, the mock server must be told while the client is still connected, and the server must
/// count the call cancelled with nothing left in flight. The servers require a bearer token, as
/// deployments do, so the cancellation carries the credential of the call it cancels (issue 24,
/// item 3: no client may cancel another client's call).
fn cancel_over_http(client: &str, flags: &[&str]) {
    let dir = temp_dir(&format!("cancel-{client}-{}", flags.len()));
    let log = dir.join("mock.log");
    let log = log.to_string_lossy();
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let graph = common::root().join("tests/http/http.yaml");
    let mut all = vec!["--auth-token-env", "MCPGRAPH_HTTP_TEST_TOKEN"];
    all.extend_from_slice(flags);
    let server = serve(
        &graph.to_string_lossy(),
        &all,
        &common::root(),
        &[
            ("MCPGRAPH_MOCK", &mock.to_string_lossy()),
            ("MCPGRAPH_MOCK_LOG", &log),
            ("MCPGRAPH_HTTP_TEST_TOKEN", TOKEN),
        ],
    );
    let report = ts_client(
        client,
        &["cancel", "nap", r#"{"ms": 10000}"#, &log],
        &server.url(),
        &[("MCPGRAPH_TEST_TOKEN", TOKEN)],
    );
    let cancel = &report["cancel"];
    assert_eq!(cancel["finished"], json!(false), "{report}");
    assert!(cancel["error"]["message"].is_string(), "{report}");
    assert_eq!(
        cancel["downstreamTold"],
        json!(true),
        "the mock server was not told of the cancellation: {report}\n{}",
        server.lines().join("\n")
    );
    wait_until("the call to be counted cancelled", || {
        let text = metrics(&server);
        metric(
            &text,
            "mcpgraph_call_failures_total{tool=\"nap\",kind=\"cancelled\"}",
        ) == Some(1.0)
            && metric(&text, "mcpgraph_calls_in_flight") == Some(0.0)
    });
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The 2025-era clients cancel by POSTing `notifications/cancelled` and keep the call's
/// response stream open (issue 24, item 3): stateless serving used to accept the notification
/// and let the run go on with its downstream call.
#[test]
fn a_2025_client_cancels_over_stateless_http() {
    cancel_over_http("sdk1", &[]);
    cancel_over_http("v2-legacy", &[]);
}

/// The v2 client in the 2026 era cancels by aborting the call's own response stream.
#[test]
fn a_2026_client_cancels_over_stateless_http() {
    cancel_over_http("v2-modern", &[]);
}

#[test]
fn a_2025_client_cancels_over_http_with_sessions() {
    cancel_over_http("sdk1", &["--sessions"]);
}

/// examples/confirm_ask.yaml served over HTTP with `flags`; `client` answers yes. The result
/// must be `expected`, the client must have been asked exactly when `expected` says it was
/// written, and the real filesystem server must have written the file then.
fn ask_over_http(client: &str, flags: &[&str], expected: Value) {
    let dir = temp_dir(&format!("ask-{client}-{}", flags.len()));
    let path = dir.join("note.txt");
    let path = path.to_string_lossy();
    // In tests/support, npx finds the filesystem server scripts/test-setup installed.
    let server = serve(
        &example("confirm_ask.yaml"),
        flags,
        &support(),
        &[("FS_ROOT", &dir.to_string_lossy())],
    );
    let arguments = json!({"path": path, "content": "first"}).to_string();
    let answer = json!({"action": "accept", "content": {"ok": true}}).to_string();
    let report = ts_client(
        client,
        &["call", "overwrite_file", &arguments, "--answer", &answer],
        &server.url(),
        &[],
    );
    let events = report["calls"][0]["events"].as_array().expect("the events");
    let asked: Vec<&Value> = events
        .iter()
        .filter_map(|event| event.get("elicitation"))
        .collect();
    let written = expected["written"] == json!(true);
    let question = json!(format!("Overwrite {path} with 5 characters?"));
    let expected_questions = if written { vec![&question] } else { vec![] };
    assert_eq!(asked, expected_questions, "{report}");
    let result = events.last().expect("the result");
    assert_eq!(result["result"], expected, "{report}");
    assert_eq!(result["isError"], json!(false), "{report}");
    let content = std::fs::read_to_string(dir.join("note.txt")).ok();
    assert_eq!(content.as_deref(), written.then_some("first"), "{report}");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session lets the server send the 2025-era client an `elicitation/create` request.
#[test]
fn a_2025_client_answers_an_ask_over_http_with_sessions() {
    ask_over_http("sdk1", &["--sessions"], json!({"written": true}));
}

/// Stateless, the 2026 era asks with an `input_required` result; the v2 client fulfils it
/// through its elicitation handler and calls again.
#[test]
fn a_2026_client_answers_an_ask_over_stateless_http() {
    ask_over_http("v2-modern", &[], json!({"written": true}));
}

/// Stateless, a 2025-era client has no session to be asked over: the ask is `unavailable` and
/// its `onError` route runs (docs/http.md).
#[test]
fn a_2025_client_without_a_session_is_not_asked() {
    ask_over_http(
        "sdk1",
        &[],
        json!({"written": false, "reason": "unavailable"}),
    );
}

/// The MCP Inspector CLI over streamable HTTP. Started in its own build directory: 1.0.3 finds
/// its package.json only from there (see tests/serve/real_clients.rs).
#[test]
fn the_inspector_cli_calls_over_http() {
    let server = serve(&example("loop.yaml"), &[], &common::root(), &[]);
    let package = support().join("node_modules/@modelcontextprotocol/inspector-cli");
    let bin = support().join("node_modules/.bin/mcp-inspector-cli");
    assert!(
        bin.exists(),
        "run scripts/test-setup first: {} is missing",
        bin.display()
    );
    let output = Command::new(bin)
        .arg("--cli")
        .arg(server.url())
        .args(["--transport", "http", "--method", "tools/call"])
        .args(["--tool-name", "sum_to_n", "--tool-arg", "n=100"])
        .current_dir(package.join("build"))
        .stdin(Stdio::null())
        .output()
        .expect("the Inspector CLI runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Inspector CLI failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let called: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the Inspector CLI printed no JSON ({e}):\n{stdout}\n{stderr}"));
    assert_eq!(
        called["structuredContent"],
        json!({"sum": 5050}),
        "{called}"
    );
    assert_eq!(called["isError"], json!(false), "{called}");
}
