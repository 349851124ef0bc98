//! Expressions compiled to Rust (`build --native`, `graph!`): the operations generated code is
//! made of, each with jsonata-core's semantics exactly (its tree-walker, and the `CompiledExpr`
//! fast path that mirrors it), and the host generated code calls back for variables, the
//! history functions and the built-ins.
//!
//! The generated module hands the runtime a table of `(source, fn)` ([`NativeExpr`]); when a
//! graph is loaded, every expression whose source the table holds gets its function
//! ([`attach`]), and [`crate::jsonata::Jsonata::eval`] calls it instead of the interpreter. An
//! expression the compiler could not translate is not in the table and stays interpreted.

use indexmap::IndexMap;
use jsonata_core::evaluator::EvaluatorError;
pub use jsonata_core::value::JValue;
use jsonata_core::value::flattens_in_step;
use mcpgraph_compiler::Graph;
pub use mcpgraph_compiler::expr::{NativeFn, NativeHost, NativeRuleFn, RuleFailure};
use std::borrow::Cow;

/// A string literal of a compiled expression (`rt::lit!("ok")`): made once per thread and
/// shared after that, a clone being a count increment, where `JValue::string` would allocate
/// and copy it at every evaluation.
#[doc(hidden)]
#[macro_export]
macro_rules! __native_lit {
    ($text:literal) => {{
        ::std::thread_local! {
            static LITERAL: $crate::__private::native::JValue =
                $crate::__private::native::JValue::string($text);
        }
        LITERAL.with(::std::clone::Clone::clone)
    }};
}
pub use crate::__native_lit as lit;

/// The object of an object constructor with literal keys (`rt::object!(["a", "b"], values)`),
/// from its values (`[JValue; N]`, evaluated before, in order) and the constructor's [`Keys`],
/// made once per thread.
#[doc(hidden)]
#[macro_export]
macro_rules! __native_object {
    ([$($key:literal),* $(,)?], $values:ident) => {{
        let values = $values;
        ::std::thread_local! {
            static KEYS: $crate::__private::native::Keys =
                $crate::__private::native::Keys::new(&[$($key),*]);
        }
        KEYS.with(|keys| keys.object(values))
    }};
}
pub use crate::__native_object as object;

/// One compiled expression: its source text (the key it is found by) and its function.
pub struct NativeExpr {
    pub source: &'static str,
    pub eval: NativeFn,
}

/// One compiled JSON Logic rule, found by its rule's canonical text
/// ([`mcpgraph_compiler::logic::rule_key`]).
pub struct NativeRule {
    pub key: &'static str,
    pub eval: NativeRuleFn,
}

/// What a generated module compiled.
pub struct Natives {
    pub exprs: &'static [NativeExpr],
    pub rules: &'static [NativeRule],
}

/// How many of a graph's expressions and rules got a compiled function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Attached {
    pub exprs: usize,
    pub rules: usize,
}

/// Gives each expression and rule of `graph` its compiled function, where `natives` has one.
pub fn attach(graph: &mut Graph, natives: &Natives) -> Attached {
    let exprs: std::collections::HashMap<&str, NativeFn> =
        natives.exprs.iter().map(|n| (n.source, n.eval)).collect();
    let rules: std::collections::HashMap<&str, NativeRuleFn> =
        natives.rules.iter().map(|n| (n.key, n.eval)).collect();
    let mut attached = Attached::default();
    graph.for_each_expr_mut(&mut |expr| {
        if let Some(f) = exprs.get(expr.source.as_str()) {
            expr.native = Some(*f);
            attached.exprs += 1;
        }
    });
    graph.for_each_condition_mut(&mut |condition| {
        if let Some(rule) = &condition.rule
            && let Some(f) = rules.get(mcpgraph_compiler::logic::rule_key(rule).as_str())
        {
            condition.native = Some(*f);
            attached.rules += 1;
        }
    });
    attached
}

