//! The one executor: runs one tool call of a checked graph (contract §3).
//!
//! A run owns its history and JSONata evaluator (both `!Send`: jsonata-core values are `Rc`), so
//! a run is a `!Send` future driven on a worker thread's `LocalSet` (see `pool.rs`); everything
//! it shares with other runs (`Program`, downstream connections) is `Send + Sync`.

use crate::downstream::Downstream;
use crate::history::{History, Record, SharedHistory};
use crate::jsonata::{EvalError, Jsonata, Settings};
use crate::jsonlogic::{self, Vars};
use crate::program::Program;
use crate::value::{to_json, to_jvalue};
use crate::watchdog;
use jsonata_core::evaluator::CancelToken;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Expr, Node, NodeId, NodeKind, Template, Tool};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What a run may use from the outside, and what it reports while it runs.
pub struct RunEnv {
    pub downstream: Arc<Downstream>,
    /// Cancelled when the client cancels the call or the server shuts down.
    pub cancel: Cancel,
    /// Called after each executed node.
    pub on_node: Option<NodeObserver>,
}

/// A run's cancellation: the client cancelling the call, or the server shutting down. Two tokens
/// looked at together, so no task has to combine them into one.
#[derive(Clone, Default)]
pub struct Cancel {
    call: CancellationToken,
    shutdown: CancellationToken,
}

impl Cancel {
    pub fn new(call: CancellationToken, shutdown: CancellationToken) -> Cancel {
        Cancel { call, shutdown }
    }

    pub fn is_cancelled(&self) -> bool {
        self.call.is_cancelled() || self.shutdown.is_cancelled()
    }

    /// Completes when either token is cancelled.
    pub async fn cancelled(&self) {
        tokio::select! {
            () = self.call.cancelled() => {}
            () = self.shutdown.cancelled() => {}
        }
    }
}

/// Called after each executed node of a call (progress notifications, `--trace`).
pub type NodeObserver = Arc<dyn Fn(&NodeReport<'_>) + Send + Sync>;

/// One executed node, as progress notifications and `--trace` see it.
pub struct NodeReport<'a> {
    pub index: usize,
    pub node: &'a str,
    pub node_type: &'static str,
    pub start: Duration,
    pub duration: Duration,
    pub output: &'a JValue,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunError {
    pub tool: String,
    /// The node that failed (`None` for limits and cancellation, which fall between nodes).
    pub node: Option<(String, &'static str)>,
    pub kind: RunErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunErrorKind {
    Limit,
    Cancelled,
    Node,
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some((id, kind)) => write!(
                f,
                "tool \"{}\", node \"{id}\" ({kind}): {}",
                self.tool, self.message
            ),
            None => write!(f, "tool \"{}\": {}", self.tool, self.message),
        }
    }
}

