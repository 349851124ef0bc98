//! Expression semantics through the engine: history-function edge cases, and JSON Logic `var`
//! being lazy, item-relative inside iterators, and data (never re-read as a rule).

use mcpgraph_compiler::{SourceFile, compile};
use mcpgraph_runtime::{CallError, Engine};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The checked graph of a YAML text; a graph that does not check fails the test.
fn checked(text: String) -> mcpgraph_compiler::Graph {
    let checked = compile(&SourceFile::new("t.yaml", text), None);
    checked
        .graph
        .unwrap_or_else(|| panic!("graph does not check: {:?}", checked.diagnostics))
}

/// Runs `tool` of a graph whose tools are given as YAML, with `args`.
fn run(tools_yaml: &str, tool: &str, args: Value) -> Result<Value, CallError> {
    let text =
        format!("version: \"1.0\"\nserver: {{ name: t, version: \"1\" }}\ntools:\n{tools_yaml}");
    let graph = checked(text);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let engine = Engine::load(graph).unwrap();
        let Value::Object(args) = args else {
            panic!("args must be an object")
        };
        engine
            .call(tool, args, CancellationToken::new(), None)
            .await
    })
}

/// A tool: entry → `inc` three times (looping through switch `chk`) → `probe` (the expression
/// under test) → exit. History before `probe`: entry, inc, chk, inc, chk, inc, chk.
fn probe(expr: &str) -> Value {
    let tools = format!(
        r#"  - name: p
    description: d
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: inc }}
      - {{ id: inc, type: transform, transform: {{ expr: '{{"i": $executionCount("inc") + 1}}' }}, next: chk }}
      - id: chk
        type: switch
        conditions:
          - {{ rule: {{ "<": [{{ var: "inc.i" }}, 3] }}, target: inc }}
          - target: probe
      - {{ id: probe, type: transform, transform: {{ expr: '{{"v": {expr}}}' }}, next: exit }}
      - {{ id: exit, type: exit }}
"#
    );
    let out = run(&tools, "p", json!({"arg": 1})).unwrap_or_else(|e| panic!("{expr}: {e}"));
    out.get("v")
        .cloned()
        .unwrap_or(Value::String("<undefined>".into()))
}

#[test]
fn previous_node() {
    // The switch's output is the id it routed to.
    assert_eq!(probe("$previousNode()"), json!("probe"));
    assert_eq!(probe("$previousNode(1)"), json!("probe"));
    assert_eq!(probe("$previousNode(2)"), json!({"i": 3}));
    assert_eq!(probe("$previousNode(7)"), json!({"arg": 1}));
    assert_eq!(probe("$previousNode(0)"), Value::Null);
    assert_eq!(probe("$previousNode(-1)"), Value::Null);
    assert_eq!(probe("$previousNode(8)"), Value::Null);
    assert_eq!(probe("$previousNode(100)"), Value::Null);
}

