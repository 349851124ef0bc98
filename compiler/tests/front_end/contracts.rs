//! Calls checked against the lock file (docs/contracts.md): every kind of call is checked,
//! `server: self` calls are not, what the checks do not understand never raises an error, and a
//! JSONata argument counts as present.

use mcpgraph_compiler::{Code, SourceFile, compile_with};
use serde_json::{Value, json};

const HEAD: &str = r#"version: "1.0"
server: { name: "d", version: "1.0.0" }
mcpServers:
  web: { command: web-server }
  other: { command: other-server }
tools:
"#;

/// One tool `t` with these nodes (YAML lines indented six spaces).
fn tool(nodes: &str) -> String {
    format!(
        "{HEAD}  - name: t\n    description: d\n    inputSchema: {{ type: object, properties: {{ u: {{ type: string }} }} }}\n    nodes:\n{nodes}"
    )
}

/// A lock of server `web` with these tools (name → inputSchema).
fn lock(tools: Value) -> String {
    let tools: serde_json::Map<String, Value> = tools
        .as_object()
        .expect("an object of tools")
        .iter()
        .map(|(name, schema)| (name.clone(), json!({ "inputSchema": schema })))
        .collect();
    json!({
        "lockVersion": 1,
        "mcpgraph": "0.1.0",
        "servers": { "web": { "serverInfo": { "name": "web", "version": "1" }, "tools": tools } }
    })
    .to_string()
}

/// The contract diagnostics (E07xx, W07xx) of a graph with a lock: (code, the text their
/// primary span covers).
fn contracts(graph: &str, lock: &str) -> Vec<(Code, String)> {
    let file = SourceFile::new("x.yaml", graph);
    let lock = SourceFile::new("x.lock.json", lock);
    compile_with(&file, None, Some(&lock))
        .diagnostics
        .iter()
        .filter(|d| d.code.as_str().starts_with("E07") || d.code.as_str().starts_with("W07"))
        .map(|d| {
            let span = d.span().unwrap_or_default();
            (d.code, graph[span.start..span.end].to_string())
        })
        .collect()
}

fn fetch_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "url": { "type": "string" }, "max": { "type": "integer" } },
        "required": ["url"],
        "additionalProperties": false
    })
}

#[test]
fn map_items_and_parallel_branches_are_checked() {
    let graph = tool(
        r#"      - { id: entry, type: entry, next: all }
      - { id: all, type: map, items: "[1, 2]", server: web, tool: fetch, args: { url: "$string($item)", max: "x" }, next: both }
      - id: both
        type: parallel
        branches:
          a: { server: web, tool: fetch, args: { max: 3 } }
          b: { server: web, tool: fecth, args: { url: u } }
        next: exit
      - { id: exit, type: exit }
"#,
    );
    let got = contracts(&graph, &lock(json!({ "fetch": fetch_schema() })));
    assert_eq!(
        got,
        [
            (Code::E0705, "\"x\"".to_string()),
            (Code::E0703, "{ max: 3 }".to_string()),
            (Code::E0702, "fecth".to_string()),
        ]
    );
}

#[test]
fn self_calls_are_not_checked() {
    // Even a lock with a server named `self` is not consulted for `server: self`.
    let graph = format!(
        "{}  - name: callee\n    description: d\n    inputSchema: {{ type: object, additionalProperties: false }}\n    nodes:\n      - {{ id: entry, type: entry, next: exit }}\n      - {{ id: exit, type: exit }}\n",
        tool(
            r#"      - { id: entry, type: entry, next: call }
      - { id: call, type: mcp, server: self, tool: callee, args: { anything: 1 }, next: exit }
      - { id: exit, type: exit }
"#,
        )
    );
    let mut lock: Value = serde_json::from_str(&lock(json!({}))).unwrap();
    lock["servers"]["self"] = json!({ "serverInfo": {}, "tools": {} });
    assert_eq!(contracts(&graph, &lock.to_string()), []);
}

#[test]
fn ref_and_composition_never_raise_an_error() {
    let schema = json!({
        "type": "object",
        "properties": {
            "a": { "$ref": "#/$defs/A" },
            "b": { "anyOf": [{ "type": "string" }, { "type": "integer" }] },
            "c": { "oneOf": [{ "type": "object" }] },
            "d": { "allOf": [{ "type": "string" }], "not": { "const": 1 } }
        },
        "anyOf": [{ "properties": { "e": {} } }],
        "additionalProperties": false,
        "$defs": { "A": { "type": "string" } }
    });
    let by_ref =
        json!({ "$ref": "#/$defs/P", "$defs": { "P": { "type": "object" } }, "required": ["x"] });
    let graph = tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: web, tool: composed, args: { a: 1, b: [true], c: 2, d: 3, e: 4 }, next: two }
      - { id: two, type: mcp, server: web, tool: referenced, args: { y: 1 }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let got = contracts(
        &graph,
        &lock(json!({ "composed": schema, "referenced": by_ref })),
    );
    assert_eq!(got, []);
}

