//! JSONata evaluation for one run: jsonata-core's evaluator with the history functions
//! registered as host functions, guard rails set, and errors in the original's words.

use crate::failure::{Failure, FailureKind, Limit, SizedValue};
use crate::history::{self, SharedHistory};
use crate::value::json_size;
use jsonata_core::ast::AstNode;
use jsonata_core::evaluator::EvaluatorError;
use jsonata_core::evaluator::{
    CancelToken, Context, Evaluator, EvaluatorOptions, HostFnResult, error_code_prefix,
};
use jsonata_core::functions::string::build_regex;
use jsonata_core::value::JValue;
use mcpgraph_compiler::expr::{HISTORY_FUNCTIONS, NativeHost};
use mcpgraph_compiler::fuse::{
    CONCAT, COUNT_SPLIT, DISTINCT, HOST_FUNCTIONS, JOIN_ARG, PAD_WIDTH, REPLACE_ARG, STRING_ARG,
};
use mcpgraph_compiler::ir::{DEFAULT_MAX_VALUE_BYTES, Expr};

/// Bounds no graph expression should reach; they turn a runaway expression into an error.
const MAX_STACK_DEPTH: usize = 10_000;
const MAX_SEQUENCE_LENGTH: usize = 10_000_000;

pub struct Jsonata {
    /// jsonata-core's evaluator, set up on the first expression that is not compiled: a run
    /// whose expressions are all compiled (`build --native`) never pays for it.
    evaluator: Option<Evaluator>,
    /// The evaluator compiled code's one-argument built-in calls run on, set up on the first.
    calls: Option<Evaluator>,
    history: Option<SharedHistory>,
    settings: Settings,
}

/// How an evaluator is set up.
#[derive(Default)]
pub struct Settings {
    /// Bounds each evaluation (the run's remaining time).
    pub timeout_ms: Option<u64>,
    /// Stops an evaluation in flight (the run was cancelled).
    pub cancel: Option<CancelToken>,
    /// Defaults to a bound no graph expression should reach.
    pub max_stack_depth: Option<usize>,
    /// `$name` variables bound for every evaluation.
    pub bindings: Vec<(String, JValue)>,
    /// The largest value the size-checked built-ins may build (`maxValueBytes`); defaults to
    /// the graph file's default.
    pub max_value_bytes: Option<u64>,
    /// The functions the runtime registers that the interpreter gets; by default all of them.
    pub functions: Functions,
}

/// Which of the functions the runtime registers (the fused built-ins of
/// [`mcpgraph_compiler::fuse::HOST_FUNCTIONS`], then [`HISTORY_FUNCTIONS`], one bit each) an
/// interpreter gets. Each costs a boxed closure and a map entry when a run sets up its interpreter, and a
/// tool's expressions use few of them: a run registers those they mention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Functions(u16);

impl Functions {
    pub const ALL: Functions = Functions(u16::MAX);

    /// The functions `exprs` call or refer to (`$f := $nodeExecution`), or name as a field
    /// (jsonata-core's error for `previousNode()` suggests `$previousNode` when it is
    /// registered), anywhere in them; all of them when one calls `$eval`, whose text may call
    /// any.
    pub fn mentioned_in<'a>(exprs: impl IntoIterator<Item = &'a Expr>) -> Functions {
        let mut bits = 0u16;
        for expr in exprs {
            for name in mcpgraph_compiler::fuse::mentioned_names(&expr.ast) {
                if name == "eval" {
                    return Functions::ALL;
                }
                if let Some(bit) = bit(&name) {
                    bits |= 1 << bit;
                }
            }
        }
        Functions(bits)
    }

    fn has(self, name: &str) -> bool {
        bit(name).is_some_and(|bit| self.0 & (1 << bit) != 0)
    }
}

const _: () = assert!(HOST_FUNCTIONS.len() + HISTORY_FUNCTIONS.len() <= 16);

/// The bit of registered function `name` in [`Functions`].
fn bit(name: &str) -> Option<usize> {
    HOST_FUNCTIONS.iter().position(|f| *f == name).or_else(|| {
        HISTORY_FUNCTIONS
            .iter()
            .position(|f| *f == name)
            .map(|i| HOST_FUNCTIONS.len() + i)
    })
}

