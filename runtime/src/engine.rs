//! The engine: a program and its downstream connections, with runs on the process's one pool of
//! run workers (pool.rs), shared by every engine. `serve`, built servers, `mcpgraph call` and
//! `graph!` programs all call tools through this one type.

use crate::cancel::{Cancel, Shutdown};
use crate::downstream::Downstream;
use crate::executor::debug::Debugger;
use crate::executor::{self, Asker, LogSink, NodeObserver, RunEnv};
use crate::failure::{Failure, FailureKind, RunError};
use crate::placement::{Inline, Placement};
use crate::pool::Pool;
use crate::program::{Program, SchemaViolation};
use crate::telemetry::Span;
use crate::trace_context::TraceContext;
use crate::value::to_json;
use mcpgraph_compiler::Graph;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;

/// How a call is made: its cancellation, its observer, who answers its questions.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Cancelling it stops the run (and its downstream calls).
    pub cancel: CancellationToken,
    /// Told of every executed node, map item and parallel branch.
    pub observer: Option<NodeObserver>,
    /// Answers `ask` nodes; `None`: they fail with kind `unavailable`.
    pub asker: Option<Asker>,
    /// Told of node starts and ends; breakpoints, pause, step and stop (debug.rs). A stop
    /// ends the call as cancelled ([`CallError::Cancelled`]); the debugger knows where.
    pub debugger: Option<Debugger>,
    /// Told of each message of a node's `log:` (which is written to stderr in any case), and of
    /// mcpgraph's own messages about a node ([`crate::LogSource`]).
    pub log: Option<LogSink>,
    /// The caller's trace context: the parent of the call's span when traces are exported
    /// (telemetry.rs), else forwarded as it came to every downstream MCP request of the call
    /// (trace_context.rs).
    pub trace: Option<TraceContext>,
    /// The JSON-RPC id of the `tools/call` request this call answers (its span's
    /// `jsonrpc.request.id`); `None`: a call made in process.
    pub request_id: Option<String>,
}

pub struct Engine {
    program: Arc<Program>,
    downstream: Arc<Downstream>,
    /// Cancelled at shutdown: every run of this engine stops. The workers are shared, so this
    /// token, which each run carries, is how an engine stops its own runs and no one else's.
    shutdown: Shutdown,
    /// Whether a pure tool's run goes inline or to the blocking pool (placement.rs).
    placement: Arc<Placement>,
}

/// Why [`Engine::load`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    #[error("cannot start the run workers: {0}")]
    Workers(#[from] std::io::Error),
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    UnknownTool(String),
    InvalidArguments {
        tool: String,
        violations: Vec<String>,
    },
    Run(RunError),
    InvalidResult {
        tool: String,
        violations: Vec<String>,
    },
    /// The call was cancelled, or the server is shutting down.
    Cancelled,
}

