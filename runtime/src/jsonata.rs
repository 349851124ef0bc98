//! JSONata evaluation for one run: jsonata-core's evaluator with the history functions
//! registered as host functions, guard rails set, and errors in the original's words.

use crate::history::{self, SharedHistory};
use jsonata_core::evaluator::{
    CancelToken, Context, Evaluator, EvaluatorOptions, error_code_prefix,
};
use jsonata_core::value::JValue;
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
}