/// The most items a path may gather (jsonata-core's `max_sequence_length` as the runtime sets
/// it, `crate::jsonata`).
const MAX_SEQUENCE_LENGTH: usize = 10_000_000;

fn check_sequence_length(len: usize) -> Result<(), EvaluatorError> {
    if len > MAX_SEQUENCE_LENGTH {
        return Err(EvaluatorError::EvaluationError(format!(
            "D2015: The maximum sequence length of {MAX_SEQUENCE_LENGTH} was exceeded."
        )));
    }
    Ok(())
}

/// The input of a whole expression, as jsonata-core's `evaluate` sees it: an input array that
/// is not a sequence is marked as the outer wrapper. Any other input is itself, borrowed.
#[inline]
pub fn input(data: &JValue) -> Cow<'_, JValue> {
    match data {
        JValue::Array(arr) if !arr.sequence && !arr.outer_wrapper => {
            Cow::Owned(data.clone().into_outer_wrapper())
        }
        _ => Cow::Borrowed(data),
    }
}

/// What every node's value goes through in the tree-walker: a sequence of none is undefined,
/// of one its item (unless kept as a singleton).
#[inline]
pub fn unwrap(value: JValue) -> JValue {
    value.unwrap_sequence()
}

/// A call whose every evaluation in one expression gives the same (a history function with
/// literal arguments): made the first time, its value kept in `cell` for the others.
#[inline]
pub fn once(
    cell: &std::cell::OnceCell<JValue>,
    call: impl FnOnce() -> Result<JValue, Error>,
) -> Result<JValue, Error> {
    memo(cell, || Ok(unwrap(call()?)))
}

/// A value every use of which in one evaluation of its scope is the same (the first step of a
/// path from a history call with literal arguments): made the first time, kept in `cell`.
#[inline]
pub fn memo(
    cell: &std::cell::OnceCell<JValue>,
    make: impl FnOnce() -> Result<JValue, Error>,
) -> Result<JValue, Error> {
    if let Some(value) = cell.get() {
        return Ok(value.clone());
    }
    let value = make()?;
    let _ = cell.set(value.clone());
    Ok(value)
}

/// `$` alone: the current data without the outer wrapper.
#[inline]
pub fn dollar(data: &JValue) -> JValue {
    data.bare()
}

/// JSONata truthiness (`$boolean`).
pub fn truthy(value: &JValue) -> bool {
    match value {
        JValue::Null | JValue::Undefined => false,
        JValue::Bool(b) => *b,
        JValue::Number(n) => *n != 0.0,
        JValue::String(s) => !s.is_empty(),
        JValue::Array(a) => match a.len() {
            0 => false,
            1 => truthy(&a[0]),
            _ => a.iter().any(truthy),
        },
        JValue::Object(o) => !o.is_empty(),
        _ => false,
    }
}

/// `a and b`, `b` evaluated only when `a` is truthy.
#[inline]
pub fn and(
    left: &JValue,
    right: impl FnOnce() -> Result<JValue, EvaluatorError>,
) -> Result<JValue, EvaluatorError> {
    if !truthy(left) {
        return Ok(JValue::Bool(false));
    }
    Ok(JValue::Bool(truthy(&right()?)))
}

/// `a or b`, `b` evaluated only when `a` is falsy.
#[inline]
pub fn or(
    left: &JValue,
    right: impl FnOnce() -> Result<JValue, EvaluatorError>,
) -> Result<JValue, EvaluatorError> {
    if truthy(left) {
        return Ok(JValue::Bool(true));
    }
    Ok(JValue::Bool(truthy(&right()?)))
}

/// An arithmetic operator of the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

