//! `graph!` programs answer the shared corpus exactly as `mcpgraph serve` does, and the typed
//! API of the hostile-names fixture has the names the naming rules promise.

#[path = "corpus/differential.rs"]
mod differential;

use mcpgraph_graph_macro_corpus::hostile_names;
use std::path::PathBuf;
use std::process::Command;

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shared_dir() -> PathBuf {
    std::env::var_os("MCPGRAPH_SHARED")
        .map_or_else(|| project_root().join("../shared"), PathBuf::from)
}

/// The shared runner's cases of graph `name` (in `dir`) against this crate's binary serving it.
fn corpus(dir: &std::path::Path, name: &str) {
    let output = Command::new("python3")
        .arg(shared_dir().join("tools/run-conformance.py"))
        .arg("--dir")
        .arg(dir)
        .args(["--only", name, "--", "sh", "-c", "exec \"$0\" \"$1\""])
        .arg(env!("CARGO_BIN_EXE_graph-macro-corpus"))
        .args([name, "{yaml}"])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "{name}:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn every_corpus_graph_through_graph_macro() {
    let dir = shared_dir().join("conformance/graphs");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("the shared graph corpus")
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let stem = path.file_stem()?.to_string_lossy().into_owned();
            (path.extension()? == "yaml").then_some(stem)
        })
        .collect();
    names.sort();
    // A graph added to the corpus must be embedded here too (src/lib.rs).
    assert_eq!(
        names,
        [
            "downstream",
            "history",
            "jsonlogic",
            "limits",
            "switches",
            "switches_next",
            "transforms"
        ]
    );
    for name in &names {
        corpus(&dir, name);
    }
}

/// The language extensions' own cases (tests/conformance), elicitation included, through
/// `graph!`: the same answers as `serve` and built binaries.
#[test]
fn extension_cases_through_graph_macro() {
    let dir = project_root().join("tests/conformance");
    corpus(&dir, "extensions");
    corpus(&dir, "extensions_no_elicitation");
}

/// A `graph!` program answers `ask` nodes with the function it passes to `with_answers`; without
/// one they are unavailable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graph_macro_programs_answer_asks() {
    use mcpgraph_graph_macro_corpus::confirm_ask::*;
    use mcpgraph_runtime::{Question, Refusal};
    let input = OverwriteFileInput {
        path: "never-written.txt".into(),
        content: "abc".into(),
        ..Default::default()
    };
    let unanswered = Graph::new().expect("the graph loads");
    let out = unanswered.overwrite_file(&input).await.expect("answers");
    assert_eq!(out.reason.as_deref(), Some("unavailable"));
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = asked.clone();
    let graph = Graph::new()
        .expect("the graph loads")
        .with_answers(move |question: Question| {
            seen.lock().unwrap().push((question.node, question.message));
            async { Err(Refusal::declined("not today")) }
        });
    let out = graph.overwrite_file(&input).await.expect("answers");
    assert!(!out.written);
    assert_eq!(out.reason.as_deref(), Some("declined"));
    assert_eq!(
        *asked.lock().unwrap(),
        [(
            "confirm".to_string(),
            "Overwrite never-written.txt with 3 characters?".to_string()
        )]
    );
    let yes_but_wrong = Graph::new()
        .expect("the graph loads")
        .with_answers(|_| async { Ok(serde_json::json!({"ok": false})) });
    let out = yes_but_wrong.overwrite_file(&input).await.expect("answers");
    assert_eq!(out.reason.as_deref(), Some("the answer was no"));
}

/// Map and parallel outputs get struct types where the output schema describes them: nested
/// objects and arrays of objects are structs of their own, not JSON values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn map_and_parallel_outputs_are_typed() {
    use mcpgraph_graph_macro_corpus::typed_fanout::*;
    let graph = Graph::new().expect("the graph loads");
    let out: SquaresOutput = graph
        .squares(&SquaresInput {
            n: 3,
            ..Default::default()
        })
        .await
        .expect("squares");
    let squares: Vec<i64> = out
        .results
        .iter()
        .map(|r: &SquaresOutputResultsItem| r.square)
        .collect();
    assert_eq!(squares, [1, 4, 9]);
    let ends: &SquaresOutputEnds = &out.ends;
    let first: &SquaresOutputEndsFirst = &ends.first;
    assert_eq!((first.square, ends.last.square), (1, 9));
}

