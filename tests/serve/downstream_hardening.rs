//! Hostile or careless downstream servers: replies too large or too deep to read, servers that
//! leave children behind, and secrets in their configuration.

use crate::common;

use crate::common::{Mcp, structured, text};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// A graph whose tools each call the tool of the same name on server `down`.
fn graph_calling(server: &str, tools: &[&str]) -> String {
    let mut yaml = format!(
        "version: \"1.0\"\nserver: {{ name: downstream-hardening, version: \"1\" }}\nmcpServers:\n  down: {server}\ntools:\n"
    );
    for tool in tools {
        yaml.push_str(&format!(
            "  - name: {tool}\n    description: calls {tool}\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: down }}\n      - {{ id: down, type: mcp, server: down, tool: {tool}, next: exit }}\n      - {{ id: exit, type: exit }}\n"
        ));
    }
    yaml
}

/// A downstream server whose replies to `big` and `deep` cannot be read: a line over 16 MiB,
/// and JSON nested 200 levels deep. `fine` answers normally.
const BAD_REPLIES: &str = r#"
import json, sys
def send(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    msg = json.loads(line)
    mid, method = msg.get("id"), msg.get("method")
    if mid is None:
        continue
    if method == "initialize":
        send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}}, "serverInfo": {"name": "bad", "version": "1"}}}))
    elif method == "tools/call" and msg["params"]["name"] == "big":
        send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "x" * (17 * 1024 * 1024)}]}}))
    elif method == "tools/call" and msg["params"]["name"] == "deep":
        send('{"jsonrpc":"2.0","id":%s,"result":{"content":[],"structuredContent":{"x":%s%s}}}' % (json.dumps(mid), "[" * 200, "]" * 200))
    elif method == "tools/call":
        send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {"content": [], "structuredContent": {"fine": True}}}))
    else:
        send(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {}}))
"#;

#[test]
fn an_unreadable_downstream_reply_fails_the_node_at_once() {
    let dir = temp_dir("bad-replies");
    std::fs::write(dir.join("bad.py"), BAD_REPLIES).expect("write the server");
    // A timeout far beyond the test's patience: an error that names the limit must come first.
    let server = r#"{ command: python3, args: ["bad.py"], cwd: ".", timeoutMs: 600000 }"#;
    std::fs::write(
        dir.join("graph.yaml"),
        graph_calling(server, &["big", "deep", "fine"]),
    )
    .expect("write the graph");
    let mut mcp = Mcp::start(&["serve", "graph.yaml"], &dir, &[]);
    let big = mcp.call("big", json!({}));
    assert_eq!(big["result"]["isError"], json!(true), "{big}");
    let message = text(&big);
    assert!(
        message.contains("node \"down\"")
            && message.contains("MCP error -32700")
            && message.contains("exceeds the limit of 16 MiB"),
        "{message}"
    );
    let deep = mcp.call("deep", json!({}));
    assert_eq!(deep["result"]["isError"], json!(true), "{deep}");
    assert!(
        text(&deep).contains("nested more than 127 levels"),
        "{}",
        text(&deep)
    );
    // The connection survives both.
    let fine = mcp.call("fine", json!({}));
    assert_eq!(structured(&fine), &json!({"fine": true}), "{fine}");
}

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut next = vec![pid];
    while let Some(p) = next.pop() {
        for child in common::children_of(p) {
            out.push(child);
            next.push(child);
        }
    }
    out
}