/// `a + b` and its kin: an infinite operand is D1001, a defined operand that is not a number
/// (left first) T2001/T2002, an undefined one makes the result undefined.
pub fn arith(op: Arith, left: &JValue, right: &JValue) -> Result<JValue, EvaluatorError> {
    let symbol = match op {
        Arith::Add => "+",
        Arith::Sub => "-",
        Arith::Mul => "*",
        Arith::Div => "/",
        Arith::Mod => "%",
    };
    if matches!(left, JValue::Number(n) if n.is_infinite())
        || matches!(right, JValue::Number(n) if n.is_infinite())
    {
        return Err(EvaluatorError::EvaluationError(
            "D1001: Number out of range".to_string(),
        ));
    }
    match (left, right) {
        (JValue::Number(a), JValue::Number(b)) => Ok(JValue::Number(match op {
            Arith::Add => a + b,
            Arith::Sub => a - b,
            Arith::Mul => a * b,
            Arith::Div => a / b,
            Arith::Mod => a % b,
        })),
        _ if !matches!(left, JValue::Number(n) if !n.is_nan())
            && !matches!(left, JValue::Undefined) =>
        {
            Err(EvaluatorError::TypeError(format!(
                "T2001: The left side of the {symbol} operator must evaluate to a number"
            )))
        }
        _ if !matches!(right, JValue::Number(n) if !n.is_nan())
            && !matches!(right, JValue::Undefined) =>
        {
            Err(EvaluatorError::TypeError(format!(
                "T2002: The right side of the {symbol} operator must evaluate to a number"
            )))
        }
        _ => Ok(JValue::Undefined),
    }
}

/// Unary minus: a number negated, undefined kept, anything else D1002.
pub fn negate(value: &JValue) -> Result<JValue, EvaluatorError> {
    match value {
        JValue::Number(n) => Ok(JValue::Number(-n)),
        JValue::Undefined => Ok(JValue::Undefined),
        _ => Err(EvaluatorError::TypeError(
            "D1002: Cannot negate non-number value".to_string(),
        )),
    }
}

/// `a = b`: deep equality.
pub fn eq(left: &JValue, right: &JValue) -> JValue {
    JValue::Bool(jsonata_core::functions::array::values_equal(left, right))
}

/// `a != b`: false when either side is undefined, as for `=`.
pub fn ne(left: &JValue, right: &JValue) -> JValue {
    if left.is_undefined() || right.is_undefined() {
        return JValue::Bool(false);
    }
    JValue::Bool(!jsonata_core::functions::array::values_equal(left, right))
}

/// `a = "text"` (or `"text" = a`): what [`eq`] gives with the literal's value.
#[inline]
pub fn eq_str(value: &JValue, text: &str) -> JValue {
    JValue::Bool(matches!(value, JValue::String(s) if **s == *text))
}

/// `a != "text"` (or `"text" != a`): what [`ne`] gives with the literal's value.
#[inline]
pub fn ne_str(value: &JValue, text: &str) -> JValue {
    match value {
        JValue::Undefined => JValue::Bool(false),
        JValue::String(s) => JValue::Bool(**s != *text),
        _ => JValue::Bool(true),
    }
}

/// An ordering operator of the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Lt,
    Le,
    Gt,
    Ge,
}

fn type_name(value: &JValue) -> &'static str {
    match value {
        JValue::Null => "null",
        JValue::Bool(_) => "boolean",
        JValue::Number(_) => "number",
        JValue::String(_) => "string",
        JValue::Array(_) => "array",
        JValue::Object(_) => "object",
        _ => "unknown",
    }
}

