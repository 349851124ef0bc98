//! Every case of the JSON Logic compatibility suites, against the answer json-logic-js 2.0.5 (the
//! original's engine, our reference) gives: a result, `undefined`, a non-finite number, or an
//! error (any error matches an error).

use jsonata_core::value::JValue;
use mcpgraph_compiler::logic::{self, VarMode};
use mcpgraph_runtime::internals::{NoVars, apply};
use mcpgraph_runtime::internals::{to_json, to_jvalue};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn answers_path() -> PathBuf {
    let shared = std::env::var_os("MCPGRAPH_SHARED").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
        PathBuf::from,
    );
    shared.join("conformance/jsonlogic-js-answers.json")
}

fn same(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len() && a.iter().all(|(k, v)| b.get(k).is_some_and(|w| same(v, w)))
        }
        _ => got == want,
    }
}

fn judge(got: &Result<JValue, String>, js: &Value) -> Option<String> {
    let (kind, expected) = js.as_object().and_then(|o| o.iter().next())?;
    match (kind.as_str(), got) {
        ("error", Err(_)) => None,
        ("error", Ok(v)) => Some(format!(
            "got {:?}, json-logic-js throws {expected}",
            to_json(v)
        )),
        (_, Err(e)) => Some(format!("error {e:?}, json-logic-js answers {js}")),
        ("undefined", Ok(JValue::Undefined)) => None,
        ("number", Ok(JValue::Number(n))) => {
            let text = if n.is_nan() {
                "NaN"
            } else if *n == f64::INFINITY {
                "Infinity"
            } else if *n == f64::NEG_INFINITY {
                "-Infinity"
            } else {
                "finite"
            };
            (expected.as_str() != Some(text))
                .then(|| format!("got {n}, json-logic-js answers {js}"))
        }
        ("result", Ok(v)) => match to_json(v) {
            Some(got) if same(&got, expected) && !v.is_undefined() => None,
            got => Some(format!("got {got:?}, json-logic-js answers {expected}")),
        },
        (_, Ok(v)) => Some(format!("got {:?}, json-logic-js answers {js}", to_json(v))),
    }
}

#[test]
fn json_logic_answers_match_json_logic_js() {
    let text = std::fs::read_to_string(answers_path())
        .expect("jsonlogic-js-answers.json is in ../shared/conformance");
    let cases: Vec<Value> = serde_json::from_str(&text).expect("valid JSON");
    let mut failures = Vec::new();
    let mut compatible = (0, 0);
    for case in &cases {
        let rule = &case["rule"];
        let data = case.get("data").map_or(JValue::Null, to_jvalue);
        let (tree, _problems) = logic::parse(rule, VarMode::Standard);
        let got = apply(&tree, &data, &mut NoVars).map_err(|e| e.to_string());
        let verdict = judge(&got, &case["js"]);
        if case["suite"] == "compatible.json" {
            compatible.1 += 1;
            if verdict.is_none() {
                compatible.0 += 1;
            }
        }
        if let Some(why) = verdict {
            failures.push(format!(
                "{} #{} {} data={}: {why}",
                case["suite"],
                case["index"],
                rule,
                case.get("data").unwrap_or(&Value::Null)
            ));
        }
    }
    let passed = cases.len() - failures.len();
    println!(
        "json logic: {passed}/{} match json-logic-js (compatible.json {}/{})",
        cases.len(),
        compatible.0,
        compatible.1
    );
    for f in &failures {
        println!("FAIL {f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from json-logic-js",
        failures.len(),
        cases.len()
    );
}
