//! The one executor: runs one tool call of a checked graph (contract §3, extensions §1–§7).
//!
//! A run owns its history and JSONata evaluator (both `!Send`: jsonata-core values are `Rc`), so
//! a run is a `!Send` future driven on a worker thread's `LocalSet` (see `pool.rs`); everything
//! it shares with other runs (`Program`, downstream connections) is `Send + Sync`. The items of a
//! map, the branches of a parallel and the runs of `server: self` callees are futures of that
//! same task: they overlap while they wait, never while they evaluate.
//!
//! The parts, one job each:
//! - this file: a call's set-up ([`run`]), the node loop, and the classification of a node's
//!   failure (routed by its `onError`, or the run's end);
//! - `limits.rs`: the run's limits, looked at between nodes and after each node;
//! - `nodes.rs`: the nodes that evaluate (entry, exit, transform, switch);
//! - `calls.rs`: calls (mcp nodes, map items, branches) with their timeouts, retries and
//!   attempts, `server: self`, and the arguments templates;
//! - `fan_out.rs`: map and parallel;
//! - `ask.rs`: `ask` nodes and who answers them;
//! - `report.rs`: what observers are told of executed nodes (the public observation types);
//! - `debug.rs`: the debugging surface (breakpoints, pause, step) and the pauses of a run.

mod ask;
mod calls;
pub mod debug;
mod fan_out;
mod limits;
mod nodes;
pub mod report;

pub use ask::{Asker, Question, Refusal};
pub use report::{Frame, LogMessage, LogSink, LogSource, NodeObserver, NodeReport, Place};

use crate::cancel::Cancel;
use crate::downstream::Downstream;
use crate::failure::{Failure, FailureKind, RunError};
use crate::history::{History, Record, SharedHistory};
use crate::jsonata::{EvalError, Functions, Jsonata, Settings};
use crate::program::{HISTORY_HINT_MAX, Program};
use crate::telemetry::Span;
use crate::value::to_jvalue;
use crate::watchdog;
use calls::AttemptDeadline;
use debug::Debugger;
use futures::FutureExt;
use futures::future::LocalBoxFuture;
use jsonata_core::evaluator::CancelToken;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Expr, Limits, Log, LogLevel, Node, NodeId, NodeKind, Tool};
use report::{Outcome, Site};
use serde_json::{Map, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// What a run may use from the outside, and what it reports while it runs.
pub struct RunEnv {
    pub downstream: Arc<Downstream>,
    /// The runtime downstream connections are started on (the caller's); `None`: the runtime
    /// the run is on.
    pub runtime: Option<Handle>,
    /// Cancelled when the client cancels the call or the server shuts down.
    pub cancel: Cancel,
    /// Called after each executed node, map item, parallel branch and node of a `self` callee.
    pub on_node: Option<NodeObserver>,
    /// Who answers `ask` nodes; `None`: nobody can (kind `unavailable`).
    pub asker: Option<Asker>,
    /// Told of node starts and ends, and asked before each node of the called tool (not of
    /// `server: self` callees) whether the run goes on, waits or ends there (debug.rs).
    pub debugger: Option<Debugger>,
    /// Told of each message of a node's `log:` (after it is written to stderr), and of
    /// mcpgraph's own messages about a node (a downstream server slow to start).
    pub on_log: Option<LogSink>,
    /// The caller's trace context, forwarded in the `_meta` of every downstream MCP request
    /// when the call has no span of its own.
    pub trace: Option<crate::trace_context::TraceContext>,
    /// The call's span when traces are exported (telemetry.rs): the parent of its nodes' spans,
    /// whose requests downstream carry their own span as the parent.
    pub span: Option<Span>,
}

/// A node's failure, as the executor carries it until the node's `onError` or the run's edge.
#[derive(Debug)]
struct NodeFailure {
    cause: Cause,
    /// The attempts made, where the call has a `retry` block.
    attempts: Option<u32>,
}

/// What ended a node.
#[derive(Debug)]
enum Cause {
    /// The node failed. Routable by its `onError`, unless the kind is `limit` or `cancelled`
    /// (an evaluation interrupted, a size bound reached), which [`Run::classify`] reads.
    Failed(Failure),
    /// The run's time limit passed while the node waited; the text is made when the run ends,
    /// with the time elapsed then.
    Deadline,
    /// The run itself must end with this failure (a callee hit a limit or was cancelled, a
    /// retry's wait would outlive the run): never routed, reported between nodes.
    EndsRun(Failure),
}

impl NodeFailure {
    fn ending(failure: Failure) -> NodeFailure {
        NodeFailure {
            cause: Cause::EndsRun(failure),
            attempts: None,
        }
    }

    fn deadline() -> NodeFailure {
        NodeFailure {
            cause: Cause::Deadline,
            attempts: None,
        }
    }

    /// The failure's kind, as a span's `error.type` says it (the run's deadline is a limit).
    fn kind_name(&self) -> &'static str {
        match &self.cause {
            Cause::Failed(failure) | Cause::EndsRun(failure) => failure.kind.as_str(),
            Cause::Deadline => FailureKind::Limit.as_str(),
        }
    }

    /// The node's own failure when it is one that `onError`, `onItemError` and `retry` may
    /// see: not a limit, not a cancellation.
    fn routable(&self) -> Option<&Failure> {
        match &self.cause {
            Cause::Failed(failure) if !interrupting(failure.kind) => Some(failure),
            _ => None,
        }
    }
}

