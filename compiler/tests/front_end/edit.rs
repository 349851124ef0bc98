//! Tool edits spliced into graph files (`mcpgraph_compiler::edit`): only the edited item's text
//! changes, the result reads back as the JSON that was sent, and a refused edit says where.

use mcpgraph_compiler::SourceFile;
use mcpgraph_compiler::edit::{self, Edit, Refusal};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

fn file(text: &str) -> SourceFile {
    SourceFile::new("graph.yaml", text)
}

fn add(text: &str, tool: &Value) -> Result<String, Refusal> {
    edit::apply(&file(text), None, None, Edit::Add(tool)).map(|p| p.text)
}

fn update(text: &str, name: &str, tool: &Value) -> Result<String, Refusal> {
    edit::apply(&file(text), None, None, Edit::Update { name, tool }).map(|p| p.text)
}

fn delete(text: &str, name: &str) -> Result<String, Refusal> {
    edit::apply(&file(text), None, None, Edit::Delete { name }).map(|p| p.text)
}

/// A graph with comments everywhere: before, between and inside the tools, and after the list.
const COMMENTED: &str = r#"# A graph full of comments.
version: "1.0"   # the format
server:
  name: "commented"
  version: "1.0.0"

tools:
  # The first tool.
  - name: "first"
    description: "Returns its argument"   # inline
    inputSchema:
      type: object
      properties:
        x: { type: number }
    nodes:
      # entry, then exit
      - { id: entry, type: entry, next: exit }
      - { id: exit, type: exit }

  # Between the tools.

  - name: "second"
    description: "Doubles"
    inputSchema: { type: object, properties: { x: { type: number } } }
    nodes:
      - { id: entry, type: entry, next: double }
      - id: double
        type: transform
        transform:
          expr: '{ "y": $.entry.x * 2 }'   # the work
        next: exit
      - { id: exit, type: exit }
  # After the last tool.

# At the end of the file.
"#;

fn echo_tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": "Echoes x",
        "inputSchema": {"type": "object", "properties": {"x": {"type": "number"}}},
        "nodes": [
            {"id": "entry", "type": "entry", "next": "t"},
            {"id": "t", "type": "transform", "transform": {"expr": "{ \"x\": $.entry.x }"}, "next": "exit"},
            {"id": "exit", "type": "exit"}
        ]
    })
}

/// The text of `COMMENTED` from `from` (included) to `to` (excluded, or the end).
fn between(from: &str, to: Option<&str>) -> (usize, usize) {
    let start = COMMENTED.find(from).unwrap();
    let end = to.map_or(COMMENTED.len(), |t| COMMENTED.find(t).unwrap());
    (start, end)
}

#[test]
fn add_appends_after_the_last_tool_and_keeps_every_other_byte() {
    let new = add(COMMENTED, &echo_tool("third")).unwrap();
    let at = COMMENTED.find("  # After the last tool.").unwrap();
    assert_eq!(&new[..at], &COMMENTED[..at]);
    assert!(new.ends_with(&COMMENTED[at..]), "{new}");
    let inserted = &new[at..new.len() - (COMMENTED.len() - at)];
    assert_eq!(
        inserted,
        r#"  - name: third
    description: Echoes x
    inputSchema:
      type: object
      properties:
        x:
          type: number
    nodes:
      - id: entry
        type: entry
        next: t
      - id: t
        type: transform
        transform:
          expr: "{ \"x\": $.entry.x }"
        next: exit
      - id: exit
        type: exit
"#
    );
    let names = edit::tool_names(&file(&new));
    assert_eq!(names, ["first", "second", "third"]);
    assert_eq!(
        edit::tool_json(&file(&new), "third"),
        Some(echo_tool("third"))
    );
}

#[test]
fn update_replaces_only_the_item() {
    let new = update(COMMENTED, "first", &echo_tool("first")).unwrap();
    let (start, end) = between("- name: \"first\"", Some("\n  # Between the tools."));
    assert_eq!(&new[..start], &COMMENTED[..start]);
    let tail = &COMMENTED[end + 1..];
    assert!(new.ends_with(tail));
    assert!(new[start..].starts_with("- name: first\n    description: Echoes x\n"));
    assert_eq!(edit::tool_names(&file(&new)), ["first", "second"]);
}

