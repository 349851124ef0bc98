//! Snapshots of what `graph!` expands to (printed by prettyplease), for the examples and the
//! hostile-names fixture, as committed in `tests/snapshots/graph_macro/` (regenerate with
//! `MCPGRAPH_BLESS=1`). The workspace member `tests/graph-macro` compiles the same expansions
//! under `#![deny(warnings)]`.

use crate::common;

use mcpgraph_compiler::{SourceFile, codegen, compile};

fn expansion(path: &str) -> String {
    let file = SourceFile::read(&common::root().join(path)).expect("the graph file");
    let file = SourceFile::new(path, file.text);
    let checked = compile(&file, None);
    let graph = checked.graph.as_ref().expect("the graph checks");
    // The embedded IR is a long JSON string: the snapshot shows a placeholder in its place.
    let tokens = codegen::graph_items(graph, "<the graph's IR as JSON>", path);
    codegen::render(tokens, path, "graph!")
}

#[test]
fn graph_macro_expansion_snapshots() {
    for (path, name) in [
        ("examples/greeting_next.yaml", "greeting_next"),
        ("examples/loop.yaml", "loop"),
        ("tests/graphs/hostile_names.yaml", "hostile_names"),
    ] {
        let got = expansion(path);
        let snapshot = common::root()
            .join("tests/snapshots/graph_macro")
            .join(format!("{name}.rs"));
        if std::env::var_os("MCPGRAPH_BLESS").is_some() {
            std::fs::create_dir_all(snapshot.parent().expect("a parent")).expect("mkdir");
            std::fs::write(&snapshot, &got).expect("write the snapshot");
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        assert_eq!(
            got, expected,
            "{name}: graph! expands differently: run MCPGRAPH_BLESS=1 cargo test --release --test cli graph_macro_expansion"
        );
    }
}

/// A graph that does not check expands to the error and a stub with every item a good graph
/// would have: the `Graph` API and, per tool the file names, its types and method.
#[test]
fn the_error_stub_defines_the_whole_api() {
    let outline = vec![codegen::ToolOutline {
        name: "sumToN".into(),
        input_schema: Some(
            serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
        ),
        output_schema: Some(serde_json::json!({"type": "object"})),
        ..Default::default()
    }];
    let stub = codegen::render(
        codegen::graph_error("bad graph", &outline),
        "x.yaml",
        "graph!",
    );
    for item in [
        "compile_error!(\"bad graph\")",
        "pub struct SumToNInput",
        "pub n: ::std::option::Option<i64>",
        "pub struct SumToNOutput",
        // The generic API (`IR`, `new`, `call_json`, `serve_stdio`, ...) is the runtime's
        // `EmbeddedGraph`, over the stub's typed tools with an empty IR.
        "pub type Graph = ::mcpgraph_runtime::__private::EmbeddedGraph<GraphTools>;",
        "pub struct GraphTools",
        "impl ::mcpgraph_runtime::__private::TypedTools for GraphTools",
        "const IR: &'static str = \"\";",
        "pub async fn sum_to_n(&self, input: &SumToNInput",
        "-> ::std::result::Result<SumToNOutput, ::mcpgraph_runtime::__private::CallError>",
    ] {
        // prettyplease wraps long signatures: compare without whitespace.
        let squeeze = |s: &str| s.split_whitespace().collect::<String>();
        assert!(
            squeeze(&stub).contains(&squeeze(item)),
            "the stub lacks `{item}`:\n{stub}"
        );
    }
}
