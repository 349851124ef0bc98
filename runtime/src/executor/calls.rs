//! Calls: an mcp node's, a map item's, a parallel branch's (extensions §2, §6, §9). Each call
//! makes its attempts (retries with their waits), each attempt bounded by its `timeoutMs`, the
//! run's deadline and cancellation; `server: self` runs the callee in process. The arguments
//! templates are evaluated here, once per attempt.

use super::report::{Frame, Site};
use super::{NodeFailure, Run, Session, Step, cancelled, interrupting};
use crate::downstream;
use crate::executor::Place;
use crate::failure::{Failure, FailureKind, Limit, SizedValue};
use crate::jsonata::{EvalError, Jsonata};
use crate::telemetry::Span;
use crate::value::{json_size, to_json, to_jvalue};
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Call, Node, Target, Template};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::time::{Duration, Instant};
use tokio::runtime::Handle;

/// When a `self` call's attempt times out, and what its failure then says.
#[derive(Debug, Clone)]
pub(super) struct AttemptDeadline {
    pub(super) at: Instant,
    pub(super) message: String,
}

impl<'a> Session<'a> {
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
    pub(super) async fn bounded<T>(
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
            () = tokio::time::sleep_until(self.deadline().into()) => Err(NodeFailure::deadline()),
            () = self.env.cancel.cancelled() => Err(cancelled().into()),
        }
    }

    /// One call (an mcp node's, a map item's, a branch's) with its retries (extensions §2).
    /// `args` evaluates the arguments, once per attempt. `span`: the node's, item's or
    /// branch's, which the attempts' spans hang from and its retries are events of.
    pub(super) async fn call(
        &'a self,
        call: &'a Call,
        site: &Site<'_>,
        inherited: Option<&AttemptDeadline>,
        span: Option<&Span>,
        args: impl Fn() -> Result<Map<String, Value>, NodeFailure>,
    ) -> Result<(JValue, Option<u32>), NodeFailure> {
        let retry = call.retry.as_ref();
        let max_attempts = retry.map_or(1, |r| r.max_attempts.max(1));
        let mut attempt = 1;
        loop {
            let outcome = match args() {
                Ok(arguments) => {
                    let traced = span.map(|parent| self.attempt_span(parent, call, attempt));
                    let outcome = self
                        .attempt(call, site, inherited, arguments, traced.as_ref())
                        .await;
                    if let (Some(span), Err(failure)) = (&traced, &outcome) {
                        span.failed(failure.kind_name());
                    }
                    outcome
                }
                Err(failure) => Err(failure),
            };
            let mut failure = match outcome {
                Ok(value) => return Ok((value, retry.map(|_| attempt))),
                Err(failure) => failure,
            };
            let again = attempt < max_attempts
                && failure
                    .routable()
                    .is_some_and(|f| retry.is_some_and(|r| r.retries(f.kind)));
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
            if let Some(span) = span {
                span.event(
                    "retry",
                    vec![
                        KeyValue::new("mcpgraph.attempt", i64::from(attempt)),
                        KeyValue::new("error.type", failure.kind_name()),
                        KeyValue::new(
                            "mcpgraph.delay_ms",
                            i64::try_from(wait.as_millis()).unwrap_or(i64::MAX),
                        ),
                    ],
                );
            }
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.env.cancel.cancelled() => return Err(NodeFailure::ending(cancelled())),
            }
        }
    }

    /// The span of attempt `attempt` of `call`: a request to a downstream server (a client
    /// span named as the request is), or a `server: self` call, whose callee's nodes it holds.
    fn attempt_span(&self, parent: &Span, call: &Call, attempt: u32) -> Span {
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", call.tool.clone()),
            KeyValue::new("mcpgraph.attempt", i64::from(attempt)),
        ];
        let kind = match call.target {
            Target::Server(server) => {
                let name = &self.program.graph.servers[server.0 as usize].name;
                attributes.push(KeyValue::new("mcpgraph.server", name.clone()));
                SpanKind::Client
            }
            Target::SelfTool(_) => {
                attributes.push(KeyValue::new("mcpgraph.server", "self"));
                SpanKind::Internal
            }
        };
        parent.child(format!("tools/call {}", call.tool), kind, attributes)
    }

    /// One attempt of a call: bounded by its node's timeout (covering the server's start on
    /// first use), the deadline and cancellation. A dropped attempt tells the downstream server.
    async fn attempt(
        &'a self,
        call: &'a Call,
        site: &Site<'_>,
        inherited: Option<&AttemptDeadline>,
        arguments: Map<String, Value>,
        span: Option<&Span>,
    ) -> Result<JValue, NodeFailure> {
        match call.target {
            Target::Server(server) => {
                let runtime = self.runtime()?;
                let timeout_ms = call
                    .timeout_ms
                    .unwrap_or_else(|| self.env.downstream.timeout_ms(server));
                let downstream = self.env.downstream.clone();
                // The attempt's span is the downstream's parent; without traces, the caller's
                // context goes on as it came.
                let own = span.map(Span::propagated);
                let trace = own.as_ref().or(self.env.trace.as_ref());
                let slow_start = |server: &str, waited: Duration| {
                    self.slow_start(site, server, waited);
                };
                let request = async move {
                    downstream
                        .call(
                            &runtime,
                            server,
                            &call.tool,
                            arguments,
                            timeout_ms,
                            trace,
                            Some(&slow_start),
                        )
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
                    self.call_self(callee, arguments, site, deadline, span.cloned()),
                )
                .await
            }
        }
    }

    /// A warning to the call's client, once per server: `site` waited `waited` for `server` to
    /// start (slow: see `downstream::slow_start`). Written to stderr once per start by the
    /// start itself.
    fn slow_start(&self, site: &Site<'_>, server: &str, waited: Duration) {
        let Some(sink) = &self.env.on_log else { return };
        {
            let mut told = self.slow_starts.borrow_mut();
            if told.iter().any(|s| s == server) {
                return;
            }
            told.push(server.to_string());
        }
        let data = Value::String(format!(
            "{} waited {:.1} s for server `{server}` to start",
            site.label(),
            waited.as_secs_f64()
        ));
        sink(&super::LogMessage {
            source: super::LogSource::Mcpgraph,
            level: mcpgraph_compiler::ir::LogLevel::Warning,
            node: site.node,
            callers: site.callers,
            data: &data,
        });
    }

    /// `server: self`: the callee's arguments and result checked against its schemas, its run
    /// in process with its own history (extensions §6).
    async fn call_self(
        &'a self,
        callee: usize,
        arguments: Map<String, Value>,
        site: &Site<'_>,
        attempt: Option<AttemptDeadline>,
        span: Option<Span>,
    ) -> Result<JValue, NodeFailure> {
        let tool = &self.program.tools[callee];
        let name = &tool.ir.name;
        let arguments = Value::Object(arguments);
        if let Err(violation) = tool.validate_arguments(&arguments) {
            return Err(Failure::new(FailureKind::Schema, violation.to_string()).into());
        }
        let mut callers = site.callers.to_vec();
        callers.push(Frame {
            node: site.node.to_string(),
            place: site.place.clone(),
            tool: name.clone(),
        });
        let value = match self
            .run_tool(callee, to_jvalue(&arguments), callers, attempt, span)
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
        if let Err(violation) = tool.validate_result(&json) {
            return Err(Failure::new(FailureKind::Schema, violation.to_string()).into());
        }
        Ok(to_jvalue(&json))
    }
}

impl<'a> Run<'a> {
    /// The arguments of a call, evaluated against the context as it is now.
    pub(super) fn arguments(
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
    pub(super) async fn mcp(&self, node: &Node, call: &'a Call) -> Step {
        let context = self.context();
        let span = self.node_span.borrow().clone();
        let (value, attempts) = self
            .session
            .call(
                call,
                &self.site(node, Place::Node),
                self.attempt.as_ref(),
                span.as_ref(),
                || self.arguments(&call.args, &self.jsonata, &context),
            )
            .await?;
        Ok((value, node.next, attempts))
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
                let limit = Limit::ValueSize {
                    max_bytes,
                    value: SizedValue::Argument,
                    bytes,
                };
                return Err(EvalError {
                    code: Some("U1010".to_string()),
                    message: limit.to_string(),
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