impl Default for Functions {
    fn default() -> Functions {
        Functions::ALL
    }
}

/// A failed evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    /// The JSONata error code (`T2001`), when the engine gave one.
    pub code: Option<String>,
    /// The message without its code.
    pub message: String,
    pub expression: String,
}

impl std::fmt::Display for EvalError {
    /// The original's words: `JSONata evaluation failed: <message>\nExpression: <expression>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "JSONata evaluation failed: {}\nExpression: {}",
            self.message, self.expression
        )
    }
}

impl EvalError {
    /// What kind of failure this is: an evaluation stopped by the run's time limit (D1012) or by
    /// its cancel token (U1003, which the watchdog also trips at the deadline: the run tells the
    /// two apart by its clock) is not an expression's failure.
    pub fn kind(&self) -> FailureKind {
        match self.code.as_deref() {
            // D1012: the time limit; U1010: a size-checked built-in reached `maxValueBytes`.
            Some("D1012" | "U1010") => FailureKind::Limit,
            Some("U1003") => FailureKind::Cancelled,
            _ => FailureKind::Expression,
        }
    }
}

impl From<EvalError> for Failure {
    fn from(error: EvalError) -> Failure {
        Failure::new(error.kind(), error.to_string())
    }
}

impl Jsonata {
    /// An evaluator for one run, with the history functions over `history`.
    pub fn new(history: Option<&SharedHistory>, settings: Settings) -> Self {
        Jsonata {
            evaluator: None,
            calls: None,
            history: history.cloned(),
            settings,
        }
    }

    /// jsonata-core's evaluator with the bindings, the guard rails and every host function.
    fn interpreter(&mut self) -> &mut Evaluator {
        if self.evaluator.is_none() {
            self.evaluator = Some(interpreter(self.history.as_ref(), &self.settings));
        }
        self.evaluator.as_mut().expect("set above")
    }

    /// Evaluates `expr` against `data`: its compiled function when it has one, else the
    /// interpreter.
    pub fn eval(&mut self, expr: &Expr, data: &JValue) -> Result<JValue, EvalError> {
        let result = match expr.native {
            Some(native) => native(self, data),
            None => self.interpreter().evaluate(&expr.ast, data),
        };
        result.map_err(|e| eval_error(&e, &expr.source))
    }

    /// A function the runtime registers, by name (what compiled expressions call).
    fn host(&self, name: &str, args: &[JValue]) -> HostFnResult {
        let cap = self
            .settings
            .max_value_bytes
            .unwrap_or(DEFAULT_MAX_VALUE_BYTES);
        match name {
            COUNT_SPLIT => count_split(args),
            PAD_WIDTH => pad_width(args, cap),
            STRING_ARG => string_arg(args, cap),
            JOIN_ARG => join_arg(args, cap),
            REPLACE_ARG => replace_arg(args, cap),
            CONCAT => concat(args, cap),
            DISTINCT => distinct(args, self.settings.cancel.as_ref()),
            _ => match self
                .history
                .as_ref()
                .and_then(|h| history::call(h, name, args))
            {
                Some(result) => result,
                None => Err(EvaluatorError::TypeError(
                    "T1006: Attempted to invoke a non-function".to_string(),
                )),
            },
        }
    }
}

impl NativeHost for Jsonata {
    fn var(&self, name: &str) -> JValue {
        // The last binding of a name wins, as `Context::bind` replaces.
        self.settings
            .bindings
            .iter()
            .rev()
            .find(|(bound, _)| bound == name)
            .map_or(JValue::Undefined, |(_, value)| value.clone())
    }

    fn call(&mut self, name: &str, args: &[JValue]) -> HostFnResult {
        self.host(name, args)
    }