impl CallError {
    /// The failure's kind as logs and metrics name it: a run's failure kind, or what went wrong
    /// around the run.
    pub fn kind_name(&self) -> &'static str {
        match self {
            CallError::UnknownTool(_) => "unknown_tool",
            CallError::InvalidArguments { .. } => "invalid_arguments",
            CallError::Run(e) => e.kind().as_str(),
            CallError::InvalidResult { .. } => "invalid_result",
            CallError::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::UnknownTool(name) => write!(f, "Unknown tool: {name}"),
            // The schema texts are the program's (a `self` call's failure says the same).
            CallError::InvalidArguments { tool, violations } => SchemaViolation::Arguments {
                tool: tool.clone(),
                violations: violations.clone(),
            }
            .fmt(f),
            CallError::Run(e) => e.fmt(f),
            CallError::InvalidResult { tool, violations } => SchemaViolation::Result {
                tool: tool.clone(),
                violations: violations.clone(),
            }
            .fmt(f),
            CallError::Cancelled => f.write_str("Execution was cancelled"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<SchemaViolation> for CallError {
    fn from(violation: SchemaViolation) -> CallError {
        match violation {
            SchemaViolation::Arguments { tool, violations } => {
                CallError::InvalidArguments { tool, violations }
            }
            SchemaViolation::Result { tool, violations } => {
                CallError::InvalidResult { tool, violations }
            }
        }
    }
}

impl CallError {
    /// The failure's kind: an unknown tool is the caller's protocol error, a schema violation
    /// `schema`.
    pub fn kind(&self) -> FailureKind {
        match self {
            CallError::UnknownTool(_) => FailureKind::Protocol,
            CallError::InvalidArguments { .. } | CallError::InvalidResult { .. } => {
                FailureKind::Schema
            }
            CallError::Run(e) => e.kind(),
            CallError::Cancelled => FailureKind::Cancelled,
        }
    }
}

impl Engine {
    /// Prepares a checked graph. Works anywhere, inside a tokio runtime or not: downstream
    /// servers are started on first use, on the runtime of the call that needs them.
    ///
    /// A graph with a tool that awaits (an mcp, map, parallel or ask node) runs on the workers:
    /// the process's pool is started now if it is not yet, so that a server which cannot start
    /// it says so at load, not at its first call. A graph of pure tools starts none (its runs
    /// need no worker); only a run a debugger may pause goes to the workers, which it starts
    /// then if need be.
    pub fn load(graph: Graph) -> Result<Engine, LoadError> {
        let program = Program::new(graph);
        crate::telemetry::start(&program.graph.server.name);
        if program.tools.iter().any(|tool| !tool.pure) {
            Pool::shared()?;
        }
        Ok(Engine {
            downstream: Arc::new(Downstream::new(program.graph.servers.clone())),
            placement: Arc::new(Placement::new(program.tools.len())),
            program: Arc::new(program),
            shutdown: Shutdown::default(),
        })
    }

    /// Whether a call of `tool` is answered at once: a pure tool whose last run was short
    /// (placement.rs), so that its answer over HTTP can be one JSON body rather than an event
    /// stream that keeps the connection alive while it runs (http.rs). `false` for a tool the
    /// graph lacks.
    pub(crate) fn answers_at_once(&self, tool: &str) -> bool {
        self.program
            .tool_index(tool)
            .is_some_and(|index| self.program.tools[index].pure && self.placement.short(index))
    }

    /// Whether a run of `tool` may report at info level (a node catches failures or waits):
    /// a call's observer is only needed for that at info (server/notify.rs). `true` for a tool
    /// the graph lacks.
    pub(crate) fn reports_info(&self, tool: &str) -> bool {
        self.program
            .tool_index(tool)
            .is_none_or(|index| self.program.tools[index].reports_info)
    }

    /// The graph being served.
    pub fn graph(&self) -> &Graph {
        &self.program.graph
    }

    pub(crate) fn program(&self) -> &Program {
        &self.program
    }

    /// Calls a tool: arguments validated against `inputSchema` before any node runs, the result
    /// against `outputSchema`. A tool that calls downstream servers must be called inside a
    /// multi-threaded tokio runtime (or one whose thread is free while the call waits): the
    /// connections are started there.
    pub async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        cancel: CancellationToken,
        observer: Option<NodeObserver>,
    ) -> Result<Value, CallError> {
        self.call_with(
            name,
            args,
            CallOptions {
                cancel,
                observer,
                ..CallOptions::default()
            },
        )
        .await
    }

    /// [`Engine::call`] with every option: who answers the graph's `ask` nodes too.
    pub async fn call_with(
        &self,
        name: &str,
        args: Map<String, Value>,
        options: CallOptions,
    ) -> Result<Value, CallError> {
        let CallOptions {
            cancel,
            observer,
            asker,
            debugger,
            log,
            trace,
            request_id,
        } = options;
        // A made-up tool name is not a span's name: clients choose it.
        let traced_name = match self.program.tool_index(name) {
            Some(_) => name,
            None => "(unknown tool)",
        };
        let span = Span::call(traced_name, request_id.as_deref(), trace.as_ref());
        let outcome = self
            .call_traced(
                name,
                args,
                (cancel, observer, asker, debugger, log),
                trace,
                &span,
            )
            .await;
        if let Some(span) = span {
            if let Err(error) = &outcome {
                span.failed(error.kind_name());
            }
            span.end();
        }
        outcome
    }

    /// A place for a run of tool `index` here, on the calling task (placement.rs); `None` when
    /// the call is not `quiet` (its run may send progress or log messages).
    fn inline(&self, runtime: &Handle, index: usize, quiet: bool) -> Option<Inline<'_>> {
        if !quiet
            || runtime.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread
            || !self.placement.short(index)
        {
            return None;
        }
        self.placement.inline(runtime, index)
    }

    /// [`Engine::call_with`] under the call's span (`None`: traces are off).
    async fn call_traced(
        &self,
        name: &str,
        args: Map<String, Value>,
        (cancel, observer, asker, debugger, log): (
            CancellationToken,
            Option<NodeObserver>,
            Option<Asker>,
            Option<Debugger>,
            Option<LogSink>,
        ),
        trace: Option<TraceContext>,
        span: &Option<Span>,
    ) -> Result<Value, CallError> {
        let index = self
            .program
            .tool_index(name)
            .ok_or_else(|| CallError::UnknownTool(name.to_string()))?;
        let tool = &self.program.tools[index];
        let args = Value::Object(args);
        tool.validate_arguments(&args)?;
        let Value::Object(args) = args else {
            return Err(CallError::Cancelled);
        };
        // A run is stopped when the call's future is dropped unfinished, too (a front end that
        // gives up on a call by dropping it): its work happens on another thread, which a drop
        // would not reach.
        let call = cancel.child_token();
        let _stop_when_dropped = call.clone().drop_guard();
        let cancel = Cancel::new(call, self.shutdown.clone());
        // A run that may wait in its debugger cannot complete in one poll: it goes to the workers.
        let result = if tool.pure && debugger.as_ref().is_none_or(|d| !d.may_wait()) {
            match Handle::try_current() {
                // A tool without a node that waits runs here, on the task that called, when its
                // runs are short and a worker is left free; else on a thread of tokio's
                // blocking pool: a CPU-heavy run must not hold a runtime worker, or as many of
                // them as there are cores stall every other call and the reading of
                // `notifications/cancelled` (placement.rs).
                // A call whose run may send progress or log messages goes to the pool too: what
                // an inline run sends waits in its worker's LIFO slot until the run ends
                // (placement.rs).
                Ok(runtime) => {
                    let inline = self.inline(
                        &runtime,
                        index,
                        observer.is_none() && (log.is_none() || !tool.logs),
                    );
                    let (program, downstream) = (self.program.clone(), self.downstream.clone());
                    let span = span.clone();
                    let run = move || {
                        run_pure(
                            &program,
                            index,
                            args,
                            downstream,
                            cancel,
                            (observer, debugger, log, span),
                        )
                    };
                    let outcome = match inline {
                        // A panic is the run's internal error here too, as the pool's join
                        // reports it: it must not end the task that answers the call.
                        Some(_inline) => {
                            tracing::debug!(target: "mcpgraph::placement", tool = name, "a run inline");
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).ok()
                        }
                        None => {
                            let placement = self.placement.clone();
                            runtime
                                .spawn_blocking(move || {
                                    let started = std::time::Instant::now();
                                    let outcome = run();
                                    placement.pooled(index, started.elapsed());
                                    outcome
                                })
                                .await
                                .ok()
                        }
                    };
                    outcome.unwrap_or_else(|| Err(internal_error(name, "the run panicked")))
                }
                // No runtime (a caller polling the future by hand): here, in one poll.
                Err(_) => run_pure(
                    &self.program,
                    index,
                    args,
                    self.downstream.clone(),
                    cancel,
                    (observer, debugger, log, span.clone()),
                ),
            }
        } else {
            // Started already at load when the graph awaits; so this start, and its failure, is
            // only ever a pure tool's under a debugger that may pause it.
            let pool = Pool::shared().map_err(|e| {
                CallError::Run(internal_error(
                    name,
                    &format!("cannot start the run workers: {e}"),
                ))
            })?;
            let program = self.program.clone();
            let downstream = self.downstream.clone();
            // Downstream connections live on the caller's runtime, not on the worker's.
            let runtime = Handle::try_current().ok();
            let span = span.clone();
            pool.run(move || {
                Box::pin(async move {
                    let env = RunEnv {
                        downstream,
                        runtime,
                        cancel,
                        on_node: observer,
                        asker,
                        debugger,
                        on_log: log,
                        trace,
                        span,
                    };
                    executor::run(&program, index, args, &env)
                        .await
                        .map(|v| to_json(&v).unwrap_or_else(|| Value::Object(Map::new())))
                })
            })
            .await
            .ok_or(CallError::Cancelled)?
        };
        let value = match result {
            Ok(v) => v,
            Err(e) if e.kind() == FailureKind::Cancelled => return Err(CallError::Cancelled),
            Err(e) => return Err(CallError::Run(e)),
        };
        tool.validate_result(&value)?;
        Ok(value)
    }