impl From<Failure> for NodeFailure {
    fn from(failure: Failure) -> NodeFailure {
        NodeFailure {
            cause: Cause::Failed(failure),
            attempts: None,
        }
    }
}

impl From<EvalError> for NodeFailure {
    fn from(error: EvalError) -> NodeFailure {
        Failure::from(error).into()
    }
}

fn interrupting(kind: FailureKind) -> bool {
    matches!(kind, FailureKind::Limit | FailureKind::Cancelled)
}

/// A node's outcome: its output, the node that runs next (`None` only for the exit) and the
/// attempts its call made.
type Step = Result<(JValue, Option<NodeId>, Option<u32>), NodeFailure>;

/// What the runs of one call share: the graph, the limits and their counters, the outside.
struct Session<'a> {
    program: &'a Program,
    env: &'a RunEnv,
    limits: Limits,
    started: Instant,
    deadline: Instant,
    /// The time the run waited in its debugger: not counted toward the time limit.
    paused: Cell<Duration>,
    /// The run's registration with the watchdog (held until the run ends).
    watch: Option<watchdog::Watch>,
    /// Nodes executed by every run of the call (callees included).
    executed: Cell<u64>,
    /// Reports made so far (the progress index).
    reports: Cell<usize>,
    evaluation_cancel: CancelToken,
    /// Whether the watchdog bounds evaluations; else each evaluator reads the clock.
    watched: bool,
    /// The downstream servers whose slow start the call's client was told of (once each).
    slow_starts: RefCell<Vec<String>>,
}

/// One run of one tool (the call's, or a `server: self` callee's).
struct Run<'a> {
    session: &'a Session<'a>,
    tool: &'a Tool,
    /// The registered functions its interpreters get (those its expressions mention).
    functions: Functions,
    history: SharedHistory,
    jsonata: RefCell<Jsonata>,
    arguments: JValue,
    /// The sizes of the outputs recorded so far (see [`Run::check_size`]).
    held_bytes: Cell<u64>,
    /// The `server: self` calls this run is inside, outermost first: empty for the call's own
    /// tool.
    callers: Vec<Frame>,
    /// The end of the `server: self` attempt this run is (or is inside of), looked at between
    /// nodes: a callee that never waits still stops at its caller's `timeoutMs`.
    attempt: Option<AttemptDeadline>,
    /// The span the spans of this run's nodes hang from (the call's, or the `self` call's);
    /// `None`: traces are off.
    span: Option<Span>,
    /// The span of the node running now (nodes of a run run one at a time).
    node_span: RefCell<Option<Span>>,
    /// The ids of the tool's nodes as values, made when a switch first outputs each (a loop's
    /// switch outputs the same id every iteration): see [`Run::node_name`].
    node_names: RefCell<Vec<JValue>>,
}

/// Runs tool `tool` of `program` with `args`; the result is the exit node's output.
pub async fn run(
    program: &Program,
    tool: usize,
    args: Map<String, Value>,
    env: &RunEnv,
) -> Result<JValue, RunError> {
    let limits = program.graph.limits;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(limits.max_execution_time_ms);
    let evaluation_cancel = CancelToken::new();
    // The watchdog stops an evaluation in flight at the time limit or when the client cancels;
    // without it (no thread), jsonata-core bounds each evaluation by reading the clock.
    let watch = watchdog::watch(deadline, &env.cancel, &evaluation_cancel);
    let session = Session {
        program,
        env,
        limits,
        started,
        deadline,
        paused: Cell::new(Duration::ZERO),
        watched: watch.is_some(),
        watch,
        executed: Cell::new(0),
        reports: Cell::new(0),
        evaluation_cancel,
        slow_starts: RefCell::new(Vec::new()),
    };
    session
        .run_tool(
            tool,
            to_jvalue(&Value::Object(args)),
            Vec::new(),
            None,
            env.span.clone(),
        )
        .await
}

