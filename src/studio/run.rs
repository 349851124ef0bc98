//! One run of a tool under the engine's debugger: what the page sees of it (node states,
//! records, the end), kept as the debugger's events arrive, and published as they arrive.
//!
//! The events are published while the run's state is locked, so the stream and the snapshots
//! agree: a page that fetches a snapshot and then applies the events after it misses nothing.

use super::{Studio, Version};
use mcpgraph_runtime::{
    Asker, CallError, CallOptions, DebugEvent, Debugger, Engine, NodeReport, Place, Question,
    Refusal,
};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio_util::sync::CancellationToken;

/// How many bytes (of JSON text) the outputs a run keeps for the page may take; past it,
/// records keep their node, times and kind but not their output (`truncated`).
const KEPT_BYTES: usize = 64 << 20;

pub struct Run {
    id: u64,
    debugger: Debugger,
    cancel: CancellationToken,
    shared: Arc<Shared>,
    /// Cancelled when the run has ended and let go of its version.
    ended: CancellationToken,
}

/// How many records a run keeps for the page; past it, nodes still count and show their state.
const KEPT_RECORDS: usize = 100_000;

/// What the debugger's events and the HTTP handlers share.
struct Shared {
    id: u64,
    tool: String,
    studio: Weak<Studio>,
    state: Mutex<RunState>,
    /// Stop was asked for (the run may end inside a node, by cancellation).
    stop_asked: AtomicBool,
}

#[derive(Default)]
struct RunState {
    /// `running`, `paused`, `done`, `failed`, `stopped`.
    phase: &'static str,
    paused_at: Option<String>,
    nodes: BTreeMap<String, NodeState>,
    records: Vec<Record>,
    kept_bytes: usize,
    result: Option<Value>,
    error: Option<Value>,
    /// The question an `ask` node waits on, and where its answer goes.
    asking: Option<Asking>,
}

struct Asking {
    question: Value,
    answer: tokio::sync::oneshot::Sender<Result<Value, Refusal>>,
}

