//! ns per evaluation of typical graph expressions through mcpgraph's JSONata layer (jsonata-core
//! with the history functions registered, one evaluator reused as a run does), interpreted and
//! compiled to Rust as `build --native` compiles them (`compiled_ns`, absent for an expression
//! outside the compiled subset), the two taking turns in rounds. The same cases run under node
//! with jsonata-js (`bench/jsonata-bench.js`); `scripts/bench` compares them.

mcpgraph_runtime::__private::compiled_expressions!("src/cases.json");

use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Expr, NodeId};
use mcpgraph_runtime::internals::to_jvalue;
use mcpgraph_runtime::internals::{History, Record};
use mcpgraph_runtime::internals::{Jsonata, Settings};
use serde_json::{Value, json};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    let cases: Vec<Value> =
        serde_json::from_str(include_str!("../cases.json")).expect("cases.json");
    let budget = Duration::from_millis(
        std::env::args()
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or(1000),
    );
    // An optional second argument keeps only the cases whose name contains it (for profiling).
    let only = std::env::args().nth(2).unwrap_or_default();
    for case in cases {
        let name = case["name"].as_str().unwrap_or_default();
        if !name.contains(&only) {
            continue;
        }
        let expr = Expr::parse(case["expr"].as_str().unwrap_or_default()).expect("the case parses");
        let names: HashMap<String, NodeId> = [
            ("entry_sum".to_string(), NodeId(0)),
            ("increment_node".to_string(), NodeId(1)),
        ]
        .into();
        let history = Rc::new(RefCell::new(History::new(Arc::new(names), 2)));
        let data = match &case["data"] {
            Value::String(s) if s == "LINES50" => to_jvalue(
                &json!({"s": (0..50).map(|i| format!("line {i}: some text here")).collect::<Vec<_>>().join("\n")}),
            ),
            Value::String(s) if s == "ITEMS1000" => to_jvalue(
                &json!({"items": (0..1000).map(|i| json!({"n": i, "name": format!("item {i}")})).collect::<Vec<_>>()}),
            ),
            Value::String(s) if s == "HISTORY" => {
                let mut h = history.borrow_mut();
                h.push(
                    "entry_sum",
                    record(NodeId(0), to_jvalue(&json!({"n": 1000}))),
                );
                for i in 1..=100 {
                    h.push(
                        "increment_node",
                        record(
                            NodeId(1),
                            to_jvalue(
                                &json!({"counter": i, "sum": i * (i + 1) / 2, "target": 1000}),
                            ),
                        ),
                    );
                }
                h.context().clone()
            }
            other => to_jvalue(other),
        };
        let native = compiled::EXPRS
            .iter()
            .find(|(source, _)| *source == expr.source)
            .and_then(|(_, native)| *native);
        let compiled = native.map(|native| Expr {
            native: Some(native),
            ..expr.clone()
        });
        // The interpreted and the compiled evaluation take turns, ROUNDS rounds of a share of
        // the budget each, and each figure is the median of its rounds: a slow phase of the
        // machine then falls on both instead of on whichever ran during it.
        let share = budget / ROUNDS;
        let mut interpreted_jsonata = Jsonata::new(Some(&history), Settings::default());
        let mut compiled_jsonata = Jsonata::new(Some(&history), Settings::default());
        let (mut interpreted_ns, mut compiled_ns, mut iterations) = (vec![], vec![], 0);
        for _ in 0..ROUNDS {
            let (ns, n) = timed(&mut interpreted_jsonata, &expr, &data, share);
            interpreted_ns.push(ns);
            iterations += n;
            if let Some(compiled) = &compiled {
                compiled_ns.push(timed(&mut compiled_jsonata, compiled, &data, share).0);
            }
        }
        let mut line =
            json!({"case": name, "ns": median(interpreted_ns).round(), "iterations": iterations});
        if compiled.is_some() {
            line["compiled_ns"] = json!(median(compiled_ns).round());
        }
        println!("{line}");
    }
}

/// ns per evaluation of `expr` (after a warm-up), batches timed until `budget` is spent.
fn timed(jsonata: &mut Jsonata, expr: &Expr, data: &JValue, budget: Duration) -> (f64, u64) {
    let check = jsonata.eval(expr, data).expect("the case evaluates");
    assert!(!check.is_undefined(), "{}", expr.source);
    let mut iterations = 0u64;
    let started = Instant::now();
    while started.elapsed() < budget {
        for _ in 0..16 {
            let v = jsonata.eval(expr, data).expect("evaluates");
            std::hint::black_box(v);
        }
        iterations += 16;
    }
    (
        started.elapsed().as_nanos() as f64 / iterations as f64,
        iterations,
    )
}

/// Rounds in which the interpreted and the compiled evaluation take turns.
const ROUNDS: u32 = 10;

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn record(node: NodeId, output: JValue) -> Record {
    Record {
        node,
        output,
        start: Duration::ZERO,
        duration: Duration::ZERO,
        attempts: None,
    }
}
