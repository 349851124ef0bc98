//! Types along the graph (docs/types.md): what the reference checks report, where, and that the
//! examples and the shared corpora raise no false alarm.

use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::types::{Keys, Type};
use mcpgraph_compiler::{Code, SourceFile, compile, compile_with};
use std::path::{Path, PathBuf};

fn check(text: &str) -> mcpgraph_compiler::Checked {
    compile(&SourceFile::new("t.yaml", text), None)
}

fn codes(checked: &mcpgraph_compiler::Checked) -> Vec<&'static str> {
    checked
        .diagnostics
        .iter()
        .map(|d| d.code.as_str())
        .collect()
}

/// (line, column) of each diagnostic of `code`.
fn positions(text: &str, checked: &mcpgraph_compiler::Checked, code: Code) -> Vec<(usize, usize)> {
    checked
        .diagnostics
        .iter()
        .filter(|d| d.code == code)
        .map(|d| mcpgraph_compiler::diagnostics::line_col(text, d.span().unwrap().start))
        .collect()
}

const GREET: &str = r#"version: "1.0"
server: {name: g, version: "1.0"}
tools:
  - name: greet
    description: greets
    inputSchema:
      type: object
      properties:
        name: {type: string}
      required: [name]
    outputSchema:
      type: object
      properties:
        greeting: {type: string}
    nodes:
      - {id: entry, type: entry, next: hello}
      - id: hello
        type: transform
        transform: {expr: '{ "greeting": "Hello, " & $.entry.nmae }'}
        next: exit
      - {id: exit, type: exit}
"#;

#[test]
fn the_field_typo_of_the_issue_is_a_warning_inside_the_expression() {
    let checked = check(GREET);
    assert_eq!(codes(&checked), ["W0802"]);
    let d = &checked.diagnostics[0];
    assert_eq!(
        d.message,
        "`nmae` is not a property of `entry` (inputSchema of tool `greet`)"
    );
    assert_eq!(d.help.as_deref(), Some("did you mean `name`?"));
    let col = GREET.lines().nth(18).unwrap().find("nmae").unwrap() + 1;
    assert_eq!(positions(GREET, &checked, Code::W0802), [(19, col)]);
    // The graph still builds: a warning.
    assert!(checked.graph.is_some());
    // Fixed, it is clean, and the transform's output type is recorded in the IR.
    let fixed = check(&GREET.replace("nmae", "name"));
    assert!(fixed.diagnostics.is_empty(), "{:?}", codes(&fixed));
    let graph = fixed.graph.unwrap();
    let Type::Object(o) = &graph.tools[0].nodes[1].output_type else {
        panic!("{:?}", graph.tools[0].nodes[1].output_type)
    };
    assert_eq!(o.keys, Keys::Exact);
    assert_eq!(o.properties[0].name, "greeting");
    assert_eq!(o.properties[0].ty, Type::String);
}

#[test]
fn a_closed_schema_makes_it_an_error() {
    let text = GREET.replace(
        "      required: [name]\n    outputSchema",
        "      required: [name]\n      additionalProperties: false\n    outputSchema",
    );
    let checked = check(&text);
    assert_eq!(codes(&checked), ["E0801"]);
    assert!(checked.graph.is_none());
}

#[test]
fn a_node_read_before_it_can_run_is_always_undefined() {
    let text = r#"version: "1.0"
server: {name: g, version: "1.0"}
tools:
  - name: t
    description: d
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: first}
      - {id: first, type: transform, transform: {expr: '$.later.x'}, next: later}
      - {id: later, type: transform, transform: {expr: '{"x": 1}'}, next: exit}
      - {id: exit, type: exit}
"#;
    let checked = check(text);
    assert_eq!(codes(&checked), ["W0801"]);
    let col = text.lines().nth(8).unwrap().find("$.later").unwrap() + 1;
    assert_eq!(positions(text, &checked, Code::W0801), [(9, col)]);
    // In a loop, the node may have run before: no warning.
    let looped = r#"version: "1.0"