/// Why an answer could not be given.
pub enum AnswerError {
    NoQuestion,
    Invalid(&'static str),
}

struct NodeState {
    state: &'static str,
    duration_ms: Option<f64>,
    count: u32,
}

struct Record {
    node: String,
    node_type: &'static str,
    start_ms: f64,
    duration_ms: f64,
    attempts: Option<u32>,
    /// `None`: undefined, or not kept (`truncated`).
    output: Option<Value>,
    truncated: bool,
    failure_kind: Option<&'static str>,
    error: Option<String>,
}

impl Run {
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        id: u64,
        tool: String,
        breakpoints: Vec<String>,
        paused: bool,
        studio: &Arc<Studio>,
        version: Arc<Version>,
        engine: Arc<Engine>,
        arguments: Map<String, Value>,
    ) -> Arc<Run> {
        let shared = Arc::new(Shared {
            id,
            tool: tool.clone(),
            studio: Arc::downgrade(studio),
            state: Mutex::new(RunState {
                phase: "running",
                ..RunState::default()
            }),
            stop_asked: AtomicBool::new(false),
        });
        let sink = shared.clone();
        let debugger = Debugger::new().with_sink(move |event| sink.event(event));
        debugger.set_breakpoints(breakpoints);
        if paused {
            debugger.pause();
        }
        let cancel = CancellationToken::new();
        let ended = CancellationToken::new();
        let run = Arc::new(Run {
            id,
            debugger: debugger.clone(),
            cancel: cancel.clone(),
            shared: shared.clone(),
            ended: ended.clone(),
        });
        {
            let state = shared.lock();
            shared.publish(&state, &shared.run_event(&state));
        }
        let asker = shared.asker();
        tokio::spawn(async move {
            let options = CallOptions {
                cancel,
                debugger: Some(debugger.clone()),
                asker: Some(asker),
                ..CallOptions::default()
            };
            let outcome = engine.call_with(&tool, arguments, options).await;
            let stopped = shared.stop_asked.load(Ordering::Relaxed);
            shared.end(outcome, stopped);
            // The version (and its engine) lives as long as its run. One an edit replaced is
            // closed here (its downstream servers with it); the current one at exit.
            drop(engine);
            match shared.studio.upgrade() {
                Some(studio) => studio.release(version).await,
                None => drop(version),
            }
            ended.cancel();
        });
        run
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// Completes when the run has ended (and shut its version's engine down, if it was the
    /// last to hold it).
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    /// The run's state, what a command answers: `{run, state, pausedAt, breakpoints}`.
    pub fn brief(&self) -> Value {
        let state = self.shared.lock();
        json!({
            "run": self.id,
            "state": state.phase,
            "pausedAt": state.paused_at,
            "breakpoints": self.debugger.breakpoints(),
        })
    }

    pub fn debugger(&self) -> &Debugger {
        &self.debugger
    }

    /// Ends the run: before its next node, or at once if it waits or is inside a node (its
    /// downstream calls are cancelled).
    pub fn stop(&self) {
        self.shared.stop_asked.store(true, Ordering::Relaxed);
        self.debugger.stop();
        self.cancel.cancel();
    }

    /// Answers the question the run waits on: `{"action": "accept", "content": {...}}` or
    /// `{"action": "decline"}` (the content is checked against the question's schema by the
    /// engine, as a client's answer is).
    pub fn answer(&self, body: &Value) -> Result<(), AnswerError> {
        let answer = match body.get("action").and_then(Value::as_str) {
            Some("accept") => match body.get("content") {
                Some(Value::Object(content)) => Ok(Value::Object(content.clone())),
                None => Ok(Value::Object(Map::new())),
                Some(_) => return Err(AnswerError::Invalid("`content` must be an object")),
            },
            Some("decline") => Err(Refusal::declined("The person declined in the studio")),
            _ => return Err(AnswerError::Invalid("`action` must be accept or decline")),
        };
        let mut state = self.shared.lock();
        let asking = state.asking.take().ok_or(AnswerError::NoQuestion)?;
        let node = asking.question["node"].clone();
        let sent = asking.answer.send(answer).is_ok();
        let mut event = json!({"type": "answered", "run": self.id, "node": node});
        if !sent {
            // Its asker gave up just now (the ask's timeout): withdrawn, not answered.
            event["withdrawn"] = true.into();
        }
        self.shared.publish(&state, &event);
        if sent {
            Ok(())
        } else {
            Err(AnswerError::NoQuestion)
        }
    }

    /// Everything the page shows of the run (records without their contexts).
    pub fn snapshot(&self) -> Value {
        let state = self.shared.lock();
        let nodes: Map<String, Value> = state
            .nodes
            .iter()
            .map(|(id, node)| (id.clone(), node.json()))
            .collect();
        let records: Vec<Value> = state
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| r.json(i))
            .collect();
        json!({
            "run": self.id,
            "tool": self.shared.tool,
            "state": state.phase,
            "pausedAt": state.paused_at,
            "breakpoints": self.debugger.breakpoints(),
            "nodes": nodes,
            "records": records,
            "result": state.result,
            "error": state.error,
            "asking": state.asking.as_ref().map(|a| a.question.clone()),
        })
    }

