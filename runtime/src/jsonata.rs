//! JSONata evaluation for one run: jsonata-core's evaluator with the history functions
//! registered as host functions, guard rails set, and errors in the original's words.

use crate::failure::{Failure, FailureKind};
use crate::history::{self, SharedHistory};
use jsonata_core::ast::AstNode;
use jsonata_core::evaluator::{
    CancelToken, Context, Evaluator, EvaluatorOptions, HostFnResult, error_code_prefix,
};
use jsonata_core::value::JValue;
use mcpgraph_compiler::fuse::COUNT_SPLIT;
use mcpgraph_compiler::ir::Expr;

/// Bounds no graph expression should reach; they turn a runaway expression into an error.
const MAX_STACK_DEPTH: usize = 10_000;
const MAX_SEQUENCE_LENGTH: usize = 10_000_000;

pub struct Jsonata {
    evaluator: Evaluator,
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
            Some("D1012") => FailureKind::Limit,
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
        let options = EvaluatorOptions {
            timeout_ms: settings.timeout_ms,
            cancel: settings.cancel,
            max_stack_depth: Some(settings.max_stack_depth.unwrap_or(MAX_STACK_DEPTH)),
            max_sequence_length: Some(MAX_SEQUENCE_LENGTH),
        };
        let mut context = Context::new();
        for (name, value) in settings.bindings {
            context.bind(name, value);
        }
        let mut evaluator = Evaluator::with_options(context, options);
        // Not a built-in's name, so registration cannot fail.
        let _ = evaluator.register_fn(COUNT_SPLIT, count_split);
        if let Some(history) = history {
            for (name, function) in history::functions(history) {
                // The names are ours and not built-ins, so registration cannot fail.
                let _ = evaluator.register_fn(name, move |args: &[JValue]| function(args));
            }
        }
        Jsonata { evaluator }
    }

    /// Evaluates `expr` against `data`.
    pub fn eval(&mut self, expr: &Expr, data: &JValue) -> Result<JValue, EvalError> {
        self.evaluator.evaluate(&expr.ast, data).map_err(|e| {
            let text = e.message();
            EvalError {
                code: error_code(text).map(str::to_string),
                message: js_message(message(text)),
                expression: expr.source.clone(),
            }
        })
    }
}

/// `$count($split(x, separator))` as fused by [`mcpgraph_compiler::fuse`]: for a string, the
/// number of pieces without building them; for anything else, the original call evaluated.
fn count_split(args: &[JValue]) -> HostFnResult {
    match args {
        [JValue::String(s), JValue::String(separator)] if !separator.is_empty() => {
            let separators = match separator.as_bytes() {
                [byte] => s.bytes().filter(|b| b == byte).count(),
                _ => s.matches(&**separator).count(),
            };
            Ok(JValue::Number((separators + 1) as f64))
        }
        _ => unfused_count_split(args),
    }
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

    /// The fused `$count($split(..))` answers as the unfused call does, errors included.
    #[test]
    fn fused_count_split_answers_as_the_original_call() {
        let data = crate::value::to_jvalue(&serde_json::json!({
            "lines": "a\nb\n\nc\n", "empty": "", "one": "abc", "emoji": "1💩2💩💩3",
            "n": 12345, "list": ["a\nb", "c"], "single": ["x\ny"], "obj": {"k": "v"},
            "nul": null, "t": true
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
        assert_eq!(cases, 70);
        // Called by name with the wrong arity: an error, not a panic.
        let direct = Expr::parse(&format!("${COUNT_SPLIT}(1)")).unwrap();
        assert!(jsonata.eval(&direct, &data).is_err());
    }
}
