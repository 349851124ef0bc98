//! The extensions' front end (docs/extensions-checks.md): lowering and defaults, `$item`
//! scoping, cycles of `self` calls, near misses of extension keys, and the retry schedule.

use mcpgraph_compiler::ir::{FailureKind, NodeKind, OnItemError, Retry, Target, Template};
use mcpgraph_compiler::{Code, Graph, SourceFile, compile};

const HEAD: &str = r#"version: "1.0"
server: { name: "d", version: "1.0.0" }
mcpServers:
  web: { command: web-server }
tools:
"#;

/// One tool `t` with these nodes (YAML flow or block lines, indented six spaces).
fn tool(nodes: &str) -> String {
    format!(
        "{HEAD}  - name: t\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n{nodes}"
    )
}

/// The diagnostics of a file: (code, the text their primary span covers).
fn diagnostics(text: &str) -> Vec<(Code, String)> {
    let file = SourceFile::new("x.yaml", text);
    compile(&file, None)
        .diagnostics
        .iter()
        .map(|d| {
            let span = d.span().unwrap_or_default();
            (d.code, text[span.start..span.end].to_string())
        })
        .collect()
}

fn graph(text: &str) -> Graph {
    let file = SourceFile::new("x.yaml", text);
    let checked = compile(&file, None);
    match checked.graph {
        Some(g) => g,
        None => panic!("errors: {:?}", diagnostics(text)),
    }
}

#[test]
fn defaults_are_lowered() {
    let g = graph(&tool(
        r#"      - { id: entry, type: entry, next: one }
      - { id: one, type: mcp, server: web, tool: fetch, retry: {}, onError: all, next: all }
      - { id: all, type: map, items: "$.entry.xs", server: web, tool: fetch, args: { u: "$item", i: { expr: "$index" } }, next: both }
      - id: both
        type: parallel
        branches:
          b: { server: web, tool: f }
          a: { server: web, tool: g, timeoutMs: 5 }
        onError: { next: exit, kinds: [timeout] }
        next: ask
      - { id: ask, type: ask, message: '"ok?"', schema: { type: object, properties: { ok: { type: boolean } } }, next: exit }
      - { id: exit, type: exit }
"#,
    ));
    let nodes = &g.tools[0].nodes;
    let NodeKind::Mcp(call) = &nodes[1].kind else {
        panic!("{:?}", nodes[1].kind)
    };
    assert_eq!(
        call.target,
        Target::Server(mcpgraph_compiler::ir::ServerId(0))
    );
    assert_eq!(call.timeout_ms, None);
    assert_eq!(
        call.retry,
        Some(Retry {
            max_attempts: 1,
            delay_ms: 100,
            backoff_rate: 2.0,
            max_delay_ms: 10_000,
            kinds: Retry::DEFAULT_KINDS.to_vec(),
        })
    );
    let route = nodes[1].on_error.as_ref().expect("short form");
    assert_eq!(route.next.index(), 2);
    assert_eq!(route.kinds, None);
    let NodeKind::Map {
        call,
        concurrency,
        on_item_error,
        ..
    } = &nodes[2].kind
    else {
        panic!("{:?}", nodes[2].kind)
    };
    assert_eq!((*concurrency, *on_item_error), (1, OnItemError::Fail));
    assert_eq!(call.retry, None);
    let Template::Object(args) = &call.args else {
        panic!("{:?}", call.args)
    };
    assert!(matches!(
        args[..],
        [(_, Template::Expr(_)), (_, Template::Expr(_))]
    ));
    let NodeKind::Parallel { branches, .. } = &nodes[3].kind else {
        panic!("{:?}", nodes[3].kind)
    };
    // Written order, not sorted.
    let names: Vec<&str> = branches.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["b", "a"]);
    assert_eq!(branches[1].call.timeout_ms, Some(5));
    assert_eq!(
        nodes[3].on_error.as_ref().and_then(|e| e.kinds.clone()),
        Some(vec![FailureKind::Timeout])
    );
    let NodeKind::Ask {
        timeout_ms, schema, ..
    } = &nodes[4].kind
    else {
        panic!("{:?}", nodes[4].kind)
    };
    assert_eq!(*timeout_ms, None);
    assert_eq!(schema["properties"]["ok"]["type"], "boolean");
}

