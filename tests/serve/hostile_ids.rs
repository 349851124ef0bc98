//! Node ids that read like labels (tests/graphs/hostile_ids.yaml: `fetch[0]`, `a.b`, `x › y`,
//! `with space`, each also an item, a branch or a callee's node), as two consumers of the
//! engine's typed node reports show them to a client over stdio: `serve`'s progress messages
//! (the label, for people: ambiguous by design, but exactly these, in this order, before the
//! result) and the toolkit's `runGraphTool` history (the called tool's own nodes only, by id,
//! whatever an item, a branch or a callee's node is called).

use crate::common;

use crate::common::{Mcp, structured};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// How long a call may take before the test fails (nothing in the graph waits).
const DEADLINE: Duration = Duration::from_secs(30);

/// The result of `hostile` for `{"n": 1}`.
fn hostile_result() -> Value {
    json!({"fetched": [10, 20], "a": 10, "ab": [20, 100]})
}

fn graphs_dir() -> PathBuf {
    common::root().join("tests/graphs")
}

/// One progress message per report: the tool's nodes, each map item and parallel branch as it
/// ends, and every node of the `inner` runs, labelled where they ran. `a.b (parallel)` comes
/// twice (branch `b` of `a`, then the node `a.b`) and `fetch[0]` names a transform and an
/// item: labels are for people, which is why the other consumers read the structure.
#[test]
fn progress_messages_are_the_labels_of_every_report_in_order() {
    let mut server = Mcp::start(&["serve", "hostile_ids.yaml"], &graphs_dir(), &[]);
    let id = server.send_request(
        "tools/call",
        json!({"name": "hostile", "arguments": {"n": 1}, "_meta": {"progressToken": "hostile"}}),
    );
    let answer = server.response(id, DEADLINE);
    assert_eq!(structured(&answer), &hostile_result(), "{answer}");
    // `pending` holds what arrived before the result, in the order it arrived.
    let progress: Vec<&Value> = server
        .pending
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    let messages: Vec<&str> = progress
        .iter()
        .filter_map(|m| m["params"]["message"].as_str())
        .collect();
    assert_eq!(
        messages,
        [
            "entry (entry)",
            "fetch[0] (transform)",
            "fetch[0] › inner.with space (entry)",
            "fetch[0] › inner.x › y (transform)",
            "fetch[0] › inner.a.b (exit)",
            "fetch[0] (map)",
            "fetch[1] › inner.with space (entry)",
            "fetch[1] › inner.x › y (transform)",
            "fetch[1] › inner.a.b (exit)",
            "fetch[1] (map)",
            "fetch (map)",
            "a.b › inner.with space (entry)",
            "a.b › inner.x › y (transform)",
            "a.b › inner.a.b (exit)",
            "a.b (parallel)",
            "a (parallel)",
            "a.b.x › y › inner.with space (entry)",
            "a.b.x › y › inner.x › y (transform)",
            "a.b.x › y › inner.a.b (exit)",
            "a.b.x › y (parallel)",
            "a.b.with space › inner.with space (entry)",
            "a.b.with space › inner.x › y (transform)",
            "a.b.with space › inner.a.b (exit)",
            "a.b.with space (parallel)",
            "a.b (parallel)",
            "x › y (transform)",
            "with space (exit)",
        ],
        "{:?}",
        server.pending
    );
    let counts: Vec<f64> = progress
        .iter()
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    let expected: Vec<f64> = (1..=messages.len()).map(|i| i as f64).collect();
    assert_eq!(counts, expected);
    assert!(
        progress
            .iter()
            .all(|m| m["params"]["progressToken"] == "hostile"),
        "{progress:?}"
    );
}

/// A directory of its own holding a copy of the graph, for the toolkit (which edits the file
/// it is given).
fn toolkit_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mcpgraph-toolkit-hostile-ids-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    std::fs::copy(
        graphs_dir().join("hostile_ids.yaml"),
        dir.join("graph.yaml"),
    )
    .expect("copy the graph");
    dir
}

/// `(nodeId, nodeType)` of each history record, in order.
fn records(history: &Value) -> Vec<(String, String)> {
    history
        .as_array()
        .unwrap_or_else(|| panic!("no executionHistory array: {history}"))
        .iter()
        .map(|r| {
            (
                r["nodeId"].as_str().unwrap_or("(no nodeId)").to_string(),
                r["nodeType"]
                    .as_str()
                    .unwrap_or("(no nodeType)")
                    .to_string(),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(node, node_type)| (node.to_string(), node_type.to_string()))
        .collect()
}

/// `runGraphTool`'s history holds the called tool's own nodes, once each: no item, branch or
/// `inner` node becomes a record, though `inner`'s nodes share ids with them (`with space`,
/// `x › y`, `a.b`) and branch `b` of `a` is labelled like the node `a.b`. Each record's context
/// is own nodes only, newest first. A breakpoint names an own node: `with space` stops before
/// the exit, not at the entries of `inner` (also `with space`) that run before it.
#[test]
fn the_toolkit_history_holds_own_nodes_only() {
    let dir = toolkit_dir();
    let mut toolkit = Mcp::start(&["toolkit", "graph.yaml"], &dir, &[]);
    let id = toolkit.send_request(
        "tools/call",
        json!({"name": "runGraphTool", "arguments": {"toolName": "hostile", "arguments": {"n": 1}}}),
    );
    let ran = toolkit.response(id, DEADLINE);
    let ran = structured(&ran);
    assert_eq!(ran["result"], hostile_result(), "{ran}");
    let history = &ran["executionHistory"];
    assert_eq!(
        records(history),
        pairs(&[
            ("entry", "entry"),
            ("fetch[0]", "transform"),
            ("fetch", "map"),
            ("a", "parallel"),
            ("a.b", "parallel"),
            ("x › y", "transform"),
            ("with space", "exit"),
        ]),
        "{history}"
    );
    let indices: Vec<u64> = history
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["executionIndex"].as_u64())
        .collect();
    assert_eq!(indices, [0, 1, 2, 3, 4, 5, 6], "{history}");
    // What `x › y` saw: the own nodes before it, newest first, with their outputs; nothing of
    // `inner`'s runs (whose `a.b` and `x › y` would otherwise shadow the tool's).
    let context = &history[5]["context"];
    let keys: Vec<&str> = context
        .as_object()
        .map(|c| c.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        ["a.b", "a", "fetch", "fetch[0]", "entry"],
        "{context}"
    );
    assert_eq!(
        context,
        &json!({
            "a.b": {"x › y": {"n": 20}, "with space": {"n": 100}},
            "a": {"b": {"n": 10}},
            "fetch": [{"n": 10}, {"n": 20}],
            "fetch[0]": [1, 2],
            "entry": {"n": 1},
        })
    );

    let id = toolkit.send_request(
        "tools/call",
        json!({"name": "runGraphTool", "arguments": {"toolName": "hostile", "arguments": {"n": 1}, "breakpoints": ["with space"]}}),
    );
    let stopped = toolkit.response(id, DEADLINE);
    let stopped = structured(&stopped);
    assert_eq!(stopped["stoppedAt"], "with space", "{stopped}");
    assert_eq!(stopped["result"], Value::Null, "{stopped}");
    assert_eq!(
        records(&stopped["executionHistory"]),
        pairs(&[
            ("entry", "entry"),
            ("fetch[0]", "transform"),
            ("fetch", "map"),
            ("a", "parallel"),
            ("a.b", "parallel"),
            ("x › y", "transform"),
        ]),
        "{stopped}"
    );
    drop(toolkit);
    let _ = std::fs::remove_dir_all(&dir);
}