    /// jsonata-core's own call of the built-in: the same checks, coercions and errors as when
    /// the interpreter evaluates the call. A call of one argument to a built-in of
    /// [`ONE_PARAMETER`] evaluates `$name($)` over the argument with one evaluator the run keeps
    /// (no bindings, no host functions); any other call binds its arguments as variables of a
    /// fresh evaluator over the expression's data, which its signature may take an argument from.
    fn builtin(&mut self, name: &str, args: Vec<JValue>, data: &JValue) -> HostFnResult {
        if let [arg] = args.as_slice()
            && ONE_PARAMETER.contains(&name)
            && is_plain_dollar(arg)
        {
            let call = call_ast(name, None)?;
            let settings = &self.settings;
            let evaluator = self
                .calls
                .get_or_insert_with(|| Evaluator::with_options(Context::new(), options(settings)));
            return evaluator.evaluate(&call, arg);
        }
        let call = call_ast(name, Some(args.len()))?;
        let mut context = Context::new();
        for (i, value) in args.into_iter().enumerate() {
            context.bind(format!("__mcpgraph_arg{i}"), value);
        }
        Evaluator::with_options(context, options(&self.settings)).evaluate(&call, data)
    }
}

/// The built-ins whose one argument always binds to their first parameter: those of one
/// parameter, or whose later parameters are optional. The others (`$lookup("k")`,
/// `$substring(1)`, `$power(2)`) may take their first argument from the context when given one
/// (their signature's `-`), so `$name($)` over the argument would not be the same call.
const ONE_PARAMETER: &[&str] = &[
    "abs",
    "average",
    "base64decode",
    "base64encode",
    "boolean",
    "ceil",
    "decodeUrl",
    "decodeUrlComponent",
    "distinct",
    "encodeUrl",
    "encodeUrlComponent",
    "floor",
    "formatBase",
    "keys",
    "length",
    "lowercase",
    "max",
    "merge",
    "min",
    "not",
    "number",
    "reverse",
    "round",
    "spread",
    "sqrt",
    "string",
    "sum",
    "trim",
    "type",
    "uppercase",
];

/// Whether `$` over `value` is `value` itself, as a bound variable would be: not an array the
/// evaluator marks as its input (`$` gives it bare), nor an object shaped like its internal
/// tuples (`$` gives the tuple's `@`).
fn is_plain_dollar(value: &JValue) -> bool {
    match value {
        JValue::Array(arr) => !arr.outer_wrapper,
        JValue::Object(obj) => !matches!(obj.get_index(0), Some((key, _)) if key == "@"),
        _ => true,
    }
}

/// The parsed call of the built-in `name`: `$name($)` (`arity` `None`), or of `arity`
/// arguments bound as `$__mcpgraph_arg0`... Parsed once per thread.
fn call_ast(name: &str, arity: Option<usize>) -> Result<std::rc::Rc<AstNode>, EvaluatorError> {
    type Calls = std::collections::HashMap<String, Vec<Option<std::rc::Rc<AstNode>>>>;
    thread_local! {
        static CALLS: std::cell::RefCell<Calls> = Default::default();
    }
    // Slot 0 is `$name($)`; slot n + 1 the call of n bound arguments.
    let slot = arity.map_or(0, |n| n + 1);
    CALLS.with(|calls| {
        if let Some(Some(call)) = calls.borrow().get(name).and_then(|slots| slots.get(slot)) {
            return Ok(call.clone());
        }
        let source = match arity {
            None => format!("${name}($)"),
            Some(n) => {
                let params: Vec<String> = (0..n).map(|i| format!("$__mcpgraph_arg{i}")).collect();
                format!("${name}({})", params.join(", "))
            }
        };
        let ast = std::rc::Rc::new(
            jsonata_core::parser::parse(&source)
                .map_err(|e| EvaluatorError::EvaluationError(e.to_string()))?,
        );
        let mut calls = calls.borrow_mut();
        let slots = calls.entry(name.to_string()).or_default();
        if slots.len() <= slot {
            slots.resize(slot + 1, None);
        }
        slots[slot] = Some(ast.clone());
        Ok(ast)
    })
}

/// An evaluation's failure in the original's terms: its code, its message without the code and
/// in jsonata-js's words, the expression's source.
pub fn eval_error(error: &EvaluatorError, source: &str) -> EvalError {
    let text = error.message();
    EvalError {
        code: error_code(text).map(str::to_string),
        message: js_message(message(text)),
        expression: source.to_string(),
    }
}