#[test]
fn jsonata_arguments_satisfy_required() {
    let graph = tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: web, tool: fetch, args: { url: "$.entry.u", max: { expr: "1 + 1" } }, next: two }
      - { id: two, type: mcp, server: web, tool: fetch, args: { url: { expr: "$.entry.u" } }, next: three }
      - { id: three, type: mcp, server: web, tool: fetch, args: { expr: "{'url': $.entry.u}" }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    assert_eq!(
        contracts(&graph, &lock(json!({ "fetch": fetch_schema() }))),
        []
    );
}

#[test]
fn integer_and_number() {
    let graph = tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: web, tool: fetch, args: { url: u, max: 2 }, next: two }
      - { id: two, type: mcp, server: web, tool: fetch, args: { url: u, max: 2.0 }, next: three }
      - { id: three, type: mcp, server: web, tool: fetch, args: { url: u, max: 2.5 }, next: four }
      - { id: four, type: mcp, server: web, tool: sleep, args: { seconds: 2.5 }, next: five }
      - { id: five, type: mcp, server: web, tool: sleep, args: { seconds: 2 }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let sleep = json!({ "type": "object", "properties": { "seconds": { "type": "number" } } });
    let got = contracts(
        &graph,
        &lock(json!({ "fetch": fetch_schema(), "sleep": sleep })),
    );
    assert_eq!(got, [(Code::E0705, "2.5".to_string())]);
}

#[test]
fn absent_and_null_args_are_empty() {
    let graph = tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: web, tool: fetch, next: two }
      - { id: two, type: mcp, server: web, tool: fetch, args: null, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let got = contracts(&graph, &lock(json!({ "fetch": fetch_schema() })));
    assert_eq!(
        got,
        [
            (Code::E0703, "fetch".to_string()),
            (Code::E0703, "null".to_string()),
        ]
    );
}

#[test]
fn an_unlocked_server_is_reported_once_and_not_checked() {
    let graph = tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: other, tool: nothing, next: two }
      - { id: two, type: mcp, server: other, tool: nothing, next: three }
      - { id: three, type: mcp, server: web, tool: fetch, args: { url: u }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let got = contracts(&graph, &lock(json!({ "fetch": fetch_schema() })));
    assert_eq!(got, [(Code::W0703, "other".to_string())]);
}

#[test]
fn without_a_lock_nothing_is_checked() {
    let graph = tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: web, tool: fetch, args: { max: "x" }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let file = SourceFile::new("x.yaml", graph);
    let checked = compile_with(&file, None, None);
    assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
}

/// `nullable: true` (OpenAPI) admits null; `additionalProperties: true` admits other arguments.
#[test]
fn nullable_and_open_additional_properties() {
    let graph = tool(
        "      - { id: entry, type: entry, next: f }\n      - { id: f, type: mcp, server: web, tool: fetch, args: { a: null, extra: 1 }, next: exit }\n      - { id: exit, type: exit }\n",
    );
    let schema = json!({
        "type": "object",
        "properties": { "a": { "type": "string", "nullable": true } },
        "additionalProperties": true
    });
    assert_eq!(contracts(&graph, &lock(json!({ "fetch": schema }))), []);
    // Without `nullable`, null is still a wrong type.
    let schema = json!({ "type": "object", "properties": { "a": { "type": "string" } } });
    let found = contracts(&graph, &lock(json!({ "fetch": schema })));
    assert!(found.iter().any(|(c, _)| *c == Code::E0705), "{found:?}");
}

/// A lock of a newer format says so, rather than naming the field it does not know.
#[test]
fn a_newer_lock_format_is_named() {
    let graph =
        tool("      - { id: entry, type: entry, next: exit }\n      - { id: exit, type: exit }\n");
    let file = SourceFile::new("x.yaml", graph);
    let lock = SourceFile::new(
        "x.lock.json",
        r#"{"lockVersion": 2, "mcpgraph": "9.0.0", "servers": {}, "resources": {}}"#,
    );
    let checked = compile_with(&file, None, Some(&lock));
    let d = checked
        .diagnostics
        .iter()
        .find(|d| d.code == Code::E0701)
        .expect("E0701");
    assert!(d.message.contains("lock format 2"), "{}", d.message);
}
