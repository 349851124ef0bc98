//! One expression, rule, argument template or downstream call, outside any run: what the
//! toolkit's `testJSONata`, `testJSONLogic` and `testMcpTool` try out, with the evaluator, the
//! JSON Logic semantics and the client a run uses (so a test gives what a node would give).

use crate::downstream::Downstream;
use crate::failure::Failure;
use crate::history::{History, Record};
use crate::jsonata::{Jsonata, Settings, message};
use crate::jsonlogic::{self, LogicError, Vars};
use crate::value::{to_json, to_jvalue};
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Expr, NodeId, Server, ServerId};
use mcpgraph_compiler::logic::{self, Problem, VarMode};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// The longest one trial evaluation may take: an expression that never ends must not hold the
/// caller forever.
const EVALUATION_LIMIT_MS: u64 = 10_000;

/// Why a trial failed: the text does not parse, or its evaluation failed. Each message is in
/// the original toolkit's words.
#[derive(Debug, Clone, PartialEq)]
pub enum EvaluateError {
    Syntax(String),
    Evaluation(String),
}

impl EvaluateError {
    pub fn message(&self) -> &str {
        match self {
            EvaluateError::Syntax(m) | EvaluateError::Evaluation(m) => m,
        }
    }
}

/// An evaluator whose history functions read `history` (`(nodeId, output)` records, oldest
/// first), as a node that ran after them would.
fn evaluator(history: &[(String, Value)]) -> Jsonata {
    evaluator_with(history, &[])
}

/// [`evaluator`] with `$name` variables bound.
fn evaluator_with(history: &[(String, Value)], bindings: &[(String, Value)]) -> Jsonata {
    let mut names: HashMap<String, NodeId> = HashMap::new();
    for (id, _) in history {
        let next = NodeId(names.len() as u32);
        names.entry(id.clone()).or_insert(next);
    }
    let names = Arc::new(names);
    let mut records = History::new(names.clone(), names.len());
    for (id, output) in history {
        let node = names.get(id).copied().unwrap_or(NodeId(0));
        let record = Record {
            node,
            output: to_jvalue(output),
            start: Duration::ZERO,
            duration: Duration::ZERO,
            attempts: None,
        };
        records.push(id, record);
    }
    let shared = Rc::new(RefCell::new(records));
    let settings = Settings {
        timeout_ms: Some(EVALUATION_LIMIT_MS),
        bindings: bindings
            .iter()
            .map(|(name, value)| (name.clone(), to_jvalue(value)))
            .collect(),
        ..Settings::default()
    };
    Jsonata::new(Some(&shared), settings)
}

/// `expression` against `context`; `None` for JSONata's undefined.
pub fn evaluate_jsonata(
    expression: &str,
    context: &Value,
    history: &[(String, Value)],
) -> Result<Option<Value>, EvaluateError> {
    let expr = Expr::parse(expression)
        .map_err(|m| EvaluateError::Syntax(format!("Invalid JSONata syntax: {}", message(&m))))?;
    let value = evaluator(history)
        .eval(&expr, &to_jvalue(context))
        .map_err(|e| EvaluateError::Evaluation(e.to_string()))?;
    Ok(to_json(&value))
}

/// A switch rule against `context`, as a switch node tests it: each graph-level `var` is JSONata
/// (with the history functions), the value converted with JavaScript `Boolean()`.
pub fn evaluate_logic(
    rule: &Value,
    context: &Value,
    history: &[(String, Value)],
) -> Result<bool, EvaluateError> {
    let (tree, problems) = logic::parse(rule, VarMode::Graph);
    if let Some((_, problem)) = problems
        .iter()
        .find(|(_, p)| !matches!(p, Problem::UnknownOperator(_)))
    {
        return Err(EvaluateError::Syntax(match problem {
            Problem::VarSyntax(var, text) => format!(
                "Invalid JSONata in JSON Logic var operation \"{var}\": Invalid JSONata syntax: {}",
                message(text)
            ),
            Problem::VarNotString(what) => {
                format!(
                    "Invalid JSON Logic var operation: the operand must be a string, not {what}"
                )
            }
            Problem::UnknownOperator(op) => format!("Unrecognized operation {op}"),
        }));
    }
    let data = to_jvalue(context);
    let mut vars = TrialVars {
        jsonata: evaluator(history),
        context: &data,
    };
    let value = jsonlogic::apply(&tree, &data, &mut vars).map_err(|text| {
        let rule_text = serde_json::to_string_pretty(rule).unwrap_or_default();
        EvaluateError::Evaluation(format!(
            "JSON Logic evaluation failed: {text}\nRule: {rule_text}"
        ))
    })?;
    Ok(crate::js::boolean(&value))
}