/// The guard rails of every evaluation of a run.
fn options(settings: &Settings) -> EvaluatorOptions {
    EvaluatorOptions {
        timeout_ms: settings.timeout_ms,
        cancel: settings.cancel.clone(),
        max_stack_depth: Some(settings.max_stack_depth.unwrap_or(MAX_STACK_DEPTH)),
        max_sequence_length: Some(MAX_SEQUENCE_LENGTH),
    }
}

/// jsonata-core's evaluator for one run: the bindings, the guard rails, the fused built-ins
/// and the history functions over `history`.
fn interpreter(history: Option<&SharedHistory>, settings: &Settings) -> Evaluator {
    let options = options(settings);
    let mut context = Context::new();
    for (name, value) in &settings.bindings {
        context.bind(name.clone(), value.clone());
    }
    let mut evaluator = Evaluator::with_options(context, options);
    // The functions the tool's expressions mention (`settings.functions`); our names are not
    // built-ins', so registration cannot fail.
    macro_rules! register {
        ($name:expr, $function:expr) => {
            if settings.functions.has($name) {
                let _ = evaluator.register_fn($name, $function);
            }
        };
    }
    let cap = settings.max_value_bytes.unwrap_or(DEFAULT_MAX_VALUE_BYTES);
    register!(COUNT_SPLIT, count_split);
    register!(PAD_WIDTH, move |args: &[JValue]| pad_width(args, cap));
    register!(STRING_ARG, move |args: &[JValue]| string_arg(args, cap));
    register!(JOIN_ARG, move |args: &[JValue]| join_arg(args, cap));
    register!(REPLACE_ARG, move |args: &[JValue]| replace_arg(args, cap));
    register!(CONCAT, move |args: &[JValue]| concat(args, cap));
    let stop = settings.cancel.clone();
    register!(DISTINCT, move |args: &[JValue]| {
        distinct(args, stop.as_ref())
    });
    if let Some(history) = history {
        for &name in HISTORY_FUNCTIONS {
            let history = history.clone();
            register!(name, move |args: &[JValue]| {
                history::call(&history, name, args).expect("a history function's name")
            });
        }
    }
    evaluator
}

/// `$count($split(x, separator))` as fused by [`mcpgraph_compiler::fuse`]: for a string, the
/// number of pieces without building them; for anything else, the original call evaluated.
fn count_split(args: &[JValue]) -> HostFnResult {
    match args {
        [JValue::String(s), JValue::String(separator)] if !separator.is_empty() => {
            Ok(count_pieces(s, separator))
        }
        _ => unfused_count_split(args),
    }
}

/// [`count_split`] as compiled code calls it (`rt::count_split`), the fused call's literal
/// separator given as it is: no call through the host by name, and no value made for the
/// separator unless `subject` is not a string (the original call then needs it).
pub fn count_split_literal(subject: JValue, separator: &str) -> HostFnResult {
    match &subject {
        JValue::String(s) if !separator.is_empty() => Ok(count_pieces(s, separator)),
        _ => unfused_count_split(&[subject, JValue::string(separator)]),
    }
}

/// How many pieces `$split(s, separator)` makes, without making them.
fn count_pieces(s: &str, separator: &str) -> JValue {
    let separators = match separator.as_bytes() {
        [byte] => bytecount::count(s.as_bytes(), *byte),
        _ => s.matches(separator).count(),
    };
    JValue::Number((separators + 1) as f64)
}

fn unfused_count_split(args: &[JValue]) -> HostFnResult {
    thread_local! {
        static UNFUSED: AstNode = jsonata_core::parser::parse("$count($split($x, $separator))")
            .expect("a fixed expression parses");
    }
    // The rewrite passes two arguments; a graph calling the function by name may not.
    let arg = |i: usize| args.get(i).cloned().unwrap_or(JValue::Undefined);
    let mut context = Context::new();
    context.bind("x".to_string(), arg(0));
    context.bind("separator".to_string(), arg(1));
    UNFUSED.with(|ast| {
        Evaluator::with_options(context, EvaluatorOptions::default()).evaluate(ast, &JValue::Null)
    })
}

