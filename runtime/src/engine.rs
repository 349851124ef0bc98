//! The engine: a program, its downstream connections and the run workers. `serve`, built
//! servers, `mcpgraph call` and `graph!` programs all call tools through this one type.

use crate::downstream::Downstream;
pub use crate::executor::NodeObserver;
use crate::executor::{self, Cancel, RunEnv, RunError, RunErrorKind};
use crate::pool::Pool;
use crate::program::Program;
use crate::value::to_json;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub struct Engine {
    program: Arc<Program>,
    downstream: Arc<Downstream>,
    pool: Pool,
    /// Cancelled at shutdown: every run stops.
    shutdown: CancellationToken,
}

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

impl Engine {
    /// Must be called inside a multi-threaded tokio runtime: downstream connections live there.
    pub fn new(program: Program) -> std::io::Result<Engine> {
        let handle = tokio::runtime::Handle::current();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Engine {
            downstream: Arc::new(Downstream::new(program.graph.servers.clone(), handle)),
            program: Arc::new(program),
            pool: Pool::new(threads)?,
            shutdown: CancellationToken::new(),
        })
    }

    pub fn program(&self) -> &Program {
        &self.program
    }

    /// Calls a tool: arguments validated against `inputSchema` before any node runs, the result
    /// against `outputSchema`.
    pub async fn call(
        &self,
        name: &str,
        args: Map<String, Value>,
        cancel: CancellationToken,
        observer: Option<NodeObserver>,
    ) -> Result<Value, CallError> {
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
        let cancel = Cancel::new(cancel, self.shutdown.clone());
        let result = if tool.pure {
            // No downstream call: the run never awaits, so it completes in one poll right here,
            // and none of its (!Send) values outlives this synchronous block.
            let env = RunEnv {
                downstream: self.downstream.clone(),
                cancel,
                on_node: observer,
            };
            let run = executor::run(&self.program, index, args, &env);
            let mut run = std::pin::pin!(run);
            let mut context = std::task::Context::from_waker(std::task::Waker::noop());
            match run.as_mut().poll(&mut context) {
                std::task::Poll::Ready(outcome) => {
                    outcome.map(|v| to_json(&v).unwrap_or_else(|| Value::Object(Map::new())))
                }
                // Only an mcp node awaits; say so rather than hang if that ever changes.
                std::task::Poll::Pending => Err(RunError {
                    tool: name.to_string(),
                    node: None,
                    kind: RunErrorKind::Node,
                    message: "internal error: a run without downstream calls did not complete"
                        .into(),
                }),
            }
        } else {
            let program = self.program.clone();
            let downstream = self.downstream.clone();
            self.pool
                .run(move || {
                    Box::pin(async move {
                        let env = RunEnv {
                            downstream,
                            cancel,
                            on_node: observer,
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
            Err(e) if e.kind == RunErrorKind::Cancelled => return Err(CallError::Cancelled),
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
}
