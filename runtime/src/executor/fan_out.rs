//! Fan-out: `map` (the call for each item, at most `concurrency` in flight, extensions §4) and
//! `parallel` (every branch at once, extensions §5). Items and branches are futures of the
//! run's task; each is reported when it settles.

use super::report::Outcome;
use super::{Cause, NodeFailure, Place, Run, Step, error_object, interrupting};
use crate::failure::Failure;
use crate::failure::FailureKind;
use crate::telemetry::Span;
use crate::value::json_size;
use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::{Branch, Call, Expr, Node, OnItemError};
use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;
use std::cell::RefCell;
use std::time::Duration;

impl<'a> Run<'a> {
    /// `map`: the call for each item, at most `concurrency` in flight, outputs in input order
    /// (extensions §4).
    pub(super) async fn map(
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
        let node_span = self.node_span.borrow().clone();
        // Built lazily: only the items in flight exist as futures.
        let work = items.into_iter().enumerate().map(|(index, item)| {
            let context = &context;
            let span = node_span.as_ref().map(|parent| {
                parent.child(
                    format!("{} item", node.id),
                    SpanKind::Internal,
                    vec![KeyValue::new("mcpgraph.item.index", index as i64)],
                )
            });
            async move {
                let bindings = vec![
                    ("item".to_string(), item),
                    ("index".to_string(), JValue::Number(index as f64)),
                ];
                // Each item evaluates its args with `$item` and `$index` bound, over the
                // history as it stood when the map started.
                let jsonata = RefCell::new(self.session.evaluator(
                    &self.history,
                    bindings,
                    self.functions,
                ));
                let site = self.site(node, Place::Item(index));
                let outcome = self
                    .session
                    .call(call, &site, self.attempt.as_ref(), span.as_ref(), || {
                        self.arguments(&call.args, &jsonata, context)
                    })
                    .await;
                ended(span, &outcome);
                outcome
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
    pub(super) async fn parallel(
        &self,
        node: &Node,
        branches: &'a [Branch],
        on_item_error: OnItemError,
    ) -> Step {
        let context = self.context();
        let node_span = self.node_span.borrow().clone();
        let work = branches.iter().map(|branch| {
            let context = &context;
            let span = node_span.as_ref().map(|parent| {
                parent.child(
                    format!("{} branch {}", node.id, branch.name),
                    SpanKind::Internal,
                    vec![KeyValue::new("mcpgraph.branch", branch.name.clone())],
                )
            });
            async move {
                let site = self.site(node, Place::Branch(branch.name.clone()));
                let outcome = self
                    .session
                    .call(
                        &branch.call,
                        &site,
                        self.attempt.as_ref(),
                        span.as_ref(),
                        || self.arguments(&branch.call.args, &self.jsonata, context),
                    )
                    .await;
                ended(span, &outcome);
                outcome
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
        F: Future<Output = Result<(JValue, Option<u32>), NodeFailure>>,
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
            future.map(move |outcome| (index, start, outcome))
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
        match state.failures.into_iter().min_by_key(|(index, ..)| *index) {
            Some((index, failure, attempts)) => Err(NodeFailure {
                cause: Cause::Failed(Failure {
                    message: format!("{}: {}", places.name(index), failure.message),
                    ..failure
                }),
                attempts,
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
        (index, start, outcome): FanOutDone,
    ) -> Result<(), NodeFailure> {
        let times = (start, self.session.started.elapsed() - start);
        let report = |output: &JValue, attempts: Option<u32>, failed: Option<FailureKind>| {
            if self.session.reporting() {
                let outcome = Outcome {
                    node_type: node.kind.type_name(),
                    times,
                    output,
                    attempts,
                    failed,
                };
                self.session
                    .report(&self.site(node, places.of(index)), outcome);
            }
        };
        let kept = match outcome {
            Ok((value, attempts)) => {
                // An undefined output keeps its place as null.
                let value = if value.is_undefined() {
                    JValue::Null
                } else {
                    value
                };
                report(&value, attempts, None);
                Some(value)
            }
            Err(NodeFailure {
                cause: Cause::Failed(failure),
                attempts,
            }) if !interrupting(failure.kind) => {
                let error = error_object(&failure, &node.id, attempts, Some(places.place(index)));
                report(&error, attempts, Some(failure.kind));
                match on_item_error {
                    OnItemError::Fail => {
                        state.failures.push((index, failure, attempts));
                        None
                    }
                    OnItemError::Skip => None,
                    OnItemError::Keep => Some(error),
                }
            }
            // A limit, a cancellation, the deadline: the whole node stops.
            Err(interrupted) => return Err(interrupted),
        };
        if let Some(value) = kept {
            let cap = self.session.limits.max_value_bytes;
            state.bytes = state.bytes.saturating_add(json_size(&value, cap));
            if let Some(limit) = self.session.outputs_too_large(state.bytes) {
                return Err(limit.into());
            }
            state.outputs[index] = Some(value);
        }
        Ok(())
    }
}

/// Ends an item's or branch's span with its outcome (an item cancelled because another failed
/// ends when its future is dropped, unmarked).
fn ended(span: Option<Span>, outcome: &Result<(JValue, Option<u32>), NodeFailure>) {
    let Some(span) = span else { return };
    match outcome {
        Ok((_, Some(attempts)))
        | Err(NodeFailure {
            attempts: Some(attempts),
            ..
        }) => {
            span.set(KeyValue::new("mcpgraph.attempts", i64::from(*attempts)));
        }
        _ => {}
    }
    if let Err(failure) = outcome {
        span.failed(failure.kind_name());
    }
    span.end();
}

/// What a fan-out has gathered so far.
struct FanOut {
    outputs: Vec<Option<JValue>>,
    /// The failed items (with `onItemError: fail`): index, failure, attempts.
    failures: Vec<(usize, Failure, Option<u32>)>,
    /// The size of the outputs kept, as JSON text.
    bytes: u64,
}

/// A finished item: its index, start and outcome.
type FanOutDone = (usize, Duration, Result<(JValue, Option<u32>), NodeFailure>);

/// Where a fan-out's item sits: a map's index, or a parallel's branch.
#[derive(Clone, Copy)]
enum Places<'b> {
    Items,
    Branches(&'b [Branch]),
}

impl Places<'_> {
    /// How a whole-node failure names the item: `item 3`, `branch news`.
    fn name(self, index: usize) -> String {
        match self {
            Places::Items => format!("item {index}"),
            Places::Branches(branches) => format!("branch {}", branches[index].name),
        }
    }

    /// The place of item `index`, for its report and the `self` calls it makes.
    fn of(self, index: usize) -> Place {
        match self {
            Places::Items => Place::Item(index),
            Places::Branches(branches) => Place::Branch(branches[index].name.clone()),
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