#[test]
fn hostile_names_are_served_under_their_own_names() {
    corpus(&project_root().join("tests/graphs"), "hostile_names");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_names_get_distinct_rust_names() {
    use hostile_names::*;
    let graph = Graph::new().expect("the graph loads");
    let input = |tag: &str| GraphInput {
        r#type: tag.to_string(),
        self_: Some(7),
        extra_2: Some(true),
        a_b: Some(1.5),
        a_b_2: Some(2.0),
        max_count: Some(3),
        field_2x: Some(vec!["x".into()]),
        field: Some("empty".into()),
        ..GraphInput::default()
    };
    // Each method calls the tool whose name it was made from; collisions are numbered in
    // source order, and the generated API's own names are never taken.
    let graph_out: GraphOutput = graph.graph(&input("g")).await.expect("graph");
    assert_eq!(graph_out.tool, "graph");
    assert_eq!(graph_out.echo["self"], 7);
    assert_eq!(graph_out.echo["a-b"], 1.5);
    assert_eq!(graph_out.echo["a_b"], 2.0);
    assert_eq!(graph_out.echo["2x"][0], "x");
    assert_eq!(graph_out.echo[""], "empty");
    let calls: Vec<(String, String)> = vec![
        (
            graph
                .tools(&ToolsInput {
                    r#type: "t".into(),
                    ..Default::default()
                })
                .await
                .expect("tools")
                .tool,
            "tools".into(),
        ),
        (
            graph
                .new_2(&NewInput {
                    r#type: "n".into(),
                    ..Default::default()
                })
                .await
                .expect("new")
                .tool,
            "new".into(),
        ),
        (
            graph
                .sum_to_n(&SumToNInput {
                    r#type: "s".into(),
                    ..Default::default()
                })
                .await
                .expect("sumToN")
                .tool,
            "sumToN".into(),
        ),
        (
            graph
                .a_b(&ABInput {
                    r#type: "1".into(),
                    ..Default::default()
                })
                .await
                .expect("a-b")
                .tool,
            "a-b".into(),
        ),
        (
            graph
                .a_b_2(&ABInput2 {
                    r#type: "2".into(),
                    ..Default::default()
                })
                .await
                .expect("a_b")
                .tool,
            "a_b".into(),
        ),
        (
            graph
                .serve_stdio_2(&ServeStdioInput {
                    r#type: "x".into(),
                    ..Default::default()
                })
                .await
                .expect("serve_stdio")
                .tool,
            "serve_stdio".into(),
        ),
        (
            graph
                .http_server(&HttpServerInput {
                    r#type: "h".into(),
                    ..Default::default()
                })
                .await
                .expect("HTTPServer")
                .tool,
            "HTTPServer".into(),
        ),
        (
            graph
                .call_json_2(&CallJsonInput {
                    r#type: "c".into(),
                    ..Default::default()
                })
                .await
                .expect("call_json")
                .tool,
            "call_json".into(),
        ),
        (
            graph
                .main(&MainInput {
                    r#type: "m".into(),
                    ..Default::default()
                })
                .await
                .expect("main")
                .tool,
            "main".into(),
        ),
        (
            graph
                .self_(&SelfInput {
                    r#type: "s".into(),
                    ..Default::default()
                })
                .await
                .expect("self")
                .tool,
            "self".into(),
        ),
        (
            graph
                .r#type(&TypeInput {
                    r#type: "t".into(),
                    ..Default::default()
                })
                .await
                .expect("type")
                .tool,
            "type".into(),
        ),
        (
            graph
                .tool_9lives(&Tool9livesInput {
                    r#type: "9".into(),
                    ..Default::default()
                })
                .await
                .expect("9lives")
                .tool,
            "9lives".into(),
        ),
        (
            graph
                .graph_2(&GraphInput2 {
                    r#type: "G".into(),
                    ..Default::default()
                })
                .await
                .expect("Graph")
                .tool,
            "Graph".into(),
        ),
        (
            graph
                .engine_2(&EngineInput {
                    r#type: "e".into(),
                    ..Default::default()
                })
                .await
                .expect("engine")
                .tool,
            "engine".into(),
        ),
        (
            graph
                .graph_3(&GraphInput3 {
                    r#type: "GG".into(),
                    ..Default::default()
                })
                .await
                .expect("GRAPH")
                .tool,
            "GRAPH".into(),
        ),
    ];
    for (got, want) in calls {
        assert_eq!(got, want);
    }
    // The struct field that the schema's `extra` property would have taken stays the flattened
    // map of unnamed properties.
    let mut open = ToolsInput {
        r#type: "t".into(),
        ..Default::default()
    };
    open.extra.insert("unnamed".into(), serde_json::json!(1));
    let out = graph.tools(&open).await.expect("tools");
    assert_eq!(out.echo["unnamed"], 1);
}