#[test]
fn update_of_the_last_tool_keeps_the_comments_after_it() {
    let new = update(COMMENTED, "second", &echo_tool("second")).unwrap();
    let (start, end) = between("- name: \"second\"", Some("  # After the last tool."));
    assert_eq!(&new[..start], &COMMENTED[..start]);
    assert!(new.ends_with(&COMMENTED[end..]));
    assert_eq!(
        edit::tool_json(&file(&new), "second"),
        Some(echo_tool("second"))
    );
}

#[test]
fn update_may_rename() {
    let new = update(COMMENTED, "first", &echo_tool("renamed")).unwrap();
    assert_eq!(edit::tool_names(&file(&new)), ["renamed", "second"]);
    assert!(edit::tool_json(&file(&new), "first").is_none());
}

#[test]
fn a_rename_onto_another_tool_is_refused() {
    let refusal = update(COMMENTED, "first", &echo_tool("second")).unwrap_err();
    assert_eq!(refusal.message, r#"Tool with name "second" already exists"#);
}

#[test]
fn delete_removes_the_item_lines_only() {
    let new = delete(COMMENTED, "first").unwrap();
    let (start, end) = between("  - name: \"first\"", Some("\n  # Between the tools."));
    // The blank line after the item is not the item's.
    let expected = format!("{}{}", &COMMENTED[..start], &COMMENTED[end..]);
    assert_eq!(new, expected);

    let new = delete(COMMENTED, "second").unwrap();
    let (start, end) = between("  - name: \"second\"", Some("  # After the last tool."));
    let expected = format!("{}{}", &COMMENTED[..start], &COMMENTED[end..]);
    assert_eq!(new, expected);
}

#[test]
fn delete_of_every_tool_leaves_a_loadable_file() {
    let new = delete(COMMENTED, "first").unwrap();
    let new = delete(&new, "second").unwrap();
    assert!(edit::tool_names(&file(&new)).is_empty());
    assert!(new.contains("# At the end of the file."));
}

#[test]
fn unknown_and_duplicate_names_use_the_original_texts() {
    assert_eq!(
        delete(COMMENTED, "nope").unwrap_err().message,
        r#"Tool "nope" not found"#
    );
    assert_eq!(
        update(COMMENTED, "nope", &echo_tool("nope"))
            .unwrap_err()
            .message,
        r#"Tool "nope" not found"#
    );
    let refusal = add(COMMENTED, &echo_tool("first")).unwrap_err();
    assert_eq!(refusal.message, r#"Tool with name "first" already exists"#);
    assert!(refusal.diagnostics.is_empty());
}

#[test]
fn a_refused_edit_points_inside_the_proposed_tool() {
    let mut bad = echo_tool("broken");
    bad["nodes"][1]["transform"]["expr"] = json!("{ \"x\": $.entry.x + }");
    let refusal = add(COMMENTED, &bad).unwrap_err();
    assert_eq!(refusal.message, "the edit was refused: 1 error");
    let tool_text = refusal.tool_text.as_deref().unwrap();
    let d = refusal
        .diagnostics
        .iter()
        .find(|d| d.severity == "error")
        .unwrap();
    assert!(d.in_tool, "{d:?}");
    assert!(d.code.starts_with("E03"), "{d:?}");
    // The position is inside the expression, on its line of the tool's text.
    let line = tool_text.lines().nth(d.line - 1).unwrap();
    assert!(line.trim_start().starts_with("expr: "), "{line:?} {d:?}");
    assert!(d.column > line.find("expr").unwrap(), "{d:?}");
    assert!(tool_text.starts_with("- name: broken\n  description: Echoes x\n"));
}

#[test]
fn an_invalid_tool_is_refused_with_every_problem() {
    // The original toolkit saved this and made the file unloadable.
    let refusal = add(
        COMMENTED,
        &json!({"name": "half", "description": "no nodes"}),
    )
    .unwrap_err();
    assert!(refusal.message.starts_with("the edit was refused: "));
    assert!(!refusal.diagnostics.is_empty());
    assert!(refusal.diagnostics.iter().all(|d| d.in_tool), "{refusal:?}");
    assert!(
        refusal
            .diagnostics
            .iter()
            .all(|d| d.line >= 1 && d.column >= 1)
    );
}

#[test]
fn errors_the_file_already_had_do_not_refuse_an_edit() {
    let broken = COMMENTED.replace("$.entry.x * 2", "$.entry.x *");
    // Adding a good tool to a file whose second tool is broken: nothing new is wrong.
    let new = add(&broken, &echo_tool("third")).unwrap();
    assert_eq!(edit::tool_names(&file(&new)), ["first", "second", "third"]);
    // Fixing the broken tool is accepted too.
    let fixed = update(&new, "second", &echo_tool("second")).unwrap();
    let checked = mcpgraph_compiler::compile(&file(&fixed), None);
    assert_eq!(checked.error_count(), 0, "{:?}", checked.diagnostics);
}

#[test]
fn deleting_a_tool_another_one_calls_is_refused_with_file_positions() {
    let text = r#"version: "1.0"
server: { name: s, version: "1.0.0" }
tools:
  - name: callee
    description: c
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: exit }
      - { id: exit, type: exit }
  - name: caller
    description: c
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: call }
      - { id: call, type: mcp, server: self, tool: callee, args: {}, next: exit }
      - { id: exit, type: exit }
"#;
    assert_eq!(
        mcpgraph_compiler::compile(&file(text), None).error_count(),
        0
    );
    let refusal = delete(text, "callee").unwrap_err();
    assert!(refusal.tool_text.is_none());
    let d = &refusal.diagnostics[0];
    assert!(!d.in_tool);
    // In the new file, `tool: callee` is on line 9.
    assert_eq!(d.line, 9, "{refusal:?}");
}

