//! JSON Logic evaluation with json-logic-js 2.0.5's semantics, JavaScript coercions included.
//!
//! Rules arrive parsed (`mcpgraph_compiler::logic::Rule`). A graph-level `var` is a JSONata
//! expression, evaluated lazily through `vars` only when the branch holding it is evaluated; its
//! value is data, never read again as a rule. Inside iterator bodies `var` is the standard
//! item-relative lookup.

use crate::failure::FailureKind;
use crate::js;
use crate::jsonata::EvalError;
use crate::value::to_jvalue;
use indexmap::IndexMap;
use jsonata_core::value::JValue;
use mcpgraph_compiler::expr::RuleFailure;
use mcpgraph_compiler::ir::Expr;
use mcpgraph_compiler::logic::{Op, Rule};

/// Evaluates graph-level vars (JSONata over the graph context).
pub trait Vars {
    fn var(&mut self, expr: &Expr) -> Result<JValue, LogicError>;
}

/// For rules without graph-level vars (the compatibility suites).
pub struct NoVars;

impl Vars for NoVars {
    fn var(&mut self, expr: &Expr) -> Result<JValue, LogicError> {
        Err(LogicError::Rule(format!(
            "no graph context for var {:?}",
            expr.source
        )))
    }
}

/// Why a rule could not be applied. The kind travels with it: a `var` whose evaluation the run
/// interrupted (its time limit, a cancellation) is not the rule's failure.
#[derive(Debug, Clone, PartialEq)]
pub enum LogicError {
    /// json-logic-js's own failure, in its words (`Unrecognized operation x`).
    Rule(String),
    /// A graph-level `var` (JSONata) failed.
    Var(EvalError),
}

impl LogicError {
    pub fn kind(&self) -> FailureKind {
        match self {
            LogicError::Rule(_) => FailureKind::Expression,
            LogicError::Var(error) => error.kind(),
        }
    }
}

impl std::fmt::Display for LogicError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogicError::Rule(message) => f.write_str(message),
            LogicError::Var(error) => error.fmt(f),
        }
    }
}

impl From<EvalError> for LogicError {
    fn from(error: EvalError) -> LogicError {
        LogicError::Var(error)
    }
}

/// A rule compiled to Rust (`native::NativeRule`) applied to `data`, its graph-level vars
/// evaluated by `jsonata`, its failure as [`apply`]'s.
pub fn native(
    rule: mcpgraph_compiler::expr::NativeRuleFn,
    jsonata: &mut crate::jsonata::Jsonata,
    data: &JValue,
) -> Result<JValue, LogicError> {
    rule(jsonata, data).map_err(|failure| match failure {
        RuleFailure::Rule(message) => LogicError::Rule(message),
        RuleFailure::Var { error, source } => {
            LogicError::Var(crate::jsonata::eval_error(&error, source))
        }
    })
}

/// `apply(rule, data)`. Errors carry json-logic-js's message (e.g. `Unrecognized operation x`).
pub fn apply(rule: &Rule, data: &JValue, vars: &mut dyn Vars) -> Result<JValue, LogicError> {
    match rule {
        Rule::Literal(v) => Ok(to_jvalue(v)),
        Rule::Array(items) => items
            .iter()
            .map(|r| apply(r, data, vars))
            .collect::<Result<Vec<_>, _>>()
            .map(JValue::array),
        Rule::Jsonata(expr) => vars.var(expr),
        Rule::Unknown(op) => Err(LogicError::Rule(format!("Unrecognized operation {op}"))),
        Rule::Op { op, args } => operation(*op, args, data, vars),
    }
}

fn arg(args: &[Rule], i: usize, data: &JValue, vars: &mut dyn Vars) -> Result<JValue, LogicError> {
    match args.get(i) {
        Some(r) => apply(r, data, vars),
        None => Ok(JValue::Undefined),
    }
}