impl<'a> Session<'a> {
    /// Runs one tool: the call's own, or a callee's (boxed: callees recurse).
    fn run_tool(
        &'a self,
        tool: usize,
        arguments: JValue,
        callers: Vec<Frame>,
        attempt: Option<AttemptDeadline>,
        span: Option<Span>,
    ) -> LocalBoxFuture<'a, Result<JValue, RunError>> {
        async move {
            let mut run = self.start(tool, arguments, callers);
            run.attempt = attempt;
            run.span = span;
            let result = run.execute().await;
            let kept = run.history.borrow().len().min(HISTORY_HINT_MAX);
            self.program.tools[tool]
                .history_hint
                .store(kept, Ordering::Relaxed);
            result
        }
        .boxed_local()
    }

    fn start(&'a self, tool: usize, arguments: JValue, callers: Vec<Frame>) -> Run<'a> {
        let prepared = &self.program.tools[tool];
        let history: SharedHistory = Rc::new(RefCell::new(History::with_capacity(
            prepared.names.clone(),
            prepared.ir.nodes.len(),
            prepared.history_hint.load(Ordering::Relaxed),
        )));
        let jsonata = self.evaluator(&history, Vec::new(), prepared.functions);
        Run {
            session: self,
            tool: &prepared.ir,
            functions: prepared.functions,
            history,
            jsonata: RefCell::new(jsonata),
            arguments,
            held_bytes: Cell::new(0),
            callers,
            attempt: None,
            span: None,
            node_span: RefCell::new(None),
            node_names: RefCell::new(Vec::new()),
        }
    }

    /// An evaluator over `history`, with `bindings` (a map item's `$item` and `$index`) and the
    /// registered `functions` the tool's expressions mention.
    fn evaluator(
        &self,
        history: &SharedHistory,
        bindings: Vec<(String, JValue)>,
        functions: Functions,
    ) -> Jsonata {
        Jsonata::new(
            Some(history),
            Settings {
                timeout_ms: (!self.watched).then_some(self.limits.max_execution_time_ms),
                cancel: Some(self.evaluation_cancel.clone()),
                max_value_bytes: Some(self.limits.max_value_bytes),
                bindings,
                functions,
                ..Settings::default()
            },
        )
    }
}

impl<'a> Run<'a> {
    async fn execute(&self) -> Result<JValue, RunError> {
        let mut current = self.tool.entry;
        // One read of the clock between two nodes: the end of one is the start of the next.
        let mut now = self.session.started.elapsed();
        loop {
            self.check_limits(now)
                .inspect_err(|error| run_ended(self.span.as_ref(), error))?;
            let node = self.tool.node(current);
            if self.callers.is_empty()
                && let Some(debugger) = &self.session.env.debugger
            {
                self.debug(debugger, node).await?;
                now = self.session.started.elapsed();
            }
            let node_start = now;
            let span = self.span.as_ref().map(|parent| node_span(parent, node));
            self.node_span.replace(span.clone());
            let step = match &node.kind {
                NodeKind::Entry => Ok((self.arguments.clone(), node.next, None)),
                NodeKind::Exit => Ok((self.exit(), None, None)),
                NodeKind::Transform(expr) => self.transform(node, expr),
                NodeKind::Switch { conditions } => self.switch(node, conditions),
                // The nodes that wait, boxed: their futures take kilobytes, which a run of
                // nodes that never wait would otherwise carry (and copy) too.
                NodeKind::Mcp(call) => Box::pin(self.mcp(node, call)).await,
                NodeKind::Map {
                    items,
                    call,
                    concurrency,
                    on_item_error,
                } => Box::pin(self.map(node, items, call, *concurrency, *on_item_error)).await,
                NodeKind::Parallel {
                    branches,
                    on_item_error,
                } => Box::pin(self.parallel(node, branches, *on_item_error)).await,
                NodeKind::Ask {
                    message,
                    schema,
                    timeout_ms,
                } => Box::pin(self.ask(node, message, schema, *timeout_ms)).await,
            };
            let (output, next, attempts, failed) = match step {
                Ok((output, next, attempts)) => (output, next, attempts, None),
                Err(failure) => {
                    let attempts = failure.attempts;
                    let failure = self
                        .classify(node, failure)
                        .inspect_err(|error| run_ended(span.as_ref(), error))?;
                    if let Some(span) = &span {
                        span.failed(failure.kind.as_str());
                    }
                    match &node.on_error {
                        Some(route) if route.catches(failure.kind) => {
                            if let Some(span) = &span {
                                span.event(
                                    "caught error",
                                    vec![opentelemetry::KeyValue::new(
                                        "mcpgraph.next",
                                        self.tool.node(route.next).id.clone(),
                                    )],
                                );
                            }
                            let output = error_object(&failure, &node.id, attempts, None);
                            (output, Some(route.next), attempts, Some(failure.kind))
                        }
                        _ => return Err(self.node_error(node, failure)),
                    }
                }
            };
            if let (Some(span), Some(attempts)) = (&span, attempts) {
                span.set(opentelemetry::KeyValue::new(
                    "mcpgraph.attempts",
                    i64::from(attempts),
                ));
            }
            self.check_size(node, &output)
                .inspect_err(|error| run_ended(span.as_ref(), error))?;
            now = self.record(current, node, node_start, &output, attempts, failed);
            if let Some(log) = &node.log {
                self.log(node, log);
            }
            let reported = span.is_some() || node.log.is_some() || self.session.reporting();
            if let Some(span) = span {
                span.end();
            }
            if reported {
                // The log, the report and the span took time after the node's end: not the
                // next node's, and counted toward the limits looked at before it.
                now = self.session.started.elapsed();
            }
            match (&node.kind, next) {
                (NodeKind::Exit, _) => return Ok(output),
                (_, Some(next)) => current = next,
                // The checker guarantees a `next` on every node but switches and the exit.
                (_, None) => {
                    let failure = Failure::new(
                        FailureKind::Route,
                        format!("Node {} has no next node and is not the exit node", node.id),
                    );
                    return Err(self.node_error(node, failure));
                }
            }
        }
    }

