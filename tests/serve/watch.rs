//! `mcpgraph serve --watch` with a real client, the Python `mcp` package (installed by
//! scripts/test-setup): new versions served live, calls in flight finished on the old one, broken
//! saves reported while the last good version keeps serving (tests/support/watch_client.py).

mod common;

use std::path::{Path, PathBuf};

/// Version 1: `slow` naps through the mock server, then says which version ran it.
const V1: &str = r#"version: "1.0"
server: { name: "watched", version: "1.0.0" }
tools:
  - name: "slow"
    description: "Naps through the mock server, then says which version ran it"
    inputSchema: { type: object, properties: { ms: { type: number } }, required: [ms] }
    nodes:
      - { id: entry, type: entry, next: nap }
      - { id: nap, type: mcp, server: mock, tool: nap, args: { ms: "$.entry.ms" }, next: done }
      - { id: done, type: transform, transform: { expr: '{ "version": 1 }' }, next: exit }
      - { id: exit, type: exit }
"#;

/// Version 2: `slow` says 2, and a new tool `added`.
fn v2() -> String {
    V1.replace(r#"{ "version": 1 }"#, r#"{ "version": 2 }"#)
        + r#"  - name: "added"
    description: "New in version 2"
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: hello }
      - { id: hello, type: transform, transform: { expr: '{ "hello": "from version 2" }' }, next: exit }
      - { id: exit, type: exit }
"#
}

/// Version 2 with a `next` to a node that does not exist: it does not check.
fn broken() -> String {
    v2().replace("}' }, next: exit }", "}' }, next: exi }")
}

/// A fresh directory with the graph `first` as g.yaml, the mock server in mcp.json, and the
/// versions the client saves.
fn workspace(name: &str, first: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-watch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let mcp = serde_json::json!({"mcpServers": {"mock": {"command": "python3", "args": [mock]}}});
    std::fs::write(dir.join("mcp.json"), mcp.to_string()).unwrap();
    std::fs::write(dir.join("g.yaml"), first).unwrap();
    std::fs::write(dir.join("v2.yaml"), v2()).unwrap();
    std::fs::write(dir.join("broken.yaml"), broken()).unwrap();
    dir
}

fn run_client(dir: &Path, mode: &str) {
    let python = common::root().join("target/test-venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/test-setup first: {} is missing",
        python.display()
    );
    let output = std::process::Command::new(python)
        .arg(common::root().join("tests/support/watch_client.py"))
        .arg(common::mcpgraph())
        .arg(dir)
        .arg(mode)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let server = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "the client failed:\n{stdout}\n{stderr}\nthe server's stderr:\n{server}"
    );
}

/// A valid save is served and announced while a call begun before it finishes on the old
/// version; a broken save is reported once and the last good version keeps serving.
#[test]
fn a_saved_version_is_served_and_a_broken_one_is_reported() {
    let dir = workspace("swap", V1);
    run_client(&dir, "swap");
    let server = std::fs::read_to_string(dir.join("stderr.log")).unwrap();
    assert!(
        server.contains("g.yaml changed: serving the new version (2 tools)"),
        "{server}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A graph that does not check at start serves no tool, until a version that checks is saved.
#[test]
fn a_graph_broken_at_start_is_served_once_fixed() {
    let dir = workspace("broken-start", &broken());
    run_client(&dir, "broken-start");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A client of protocol 2026-07-28 has no handshake: it hears of a new version through
/// `subscriptions/listen`.
#[test]
fn a_subscription_hears_of_a_new_version() {
    let dir = workspace("listen", V1);
    run_client(&dir, "listen");
    let _ = std::fs::remove_dir_all(&dir);
}
