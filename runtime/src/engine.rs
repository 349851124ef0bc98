//! The engine: a program, its downstream connections and the run workers. `serve`, built
//! servers, `mcpgraph call` and `graph!` programs all call tools through this one type.

use crate::cancel::Cancel;
use crate::debug::Debugger;
use crate::downstream::Downstream;
use crate::executor::{self, Asker, NodeObserver, RunEnv};
use crate::failure::{Failure, FailureKind, RunError};
use crate::pool::Pool;
use crate::program::Program;
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
}

pub struct Engine {
    program: Arc<Program>,
    downstream: Arc<Downstream>,
    pool: Pool,
    /// Cancelled at shutdown: every run stops.
    shutdown: CancellationToken,
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
            CallError::InvalidArguments { tool, violations } => {
                write!(f, "Invalid arguments for tool \"{tool}\":")?;
                violations.iter().try_for_each(|v| write!(f, "\n  {v}"))
            }
            CallError::Run(e) => e.fmt(f),
            CallError::InvalidResult { tool, violations } => {
                write!(
                    f,
                    "Tool \"{tool}\" returned a result that does not match its outputSchema:"
                )?;
                violations.iter().try_for_each(|v| write!(f, "\n  {v}"))
            }
            CallError::Cancelled => f.write_str("Execution was cancelled"),
        }
    }
}

impl std::error::Error for CallError {}

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
    /// Prepares a checked graph and starts the run workers. Works anywhere, inside a tokio
    /// runtime or not: downstream servers are started on first use, on the runtime of the call
    /// that needs them.
    pub fn load(graph: Graph) -> Result<Engine, LoadError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let program = Program::new(graph);
        Ok(Engine {
            downstream: Arc::new(Downstream::new(program.graph.servers.clone())),
            program: Arc::new(program),
            pool: Pool::new(threads)?,
            shutdown: CancellationToken::new(),
        })
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
        } = options;
        let index = self
            .program
            .tool_index(name)
            .ok_or_else(|| CallError::UnknownTool(name.to_string()))?;
        let tool = &self.program.tools[index];
        let args = Value::Object(args);
        tool.check_input(&args)
            .map_err(|violations| CallError::InvalidArguments {
                tool: name.to_string(),
                violations,
            })?;
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
                // A tool without mcp nodes runs on a thread of tokio's blocking pool, not on the
                // task that called: a CPU-heavy run must not hold a runtime worker, or as many
                // of them as there are cores stall every other call and the reading of
                // `notifications/cancelled` (which is what stops the run).
                Ok(runtime) => {
                    let program = self.program.clone();
                    let downstream = self.downstream.clone();
                    runtime
                        .spawn_blocking(move || {
                            run_pure(
                                &program, index, args, downstream, cancel, observer, debugger,
                            )
                        })
                        .await
                        .unwrap_or_else(|_| Err(internal_error(name, "the run panicked")))
                }
                // No runtime (a caller polling the future by hand): here, in one poll.
                Err(_) => run_pure(
                    &self.program,
                    index,
                    args,
                    self.downstream.clone(),
                    cancel,
                    observer,
                    debugger,
                ),
            }
        } else {
            let program = self.program.clone();
            let downstream = self.downstream.clone();
            // Downstream connections live on the caller's runtime, not on the worker's.
            let runtime = Handle::try_current().ok();
            self.pool
                .run(move || {
                    Box::pin(async move {
                        let env = RunEnv {
                            downstream,
                            runtime,
                            cancel,
                            on_node: observer,
                            asker,
                            debugger,
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
        if tool.has_output_schema() {
            if !value.is_object() {
                return Err(CallError::InvalidResult {
                    tool: name.to_string(),
                    violations: vec![format!(
                        "the result is not an object: {}",
                        crate::value::to_js_json(&value)
                    )],
                });
            }
            tool.check_output(&value)
                .map_err(|violations| CallError::InvalidResult {
                    tool: name.to_string(),
                    violations,
                })?;
        }
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

/// A run of a tool without mcp nodes: it never awaits, so it completes in one poll, on the
/// calling thread, and none of its (!Send) values outlives this function.
fn run_pure(
    program: &Program,
    index: usize,
    args: Map<String, Value>,
    downstream: Arc<Downstream>,
    cancel: Cancel,
    observer: Option<NodeObserver>,
    debugger: Option<Debugger>,
) -> Result<Value, RunError> {
    let env = RunEnv {
        downstream,
        runtime: None,
        cancel,
        on_node: observer,
        asker: None,
        debugger,
    };
    let run = executor::run(program, index, args, &env);
    let mut run = std::pin::pin!(run);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match run.as_mut().poll(&mut context) {
        std::task::Poll::Ready(outcome) => {
            outcome.map(|v| to_json(&v).unwrap_or_else(|| Value::Object(Map::new())))
        }
        // Only an mcp node awaits; say so rather than hang if that ever changes.
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