/// `a < b` and its kin: only numbers, strings and undefined compare (T2010), undefined makes
/// the result undefined, and then the two must be of one type (T2009).
pub fn order(op: Order, left: &JValue, right: &JValue) -> Result<JValue, EvaluatorError> {
    let comparable =
        |v: &JValue| matches!(v, JValue::Number(_) | JValue::String(_) | JValue::Undefined);
    if !comparable(left) || !comparable(right) {
        return Err(EvaluatorError::EvaluationError(format!(
            "T2010: Cannot compare {} and {}",
            type_name(left),
            type_name(right)
        )));
    }
    if left.is_undefined() || right.is_undefined() {
        return Ok(JValue::Undefined);
    }
    let (symbol, ordering) = match (left, right) {
        (JValue::Number(a), JValue::Number(b)) => (op, a.partial_cmp(b)),
        (JValue::String(a), JValue::String(b)) => (op, Some(a.cmp(b))),
        _ => {
            let symbol = match op {
                Order::Lt => "<",
                Order::Le => "<=",
                Order::Gt => ">",
                Order::Ge => ">=",
            };
            return Err(EvaluatorError::EvaluationError(format!(
                "T2009: The expressions on either side of operator \"{symbol}\" must be of the same data type"
            )));
        }
    };
    use std::cmp::Ordering::{Greater, Less};
    // NaN compares as nothing: every operator is false, as f64's are.
    Ok(JValue::Bool(match (symbol, ordering) {
        (_, None) => false,
        (Order::Lt, Some(o)) => o == Less,
        (Order::Le, Some(o)) => o != Greater,
        (Order::Gt, Some(o)) => o == Greater,
        (Order::Ge, Some(o)) => o != Less,
    }))
}

pub use crate::value::concat;

/// The context an object constructor's values are evaluated in: the top-level input array
/// itself, the items of another array grouped into one context, any other value as is.
pub fn object_context(data: &JValue) -> Cow<'_, JValue> {
    match data {
        JValue::Array(arr) if arr.outer_wrapper => Cow::Owned(data.bare()),
        JValue::Array(arr) if arr.is_empty() => Cow::Owned(JValue::Undefined),
        JValue::Array(arr) => Cow::Owned(group_context(arr.as_slice())),
        _ => Cow::Borrowed(data),
    }
}

/// jsonata-js `evaluateGroupExpression`'s context for one group: its one item, or the items
/// appended (`$append`) into a plain array, an array item adding its own items.
fn group_context(items: &[JValue]) -> JValue {
    match items {
        [] => JValue::Undefined,
        [item] => item.clone(),
        _ => {
            let mut appended = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    JValue::Array(arr) => appended.extend(arr.iter().cloned()),
                    JValue::Undefined => {}
                    other => appended.push(other.clone()),
                }
            }
            JValue::array(appended)
        }
    }
}

/// The keys of an object constructor (`{"k": v, ...}`, literal keys, none repeated), as a map
/// whose copies become its objects: a copy takes the keys' hashes and table as they are, where
/// inserting each key would hash it again (SipHash) at every evaluation.
pub struct Keys(IndexMap<String, JValue>);

impl Keys {
    pub fn new(keys: &[&str]) -> Keys {
        Keys(
            keys.iter()
                .map(|key| (key.to_string(), JValue::Null))
                .collect(),
        )
    }

    /// The object of `values`, one per key in order; an undefined value adds no key.
    #[inline]
    pub fn object<const N: usize>(&self, values: [JValue; N]) -> JValue {
        debug_assert_eq!(N, self.0.len());
        if values.iter().any(JValue::is_undefined) {
            let mut object = IndexMap::with_capacity(N);
            for (key, value) in self.0.keys().zip(values) {
                if !value.is_undefined() {
                    object.insert(key.clone(), value);
                }
            }
            return JValue::object(object);
        }
        let mut object = self.0.clone();
        for (slot, value) in object.values_mut().zip(values) {
            *slot = value;
        }
        JValue::object(object)
    }
}

/// An array under construction (`[a, b]`): undefined items are left out, an item that is an
/// array constructor itself is kept whole, any other array is spliced in.
pub struct Array(Vec<JValue>);

impl Array {
    pub fn with_capacity(n: usize) -> Array {
        Array(Vec::with_capacity(n))
    }

    /// An item that is not itself an array constructor: an array is spliced in.
    #[inline]
    pub fn item(&mut self, value: JValue) {
        match value {
            JValue::Undefined => {}
            JValue::Array(arr) => self.0.extend(arr.iter().cloned()),
            other => self.0.push(other),
        }
    }