    /// A failure of the run itself (limits, cancellation), which names no node.
    fn between_nodes(&self, failure: Failure) -> RunError {
        RunError {
            tool: self.tool.name.clone(),
            node: None,
            failure,
        }
    }

    /// A node's failure as the node's own (routable), or as the run's end: a node stopped by
    /// the time limit, the node limit or cancellation (an evaluation interrupted, a downstream
    /// call abandoned, a callee stopped) reads as that, between nodes.
    fn classify(&self, node: &Node, failure: NodeFailure) -> Result<Failure, RunError> {
        let failure = match failure.cause {
            Cause::EndsRun(failure) => return Err(self.between_nodes(failure)),
            Cause::Deadline => return Err(self.between_nodes(self.session.time_limit())),
            Cause::Failed(failure) => failure,
        };
        let interrupted = interrupting(failure.kind);
        if interrupted && self.session.past_deadline() {
            return Err(self.between_nodes(self.session.time_limit()));
        }
        if self.session.env.cancel.is_cancelled() {
            return Err(self.between_nodes(cancelled()));
        }
        if interrupted {
            if let Some(limit) = self.session.node_limit() {
                return Err(self.between_nodes(limit));
            }
            // A size bound the node reached: the node's limit, never routed.
            if failure.kind == FailureKind::Limit {
                return Err(self.node_error(node, failure));
            }
            // Only the deadline and cancellation interrupt a node, and neither happened: keep
            // the message, as an expression's failure.
            return Err(self.node_error(
                node,
                Failure {
                    kind: FailureKind::Expression,
                    ..failure
                },
            ));
        }
        Ok(failure)
    }

    /// The run's error for `node`'s failure.
    fn node_error(&self, node: &Node, failure: Failure) -> RunError {
        RunError {
            tool: self.tool.name.clone(),
            node: Some((node.id.clone(), node.kind.type_name())),
            failure,
        }
    }

    /// Appends the node's record to the history and reports it; the time it ended (since the
    /// run started).
    fn record(
        &self,
        id: NodeId,
        node: &Node,
        start: Duration,
        output: &JValue,
        attempts: Option<u32>,
        failed: Option<FailureKind>,
    ) -> Duration {
        let end = self.session.started.elapsed();
        let duration = end - start;
        self.history.borrow_mut().push(
            &node.id,
            Record {
                node: id,
                output: output.clone(),
                start,
                duration,
                attempts,
            },
        );
        self.session.executed.set(self.session.executed.get() + 1);
        if self.session.reporting() {
            self.session.report(
                &self.site(node, Place::Node),
                Outcome {
                    node_type: node.kind.type_name(),
                    times: (start, duration),
                    output,
                    attempts,
                    failed,
                },
            );
        }
        end
    }

    /// Where `place` of `node` is, for reports and the `self` calls made there.
    fn site<'s>(&'s self, node: &'s Node, place: Place) -> Site<'s> {
        Site {
            callers: &self.callers,
            node: &node.id,
            place,
        }
    }

