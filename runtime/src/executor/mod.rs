//! The one executor: runs one tool call of a checked graph (contract §3, extensions §1–§7).
//!
//! A run owns its history and JSONata evaluator (both `!Send`: jsonata-core values are `Rc`), so
//! a run is a `!Send` future driven on a worker thread's `LocalSet` (see `pool.rs`); everything
//! it shares with other runs (`Program`, downstream connections) is `Send + Sync`. The items of a
//! map, the branches of a parallel and the runs of `server: self` callees are futures of that
//! same task: they overlap while they wait, never while they evaluate.

use crate::cancel::Cancel;
use crate::debug::{DebugEvent, Debugger};
use crate::downstream::{self, Downstream};
use crate::failure::{Failure, FailureKind, RunError};
use crate::history::{History, Record, SharedHistory};
use crate::jsonata::{EvalError, Jsonata, Settings};
use crate::jsonlogic::{self, Vars};
use crate::program::Program;
use crate::value::{json_size, to_json, to_jvalue};
use crate::watchdog;
use futures::FutureExt;
use futures::future::{BoxFuture, LocalBoxFuture};
use futures::stream::{FuturesUnordered, StreamExt};
use jsonata_core::evaluator::CancelToken;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{
    Call, Condition, Expr, Limits, Node, NodeId, NodeKind, OnItemError, Target, Template, Tool,
};
use serde_json::{Map, Value};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
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
    /// Called after each executed node, map item and parallel branch.
    pub on_node: Option<NodeObserver>,
    /// Who answers `ask` nodes; `None`: nobody can (kind `unavailable`).
    pub asker: Option<Asker>,
    /// Told of node starts and ends, and asked before each node of the called tool (not of
    /// `server: self` callees) whether the run goes on, waits or ends there (debug.rs).
    pub debugger: Option<Debugger>,
}

/// Called after each executed node of a call (progress notifications, `--trace`).
pub type NodeObserver = Arc<dyn Fn(&NodeReport<'_>) + Send + Sync>;

/// One executed node (or map item, or parallel branch), as progress notifications and `--trace`
/// see it.
pub struct NodeReport<'a> {
    /// 1 for the first report of the call.
    pub index: usize,
    /// The node's id; for a map item `fetch_all[3]`, for a branch `both.news`, for a node of a
    /// `server: self` callee `call › double.entry`.
    pub node: &'a str,
    pub node_type: &'static str,
    pub start: Duration,
    pub duration: Duration,
    pub output: &'a JValue,
    /// The attempts made, where the call has a `retry` block.
    pub attempts: Option<u32>,
    /// The failure's kind, when this node (or item) failed and its error object is the output.
    pub failed: Option<FailureKind>,
}

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

/// A node's failure, as the executor carries it until the node's `onError` or the run's edge.
#[derive(Debug)]
struct NodeFailure {
    failure: Failure,
    /// The attempts made, where the call has a `retry` block.
    attempts: Option<u32>,
    /// The run itself must end with this failure (a callee hit a limit or was cancelled): it is
    /// never routed, and it is reported between nodes.
    ends_run: bool,
}

impl NodeFailure {
    fn ending(failure: Failure) -> NodeFailure {
        NodeFailure {
            failure,
            attempts: None,
            ends_run: true,
        }
    }

    /// A limit or cancellation, which no `onError` or `onItemError` catches.
    fn interrupts(&self) -> bool {
        self.ends_run || interrupting(self.failure.kind)
    }
}

impl From<Failure> for NodeFailure {
    fn from(failure: Failure) -> NodeFailure {
        NodeFailure {
            failure,
            attempts: None,
            ends_run: false,
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
}

/// One run of one tool (the call's, or a `server: self` callee's).
struct Run<'a> {
    session: &'a Session<'a>,
    tool: &'a Tool,
    history: SharedHistory,
    jsonata: RefCell<Jsonata>,
    arguments: JValue,
    /// The sizes of the outputs recorded so far (see [`Run::check_size`]).
    held_bytes: Cell<u64>,
    /// Put before node ids in reports: empty for the call's own tool, `call › double.` for a
    /// callee.
    prefix: String,
    /// The end of the `server: self` attempt this run is (or is inside of), looked at between
    /// nodes: a callee that never waits still stops at its caller's `timeoutMs`.
    attempt: Option<AttemptDeadline>,
}

/// When a `self` call's attempt times out, and what its failure then says.
#[derive(Debug, Clone)]
struct AttemptDeadline {
    at: Instant,
    message: String,
}

/// How many times `maxValueBytes` the outputs a run holds in its history may take together.
pub const RUN_BYTES_PER_VALUE_BYTES: u64 = 16;

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
    };
    session
        .run_tool(tool, to_jvalue(&Value::Object(args)), String::new(), None)
        .await
}