    /// An item written as an array constructor: kept whole.
    #[inline]
    pub fn nested(&mut self, value: JValue) {
        if !value.is_undefined() {
            self.0.push(value);
        }
    }

    /// A plain array: the tree-walker marks a constructor's array (`cons`) only where a path
    /// starts with it, which compiled paths never do.
    pub fn finish(self) -> JValue {
        JValue::array(self.0)
    }
}

/// `$count(value)`, as jsonata-core's signature check and `count` answer it: undefined is 0,
/// an array its length, any other JSON value one item (its signature wraps it in an array).
/// `None` for a function or a regex, which the caller hands to jsonata-core.
#[inline]
pub fn count(value: &JValue) -> Option<JValue> {
    match value {
        // A sequence of one item is that item (jsonata-core unwraps the argument first).
        JValue::Array(arr) if arr.sequence && !arr.keep_singleton && arr.len() == 1 => {
            count_unwrapped(&arr[0])
        }
        other => count_unwrapped(other),
    }
}

/// [`count`] of a value already unwrapped.
fn count_unwrapped(value: &JValue) -> Option<JValue> {
    let n = match value {
        JValue::Undefined => 0,
        JValue::Array(arr) => arr.len(),
        JValue::Null | JValue::Bool(_) | JValue::Number(_) | JValue::String(_) => 1,
        JValue::Object(_) => 1,
        _ => return None,
    };
    Some(JValue::Number(n as f64))
}

/// `a ?? b`: `a` unless it is undefined.
#[inline]
pub fn is_undefined(value: &JValue) -> bool {
    value.is_undefined()
}

#[inline]
fn is_tuple_object(obj: &IndexMap<String, JValue>) -> bool {
    matches!(obj.get_index(0), Some((key, _)) if key == "@")
        && obj.get("__tuple__") == Some(&JValue::Bool(true))
}

/// A path of field steps (`a.b.c`, `$.a.b`) over `data`, as jsonata-js `evaluatePath` walks
/// it: `from_dollar` (a leading `$`) maps the first step over the items of an input array,
/// even the top-level one, which a bare `a...` takes as one item.
#[inline]
pub fn fields(data: &JValue, steps: &[&str], from_dollar: bool) -> Result<JValue, EvaluatorError> {
    // Most paths go from object to object: walked here, by reference, and only their value
    // cloned. Any other step takes the whole walk below.
    if let JValue::Object(_) = data {
        match through_objects(steps, data) {
            None => return Ok(JValue::Undefined),
            Some((taken, value)) if taken == steps.len() => return Ok(value.clone()),
            Some(_) => {}
        }
    }
    walk(data, steps, from_dollar)
}

/// [`fields`] over any values.
fn walk(data: &JValue, steps: &[&str], from_dollar: bool) -> Result<JValue, EvaluatorError> {
    let per_item = matches!(data, JValue::Array(arr) if from_dollar || !arr.outer_wrapper);
    let (start, mut result) = if per_item {
        (0, JValue::Undefined)
    } else {
        match through_objects(steps, data) {
            Some((taken, value)) => (taken, value.clone()),
            None => return Ok(JValue::Undefined),
        }
    };
    if start == steps.len() {
        return Ok(result);
    }
    for (index, field) in steps.iter().enumerate().skip(start) {
        let previous;
        let items: &[JValue] = if index == 0 && per_item {
            data.as_array().map_or(&[][..], Vec::as_slice)
        } else if index == 0 {
            std::slice::from_ref(data)
        } else {
            match &result {
                JValue::Array(arr) if !arr.is_empty() => {
                    previous = arr.clone();
                    &previous
                }
                JValue::Undefined => break,
                single => std::slice::from_ref(single),
            }
        };
        let values = field_values(field, items)?;
        check_sequence_length(values.len())?;
        result = collect_step_results(values, index + 1 == steps.len());
    }
    Ok(result)
}

