//! The one executor: runs one tool call of a checked graph (contract §3).
//!
//! A run owns its history and JSONata evaluator (both `!Send`: jsonata-core values are `Rc`), so
//! a run is a `!Send` future driven on a worker thread's `LocalSet` (see `pool.rs`); everything
//! it shares with other runs (`Program`, downstream connections) is `Send + Sync`.

use crate::cancel::Cancel;
use crate::downstream::Downstream;
use crate::failure::{Failure, FailureKind, RunError};
use crate::history::{History, Record, SharedHistory};
use crate::jsonata::{EvalError, Jsonata, Settings};
use crate::jsonlogic::{self, Vars};
use crate::program::Program;
use crate::value::{json_size, to_json, to_jvalue};
use crate::watchdog;
use jsonata_core::evaluator::CancelToken;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{
    Condition, Expr, Limits, Node, NodeId, NodeKind, ServerId, Template, Tool,
};
use serde_json::{Map, Value};
use std::cell::RefCell;
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
    /// Called after each executed node.
    pub on_node: Option<NodeObserver>,
}

/// Called after each executed node of a call (progress notifications, `--trace`).
pub type NodeObserver = Arc<dyn Fn(&NodeReport<'_>) + Send + Sync>;

/// One executed node, as progress notifications and `--trace` see it.
pub struct NodeReport<'a> {
    /// 1 for the first executed node.
    pub index: usize,
    pub node: &'a str,
    pub node_type: &'static str,
    pub start: Duration,
    pub duration: Duration,
    pub output: &'a JValue,
}

/// A node's outcome: its output and the node that runs next (`None` only for the exit).
type Step = Result<(JValue, Option<NodeId>), Failure>;

/// One run's state, which every node function sees.
struct Run<'a> {
    tool: &'a Tool,
    env: &'a RunEnv,
    limits: Limits,
    started: Instant,
    deadline: Instant,
    history: SharedHistory,
    jsonata: Jsonata,
    arguments: JValue,
    /// The sizes of the outputs recorded so far (see [`Run::check_size`]).
    held_bytes: u64,
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
    let prepared = &program.tools[tool];
    let limits = program.graph.limits;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(limits.max_execution_time_ms);
    let history: SharedHistory = Rc::new(RefCell::new(History::new(
        prepared.names.clone(),
        prepared.ir.nodes.len(),
    )));
    let evaluation_cancel = CancelToken::new();
    // The watchdog stops an evaluation in flight at the time limit or when the client cancels;
    // without it (no thread), jsonata-core bounds each evaluation by reading the clock.
    let watch = watchdog::watch(deadline, &env.cancel, &evaluation_cancel);
    let jsonata = Jsonata::new(
        Some(&history),
        Settings {
            timeout_ms: watch.is_none().then_some(limits.max_execution_time_ms),
            cancel: Some(evaluation_cancel),
            max_value_bytes: Some(limits.max_value_bytes),
            ..Settings::default()
        },
    );
    let mut run = Run {
        tool: &prepared.ir,
        env,
        limits,
        started,
        deadline,
        history,
        jsonata,
        arguments: to_jvalue(&Value::Object(args)),
        held_bytes: 0,
    };

    let mut current = run.tool.entry;
    loop {
        run.check_limits()?;
        let node = run.tool.node(current);
        let node_start = run.started.elapsed();
        let step = match &node.kind {
            NodeKind::Entry => entry(&run, node),
            NodeKind::Exit => exit(&run),
            NodeKind::Transform(expr) => transform(&mut run, node, expr),
            NodeKind::Switch { conditions } => switch(&mut run, node, conditions),
            NodeKind::Mcp {
                server,
                tool: name,
                args,
            } => mcp(&mut run, node, *server, name, args).await,
        };
        let (output, next) = step.map_err(|failure| run.error(node, failure))?;
        run.check_size(node, &output)?;
        run.record(current, node, node_start, &output);
        match (&node.kind, next) {
            (NodeKind::Exit, _) => return Ok(output),
            (_, Some(next)) => current = next,
            // The checker guarantees a `next` on every node but switches and the exit.
            (_, None) => {
                let failure = Failure::new(
                    FailureKind::Route,
                    format!("Node {} has no next node and is not the exit node", node.id),
                );
                return Err(run.error(node, failure));
            }
        }
    }
}