    /// Stops every run and closes the downstream servers.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.downstream.shutdown().await;
    }

    /// Cancels every run (each ends as cancelled); new calls are cancelled at once. The
    /// downstream servers stay up until [`Engine::shutdown`].
    pub fn cancel_runs(&self) {
        self.shutdown.cancel();
    }
}

/// A run of a tool without a node that waits (mcp, map, parallel, ask): it never awaits, so it completes in one poll, on the
/// calling thread, and none of its (!Send) values outlives this function.
fn run_pure(
    program: &Program,
    index: usize,
    args: Map<String, Value>,
    downstream: Arc<Downstream>,
    cancel: Cancel,
    (observer, debugger, log, span): (
        Option<NodeObserver>,
        Option<Debugger>,
        Option<LogSink>,
        Option<Span>,
    ),
) -> Result<Value, RunError> {
    let env = RunEnv {
        downstream,
        runtime: None,
        cancel,
        on_node: observer,
        asker: None,
        debugger,
        on_log: log,
        // A run without downstream calls has nothing to pass a trace context to.
        trace: None,
        span,
    };
    let run = executor::run(program, index, args, &env);
    let mut run = std::pin::pin!(run);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match run.as_mut().poll(&mut context) {
        std::task::Poll::Ready(outcome) => {
            outcome.map(|v| to_json(&v).unwrap_or_else(|| Value::Object(Map::new())))
        }
        // Only a node that waits awaits; say so rather than hang if that ever changes.
        std::task::Poll::Pending => Err(internal_error(
            &program.tools[index].ir.name,
            "a run without downstream calls did not complete",
        )),
    }
}

