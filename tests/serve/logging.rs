//! MCP logging over stdio (docs/semantics.md §22): the `logging` capability, `logging/setLevel`,
//! and the `notifications/message` a call sends, in order and before its result, at the level
//! the client chose; a graph's own `log:` lines on stderr too.

use crate::common;

use crate::common::{Mcp, structured};
use serde_json::{Value, json};
use std::process::Stdio;

fn graph() -> String {
    common::root()
        .join("tests/graphs/logging.yaml")
        .to_string_lossy()
        .into_owned()
}

/// The `notifications/message` params read before the last response, in order (and forgotten).
fn messages(server: &mut Mcp) -> Vec<(String, String, Value)> {
    let found = server
        .pending
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| {
            let p = &m["params"];
            (
                p["level"].as_str().unwrap_or_default().to_string(),
                p["logger"].as_str().unwrap_or_default().to_string(),
                p["data"].clone(),
            )
        })
        .collect();
    server.pending.clear();
    found
}

#[test]
fn a_call_logs_at_the_clients_level_before_its_result() {
    let stderr = std::env::temp_dir().join(format!(
        "mcpgraph-logging-stderr-{}.log",
        std::process::id()
    ));
    let file = std::fs::File::create(&stderr).unwrap();
    let mut server = Mcp::spawn_with_stderr(
        &["serve", &graph()],
        &common::root(),
        &[],
        Stdio::from(file),
    );
    let init = server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert_eq!(
        init["result"]["capabilities"]["logging"],
        json!({}),
        "the capability is declared: {init}"
    );
    server.notify("notifications/initialized", json!({}));

    // No setLevel yet: info and above, the graph's own lines.
    let result = server.call("steps", json!({"n": 4}));
    assert_eq!(structured(&result), &json!({"twice": 8}));
    assert_eq!(
        messages(&mut server),
        [
            ("info".into(), "entry".into(), json!("started with 4")),
            ("warning".into(), "calc".into(), json!({"twice": 8})),
        ]
    );

    // Debug: each node's start and end too, in the order they happened.
    let set = server.request("logging/setLevel", json!({"level": "debug"}));
    assert_eq!(set["result"], json!({}), "{set}");
    server.call("steps", json!({"n": 1}));
    let debug: Vec<(String, String)> = messages(&mut server)
        .into_iter()
        .map(|(level, _, data)| {
            let text = match data {
                Value::String(text) => text,
                other => other.to_string(),
            };
            // Durations vary: only their presence is compared.
            let text = match text.split_once(" ended after ") {
                Some((head, _)) => format!("{head} ended"),
                None => text,
            };
            (level, text)
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("debug", "entry (entry) started"),
        ("debug", "entry (entry) ended"),
        ("info", "started with 1"),
        ("debug", "calc (transform) started"),
        ("debug", "calc (transform) ended"),
        ("warning", "{\"twice\":2}"),
        ("debug", "exit (exit) started"),
        ("debug", "exit (exit) ended"),
    ]
    .iter()
    .map(|(l, t)| (l.to_string(), t.to_string()))
    .collect();
    assert_eq!(debug, expected);

    // A caught failure (info) and the call's own (error), before its error result.
    server.request("logging/setLevel", json!({"level": "info"}));
    messages(&mut server);
    let failed = server.call("fails", json!({}));
    assert_eq!(failed["result"]["isError"], json!(true), "{failed}");
    let found = messages(&mut server);
    assert_eq!(found.len(), 2, "{found:?}");
    // At info the caught failure's kind, not its text (which the result does not carry).
    assert_eq!(
        found[0],
        (
            "info".into(),
            "mcpgraph".into(),
            json!("first (transform) failed (expression) and went on")
        )
    );
    assert_eq!(found[1].0, "error");
    let ended = found[1].2.as_str().unwrap_or_default();
    assert!(
        ended.starts_with("tools/call fails failed (expression): ") && ended.contains("the end"),
        "{ended}"
    );

    // At debug, the caught failure's text too.
    server.request("logging/setLevel", json!({"level": "debug"}));
    messages(&mut server);
    server.call("fails", json!({}));
    let found = messages(&mut server);
    assert!(
        found.iter().any(|(level, _, data)| level == "debug"
            && data
                .as_str()
                .is_some_and(|t| t.starts_with("first failed: ") && t.contains("caught one"))),
        "{found:?}"
    );
    server.request("logging/setLevel", json!({"level": "info"}));
    messages(&mut server);

    // A message that cannot be evaluated: a warning naming the node; the call succeeds.
    let result = server.call("bad_message", json!({}));
    assert_ne!(result["result"]["isError"], json!(true), "{result}");
    let found = messages(&mut server);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "warning");
    assert!(
        found[0].2.as_str().is_some_and(|t| t
            .starts_with("the log message of node calc could not be evaluated")
            && t.contains("no message")),
        "{found:?}"
    );

    // Above every message the calls send: none.
    server.request("logging/setLevel", json!({"level": "critical"}));
    messages(&mut server);
    server.call("steps", json!({"n": 2}));
    server.call("fails", json!({}));
    assert_eq!(messages(&mut server), []);

    // stderr has the graph's own lines (info and above by default).
    server.close_stdin();
    server.wait_exit(std::time::Duration::from_secs(10));
    let logged = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert!(
        logged.contains("started with 4") && logged.contains("{\"twice\":8}"),
        "{logged}"
    );
    let _ = std::fs::remove_file(&stderr);
}