impl Run<'_> {
    /// The limits and cancellation, looked at before each node.
    fn check_limits(&self) -> Result<(), RunError> {
        let executed = self.history.borrow().len();
        if executed as u64 >= self.limits.max_node_executions {
            return Err(self.between_nodes(Failure::new(
                FailureKind::Limit,
                format!(
                    "Execution limit exceeded: maximum node executions ({}) reached. Current execution count: {executed}",
                    self.limits.max_node_executions
                ),
            )));
        }
        if self.past_deadline() {
            return Err(self.between_nodes(self.time_limit()));
        }
        if self.env.cancel.is_cancelled() {
            return Err(self.between_nodes(cancelled()));
        }
        Ok(())
    }

    fn past_deadline(&self) -> bool {
        self.started.elapsed() >= Duration::from_millis(self.limits.max_execution_time_ms)
    }

    fn time_limit(&self) -> Failure {
        Failure::new(
            FailureKind::Limit,
            format!(
                "Execution limit exceeded: maximum execution time ({}ms) reached. Elapsed time: {}ms",
                self.limits.max_execution_time_ms,
                self.started.elapsed().as_millis()
            ),
        )
    }

    /// The bounds on memory, looked at after each node: its output may take at most
    /// `maxValueBytes` (measured as JSON text, see [`json_size`]: O(1) for a string, at most
    /// O(`maxValueBytes`) otherwise), and all outputs the run holds, which its history keeps,
    /// [`RUN_BYTES_PER_VALUE_BYTES`] times that. Values that grow from node to node (a loop
    /// doubling a string) stop here; the size-checked built-ins stop those that grow within one
    /// expression.
    fn check_size(&mut self, node: &Node, output: &JValue) -> Result<(), RunError> {
        let cap = self.limits.max_value_bytes;
        let bytes = json_size(output, cap);
        let message = if bytes > cap {
            format!(
                "Execution limit exceeded: maximum value size ({cap} bytes) reached: the output takes at least {bytes} bytes"
            )
        } else {
            self.held_bytes += bytes;
            let total = cap.saturating_mul(RUN_BYTES_PER_VALUE_BYTES);
            if self.held_bytes <= total {
                return Ok(());
            }
            format!(
                "Execution limit exceeded: maximum size of a run's values ({total} bytes, {RUN_BYTES_PER_VALUE_BYTES} × maxValueBytes) reached: the outputs of its nodes take {} bytes",
                self.held_bytes
            )
        };
        Err(RunError {
            tool: self.tool.name.clone(),
            node: Some((node.id.clone(), node.kind.type_name())),
            failure: Failure::new(FailureKind::Limit, message),
        })
    }

    /// A failure of the run itself (limits, cancellation), which names no node.
    fn between_nodes(&self, failure: Failure) -> RunError {
        RunError {
            tool: self.tool.name.clone(),
            node: None,
            failure,
        }
    }

    /// The run's error for `node`'s failure. A node stopped by the time limit or by cancellation
    /// (an evaluation interrupted, a downstream call abandoned) reads as that, between nodes.
    fn error(&self, node: &Node, failure: Failure) -> RunError {
        let interrupted = matches!(failure.kind, FailureKind::Limit | FailureKind::Cancelled);
        if interrupted && self.past_deadline() {
            return self.between_nodes(self.time_limit());
        }
        if self.env.cancel.is_cancelled() {
            return self.between_nodes(cancelled());
        }
        let failure = if interrupted {
            // Only the deadline and cancellation interrupt a node, and neither happened: keep
            // the message, as an expression's failure.
            Failure {
                kind: FailureKind::Expression,
                ..failure
            }
        } else {
            failure
        };
        RunError {
            tool: self.tool.name.clone(),
            node: Some((node.id.clone(), node.kind.type_name())),
            failure,
        }
    }

    /// Appends the node's record to the history and reports it.
    fn record(&self, id: NodeId, node: &Node, start: Duration, output: &JValue) {
        let duration = self.started.elapsed() - start;
        let index = {
            let mut history = self.history.borrow_mut();
            history.push(
                &node.id,
                Record {
                    node: id,
                    output: output.clone(),
                    start,
                    duration,
                },
            );
            history.len()
        };
        if let Some(report) = &self.env.on_node {
            report(&NodeReport {
                index,
                node: &node.id,
                node_type: node.kind.type_name(),
                start,
                duration,
                output,
            });
        }
    }

    /// The context expressions see: the newest output of each node, newest first.
    fn context(&self) -> JValue {
        self.history.borrow().context().clone()
    }
}