#[test]
fn execution_counts_and_executions() {
    assert_eq!(probe(r#"$executionCount("inc")"#), json!(3));
    assert_eq!(probe(r#"$executionCount("probe")"#), json!(0));
    assert_eq!(probe(r#"$executionCount("nope")"#), json!(0));
    assert_eq!(probe(r#"$nodeExecution("inc", 0)"#), json!({"i": 1}));
    assert_eq!(probe(r#"$nodeExecution("inc", -1)"#), json!({"i": 3}));
    assert_eq!(probe(r#"$nodeExecution("inc", -2)"#), json!({"i": 2}));
    assert_eq!(probe(r#"$nodeExecution("inc", 3)"#), Value::Null);
    assert_eq!(probe(r#"$nodeExecution("inc", -4)"#), Value::Null);
    assert_eq!(probe(r#"$nodeExecution("nope", 0)"#), Value::Null);
    assert_eq!(
        probe(r#"$nodeExecutions("inc")"#),
        json!([{"i": 1}, {"i": 2}, {"i": 3}])
    );
    assert_eq!(probe(r#"$nodeExecutions("entry")"#), json!([{"arg": 1}]));
    assert_eq!(probe(r#"$nodeExecutions("nope")"#), json!([]));
    assert_eq!(probe(r#"$nodeExecutions("inc").i"#), json!([1, 2, 3]));
}

#[test]
fn history_functions_are_values() {
    assert_eq!(
        probe("$map([1, 2], $previousNode)"),
        json!(["probe", {"i": 3}])
    );
    assert_eq!(probe("($f := $previousNode; $f(2).i)"), json!(3));
    assert_eq!(
        probe(r#"$map(["inc", "chk"], $executionCount)"#),
        json!([3, 3])
    );
}

#[test]
fn the_context_is_newest_first() {
    assert_eq!(probe("$keys($)"), json!(["chk", "inc", "entry"]));
    assert_eq!(probe("$.entry.arg + entry.arg"), json!(2));
}

#[test]
fn a_non_string_node_name_is_an_error_naming_the_function() {
    let tools = r#"  - name: p
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: t }
      - { id: t, type: transform, transform: { expr: '$executionCount(1)' }, next: exit }
      - { id: exit, type: exit }
"#;
    let error = run(tools, "p", json!({})).unwrap_err().to_string();
    assert!(
        error.contains(
            "Argument 1 of function \"executionCount\" does not match function signature"
        ),
        "{error}"
    );
    assert!(
        error.contains("node \"t\" (transform, expression)"),
        "{error}"
    );
}

/// A switch with one rule; the tool answers which way it went.
fn route(rule: &str, args: Value) -> Result<String, CallError> {
    let tools = format!(
        r#"  - name: r
    description: d
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: sw }}
      - id: sw
        type: switch
        conditions:
          - {{ rule: {rule}, next: yes }}
        next: no
      - {{ id: yes, type: transform, transform: {{ expr: '{{"r": "yes"}}' }}, next: exit }}
      - {{ id: no, type: transform, transform: {{ expr: '{{"r": "no"}}' }}, next: exit }}
      - {{ id: exit, type: exit }}
"#
    );
    run(&tools, "r", args).map(|v| v["r"].as_str().unwrap_or_default().to_string())
}

#[test]
fn vars_are_lazy() {
    let rule = r#"{ or: [true, { var: "$error('never evaluated')" }] }"#;
    assert_eq!(route(rule, json!({})).unwrap(), "yes");
    let rule = r#"{ and: [false, { var: "$error('never evaluated')" }] }"#;
    assert_eq!(route(rule, json!({})).unwrap(), "no");
    let rule = r#"{ if: [true, 1, { var: "$error('never evaluated')" }] }"#;
    assert_eq!(route(rule, json!({})).unwrap(), "yes");
    // ... and evaluated when reached.
    let rule = r#"{ or: [false, { var: "$error('evaluated')" }] }"#;
    let error = route(rule, json!({})).unwrap_err().to_string();
    assert!(
        error.contains("JSON Logic evaluation failed") && error.contains("evaluated"),
        "{error}"
    );
}

#[test]
fn vars_are_item_relative_inside_iterators() {
    let rule = r#"{ some: [{ var: "entry.items" }, { ">": [{ var: "" }, 10] }] }"#;
    assert_eq!(route(rule, json!({"items": [1, 20]})).unwrap(), "yes");
    assert_eq!(route(rule, json!({"items": [1, 2]})).unwrap(), "no");
    let rule = r#"{ all: [{ var: "entry.people" }, { ">=": [{ var: "age" }, 18] }] }"#;
    assert_eq!(
        route(rule, json!({"people": [{"age": 20}, {"age": 30}]})).unwrap(),
        "yes"
    );
    assert_eq!(
        route(rule, json!({"people": [{"age": 20}, {"age": 3}]})).unwrap(),
        "no"
    );
    let rule = r#"{ "==": [{ reduce: [{ var: "entry.xs" }, { "+": [{ var: "current" }, { var: "accumulator" }] }, 0] }, 6] }"#;
    assert_eq!(route(rule, json!({"xs": [1, 2, 3]})).unwrap(), "yes");
}

#[test]
fn var_values_are_data() {
    // The original would run {"a": 1} as an operator "a" and fail.
    let rule = r#"{ "!!": { var: "$.entry.obj" } }"#;
    assert_eq!(route(rule, json!({"obj": {"a": 1}})).unwrap(), "yes");
    let rule = r#"{ "==": [{ var: "$count(entry.list)" }, 2] }"#;
    assert_eq!(
        route(rule, json!({"list": [{"if": [true, 1, 2]}, {"var": "x"}]})).unwrap(),
        "yes"
    );
    // JavaScript Boolean() of the final value: {} and [] are true, 0 and "" are false.
    assert_eq!(
        route(
            r#"{ var: "entry.empty_object" }"#,
            json!({"empty_object": {}})
        )
        .unwrap(),
        "yes"
    );
    assert_eq!(
        route(r#"{ var: "entry.zero" }"#, json!({"zero": 0})).unwrap(),
        "no"
    );
}

/// A finished call leaves no task behind (each call used to leave its token-combining task).
#[test]
fn calls_leave_no_tasks_behind() {
    let text = "version: \"1.0\"\nserver: { name: t, version: \"1\" }\ntools:\n  - name: p\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: exit }\n      - { id: exit, type: exit }\n";
    let graph = checked(text.to_string());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let alive = rt.block_on(async {
        let engine = Engine::load(graph).unwrap();
        for _ in 0..200 {
            engine
                .call("p", serde_json::Map::new(), CancellationToken::new(), None)
                .await
                .unwrap();
        }
        // Let the watchers observe their cancellation.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    });
    assert!(alive < 10, "{alive} tasks still alive after 200 calls");
}

/// A transform that would evaluate for minutes. `worker`: the tool also has an (unreached) mcp
/// node, so it runs on a worker thread instead of inline.
fn runaway_graph(worker: bool, limit_ms: u64) -> mcpgraph_compiler::Graph {
    let servers = if worker {
        "mcpServers:\n  never: { command: \"/nonexistent/never-started\" }\n"
    } else {
        ""
    };
    let extra = if worker {
        "      - { id: unreached, type: mcp, server: never, tool: t, args: {}, next: exit }\n"
    } else {
        ""
    };
    let switch_target = if worker { "unreached" } else { "exit" };
    let text = format!(
        r#"version: "1.0"
server: {{ name: t, version: "1" }}
executionLimits: {{ maxExecutionTimeMs: {limit_ms} }}
{servers}tools:
  - name: spin
    description: d
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: work }}
      - id: work
        type: transform
        transform:
          expr: '$sum($map([1..2000], function($a) {{ $sum($map([1..2000], function($b) {{ $sum($map([1..2000], function($c) {{ $a + $b + $c }})) }})) }}))'
        next: route
      - id: route
        type: switch
        conditions:
          - {{ rule: {{ "==": [1, 2] }}, target: {switch_target} }}
          - target: exit
{extra}      - {{ id: exit, type: exit }}
"#
    );
    checked(text)
}

/// Runs the runaway tool; `cancel_after` cancels the call from outside after that long.
fn run_runaway(
    worker: bool,
    limit_ms: u64,
    cancel_after: Option<u64>,
) -> (Result<Value, CallError>, u128) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let engine = Engine::load(runaway_graph(worker, limit_ms)).unwrap();
        let cancel = CancellationToken::new();
        if let Some(ms) = cancel_after {
            let cancel = cancel.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(ms));
                cancel.cancel();
            });
        }
        let started = std::time::Instant::now();
        let result = engine
            .call("spin", serde_json::Map::new(), cancel, None)
            .await;
        (result, started.elapsed().as_millis())
    })
}

/// The time limit stops a JSONata evaluation in flight, on the caller's thread and on a worker.
#[test]
fn the_time_limit_stops_an_evaluation_in_flight() {
    for worker in [false, true] {
        let (result, ms) = run_runaway(worker, 300, None);
        let message = result.expect_err("the run is stopped").to_string();
        assert!(
            message.contains("maximum execution time (300ms) reached"),
            "worker={worker}: {message}"
        );
        assert!(ms < 3000, "worker={worker}: stopped only after {ms} ms");
    }
}

/// Cancelling the call stops a JSONata evaluation in flight, on the caller's thread and on a
/// worker.
#[test]
fn cancellation_stops_an_evaluation_in_flight() {
    for worker in [false, true] {
        // A time limit far away: only the cancellation can stop the evaluation soon.
        let (result, ms) = run_runaway(worker, 8000, Some(100));
        assert!(
            matches!(result, Err(CallError::Cancelled))
                || result
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("cancelled")),
            "worker={worker}: {result:?}"
        );
        assert!(ms < 4000, "worker={worker}: stopped only after {ms} ms");
    }
}

/// Failures carry their kind to the edge: a switch without a match is `route`, a failed
/// expression `expression`, the node limit `limit`, a server that cannot start `connection`;
/// the text is the original's.
#[test]
fn failures_carry_their_kind() {
    use mcpgraph_runtime::FailureKind;
    let kind = |result: Result<Value, CallError>| result.expect_err("the call fails").kind();
    let no_default = r#"  - name: s
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: sw }
      - id: sw
        type: switch
        conditions:
          - { rule: { "==": [1, 2] }, target: exit }
      - { id: exit, type: exit }
"#;
    let result = run(no_default, "s", json!({}));
    assert_eq!(kind(result.clone()), FailureKind::Route);
    assert_eq!(
        result.unwrap_err().to_string(),
        "tool \"s\", node \"sw\" (switch, route): Switch node sw: No conditions matched and no default case provided"
    );
    let failing = r#"  - name: t
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: t }
      - { id: t, type: transform, transform: { expr: '$error("boom")' }, next: exit }
      - { id: exit, type: exit }
"#;
    assert_eq!(kind(run(failing, "t", json!({}))), FailureKind::Expression);
    let looping = r#"  - name: l
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: sw }
      - id: sw
        type: switch
        conditions:
          - { rule: { "==": [1, 1] }, target: sw }
          - target: exit
      - { id: exit, type: exit }
"#;
    assert_eq!(kind(run(looping, "l", json!({}))), FailureKind::Limit);
    let graph = checked(
        "version: \"1.0\"\nserver: { name: t, version: \"1\" }\nmcpServers:\n  never: { command: \"/nonexistent/never-started\" }\ntools:\n  - name: m\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: call }\n      - { id: call, type: mcp, server: never, tool: t, args: {}, next: exit }\n      - { id: exit, type: exit }\n"
            .to_string(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = rt.block_on(async {
        Engine::load(graph)
            .unwrap()
            .call("m", serde_json::Map::new(), CancellationToken::new(), None)
            .await
    });
    assert_eq!(kind(result), FailureKind::Connection);
    // A server that starts but never answers `initialize` within its timeout: `timeout`
    // (extensions §9), not `connection`.
    let graph = checked(
        "version: \"1.0\"\nserver: { name: t, version: \"1\" }\nmcpServers:\n  mute: { command: \"sleep\", args: [\"30\"], timeoutMs: 200 }\ntools:\n  - name: m\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: call }\n      - { id: call, type: mcp, server: mute, tool: t, args: {}, next: exit }\n      - { id: exit, type: exit }\n"
            .to_string(),
    );
    let result = rt.block_on(async {
        let engine = Engine::load(graph).unwrap();
        let result = engine
            .call("m", serde_json::Map::new(), CancellationToken::new(), None)
            .await;
        engine.shutdown().await;
        result
    });
    let error = result.expect_err("the call fails");
    assert_eq!(error.kind(), FailureKind::Timeout, "{error}");
    assert!(
        error
            .to_string()
            .contains("no answer to initialize within 200 ms"),
        "{error}"
    );
}

/// `Engine::load` needs no tokio runtime; a call inside any multi-threaded one works.
#[test]
fn an_engine_loads_outside_a_runtime() {
    let text = "version: \"1.0\"\nserver: { name: t, version: \"1\" }\ntools:\n  - name: p\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: exit }\n      - { id: exit, type: exit }\n";
    let engine = Engine::load(checked(text.to_string())).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let result =
        rt.block_on(engine.call("p", serde_json::Map::new(), CancellationToken::new(), None));
    assert_eq!(result.unwrap(), json!({}));
}