#[test]
fn self_calls_name_the_tool_index() {
    let text = format!(
        "{HEAD}  - name: double\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: exit }}\n      - {{ id: exit, type: exit }}\n  - name: t\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: c }}\n      - {{ id: c, type: mcp, server: self, tool: double, timeoutMs: 50, retry: {{ maxAttempts: 3, delayMs: 10, backoffRate: 1.5, maxDelayMs: 20, kinds: [tool] }}, next: exit }}\n      - {{ id: exit, type: exit }}\n"
    );
    let g = graph(&text);
    let NodeKind::Mcp(call) = &g.tools[1].nodes[1].kind else {
        panic!()
    };
    assert_eq!(call.target, Target::SelfTool(0));
    assert_eq!(call.timeout_ms, Some(50));
    let retry = call.retry.as_ref().expect("retry");
    assert_eq!(
        (
            retry.max_attempts,
            retry.delay_ms,
            retry.backoff_rate,
            retry.max_delay_ms
        ),
        (3, 10, 1.5, 20)
    );
    assert_eq!(retry.kinds, [FailureKind::Tool]);
}

#[test]
fn retry_schedule_is_exact_and_capped() {
    let retry = Retry {
        max_attempts: 5,
        delay_ms: 100,
        backoff_rate: 2.0,
        max_delay_ms: 300,
        kinds: Retry::DEFAULT_KINDS.to_vec(),
    };
    let waits: Vec<u64> = (2..=5).map(|a| retry.delay_before(a)).collect();
    assert_eq!(waits, [100, 200, 300, 300]);
    let uncapped = Retry {
        max_delay_ms: 10_000,
        ..retry
    };
    let waits: Vec<u64> = (2..=4).map(|a| uncapped.delay_before(a)).collect();
    assert_eq!(waits, [100, 200, 400]);
}

#[test]
fn item_and_index_are_bound_in_map_args_only() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: m }
      - { id: m, type: map, items: '$map($.entry.xs, function($item){ $item * 2 })', server: web, tool: f, args: { a: "$item", b: "$index" }, next: t }
      - { id: t, type: transform, transform: { expr: '($item := 1; $item) & $index' }, next: c }
      - { id: c, type: mcp, server: web, tool: f, args: { deep: { x: { expr: "$item.url" } } }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let found: Vec<(Code, String)> = diagnostics(&text)
        .into_iter()
        .filter(|(c, _)| *c == Code::E0608)
        .collect();
    assert_eq!(
        found,
        [
            (Code::E0608, "$index".to_string()),
            (Code::E0608, "$item".to_string()),
        ]
    );
    // The exact place: the `$index` of the transform, not of the map's args.
    let transform_line = text.find("id: t,").expect("line");
    let file = SourceFile::new("x.yaml", text.as_str());
    let spans: Vec<usize> = compile(&file, None)
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::E0608)
        .filter_map(|d| d.span().map(|s| s.start))
        .collect();
    assert!(spans[0] > transform_line && &text[spans[0]..spans[0] + 6] == "$index");
}

#[test]
fn item_in_parallel_branches_switch_vars_and_ask_messages() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: p }
      - { id: p, type: parallel, branches: { a: { server: web, tool: f, args: { x: "$item" } } }, next: s }
      - { id: s, type: switch, conditions: [ { rule: { "==": [ { var: "$index" }, 1 ] }, next: q } ], next: q }
      - { id: q, type: ask, message: '"n " & $string($index)', schema: { type: object }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let codes: Vec<String> = diagnostics(&text)
        .into_iter()
        .filter(|(c, _)| *c == Code::E0608)
        .map(|(_, s)| s)
        .collect();
    assert_eq!(codes, ["$item", "$index", "$index"]);
}

#[test]
fn cycles_of_self_calls_are_printed() {
    let text = format!(
        "{HEAD}  - name: a\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: c }}\n      - {{ id: c, type: map, items: '[1]', server: self, tool: a, next: exit }}\n      - {{ id: exit, type: exit }}\n  - name: b\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: p }}\n      - {{ id: p, type: parallel, branches: {{ x: {{ server: self, tool: c }} }}, next: exit }}\n      - {{ id: exit, type: exit }}\n  - name: c\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: k }}\n      - {{ id: k, type: mcp, server: self, tool: b, next: exit }}\n      - {{ id: exit, type: exit }}\n"
    );
    let file = SourceFile::new("x.yaml", text.as_str());
    let messages: Vec<String> = compile(&file, None)
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::E0611)
        .map(|d| d.message.clone())
        .collect();
    assert_eq!(
        messages,
        [
            "`server: self` calls form a cycle: a → a",
            "`server: self` calls form a cycle: b → c → b",
        ]
    );
}

