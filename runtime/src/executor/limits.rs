//! The run's limits (contract §9, extensions §8): the time limit and the node count, looked at
//! before each node, and the bounds on memory, looked at after each node. Their texts are
//! [`Limit`]'s `Display`.

use super::{Run, Session, cancelled};
use crate::failure::{
    Failure, FailureKind, Limit, RUN_BYTES_PER_VALUE_BYTES, RunError, SizedValue,
};
use crate::value::json_size;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::Node;
use std::time::{Duration, Instant};

/// Every how many nodes of a call its cancellation token is read for certain (see
/// [`Session::cancelled_between_nodes`]).
const CANCEL_EVERY: u64 = 16;

impl Session<'_> {
    pub(super) fn past_deadline(&self) -> bool {
        self.past_deadline_at(self.started.elapsed())
    }

    /// [`Session::past_deadline`] with the clock read at `since_start` (since `started`).
    fn past_deadline_at(&self, since_start: Duration) -> bool {
        since_start.saturating_sub(self.paused.get())
            >= Duration::from_millis(self.limits.max_execution_time_ms)
    }

    /// Whether the call was cancelled or the server is shutting down, looked at before each
    /// node. The shutdown flag is an atomic, read every time. The call's token is a mutex
    /// (tokio-util's tree node), 3 % of a compiled loop's time when locked before every node:
    /// it is read before every [`CANCEL_EVERY`]th node of the call, and as soon as the watchdog,
    /// which looks at it every 10 ms, has tripped the evaluations' token (an atomic). A run
    /// cancelled between nodes so stops within 16 nodes or about 10 ms, whichever comes first; one
    /// not watched (no watchdog thread) reads the token every time.
    pub(super) fn cancelled_between_nodes(&self) -> bool {
        let cancel = &self.env.cancel;
        if cancel.shutting_down() {
            return true;
        }
        let look = !self.watched
            || self.executed.get().is_multiple_of(CANCEL_EVERY)
            || self.evaluation_cancel.is_cancelled();
        look && cancel.is_cancelled()
    }

    /// The run's time so far, pauses in its debugger left out.
    pub(super) fn elapsed(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.paused.get())
    }

    /// When the time limit ends the run (later by the time paused).
    pub(super) fn deadline(&self) -> Instant {
        self.deadline + self.paused.get()
    }

    pub(super) fn time_limit(&self) -> Failure {
        Limit::Time {
            max_ms: self.limits.max_execution_time_ms,
            elapsed_ms: self.elapsed().as_millis(),
        }
        .into()
    }

    pub(super) fn node_limit(&self) -> Option<Failure> {
        let executed = self.executed.get();
        (executed >= self.limits.max_node_executions).then(|| {
            Limit::NodeExecutions {
                max: self.limits.max_node_executions,
                executed,
            }
            .into()
        })
    }

    /// The error when the outputs of a fan-out kept so far take `bytes`: more than
    /// `maxValueBytes`.
    pub(super) fn outputs_too_large(&self, bytes: u64) -> Option<Failure> {
        let max_bytes = self.limits.max_value_bytes;
        (bytes > max_bytes).then(|| {
            Limit::ValueSize {
                max_bytes,
                value: SizedValue::Output,
                bytes,
            }
            .into()
        })
    }
}

impl Run<'_> {
    /// The limits and cancellation, looked at before each node, the clock read at `now` (since
    /// the run started).
    pub(super) fn check_limits(&self, now: Duration) -> Result<(), RunError> {
        if let Some(limit) = self.session.node_limit() {
            return Err(self.between_nodes(limit));
        }
        if self.session.past_deadline_at(now) {
            return Err(self.between_nodes(self.session.time_limit()));
        }
        if self.session.cancelled_between_nodes() {
            return Err(self.between_nodes(cancelled()));
        }
        if let Some(attempt) = &self.attempt
            && self.session.started + now >= attempt.at
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
    pub(super) fn check_size(&self, node: &Node, output: &JValue) -> Result<(), RunError> {
        let cap = self.session.limits.max_value_bytes;
        let bytes = json_size(output, cap);
        let limit = if bytes > cap {
            Limit::ValueSize {
                max_bytes: cap,
                value: SizedValue::Output,
                bytes,
            }
        } else {
            let held = self.held_bytes.get() + bytes;
            self.held_bytes.set(held);
            let total = cap.saturating_mul(RUN_BYTES_PER_VALUE_BYTES);
            if held <= total {
                return Ok(());
            }
            Limit::RunValues {
                max_bytes: total,
                held,
            }
        };
        Err(self.node_error(node, limit.into()))
    }
}
