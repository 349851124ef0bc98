//! `ask` for protocol 2026-07-28 clients, which a server may not send requests to: the
//! multi-round-trip request (MRTR, SEP-2322). A run that reaches a question stops, and the call
//! answers `input_required` with the question and a sealed `requestState`; the client asks the
//! person and calls again with the answer. The state holds the answers so far, so the next round
//! runs the tool again from its start, answering the questions already asked from the state,
//! until it reaches a new question or its end (docs/http.md, "Questions over HTTP").
//!
//! Each answer in the state is bound to the question it answered: the asking node and a digest
//! of the question's message and requested schema. A round whose run computes another question
//! at that node ("Delete 3 files?" where "Delete 2 files?" was answered) asks the client again:
//! consent is never carried over to a question the person was not shown.
//!
//! The state is sealed (HMAC) with the key in `MCPGRAPH_REQUEST_STATE_KEY` (UTF-8 text of at
//! least 32 bytes; anything else is refused, by an HTTP server at its start, never replaced by
//! a random key), bound to the tool and its arguments, and expires: every replica that shares
//! the key can take the next round.

use crate::executor::{Asker, Question, Refusal};
use rmcp::model::{ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::model::{InputRequest, InputRequests, InputRequiredResult, InputResponses};
use rmcp::model::{RequestStateCodec, SealOptions};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The environment variable holding the sealing key (UTF-8 text of at least 32 bytes).
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
    /// The key from [`KEY_VARIABLE`], or a random one for this process when the variable is
    /// unset (then only this process can take the next round). It is read as an `OsString`, so
    /// a value that is not UTF-8 is refused by [`Sealer::check`] rather than taken for unset:
    /// a replica that quietly made its own key would refuse every other replica's states.
    pub(crate) fn from_env() -> Sealer {
        Sealer::with_key(std::env::var_os(KEY_VARIABLE))
    }

    /// The key is usable.
    pub(crate) fn check(&self) -> Result<(), String> {
        self.codec.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    fn with_key(key: Option<OsString>) -> Sealer {
        let codec = match key {
            Some(key) => key_text(key).and_then(|key| {
                RequestStateCodec::try_new(key.into_bytes()).map_err(|e| {
                    format!(
                        "{KEY_VARIABLE} cannot seal the question's state: {e}; set it to at least \
                         {} bytes of UTF-8 text, the same on every replica",
                        RequestStateCodec::MIN_KEY_LENGTH
                    )
                })
            }),
            None => {
                let mut key = vec![0u8; 32];
                getrandom::fill(&mut key)
                    .map_err(|e| format!("no random key for the question's state: {e}"))
                    .and_then(|()| RequestStateCodec::try_new(key).map_err(|e| e.to_string()))
            }
        };
        Sealer { codec }
    }
}

/// The key as text: one every replica reads the same, whatever its platform's encoding.
fn key_text(key: OsString) -> Result<String, String> {
    key.into_string().map_err(|_| {
        format!(
            "{KEY_VARIABLE} is not UTF-8 text: set it to at least {} bytes of UTF-8 text, the \
             same on every replica (for example the output of `openssl rand -hex 32`)",
            RequestStateCodec::MIN_KEY_LENGTH
        )
    })
}

/// What a round carries to the next.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The answers given so far, in the order the run asked.
    answers: Vec<Answer>,
    /// The question the last round asked, which the client's `inputResponses` answer.
    pending: Option<Asked>,
}

/// A question as an answer is bound to it: the asking node and what it asked. An answer is
/// given again only to the very question it answered, so consent to "Delete 2 files?" is not
/// taken for "Delete 3 files?" when a later round computes another message (or schema) at the
/// same node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Asked {
    node: String,
    /// SHA-256 (hex) of the question's message and requested schema as canonical JSON: the
    /// state is authenticated, so a digest binds the answer as well as the text would, and
    /// keeps the state small.
    question: String,
}