    /// Node `id`'s id as a value (a switch's output), made once per run.
    fn node_name(&self, id: NodeId) -> JValue {
        let mut names = self.node_names.borrow_mut();
        if names.is_empty() {
            names.resize(self.tool.nodes.len(), JValue::Undefined);
        }
        match names.get_mut(id.index()) {
            Some(name) => {
                if name.is_undefined() {
                    *name = JValue::string(self.tool.node(id).id.as_str());
                }
                name.clone()
            }
            None => JValue::string(self.tool.node(id).id.as_str()),
        }
    }

    /// The context expressions see: the newest output of each node, newest first.
    fn context(&self) -> JValue {
        self.history.borrow().context().clone()
    }

    fn eval(&self, expr: &Expr, context: &JValue) -> Result<JValue, EvalError> {
        self.jsonata.borrow_mut().eval(expr, context)
    }

    /// A node's `log:` (docs/semantics.md §22), once the node's output is in the context: the
    /// message written to stderr (target `mcpgraph::log`) and given to the call's log sink. An
    /// undefined message logs nothing; one that fails to evaluate is logged as a warning
    /// naming the node, and the run goes on: a log line never fails a node.
    fn log(&self, node: &Node, log: &Log) {
        let context = self.context();
        let (level, data) = match self.eval(&log.message, &context) {
            Ok(value) => match crate::value::to_json(&value) {
                Some(data) => (log.level, data),
                None => return,
            },
            Err(error) => (
                LogLevel::Warning,
                Value::String(format!(
                    "the log message of node {} could not be evaluated: {error}",
                    node.id
                )),
            ),
        };
        let message = LogMessage {
            source: report::LogSource::Graph,
            level,
            node: &node.id,
            callers: &self.callers,
            data: &data,
        };
        let text = match &data {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let label = message.label();
        match level {
            LogLevel::Debug => tracing::debug!(target: "mcpgraph::log", node = %label, "{text}"),
            LogLevel::Info | LogLevel::Notice => {
                tracing::info!(target: "mcpgraph::log", node = %label, "{text}");
            }
            LogLevel::Warning => tracing::warn!(target: "mcpgraph::log", node = %label, "{text}"),
            LogLevel::Error | LogLevel::Critical | LogLevel::Alert | LogLevel::Emergency => {
                tracing::error!(target: "mcpgraph::log", node = %label, "{text}");
            }
        }
        if let Some(sink) = &self.session.env.on_log {
            sink(&message);
        }
    }
}

/// The output of a node that failed into its `onError` route (extensions §3):
/// `{"error": {kind, message, node, attempts?, index? | branch?}}`.
fn error_object(
    failure: &Failure,
    node: &str,
    attempts: Option<u32>,
    place: Option<(&str, JValue)>,
) -> JValue {
    let mut error = indexmap::IndexMap::new();
    error.insert("kind".to_string(), JValue::string(failure.kind.as_str()));
    error.insert("message".to_string(), JValue::string(failure.to_string()));
    error.insert("node".to_string(), JValue::string(node));
    if let Some((key, value)) = place {
        error.insert(key.to_string(), value);
    }
    if let Some(attempts) = attempts {
        error.insert("attempts".to_string(), JValue::Number(attempts as f64));
    }
    let mut outer = indexmap::IndexMap::new();
    outer.insert("error".to_string(), JValue::object(error));
    JValue::object(outer)
}

/// The span of an execution of `node`, a child of `parent` (`{type} {id}`: a graph's node
/// ids are few and fixed).
fn node_span(parent: &Span, node: &Node) -> Span {
    let kind = node.kind.type_name();
    parent.child(
        format!("{kind} {}", node.id),
        opentelemetry::trace::SpanKind::Internal,
        vec![
            opentelemetry::KeyValue::new("mcpgraph.node.id", node.id.clone()),
            opentelemetry::KeyValue::new("mcpgraph.node.type", kind),
        ],
    )
}

/// Marks the span of the node at which the run ended with `error`; a limit reached or a
/// cancellation is an event of it too.
fn run_ended(span: Option<&Span>, error: &RunError) {
    let Some(span) = span else { return };
    let kind = error.kind();
    span.failed(kind.as_str());
    // No text: a limit an expression reached says the expression's source.
    match kind {
        FailureKind::Limit => span.event("limit reached", Vec::new()),
        FailureKind::Cancelled => span.event("cancelled", Vec::new()),
        _ => {}
    }
}

fn cancelled() -> Failure {
    Failure::new(FailureKind::Cancelled, "Execution was cancelled")
}