/// The error of a built-in call whose result would pass `maxValueBytes`. (U1010: jsonata-core's
/// own codes are U1001–U1003; the code is not shown.)
fn too_large(cap: u64, what: &'static str, bytes: u64) -> EvaluatorError {
    let limit = Limit::ValueSize {
        max_bytes: cap,
        value: SizedValue::BuiltIn(what),
        bytes,
    };
    EvaluatorError::EvaluationError(format!("U1010: {limit}"))
}

fn first(args: &[JValue]) -> JValue {
    args.first().cloned().unwrap_or(JValue::Undefined)
}

/// `$pad(s, width)`: a result of `width` characters. jsonata-core truncates the width to a
/// 32-bit integer, as this does.
fn pad_width(args: &[JValue], cap: u64) -> HostFnResult {
    if let Some(JValue::Number(width)) = args.first() {
        let chars = (*width as i32).unsigned_abs() as u64;
        if chars > cap {
            return Err(too_large(cap, "the result of $pad", chars));
        }
    }
    Ok(first(args))
}

/// `$string(value)`: the JSON text of the value (a string is its own result).
fn string_arg(args: &[JValue], cap: u64) -> HostFnResult {
    match args.first() {
        Some(JValue::String(_)) | None => {}
        Some(value) => {
            let bytes = json_size(value, cap);
            if bytes > cap {
                return Err(too_large(cap, "the result of $string", bytes));
            }
        }
    }
    Ok(first(args))
}

/// `$join(array, separator)`: the strings and a separator between each two.
fn join_arg(args: &[JValue], cap: u64) -> HostFnResult {
    if let Some(JValue::Array(items)) = args.first() {
        let separator = match args.get(1) {
            Some(JValue::String(s)) => s.len() as u64,
            _ => 0,
        };
        let mut bytes = separator.saturating_mul(items.len().saturating_sub(1) as u64);
        for item in items.iter() {
            if bytes > cap {
                break;
            }
            if let JValue::String(s) = item {
                bytes += s.len() as u64;
            }
        }
        if bytes > cap {
            return Err(too_large(cap, "the result of $join", bytes));
        }
    }
    Ok(first(args))
}

/// `$replace(s, pattern, replacement, limit)` with a string replacement: each match replaced
/// by the replacement, whose `$n` references (regex patterns only) stand for at most the match.
/// A function replacement or an argument the check does not see is not checked here.
fn replace_arg(args: &[JValue], cap: u64) -> HostFnResult {
    let (Some(JValue::String(s)), Some(pattern), Some(JValue::String(replacement))) =
        (args.first(), args.get(1), args.get(2))
    else {
        return Ok(first(args));
    };
    let limit = match args.get(3) {
        Some(JValue::Number(n)) if *n >= 0.0 => *n as usize,
        _ => usize::MAX,
    };
    let (len, with) = (s.len() as u64, replacement.len() as u64);
    let bytes = match pattern {
        JValue::String(p) if !p.is_empty() => {
            let matches = s.matches(&**p).take(limit).count() as u64;
            len - matches * p.len() as u64 + matches.saturating_mul(with)
        }
        JValue::Regex { pattern, flags } => {
            let references = replacement.matches('$').count() as u64;
            let per_match = |matched: u64| with.saturating_add(references.saturating_mul(matched));
            // Without running the regex: at most one match per character (and one at the end),
            // each at most the whole string.
            let most_matches = (s.chars().count() as u64 + 1).min(limit as u64);
            let bound = len.saturating_add(most_matches.saturating_mul(per_match(len)));
            if bound <= cap {
                return Ok(first(args));
            }
            // The builtin reports a bad pattern itself.
            let Ok(regex) = build_regex(pattern, flags) else {
                return Ok(first(args));
            };
            let mut bytes = len;
            for found in regex.find_iter(s).take(limit) {
                let matched = found.len() as u64;
                bytes = (bytes - matched).saturating_add(per_match(matched));
                if bytes > cap {
                    break;
                }
            }
            bytes
        }
        _ => return Ok(first(args)),
    };
    if bytes > cap {
        return Err(too_large(cap, "the result of $replace", bytes));
    }
    Ok(first(args))
}

