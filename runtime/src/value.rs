//! Values at the boundaries: JSON in and out of the JSONata value type, and JSON text written as
//! JavaScript's `JSON.stringify` writes it.
//!
//! Inside a run every value is a jsonata-core `JValue` (cheap to clone, shared by the context and
//! the history); conversion happens only for tool arguments, downstream calls and results.

use indexmap::IndexMap;
use jsonata_core::evaluator::EvaluatorError;
use jsonata_core::value::JValue;
use serde_json::{Map, Number, Value};

/// JSON → JValue. Numbers become doubles, as in JavaScript.
pub fn to_jvalue(value: &Value) -> JValue {
    match value {
        Value::Null => JValue::Null,
        Value::Bool(b) => JValue::Bool(*b),
        Value::Number(n) => JValue::Number(n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => JValue::string(s.as_str()),
        Value::Array(items) => JValue::array(items.iter().map(to_jvalue).collect()),
        Value::Object(map) => {
            let m: IndexMap<String, JValue> =
                map.iter().map(|(k, v)| (k.clone(), to_jvalue(v))).collect();
            JValue::object(m)
        }
    }
}

/// JValue → JSON, as `JSON.stringify` would see it: integral numbers stay integers (`42`, never
/// `42.0`), non-finite numbers become `null`, `undefined` object members are dropped and
/// `undefined` array items become `null`. `None` for a top-level `undefined`.
pub fn to_json(value: &JValue) -> Option<Value> {
    Some(match value {
        JValue::Undefined => return None,
        JValue::Null => Value::Null,
        JValue::Bool(b) => Value::Bool(*b),
        JValue::Number(n) => number(*n),
        JValue::String(s) => Value::String(s.to_string()),
        JValue::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| to_json(v).unwrap_or(Value::Null))
                .collect(),
        ),
        JValue::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map.iter() {
                if let Some(v) = to_json(v) {
                    out.insert(k.clone(), v);
                }
            }
            Value::Object(out)
        }
        // JSON.stringify drops functions; jsonata-js's $string writes them as "". A function as
        // a value can only reach here inside a structure, where "" is the least surprising.
        JValue::Lambda(_) | JValue::Builtin { .. } | JValue::Regex { .. } => {
            Value::String(String::new())
        }
        #[allow(unreachable_patterns)]
        _ => Value::Null,
    })
}

/// About how many bytes `value`'s JSON text takes (strings exactly, a number as 8 bytes),
/// counted until the count passes `limit`: a result above `limit` means "larger than that", and
/// the count stopped there, so this costs O(1) for a string and at most O(`limit`) for the
/// rest, whatever the value. Shared parts count as often as they appear, as they do in the text
/// (and in the JSON a result becomes): a value built by sharing can be tiny in memory and huge
/// as text.
pub fn json_size(value: &JValue, limit: u64) -> u64 {
    fn own(value: &JValue) -> u64 {
        match value {
            JValue::String(s) => s.len() as u64 + 3,
            JValue::Array(items) => 2 + items.len() as u64,
            JValue::Object(map) => 2 + map.iter().map(|(k, _)| k.len() as u64 + 4).sum::<u64>(),
            JValue::Undefined => 0,
            _ => 8,
        }
    }
    let mut total = own(value);
    // A small array or object of scalars (most nodes' outputs): summed in place, in the order
    // and up to the point the walk below would.
    let scalar = |item: &JValue| !matches!(item, JValue::Array(_) | JValue::Object(_));
    let sum = |mut total: u64, items: &mut dyn Iterator<Item = &JValue>| {
        for item in items {
            if total > limit {
                break;
            }
            total += own(item);
        }
        total
    };
    match value {
        JValue::Array(items) if items.len() <= 256 && items.iter().all(scalar) => {
            return sum(total, &mut items.iter());
        }
        JValue::Object(map) if map.len() <= 256 && map.values().all(scalar) => {
            return sum(total, &mut map.values());
        }
        _ => {}
    }
    // Iterators, not items: a long array costs no stack space.
    type Pending<'a> = Vec<Box<dyn Iterator<Item = &'a JValue> + 'a>>;
    fn push<'a>(value: &'a JValue, pending: &mut Pending<'a>) {
        match value {
            JValue::Array(items) if !items.is_empty() => pending.push(Box::new(items.iter())),
            JValue::Object(map) if !map.is_empty() => {
                pending.push(Box::new(map.iter().map(|(_, v)| v)))
            }
            _ => {}
        }
    }
    let mut pending: Pending<'_> = Vec::new();
    push(value, &mut pending);
    while total <= limit {
        let Some(items) = pending.last_mut() else {
            break;
        };
        match items.next() {
            Some(item) => {
                total += own(item);
                push(item, &mut pending);
            }
            None => {
                pending.pop();
            }
        }
    }
    total
}

