//! A test of the toolkit as a client sees its results: every result of every tool, success or
//! failure, fits the outputSchema the tool declares. A client validates both (the TypeScript SDK
//! answers -32602 to a result that does not fit, so the agent never sees the diagnostics of a
//! refused edit), so a schema that describes only the success hides every failure. The results
//! are the server's own, made through the path `tools/call` takes ([`Toolkit::call`]), on a
//! graph whose only server cannot start; the few that need a live server or a cargo build come
//! from the functions the server makes them with.

use super::server::{
    CallContext, Toolkit, built_result, server_tool_result, server_tools_result, servers_result,
    trial_result,
};
use super::tools::{self, ToolName};
use mcpgraph_compiler::lock::{LockedServer, LockedTool};
use mcpgraph_runtime::rmcp::model::{CallToolResult, Tool};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One tool, and a server that cannot start: discovery, trials, runs and locks of it fail
/// at once, with no server to run.
const GRAPH: &str = r#"version: "1.0"
server:
  name: "schemas"
  version: "1.0.0"
mcpServers:
  down:
    command: /nonexistent/mcpgraph-schema-test-server
tools:
  - name: "hello"
    description: "Says hello"
    inputSchema:
      type: object
      properties:
        name: { type: string }
    nodes:
      - { id: entry, type: entry, next: say }
      - id: say
        type: transform
        transform: { expr: '{ "greeting": "Hello " & entry.name }' }
        next: exit
      - { id: exit, type: exit }
"#;

/// A fresh directory holding `graph.yaml`, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("mcpgraph-toolkit-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("graph.yaml"), GRAPH).unwrap();
        Scratch(dir)
    }

    fn graph(&self) -> PathBuf {
        self.0.join("graph.yaml")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A tool that calls the server that cannot start.
fn calling_down() -> Value {
    json!({
        "name": "calls",
        "description": "Calls the server that cannot start",
        "inputSchema": {"type": "object"},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "call"},
            {"id": "call", "type": "mcp", "server": "down", "tool": "anything", "args": {}, "next": "exit"},
            {"id": "exit", "type": "exit"}
        ]
    })
}

/// A tool that does not check: its entry's `next` names no node.
fn broken() -> Value {
    json!({
        "name": "broken",
        "description": "Its next names no node",
        "inputSchema": {"type": "object"},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "exitt"},
            {"id": "exit", "type": "exit"}
        ]
    })
}

/// Arguments every tool accepts. A match, so that a new tool needs arguments here.
fn usual_arguments(tool: ToolName) -> Value {
    match tool {
        ToolName::GetGraphServer
        | ToolName::ListGraphTools
        | ToolName::ListMcpServers
        | ToolName::CheckGraph
        | ToolName::LockGraph => json!({}),
        ToolName::GetGraphTool | ToolName::DeleteGraphTool | ToolName::DrawGraph => {
            json!({"toolName": "hello"})
        }
        ToolName::ListMcpServerTools => json!({"serverName": "down"}),
        ToolName::GetMcpServerTool => json!({"serverName": "down", "toolName": "anything"}),
        ToolName::AddGraphTool => json!({"tool": calling_down()}),
        ToolName::UpdateGraphTool => json!({"toolName": "hello", "tool": calling_down()}),
        ToolName::RunGraphTool => json!({"toolName": "hello", "arguments": {"name": "Ada"}}),
        ToolName::TestJsonata => json!({"expression": "$.a", "context": {"a": 1}}),
        ToolName::TestJsonLogic => json!({"expression": {"var": "a"}, "context": {"a": 1}}),
        ToolName::TestMcpTool => json!({"server": "down", "tool": "anything", "args": {}}),
        // The graph itself: refused before anything is built.
        ToolName::BuildGraph => json!({"output": "graph.yaml"}),
    }
}

/// Validates results against the outputSchemas `tools/list` shows, as a client does, and
/// notes which tools had a success and which a failure validated.
struct Client {
    tools: Vec<Tool>,
    seen: BTreeSet<(String, bool)>,
}

impl Client {
    fn fits(&mut self, tool: &str, value: &Value, is_error: bool) {
        let declared = self
            .tools
            .iter()
            .find(|t| t.name == tool)
            .unwrap_or_else(|| panic!("{tool} is not listed"));
        let schema = Value::Object(
            declared
                .output_schema
                .as_deref()
                .cloned()
                .unwrap_or_default(),
        );
        let validator = jsonschema::validator_for(&schema)
            .unwrap_or_else(|e| panic!("{tool}'s outputSchema is not a schema: {e}"));
        let problems: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("at {}: {e}", e.instance_path()))
            .collect();
        assert!(
            problems.is_empty(),
            "{tool}: {value} does not fit its outputSchema {schema}: {problems:?}"
        );
        self.seen.insert((tool.to_string(), is_error));
    }

    /// `result`'s structuredContent fits `tool`'s outputSchema; returns it.
    fn result(&mut self, tool: &str, result: &CallToolResult) -> Value {
        let structured = result
            .structured_content
            .clone()
            .unwrap_or_else(|| panic!("{tool}: no structuredContent in {result:?}"));
        self.fits(tool, &structured, result.is_error == Some(true));
        structured
    }
}