#[test]
fn adding_to_an_empty_list() {
    let head = "version: \"1.0\"\nserver: { name: s, version: \"1.0.0\" }\n";
    for tools in [
        "tools: []\n",
        "tools: [] # none yet\n",
        "tools:\n",
        "tools: null\n",
        "tools:",
        "",
    ] {
        let text = format!("{head}{tools}");
        let new = add(&text, &echo_tool("only")).unwrap_or_else(|r| panic!("{tools:?}: {r:?}"));
        assert!(new.starts_with(head));
        assert!(new[head.len()..].starts_with("tools:"), "{new}");
        assert!(
            new.contains("\n  - name: only\n    description: Echoes x\n"),
            "{new}"
        );
        assert_eq!(
            edit::tool_json(&file(&new), "only"),
            Some(echo_tool("only")),
            "{new}"
        );
        if tools.contains('#') {
            assert!(new.contains("tools: # none yet\n"), "{new}");
        }
    }
}

#[test]
fn the_indentation_of_the_file_is_followed() {
    let text = "version: \"1.0\"\nserver: { name: s, version: \"1.0.0\" }\ntools:\n- name: a\n  description: a\n  inputSchema:\n    type: object\n  nodes:\n  - { id: entry, type: entry, next: exit }\n  - { id: exit, type: exit }\n";
    let new = add(text, &echo_tool("b")).unwrap();
    assert!(new.starts_with(text));
    assert!(
        new[text.len()..]
            .starts_with("- name: b\n  description: Echoes x\n  inputSchema:\n    type: object\n"),
        "{new}"
    );
    assert!(new.contains("\n  nodes:\n  - id: entry\n"), "{new}");
}

#[test]
fn a_multi_line_expression_is_a_block_scalar() {
    let mut tool = echo_tool("multi");
    let expr = "(\n  $x := $.entry.x;\n  { \"x\": $x }\n)";
    tool["nodes"][1]["transform"]["expr"] = json!(expr);
    let new = add(COMMENTED, &tool).unwrap();
    assert!(
        new.contains("        transform:\n          expr: |-\n            (\n              $x := $.entry.x;\n"),
        "{new}"
    );
    assert_eq!(edit::tool_json(&file(&new), "multi"), Some(tool.clone()));
    // A block scalar ending in blank lines, before the file's blank line, still reads back.
    tool["description"] = json!("ends in blank lines\n\n\n");
    let new = update(COMMENTED, "first", &tool).unwrap();
    assert_eq!(edit::tool_json(&file(&new), "multi"), Some(tool));
}

#[test]
fn strings_that_look_like_other_things_stay_strings() {
    let mut tool = echo_tool("odd");
    tool["description"] = json!("yes: no # not a comment");
    tool["inputSchema"]["properties"]["x"]["description"] = json!("true");
    tool["inputSchema"]["properties"]["x"]["examples"] = json!([
        "1.5",
        "null",
        "~",
        "",
        " lead",
        "- dash",
        "@at",
        "*star",
        "'q'",
        "\"dq\"",
        "tab\there",
        "{a: 1}"
    ]);
    let new = add(COMMENTED, &tool).unwrap();
    assert_eq!(edit::tool_json(&file(&new), "odd"), Some(tool));
}