/// A double as JSON: an integer when it is one (and exactly representable), else a float.
pub fn number(n: f64) -> Value {
    if !n.is_finite() {
        return Value::Null;
    }
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        // -0 is written 0, as JavaScript does.
        return Value::from(n as i64);
    }
    Number::from_f64(n).map_or(Value::Null, Value::Number)
}

/// JavaScript's `Number.prototype.toString()` for a double.
pub fn js_number(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if x == 0.0 {
        return "0".into();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    // Shortest round-trip digits, in scientific form: "d.ddddde±n".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exponent + 1;
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e = if e >= 0 {
            format!("+{e}")
        } else {
            e.to_string()
        };
        if k == 1 {
            format!("{digits}e{e}")
        } else {
            format!("{}.{}e{e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

/// Compact JSON text with JavaScript's number formatting (`1e+21`, `1.5e-7`).
pub fn to_js_json(value: &Value) -> String {
    let mut out = String::new();
    write_js_json(value, &mut out);
    out
}

fn write_js_json(value: &Value, out: &mut String) {
    match value {
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.push_str(&i.to_string()),
            None => match n.as_u64() {
                Some(u) => out.push_str(&u.to_string()),
                None => out.push_str(&js_number(n.as_f64().unwrap_or(f64::NAN))),
            },
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_js_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_js_json(v, out);
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `a & b`: each side as `$string` casts it, undefined as "". Compiled code calls it
/// (native.rs); the interpreter's host `&` (jsonata.rs) calls it after its size check.
pub fn concat(left: &JValue, right: &JValue) -> Result<JValue, EvaluatorError> {
    let mut out = concat_string(left)?;
    out.push_str(&concat_string(right)?);
    Ok(JValue::string(out))
}

/// One side of `&`, as jsonata-core's evaluator converts it.
fn concat_string(value: &JValue) -> Result<String, EvaluatorError> {
    match value {
        JValue::String(s) => Ok(s.to_string()),
        JValue::Undefined => Ok(String::new()),
        JValue::Null
        | JValue::Number(_)
        | JValue::Bool(_)
        | JValue::Array(_)
        | JValue::Object(_) => match jsonata_core::functions::string::string(value, None) {
            Ok(JValue::String(s)) => Ok(s.to_string()),
            Ok(JValue::Null) => Ok(String::new()),
            _ => Err(EvaluatorError::TypeError(
                "Cannot concatenate complex types".to_string(),
            )),
        },
        _ => Ok(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container of scalars is sized as the walk over nested values sizes it: each item's
    /// JSON length, stopping at the first item that takes the total past the limit.
    #[test]
    fn sizes_stop_past_the_limit_whether_nested_or_not() {
        let long = "x".repeat(100);
        let flat = to_jvalue(&serde_json::json!([long, long, 1]));
        // 2 + 3 separators, then 103 per string, 8 per number.
        assert_eq!(json_size(&flat, u64::MAX), 219);
        assert_eq!(json_size(&flat, 150), 211);
        let nested = to_jvalue(&serde_json::json!([[long], long, 1]));
        // The inner array adds 2 + 1; the walk stops after the second string too.
        assert_eq!(json_size(&nested, u64::MAX), 222);
        assert_eq!(json_size(&nested, 150), 214);
        let object = to_jvalue(&serde_json::json!({"a": "x".repeat(10), "bb": 2}));
        assert_eq!(json_size(&object, u64::MAX), 2 + 5 + 6 + 13 + 8);
    }

    #[test]
    fn numbers_are_written_as_javascript_writes_them() {
        for (x, js) in [
            (42.0, "42"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1.5e-7, "1.5e-7"),
            (1e-6, "0.000001"),
            (1.0 / 3.0, "0.3333333333333333"),
            (-5.0, "-5"),
            (-0.0, "0"),
            (123.456, "123.456"),
            (2.5e-10, "2.5e-10"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
        ] {
            assert_eq!(js_number(x), js, "{x}");
        }
    }

    #[test]
    fn integral_results_stay_integers() {
        assert_eq!(to_json(&JValue::Number(42.0)), Some(serde_json::json!(42)));
        assert_eq!(to_json(&JValue::Number(2.5)), Some(serde_json::json!(2.5)));
        assert_eq!(to_json(&JValue::Undefined), None);
        let text = to_js_json(&serde_json::json!({"big": 1e21, "int": 6, "f": 0.5}));
        assert_eq!(text, r#"{"big":1e+21,"int":6,"f":0.5}"#);
    }
}
