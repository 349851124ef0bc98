//! Compiled expressions give exactly what the interpreter gives: every expression of every corpus
//! (the JSONata suite's cases in the compiled subset, the graphs of the examples, benchmarks and
//! conformance corpora) and generated ones, over their own inputs or generated ones, compared
//! value for value (sequence and constructor flags, key order, numbers bit for bit) and error for
//! error (code and text).

use mcpgraph_runtime::__private::native::JValue;
use mcpgraph_runtime::__private::native::{Case, identical};
use mcpgraph_runtime::internals::{Evaluated, both_ways};
use serde_json::{Value, json};

mcpgraph_runtime::__private::differential_corpus!("../..");

/// What the history functions see in every evaluation: two executions of `n1`, one of `n2`.
fn history() -> Vec<(String, Value)> {
    vec![
        ("n1".into(), json!({"a": 1, "b": [1, 2], "s": "x"})),
        ("n2".into(), json!([1, 2, 3])),
        (
            "n1".into(),
            json!({"a": 2, "list": [{"a": 3}, {"a": [4, 5]}]}),
        ),
    ]
}

/// A value with its array flags shown (`Debug` leaves them out): `[s c k w t| ...]` for
/// sequence, constructor, keep-singleton, outer wrapper, sorted tuples.
fn show(value: &JValue) -> String {
    match value {
        JValue::Array(arr) => {
            let flags: String = [
                (arr.sequence, 's'),
                (arr.cons, 'c'),
                (arr.keep_singleton, 'k'),
                (arr.outer_wrapper, 'w'),
                (arr.sorted_tuples, 't'),
            ]
            .iter()
            .filter_map(|(on, c)| on.then_some(*c))
            .collect();
            let items: Vec<String> = arr.iter().map(show).collect();
            format!("[{flags}| {}]", items.join(", "))
        }
        JValue::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k:?}: {}", show(v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        other => format!("{other:?}"),
    }
}

fn shown(result: &Evaluated) -> String {
    match result {
        Ok(value) => show(value),
        Err(e) => format!("error {:?} {}", e.code, e.message),
    }
}

fn same(interpreted: &Evaluated, compiled: &Evaluated) -> bool {
    match (interpreted, compiled) {
        (Ok(a), Ok(b)) => identical(a, b),
        (Err(a), Err(b)) => a == b,
        _ => false,
    }
}

/// The inputs a case is tried on: its own, else every generated input.
fn inputs(case: &Case) -> Vec<Option<Value>> {
    match case.data {
        Some(text) => vec![Some(
            serde_json::from_str(text).expect("the macro wrote JSON"),
        )],
        None if case.origin.starts_with("suite") => vec![None],
        None => corpus::INPUTS
            .iter()
            .map(|text| Some(serde_json::from_str(text).expect("the macro wrote JSON")))
            .chain([None])
            .collect(),
    }
}

fn bindings(case: &Case) -> Vec<(String, Value)> {
    let mut bound: Vec<(String, Value)> = match serde_json::from_str(case.bindings) {
        Ok(Value::Object(map)) => map.into_iter().collect(),
        _ => Vec::new(),
    };
    if !case.origin.starts_with("suite") {
        bound.push(("item".into(), json!({"a": 1, "list": [1, 2], "s": "é"})));
        bound.push(("index".into(), json!(3)));
    }
    bound
}

#[test]
fn compiled_expressions_answer_as_the_interpreter() {
    let mut compared = 0;
    let mut compiled = [0usize; 3];
    let mut all = [0usize; 3];
    let mut differences = Vec::new();
    let mut reasons = std::collections::BTreeMap::new();
    let history = history();
    for case in corpus::CASES {
        let kind = match case.origin.split(' ').next() {
            Some("suite") => 0,
            Some("graph") => 1,
            _ => 2,
        };
        all[kind] += 1;
        let Some(native) = case.native else {
            *reasons.entry((kind, case.why)).or_insert(0usize) += 1;
            continue;
        };
        compiled[kind] += 1;
        let bound = bindings(case);
        for data in inputs(case) {
            let (interpreted, native) =
                both_ways(case.source, native, data.as_ref(), &bound, &history)
                    .expect("a compiled expression parses");
            compared += 1;
            if !same(&interpreted, &native) {
                let mut input = data.map_or("undefined".into(), |d| d.to_string());
                if input.len() > 200 {
                    input = format!("{}...", &input[..input.floor_char_boundary(200)]);
                }
                differences.push(format!(
                    "{}: `{}` on {input}:\n  interpreted {}\n  compiled    {}",
                    case.origin,
                    case.source,
                    shown(&interpreted),
                    shown(&native),
                ));
            }
        }
    }
    println!(
        "compiled: suite {}/{}, graphs {}/{}, generated {}/{}; {compared} evaluations compared",
        compiled[0], all[0], compiled[1], all[1], compiled[2], all[2]
    );
    let mut reasons: Vec<_> = reasons.into_iter().collect();
    reasons.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    for ((kind, why), n) in reasons.iter().take(25) {
        println!(
            "  interpreted ({}): {n} × {why}",
            ["suite", "graphs", "generated"][*kind]
        );
    }
    assert!(
        differences.is_empty(),
        "{} differences, the first:\n{}",
        differences.len(),
        differences[..differences.len().min(15)].join("\n")
    );
    // The comparison covers what it claims: most graph and generated expressions compile, and
    // a good part of the JSONata suite is in the subset.
    assert!(compiled[0] >= 300, "suite cases compiled: {}", compiled[0]);
    assert!(
        compiled[1] * 10 >= all[1] * 7,
        "graph expressions compiled: {}/{}",
        compiled[1],
        all[1]
    );
    assert!(
        compiled[2] * 10 >= all[2] * 6,
        "generated expressions compiled: {}/{}",
        compiled[2],
        all[2]
    );
}
