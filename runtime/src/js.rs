//! JavaScript's coercions over JValue, as json-logic-js relies on them: `Boolean()`, `Number()`,
//! `String()`, `parseFloat`, `==`, `===` and the relational comparison.

use crate::value::js_number;
use jsonata_core::value::JValue;

/// JavaScript `Boolean(value)`.
pub fn boolean(value: &JValue) -> bool {
    match value {
        JValue::Undefined | JValue::Null => false,
        JValue::Bool(b) => *b,
        JValue::Number(n) => !(*n == 0.0 || n.is_nan()),
        JValue::String(s) => !s.is_empty(),
        _ => true,
    }
}

/// UTF-16 code units of a string (JavaScript string indices).
pub fn utf16_units(s: &str) -> Vec<u16> {
    s.encode_utf16().collect()
}

/// A string's elements as JavaScript sees them (one per code unit).
pub fn code_unit_strings(s: &str) -> Vec<String> {
    utf16_units(s)
        .chunks(1)
        .map(String::from_utf16_lossy)
        .collect()
}

/// JavaScript `String(value)`.
pub fn to_string(value: &JValue) -> String {
    match value {
        JValue::Undefined => "undefined".into(),
        JValue::Null => "null".into(),
        JValue::Bool(b) => b.to_string(),
        JValue::Number(n) => js_number(*n),
        JValue::String(s) => s.to_string(),
        JValue::Array(items) => items
            .iter()
            .map(to_string_in_join)
            .collect::<Vec<_>>()
            .join(","),
        JValue::Object(_) => "[object Object]".into(),
        _ => String::new(),
    }
}

/// How `Array.prototype.join` writes an element: null and undefined as "".
pub fn to_string_in_join(value: &JValue) -> String {
    match value {
        JValue::Undefined | JValue::Null => String::new(),
        other => to_string(other),
    }
}

/// JavaScript `Number(value)`.
pub fn to_number(value: &JValue) -> f64 {
    match value {
        JValue::Undefined => f64::NAN,
        JValue::Null => 0.0,
        JValue::Bool(b) => f64::from(u8::from(*b)),
        JValue::Number(n) => *n,
        JValue::String(s) => string_to_number(s),
        JValue::Array(_) | JValue::Object(_) => string_to_number(&to_string(value)),
        _ => f64::NAN,
    }
}

fn is_js_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{feff}'
}

/// JavaScript's StringToNumber.
pub fn string_to_number(s: &str) -> f64 {
    let t = s.trim_matches(is_js_space);
    if t.is_empty() {
        return 0.0;
    }
    match t {
        "Infinity" | "+Infinity" => return f64::INFINITY,
        "-Infinity" => return f64::NEG_INFINITY,
        _ => {}
    }
    for (prefix, radix) in [
        ("0x", 16),
        ("0X", 16),
        ("0o", 8),
        ("0O", 8),
        ("0b", 2),
        ("0B", 2),
    ] {
        if let Some(digits) = t.strip_prefix(prefix) {
            return if !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix)) {
                digits.chars().fold(0.0, |acc, c| {
                    acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
                })
            } else {
                f64::NAN
            };
        }
    }
    if decimal_prefix(t) == t.len() {
        t.parse().unwrap_or(f64::NAN)
    } else {
        f64::NAN
    }
}

/// Length of the longest prefix of `s` that is a JavaScript StrDecimalLiteral (without Infinity).
fn decimal_prefix(s: &str) -> usize {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        let frac_start = i + 1;
        let mut j = frac_start;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        digits += j - frac_start;
        if digits > 0 {
            i = j;
        }
    }
    if digits == 0 {
        return 0;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            i = j;
        }
    }
    i
}

/// JavaScript `parseFloat(string)`.
pub fn parse_float(s: &str) -> f64 {
    let t = s.trim_start_matches(is_js_space);
    for (word, value) in [
        ("Infinity", f64::INFINITY),
        ("+Infinity", f64::INFINITY),
        ("-Infinity", f64::NEG_INFINITY),
    ] {
        if t.starts_with(word) {
            return value;
        }
    }
    let n = decimal_prefix(t);
    if n == 0 {
        return f64::NAN;
    }
    t[..n].parse().unwrap_or(f64::NAN)
}