/// A failure that is mcpgraph's fault. (No kind fits an internal error; `tool`: the tool failed.)
fn internal_error(tool: &str, what: &str) -> RunError {
    RunError {
        tool: tool.to_string(),
        node: None,
        failure: Failure::new(FailureKind::Tool, format!("internal error: {what}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{Question, Refusal};
    use futures::future::BoxFuture;
    use tokio::sync::{Notify, Semaphore};

    const ASKING: &str = r#"version: "1.0"
server: { name: t, version: "1" }
tools:
  - name: confirm
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: ask }
      - id: ask
        type: ask
        message: '"Sure?"'
        schema: { type: object, properties: { ok: { type: boolean } }, required: [ok] }
        next: exit
      - { id: exit, type: exit }
"#;

    fn load_asking() -> Engine {
        let checked =
            mcpgraph_compiler::compile(&mcpgraph_compiler::SourceFile::new("t.yaml", ASKING), None);
        Engine::load(checked.graph.expect("the graph checks")).expect("the engine loads")
    }

    /// Adds a permit to `asked` when asked, then answers `{"ok": true}` once `release` is notified.
    fn waiting_asker(asked: Arc<Semaphore>, release: Arc<Notify>) -> Asker {
        Arc::new(
            move |_question: Question| -> BoxFuture<'static, Result<Value, Refusal>> {
                let (asked, release) = (asked.clone(), release.clone());
                Box::pin(async move {
                    asked.add_permits(1);
                    release.notified().await;
                    Ok(serde_json::json!({"ok": true}))
                })
            },
        )
    }

    /// The workers are shared, the runs are not: one engine cancelling its runs leaves the run
    /// of another engine, in flight on the same pool, to finish.
    #[test]
    fn one_engine_stopping_leaves_another_engines_runs_alone() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let (stopping, going_on) = (load_asking(), load_asking());
        let asked = Arc::new(Semaphore::new(0));
        let (never, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let options = |release: &Arc<Notify>| CallOptions {
            asker: Some(waiting_asker(asked.clone(), release.clone())),
            ..CallOptions::default()
        };
        let (stopped, finished) = runtime.block_on(async {
            let stopped = stopping.call_with("confirm", Map::new(), options(&never));
            let finished = going_on.call_with("confirm", Map::new(), options(&release));
            let stop_one = async {
                // Both runs are in flight on the workers, each waiting for its answer.
                let _both = asked.acquire_many(2).await;
                stopping.cancel_runs();
                release.notify_one();
            };
            let (stopped, finished, ()) = tokio::join!(stopped, finished, stop_one);
            (stopped, finished)
        });
        assert_eq!(stopped, Err(CallError::Cancelled));
        assert_eq!(finished, Ok(serde_json::json!({"ok": true})));
    }
}