#[test]
fn a_flow_style_tools_list_is_refused_cleanly() {
    let text = "version: \"1.0\"\nserver: { name: s, version: \"1.0.0\" }\ntools: [{ name: a, description: a, inputSchema: { type: object }, nodes: [{ id: entry, type: entry, next: exit }, { id: exit, type: exit }] }]\n";
    let refusal = add(text, &echo_tool("b")).unwrap_err();
    assert!(refusal.message.contains("flow"), "{refusal:?}");
}

#[test]
fn a_file_that_is_not_yaml_is_refused() {
    let refusal = add("tools: [\n", &echo_tool("b")).unwrap_err();
    assert!(refusal.message.contains("not valid YAML"), "{refusal:?}");
    assert_eq!(refusal.diagnostics.len(), 1);
}

fn graph_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dirs = [
        root.join("examples"),
        root.join("tests/graphs"),
        root.join("tests/conformance"),
        root.join("../shared/conformance/graphs"),
        root.join("compiler/tests/codes"),
    ];
    let mut files = Vec::new();
    for dir in dirs {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every tool of every graph we have: its stored JSON, written back by an update, reads back
/// the same, and the rest of the file is untouched.
#[test]
fn every_tool_of_every_graph_round_trips() {
    let files = graph_files();
    assert!(files.len() >= 40, "{files:?}");
    let mut tools = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let source = SourceFile::new(path.display().to_string(), text.clone());
        let lock = mcpgraph_compiler::lock::read_beside(path).map(|l| l.unwrap());
        let names = edit::tool_names(&source);
        for (position, name) in names.iter().enumerate() {
            // Duplicate names (a fixture of E0201) are not addressable one by one.
            if names.iter().filter(|n| *n == name).count() > 1 {
                continue;
            }
            let json = edit::tool_json(&source, name).unwrap();
            let edited = edit::apply(
                &source,
                None,
                lock.as_ref(),
                Edit::Update { name, tool: &json },
            );
            let Ok(proposed) = edited else {
                // Only a file that is not block style may refuse.
                let refusal = edited.unwrap_err();
                assert!(
                    refusal.message.contains("flow"),
                    "{}: {name}: {refusal:?}",
                    path.display()
                );
                continue;
            };
            let new = SourceFile::new(source.name.clone(), proposed.text);
            assert_eq!(
                edit::tool_json(&new, name).as_ref(),
                Some(&json),
                "{}: {name}",
                path.display()
            );
            assert_eq!(edit::tool_names(&new), names, "{}", path.display());
            tools += 1;

            // The same tool deleted and added again reads back the same, too (for the first
            // tools of a file: every edit checks the whole file, and the corpora are large).
            if position >= 2 {
                continue;
            }
            let deleted = edit::apply(&source, None, lock.as_ref(), Edit::Delete { name });
            if let Ok(deleted) = deleted {
                let without = SourceFile::new(source.name.clone(), deleted.text);
                if let Ok(again) = edit::apply(&without, None, lock.as_ref(), Edit::Add(&json)) {
                    let again = SourceFile::new(source.name.clone(), again.text);
                    assert_eq!(edit::tool_json(&again, name), Some(json.clone()));
                }
            }
        }
    }
    assert!(tools >= 60, "{tools}");
}

#[test]
fn a_file_without_a_final_newline() {
    let text = COMMENTED[..COMMENTED.find("  # After the last tool.").unwrap()].trim_end();
    assert!(!text.ends_with('\n'));
    let added = add(text, &echo_tool("third")).unwrap();
    assert!(
        added.starts_with(&format!("{text}\n  - name: third\n")),
        "{added}"
    );
    let updated = update(text, "second", &echo_tool("second")).unwrap();
    assert!(!updated.ends_with('\n'), "{updated:?}");
    assert_eq!(
        edit::tool_json(&file(&updated), "second"),
        Some(echo_tool("second"))
    );
    let deleted = delete(text, "second").unwrap();
    assert_eq!(edit::tool_names(&file(&deleted)), ["first"]);
    assert!(
        deleted.ends_with("  # Between the tools.\n\n"),
        "{deleted:?}"
    );
}