/// ToIntegerOrInfinity.
pub fn to_integer(value: &JValue) -> f64 {
    let n = to_number(value);
    if n.is_nan() { 0.0 } else { n.trunc() }
}

/// `value[prop]` for the values JSON Logic reads.
pub fn property(value: &JValue, prop: &str) -> JValue {
    match value {
        JValue::Object(map) => map.get(prop).cloned().unwrap_or(JValue::Undefined),
        JValue::Array(items) => {
            if prop == "length" {
                return JValue::Number(items.len() as f64);
            }
            match canonical_index(prop) {
                Some(i) => items.get(i).cloned().unwrap_or(JValue::Undefined),
                None => JValue::Undefined,
            }
        }
        JValue::String(s) => {
            let units = utf16_units(s);
            if prop == "length" {
                return JValue::Number(units.len() as f64);
            }
            match canonical_index(prop) {
                Some(i) if i < units.len() => {
                    JValue::string(String::from_utf16_lossy(&units[i..=i]))
                }
                _ => JValue::Undefined,
            }
        }
        _ => JValue::Undefined,
    }
}

fn canonical_index(prop: &str) -> Option<usize> {
    let i: usize = prop.parse().ok()?;
    (i.to_string() == prop).then_some(i)
}

fn is_object(value: &JValue) -> bool {
    matches!(value, JValue::Array(_) | JValue::Object(_))
}

/// Identity of objects and arrays: the same allocation.
fn same_reference(a: &JValue, b: &JValue) -> bool {
    match (a, b) {
        (JValue::Array(x), JValue::Array(y)) => jsonata_core::value::JArray::ptr_eq(x, y),
        (JValue::Object(x), JValue::Object(y)) => std::rc::Rc::ptr_eq(x, y),
        _ => false,
    }
}

/// JavaScript `a === b`.
pub fn strict_eq(a: &JValue, b: &JValue) -> bool {
    match (a, b) {
        (JValue::Undefined, JValue::Undefined) | (JValue::Null, JValue::Null) => true,
        (JValue::Bool(x), JValue::Bool(y)) => x == y,
        (JValue::Number(x), JValue::Number(y)) => x == y,
        (JValue::String(x), JValue::String(y)) => x == y,
        _ => same_reference(a, b),
    }
}

/// ToPrimitive: objects and arrays become their string form; primitives stay.
fn to_primitive(value: &JValue) -> JValue {
    if is_object(value) {
        JValue::string(to_string(value))
    } else {
        value.clone()
    }
}

/// JavaScript `a == b`.
pub fn loose_eq(a: &JValue, b: &JValue) -> bool {
    use JValue::*;
    match (a, b) {
        (Undefined | Null, Undefined | Null) => true,
        (Undefined | Null, _) | (_, Undefined | Null) => false,
        (Number(_), String(_)) | (String(_), Number(_)) => to_number(a) == to_number(b),
        (Bool(_), _) => loose_eq(&Number(to_number(a)), b),
        (_, Bool(_)) => loose_eq(a, &Number(to_number(b))),
        _ if is_object(a) && is_object(b) => same_reference(a, b),
        _ if is_object(a) => loose_eq(&to_primitive(a), b),
        _ if is_object(b) => loose_eq(a, &to_primitive(b)),
        _ => strict_eq(a, b),
    }
}

/// JavaScript's abstract relational comparison `a < b`: `None` when a NaN makes it undefined.
pub fn less_than(a: &JValue, b: &JValue) -> Option<bool> {
    let (pa, pb) = (to_primitive(a), to_primitive(b));
    if let (JValue::String(x), JValue::String(y)) = (&pa, &pb) {
        return Some(utf16_units(x) < utf16_units(y));
    }
    let (x, y) = (to_number(&pa), to_number(&pb));
    if x.is_nan() || y.is_nan() {
        None
    } else {
        Some(x < y)
    }
}