/// A 2026-07-28 request without `io.modelcontextprotocol/logLevel` in its `_meta` is sent no
/// message; with one, what that level allows.
#[test]
fn a_2026_request_is_sent_what_its_own_level_allows() {
    let mut server = Mcp::spawn(&["serve", &graph()], &common::root(), &[]);
    let meta = |level: Option<&str>| {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}
        });
        if let Some(level) = level {
            meta["io.modelcontextprotocol/logLevel"] = json!(level);
        }
        meta
    };
    let result = server.request(
        "tools/call",
        json!({"name": "steps", "arguments": {"n": 3}, "_meta": meta(None)}),
    );
    assert_eq!(structured(&result), &json!({"twice": 6}), "{result}");
    assert_eq!(messages(&mut server), []);
    server.request(
        "tools/call",
        json!({"name": "steps", "arguments": {"n": 3}, "_meta": meta(Some("warning"))}),
    );
    assert_eq!(
        messages(&mut server),
        [("warning".into(), "calc".into(), json!({"twice": 6}))]
    );
}

/// A downstream server slow to start (more than half its `timeoutMs`): the call that waited for
/// it is told with a warning before its result, stderr says it once, and a later call, which
/// finds the server running, is told nothing.
#[test]
fn a_slow_downstream_start_is_a_warning_to_the_call_that_waited() {
    let dir = std::env::temp_dir().join(format!("mcpgraph-slow-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let graph = dir.join("slow.yaml");
    std::fs::write(
        &graph,
        format!(
            "version: \"1.0\"\nserver: {{ name: slowStart, version: \"1\" }}\nmcpServers:\n  slow:\n    command: sh\n    args: [\"-c\", \"sleep 2.1; exec python3 \\\"$0\\\"\", {:?}]\n    timeoutMs: 4000\ntools:\n  - name: echo\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: call }}\n      - {{ id: call, type: mcp, server: slow, tool: echo, args: {{ x: 1 }}, next: exit }}\n      - {{ id: exit, type: exit }}\n",
            mock.to_string_lossy()
        ),
    )
    .unwrap();
    let stderr = dir.join("stderr.log");
    let mut server = Mcp::spawn_with_stderr(
        &["serve", &graph.to_string_lossy()],
        &dir,
        &[],
        Stdio::from(std::fs::File::create(&stderr).unwrap()),
    );
    let init = server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    server.notify("notifications/initialized", json!({}));

    let first = server.call("echo", json!({}));
    assert_eq!(structured(&first)["received"], json!({"x": 1}), "{first}");
    let told = messages(&mut server);
    let [(level, logger, Value::String(text))] = told.as_slice() else {
        panic!("one warning: {told:?}")
    };
    assert_eq!((level.as_str(), logger.as_str()), ("warning", "mcpgraph"));
    assert!(
        text.starts_with("call waited ") && text.ends_with(" s for server `slow` to start"),
        "{text}"
    );
    let second = server.call("echo", json!({}));
    assert_eq!(structured(&second)["received"], json!({"x": 1}), "{second}");
    assert_eq!(messages(&mut server), []);

    server.close_stdin();
    server
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("the server exits");
    let log = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert_eq!(
        log.matches("server `slow` took ").count(),
        1,
        "said once, on stderr: {log}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