fn operation(
    op: Op,
    args: &[Rule],
    data: &JValue,
    vars: &mut dyn Vars,
) -> Result<JValue, LogicError> {
    // The lazy operators first: they evaluate only what they need.
    match op {
        Op::If => {
            let mut i = 0;
            while i + 1 < args.len() {
                if truthy(&apply(&args[i], data, vars)?) {
                    return apply(&args[i + 1], data, vars);
                }
                i += 2;
            }
            return if args.len() == i + 1 {
                apply(&args[i], data, vars)
            } else {
                Ok(JValue::Null)
            };
        }
        Op::And | Op::Or => {
            let mut current = JValue::Undefined;
            for a in args {
                current = apply(a, data, vars)?;
                if truthy(&current) == (op == Op::Or) {
                    return Ok(current);
                }
            }
            return Ok(current);
        }
        Op::Filter | Op::Some | Op::None => {
            let scoped = arg(args, 0, data, vars)?;
            let mut kept = Vec::new();
            if let JValue::Array(items) = &scoped {
                for item in items.iter() {
                    if truthy(&arg(args, 1, item, vars)?) {
                        kept.push(item.clone());
                    }
                }
            }
            return Ok(match op {
                Op::Some => JValue::Bool(!kept.is_empty()),
                Op::None => JValue::Bool(kept.is_empty()),
                _ => JValue::array(kept),
            });
        }
        Op::Map => {
            let scoped = arg(args, 0, data, vars)?;
            let JValue::Array(items) = &scoped else {
                return Ok(JValue::array(Vec::new()));
            };
            return items
                .iter()
                .map(|item| arg(args, 1, item, vars))
                .collect::<Result<Vec<_>, _>>()
                .map(JValue::array);
        }
        Op::Reduce => {
            let scoped = arg(args, 0, data, vars)?;
            let initial = match args.get(2) {
                Some(r) => apply(r, data, vars)?,
                None => JValue::Null,
            };
            let JValue::Array(items) = &scoped else {
                return Ok(initial);
            };
            let mut accumulator = initial;
            for item in items.iter() {
                let mut scope = IndexMap::with_capacity(2);
                scope.insert("current".to_string(), item.clone());
                scope.insert("accumulator".to_string(), accumulator);
                accumulator = arg(args, 1, &JValue::object(scope), vars)?;
            }
            return Ok(accumulator);
        }
        Op::All => {
            let scoped = arg(args, 0, data, vars)?;
            let items: Vec<JValue> = match &scoped {
                JValue::Array(items) => items.iter().cloned().collect(),
                JValue::String(s) => js::code_unit_strings(s)
                    .into_iter()
                    .map(JValue::string)
                    .collect(),
                _ => Vec::new(),
            };
            if items.is_empty() {
                return Ok(JValue::Bool(false));
            }
            for item in &items {
                if !truthy(&arg(args, 1, item, vars)?) {
                    return Ok(JValue::Bool(false));
                }
            }
            return Ok(JValue::Bool(true));
        }
        _ => {}
    }

    // Every other operator evaluates all its arguments first.
    let values = args
        .iter()
        .map(|a| apply(a, data, vars))
        .collect::<Result<Vec<_>, _>>()?;
    eager(op, &values, data)
}

/// An operator that evaluates all its arguments first, applied to their values over `data`
/// (what `var` and `missing` read); also what compiled rules call.
pub fn eager(op: Op, values: &[JValue], data: &JValue) -> Result<JValue, LogicError> {
    let v = |i: usize| values.get(i).cloned().unwrap_or(JValue::Undefined);
    Ok(match op {
        Op::Eq => JValue::Bool(js::loose_eq(&v(0), &v(1))),
        Op::NotEq => JValue::Bool(!js::loose_eq(&v(0), &v(1))),
        Op::StrictEq => JValue::Bool(js::strict_eq(&v(0), &v(1))),
        Op::StrictNotEq => JValue::Bool(!js::strict_eq(&v(0), &v(1))),
        Op::Gt => JValue::Bool(js::less_than(&v(1), &v(0)) == Some(true)),
        Op::Ge => JValue::Bool(js::less_than(&v(0), &v(1)) == Some(false)),
        Op::Lt | Op::Le => {
            let cmp = |a: &JValue, b: &JValue| {
                if op == Op::Lt {
                    js::less_than(a, b) == Some(true)
                } else {
                    js::less_than(b, a) == Some(false)
                }
            };
            let c = v(2);
            if c.is_undefined() {
                JValue::Bool(cmp(&v(0), &v(1)))
            } else {
                JValue::Bool(cmp(&v(0), &v(1)) && cmp(&v(1), &c))
            }
        }
        Op::NotNot => JValue::Bool(truthy(&v(0))),
        Op::Not => JValue::Bool(!truthy(&v(0))),
        Op::Mod => JValue::Number(js::to_number(&v(0)) % js::to_number(&v(1))),
        Op::Log => {
            tracing::info!(target: "mcpgraph::jsonlogic", value = %js::to_string(&v(0)), "log");
            v(0)
        }
        Op::In => JValue::Bool(js_in(&v(0), &v(1))),
        Op::Cat => JValue::string(values.iter().map(js::to_string_in_join).collect::<String>()),
        Op::Substr => substr(&v(0), &v(1), &v(2)),
        Op::Add => JValue::Number(
            values
                .iter()
                .fold(0.0, |acc, x| acc + js::parse_float(&js::to_string(x))),
        ),
        Op::Mul => {
            let Some((first, rest)) = values.split_first() else {
                return Err(LogicError::Rule(
                    "Reduce of empty array with no initial value".into(),
                ));
            };
            if rest.is_empty() {
                return Ok(first.clone());
            }
            let mut acc = js::parse_float(&js::to_string(first));
            for x in rest {
                acc *= js::parse_float(&js::to_string(x));
            }
            JValue::Number(acc)
        }
        Op::Sub => {
            if v(1).is_undefined() {
                JValue::Number(-js::to_number(&v(0)))
            } else {
                JValue::Number(js::to_number(&v(0)) - js::to_number(&v(1)))
            }
        }
        Op::Div => JValue::Number(js::to_number(&v(0)) / js::to_number(&v(1))),
        Op::Min | Op::Max => {
            let mut acc = if op == Op::Min {
                f64::INFINITY
            } else {
                f64::NEG_INFINITY
            };
            for x in values {
                let n = js::to_number(x);
                if n.is_nan() {
                    acc = f64::NAN;
                    break;
                }
                acc = if op == Op::Min {
                    acc.min(n)
                } else {
                    acc.max(n)
                };
            }
            JValue::Number(acc)
        }
        Op::Merge => {
            let mut out = Vec::new();
            for x in values {
                match x {
                    JValue::Array(items) => out.extend(items.iter().cloned()),
                    other => out.push(other.clone()),
                }
            }
            JValue::array(out)
        }
        Op::Var => var(data, &v(0), &v(1)),
        Op::Missing => missing(data, values),
        Op::MissingSome => {
            let need = js::to_number(&v(0));
            let options = v(1);
            let are_missing = missing(data, std::slice::from_ref(&options));
            let total = match &options {
                JValue::Array(items) => items.len(),
                JValue::String(s) => js::utf16_units(s).len(),
                _ => 0,
            };
            let missing_count = match &are_missing {
                JValue::Array(items) => items.len(),
                _ => 0,
            };
            if (total as f64 - missing_count as f64) >= need {
                JValue::array(Vec::new())
            } else {
                are_missing
            }
        }
        // Handled above.
        Op::If
        | Op::And
        | Op::Or
        | Op::Filter
        | Op::Some
        | Op::None
        | Op::Map
        | Op::Reduce
        | Op::All => JValue::Undefined,
    })
}