/// Starts a server whose downstream server runs under `sh -c` beside a `sleep` of its own,
/// calls it, stops the server with `stop`, and requires every descendant to be gone.
fn grandchildren_end_with_the_server(name: &str, stop: impl FnOnce(&mut Mcp)) {
    let dir = temp_dir(name);
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let server = format!(
        r#"{{ command: sh, args: ["-c", "sleep 600 & python3 \"$0\"", {:?}] }}"#,
        mock.to_string_lossy()
    );
    std::fs::write(dir.join("graph.yaml"), graph_calling(&server, &["echo"])).expect("write");
    let mut mcp = Mcp::start(&["serve", "graph.yaml"], &dir, &[]);
    let echoed = mcp.call("echo", json!({}));
    assert_eq!(structured(&echoed), &json!({"received": {}}), "{echoed}");
    let below = descendants(mcp.child.id());
    assert!(
        below.len() >= 3,
        "sh, python3 and sleep should be running: {below:?}"
    );
    stop(&mut mcp);
    let status = mcp
        .wait_exit(Duration::from_secs(10))
        .expect("the server exits");
    assert!(status.success(), "exit status {status}");
    let alive: Vec<u32> = below
        .iter()
        .copied()
        .filter(|&p| common::process_alive(p))
        .collect();
    for &pid in &alive {
        // Clean up after a failure: these are the processes this test started.
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(alive.is_empty(), "outlived the server: {alive:?}");
}

fn signal(mcp: &Mcp, name: &str) {
    let status = std::process::Command::new("kill")
        .args([name, &mcp.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn grandchildren_end_on_stdin_eof() {
    grandchildren_end_with_the_server("tree-eof", Mcp::close_stdin);
}

#[test]
fn grandchildren_end_on_sigterm() {
    grandchildren_end_with_the_server("tree-term", |mcp| signal(mcp, "-TERM"));
}

#[test]
fn grandchildren_end_on_sigint() {
    grandchildren_end_with_the_server("tree-int", |mcp| signal(mcp, "-INT"));
}

const TOKEN: &str = "tok-4f1d9c-secret";
const SECRET_DIR: &str = "/secret-dir-77ab";

fn secrets_graph(dir: &Path) {
    let yaml = "version: \"1.0\"\nserver: { name: secrets, version: \"1\" }\nmcpServers:\n  web: { type: streamableHttp, url: \"http://127.0.0.1:1/mcp?token=${MCPGRAPH_TEST_TOKEN}\", timeoutMs: 10000 }\n  local: { command: \"${MCPGRAPH_TEST_DIR}/no-such-server\" }\ntools:\n  - name: web\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: call }\n      - { id: call, type: mcp, server: web, tool: t, next: exit }\n      - { id: exit, type: exit }\n  - name: local\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: call }\n      - { id: call, type: mcp, server: local, tool: t, next: exit }\n      - { id: exit, type: exit }\n";
    std::fs::write(dir.join("graph.yaml"), yaml).expect("write the graph");
}

#[test]
fn errors_and_logs_show_the_configuration_as_written() {
    let dir = temp_dir("secrets");
    secrets_graph(&dir);
    let log = dir.join("stderr.log");
    let stderr = std::fs::File::create(&log).expect("create the log");
    let env = [
        ("MCPGRAPH_TEST_TOKEN", TOKEN),
        ("MCPGRAPH_TEST_DIR", SECRET_DIR),
        ("MCPGRAPH_LOG", "debug"),
    ];
    let mut mcp = Mcp::spawn_with_stderr(&["serve", "graph.yaml"], &dir, &env, Stdio::from(stderr));
    let init = mcp.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    mcp.notify("notifications/initialized", json!({}));

    let web = mcp.call("web", json!({}));
    assert_eq!(web["result"]["isError"], json!(true), "{web}");
    let message = text(&web);
    assert!(
        message.contains("http://127.0.0.1:1/mcp?token=${MCPGRAPH_TEST_TOKEN}")
            && message.contains("connection refused"),
        "{message}"
    );
    // Our words: no Rust type names.
    assert!(
        !message.contains(TOKEN) && !message.contains("rmcp::") && !message.contains("Transport ["),
        "{message}"
    );

    let local = mcp.call("local", json!({}));
    assert_eq!(local["result"]["isError"], json!(true), "{local}");
    let message = text(&local);
    assert!(
        message.contains("\"${MCPGRAPH_TEST_DIR}/no-such-server\"")
            && !message.contains(SECRET_DIR),
        "{message}"
    );

    mcp.close_stdin();
    mcp.wait_exit(Duration::from_secs(10))
        .expect("the server exits");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !logged.is_empty() && !logged.contains(TOKEN) && !logged.contains(SECRET_DIR),
        "{logged}"
    );
}