/// `a & b` inside a function body, where it may repeat without bound: jsonata-core's
/// concatenation (each side as `$string` casts it, undefined as ""), after a size check.
fn concat(args: &[JValue], cap: u64) -> HostFnResult {
    let undefined = JValue::Undefined;
    let (a, b) = (
        args.first().unwrap_or(&undefined),
        args.get(1).unwrap_or(&undefined),
    );
    let size = |v: &JValue| match v {
        JValue::String(s) => s.len() as u64,
        other => json_size(other, cap),
    };
    let bytes = size(a).saturating_add(size(b));
    if bytes > cap {
        return Err(too_large(cap, "the result of &", bytes));
    }
    crate::value::concat(a, b)
}

/// `$distinct(x)` as jsonata-core answers it (its `distinct` arm and `values_equal`): strings,
/// numbers, booleans and null found through a hash set; arrays and objects compared with every
/// one kept so far, as jsonata-core does, but stopping when the run is cancelled or out of time
/// (`stop`, which the watchdog trips), which jsonata-core's loop never looks at.
fn distinct(args: &[JValue], stop: Option<&CancelToken>) -> HostFnResult {
    use jsonata_core::functions::array::values_equal;
    #[derive(PartialEq, Eq, Hash)]
    enum Key {
        Null,
        Bool(bool),
        Number(u64),
        String(std::rc::Rc<str>),
    }
    let items = match args.first() {
        None | Some(JValue::Undefined) => return Ok(JValue::Undefined),
        Some(JValue::Array(items)) if items.len() > 1 => items,
        Some(other) => return Ok(other.clone()),
    };
    let mut keys = std::collections::HashSet::new();
    let mut structures: Vec<&JValue> = Vec::new();
    let mut result = Vec::new();
    let mut comparisons = 0u32;
    for value in items.iter() {
        let key = match value {
            JValue::Null => Some(Key::Null),
            JValue::Bool(b) => Some(Key::Bool(*b)),
            // 0 and -0 are equal; NaN equals nothing, so it is never a duplicate.
            JValue::Number(n) if !n.is_nan() => Some(Key::Number((n + 0.0).to_bits())),
            JValue::String(s) => Some(Key::String(s.clone())),
            _ => None,
        };
        let is_new = match (key, value) {
            (Some(key), _) => keys.insert(key),
            (None, JValue::Array(_) | JValue::Object(_)) => {
                let mut seen = false;
                for kept in &structures {
                    comparisons = comparisons.wrapping_add(1);
                    if comparisons.is_multiple_of(1024)
                        && stop.is_some_and(CancelToken::is_cancelled)
                    {
                        return Err(EvaluatorError::EvaluationError(
                            "U1003: Evaluation cancelled".to_string(),
                        ));
                    }
                    if values_equal(value, kept) {
                        seen = true;
                        break;
                    }
                }
                if !seen {
                    structures.push(value);
                }
                !seen
            }
            // Functions, NaN: values_equal holds for none of them.
            (None, _) => true,
        };
        if is_new {
            result.push(value.clone());
        }
    }
    let mut result = JValue::array(result);
    if items.sequence {
        result.mark_sequence();
    }
    Ok(result)
}

/// jsonata-js writes the operator of T2001/T2002 quoted (`the "+" operator`); jsonata-core
/// does not. Users of the original match on these texts.
fn js_message(text: &str) -> String {
    for side in ["left", "right"] {
        let head = format!("The {side} side of the ");
        if let Some(rest) = text.strip_prefix(&head)
            && let Some(op) = rest.strip_suffix(" operator must evaluate to a number")
            && !op.starts_with('"')
        {
            return format!("{head}\"{op}\" operator must evaluate to a number");
        }
    }
    text.to_string()
}

/// The first JSONata error code (`T0410`) in a message, wherever the engine put it.
pub fn error_code(message: &str) -> Option<&str> {
    let b = message.as_bytes();
    (0..b.len().saturating_sub(5)).find_map(|i| {
        let is_code = b[i].is_ascii_uppercase()
            && b[i + 1..i + 5].iter().all(u8::is_ascii_digit)
            && b[i + 5] == b':'
            && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
        is_code.then(|| &message[i..i + 5])
    })
}