/// The field steps a path takes from one object to the next, by reference: how many, and the
/// value they reach (`None`: a step found nothing, so the path is undefined).
fn through_objects<'a>(steps: &[&str], data: &'a JValue) -> Option<(usize, &'a JValue)> {
    let mut value = data;
    let mut taken = 0;
    for field in steps {
        value = match value {
            JValue::Object(obj) if !is_tuple_object(obj) => get(obj, field)?,
            _ => break,
        };
        taken += 1;
        if value.is_undefined() {
            return None;
        }
    }
    Some((taken, value))
}

/// `obj[field]`. A graph's objects are small, and comparing a few keys takes less than hashing
/// one (the maps hash with SipHash): the same answer, keys being unique.
#[inline]
fn get<'a>(obj: &'a IndexMap<String, JValue>, field: &str) -> Option<&'a JValue> {
    if obj.len() <= 8 {
        obj.iter()
            .find(|(key, _)| key.as_str() == field)
            .map(|(_, value)| value)
    } else {
        obj.get(field)
    }
}

/// [`get`] with the key's index.
#[inline]
fn get_full<'a>(obj: &'a IndexMap<String, JValue>, field: &str) -> Option<(usize, &'a JValue)> {
    if obj.len() <= 8 {
        obj.iter()
            .position(|(key, _)| key.as_str() == field)
            .map(|index| (index, &obj[index]))
    } else {
        obj.get_full(field).map(|(index, _, value)| (index, value))
    }
}

fn field_values(field: &str, items: &[JValue]) -> Result<Vec<JValue>, EvaluatorError> {
    let mut position: Option<usize> = None;
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        let value = match item {
            JValue::Object(obj) if !is_tuple_object(obj) => {
                match position.and_then(|p| obj.get_index(p)) {
                    Some((key, value)) if key == field => value.clone(),
                    _ => match get_full(obj, field) {
                        Some((index, value)) => {
                            position = Some(index);
                            value.clone()
                        }
                        None => JValue::Undefined,
                    },
                }
            }
            _ => field_step(field, item)?,
        };
        if !value.is_undefined() {
            values.push(value);
        }
    }
    Ok(values)
}

fn field_step(field: &str, value: &JValue) -> Result<JValue, EvaluatorError> {
    match value {
        JValue::Object(obj) => {
            if is_tuple_object(obj) {
                return Ok(match obj.get("@") {
                    Some(JValue::Object(inner)) => {
                        inner.get(field).cloned().unwrap_or(JValue::Undefined)
                    }
                    _ => JValue::Undefined,
                });
            }
            Ok(get(obj, field).cloned().unwrap_or(JValue::Undefined))
        }
        JValue::Array(arr) => {
            let mut result = Vec::with_capacity(arr.len());
            let mut flat = true;
            for value in field_values(field, arr)? {
                match value {
                    JValue::Array(inner) => {
                        flat = false;
                        result.extend(inner.iter().cloned())
                    }
                    other => result.push(other),
                }
            }
            check_sequence_length(result.len())?;
            Ok(if result.is_empty() {
                JValue::Undefined
            } else {
                JValue::sequence_flat(result, flat)
            })
        }
        _ => Ok(JValue::Undefined),
    }
}

fn collect_step_results(mut results: Vec<JValue>, last_step: bool) -> JValue {
    if last_step && results.len() == 1 && matches!(&results[0], JValue::Array(arr) if !arr.sequence)
    {
        return results.pop().expect("length checked");
    }
    if let [JValue::Array(arr)] = results.as_slice()
        && !arr.cons
    {
        return JValue::Array(arr.fresh_sequence());
    }
    if !results.iter().any(flattens_in_step) {
        return JValue::sequence_flat(results, true);
    }
    let mut items = Vec::with_capacity(results.len());
    for value in results {
        match value {
            JValue::Array(arr) if !arr.cons => items.extend(arr.iter().cloned()),
            other => items.push(other),
        }
    }
    JValue::sequence(items)
}

