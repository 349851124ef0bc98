//! Real MCP clients from npm over stdio, as people run them (issue 24, "Tests against real
//! clients, kept"): the official TypeScript SDK 1.x (`@modelcontextprotocol/sdk`) and its v2
//! client (`@modelcontextprotocol/client`) in both protocol eras, driven by
//! tests/support/ts_client.mjs, and the MCP Inspector CLI; all pinned in
//! tests/support/package.json and installed by scripts/test-setup. Against `serve`, a server
//! built from the stub and the toolkit: the tools listed, a call and its progress, a cancelled
//! call whose downstream server is told, an `ask` answered, and a refused edit whose diagnostics
//! reach the client. A client's own bugs are named beside the tests they touch.

use crate::common;

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The clients tests/support/ts_client.mjs drives, and the revision each negotiates with
/// mcpgraph: the 1.x SDK speaks only the 2025 revisions; the v2 client speaks both, the 2025
/// handshake by default and 2026-07-28 when pinned to it.
const CLIENTS: [(&str, &str); 3] = [
    ("sdk1", "2025-11-25"),
    ("v2-legacy", "2025-11-25"),
    ("v2-modern", "2026-07-28"),
];

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
    let dir = std::env::temp_dir().join(format!("mcpgraph-clients-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir.canonicalize().expect("the temporary directory")
}

/// Runs `node tests/support/ts_client.mjs CLIENT ARGS -- SERVER…` in `cwd` with `env` added
/// (the server inherits both) and returns the client's report.
fn ts_client(
    client: &str,
    args: &[&str],
    server: &[&str],
    cwd: &Path,
    env: &[(&str, &str)],
) -> Value {
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
        .arg("--")
        .args(server)
        .current_dir(cwd)
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

/// The protocol revision `client` negotiates with mcpgraph.
fn protocol_of(client: &str) -> &'static str {
    CLIENTS
        .iter()
        .find(|(name, _)| *name == client)
        .map(|(_, protocol)| *protocol)
        .unwrap_or_else(|| panic!("{client} is not one of {CLIENTS:?}"))
}

/// The last event of call `index` of a report: its result or the error the client raised.
fn outcome(report: &Value, index: usize) -> &Value {
    report["calls"][index]["events"]
        .as_array()
        .and_then(|events| events.last())
        .unwrap_or_else(|| panic!("call {index} has no events: {report}"))
}

/// `sum_to_n` {"n": 100} as the client saw it: loop.yaml runs 2n+3 nodes, one progress
/// notification each, all before the result.
///
/// What reaches the application is less than what reached the client: both SDKs, at the
/// versions pinned, dispatch a notification a microtask after reading it but a response at
/// once, so the progress notifications read in the same chunk of the pipe as the result are
/// dropped ("Received a progress notification for an unknown token"; typescript-sdk#2580,
/// open for 1.x and v2). mcpgraph wrote them first; which reads they share is up to the pipe.
/// So the wire is checked whole, and the callbacks for what they are: the same notifications
/// in the same order, a prefix of them, before the result. Over HTTP each notification is an
/// event of its own and every one reaches the callback (tests/network/real_clients.rs).
fn assert_sum_to_100(report: &Value, client: &str) {
    assert_eq!(report["protocol"], protocol_of(client), "{report}");
    assert_eq!(report["tools"], json!(["sum_to_n"]), "{report}");
    let call = &report["calls"][0];
    let wire = call["wire"].as_array().expect("the wire");
    let (response, progress) = wire.split_last().expect("at least the response");
    assert_eq!(
        response["error"],
        json!(false),
        "the response comes last: {report}"
    );
    assert_eq!(progress.len(), 2 * 100 + 3, "{report}");
    for (i, notification) in progress.iter().enumerate() {
        assert_eq!(
            notification["progress"].as_f64(),
            Some(i as f64 + 1.0),
            "{report}"
        );
    }
    assert_eq!(progress[0]["message"], "entry_sum (entry)", "{report}");

    let events = call["events"].as_array().expect("the events");
    let (result, seen) = events.split_last().expect("at least the result");
    assert_eq!(result["result"], json!({"sum": 5050}), "{report}");
    assert_eq!(result["isError"], json!(false), "{report}");
    assert!(seen.len() <= progress.len(), "{report}");
    for (callback, notification) in seen.iter().zip(progress) {
        assert_eq!(callback["progress"], notification["progress"], "{report}");
        assert_eq!(callback["message"], notification["message"], "{report}");
    }
}

fn sum_to_100(client: &str, server: &[&str]) {
    let report = ts_client(
        client,
        &["call", "sum_to_n", r#"{"n": 100}"#],
        server,
        &common::root(),
        &[],
    );
    assert_sum_to_100(&report, client);
}

#[test]
fn the_typescript_sdk_1x_lists_and_calls_with_progress() {
    sum_to_100(
        "sdk1",
        &[common::mcpgraph(), "serve", &example("loop.yaml")],
    );
}

#[test]
fn the_v2_client_in_the_2025_era_lists_and_calls_with_progress() {
    sum_to_100(
        "v2-legacy",
        &[common::mcpgraph(), "serve", &example("loop.yaml")],
    );
}

#[test]
fn the_v2_client_in_the_2026_era_lists_and_calls_with_progress() {
    sum_to_100(
        "v2-modern",
        &[common::mcpgraph(), "serve", &example("loop.yaml")],
    );
}

/// A server built from the stub (`mcpgraph build`, no cargo) answers every client as `serve`
/// does.
#[test]
fn a_built_server_answers_every_typescript_client() {
    let dir = temp_dir("built");
    let server = dir.join("server");
    let output = Command::new(common::mcpgraph())
        .arg("build")
        .arg(example("loop.yaml"))
        .arg("-o")
        .arg(&server)
        .envs(common::SHARED_BUILD_ENV.iter().copied())
        .output()
        .expect("mcpgraph runs");
    assert!(
        output.status.success(),
        "mcpgraph build failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let server = server.to_string_lossy();
    for (client, _) in CLIENTS {
        sum_to_100(client, &[&server]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A call the application cancels (an AbortSignal) stops, and its downstream call is cancelled
/// too: the shared mock server logs the `notifications/cancelled` while the client is still
/// connected.
#[test]
fn typescript_clients_cancel_a_call_and_the_downstream_is_told() {
    let dir = temp_dir("cancel");
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let mock = mock.to_string_lossy();
    let graph = common::root().join("tests/http/http.yaml");
    let graph = graph.to_string_lossy();
    for (client, _) in CLIENTS {
        let log = dir.join(format!("mock-{client}.log"));
        let log = log.to_string_lossy();
        let report = ts_client(
            client,
            &["cancel", "nap", r#"{"ms": 10000}"#, &log],
            &[common::mcpgraph(), "serve", &graph],
            &common::root(),
            &[("MCPGRAPH_MOCK", &mock), ("MCPGRAPH_MOCK_LOG", &log)],
        );
        assert_eq!(report["protocol"], protocol_of(client), "{report}");
        let cancel = &report["cancel"];
        assert_eq!(cancel["finished"], json!(false), "{report}");
        assert!(cancel["error"]["message"].is_string(), "{report}");
        assert_eq!(
            cancel["downstreamTold"],
            json!(true),
            "the mock server was not told of the cancellation: {report}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `client` answers examples/confirm_ask.yaml's question with `answer`; the result must be
/// `expected`, and the real filesystem server must have written the file exactly when it was.
/// The 2025 era asks with an `elicitation/create` request; the 2026 era with an
/// `input_required` result, which the v2 client fulfils through the same handler and retries.
fn answer_an_ask(client: &str, answer: Value, expected: Value) {
    let dir = temp_dir(&format!("ask-{client}"));
    let path = dir.join("note.txt");
    let path = path.to_string_lossy();
    let arguments = json!({"path": path, "content": "first"}).to_string();
    let answer = answer.to_string();
    // In tests/support, npx finds the filesystem server scripts/test-setup installed.
    let report = ts_client(
        client,
        &["call", "overwrite_file", &arguments, "--answer", &answer],
        &[common::mcpgraph(), "serve", &example("confirm_ask.yaml")],
        &support(),
        &[("FS_ROOT", &dir.to_string_lossy())],
    );
    assert_eq!(report["protocol"], protocol_of(client), "{report}");
    let events = report["calls"][0]["events"].as_array().expect("the events");
    let asked: Vec<&Value> = events
        .iter()
        .filter_map(|event| event.get("elicitation"))
        .collect();
    assert_eq!(
        asked,
        [&json!(format!("Overwrite {path} with 5 characters?"))],
        "{report}"
    );
    let result = outcome(&report, 0);
    assert_eq!(result["result"], expected, "{report}");
    assert_eq!(result["isError"], json!(false), "{report}");
    let written = std::fs::read_to_string(dir.join("note.txt")).ok();
    if expected["written"] == json!(true) {
        assert_eq!(written.as_deref(), Some("first"), "{report}");
    } else {
        assert_eq!(written, None, "{report}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_typescript_sdk_1x_answers_an_ask() {
    answer_an_ask(
        "sdk1",
        json!({"action": "accept", "content": {"ok": true}}),
        json!({"written": true}),
    );
}

#[test]
fn the_v2_client_in_the_2025_era_declines_an_ask() {
    answer_an_ask(
        "v2-legacy",
        json!({"action": "decline"}),
        json!({"written": false, "reason": "declined"}),
    );
}

#[test]
fn the_v2_client_in_the_2026_era_answers_an_ask() {
    answer_an_ask(
        "v2-modern",
        json!({"action": "accept", "content": {"ok": true}}),
        json!({"written": true}),
    );
}

/// A tool whose entry's `next` names no node: the toolkit refuses to add it (E0205).
fn broken_tool() -> Value {
    json!({
        "name": "broken",
        "description": "Its entry's next names no node",
        "inputSchema": {"type": "object"},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "exitt"},
            {"id": "exit", "type": "exit"}
        ]
    })
}

/// The refused edit's result as the client passed it on: an isError result whose
/// structuredContent carries the diagnostics, pointing into the sent tool.
fn assert_refused(result: &Value, report: &Value) {
    assert!(
        result.get("error").is_none(),
        "the client rejected the toolkit's result (its outputSchema must cover failures): {report}"
    );
    assert_eq!(result["isError"], json!(true), "{report}");
    let content = &result["result"];
    assert_eq!(content["error"]["kind"], "refused", "{report}");
    let diagnostic = &content["diagnostics"][0];
    assert_eq!(diagnostic["code"], "E0205", "{report}");
    assert_eq!(diagnostic["inTool"], json!(true), "{report}");
    assert_eq!(diagnostic["line"], json!(8), "{report}");
    assert_eq!(diagnostic["help"], "did you mean `exit`?", "{report}");
    assert!(
        content["toolText"]
            .as_str()
            .is_some_and(|text| text.contains("next: exitt")),
        "{report}"
    );
}

/// The toolkit's refused edit reaches the agent through the TypeScript SDKs (issue 24, item 2):
/// the 1.x SDK validates `structuredContent` against the tool's outputSchema even on an isError
/// result, and answered -32602 to the refusal when the schema described successes only. The
/// v2 client validates successes only; the accepted edit's result must fit too.
#[test]
fn the_toolkits_refused_edit_reaches_typescript_clients() {
    let broken = json!({"tool": broken_tool()}).to_string();
    let fine = json!({"tool": {
        "name": "fine",
        "description": "From entry to exit",
        "inputSchema": {"type": "object"},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "exit"},
            {"id": "exit", "type": "exit"}
        ]
    }})
    .to_string();
    for client in ["sdk1", "v2-modern"] {
        let dir = temp_dir(&format!("toolkit-{client}"));
        let graph = dir.join("graph.yaml");
        std::fs::copy(example("loop.yaml"), &graph).expect("copy the graph");
        let report = ts_client(
            client,
            &["call", "addGraphTool", &broken, "addGraphTool", &fine],
            &[common::mcpgraph(), "toolkit", "graph.yaml"],
            &dir,
            &[],
        );
        assert_refused(outcome(&report, 0), &report);
        let added = outcome(&report, 1);
        assert_eq!(
            added["result"],
            json!({"success": true, "message": "Tool \"fine\" added successfully"}),
            "{report}"
        );
        let text = std::fs::read_to_string(&graph).expect("read the graph");
        assert!(
            text.contains("name: fine") && !text.contains("broken"),
            "{text}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Runs the MCP Inspector CLI (`mcp-inspector-cli --cli TARGET… ARGS…`) and returns the JSON it
/// prints.
///
/// It is started in its own build directory: 1.0.3 looks for its package.json by testing
/// `../package.json` against its working directory, then imports that path relative to its
/// module, so started anywhere else it stops at once with "Cannot find module
/// …/@modelcontextprotocol/package.json" (the Inspector's bug). Its notice that v1 is
/// deprecated goes to stderr.
fn inspector(target: &[&str], args: &[&str]) -> Value {
    let package = support().join("node_modules/@modelcontextprotocol/inspector-cli");
    let bin = support().join("node_modules/.bin/mcp-inspector-cli");
    assert!(
        bin.exists(),
        "run scripts/test-setup first: {} is missing",
        bin.display()
    );
    let output = Command::new(bin)
        .arg("--cli")
        .args(target)
        .args(args)
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
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("the Inspector CLI printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

#[test]
fn the_inspector_cli_lists_and_calls_over_stdio() {
    let graph = example("loop.yaml");
    let server = [common::mcpgraph(), "serve", graph.as_str()];
    let listed = inspector(&server, &["--method", "tools/list"]);
    assert_eq!(listed["tools"][0]["name"], "sum_to_n", "{listed}");
    assert_eq!(
        listed["tools"][0]["outputSchema"]["required"],
        json!(["sum"]),
        "{listed}"
    );
    let called = inspector(
        &server,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "sum_to_n",
            "--tool-arg",
            "n=100",
        ],
    );
    assert_eq!(
        called["structuredContent"],
        json!({"sum": 5050}),
        "{called}"
    );
    assert_eq!(called["isError"], json!(false), "{called}");
}

/// The Inspector, too, validates the refusal against addGraphTool's outputSchema (it lists the
/// tools before every call) and used to print -32602 instead of the diagnostics.
#[test]
fn the_inspector_cli_reads_the_toolkits_refused_edit() {
    let dir = temp_dir("toolkit-inspector");
    let graph = dir.join("graph.yaml");
    std::fs::copy(example("loop.yaml"), &graph).expect("copy the graph");
    let before = std::fs::read(&graph).expect("read the graph");
    let argument = format!("tool={}", broken_tool());
    let result = inspector(
        &[common::mcpgraph(), "toolkit", &graph.to_string_lossy()],
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "addGraphTool",
            "--tool-arg",
            &argument,
        ],
    );
    // The Inspector prints the result as it came; put it in the report's shape.
    let seen = json!({"result": result["structuredContent"], "isError": result["isError"]});
    assert_refused(&seen, &result);
    assert_eq!(std::fs::read(&graph).expect("read the graph"), before);
    let _ = std::fs::remove_dir_all(&dir);
}