struct TrialVars<'a> {
    jsonata: Jsonata,
    context: &'a JValue,
}

impl Vars for TrialVars<'_> {
    fn var(&mut self, expr: &Expr) -> Result<JValue, LogicError> {
        Ok(self.jsonata.eval(expr, self.context)?)
    }
}

/// An mcp node's `args` evaluated against `context` (0.1.32's form): each `{expr: "<JSONata>"}`
/// is replaced by its value, a key whose value is undefined is dropped; whether any `{expr}`
/// was found comes with it.
pub fn evaluate_args(args: &Value, context: &Value) -> Result<(Value, bool), EvaluateError> {
    let mut jsonata = evaluator(&[]);
    let data = to_jvalue(context);
    let mut found = false;
    let value = template(args, "args", &mut jsonata, &data, &mut found)?;
    Ok((value.unwrap_or(Value::Null), found))
}

fn template(
    value: &Value,
    path: &str,
    jsonata: &mut Jsonata,
    data: &JValue,
    found: &mut bool,
) -> Result<Option<Value>, EvaluateError> {
    match value {
        Value::Object(map) if map.contains_key("expr") => {
            if map.len() > 1 {
                let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                return Err(EvaluateError::Syntax(format!(
                    "Invalid expression object at {path}: object with \"expr\" property must have only that property. Found keys: {}",
                    keys.join(", ")
                )));
            }
            let source = match &map["expr"] {
                Value::String(s) => s,
                other => {
                    return Err(EvaluateError::Evaluation(format!(
                        "Invalid expression object: \"expr\" property must be a string, got {}",
                        js_type(other)
                    )));
                }
            };
            *found = true;
            let expr = Expr::parse(source).map_err(|m| {
                EvaluateError::Syntax(format!(
                    "Invalid JSONata syntax in {path}.expr: Invalid JSONata syntax: {}",
                    message(&m)
                ))
            })?;
            let value = jsonata
                .eval(&expr, data)
                .map_err(|e| EvaluateError::Evaluation(e.to_string()))?;
            Ok(to_json(&value))
        }
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, item) in map {
                if let Some(v) = template(item, &format!("{path}.{key}"), jsonata, data, found)? {
                    out.insert(key.clone(), v);
                }
            }
            Ok(Some(Value::Object(out)))
        }
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                // JSON has no undefined: an array keeps its place with null.
                let v = template(item, &format!("{path}[{i}]"), jsonata, data, found)?;
                out.push(v.unwrap_or(Value::Null));
            }
            Ok(Some(Value::Array(out)))
        }
        other => Ok(Some(other.clone())),
    }
}

/// JavaScript's `typeof` of a JSON value (`null` is `object`).
fn js_type(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Null | Value::Array(_) | Value::Object(_) => "object",
    }
}

/// Calls `tool` of `server` once on a fresh connection, closed afterwards; the output as an mcp
/// node would see it (`None`: undefined, a result without content).
pub async fn call_tool_once(
    server: &Server,
    tool: &str,
    args: Map<String, Value>,
) -> Result<Option<Value>, Failure> {
    let downstream = Downstream::new(vec![server.clone()]);
    let runtime = tokio::runtime::Handle::current();
    // JSON before the next await: a run's values are not `Send`.
    let outcome = downstream
        .call(
            &runtime,
            ServerId(0),
            tool,
            args,
            server.timeout_ms,
            None,
            None::<&fn(&str, Duration)>,
        )
        .await
        .map(|v| to_json(&v));
    downstream.shutdown().await;
    outcome
}

/// One answer of [`both_ways`].
pub type Evaluated = Result<JValue, crate::jsonata::EvalError>;

/// `source` evaluated against `data` twice, by the interpreter and by its compiled `native`
/// function, each with `bindings` bound and the history functions over `history`: the
/// differential tests' two answers, interpreted first.
#[doc(hidden)]
pub fn both_ways(
    source: &str,
    native: mcpgraph_compiler::expr::NativeFn,
    data: Option<&Value>,
    bindings: &[(String, Value)],
    history: &[(String, Value)],
) -> Result<(Evaluated, Evaluated), String> {
    let interpreted = Expr::parse(source)?;
    let mut compiled = interpreted.clone();
    compiled.native = Some(native);
    let data = data.map_or(JValue::Undefined, to_jvalue);
    let run = |expr: &Expr| evaluator_with(history, bindings).eval(expr, &data);
    Ok((run(&interpreted), run(&compiled)))
}
