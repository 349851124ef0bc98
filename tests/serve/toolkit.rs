//! `mcpgraph toolkit` with a real client (the Python `mcp` package, installed by
//! scripts/test-setup): a whole authoring session, in tests/support/toolkit_session.py, on a
//! copy of a graph with comments and the shared mock server in an `-m` file; and, with the Rust
//! stdio client, the protocol's edges, a build, and that inline runs start no threads.

use crate::common;

use crate::common::Mcp;
use serde_json::json;
use std::path::PathBuf;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

/// The session's graph: a server of its own (the mock, as `own`), one tool, comments at the
/// top, between servers, before and inside the tool, and at the end.
fn session_graph(mock: &str) -> String {
    format!(
        r#"# The authoring session's graph: these comments must survive every edit.
version: "1.0"
server:
  name: "session"
  version: "1.0.0"
mcpServers:
  # The graph's own copy of the mock server.
  own:
    command: python3
    args: [{mock:?}]
tools:
  # A tool that was here before the session.
  - name: "hello"
    description: "Says hello"
    inputSchema:
      type: object
      properties:
        name: {{ type: string }}
    nodes:
      - {{ id: entry, type: entry, next: say }}   # the entry
      - id: say
        type: transform
        transform: {{ expr: '{{ "greeting": "Hello " & entry.name }}' }}
        next: exit
      - {{ id: exit, type: exit }}
# The end of the file.
"#
    )
}