fn cancelled() -> Failure {
    Failure::new(FailureKind::Cancelled, "Execution was cancelled")
}

/// `entry`: the call's arguments.
fn entry(run: &Run<'_>, node: &Node) -> Step {
    Ok((run.arguments.clone(), node.next))
}

/// `exit`: the previous node's output (see [`exit_output`]).
fn exit(run: &Run<'_>) -> Step {
    let last = run
        .history
        .borrow()
        .last()
        .map(|r| r.output.clone())
        .unwrap_or(JValue::Undefined);
    Ok((exit_output(last), None))
}

/// `transform`: the expression's value.
fn transform(run: &mut Run<'_>, node: &Node, expr: &Expr) -> Step {
    let context = run.context();
    let value = run.jsonata.eval(expr, &context)?;
    Ok((value, node.next))
}

/// `switch`: the first condition that holds (its target's id is the output), else the default.
fn switch(run: &mut Run<'_>, node: &Node, conditions: &[Condition]) -> Step {
    let context = run.context();
    let mut vars = GraphVars {
        jsonata: &mut run.jsonata,
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
                // The switch converts the final value with JavaScript Boolean(), not JSON Logic's
                // truthiness: [] and {} are true.
                crate::js::boolean(&value)
            }
        };
        if matched {
            let target = condition.target;
            return Ok((
                JValue::string(run.tool.node(target).id.as_str()),
                Some(target),
            ));
        }
    }
    match node.next {
        Some(default) => Ok((
            JValue::string(run.tool.node(default).id.as_str()),
            Some(default),
        )),
        None => Err(Failure::new(
            FailureKind::Route,
            format!(
                "Switch node {}: No conditions matched and no default case provided",
                node.id
            ),
        )),
    }
}

/// `mcp`: the downstream tool's result, bounded by the run's deadline and cancellation.
async fn mcp(
    run: &mut Run<'_>,
    node: &Node,
    server: ServerId,
    tool: &str,
    args: &Template,
) -> Step {
    let context = run.context();
    let call_args = evaluate_args(args, &mut run.jsonata, &context, run.limits.max_value_bytes)?;
    let Some(runtime) = run
        .env
        .runtime
        .clone()
        .or_else(|| Handle::try_current().ok())
    else {
        return Err(Failure::new(
            FailureKind::Connection,
            "MCP client initialization failed: no tokio runtime to run the connection on",
        ));
    };
    let call = run.env.downstream.call(&runtime, server, tool, call_args);
    tokio::select! {
        result = call => result.map(|v| (v, node.next)),
        // The run's error reads these as the limit and the cancellation.
        () = tokio::time::sleep_until(run.deadline.into()) => Err(Failure::new(FailureKind::Limit, "")),
        () = run.env.cancel.cancelled() => Err(cancelled()),
    }
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

/// The arguments of an mcp node: keys whose expression is undefined are dropped.
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
                    code: None,
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
