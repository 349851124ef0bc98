//! The official JSONata test suite (`../shared/conformance/jsonata`) through our JSONata layer:
//! jsonata-core behind `mcpgraph_runtime::jsonata`, results converted by our JSON converter.

use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::Expr;
use mcpgraph_runtime::internals::{Jsonata, Settings, error_code};
use mcpgraph_runtime::internals::{to_json, to_jvalue};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn suite_dir() -> PathBuf {
    let shared = std::env::var_os("MCPGRAPH_SHARED").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
        PathBuf::from,
    );
    shared.join("conformance/jsonata")
}

/// Numbers compare as numbers (1 == 1.0); everything else structurally; `unordered` arrays as
/// multisets.
fn same(got: &Value, want: &Value, unordered: bool) -> bool {
    match (got, want) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            a == b || ((a - b).abs() <= 1e-12 * b.abs().max(1.0))
        }
        (Value::Array(a), Value::Array(b)) if unordered => {
            a.len() == b.len() && {
                let mut used = vec![false; b.len()];
                a.iter().all(|x| {
                    (0..b.len()).any(|j| {
                        if !used[j] && same(x, &b[j], false) {
                            used[j] = true;
                            true
                        } else {
                            false
                        }
                    })
                })
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y, false))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, v)| b.get(k).is_some_and(|w| same(v, w, false)))
        }
        _ => got == want,
    }
}

enum Outcome {
    Pass,
    Fail(String),
}

fn run_case(dir: &Path, case: &Value) -> Outcome {
    let group = dir;
    let expr_text = match (
        case.get("expr").and_then(Value::as_str),
        case.get("expr-file").and_then(Value::as_str),
    ) {
        (Some(e), _) => e.to_string(),
        (None, Some(file)) => match std::fs::read_to_string(group.join(file)) {
            Ok(t) => t,
            Err(e) => return Outcome::Fail(format!("expr-file: {e}")),
        },
        _ => return Outcome::Fail("no expression".into()),
    };
    let data = match case.get("data") {
        Some(d) => to_jvalue(d),
        None => match case.get("dataset").and_then(Value::as_str) {
            Some(name) => {
                let path = suite_dir().join("datasets").join(format!("{name}.json"));
                match std::fs::read_to_string(&path)
                    .ok()
                    .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                {
                    Some(v) => to_jvalue(&v),
                    None => return Outcome::Fail(format!("dataset {name}")),
                }
            }
            None => JValue::Undefined,
        },
    };
    let bindings = case
        .get("bindings")
        .and_then(Value::as_object)
        .map(|b| b.iter().map(|(k, v)| (k.clone(), to_jvalue(v))).collect())
        .unwrap_or_default();
    let settings = Settings {
        timeout_ms: case.get("timelimit").and_then(Value::as_u64),
        max_stack_depth: case
            .get("depth")
            .and_then(Value::as_u64)
            .map(|d| d as usize),
        bindings,
        ..Settings::default()
    };
    let expected_code = case.get("code").and_then(Value::as_str).or_else(|| {
        case.get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
    });
    let outcome = Expr::parse(&expr_text)
        .map_err(|message| (error_code(&message).map(str::to_string), message))
        .and_then(|expr| {
            let mut jsonata = Jsonata::new(None, settings);
            jsonata
                .eval(&expr, &data)
                .map_err(|e| (e.code.clone(), e.message))
        });
    match (outcome, expected_code) {
        (Err((code, message)), Some(want)) => {
            if code.as_deref() == Some(want) {
                Outcome::Pass
            } else {
                Outcome::Fail(format!("error {code:?} ({message}), expected code {want}"))
            }
        }
        (Err((_, message)), None) => Outcome::Fail(format!("error: {message}")),
        (Ok(v), Some(want)) => Outcome::Fail(format!("{:?}, expected error {want}", to_json(&v))),
        (Ok(v), None) => {
            if case.get("undefinedResult").and_then(Value::as_bool) == Some(true) {
                return if v.is_undefined() {
                    Outcome::Pass
                } else {
                    Outcome::Fail(format!("{:?}, expected undefined", to_json(&v)))
                };
            }
            let Some(want) = case.get("result") else {
                return Outcome::Fail("case has no expectation".into());
            };
            let unordered = case.get("unordered").and_then(Value::as_bool) == Some(true);
            match to_json(&v) {
                Some(got) if same(&got, want, unordered) => Outcome::Pass,
                got => Outcome::Fail(format!("{got:?}, expected {want}")),
            }
        }
    }
}

#[test]
fn official_jsonata_suite() {
    let groups = suite_dir().join("groups");
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&groups)
        .expect("the JSONata suite is at ../shared/conformance/jsonata")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let (mut passed, mut testable) = (0, 0);
    let mut failures = Vec::new();
    let mut untestable = Vec::new();
    for group in entries {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&group)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let name = file
                .strip_prefix(&groups)
                .unwrap_or(&file)
                .display()
                .to_string();
            let cases: Vec<Value> = match serde_json::from_str::<Value>(&text) {
                Ok(Value::Array(items)) => items,
                Ok(one) => vec![one],
                // serde_json refuses lone surrogates (\ud800), which no Rust string can hold.
                Err(e) if text.contains("\\ud8") || text.contains("\\uD8") => {
                    untestable.push(format!("{name}: lone UTF-16 surrogate ({e})"));
                    continue;
                }
                Err(e) => {
                    testable += 1;
                    failures.push(format!("{name}: unreadable: {e}"));
                    continue;
                }
            };
            for (i, case) in cases.iter().enumerate() {
                match run_case(&group, case) {
                    Outcome::Pass => {
                        testable += 1;
                        passed += 1;
                    }
                    Outcome::Fail(why) => {
                        testable += 1;
                        failures.push(format!(
                            "{name}[{i}] {}: {why}",
                            case.get("expr")
                                .and_then(Value::as_str)
                                .unwrap_or("(expr-file)")
                        ));
                    }
                }
            }
        }
    }
    println!("jsonata suite: {passed}/{testable}");
    println!("not testable in Rust: {}", untestable.join("; "));
    for f in &failures {
        println!("FAIL {f}");
    }
    assert!(
        passed >= 1680,
        "jsonata suite: {passed}/{testable}, below 1680"
    );
}