impl Asked {
    fn of(question: &Question) -> Asked {
        let mut bytes = Vec::new();
        canonical_json(
            &serde_json::json!({"message": question.message, "schema": question.schema}),
            &mut bytes,
        );
        let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
        Asked {
            node: question.node.clone(),
            question: digest.as_ref().iter().map(|b| format!("{b:02x}")).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Answer {
    /// The question this answers.
    asked: Asked,
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
        if let Some(asked) = state.pending.take()
            && let Some(result) = input_responses.and_then(|r| r.get(INPUT))
        {
            state.answers.push(Answer {
                asked,
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
                // The first answer not used yet to this very question (node, message and
                // schema): a node asked again (in a loop) takes its answers in order; branches
                // running side by side may ask in any order. A node that now asks something
                // else is asked again. An answer no question of this round takes (the run went
                // another way, or its question changed) is dropped.
                let asked = Asked::of(&question);
                let next = {
                    let mut answers = lock(&round.answers);
                    answers
                        .iter()
                        .position(|a| a.asked == asked)
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
            pending: Some(Asked::of(&question)),
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

/// The bytes a state is bound to: the tool's name and its arguments as canonical JSON (a
/// client may send their keys in another order next round).
fn binding(tool: &str, arguments: &Map<String, Value>) -> Vec<u8> {
    let mut bytes = tool.as_bytes().to_vec();
    bytes.push(0);
    canonical_json(&Value::Object(arguments.clone()), &mut bytes);
    bytes
}

/// `value` as JSON text with every object's keys sorted, so equal values give equal bytes
/// whatever order their keys came in.
fn canonical_json(value: &Value, out: &mut Vec<u8>) {
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
                canonical_json(&map[key], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(item, out);
            }
            out.push(b']');
        }
        other => out.extend(serde_json::to_vec(other).unwrap_or_default()),
    }
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

    /// The round after `sealed`, whose question the client answered with `answer`.
    fn next_round(
        sealer: &Sealer,
        sealed: &str,
        answer: &Value,
        cancel: &CancellationToken,
    ) -> Arc<Round> {
        let mut responses = InputResponses::new();
        responses.insert(INPUT.into(), answer.clone());
        Arc::new(
            Round::start(
                sealer,
                "t",
                &arguments(),
                Some(sealed),
                Some(&responses),
                cancel,
            )
            .unwrap(),
        )
    }

    /// An answer is given again only to the question it answered: when a later round computes
    /// another message or another schema at the same node, the client is asked the new
    /// question, and the old answer is not carried on.
    #[test]
    fn an_answer_is_bound_to_its_question() {
        let sealer = Sealer::with_key(Some(KEY.into()));
        let cancel = CancellationToken::new();
        let yes = json!({"action": "accept", "content": {"ok": true}});
        let delete = |files: u32| Question {
            message: format!("Delete {files} files?"),
            ..question("confirm")
        };
        let first =
            Arc::new(Round::start(&sealer, "t", &arguments(), None, None, &cancel).unwrap());
        assert!(first.asker()(delete(2)).now_or_never().is_none());
        let sealed = first
            .input_required(&sealer)
            .unwrap()
            .unwrap()
            .request_state
            .unwrap();

        // The same question again: its answer.
        let round = next_round(&sealer, &sealed, &yes, &cancel);
        let answer = round.asker()(delete(2)).now_or_never().unwrap();
        assert_eq!(answer.unwrap(), json!({"ok": true}));

        // Another message at the same node: asked anew, not answered with the consent to 2.
        let round = next_round(&sealer, &sealed, &yes, &cancel);
        assert!(
            round.asker()(delete(3)).now_or_never().is_none(),
            "the answer to \"Delete 2 files?\" was given to \"Delete 3 files?\""
        );
        assert!(round.stop.is_cancelled());
        let input = round.input_required(&sealer).unwrap().unwrap();
        let asked = serde_json::to_value(&input).unwrap();
        assert_eq!(
            asked["inputRequests"]["ask"]["params"]["message"], "Delete 3 files?",
            "{asked}"
        );
        // The answer to 3 is then given to 3, and the one to 2 is gone: asked again, it is new.
        let round = next_round(&sealer, &input.request_state.unwrap(), &yes, &cancel);
        let asker = round.asker();
        let answer = asker(delete(3)).now_or_never().unwrap();
        assert_eq!(answer.unwrap(), json!({"ok": true}));
        assert!(asker(delete(2)).now_or_never().is_none());

        // Another schema with the same message: asked anew too.
        let round = next_round(&sealer, &sealed, &yes, &cancel);
        let wider = Question {
            schema: json!({"type": "object", "properties": {
                "ok": {"type": "boolean"}, "all": {"type": "boolean"}
            }}),
            ..delete(2)
        };
        assert!(round.asker()(wider).now_or_never().is_none());
        assert!(round.input_required(&sealer).is_some());

        // The schema's key order is not part of the question: still answered.
        let round = next_round(&sealer, &sealed, &yes, &cancel);
        let reordered = Question {
            schema: json!({"properties": {"ok": {"type": "boolean"}}, "type": "object"}),
            ..delete(2)
        };
        let answer = round.asker()(reordered).now_or_never().unwrap();
        assert_eq!(answer.unwrap(), json!({"ok": true}));
    }

    /// A key that is not UTF-8 is refused by `check` (the server's start), long or short, with
    /// the variable and the rule named, instead of being replaced by a random key; so is a text
    /// key under 32 bytes.
    #[cfg(unix)]
    #[test]
    fn unusable_keys_are_refused_at_check() {
        use std::os::unix::ffi::OsStringExt;
        for key in [vec![0xff; 40], vec![0xff; 5]] {
            let error = Sealer::with_key(Some(OsString::from_vec(key)))
                .check()
                .unwrap_err();
            assert!(
                error.contains(KEY_VARIABLE) && error.contains("not UTF-8"),
                "{error}"
            );
            assert!(error.contains("at least 32 bytes"), "{error}");
        }
        let error = Sealer::with_key(Some("short".into())).check().unwrap_err();
        assert!(
            error.contains(KEY_VARIABLE) && error.contains("at least 32 bytes"),
            "{error}"
        );
        assert!(Sealer::with_key(Some(KEY.into())).check().is_ok());
        assert!(Sealer::with_key(None).check().is_ok());
    }
}