impl<'a> Session<'a> {
    /// Runs one tool: the call's own, or a callee's (boxed: callees recurse).
    fn run_tool(
        &'a self,
        tool: usize,
        arguments: JValue,
        prefix: String,
        attempt: Option<AttemptDeadline>,
    ) -> LocalBoxFuture<'a, Result<JValue, RunError>> {
        async move {
            let mut run = self.start(tool, arguments, prefix);
            run.attempt = attempt;
            run.execute().await
        }
        .boxed_local()
    }

    fn start(&'a self, tool: usize, arguments: JValue, prefix: String) -> Run<'a> {
        let prepared = &self.program.tools[tool];
        let history: SharedHistory = Rc::new(RefCell::new(History::new(
            prepared.names.clone(),
            prepared.ir.nodes.len(),
        )));
        let jsonata = self.evaluator(&history, Vec::new());
        Run {
            session: self,
            tool: &prepared.ir,
            history,
            jsonata: RefCell::new(jsonata),
            arguments,
            held_bytes: Cell::new(0),
            prefix,
            attempt: None,
        }
    }

    /// An evaluator over `history`, with `bindings` (a map item's `$item` and `$index`).
    fn evaluator(&self, history: &SharedHistory, bindings: Vec<(String, JValue)>) -> Jsonata {
        Jsonata::new(
            Some(history),
            Settings {
                timeout_ms: (!self.watched).then_some(self.limits.max_execution_time_ms),
                cancel: Some(self.evaluation_cancel.clone()),
                max_value_bytes: Some(self.limits.max_value_bytes),
                bindings,
                ..Settings::default()
            },
        )
    }

    fn past_deadline(&self) -> bool {
        self.elapsed() >= Duration::from_millis(self.limits.max_execution_time_ms)
    }

    /// The run's time so far, pauses in its debugger left out.
    fn elapsed(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.paused.get())
    }

    /// When the time limit ends the run (later by the time paused).
    fn deadline(&self) -> Instant {
        self.deadline + self.paused.get()
    }

    fn time_limit(&self) -> Failure {
        Failure::new(
            FailureKind::Limit,
            format!(
                "Execution limit exceeded: maximum execution time ({}ms) reached. Elapsed time: {}ms",
                self.limits.max_execution_time_ms,
                self.elapsed().as_millis()
            ),
        )
    }

    fn node_limit(&self) -> Option<Failure> {
        let executed = self.executed.get();
        (executed >= self.limits.max_node_executions).then(|| {
            Failure::new(
                FailureKind::Limit,
                format!(
                    "Execution limit exceeded: maximum node executions ({}) reached. Current execution count: {executed}",
                    self.limits.max_node_executions
                ),
            )
        })
    }

    /// Reports a node, item or branch to the observer.
    fn report(
        &self,
        node: &str,
        node_type: &'static str,
        times: (Duration, Duration),
        output: &JValue,
        attempts: Option<u32>,
        failed: Option<FailureKind>,
    ) {
        let index = self.reports.get() + 1;
        self.reports.set(index);
        let report = NodeReport {
            index,
            node,
            node_type,
            start: times.0,
            duration: times.1,
            output,
            attempts,
            failed,
        };
        if let Some(observer) = &self.env.on_node {
            observer(&report);
        }
        if let Some(debugger) = &self.env.debugger {
            debugger.tell(&DebugEvent::Finished(&report));
        }
    }

    /// Whether anyone is told of executed nodes.
    fn reporting(&self) -> bool {
        self.env.on_node.is_some() || self.env.debugger.is_some()
    }

    fn runtime(&self) -> Result<Handle, Failure> {
        self.env
            .runtime
            .clone()
            .or_else(|| Handle::try_current().ok())
            .ok_or_else(|| {
                Failure::new(
                    FailureKind::Connection,
                    "MCP client initialization failed: no tokio runtime to run the connection on",
                )
            })
    }

    /// Waits for `future`, bounded by `timeout_ms` (a `timeout` failure with `timed_out`'s
    /// text), the run's deadline and cancellation (read by [`Run::classify`]).
    async fn bounded<T>(
        &self,
        timeout_ms: Option<u64>,
        timed_out: impl FnOnce(u64) -> String,
        future: impl Future<Output = Result<T, NodeFailure>>,
    ) -> Result<T, NodeFailure> {
        let timeout = async {
            match timeout_ms {
                Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            outcome = future => outcome,
            () = timeout => Err(Failure::new(
                FailureKind::Timeout,
                timed_out(timeout_ms.unwrap_or_default()),
            ).into()),
            () = tokio::time::sleep_until(self.deadline().into()) => Err(Failure::new(FailureKind::Limit, "").into()),
            () = self.env.cancel.cancelled() => Err(cancelled().into()),
        }
    }

    /// One call (an mcp node's, a map item's, a branch's) with its retries (extensions §2).
    /// `args` evaluates the arguments, once per attempt.
    async fn call(
        &'a self,
        call: &'a Call,
        label: &str,
        inherited: Option<&AttemptDeadline>,
        args: impl Fn() -> Result<Map<String, Value>, NodeFailure>,
    ) -> Result<(JValue, Option<u32>), NodeFailure> {
        let retry = call.retry.as_ref();
        let max_attempts = retry.map_or(1, |r| r.max_attempts.max(1));
        let mut attempt = 1;
        loop {
            let outcome = match args() {
                Ok(arguments) => self.attempt(call, label, inherited, arguments).await,
                Err(failure) => Err(failure),
            };
            let mut failure = match outcome {
                Ok(value) => return Ok((value, retry.map(|_| attempt))),
                Err(failure) => failure,
            };
            let again = !failure.interrupts()
                && attempt < max_attempts
                && retry.is_some_and(|r| r.retries(failure.failure.kind));
            let Some(retry) = retry.filter(|_| again) else {
                if retry.is_some() {
                    failure.attempts = Some(attempt);
                }
                return Err(failure);
            };
            attempt += 1;
            let wait = Duration::from_millis(retry.delay_before(attempt));
            // A wait never outlives the run: when the next attempt could not start in time, the
            // run ends now.
            if Instant::now() + wait >= self.deadline() {
                return Err(NodeFailure::ending(self.time_limit()));
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.env.cancel.cancelled() => return Err(NodeFailure::ending(cancelled())),
            }
        }
    }

    /// One attempt of a call: bounded by its node's timeout (covering the server's start on
    /// first use), the deadline and cancellation. A dropped attempt tells the downstream server.
    async fn attempt(
        &'a self,
        call: &'a Call,
        label: &str,
        inherited: Option<&AttemptDeadline>,
        arguments: Map<String, Value>,
    ) -> Result<JValue, NodeFailure> {
        match call.target {
            Target::Server(server) => {
                let runtime = self.runtime()?;
                let timeout_ms = call
                    .timeout_ms
                    .unwrap_or_else(|| self.env.downstream.timeout_ms(server));
                let downstream = self.env.downstream.clone();
                let request = async move {
                    downstream
                        .call(&runtime, server, &call.tool, arguments, timeout_ms)
                        .await
                        .map_err(NodeFailure::from)
                };
                // A node's `timeoutMs` bounds the whole attempt, the server's start included
                // (extensions §9). Without one, the server's `timeoutMs` bounds its
                // `initialize` and the request each, with their own texts, as before.
                self.bounded(call.timeout_ms, downstream::timed_out, request)
                    .await
            }
            Target::SelfTool(callee) => {
                let timed_out =
                    |ms: u64| format!("Call of tool \"{}\" timed out (timeoutMs {ms})", call.tool);
                let own = call.timeout_ms.map(|ms| AttemptDeadline {
                    at: Instant::now() + Duration::from_millis(ms),
                    message: timed_out(ms),
                });
                // The earlier of this attempt's end and the end of the attempt it runs inside.
                let deadline = match (own, inherited) {
                    (Some(own), Some(outer)) if outer.at < own.at => Some(outer.clone()),
                    (Some(own), _) => Some(own),
                    (None, outer) => outer.cloned(),
                };
                self.bounded(
                    call.timeout_ms,
                    timed_out,
                    self.call_self(callee, arguments, label, deadline),
                )
                .await
            }
        }
    }

    /// `server: self`: the callee's arguments and result checked against its schemas, its run
    /// in process with its own history (extensions §6).
    async fn call_self(
        &'a self,
        callee: usize,
        arguments: Map<String, Value>,
        label: &str,
        attempt: Option<AttemptDeadline>,
    ) -> Result<JValue, NodeFailure> {
        let tool = &self.program.tools[callee];
        let name = &tool.ir.name;
        let arguments = Value::Object(arguments);
        if let Err(violations) = tool.check_input(&arguments) {
            return Err(Failure::new(
                FailureKind::Schema,
                lines(
                    &format!("Invalid arguments for tool \"{name}\":"),
                    &violations,
                ),
            )
            .into());
        }
        let prefix = format!("{label} › {name}.");
        let value = match self
            .run_tool(callee, to_jvalue(&arguments), prefix, attempt)
            .await
        {
            Ok(value) => value,
            // The attempt's time ran out between the callee's nodes.
            Err(e) if e.node.is_none() && e.kind() == FailureKind::Timeout => {
                return Err(Failure::new(FailureKind::Timeout, e.failure.message).into());
            }
            // Limits and cancellation end the caller's run too, with the callee's words.
            Err(e) if interrupting(e.kind()) => return Err(NodeFailure::ending(e.failure)),
            Err(e) => return Err(Failure::new(FailureKind::Tool, e.to_string()).into()),
        };
        // What the callee's tools/call would carry.
        let json = to_json(&value).unwrap_or_else(|| Value::Object(Map::new()));
        if tool.has_output_schema() {
            let violations = if json.is_object() {
                tool.check_output(&json).err()
            } else {
                Some(vec![format!(
                    "the result is not an object: {}",
                    crate::value::to_js_json(&json)
                )])
            };
            if let Some(violations) = violations {
                return Err(Failure::new(
                    FailureKind::Schema,
                    lines(
                        &format!(
                            "Tool \"{name}\" returned a result that does not match its outputSchema:"
                        ),
                        &violations,
                    ),
                )
                .into());
            }
        }
        Ok(to_jvalue(&json))
    }
}