#[test]
fn near_misses_of_extension_keys_are_errors() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: c }
      - { id: c, type: mcp, server: web, tool: f, timeoutMS: 5, retyr: {}, colour: red, next: m }
      - { id: m, type: map, items: '[1]', server: web, tool: f, concurency: 2, retry: { maxAtempts: 2 }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let found: Vec<(Code, String)> = diagnostics(&text)
        .into_iter()
        .filter(|(c, _)| matches!(c, Code::E0613 | Code::W0101))
        .collect();
    assert_eq!(
        found,
        [
            (Code::E0613, "timeoutMS".into()),
            (Code::E0613, "retyr".into()),
            (Code::W0101, "colour".into()),
            (Code::E0613, "concurency".into()),
            (Code::E0613, "maxAtempts".into()),
        ]
    );
    // Elsewhere (a server's configuration) the usual warning stays.
    let server = text.replace(
        "web: { command: web-server }",
        "web: { command: w, timeoutMS: 5 }",
    );
    assert!(
        diagnostics(&server).contains(&(Code::W0101, "timeoutMS".into())),
        "{:?}",
        diagnostics(&server)
    );
}

#[test]
fn ranges_kinds_and_routes() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: c }
      - { id: c, type: mcp, server: web, tool: f, timeoutMs: 0, retry: { maxAttempts: 11, delayMs: 500, maxDelayMs: 100, backoffRate: 0.5, kinds: [tool, tool, tiemout] }, onError: c, next: m }
      - { id: m, type: map, items: '[1]', server: web, tool: f, concurrency: 65, onItemError: skp, onError: { next: entry, kinds: [tool] }, next: a }
      - { id: a, type: ask, message: '"?"', schema: { type: object, properties: { n: { type: array } } }, onError: { kinds: [] }, next: t }
      - { id: t, type: transform, transform: { expr: "1" }, retry: {}, onError: { next: exit, kinds: [route, expression] }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let found = diagnostics(&text);
    let expect = [
        (Code::E0601, "0"),
        (Code::E0601, "11"),
        (Code::E0601, "500"),
        (Code::E0601, "0.5"),
        (Code::E0602, "tool"),
        (Code::E0602, "tiemout"),
        (Code::E0605, "c"),
        (Code::E0601, "65"),
        (Code::E0601, "skp"),
        (Code::E0605, "entry"),
        (Code::E0609, "array"),
        // A missing key is reported at the mapping's first key; an empty flow sequence's span
        // is its `[`.
        (Code::E0102, "kinds"),
        (Code::E0604, "["),
        (Code::E0603, "retry"),
        (Code::E0604, "route"),
    ];
    for (code, at) in expect {
        assert!(
            found.iter().any(|(c, s)| *c == code && s == at),
            "{code} at `{at}` not in {found:?}"
        );
    }
    // `onItemError: skip` (here defaulted back to fail after the typo) is not what decides;
    // `keep` makes a map fail only with `expression`: its type can fail with `tool`, so naming
    // it is a route never taken (W0601), not an error.
    let keep = tool(
        r#"      - { id: entry, type: entry, next: m }
      - { id: m, type: map, items: '[1]', server: web, tool: f, onItemError: keep, onError: { next: exit, kinds: [expression, tool] }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let found = diagnostics(&keep);
    assert_eq!(found, [(Code::W0601, "tool".to_string())], "{found:?}");
}

/// `onError.kinds` may name any kind the node's type can fail with (extensions §9): one this
/// node cannot fail with as written is a dead route, a warning (W0601), and the graph compiles;
/// a kind no node of its type fails with stays an error (E0604).
#[test]
fn kinds_ruled_out_by_the_configuration_are_warnings() {
    let ask = r#"      - { id: entry, type: entry, next: a }
      - { id: a, type: ask, message: '"ok?"', schema: { type: object, properties: { ok: { type: boolean } } }, TIMEOUT onError: { next: exit, kinds: [declined, timeout] }, next: exit }
      - { id: exit, type: exit }
"#;
    // Without `timeoutMs` the question lasts until the run's deadline, a limit: never `timeout`.
    let without = tool(&ask.replace("TIMEOUT", ""));
    assert_eq!(
        diagnostics(&without),
        [(Code::W0601, "timeout".to_string())]
    );
    let checked = compile(&SourceFile::new("x.yaml", without.as_str()), None);
    assert_eq!(checked.error_count(), 0, "{:?}", checked.diagnostics);
    assert!(checked.diagnostics.iter().all(|d| !d.is_error()));
    // The dead kind stays in the route: it simply never matches.
    let g = graph(&without);
    let node = &g.tools[0].nodes[1];
    assert_eq!(
        node.on_error.as_ref().and_then(|e| e.kinds.clone()),
        Some(vec![FailureKind::Declined, FailureKind::Timeout])
    );

    let with = tool(&ask.replace("TIMEOUT", "timeoutMs: 500,"));
    assert_eq!(diagnostics(&with), []);
    let g = graph(&with);
    let node = &g.tools[0].nodes[1];
    assert_eq!(
        node.on_error.as_ref().and_then(|e| e.kinds.clone()),
        Some(vec![FailureKind::Declined, FailureKind::Timeout])
    );

    // Only ask nodes fail with `declined`: no mcp node ever can.
    let mcp = tool(
        r#"      - { id: entry, type: entry, next: c }
      - { id: c, type: mcp, server: web, tool: f, onError: { next: exit, kinds: [tool, declined] }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    assert_eq!(diagnostics(&mcp), [(Code::E0604, "declined".to_string())]);
    let checked = compile(&SourceFile::new("x.yaml", mcp.as_str()), None);
    assert!(checked.graph.is_none());
    assert!(checked.diagnostics.iter().all(|d| d.is_error()));

    // A `server: self` call runs in process (no `protocol`, `connection`) and has no timeout
    // without `timeoutMs`; a parallel whose failed branches are skipped cannot fail at all.
    // `schema` without a self call and `route` anywhere stay errors.
    let text = format!(
        "{HEAD}  - name: double\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: exit }}\n      - {{ id: exit, type: exit }}\n  - name: t\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n{}",
        r#"      - { id: entry, type: entry, next: c }
      - { id: c, type: mcp, server: self, tool: double, onError: { next: p, kinds: [schema, protocol, timeout] }, next: p }
      - { id: p, type: parallel, branches: { b: { server: web, tool: f } }, onItemError: skip, onError: { next: d, kinds: [tool] }, next: d }
      - { id: d, type: mcp, server: web, tool: f, onError: { next: exit, kinds: [schema, route] }, next: exit }
      - { id: exit, type: exit }
"#
    );
    assert_eq!(
        diagnostics(&text),
        [
            (Code::W0601, "protocol".to_string()),
            (Code::W0601, "timeout".to_string()),
            (Code::W0601, "tool".to_string()),
            (Code::E0604, "schema".to_string()),
            (Code::E0604, "route".to_string()),
        ]
    );
}

#[test]
fn a_server_named_self_in_an_mcp_file_keeps_its_code() {
    let graph = SourceFile::new(
        "x.yaml",
        tool("      - { id: entry, type: entry, next: exit }\n      - { id: exit, type: exit }\n"),
    );
    let mcp = SourceFile::new("m.json", r#"{"mcpServers": {"self": {"command": "x"}}}"#);
    let checked = compile(&graph, Some(&mcp));
    assert!(
        checked.diagnostics.iter().any(|d| d.code == Code::E0612),
        "{:?}",
        checked.diagnostics
    );
}

#[test]
fn error_routes_count_for_reachability() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: c }
      - { id: c, type: mcp, server: web, tool: f, onError: h, next: exit }
      - { id: h, type: transform, transform: { expr: "$.c.error.kind" }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    assert_eq!(diagnostics(&text), []);
}

#[test]
fn free_variables_respect_the_expression_own_bindings() {
    use mcpgraph_compiler::expr::free_variables;
    let free = |s: &str| -> Vec<(String, usize)> { free_variables(s, &["item", "index"]) };
    let at = |s: &str, needle: &str, n: usize| -> usize {
        s.match_indices(needle)
            .nth(n)
            .map(|(i, _)| i)
            .expect("needle")
    };
    assert_eq!(
        free("$map(xs, function($item, $index){ $item + $index })"),
        []
    );
    let e = "$map(xs, function($item){ $item }) & $item";
    assert_eq!(free(e), [("item".to_string(), at(e, "$item", 2))]);
    let e = "($item := $item + 1; $item)";
    assert_eq!(free(e), [("item".to_string(), at(e, "$item", 1))]);
    let e = "xs@$item.name & $item";
    assert_eq!(free(e), [("item".to_string(), at(e, "$item", 1))]);
    assert_eq!(free("xs#$index[$index > 1]"), []);
    assert_eq!(free(r#""$item" & '$index' & `$item` /* $item */"#), []);
    assert_eq!(free("$items & $indexes & $$"), []);
    assert_eq!(
        free("$item("),
        [],
        "an expression that does not parse gives nothing"
    );
}

#[test]
fn new_nodes_need_next_and_a_map_needs_its_call() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: m }
      - { id: m, type: map, items: '[1]' }
      - { id: p, type: parallel, branches: { a: { server: web } } }
      - { id: q, type: ask, message: '"?"', schema: { type: object } }
      - { id: exit, type: exit }
"#,
    );
    let found = diagnostics(&text);
    let count = |code: Code| found.iter().filter(|(c, _)| *c == code).count();
    assert_eq!(count(Code::E0208), 3, "{found:?}");
    // The map's `server` and `tool`, the branch's `tool`.
    assert_eq!(count(Code::E0102), 3, "{found:?}");
}

/// An ask schema says what to ask for (`properties`), and a string's `format` is one the
/// protocol defines: otherwise no client could be asked, and every run would be `unavailable`.
#[test]
fn ask_schemas_the_protocol_cannot_carry_are_errors() {
    let text = tool(
        r#"      - { id: entry, type: entry, next: a }
      - { id: a, type: ask, message: '"?"', schema: { type: object }, next: b }
      - { id: b, type: ask, message: '"?"', schema: { type: object, properties: { h: { type: string, format: hostname }, d: { type: string, format: date } } }, next: exit }
      - { id: exit, type: exit }
"#,
    );
    let found = diagnostics(&text);
    assert!(
        found.iter().any(|(c, s)| *c == Code::E0609 && s == "type"),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(c, s)| *c == Code::E0609 && s == "hostname"),
        "{found:?}"
    );
    assert_eq!(
        found.iter().filter(|(c, _)| *c == Code::E0609).count(),
        2,
        "{found:?}"
    );
}

/// `log:` on any node (docs/semantics.md §22): a string is an info message, a mapping names
/// its level; the message may read the node's own output (it runs after the node) without
/// W0801; a level that is not MCP's is E0601 with a suggestion, a misspelt `log` key E0613.
#[test]
fn log_messages_are_lowered_and_checked() {
    use mcpgraph_compiler::ir::LogLevel;
    let g = graph(&tool(
        r#"      - { id: entry, type: entry, next: calc, log: '"started"' }
      - { id: calc, type: transform, transform: { expr: '{"n": 2}' }, next: exit, log: { level: warning, message: '"n is " & $.calc.n' } }
      - { id: exit, type: exit, log: { message: '$.exit' } }
"#,
    ));
    let logs: Vec<(LogLevel, &str)> = g.tools[0]
        .nodes
        .iter()
        .map(|n| {
            let log = n.log.as_ref().expect("every node logs");
            (log.level, log.message.source.as_str())
        })
        .collect();
    assert_eq!(
        logs,
        [
            (LogLevel::Info, "\"started\""),
            (LogLevel::Warning, "\"n is \" & $.calc.n"),
            (LogLevel::Info, "$.exit"),
        ]
    );
    assert!(
        diagnostics(&tool(
            r#"      - { id: entry, type: entry, next: calc }
      - { id: calc, type: transform, transform: { expr: '{"n": 2}' }, next: exit, log: '$.calc.n' }
      - { id: exit, type: exit }
"#
        ))
        .is_empty(),
        "a node's log reads its own output"
    );
    let found = diagnostics(&tool(
        r#"      - { id: entry, type: entry, next: a, log: { level: warn, message: '"x"' } }
      - { id: a, type: transform, transform: { expr: '1' }, next: b, Log: '"y"' }
      - { id: b, type: transform, transform: { expr: '2' }, next: c, log: '$.later' }
      - { id: c, type: transform, transform: { expr: '3' }, next: later, log: { level: info } }
      - { id: later, type: transform, transform: { expr: '4' }, next: exit }
      - { id: exit, type: exit }
"#,
    ));
    let codes: Vec<(Code, &str)> = found.iter().map(|(c, t)| (*c, t.as_str())).collect();
    assert!(codes.contains(&(Code::E0601, "warn")), "{found:?}");
    assert!(codes.contains(&(Code::E0613, "Log")), "{found:?}");
    assert!(
        codes
            .iter()
            .any(|(c, t)| *c == Code::W0801 && t.contains("later")),
        "another node's output is checked as in every expression: {found:?}"
    );
    assert!(
        codes.iter().any(|(c, _)| *c == Code::E0102),
        "a log mapping without a message: {found:?}"
    );
}