/// Runs tool `tool` of `program` with `args`; the result is the exit node's output.
pub async fn run(
    program: &Program,
    tool: usize,
    args: Map<String, Value>,
    env: &RunEnv,
) -> Result<JValue, RunError> {
    let prepared = &program.tools[tool];
    let tool_ir = &prepared.ir;
    let limits = program.graph.limits;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(limits.max_execution_time_ms);
    let history: SharedHistory = Rc::new(RefCell::new(History::new(
        prepared.names.clone(),
        tool_ir.nodes.len(),
    )));
    let evaluation_cancel = CancelToken::new();
    // The watchdog stops an evaluation in flight at the time limit or when the client cancels;
    // without it (no thread), jsonata-core bounds each evaluation by reading the clock.
    let watch = watchdog::watch(deadline, &env.cancel, &evaluation_cancel);
    let mut jsonata = Jsonata::new(
        Some(&history),
        Settings {
            timeout_ms: watch.is_none().then_some(limits.max_execution_time_ms),
            cancel: Some(evaluation_cancel),
            ..Settings::default()
        },
    );
    let arguments = to_jvalue(&Value::Object(args));
    let fail = |node: Option<&Node>, kind: RunErrorKind, message: String| RunError {
        tool: tool_ir.name.clone(),
        node: node.map(|n| (n.id.clone(), n.kind.type_name())),
        kind,
        message,
    };
    let time_limit = |elapsed: Duration| {
        format!(
            "Execution limit exceeded: maximum execution time ({}ms) reached. Elapsed time: {}ms",
            limits.max_execution_time_ms,
            elapsed.as_millis()
        )
    };

    let mut current = tool_ir.entry;
    loop {
        let executed = history.borrow().len();
        if executed as u64 >= limits.max_node_executions {
            return Err(fail(
                None,
                RunErrorKind::Limit,
                format!(
                    "Execution limit exceeded: maximum node executions ({}) reached. Current execution count: {executed}",
                    limits.max_node_executions
                ),
            ));
        }
        let elapsed = started.elapsed();
        if elapsed.as_millis() as u64 >= limits.max_execution_time_ms {
            return Err(fail(None, RunErrorKind::Limit, time_limit(elapsed)));
        }
        if env.cancel.is_cancelled() {
            return Err(fail(
                None,
                RunErrorKind::Cancelled,
                "Execution was cancelled".into(),
            ));
        }

        let node = tool_ir.node(current);
        let node_start = started.elapsed();
        let step = match &node.kind {
            NodeKind::Entry => Ok((arguments.clone(), node.next)),
            NodeKind::Exit => {
                let last = history
                    .borrow()
                    .last()
                    .map(|r| r.output.clone())
                    .unwrap_or(JValue::Undefined);
                Ok((exit_output(last), None))
            }
            NodeKind::Transform(expr) => {
                let context = history.borrow().context().clone();
                jsonata
                    .eval(expr, &context)
                    .map(|v| (v, node.next))
                    .map_err(|e| e.to_string())
            }
            NodeKind::Switch { conditions } => {
                let context = history.borrow().context().clone();
                switch(tool_ir, node, conditions, &mut jsonata, &context)
            }
            NodeKind::Mcp {
                server,
                tool: name,
                args,
            } => {
                let context = history.borrow().context().clone();
                match evaluate_args(args, &mut jsonata, &context) {
                    Err(e) => Err(e.to_string()),
                    Ok(call_args) => {
                        let call = env.downstream.call(*server, name, call_args);
                        tokio::select! {
                            result = call => result.map(|v| (v, node.next)),
                            () = tokio::time::sleep_until(deadline.into()) => {
                                return Err(fail(None, RunErrorKind::Limit, time_limit(started.elapsed())));
                            }
                            () = env.cancel.cancelled() => {
                                return Err(fail(None, RunErrorKind::Cancelled, "Execution was cancelled".into()));
                            }
                        }
                    }
                }
            }
        };
        let (output, next) = match step {
            Ok(step) => step,
            Err(message) => {
                // An evaluation stopped by the run's time limit or cancellation reads as such.
                if started.elapsed().as_millis() as u64 >= limits.max_execution_time_ms
                    && (message.contains("timeout") || message.contains("Evaluation cancelled"))
                {
                    return Err(fail(
                        None,
                        RunErrorKind::Limit,
                        time_limit(started.elapsed()),
                    ));
                }
                if env.cancel.is_cancelled() {
                    return Err(fail(
                        None,
                        RunErrorKind::Cancelled,
                        "Execution was cancelled".into(),
                    ));
                }
                return Err(fail(Some(node), RunErrorKind::Node, message));
            }
        };
        let duration = started.elapsed() - node_start;
        let index = {
            let mut h = history.borrow_mut();
            h.push(
                &node.id,
                Record {
                    node: current,
                    output: output.clone(),
                    start: node_start,
                    duration,
                },
            );
            h.len()
        };
        if let Some(report) = &env.on_node {
            report(&NodeReport {
                index,
                node: &node.id,
                node_type: node.kind.type_name(),
                start: node_start,
                duration,
                output: &output,
            });
        }
        match (&node.kind, next) {
            (NodeKind::Exit, _) => return Ok(output),
            (_, Some(next)) => current = next,
            // The checker guarantees a `next` on every node but switches and the exit.
            (_, None) => {
                return Err(fail(
                    Some(node),
                    RunErrorKind::Node,
                    format!("Node {} has no next node and is not the exit node", node.id),
                ));
            }
        }
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

struct GraphVars<'a> {
    jsonata: &'a mut Jsonata,
    context: &'a JValue,
}

impl Vars for GraphVars<'_> {
    fn var(&mut self, expr: &Expr) -> Result<JValue, String> {
        self.jsonata
            .eval(expr, self.context)
            .map_err(|e| e.to_string())
    }
}

fn switch(
    tool: &Tool,
    node: &Node,
    conditions: &[mcpgraph_compiler::ir::Condition],
    jsonata: &mut Jsonata,
    context: &JValue,
) -> Result<(JValue, Option<NodeId>), String> {
    let mut vars = GraphVars { jsonata, context };
    for condition in conditions {
        let matched = match &condition.rule {
            None => true,
            Some(rule) => {
                let value = jsonlogic::apply(rule, context, &mut vars).map_err(|message| {
                    let rule_text =
                        serde_json::to_string_pretty(&rule.to_json()).unwrap_or_default();
                    format!("JSON Logic evaluation failed: {message}\nRule: {rule_text}")
                })?;
                // The switch converts the final value with JavaScript Boolean(), not JSON Logic's
                // truthiness: [] and {} are true.
                crate::js::boolean(&value)
            }
        };
        if matched {
            let target = condition.target;
            return Ok((JValue::string(tool.node(target).id.as_str()), Some(target)));
        }
    }
    match node.next {
        Some(default) => Ok((
            JValue::string(tool.node(default).id.as_str()),
            Some(default),
        )),
        None => Err(format!(
            "Switch node {}: No conditions matched and no default case provided",
            node.id
        )),
    }
}

/// The arguments of an mcp node: keys whose expression is undefined are dropped.
fn evaluate_args(
    template: &Template,
    jsonata: &mut Jsonata,
    context: &JValue,
) -> Result<Map<String, Value>, EvalError> {
    match evaluate_template(template, jsonata, context)? {
        Some(Value::Object(map)) => Ok(map),
        _ => Ok(Map::new()),
    }
}

fn evaluate_template(
    template: &Template,
    jsonata: &mut Jsonata,
    context: &JValue,
) -> Result<Option<Value>, EvalError> {
    Ok(match template {
        Template::Literal(v) => Some(v.clone()),
        Template::Expr(expr) => to_json(&jsonata.eval(expr, context)?),
        Template::Object(entries) => {
            let mut map = Map::with_capacity(entries.len());
            for (k, t) in entries {
                if let Some(v) = evaluate_template(t, jsonata, context)? {
                    map.insert(k.clone(), v);
                }
            }
            Some(Value::Object(map))
        }
        Template::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for t in items {
                out.push(evaluate_template(t, jsonata, context)?.unwrap_or(Value::Null));
            }
            Some(Value::Array(out))
        }
    })
}