pub use mcpgraph_compiler::logic::Op;

/// The error of a compiled expression: jsonata-core's.
pub type Error = EvaluatorError;

pub use crate::jsonata::count_split_literal as count_split;

/// A JSON literal of a rule, as the interpreter reads it.
pub fn json(text: &str) -> JValue {
    serde_json::from_str::<serde_json::Value>(text)
        .map(|value| crate::value::to_jvalue(&value))
        .unwrap_or(JValue::Null)
}

/// A graph-level var of a compiled rule: its compiled expression's value, or its failure.
pub fn rule_var(
    value: Result<JValue, EvaluatorError>,
    source: &'static str,
) -> Result<JValue, RuleFailure> {
    value.map_err(|error| RuleFailure::Var { error, source })
}

/// A JSON Logic operator that evaluates all its arguments, applied to their values.
pub fn logic(op: Op, values: &[JValue], data: &JValue) -> Result<JValue, RuleFailure> {
    crate::jsonlogic::eager(op, values, data).map_err(|error| match error {
        crate::jsonlogic::LogicError::Rule(message) => RuleFailure::Rule(message),
        crate::jsonlogic::LogicError::Var(error) => RuleFailure::Rule(error.to_string()),
    })
}

/// JSON Logic's truthiness (json-logic-js `truthy`).
pub fn logic_truthy(value: &JValue) -> bool {
    crate::jsonlogic::truthy(value)
}

/// Whether two values are the same value, as a later expression could tell them apart: variants,
/// numbers (bit for bit but for NaN), strings, key order, and each array's sequence,
/// constructor, keep-singleton, outer-wrapper and sorted-tuples flags. For the differential
/// tests.
#[doc(hidden)]
pub fn identical(a: &JValue, b: &JValue) -> bool {
    match (a, b) {
        (JValue::Null, JValue::Null) | (JValue::Undefined, JValue::Undefined) => true,
        (JValue::Bool(x), JValue::Bool(y)) => x == y,
        (JValue::Number(x), JValue::Number(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        (JValue::String(x), JValue::String(y)) => x == y,
        (JValue::Array(x), JValue::Array(y)) => {
            x.sequence == y.sequence
                && x.cons == y.cons
                && x.keep_singleton == y.keep_singleton
                && x.outer_wrapper == y.outer_wrapper
                && x.sorted_tuples == y.sorted_tuples
                && x.len() == y.len()
                && x.iter().zip(y.iter()).all(|(x, y)| identical(x, y))
        }
        (JValue::Object(x), JValue::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((kx, vx), (ky, vy))| kx == ky && identical(vx, vy))
        }
        (
            JValue::Regex {
                pattern: p,
                flags: f,
            },
            JValue::Regex {
                pattern: q,
                flags: g,
            },
        ) => p == q && f == g,
        (JValue::Builtin { name: x }, JValue::Builtin { name: y }) => x == y,
        _ => false,
    }
}

/// One expression of the differential tests' corpus: where it comes from, its source, its
/// compiled function (`None`: it stays interpreted, `why`), the input and bindings of its case
/// (JSON text) if it has them.
#[doc(hidden)]
pub struct Case {
    pub origin: &'static str,
    pub source: &'static str,
    pub native: Option<NativeFn>,
    pub why: &'static str,
    pub data: Option<&'static str>,
    pub bindings: &'static str,
}

/// The first step of a path that starts with an expression other than a field or `$` (a call,
/// a variable): evaluated by `step` once per item of an input array, or once over the whole
/// input for a variable (`whole`) or the top-level input, as jsonata-js `evaluatePath` does.
pub fn first_step(
    data: &JValue,
    whole: bool,
    mut step: impl FnMut(&JValue) -> Result<JValue, EvaluatorError>,
) -> Result<JValue, EvaluatorError> {
    let bare;
    let items: &[JValue] = match data {
        JValue::Array(arr) if arr.outer_wrapper => {
            bare = data.bare();
            std::slice::from_ref(&bare)
        }
        JValue::Array(arr) if !whole => arr.as_slice(),
        _ => std::slice::from_ref(data),
    };
    if let [item] = items {
        return Ok(collect_single_step_result(step(item)?, false));
    }
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        let value = step(item)?;
        if !value.is_undefined() {
            values.push(value);
        }
    }
    check_sequence_length(values.len())?;
    Ok(collect_step_results(values, false))
}