/// jsonata-core prefixes messages with the JSONata error code (`T2001: `); the original shows the
/// bare message.
pub fn message(text: &str) -> &str {
    match error_code_prefix(text) {
        Some(code) => text[code.len()..].trim_start_matches(':').trim_start(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_errors_read_as_jsonata_js_writes_them() {
        assert_eq!(
            js_message("The left side of the + operator must evaluate to a number"),
            "The left side of the \"+\" operator must evaluate to a number"
        );
        assert_eq!(js_message("custom failure"), "custom failure");
        assert_eq!(message("T2001: boom"), "boom");
        assert_eq!(error_code("Invalid syntax: T1006: x"), Some("T1006"));
    }

    /// Compiled code's call of a value built-in with one argument answers as the interpreter's
    /// call does over the same data, for every such built-in, argument and data.
    #[test]
    fn one_argument_builtins_answer_as_the_interpreter() {
        let json = |text: &str| crate::value::to_jvalue(&serde_json::from_str(text).unwrap());
        let mut sequence = json("[[1, 2]]");
        sequence.mark_sequence();
        let mut input = json("[3, 1]");
        input = input.into_outer_wrapper();
        let values = [
            JValue::Undefined,
            JValue::Null,
            JValue::Bool(true),
            JValue::Number(2.5),
            JValue::Number(-3.0),
            JValue::string("k"),
            JValue::string("aGk="),
            json("{\"k\": 7, \"b\": [1]}"),
            json("{\"@\": 1, \"__tuple__\": true}"),
            json("[3, 1, 2]"),
            json("[{\"a\": 1}, {\"b\": 2}]"),
            json("[\"x\", \"y\"]"),
            sequence,
            input,
        ];
        let datas = [
            json("{\"k\": 7, \"undefined\": 7}"),
            JValue::string("context"),
            JValue::Number(4.0),
            json("[1, 2]"),
            JValue::Null,
        ];
        let show = |result: &HostFnResult| match result {
            Ok(value) => format!("{value:?}"),
            Err(error) => format!("error {}", error.message()),
        };
        let mut compared = 0;
        for name in mcpgraph_compiler::expr::VALUE_BUILTINS {
            // jsonata-core's own call, not the fused one `Expr::parse` may make of it.
            let call = jsonata_core::parser::parse(&format!("${name}($x)")).unwrap();
            for value in &values {
                for data in &datas {
                    let settings = || Settings {
                        bindings: vec![("x".to_string(), value.clone())],
                        ..Settings::default()
                    };
                    let interpreted = Jsonata::new(None, settings())
                        .interpreter()
                        .evaluate(&call, data);
                    let compiled =
                        Jsonata::new(None, settings()).builtin(name, vec![value.clone()], data);
                    let same = match (&interpreted, &compiled) {
                        (Ok(a), Ok(b)) => crate::native::identical(a, b),
                        (Err(a), Err(b)) => a.message() == b.message(),
                        _ => false,
                    };
                    assert!(
                        same,
                        "${name}({value:?}) over {data:?}: interpreted {}, compiled {}",
                        show(&interpreted),
                        show(&compiled)
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared > 3000, "{compared}");
    }

    /// A run's interpreter gets the registered functions its tool's expressions mention, by
    /// call or by reference, and all of them when one calls `$eval`; the ones it gets answer.
    #[test]
    fn an_interpreter_gets_the_registered_functions_its_expressions_mention() {
        let mentioned = |sources: &[&str]| {
            let exprs: Vec<Expr> = sources.iter().map(|s| Expr::parse(s).unwrap()).collect();
            Functions::mentioned_in(&exprs)
        };
        let loop_step = mentioned(&[
            r#"$executionCount("n") = 0 ? 1 : $nodeExecution("n", -1).c + 1"#,
            "$.entry.items",
        ]);
        assert!(loop_step.has("executionCount") && loop_step.has("nodeExecution"));
        assert!(!loop_step.has("previousNode") && !loop_step.has("nodeExecutions"));
        assert!(!loop_step.has(COUNT_SPLIT) && !loop_step.has(DISTINCT));
        // A reference, a fused call, a function inside a lambda.
        let other = mentioned(&[
            "($f := $previousNode; $f())",
            r#"$count($split(s, ","))"#,
            "function($x) { $nodeExecutions($x) }",
        ]);
        assert!(other.has("previousNode") && other.has("nodeExecutions"));
        assert!(other.has(COUNT_SPLIT) && !other.has("nodeExecution"));
        assert_eq!(mentioned(&["{ \"a\": $.entry.a }"]), Functions(0));
        // `$eval` may call any of them from text built at run time.
        assert_eq!(mentioned(&[r#"$eval("$previousNode()")"#]), Functions::ALL);
        assert_eq!(Functions::default(), Functions::ALL);

        // What the interpreter gets is what answers: the history functions mentioned do, one
        // not mentioned is not there.
        let names = std::sync::Arc::new(std::collections::HashMap::from([(
            "n".to_string(),
            mcpgraph_compiler::ir::NodeId(0),
        )]));
        let history = std::rc::Rc::new(std::cell::RefCell::new(crate::history::History::new(
            names, 1,
        )));
        let settings = Settings {
            functions: loop_step,
            ..Settings::default()
        };
        let mut jsonata = Jsonata::new(Some(&history), settings);
        let count = Expr::parse(r#"$executionCount("n")"#).unwrap();
        assert_eq!(
            jsonata.eval(&count, &JValue::Null).unwrap(),
            JValue::Number(0.0)
        );
        let previous = Expr::parse("$previousNode()").unwrap();
        assert!(jsonata.eval(&previous, &JValue::Null).is_err());
        let mut every = Jsonata::new(Some(&history), Settings::default());
        assert_eq!(every.eval(&previous, &JValue::Null).unwrap(), JValue::Null);

        // A history function's name called as a field: jsonata-core's error names the function
        // when it is registered, so the name as a field registers it too.
        let named = Expr::parse("previousNode[0]()").unwrap();
        let functions = Functions::mentioned_in([&named]);
        assert!(functions.has("previousNode"));
        let mut only = Jsonata::new(
            Some(&history),
            Settings {
                functions,
                ..Settings::default()
            },
        );
        let error = only.eval(&named, &JValue::Null).unwrap_err();
        assert_eq!(error, every.eval(&named, &JValue::Null).unwrap_err());
        assert!(error.message.contains("$previousNode"), "{error}");
    }

    /// The fused `$count($split(..))` answers as the unfused call does, errors included.
    #[test]
    fn fused_count_split_answers_as_the_original_call() {
        let data = crate::value::to_jvalue(&serde_json::json!({
            "lines": "a\nb\n\nc\n", "empty": "", "one": "abc", "emoji": "1💩2💩💩3",
            "n": 12345, "list": ["a\nb", "c"], "single": ["x\ny"], "obj": {"k": "v"},
            "nul": null, "t": true,
            // Longer than the 32-byte chunks bytecount reads with AVX2, with a remainder.
            "long": (0..70).map(|i| format!("line {i} b")).collect::<Vec<_>>().join("\n"),
        }));
        let mut jsonata = Jsonata::new(None, Settings::default());
        let mut cases = 0;
        for subject in [
            "lines",
            "empty",
            "one",
            "emoji",
            "n",
            "list",
            "single",
            "obj",
            "nul",
            "t",
            "long",
            "missing",
            "list[0]",
            "\"\"",
            "$string(n)",
        ] {
            for separator in ["\n", "💩", "b", "ab", "zz"] {
                let source = format!("$count($split({subject}, \"{separator}\"))");
                let fused = Expr::parse(&source).unwrap();
                assert!(
                    format!("{:?}", fused.ast).contains(COUNT_SPLIT),
                    "{source} is fused"
                );
                let plain = Expr {
                    native: None,
                    source: source.clone(),
                    ast: std::sync::Arc::new(jsonata_core::parser::parse(&source).unwrap()),
                };
                assert_eq!(
                    jsonata.eval(&fused, &data),
                    jsonata.eval(&plain, &data),
                    "{source}"
                );
                cases += 1;
            }
        }
        assert_eq!(cases, 75);
        // Called by name with the wrong arity: an error, not a panic.
        let direct = Expr::parse(&format!("${COUNT_SPLIT}(1)")).unwrap();
        assert!(jsonata.eval(&direct, &data).is_err());
    }
}
