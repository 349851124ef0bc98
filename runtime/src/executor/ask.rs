//! `ask` nodes (extensions §7): the question for the person at the client, who answers it (an
//! [`Asker`], given by the front end: elicitation over MCP, the studio's page), and the answer
//! checked against the question's schema.

use super::{NodeFailure, Run, Step};
use crate::failure::{Failure, FailureKind};
use crate::program::{compile_schema, lines, violations};
use crate::value::{to_json, to_jvalue};
use futures::future::BoxFuture;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Expr, Node};
use serde_json::Value;
use std::sync::Arc;

/// A question for the person at the client (an `ask` node).
#[derive(Debug, Clone)]
pub struct Question {
    /// The asking node's id.
    pub node: String,
    pub message: String,
    /// The flat object schema the answer must match (sent as `requestedSchema`).
    pub schema: Value,
    /// The ask's `timeoutMs`. An asker that can tell the person the question is withdrawn
    /// should give up by itself after this long, with [`Refusal::timed_out`], once it has
    /// done so; the executor abandons the asker [`ASK_GRACE_MS`] later regardless.
    pub timeout_ms: Option<u64>,
}

/// How long after an ask's `timeoutMs` the executor stops waiting for an asker that did not give
/// up by itself.
pub const ASK_GRACE_MS: u64 = 250;

/// Why an ask got no usable answer: `declined` or `unavailable`, with the reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub kind: FailureKind,
    pub message: String,
}

impl Refusal {
    pub fn declined(message: impl Into<String>) -> Refusal {
        Refusal {
            kind: FailureKind::Declined,
            message: message.into(),
        }
    }

    pub fn unavailable(message: impl Into<String>) -> Refusal {
        Refusal {
            kind: FailureKind::Unavailable,
            message: message.into(),
        }
    }

    /// The question's `timeoutMs` passed without an answer.
    pub fn timed_out(timeout_ms: u64) -> Refusal {
        Refusal {
            kind: FailureKind::Timeout,
            message: ask_timed_out(timeout_ms),
        }
    }
}

fn ask_timed_out(timeout_ms: u64) -> String {
    format!("No answer within timeoutMs {timeout_ms}")
}

/// Answers `ask` nodes: the accepted content, or why not. Dropping the future abandons the
/// question (a timeout, the run ending): the asker should tell whoever it asked.
pub type Asker = Arc<dyn Fn(Question) -> BoxFuture<'static, Result<Value, Refusal>> + Send + Sync>;

impl Run<'_> {
    /// `ask`: the person's answer, through the client's elicitation (extensions §7).
    pub(super) async fn ask(
        &self,
        node: &Node,
        message: &Expr,
        schema: &Value,
        timeout_ms: Option<u64>,
    ) -> Step {
        // The capability first: nobody to ask, nothing evaluated.
        let Some(asker) = self.session.env.asker.clone() else {
            return Err(Failure::new(
                FailureKind::Unavailable,
                "Nobody can answer: the client does not support elicitation",
            )
            .into());
        };
        let context = self.context();
        let text = match self.eval(message, &context)? {
            JValue::String(s) => s.to_string(),
            other => {
                return Err(Failure::new(
                    FailureKind::Expression,
                    format!(
                        "The ask message must be a string, not {}\nExpression: {}",
                        crate::value::to_js_json(&to_json(&other).unwrap_or(Value::Null)),
                        message.source
                    ),
                )
                .into());
            }
        };
        let question = Question {
            node: node.id.clone(),
            message: text,
            schema: schema.clone(),
            timeout_ms,
        };
        let answer = async {
            let content = asker(question).await.map_err(|refusal| {
                NodeFailure::from(Failure::new(refusal.kind, refusal.message))
            })?;
            check_answer(schema, &content)?;
            Ok(to_jvalue(&content))
        };
        let value = self
            .session
            .bounded(
                timeout_ms.map(|ms| ms.saturating_add(ASK_GRACE_MS)),
                |_| ask_timed_out(timeout_ms.unwrap_or_default()),
                answer,
            )
            .await?;
        Ok((value, node.next, None))
    }
}

/// An accepted answer must match the question's schema (checked as tools' schemas are, formats
/// included): else `declined`, saying why.
fn check_answer(schema: &Value, content: &Value) -> Result<(), NodeFailure> {
    let validator = compile_schema(schema).map_err(|e| {
        Failure::new(
            FailureKind::Declined,
            format!("The answer cannot be checked: {e}"),
        )
    })?;
    violations(&validator, content).map_err(|problems| {
        Failure::new(
            FailureKind::Declined,
            lines("The answer does not match the schema:", &problems),
        )
        .into()
    })
}