    /// Record `index` with the context its node saw: the latest output of each node before it,
    /// newest first (what `$` held when the node ran).
    pub fn record_with_context(&self, index: usize) -> Option<Value> {
        let state = self.shared.lock();
        let record = state.records.get(index)?;
        let mut latest: Vec<(&str, &Value)> = Vec::new();
        let mut truncated = false;
        for earlier in &state.records[..index] {
            latest.retain(|(node, _)| *node != earlier.node);
            truncated |= earlier.truncated;
            if let Some(output) = &earlier.output {
                latest.push((&earlier.node, output));
            }
        }
        let mut context = Map::new();
        for (node, output) in latest.iter().rev() {
            context.insert(node.to_string(), (*output).clone());
        }
        let mut value = record.json(index);
        value["context"] = Value::Object(context);
        if truncated {
            value["contextTruncated"] = true.into();
        }
        Some(value)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes `event`; called with the state locked (see the module's comment).
    fn publish(&self, _state: &MutexGuard<'_, RunState>, event: &Value) {
        if let Some(studio) = self.studio.upgrade() {
            studio.publish(event);
        }
    }

    /// Who answers the run's `ask` nodes: the page. The question is published and kept until
    /// it is answered or withdrawn (its timeout, the run's end).
    fn asker(self: &Arc<Self>) -> Asker {
        let shared = Arc::downgrade(self);
        Arc::new(move |question: Question| {
            let shared = shared.clone();
            Box::pin(async move {
                let Some(this) = shared.upgrade() else {
                    return Err(Refusal::unavailable("the studio is closing"));
                };
                let (answer, answered) = tokio::sync::oneshot::channel();
                let asked = json!({
                    "node": question.node,
                    "message": question.message,
                    "schema": question.schema,
                    "timeoutMs": question.timeout_ms,
                });
                {
                    let mut state = this.lock();
                    let event = json!({"type": "ask", "run": this.id, "question": asked});
                    state.asking = Some(Asking {
                        question: asked,
                        answer,
                    });
                    this.publish(&state, &event);
                }
                // Withdrawn when this future is dropped (the ask's timeout, the run's end).
                let mut withdraw = Withdraw(shared.clone(), question.node.clone());
                let outcome = answered.await;
                // Answered (or the run ended): nothing to take back.
                withdraw.0 = Weak::new();
                outcome.unwrap_or_else(|_| Err(Refusal::unavailable("the question was withdrawn")))
            }) as futures::future::BoxFuture<'static, Result<Value, Refusal>>
        })
    }

    fn run_event(&self, state: &RunState) -> Value {
        let mut event = json!({
            "type": "run",
            "run": self.id,
            "tool": self.tool,
            "state": state.phase,
        });
        if let Some(node) = &state.paused_at {
            event["pausedAt"] = node.clone().into();
        }
        event
    }

    fn node_event(&self, id: &str, node: &NodeState) -> Value {
        let mut event = node.json();
        event["type"] = "node".into();
        event["run"] = self.id.into();
        event["node"] = id.into();
        event
    }

    fn event(&self, event: &DebugEvent<'_>) {
        let mut state = self.lock();
        match event {
            DebugEvent::Started { node, .. } => {
                let entry = state.node(node);
                entry.state = "running";
                let event = self.node_event(node, &state.nodes[*node]);
                self.publish(&state, &event);
            }
            DebugEvent::Paused { node } => {
                state.node(node).state = "paused";
                state.phase = "paused";
                state.paused_at = Some(node.to_string());
                let event = self.node_event(node, &state.nodes[*node]);
                self.publish(&state, &event);
                let event = self.run_event(&state);
                self.publish(&state, &event);
            }
            DebugEvent::Resumed { .. } => {
                state.phase = "running";
                state.paused_at = None;
                let event = self.run_event(&state);
                self.publish(&state, &event);
            }
            DebugEvent::Finished(report) => self.finished(&mut state, report),
        }
    }

    fn finished(&self, state: &mut MutexGuard<'_, RunState>, report: &NodeReport<'_>) {
        let duration_ms = report.duration.as_secs_f64() * 1000.0;
        let outcome = if report.failed.is_some() {
            "failed"
        } else {
            "done"
        };
        if !report.is_own_node() {
            // A map item or a parallel branch: their pseudo node. The nodes of a `server: self`
            // callee are not drawn.
            let Some(pseudo) = pseudo(report) else {
                return;
            };
            let entry = state.node(&pseudo);
            entry.state = outcome;
            entry.duration_ms = Some(duration_ms);
            entry.count += 1;
            let event = self.node_event(&pseudo, &state.nodes[&pseudo]);
            self.publish(state, &event);
            return;
        }
        let entry = state.node(report.node);
        entry.state = outcome;
        entry.duration_ms = Some(duration_ms);
        entry.count += 1;
        let event = self.node_event(report.node, &state.nodes[report.node]);
        self.publish(state, &event);
        let output = mcpgraph_runtime::to_json(report.output);
        let bytes = output
            .as_ref()
            .map_or(0, |v| serde_json::to_string(v).map_or(0, |t| t.len()));
        let keep = state.kept_bytes + bytes <= KEPT_BYTES;
        if keep {
            state.kept_bytes += bytes;
        }
        let record = Record {
            node: report.node.to_string(),
            node_type: report.node_type,
            start_ms: report.start.as_secs_f64() * 1000.0,
            duration_ms,
            attempts: report.attempts,
            output: if keep { output } else { None },
            truncated: !keep,
            failure_kind: report.failed.map(|k| k.as_str()),
            error: None,
        };
        if state.records.len() >= KEPT_RECORDS {
            return;
        }
        let event = json!({
            "type": "record",
            "run": self.id,
            "record": record.json(state.records.len()),
        });
        state.records.push(record);
        self.publish(state, &event);
    }

    /// The call's end: its result, or its error (the failed node marked, and recorded last as
    /// the toolkit does), or stopped.
    fn end(&self, outcome: Result<Value, CallError>, stopped: bool) {
        let mut state = self.lock();
        state.paused_at = None;
        state.asking = None;
        match outcome {
            Ok(result) => {
                state.phase = "done";
                state.result = Some(result);
            }
            Err(CallError::Cancelled) => {
                state.phase = "stopped";
                let message = if stopped {
                    "Stopped"
                } else {
                    "Execution was cancelled"
                };
                state.error = Some(json!({"message": message, "kind": "cancelled"}));
                // A node that was running when the run was cancelled did not finish.
                for node in state.nodes.values_mut() {
                    if node.state == "running" || node.state == "paused" {
                        node.state = "pending";
                    }
                }
            }
            Err(error) => {
                state.phase = "failed";
                let mut value =
                    json!({"message": error.to_string(), "kind": error.kind().as_str()});
                if let CallError::Run(run) = &error
                    && let Some((node, node_type)) = &run.node
                {
                    value["node"] = node.clone().into();
                    let entry = state.node(node);
                    entry.state = "failed";
                    entry.count += 1;
                    let event = self.node_event(node, &state.nodes[node.as_str()]);
                    self.publish(&state, &event);
                    let end_ms = state
                        .records
                        .last()
                        .map_or(0.0, |r| r.start_ms + r.duration_ms);
                    let record = Record {
                        node: node.clone(),
                        node_type,
                        start_ms: end_ms,
                        duration_ms: 0.0,
                        attempts: None,
                        output: None,
                        truncated: false,
                        failure_kind: Some(error.kind().as_str()),
                        error: Some(run.failure.message.clone()),
                    };
                    let event = json!({
                        "type": "record",
                        "run": self.id,
                        "record": record.json(state.records.len()),
                    });
                    state.records.push(record);
                    self.publish(&state, &event);
                }
                state.error = Some(value);
            }
        }
        let event = self.run_event(&state);
        self.publish(&state, &event);
        let event = json!({
            "type": "end",
            "run": self.id,
            "state": state.phase,
            "result": state.result,
            "error": state.error,
        });
        self.publish(&state, &event);
    }
}

/// Takes a question back when its asker is dropped unanswered, and tells the page.
struct Withdraw(Weak<Shared>, String);

impl Drop for Withdraw {
    fn drop(&mut self) {
        let Some(shared) = self.0.upgrade() else {
            return;
        };
        let mut state = shared.lock();
        if state.asking.take().is_some() {
            let event =
                json!({"type": "answered", "run": shared.id, "node": self.1, "withdrawn": true});
            shared.publish(&state, &event);
        }
    }
}

impl RunState {
    fn node(&mut self, id: &str) -> &mut NodeState {
        self.nodes.entry(id.to_string()).or_insert(NodeState {
            state: "pending",
            duration_ms: None,
            count: 0,
        })
    }
}

impl NodeState {
    fn json(&self) -> Value {
        let mut value = json!({"state": self.state, "count": self.count});
        if let Some(ms) = self.duration_ms {
            value["durationMs"] = round3(ms).into();
        }
        value
    }
}

impl Record {
    fn json(&self, index: usize) -> Value {
        let mut value = json!({
            "index": index,
            "node": self.node,
            "type": self.node_type,
            "startMs": round3(self.start_ms),
            "durationMs": round3(self.duration_ms),
            "output": self.output,
        });
        if let Some(attempts) = self.attempts {
            value["attempts"] = attempts.into();
        }
        if let Some(kind) = self.failure_kind {
            value["failureKind"] = kind.into();
        }
        if let Some(error) = &self.error {
            value["error"] = error.clone().into();
        }
        if self.truncated {
            value["truncated"] = true.into();
        }
        value
    }
}

fn round3(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The pseudo node (in the drawing, view.rs) a report of an item or branch belongs to: the map's
/// call `fetch/call`, the branch `both/news`; none for a callee's nodes.
fn pseudo(report: &NodeReport<'_>) -> Option<String> {
    if !report.callers.is_empty() {
        return None;
    }
    match report.place {
        Place::Node => None,
        Place::Item(_) => Some(format!("{}/call", report.node)),
        Place::Branch(branch) => Some(format!("{}/{branch}", report.node)),
    }
}