/// JSON Logic's truthiness: JavaScript's, except that an empty array is false.
pub fn truthy(value: &JValue) -> bool {
    match value {
        JValue::Array(items) => !items.is_empty(),
        other => js::boolean(other),
    }
}

/// The standard `var`: a dotted path into `data`, or `data` itself for `""`/null.
fn var(data: &JValue, path: &JValue, default: &JValue) -> JValue {
    let not_found = if default.is_undefined() {
        JValue::Null
    } else {
        default.clone()
    };
    match path {
        JValue::Undefined | JValue::Null => return data.clone(),
        JValue::String(s) if s.is_empty() => return data.clone(),
        _ => {}
    }
    let text = js::to_string(path);
    let mut current = data.clone();
    for prop in text.split('.') {
        if matches!(current, JValue::Null | JValue::Undefined) {
            return not_found;
        }
        current = js::property(&current, prop);
        if current.is_undefined() {
            return not_found;
        }
    }
    current
}

fn missing(data: &JValue, values: &[JValue]) -> JValue {
    let keys: Vec<JValue> = match values.first() {
        Some(JValue::Array(items)) => items.iter().cloned().collect(),
        _ => values.to_vec(),
    };
    let mut out = Vec::new();
    for key in keys {
        let value = var(data, &key, &JValue::Undefined);
        let absent =
            matches!(&value, JValue::Null) || matches!(&value, JValue::String(s) if s.is_empty());
        if absent {
            out.push(key);
        }
    }
    JValue::array(out)
}

fn js_in(needle: &JValue, haystack: &JValue) -> bool {
    if !js::boolean(haystack) {
        return false;
    }
    match haystack {
        JValue::String(s) => s.contains(js::to_string(needle).as_str()),
        JValue::Array(items) => items.iter().any(|x| js::strict_eq(x, needle)),
        _ => false,
    }
}

/// `String(source).substr(start, end)`, with json-logic-js's negative `end`.
fn substr(source: &JValue, start: &JValue, end: &JValue) -> JValue {
    let units = js::utf16_units(&js::to_string(source));
    let sub = |units: &[u16], start: &JValue, length: Option<&JValue>| -> Vec<u16> {
        let size = units.len() as f64;
        let mut s = js::to_integer(start);
        if s < 0.0 {
            s = (size + s).max(0.0);
        }
        let s = s.min(size);
        let len = match length {
            None => size - s,
            Some(l) => js::to_integer(l).clamp(0.0, size - s),
        };
        units[s as usize..(s + len) as usize].to_vec()
    };
    let end_number = if end.is_undefined() {
        f64::NAN
    } else {
        js::to_number(end)
    };
    let out = if end_number < 0.0 {
        let temp = sub(&units, start, None);
        let keep = JValue::Number(temp.len() as f64 + end_number);
        sub(&temp, &JValue::Number(0.0), Some(&keep))
    } else if end.is_undefined() {
        sub(&units, start, None)
    } else {
        sub(&units, start, Some(end))
    };
    JValue::string(String::from_utf16_lossy(&out))
}