fn lines(heading: &str, items: &[String]) -> String {
    let mut text = heading.to_string();
    for item in items {
        text.push_str("\n  ");
        text.push_str(item);
    }
    text
}

impl<'a> Run<'a> {
    async fn execute(&self) -> Result<JValue, RunError> {
        let mut current = self.tool.entry;
        loop {
            self.check_limits()?;
            let node = self.tool.node(current);
            if self.prefix.is_empty()
                && let Some(debugger) = &self.session.env.debugger
            {
                self.debug(debugger, node).await?;
            }
            let node_start = self.session.started.elapsed();
            let step = match &node.kind {
                NodeKind::Entry => Ok((self.arguments.clone(), node.next, None)),
                NodeKind::Exit => Ok((self.exit(), None, None)),
                NodeKind::Transform(expr) => self.transform(node, expr),
                NodeKind::Switch { conditions } => self.switch(node, conditions),
                NodeKind::Mcp(call) => self.mcp(node, call).await,
                NodeKind::Map {
                    items,
                    call,
                    concurrency,
                    on_item_error,
                } => {
                    self.map(node, items, call, *concurrency, *on_item_error)
                        .await
                }
                NodeKind::Parallel {
                    branches,
                    on_item_error,
                } => self.parallel(node, branches, *on_item_error).await,
                NodeKind::Ask {
                    message,
                    schema,
                    timeout_ms,
                } => self.ask(node, message, schema, *timeout_ms).await,
            };
            let (output, next, attempts, failed) = match step {
                Ok((output, next, attempts)) => (output, next, attempts, None),
                Err(failure) => {
                    let attempts = failure.attempts;
                    let failure = self.classify(node, failure)?;
                    match &node.on_error {
                        Some(route) if route.catches(failure.kind) => {
                            let output = error_object(&failure, &node.id, attempts, None);
                            (output, Some(route.next), attempts, Some(failure.kind))
                        }
                        _ => return Err(self.node_error(node, failure)),
                    }
                }
            };
            self.check_size(node, &output)?;
            self.record(current, node, node_start, &output, attempts, failed);
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

    /// The limits and cancellation, looked at before each node.
    fn check_limits(&self) -> Result<(), RunError> {
        if let Some(limit) = self.session.node_limit() {
            return Err(self.between_nodes(limit));
        }
        if self.session.past_deadline() {
            return Err(self.between_nodes(self.session.time_limit()));
        }
        if self.session.env.cancel.is_cancelled() {
            return Err(self.between_nodes(cancelled()));
        }
        if let Some(attempt) = &self.attempt
            && Instant::now() >= attempt.at
        {
            return Err(
                self.between_nodes(Failure::new(FailureKind::Timeout, attempt.message.clone()))
            );
        }
        Ok(())
    }

    /// The bounds on memory, looked at after each node: its output may take at most
    /// `maxValueBytes` (measured as JSON text, see [`json_size`]: O(1) for a string, at most
    /// O(`maxValueBytes`) otherwise), and all outputs the run holds, which its history keeps,
    /// [`RUN_BYTES_PER_VALUE_BYTES`] times that. Values that grow from node to node (a loop
    /// doubling a string) stop here; the size-checked built-ins stop those that grow within one
    /// expression.
    fn check_size(&self, node: &Node, output: &JValue) -> Result<(), RunError> {
        let cap = self.session.limits.max_value_bytes;
        let bytes = json_size(output, cap);
        let message = if bytes > cap {
            format!(
                "Execution limit exceeded: maximum value size ({cap} bytes) reached: the output takes at least {bytes} bytes"
            )
        } else {
            let held = self.held_bytes.get() + bytes;
            self.held_bytes.set(held);
            let total = cap.saturating_mul(RUN_BYTES_PER_VALUE_BYTES);
            if held <= total {
                return Ok(());
            }
            format!(
                "Execution limit exceeded: maximum size of a run's values ({total} bytes, {RUN_BYTES_PER_VALUE_BYTES} × maxValueBytes) reached: the outputs of its nodes take {held} bytes"
            )
        };
        Err(RunError {
            tool: self.tool.name.clone(),
            node: Some((node.id.clone(), node.kind.type_name())),
            failure: Failure::new(FailureKind::Limit, message),
        })
    }

    /// Asks the debugger before `node`; a pause stops the run's clock (and the watchdog's).
    async fn debug(&self, debugger: &Debugger, node: &Node) -> Result<(), RunError> {
        let session = self.session;
        let watched = Cell::new(true);
        let pausing = || {
            if let Some(watch) = &session.watch {
                // Far enough: never reached while waiting; set again on resuming. Gone: the
                // time limit passed just before the pause.
                watched
                    .set(watch.set_deadline(Instant::now() + Duration::from_secs(366 * 24 * 3600)));
            }
        };
        let waited = debugger
            .before(
                &node.id,
                node.kind.type_name(),
                session.started.elapsed(),
                &session.env.cancel,
                pausing,
            )
            .await;
        let waited = match waited {
            Ok(waited) => waited,
            Err(failure) => return Err(self.between_nodes(failure)),
        };
        if let Some(waited) = waited {
            if !watched.get() {
                return Err(self.between_nodes(session.time_limit()));
            }
            session.paused.set(session.paused.get() + waited);
            if let Some(watch) = &session.watch {
                watch.set_deadline(session.deadline());
            }
        }
        Ok(())
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
        if failure.ends_run {
            return Err(self.between_nodes(failure.failure));
        }
        let failure = failure.failure;
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
            if failure.kind == FailureKind::Limit && !failure.message.is_empty() {
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

    /// Appends the node's record to the history and reports it.
    fn record(
        &self,
        id: NodeId,
        node: &Node,
        start: Duration,
        output: &JValue,
        attempts: Option<u32>,
        failed: Option<FailureKind>,
    ) {
        let duration = self.session.started.elapsed() - start;
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
            let label = self.label(&node.id);
            self.session.report(
                &label,
                node.kind.type_name(),
                (start, duration),
                output,
                attempts,
                failed,
            );
        }
    }

    /// A node's name in reports.
    fn label(&self, id: &str) -> String {
        format!("{}{id}", self.prefix)
    }

    /// The context expressions see: the newest output of each node, newest first.
    fn context(&self) -> JValue {
        self.history.borrow().context().clone()
    }

    fn eval(&self, expr: &Expr, context: &JValue) -> Result<JValue, EvalError> {
        self.jsonata.borrow_mut().eval(expr, context)
    }

    /// `exit`: the previous node's output (see [`exit_output`]).
    fn exit(&self) -> JValue {
        let last = self
            .history
            .borrow()
            .last()
            .map(|r| r.output.clone())
            .unwrap_or(JValue::Undefined);
        exit_output(last)
    }

    /// `transform`: the expression's value.
    fn transform(&self, node: &Node, expr: &Expr) -> Step {
        let context = self.context();
        let value = self.eval(expr, &context)?;
        Ok((value, node.next, None))
    }

    /// `switch`: the first condition that holds (its target's id is the output), else the
    /// default.
    fn switch(&self, node: &Node, conditions: &[Condition]) -> Step {
        let context = self.context();
        let mut jsonata = self.jsonata.borrow_mut();
        let mut vars = GraphVars {
            jsonata: &mut jsonata,
            context: &context,
            interrupted: None,
        };
        for condition in conditions {
            let matched = match &condition.rule {
                None => true,
                Some(rule) => {
                    let value = jsonlogic::apply(rule, &context, &mut vars).map_err(|message| {
                        let rule_text =
                            serde_json::to_string_pretty(&rule.to_json()).unwrap_or_default();
                        Failure::new(
                            vars.interrupted.unwrap_or(FailureKind::Expression),
                            format!("JSON Logic evaluation failed: {message}\nRule: {rule_text}"),
                        )
                    })?;
                    // The switch converts the final value with JavaScript Boolean(), not JSON
                    // Logic's truthiness: [] and {} are true.
                    crate::js::boolean(&value)
                }
            };
            if matched {
                let target = condition.target;
                return Ok((
                    JValue::string(self.tool.node(target).id.as_str()),
                    Some(target),
                    None,
                ));
            }
        }
        match node.next {
            Some(default) => Ok((
                JValue::string(self.tool.node(default).id.as_str()),
                Some(default),
                None,
            )),
            None => Err(Failure::new(
                FailureKind::Route,
                format!(
                    "Switch node {}: No conditions matched and no default case provided",
                    node.id
                ),
            )
            .into()),
        }
    }

    /// The arguments of a call, evaluated against the context as it is now.
    fn arguments(
        &self,
        template: &Template,
        jsonata: &RefCell<Jsonata>,
        context: &JValue,
    ) -> Result<Map<String, Value>, NodeFailure> {
        let mut jsonata = jsonata.borrow_mut();
        evaluate_args(
            template,
            &mut jsonata,
            context,
            self.session.limits.max_value_bytes,
        )
        .map_err(NodeFailure::from)
    }

    /// `mcp`: the downstream tool's result (or a `self` callee's), with its retries.
    async fn mcp(&self, node: &Node, call: &'a Call) -> Step {
        let context = self.context();
        let label = self.label(&node.id);
        let (value, attempts) = self
            .session
            .call(call, &label, self.attempt.as_ref(), || {
                self.arguments(&call.args, &self.jsonata, &context)
            })
            .await?;
        Ok((value, node.next, attempts))
    }

    /// `map`: the call for each item, at most `concurrency` in flight, outputs in input order
    /// (extensions §4).
    async fn map(
        &self,
        node: &Node,
        items: &Expr,
        call: &'a Call,
        concurrency: u32,
        on_item_error: OnItemError,
    ) -> Step {
        let context = self.context();
        let items = match self.eval(items, &context)? {
            JValue::Undefined => Vec::new(),
            JValue::Array(values) => values.iter().cloned().collect(),
            other => vec![other],
        };
        let count = items.len();
        // Built lazily: only the items in flight exist as futures.
        let work = items.into_iter().enumerate().map(|(index, item)| {
            let label = format!("{}[{index}]", self.label(&node.id));
            let context = &context;
            async move {
                let bindings = vec![
                    ("item".to_string(), item),
                    ("index".to_string(), JValue::Number(index as f64)),
                ];
                // Each item evaluates its args with `$item` and `$index` bound, over the
                // history as it stood when the map started.
                let jsonata = RefCell::new(self.session.evaluator(&self.history, bindings));
                let outcome = self
                    .session
                    .call(call, &label, self.attempt.as_ref(), || {
                        self.arguments(&call.args, &jsonata, context)
                    })
                    .await;
                (label, outcome)
            }
        });
        let outputs = self
            .fan_out(
                node,
                count,
                work,
                concurrency as usize,
                on_item_error,
                Places::Items,
            )
            .await?;
        let value = outputs.into_iter().flatten().collect();
        Ok((JValue::array(value), node.next, None))
    }

    /// `parallel`: every branch at once, outputs by name in written order (extensions §5).
    async fn parallel(
        &self,
        node: &Node,
        branches: &'a [mcpgraph_compiler::ir::Branch],
        on_item_error: OnItemError,
    ) -> Step {
        let context = self.context();
        let work = branches.iter().map(|branch| {
            let label = format!("{}.{}", self.label(&node.id), branch.name);
            let context = &context;
            async move {
                let outcome = self
                    .session
                    .call(&branch.call, &label, self.attempt.as_ref(), || {
                        self.arguments(&branch.call.args, &self.jsonata, context)
                    })
                    .await;
                (label, outcome)
            }
        });
        let outputs = self
            .fan_out(
                node,
                branches.len(),
                work,
                branches.len().max(1),
                on_item_error,
                Places::Branches(branches),
            )
            .await?;
        let mut object = indexmap::IndexMap::new();
        for (i, output) in outputs.into_iter().enumerate() {
            if let Some(value) = output {
                object.insert(branches[i].name.clone(), value);
            }
        }
        Ok((JValue::object(object), node.next, None))
    }

    /// Runs `work` (`count` futures, one per item or branch, made as they start) at most
    /// `limit` at a time. Each item's output, in input order: `None` where a failed item is
    /// skipped; a kept failure holds its error object. With `fail`, the first failure stops new
    /// items, cancels those in flight (dropping them tells the downstream), and fails the node
    /// with the lowest failed index. The outputs together may take `maxValueBytes`, checked as
    /// they arrive.
    async fn fan_out<F>(
        &self,
        node: &Node,
        count: usize,
        work: impl Iterator<Item = F>,
        limit: usize,
        on_item_error: OnItemError,
        places: Places<'_>,
    ) -> Result<Vec<Option<JValue>>, NodeFailure>
    where
        F: Future<Output = (String, Result<(JValue, Option<u32>), NodeFailure>)>,
    {
        let mut pending = work.enumerate();
        let mut in_flight = FuturesUnordered::new();
        let mut state = FanOut {
            outputs: vec![None; count],
            failures: Vec::new(),
            bytes: 0,
        };
        let started = |(index, future): (usize, F)| {
            let start = self.session.started.elapsed();
            future.map(move |(label, outcome)| (index, start, label, outcome))
        };
        loop {
            while state.failures.is_empty() && in_flight.len() < limit {
                match pending.next() {
                    Some(item) => in_flight.push(started(item)),
                    None => break,
                }
            }
            let Some(done) = in_flight.next().await else {
                break;
            };
            self.settle(node, on_item_error, places, &mut state, done)?;
            if !state.failures.is_empty() {
                // Items that finished meanwhile count (and are reported); the others are
                // cancelled.
                while let Some(Some(done)) = in_flight.next().now_or_never() {
                    self.settle(node, on_item_error, places, &mut state, done)?;
                }
                break;
            }
        }
        drop(in_flight);
        match state.failures.into_iter().min_by_key(|(index, _)| *index) {
            Some((index, failure)) => Err(NodeFailure {
                failure: Failure {
                    message: format!("{}: {}", places.name(index), failure.failure.message),
                    ..failure.failure
                },
                attempts: failure.attempts,
                ends_run: false,
            }),
            None => Ok(state.outputs),
        }
    }

    /// One finished item or branch: reported, then kept, skipped or counted as the failure.
    fn settle(
        &self,
        node: &Node,
        on_item_error: OnItemError,
        places: Places<'_>,
        state: &mut FanOut,
        (index, start, label, outcome): FanOutDone,
    ) -> Result<(), NodeFailure> {
        let duration = self.session.started.elapsed() - start;
        let kept = match outcome {
            Ok((value, attempts)) => {
                // An undefined output keeps its place as null.
                let value = if value.is_undefined() {
                    JValue::Null
                } else {
                    value
                };
                let times = (start, duration);
                self.session
                    .report(&label, node.kind.type_name(), times, &value, attempts, None);
                Some(value)
            }
            Err(failure) if failure.interrupts() => return Err(failure),
            Err(failure) => {
                let error = error_object(
                    &failure.failure,
                    &node.id,
                    failure.attempts,
                    Some(places.place(index)),
                );
                self.session.report(
                    &label,
                    node.kind.type_name(),
                    (start, duration),
                    &error,
                    failure.attempts,
                    Some(failure.failure.kind),
                );
                match on_item_error {
                    OnItemError::Fail => {
                        state.failures.push((index, failure));
                        None
                    }
                    OnItemError::Skip => None,
                    OnItemError::Keep => Some(error),
                }
            }
        };
        if let Some(value) = kept {
            let cap = self.session.limits.max_value_bytes;
            state.bytes = state.bytes.saturating_add(json_size(&value, cap));
            if state.bytes > cap {
                return Err(Failure::new(
                    FailureKind::Limit,
                    format!(
                        "Execution limit exceeded: maximum value size ({cap} bytes) reached: the output takes at least {} bytes",
                        state.bytes
                    ),
                )
                .into());
            }
            state.outputs[index] = Some(value);
        }
        Ok(())
    }

    /// `ask`: the person's answer, through the client's elicitation (extensions §7).
    async fn ask(
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

/// What a fan-out has gathered so far.
struct FanOut {
    outputs: Vec<Option<JValue>>,
    failures: Vec<(usize, NodeFailure)>,
    /// The size of the outputs kept, as JSON text.
    bytes: u64,
}

/// A finished item: its index, start, label and outcome.
type FanOutDone = (
    usize,
    Duration,
    String,
    Result<(JValue, Option<u32>), NodeFailure>,
);

/// An accepted answer must match the question's schema: else `declined`, saying why.
fn check_answer(schema: &Value, content: &Value) -> Result<(), NodeFailure> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        Failure::new(
            FailureKind::Declined,
            format!("The answer cannot be checked: {e}"),
        )
    })?;
    let problems: Vec<String> = validator
        .iter_errors(content)
        .map(|e| {
            let path = e.instance_path().to_string();
            let at = if path.is_empty() {
                "/".to_string()
            } else {
                path
            };
            format!("at {at}: {e}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(
            FailureKind::Declined,
            lines("The answer does not match the schema:", &problems),
        )
        .into())
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

/// Where a fan-out's item sits: a map's index, or a parallel's branch.
#[derive(Clone, Copy)]
enum Places<'b> {
    Items,
    Branches(&'b [mcpgraph_compiler::ir::Branch]),
}

impl Places<'_> {
    /// How a whole-node failure names the item: `item 3`, `branch news`.
    fn name(self, index: usize) -> String {
        match self {
            Places::Items => format!("item {index}"),
            Places::Branches(branches) => format!("branch {}", branches[index].name),
        }
    }

    /// The key and value an item's error object carries: `index: 3`, `branch: "news"`.
    fn place(self, index: usize) -> (&'static str, JValue) {
        match self {
            Places::Items => ("index", JValue::Number(index as f64)),
            Places::Branches(branches) => ("branch", JValue::string(branches[index].name.as_str())),
        }
    }
}

fn cancelled() -> Failure {
    Failure::new(FailureKind::Cancelled, "Execution was cancelled")
}

/// The exit's output: the previous output, with falsy values (`0`, `false`, `""`, `null`,
/// undefined) turned into `{}` — the original's `output || {}`.
fn exit_output(last: JValue) -> JValue {
    let falsy = match &last {
        JValue::Undefined | JValue::Null => true,
        JValue::Bool(b) => !b,
        JValue::Number(n) => *n == 0.0 || n.is_nan(),
        JValue::String(s) => s.is_empty(),
        _ => false,
    };
    if falsy {
        JValue::object(Default::default())
    } else {
        last
    }
}

/// JSON Logic's `var`s, which are JSONata in graphs. An evaluation the run interrupted is
/// remembered: JSON Logic's error is text, and its kind would be lost.
struct GraphVars<'a> {
    jsonata: &'a mut Jsonata,
    context: &'a JValue,
    interrupted: Option<FailureKind>,
}

impl Vars for GraphVars<'_> {
    fn var(&mut self, expr: &Expr) -> Result<JValue, String> {
        self.jsonata.eval(expr, self.context).map_err(|e| {
            if e.kind() != FailureKind::Expression {
                self.interrupted = Some(e.kind());
            }
            e.to_string()
        })
    }
}

/// The arguments of a call: keys whose expression is undefined are dropped.
fn evaluate_args(
    template: &Template,
    jsonata: &mut Jsonata,
    context: &JValue,
    max_bytes: u64,
) -> Result<Map<String, Value>, EvalError> {
    match evaluate_template(template, jsonata, context, max_bytes)? {
        Some(Value::Object(map)) => Ok(map),
        _ => Ok(Map::new()),
    }
}

/// An argument's value, each expression's value bounded by `max_bytes` before it becomes JSON
/// (a value built by sharing is small in memory but not as JSON).
fn evaluate_template(
    template: &Template,
    jsonata: &mut Jsonata,
    context: &JValue,
    max_bytes: u64,
) -> Result<Option<Value>, EvalError> {
    Ok(match template {
        Template::Literal(v) => Some(v.clone()),
        Template::Expr(expr) => {
            let value = jsonata.eval(expr, context)?;
            let bytes = json_size(&value, max_bytes);
            if bytes > max_bytes {
                return Err(EvalError {
                    code: Some("U1010".to_string()),
                    message: format!(
                        "Execution limit exceeded: maximum value size ({max_bytes} bytes) reached: the argument takes at least {bytes} bytes"
                    ),
                    expression: expr.source.clone(),
                });
            }
            to_json(&value)
        }
        Template::Object(entries) => {
            let mut map = Map::with_capacity(entries.len());
            for (k, t) in entries {
                if let Some(v) = evaluate_template(t, jsonata, context, max_bytes)? {
                    map.insert(k.clone(), v);
                }
            }
            Some(Value::Object(map))
        }
        Template::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for t in items {
                out.push(evaluate_template(t, jsonata, context, max_bytes)?.unwrap_or(Value::Null));
            }
            Some(Value::Array(out))
        }
    })
}