#[test]
fn an_authoring_session_over_mcp() {
    let python = common::root().join("target/test-venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/test-setup first: {} is missing",
        python.display()
    );
    let dir = temp_dir("toolkit-session");
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let mock = mock.to_string_lossy();
    let graph = dir.join("graph.yaml");
    std::fs::write(&graph, session_graph(&mock)).expect("write the graph");
    let mcp = dir.join("mcp.json");
    let servers = json!({"mcpServers": {"mock": {"command": "python3", "args": [mock]}}});
    std::fs::write(&mcp, servers.to_string()).expect("write the MCP file");
    let output = std::process::Command::new(python)
        .arg(common::root().join("tests/support/toolkit_session.py"))
        .arg(common::mcpgraph())
        .arg(&graph)
        .arg(&mcp)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "the authoring session failed:\n{stdout}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Over the raw protocol: the handshake names the toolkit as the original does, and a call
/// without a required argument is an isError result with the original's text, never -32603.
#[test]
fn the_handshake_and_a_missing_argument() {
    let dir = temp_dir("toolkit-handshake");
    let graph = common::root().join("examples/greeting_next.yaml");
    std::fs::copy(&graph, dir.join("graph.yaml")).expect("copy the graph");
    let mut mcp = Mcp::start(&["toolkit", "graph.yaml"], &dir, &[]);
    let missing = mcp.call("getGraphTool", json!({}));
    assert_eq!(missing["result"]["isError"], json!(true), "{missing}");
    assert_eq!(
        missing["result"]["structuredContent"]["error"]["message"],
        json!("toolName is required"),
        "{missing}"
    );
    let server = mcp.call("getGraphServer", json!({}));
    assert_eq!(
        common::structured(&server),
        &json!({"name": "greeter", "version": "1.0.0", "title": "greeter"}),
        "{server}"
    );
    mcp.close_stdin();
    let status = mcp.wait_exit(std::time::Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A graph file its owner made read-only (0444) is not edited: the edit is refused, saying so,
/// and the file keeps its bytes and its mode (a rename would replace it without asking).
#[test]
fn a_read_only_graph_is_not_edited() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("toolkit-read-only");
    let graph = dir.join("graph.yaml");
    std::fs::copy(common::root().join("examples/greeting_next.yaml"), &graph)
        .expect("copy the graph");
    let before = std::fs::read(&graph).expect("read the graph");
    std::fs::set_permissions(&graph, std::fs::Permissions::from_mode(0o444)).unwrap();
    let mut mcp = Mcp::start(&["toolkit", "graph.yaml"], &dir, &[]);
    let tool = json!({
        "name": "echo",
        "description": "Echoes",
        "inputSchema": {"type": "object"},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "exit"},
            {"id": "exit", "type": "exit"}
        ]
    });
    let refused = mcp.call("addGraphTool", json!({"tool": tool}));
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    let message = refused["result"]["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("is read-only"), "{refused}");
    assert_eq!(std::fs::read(&graph).unwrap(), before);
    let mode = std::fs::metadata(&graph).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o444);
    mcp.close_stdin();
    let _ = mcp.wait_exit(std::time::Duration::from_secs(10));
    let _ = std::fs::set_permissions(&graph, std::fs::Permissions::from_mode(0o644));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `buildGraph` builds a server from the stub, as `mcpgraph build` does: no cargo, so the result
/// comes at once with the client configuration, and the binary it built answers a call. It
/// replaces an earlier build (a file that carries an attached graph) and nothing else: an
/// executable script outside the graph's directory is left alone (issue 24, item 10).
#[test]
fn build_graph_builds_a_server_that_answers() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("toolkit-build");
    std::fs::create_dir_all(dir.join("graph")).unwrap();
    std::fs::copy(
        common::root().join("examples/greeting_next.yaml"),
        dir.join("graph/graph.yaml"),
    )
    .expect("copy the graph");
    let script = dir.join("script.sh");
    std::fs::write(&script, "#!/bin/sh\necho mine\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    // PATH without cargo: the build needs none.
    let mut toolkit = Mcp::start(
        &["toolkit", "graph.yaml"],
        &dir.join("graph"),
        &[("PATH", "/nonexistent")],
    );
    let refused = toolkit.call("buildGraph", json!({"output": "../script.sh"}));
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    assert!(
        common::text(&refused).contains("not a server mcpgraph built"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\necho mine\n"
    );
    let mut built = serde_json::Value::Null;
    // The second build replaces the first.
    for _ in 0..2 {
        let response = toolkit.call("buildGraph", json!({"output": "greeter"}));
        assert_ne!(response["result"]["isError"], json!(true), "{response}");
        built = common::structured(&response).clone();
    }
    assert!(
        !toolkit
            .pending
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "progress from a build that runs no cargo"
    );
    let root = dir.clone();
    let dir = dir.join("graph");
    let binary = dir.join("greeter");
    assert_eq!(
        built["path"].as_str().map(PathBuf::from),
        Some(binary.clone()),
        "{built}"
    );
    let command = &built["clientConfig"]["mcpServers"]["greeter"]["command"];
    assert!(
        command.as_str().is_some_and(|c| c.ends_with("greeter")),
        "{built}"
    );
    toolkit.close_stdin();
    let _ = toolkit.wait_exit(std::time::Duration::from_secs(10));

    // The built server is a real MCP server.
    let binary = binary.to_string_lossy().into_owned();
    let mut server = Mcp::start_program(&binary, &dir);
    let answer = server.call("greet", json!({"name": "Ada"}));
    assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    assert!(common::text(&answer).contains("Ada"), "{answer}");
    server.close_stdin();
    let _ = server.wait_exit(std::time::Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&root);
}

/// The inline tool of [`inline_runs_start_no_threads`]: the mock server echoes its argument `n`,
/// so a run awaits a downstream call and goes to the run workers.
fn echoing_tool() -> serde_json::Value {
    json!({
        "name": "echoed",
        "description": "Has the mock server echo n",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number"}}},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "call"},
            {"id": "call", "type": "mcp", "server": "mock", "tool": "echo",
             "args": {"n": {"expr": "$.entry.n"}}, "next": "exit"},
            {"id": "exit", "type": "exit"}
        ]
    })
}

/// Runs [`echoing_tool`] inline with `n` and requires the mock's echo of it as the result.
fn run_inline(toolkit: &mut Mcp, n: usize) {
    let ran = toolkit.call(
        "runGraphTool",
        json!({"toolDefinition": echoing_tool(), "arguments": {"n": n}}),
    );
    assert_eq!(
        common::structured(&ran)["result"],
        json!({"received": {"n": n}}),
        "inline run {n}: {ran}"
    );
}

/// How many inline runs follow the first. Each loads an engine and starts the mock server (a
/// Python process) for its one call, so more would only make the test slower: a pool per run
/// would show at the first of them (new worker threads).
const INLINE_RUNS: usize = 30;

/// Every inline `runGraphTool` run loads an engine of its own, and every engine of the process
/// runs on one pool of workers: after 30 more runs, each through the workers, the toolkit has
/// the same threads as after the first (the same ids: the workers are the ones the first run
/// started, not new ones), give or take tokio's blocking-pool threads.
#[test]
fn inline_runs_start_no_threads() {
    let dir = temp_dir("toolkit-threads");
    std::fs::copy(
        common::root().join("examples/greeting_next.yaml"),
        dir.join("graph.yaml"),
    )
    .expect("copy the graph");
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let mock = mock.to_string_lossy();
    let servers = json!({"mcpServers": {"mock": {"command": "python3", "args": [mock]}}});
    std::fs::write(dir.join("mcp.json"), servers.to_string()).expect("write the MCP file");
    let mut toolkit = Mcp::start(&["toolkit", "graph.yaml", "-m", "mcp.json"], &dir, &[]);
    run_inline(&mut toolkit, 0);
    let pid = toolkit.child.id();
    let before = common::threads(pid);
    assert!(
        before.iter().any(|t| t.1.starts_with("mcpgraph-run-")),
        "the inline run went to no run worker: {before:?}"
    );

    for n in 1..=INLINE_RUNS {
        run_inline(&mut toolkit, n);
    }

    let after = common::threads(pid);
    let (tokio_before, others_before): (Vec<_>, Vec<_>) =
        before.iter().partition(|t| common::is_tokio(t));
    let (tokio_after, others_after): (Vec<_>, Vec<_>) =
        after.iter().partition(|t| common::is_tokio(t));
    assert_eq!(
        others_after, others_before,
        "the threads that are not tokio's (the main thread, the run workers, the watchdog) \
         changed with the inline runs"
    );
    // tokio's blocking-pool threads read stdin and write stdout; an idle one lingers 10 s, so
    // their number follows how many were busy at once lately, not how many engines were loaded.
    // A few more than before is that; one pool per run would be more.
    assert!(
        tokio_after.len() <= tokio_before.len() + 4,
        "tokio's threads went from {} to {}",
        tokio_before.len(),
        tokio_after.len()
    );
    toolkit.close_stdin();
    let _ = toolkit.wait_exit(std::time::Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `mcpgraph toolkit new.yaml` where there is no such file yet (issue 24, item 4): the toolkit
/// starts on a graph without tools whose server is named after the file, reading it creates
/// nothing, and the first `addGraphTool` writes the file, which `mcpgraph check` accepts and the
/// toolkit then runs. A file in a directory that does not exist is still refused at start, the
/// directory named.
#[test]
fn a_toolkit_on_a_missing_file_starts_an_empty_graph() {
    use std::process::{Command, Stdio};
    let dir = temp_dir("toolkit-new-file");
    let graph = dir.join("new.yaml");
    let mut toolkit = Mcp::start(&["toolkit", "new.yaml"], &dir, &[]);
    let listed = toolkit.call("listGraphTools", json!({}));
    assert_eq!(
        common::structured(&listed),
        &json!({"items": []}),
        "{listed}"
    );
    let server = toolkit.call("getGraphServer", json!({}));
    assert_eq!(
        common::structured(&server),
        &json!({"name": "new", "version": "1.0.0", "title": "new"}),
        "{server}"
    );
    assert!(!graph.exists(), "reading the new graph created its file");

    let tool = json!({
        "name": "echo",
        "description": "Echoes",
        "inputSchema": {"type": "object", "properties": {"said": {"type": "string"}}},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "exit"},
            {"id": "exit", "type": "exit"}
        ]
    });
    let added = toolkit.call("addGraphTool", json!({"tool": tool}));
    assert_eq!(
        common::structured(&added),
        &json!({"success": true, "message": "Tool \"echo\" added successfully"}),
        "{added}"
    );
    let text = std::fs::read_to_string(&graph).expect("the first edit wrote the file");
    assert!(
        text.starts_with(
            "version: \"1.0\"\nserver:\n  name: \"new\"\n  version: \"1.0.0\"\ntools:\n"
        ),
        "{text}"
    );
    let listed = toolkit.call("listGraphTools", json!({}));
    assert_eq!(
        common::structured(&listed),
        &json!({"items": [{"name": "echo", "description": "Echoes"}]}),
        "{listed}"
    );
    let ran = toolkit.call(
        "runGraphTool",
        json!({"toolName": "echo", "arguments": {"said": "hi"}}),
    );
    assert_eq!(
        common::structured(&ran)["result"],
        json!({"said": "hi"}),
        "{ran}"
    );
    toolkit.close_stdin();
    let status = toolkit.wait_exit(std::time::Duration::from_secs(10));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");

    let check = Command::new(common::mcpgraph())
        .args(["check", "--deny-warnings", "new.yaml"])
        .current_dir(&dir)
        .output()
        .expect("mcpgraph runs");
    assert!(
        check.status.success(),
        "the written graph does not check:\n{text}\n{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );

    let missing = Command::new(common::mcpgraph())
        .args(["toolkit", "no/such/new.yaml"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .output()
        .expect("mcpgraph runs");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no directory no/such"), "{stderr}");
    assert!(!dir.join("no").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