server: {name: g, version: "1.0"}
tools:
  - name: t
    description: d
    inputSchema: {type: object}
    nodes:
      - {id: entry, type: entry, next: step}
      - {id: step, type: transform, transform: {expr: '{"n": $exists($.step) ? $.step.n + 1 : 0}'}, next: more}
      - id: more
        type: switch
        conditions:
          - {rule: {"<": [{var: "step.n"}, 3]}, target: step}
          - {target: exit}
      - {id: exit, type: exit}
"#;
    let checked = check(looped);
    assert!(checked.diagnostics.is_empty(), "{:?}", codes(&checked));
    // And a misspelt field read by a switch var is found there too.
    let checked = check(&looped.replace("var: \"step.n\"", "var: \"step.m\""));
    assert_eq!(codes(&checked), ["W0802"]);
}

#[test]
fn the_exit_result_against_the_output_schema() {
    let text = GREET.replace("$.entry.nmae", "$.entry.name").replace(
        "greeting: {type: string}",
        "greeting: {type: string}\n      required: [message]",
    );
    let checked = check(&text);
    assert_eq!(
        codes(&checked),
        ["W0803"],
        "{}",
        render::human_all(
            &checked,
            &SourceFile::new("t.yaml", text.clone()),
            Style::PLAIN
        )
    );
    assert!(checked.diagnostics[0].message.contains("`message`"));
    // A type that can never match.
    let text = GREET.replace(
        r#"'{ "greeting": "Hello, " & $.entry.nmae }'"#,
        r#"'[1, 2]'"#,
    );
    assert_eq!(codes(&check(&text)), ["W0803"]);
    // An unknown result, or a union with a matching member, is fine.
    let text = GREET.replace(
        r#"'{ "greeting": "Hello, " & $.entry.nmae }'"#,
        r#"'$.entry.name = "x" ? [1] : { "greeting": "x" }'"#,
    );
    assert!(check(&text).diagnostics.is_empty());
}

#[test]
fn map_items_and_parallel_branches_are_typed() {
    let text = r#"version: "1.0"
server: {name: g, version: "1.0"}
tools:
  - name: squares
    description: d
    inputSchema:
      type: object
      properties:
        xs: {type: array, items: {type: object, properties: {value: {type: number}}}}
    outputSchema: {type: object, properties: {n: {type: number}}}
    nodes:
      - {id: entry, type: entry, next: each}
      - id: each
        type: map
        items: $.entry.xs
        server: self
        tool: square
        args: {x: "$item.valeu"}
        next: exit
      - {id: exit, type: exit}
  - name: square
    description: d
    inputSchema: {type: object, properties: {x: {type: number}}}
    outputSchema: {type: object, properties: {n: {type: number}}, required: [n]}
    nodes:
      - {id: entry, type: entry, next: sq}
      - {id: sq, type: transform, transform: {expr: '{"n": $.entry.x * $.entry.x}'}, next: exit}
      - {id: exit, type: exit}
"#;
    let checked = check(text);
    // `$item.valeu`: the items are objects with `value`; the map's result is an array, never the object
    // the outputSchema wants.
    assert_eq!(codes(&checked), ["W0803", "W0802"]);
    assert!(
        checked.diagnostics[1]
            .message
            .contains("`valeu` is not a property of")
    );
}

/// The graphs of the examples, our tests and the shared corpora check with no type or contract
/// diagnostic: the checks raise no false alarm.
#[test]
fn no_false_alarms_in_the_examples_and_the_corpora() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = [
        root.join("examples"),
        root.join("tests/graphs"),
        root.join("tests/conformance"),
        root.join("../shared/conformance/graphs"),
    ];
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 20, "{files:?}");
    let mut alarms = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let file = SourceFile::new(path.display().to_string(), text);
        let lock = mcpgraph_compiler::lock::read_beside(path).map(|l| l.unwrap());
        let checked = compile_with(&file, None, lock.as_ref());
        for d in &checked.diagnostics {
            // A case of the runtime's output validation, written to fail it: the warning is right.
            if d.code == Code::W0803 && d.message.contains("tool `bad_output`") {
                continue;
            }
            if d.code.as_str().starts_with("E07")
                || d.code.as_str().starts_with("W07")
                || d.code.as_str().starts_with("E08")
                || d.code.as_str().starts_with("W08")
            {
                alarms.push(render::plain_list(
                    &mcpgraph_compiler::Checked {
                        graph: None,
                        diagnostics: vec![d.clone()],
                    },
                    &file,
                ));
            }
        }
    }
    assert!(alarms.is_empty(), "{}", alarms.join("\n"));
}