/// The `n`th answer of `tool` (from 0) in `answers`.
fn nth_answer<'a>(answers: &'a [(&str, Value)], tool: &str, n: usize) -> &'a Value {
    let mut of_tool = answers.iter().filter(|(t, _)| *t == tool);
    &of_tool.nth(n).unwrap().1
}

async fn call(
    toolkit: &Toolkit,
    tool: &str,
    arguments: Value,
    context: &CallContext,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("{tool}: arguments are an object")
    };
    toolkit
        .call(tool, arguments, context)
        .await
        .unwrap_or_else(|| panic!("{tool} is not a tool of the toolkit"))
}

/// Every result a tool gives, success or failure, fits the outputSchema it declares: a
/// client validates both (the TypeScript SDK answers -32602 to one that does not fit, and
/// the agent never sees the diagnostics of a refused edit). The results are the server's
/// own, through the path `tools/call` takes; the few that need a live server or a cargo
/// build come from the functions the server makes them with. Every tool has a success and
/// a failure checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_result_fits_its_tools_output_schema() {
    let scratch = Scratch::new("schemas");
    let toolkit = Toolkit::new(scratch.graph(), None);
    let context = CallContext::detached();
    let mut client = Client {
        tools: tools::catalogue().tools(),
        seen: BTreeSet::new(),
    };
    assert!(toolkit.call("nope", Map::new(), &context).await.is_none());

    // In order: the edits change what the later calls see. `true`: an isError result.
    let calls = [
        ("getGraphServer", json!({}), false),
        ("listGraphTools", json!({}), false),
        ("getGraphTool", json!({"toolName": "hello"}), false),
        ("getGraphTool", json!({"toolName": "nope"}), true),
        ("getGraphTool", json!({}), true),
        ("listMcpServers", json!({}), false),
        ("listMcpServerTools", json!({}), false),
        ("listMcpServerTools", json!({"serverName": 3}), true),
        (
            "getMcpServerTool",
            json!({"serverName": "down", "toolName": "anything"}),
            true,
        ),
        ("getMcpServerTool", json!({}), true),
        ("addGraphTool", json!({"tool": broken()}), true),
        ("addGraphTool", json!({"tool": calling_down()}), false),
        (
            "updateGraphTool",
            json!({"toolName": "calls", "tool": calling_down()}),
            false,
        ),
        (
            "updateGraphTool",
            json!({"toolName": "nope", "tool": broken()}),
            true,
        ),
        (
            "runGraphTool",
            json!({"toolName": "hello", "arguments": {"name": "Ada"}}),
            false,
        ),
        (
            "runGraphTool",
            json!({"toolName": "hello", "arguments": {"name": "Ada"}, "breakpoints": ["say"]}),
            false,
        ),
        (
            "runGraphTool",
            json!({"toolName": "calls", "arguments": {}}),
            true,
        ),
        (
            "runGraphTool",
            json!({"toolDefinition": broken(), "arguments": {}}),
            true,
        ),
        ("runGraphTool", json!({"arguments": {}}), true),
        (
            "runGraphTool",
            json!({"toolName": "hello", "breakpoints": [3]}),
            true,
        ),
        (
            "testJSONata",
            json!({"expression": "$.a + 1", "context": {"a": 1}}),
            false,
        ),
        (
            "testJSONata",
            json!({"expression": "$.a +", "context": {}}),
            false,
        ),
        ("testJSONata", json!({}), true),
        (
            "testJSONLogic",
            json!({"expression": {">": [{"var": "a"}, 1]}, "context": {"a": 2}}),
            false,
        ),
        ("testJSONLogic", json!({}), true),
        (
            "testMcpTool",
            json!({"server": "down", "tool": "anything", "args": {}}),
            false,
        ),
        (
            "testMcpTool",
            json!({"server": "nope", "tool": "anything", "args": {}}),
            true,
        ),
        ("checkGraph", json!({}), false),
        ("drawGraph", json!({"toolName": "hello"}), false),
        ("drawGraph", json!({"toolName": "nope"}), true),
        ("buildGraph", json!({"output": "graph.yaml"}), true),
        // `calls` calls `down`, which cannot be read: the others are locked, and the
        // failure says so beside what was found.
        ("lockGraph", json!({}), true),
        ("deleteGraphTool", json!({"toolName": "calls"}), false),
        ("deleteGraphTool", json!({"toolName": "nope"}), true),
        ("lockGraph", json!({}), false),
    ];
    let mut answers = Vec::new();
    for (tool, arguments, fails) in calls {
        let result = call(&toolkit, tool, arguments, &context).await;
        assert_eq!(result.is_error == Some(true), fails, "{tool}: {result:?}");
        answers.push((tool, client.result(tool, &result)));
    }
    let answer = |tool: &str, n: usize| nth_answer(&answers, tool, n);
    // What the failures carry beside `error` is what the schemas must allow.
    let refused = answer("addGraphTool", 0);
    assert!(
        refused["diagnostics"]
            .as_array()
            .is_some_and(|d| !d.is_empty()),
        "{refused}"
    );
    assert!(refused["toolText"].is_string(), "{refused}");
    let run_failed = answer("runGraphTool", 2);
    assert_eq!(run_failed["error"]["nodeId"], json!("call"), "{run_failed}");
    assert!(run_failed["executionHistory"].is_array(), "{run_failed}");
    let not_strings = answer("runGraphTool", 5);
    assert_eq!(
        not_strings["error"]["kind"],
        json!("arguments"),
        "{not_strings}"
    );
    let unlocked = answer("lockGraph", 0);
    assert_eq!(
        unlocked["servers"]["down"]["status"],
        json!("unreadable"),
        "{unlocked}"
    );

    // A graph that does not check: the tools that need its graph answer with diagnostics.
    std::fs::write(
        scratch.graph(),
        GRAPH.replace("next: exit\n", "next: exitt\n"),
    )
    .unwrap();
    for (tool, arguments) in [
        ("drawGraph", json!({})),
        (
            "runGraphTool",
            json!({"toolName": "hello", "arguments": {}}),
        ),
        ("buildGraph", json!({"output": "server"})),
    ] {
        let result = call(&toolkit, tool, arguments, &context).await;
        assert_eq!(result.is_error, Some(true), "{tool}: {result:?}");
        let structured = client.result(tool, &result);
        assert!(structured["diagnostics"].is_array(), "{tool}: {structured}");
    }

    // A graph that cannot be read (a directory where the file should be; a missing file is an
    // empty graph, docs/toolkit.md): every tool but the trials fails, each with the reason.
    std::fs::remove_file(scratch.graph()).unwrap();
    std::fs::create_dir(scratch.graph()).unwrap();
    for &tool in ToolName::ALL {
        let name = tool.as_str();
        let result = call(&toolkit, name, usual_arguments(tool), &context).await;
        let reads_the_graph = !matches!(tool, ToolName::TestJsonata | ToolName::TestJsonLogic);
        assert_eq!(
            result.is_error == Some(true),
            reads_the_graph,
            "{name}: {result:?}"
        );
        client.result(name, &result);
    }

    // What needs a live server or a cargo build, made by the server's own functions.
    let mock = LockedServer {
        server_info: json!({"name": "mock", "version": "0.0.1"}),
        protocol_version: Some("2025-06-18".into()),
        tools: BTreeMap::from([(
            "echo".to_string(),
            LockedTool {
                title: None,
                description: Some("echo".into()),
                input_schema: json!({"type": "object"}),
                output_schema: Some(json!({"type": "object"})),
                annotations: None,
            },
        )]),
    };
    let found = || vec![("mock".to_string(), Ok(mock.clone()))];
    client.fits("listMcpServers", &servers_result(found()), false);
    client.fits("listMcpServerTools", &server_tools_result(found()), false);
    let echo = server_tool_result("mock", "echo", found()).unwrap();
    client.fits("getMcpServerTool", &echo, false);
    let called = trial_result(
        Ok(Some(json!({"received": {"v": 3}}))),
        12.0,
        Some(json!({"v": 3})),
    );
    client.fits("testMcpTool", &called, false);
    let config = json!({"mcpServers": {"schemas": {"command": "/bin/schemas"}}});
    let built = built_result(Path::new("/bin/schemas"), 9_123_456, config);
    client.fits("buildGraph", &built, false);

    for &tool in ToolName::ALL {
        for is_error in [false, true] {
            assert!(
                client.seen.contains(&(tool.as_str().to_string(), is_error)),
                "{}: no {} was checked",
                tool.as_str(),
                if is_error { "failure" } else { "success" }
            );
        }
    }
    toolkit.shutdown().await;
}