/// The field steps after a path's [`first_step`], each over the items of the step before. The
/// value is right once unwrapped ([`unwrap`]), which is how generated code uses it: a value
/// reached through objects alone comes back as it is, not as the one-item sequence the steps
/// would make of it.
pub fn fields_after(first: JValue, steps: &[&str]) -> Result<JValue, EvaluatorError> {
    // From object to object to a value that is not an array: that value, as the steps below
    // give it once unwrapped (which is all generated code does with it).
    match through_objects(steps, &first) {
        None => return Ok(JValue::Undefined),
        Some((taken, value)) if taken == steps.len() && !matches!(value, JValue::Array(_)) => {
            return Ok(value.clone());
        }
        Some(_) => {}
    }
    let mut result = first;
    for (index, field) in steps.iter().enumerate() {
        if result.is_undefined() || matches!(&result, JValue::Array(arr) if arr.is_empty()) {
            break;
        }
        let previous;
        let items: &[JValue] = match &result {
            JValue::Array(arr) => {
                previous = arr.clone();
                &previous
            }
            single => std::slice::from_ref(single),
        };
        let values = field_values(field, items)?;
        check_sequence_length(values.len())?;
        result = collect_step_results(values, index + 1 == steps.len());
    }
    Ok(result)
}

fn collect_single_step_result(value: JValue, last_step: bool) -> JValue {
    match value {
        JValue::Array(arr) if last_step && !arr.sequence => JValue::Array(arr),
        JValue::Array(arr) if !arr.cons => JValue::Array(arr.fresh_sequence()),
        JValue::Array(arr) => JValue::sequence(vec![JValue::Array(arr)]),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonata::{Jsonata, Settings};
    use mcpgraph_compiler::ir::Expr;

    /// [`count`] gives what jsonata-core's `$count` gives, value for value (bit for bit, as
    /// the differential tests compare).
    #[test]
    fn count_answers_as_jsonata_core() {
        let json = |text: &str| crate::value::to_jvalue(&serde_json::from_str(text).unwrap());
        let mut sequence = json("[1, 2]");
        sequence.mark_sequence();
        let mut one = json("[[1, 2]]");
        one.mark_sequence();
        let mut scalar = json("[5]");
        scalar.mark_sequence();
        let values = [
            JValue::Undefined,
            JValue::Null,
            JValue::Bool(false),
            JValue::Number(0.0),
            JValue::Number(-2.5),
            JValue::string(""),
            JValue::string("abc"),
            json("{}"),
            json("{\"a\": [1, 2]}"),
            json("[]"),
            json("[null]"),
            json("[[1, 2], [3]]"),
            json("[1, [2, 3], {\"a\": 1}]"),
            sequence,
            one,
            scalar,
        ];
        let call = Expr::parse("$count($x)").unwrap();
        for value in values {
            let mut jsonata = Jsonata::new(
                None,
                Settings {
                    bindings: vec![("x".to_string(), value.clone())],
                    ..Settings::default()
                },
            );
            let interpreted = jsonata.eval(&call, &JValue::Null).unwrap();
            let fast = count(&value).expect("a JSON value");
            assert!(
                identical(&interpreted, &fast),
                "{value:?}: {interpreted:?} {fast:?}"
            );
        }
    }
}
