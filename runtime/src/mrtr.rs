//! `ask` for protocol 2026-07-28 clients, which a server may not send requests to: the
//! multi-round-trip request (MRTR, SEP-2322). A run that reaches a question stops, and the call
//! answers `input_required` with the question and a sealed `requestState`; the client asks the
//! person and calls again with the answer. The state holds the answers so far, so the next round
//! runs the tool again from its start, answering the questions already asked from the state,
//! until it reaches a new question or its end (docs/http.md, "Questions over HTTP").
//!
//! The state is sealed (HMAC) with the key in `MCPGRAPH_REQUEST_STATE_KEY`, bound to the tool and
//! its arguments, and expires: every replica that shares the key can take the next round.

use crate::executor::{Asker, Question, Refusal};
use rmcp::model::{ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The environment variable holding the sealing key (at least 32 bytes).
pub const KEY_VARIABLE: &str = "MCPGRAPH_REQUEST_STATE_KEY";
/// The name of the one input request of a round.
const INPUT: &str = "ask";
/// How long a question may wait for the person's answer.
const STATE_TTL: Duration = Duration::from_secs(3600);

/// Seals and opens request states.
pub(crate) struct Sealer {
    codec: Result<RequestStateCodec, String>,
}

impl Sealer {
    /// The key from [`KEY_VARIABLE`], or a random one for this process (then only this process
    /// can take the next round).
    pub(crate) fn from_env() -> Sealer {
        let codec = match std::env::var(KEY_VARIABLE) {
            Ok(key) => RequestStateCodec::try_new(key.into_bytes()).map_err(|e| {
                format!("{KEY_VARIABLE} cannot seal the question's state: {e} (it needs at least 32 bytes)")
            }),
            Err(_) => {
                let mut key = vec![0u8; 32];
                getrandom::fill(&mut key)
                    .map_err(|e| format!("no random key for the question's state: {e}"))
                    .and_then(|()| {
                        RequestStateCodec::try_new(key).map_err(|e| e.to_string())
                    })
            }
        };
        Sealer { codec }
    }
}

/// What a round carries to the next.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The answers given so far, in the order the run asked.
    answers: Vec<Answer>,
    /// The node whose question the last round asked.
    pending: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    node: String,
    /// The client's `ElicitResult`, as it sent it.
    result: Value,
}

/// One round of a call: the answers it can give, and the question it stopped at.
pub(crate) struct Round {
    answers: Mutex<VecDeque<Answer>>,
    used: Mutex<Vec<Answer>>,
    asked: Mutex<Option<Question>>,
    /// Cancelled to stop the run at a new question; a child of the request's token.
    pub(crate) stop: CancellationToken,
    /// The tool and its arguments, which the state is bound to.
    binding: Vec<u8>,
}

/// The request's state was not made by this server (or a replica with its key), was made for
/// another call, or has expired.
#[derive(Debug)]
pub(crate) struct BadState(pub(crate) String);

impl Round {
    /// The round of a call: the first (no `requestState`) or the next.
    pub(crate) fn start(
        sealer: &Sealer,
        tool: &str,
        arguments: &Map<String, Value>,
        request_state: Option<&str>,
        input_responses: Option<&InputResponses>,
        cancel: &CancellationToken,
    ) -> Result<Round, BadState> {
        let binding = binding(tool, arguments);
        let mut state = match request_state {
            None => State::default(),
            Some(sealed) => {
                let codec = sealer.codec.as_ref().map_err(|e| BadState(e.clone()))?;
                codec
                    .open_json_with::<State>(sealed, &binding)
                    .map_err(|e| {
                        BadState(format!(
                            "requestState was not made by this server for this call, or has expired: {e}"
                        ))
                    })?
            }
        };
        if let Some(node) = state.pending.take()
            && let Some(result) = input_responses.and_then(|r| r.get(INPUT))
        {
            state.answers.push(Answer {
                node,
                result: result.clone(),
            });
        }
        Ok(Round {
            answers: Mutex::new(state.answers.into()),
            used: Mutex::new(Vec::new()),
            asked: Mutex::new(None),
            stop: cancel.child_token(),
            binding,
        })
    }

    /// Answers the run's questions from the answers so far; a new question stops the run.
    pub(crate) fn asker(self: &Arc<Round>) -> Asker {
        let round = self.clone();
        Arc::new(move |question: Question| {
            let round = round.clone();
            Box::pin(async move {
                let next = {
                    let mut answers = lock(&round.answers);
                    match answers.front() {
                        Some(a) if a.node == question.node => answers.pop_front(),
                        // The run took another way than last round: the later answers were
                        // given to other questions.
                        _ => {
                            answers.clear();
                            None
                        }
                    }
                };
                match next {
                    Some(answer) => {
                        lock(&round.used).push(answer.clone());
                        answer_of(&answer.result)
                    }
                    None => {
                        *lock(&round.asked) = Some(question);
                        round.stop.cancel();
                        std::future::pending().await
                    }
                }
            })
        })
    }

    /// The question the run stopped at, as the call's `input_required` result.
    pub(crate) fn input_required(
        &self,
        sealer: &Sealer,
    ) -> Option<Result<InputRequiredResult, String>> {
        let question = lock(&self.asked).take()?;
        Some(self.seal(sealer, question))
    }

    fn seal(&self, sealer: &Sealer, question: Question) -> Result<InputRequiredResult, String> {
        let codec = sealer.codec.as_ref().map_err(Clone::clone)?;
        let state = State {
            answers: lock(&self.used).clone(),
            pending: Some(question.node.clone()),
        };
        let sealed = codec
            .seal_json_with(
                &state,
                &SealOptions::new()
                    .associated_data(&self.binding)
                    .ttl(STATE_TTL),
            )
            .map_err(|e| format!("the question's state cannot be sealed: {e}"))?;
        let schema = serde_json::from_value(question.schema)
            .map_err(|e| format!("the question's schema cannot be sent: {e}"))?;
        let request = ElicitRequest::new(ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: question.message,
            requested_schema: schema,
        });
        let mut requests = InputRequests::new();
        requests.insert(INPUT.to_string(), InputRequest::Elicitation(request));
        Ok(InputRequiredResult::new(Some(requests), Some(sealed)))
    }
}

/// The person's answer as the run sees it: the accepted content, or why not.
pub(crate) fn answer_of(result: &Value) -> Result<Value, Refusal> {
    let result: ElicitResult = serde_json::from_value(result.clone()).map_err(|e| {
        Refusal::declined(format!(
            "The client answered with something other than an elicitation result: {e}"
        ))
    })?;
    match result.action {
        ElicitationAction::Accept => result
            .content
            .ok_or_else(|| Refusal::declined("The answer was accepted without content")),
        ElicitationAction::Decline => Err(Refusal::declined("The person declined")),
        ElicitationAction::Cancel => Err(Refusal::declined("The person cancelled")),
        _ => Err(Refusal::declined("The person did not accept")),
    }
}

/// The bytes a state is bound to: the tool's name and its arguments.
fn binding(tool: &str, arguments: &Map<String, Value>) -> Vec<u8> {
    let mut bytes = tool.as_bytes().to_vec();
    bytes.push(0);
    bytes.extend(serde_json::to_vec(arguments).unwrap_or_default());
    bytes
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
