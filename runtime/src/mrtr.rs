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
        Sealer::with_key(std::env::var(KEY_VARIABLE).ok())
    }

    /// The key is usable.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.codec.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    fn with_key(key: Option<String>) -> Sealer {
        let codec = match key {
            Some(key) => RequestStateCodec::try_new(key.into_bytes()).map_err(|e| {
                format!("{KEY_VARIABLE} cannot seal the question's state: {e} (it needs at least 32 bytes)")
            }),
            None => {
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
                // This node's first answer not used yet: a node asked again (in a loop) takes
                // its answers in order; branches running side by side may ask in any order. An
                // answer no question of this round takes (the run went another way) is dropped.
                let next = {
                    let mut answers = lock(&round.answers);
                    answers
                        .iter()
                        .position(|a| a.node == question.node)
                        .and_then(|i| answers.remove(i))
                };
                match next {
                    Some(answer) => {
                        lock(&round.used).push(answer.clone());
                        answer_of(&answer.result)
                    }
                    None => {
                        // A question that cannot be put is refused here, so the ask's
                        // `onError` route handles it as over stdio.
                        if let Err(e) = serde_json::from_value::<rmcp::model::ElicitationSchema>(
                            question.schema.clone(),
                        ) {
                            return Err(Refusal::unavailable(format!(
                                "The question's schema cannot be sent: {e}"
                            )));
                        }
                        // One question per round: the first one reached.
                        lock(&round.asked).get_or_insert(question);
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

/// The bytes a state is bound to: the tool's name and its arguments, with every object's keys
/// sorted (a client may send them in another order next round).
fn binding(tool: &str, arguments: &Map<String, Value>) -> Vec<u8> {
    fn canonical(value: &Value, out: &mut Vec<u8>) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push(b'{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend(serde_json::to_vec(key).unwrap_or_default());
                    out.push(b':');
                    canonical(&map[key], out);
                }
                out.push(b'}');
            }
            Value::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    canonical(item, out);
                }
                out.push(b']');
            }
            other => out.extend(serde_json::to_vec(other).unwrap_or_default()),
        }
    }
    let mut bytes = tool.as_bytes().to_vec();
    bytes.push(0);
    canonical(&Value::Object(arguments.clone()), &mut bytes);
    bytes
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use serde_json::json;

    const KEY: &str = "unit-test-key-0123456789abcdef0123456789";

    fn question(node: &str) -> Question {
        Question {
            node: node.to_string(),
            message: format!("{node}?"),
            schema: json!({"type": "object", "properties": {"ok": {"type": "boolean"}}}),
            timeout_ms: None,
        }
    }

    fn arguments() -> Map<String, Value> {
        json!({"path": "a.txt"}).as_object().cloned().unwrap()
    }

    /// The first round stops at the question; the next answers it from the state, in any order
    /// of the nodes, and stops at the next new one with both answers sealed.
    #[test]
    fn rounds_carry_the_answers() {
        let sealer = Sealer::with_key(Some(KEY.into()));
        let cancel = CancellationToken::new();
        let first =
            Arc::new(Round::start(&sealer, "t", &arguments(), None, None, &cancel).unwrap());
        let asker = first.asker();
        assert!(asker(question("a")).now_or_never().is_none());
        assert!(first.stop.is_cancelled() && !cancel.is_cancelled());
        // A second question in the same round (a parallel branch) does not replace the first.
        assert!(asker(question("b")).now_or_never().is_none());
        let input = first.input_required(&sealer).unwrap().unwrap();
        let sealed = input.request_state.clone().unwrap();
        let asked = serde_json::to_value(&input).unwrap();
        assert_eq!(
            asked["inputRequests"]["ask"]["params"]["message"], "a?",
            "{asked}"
        );

        let mut responses = InputResponses::new();
        responses.insert(
            INPUT.into(),
            json!({"action": "accept", "content": {"ok": true}}),
        );
        let second = Arc::new(
            Round::start(
                &sealer,
                "t",
                &arguments(),
                Some(&sealed),
                Some(&responses),
                &cancel,
            )
            .unwrap(),
        );
        let asker = second.asker();
        let a = asker(question("a")).now_or_never().unwrap();
        assert_eq!(a.unwrap(), json!({"ok": true}));
        assert!(!second.stop.is_cancelled());
        assert!(asker(question("b")).now_or_never().is_none());
        let sealed = second
            .input_required(&sealer)
            .unwrap()
            .unwrap()
            .request_state
            .unwrap();
        responses.insert(INPUT.into(), json!({"action": "decline"}));
        let third = Arc::new(
            Round::start(
                &sealer,
                "t",
                &arguments(),
                Some(&sealed),
                Some(&responses),
                &cancel,
            )
            .unwrap(),
        );
        let asker = third.asker();
        // Asked in the other order this time: each node still gets its own answer.
        let b = asker(question("b")).now_or_never().unwrap();
        assert_eq!(
            b.unwrap_err().kind,
            mcpgraph_compiler::ir::FailureKind::Declined
        );
        let a = asker(question("a")).now_or_never().unwrap();
        assert_eq!(a.unwrap(), json!({"ok": true}));
        assert!(third.input_required(&sealer).is_none() && !third.stop.is_cancelled());
    }

    /// A state is bound to its tool, its arguments and its key.
    #[test]
    fn states_do_not_travel() {
        let sealer = Sealer::with_key(Some(KEY.into()));
        let cancel = CancellationToken::new();
        let round =
            Arc::new(Round::start(&sealer, "t", &arguments(), None, None, &cancel).unwrap());
        assert!(round.asker()(question("a")).now_or_never().is_none());
        let sealed = round
            .input_required(&sealer)
            .unwrap()
            .unwrap()
            .request_state
            .unwrap();
        let other_args = json!({"path": "b.txt"}).as_object().cloned().unwrap();
        assert!(Round::start(&sealer, "t", &other_args, Some(&sealed), None, &cancel).is_err());
        assert!(Round::start(&sealer, "u", &arguments(), Some(&sealed), None, &cancel).is_err());
        let other_key = Sealer::with_key(Some("another-key-0123456789abcdef0123456789".into()));
        assert!(Round::start(&other_key, "t", &arguments(), Some(&sealed), None, &cancel).is_err());
        assert!(Round::start(&sealer, "t", &arguments(), Some("forged"), None, &cancel).is_err());
        assert!(Round::start(&sealer, "t", &arguments(), Some(&sealed), None, &cancel).is_ok());
        let mut two = Map::new();
        two.insert("b".into(), json!(1));
        two.insert("a".into(), json!({"y": 2, "x": 1}));
        let mut reordered = Map::new();
        reordered.insert("a".into(), json!({"x": 1, "y": 2}));
        reordered.insert("b".into(), json!(1));
        assert_eq!(binding("t", &two), binding("t", &reordered));
        // A short key is refused when a question is to be sealed, not silently weakened.
        let short = Sealer::with_key(Some("short".into()));
        let round = Arc::new(Round::start(&short, "t", &arguments(), None, None, &cancel).unwrap());
        assert!(round.asker()(question("a")).now_or_never().is_none());
        assert!(round.input_required(&short).unwrap().is_err());
    }
}