fn tool(input_schema: &str, output_schema: &str, expr: &str) -> String {
    format!(
        r#"version: "1.0"
server: {{name: g, version: "1.0"}}
tools:
  - name: t
    description: d
    inputSchema: {input_schema}
{output_schema}    nodes:
      - {{id: entry, type: entry, next: build}}
      - id: build
        type: transform
        transform: {{expr: '{expr}'}}
        next: exit
      - {{id: exit, type: exit}}
"#
    )
}

/// What a reviewer found could raise false alarms: each stays silent.
#[test]
fn no_false_alarm_on_what_jsonata_may_leave_out() {
    let input = "{type: object, properties: {name: {type: string}, debug: {type: string}, label: {type: string}, first_name: {type: string}, n: {type: number}}}";
    let cases = [
        // A key whose value may be undefined is left out: the closed outputSchema may still match.
        (
            "    outputSchema: {type: object, properties: {greeting: {type: string}}, additionalProperties: false}\n",
            r#"{"greeting": "Hi " & $.entry.name, "debug": $.entry.debug}"#,
        ),
        // An optional string where a number is wanted: absent, the key is left out.
        (
            "    outputSchema: {type: object, properties: {count: {type: number}}}\n",
            r#"{"count": $.entry.label}"#,
        ),
        // No else: undefined becomes `{}` at the exit, which matches.
        (
            "    outputSchema: {type: object, properties: {greeting: {type: string}}, additionalProperties: false}\n",
            r#"$.entry.name = "x" ? {"debug": 1}"#,
        ),
        // A binding in one branch of `?:` may not happen.
        (
            "",
            r#"( $r := $.entry; $.entry.n > 1 ? $r := {"big": true} : 0; $r.name )"#,
        ),
        // `last_name` is not a typo of `first_name`: an open schema may have it.
        ("", r#"$.entry.last_name"#),
        // A rebound built-in is not the built-in.
        (
            "    outputSchema: {type: object, properties: {c: {type: string}}, required: [c]}\n",
            r#"( $count := function($a){ "n" & $a }; {"c": $count(1)} )"#,
        ),
    ];
    for (output, expr) in cases {
        let text = tool(input, output, expr);
        let checked = check(&text);
        assert!(
            checked.diagnostics.is_empty(),
            "{expr}: {:?}",
            codes(&checked)
        );
    }
    // `anyOf` beside `properties`: not modelled, so nothing is reported.
    let text = tool(
        "{type: object, properties: {mode: {type: string}, model: {type: string}}, oneOf: [{properties: {mode: {const: fast}}}, {properties: {mode: {const: slow}}}]}",
        "",
        "$.entry.model",
    );
    assert!(check(&text).diagnostics.is_empty());
    // And the same shapes still report what is certain.
    let text = tool(input, "", r#"( $r := {"big": true}; $r.bg )"#);
    assert_eq!(codes(&check(&text)), ["W0802"]);
}

/// A span points at the path itself, not at a longer name or a string that contains it.
#[test]
fn spans_are_whole_paths() {
    let input = "{type: object, properties: {name: {type: string}, na: {type: string}}}";
    let text = tool(input, "", r#"$.entry.name & $.entry.nmae"#);
    let checked = check(&text);
    assert_eq!(codes(&checked), ["W0802"]);
    let line = text.lines().nth(10).unwrap();
    let col = line.find("nmae").unwrap() + 1;
    assert_eq!(positions(&text, &checked, Code::W0802), [(11, col)]);
}

/// Deeply nested expressions check without overflowing the stack of a small thread.
#[test]
fn deep_expressions_do_not_overflow() {
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            for depth in [200, 900] {
                let arrays = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
                let parens = format!("{}$.entry.n{}", "(".repeat(depth), ")".repeat(depth));
                let sums = vec!["$.entry.n"; depth].join(" + ");
                for expr in [arrays, parens, sums] {
                    let text = tool("{type: object, properties: {n: {type: number}}}", "", &expr);
                    let _ = check(&text);
                }
            }
        })
        .unwrap();
    handle.join().expect("no overflow");
}
