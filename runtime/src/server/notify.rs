//! A call's notifications to its client (docs/semantics.md §22): its progress, one per
//! executed node when the call carries a progress token, and its log messages at or above its
//! level (client_log.rs), written in order by one task and flushed before the result.

use crate::client_log::{self, Allowance};
use crate::engine::CallError;
use crate::executor::debug::{DebugEvent, Debugger};
use crate::executor::{LogMessage, LogSink, LogSource, NodeObserver, NodeReport};
use mcpgraph_compiler::ir::LogLevel;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::Value;
use std::sync::{Arc, Mutex};

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The longest a result waits for its notifications to be written (a client that stopped
/// reading would otherwise hold the result forever).
const NOTIFICATION_FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the forwarder of a call's notifications is asked to do, in order.
enum Outgoing {
    Progress(ProgressNotificationParam),
    #[expect(
        deprecated,
        reason = "rmcp marks MCP logging deprecated (SEP-2577); clients use it"
    )]
    Log(rmcp::model::LoggingMessageNotificationParam),
    /// Answer once every notification before this one was written and flushed.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// A call's notifications to its client, written in order by one task: one
/// `notifications/progress` per executed node when the call carries a progress token, and the
/// `notifications/message`s at or above its log level (client_log.rs). rmcp writes
/// notifications and responses on separate paths, so order is kept here: each notification
/// returns once its line is flushed, and the call's result waits for [`Notifier::flush`].
pub(super) struct Notifier {
    queue: Queue,
    progress: Option<rmcp::model::ProgressToken>,
    logs: Option<CallLogs>,
}

/// The log messages of one call: its level and allowance.
#[derive(Clone)]
struct CallLogs {
    threshold: LogLevel,
    allowance: Arc<Mutex<Allowance>>,
    queue: Queue,
}

/// The queue to a call's one notification writer, started with the first notification: a call
/// that sends none costs no task.
#[derive(Clone)]
struct Queue(Arc<QueueInner>);

struct QueueInner {
    peer: rmcp::Peer<RoleServer>,
    /// The runtime the call came in on (the run may report from a worker's or the blocking pool).
    runtime: tokio::runtime::Handle,
    sender: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<Outgoing>>,
}

impl Queue {
    fn send(&self, item: Outgoing) {
        let sender = self.0.sender.get_or_init(|| {
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            self.0.runtime.spawn(write(self.0.peer.clone(), receiver));
            sender
        });
        let _ = sender.send(item);
    }

    fn started(&self) -> bool {
        self.0.sender.get().is_some()
    }
}

/// Writes a call's notifications in order; each returns once its line is flushed.
async fn write(
    peer: rmcp::Peer<RoleServer>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<Outgoing>,
) {
    let mut open = true;
    while let Some(item) = queue.recv().await {
        match item {
            Outgoing::Progress(param) if open => {
                open = peer.notify_progress(param).await.is_ok();
            }
            #[expect(deprecated, reason = "rmcp marks MCP logging deprecated (SEP-2577)")]
            Outgoing::Log(param) if open => {
                open = peer.notify_logging_message(param).await.is_ok();
            }
            Outgoing::Progress(_) | Outgoing::Log(_) => {}
            Outgoing::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

impl CallLogs {
    fn wants(&self, level: LogLevel) -> bool {
        level >= self.threshold
    }

    /// Queues a message at `level` if the call's level and allowance let it through.
    fn send(&self, level: LogLevel, logger: &str, data: Value) {
        if self.wants(level) && lock(&self.allowance).take() {
            self.queue_message(level, logger, data);
        }
    }

    /// Queues a message, whatever the level and the allowance.
    #[expect(
        deprecated,
        reason = "rmcp marks MCP logging deprecated (SEP-2577); clients use it"
    )]
    fn queue_message(&self, level: LogLevel, logger: &str, data: Value) {
        let param =
            rmcp::model::LoggingMessageNotificationParam::new(client_log::to_mcp(level), data)
                .with_logger(crate::metrics::client_chosen(logger).to_string());
        self.queue.send(Outgoing::Log(param));
    }

    /// What a node's report tells at info (a failure caught, attempts) and debug (the caught
    /// failure's text, the node's end). The text is kept for debug: a failure the graph caught
    /// is not in the call's result, and a downstream server's text may carry data.
    fn report(&self, report: &NodeReport<'_>) {
        let label = report.label();
        if let Some(kind) = report.failed {
            self.send(
                LogLevel::Info,
                "mcpgraph",
                Value::String(format!(
                    "{label} ({}) failed ({}) and went on",
                    report.node_type,
                    kind.as_str()
                )),
            );
            if self.wants(LogLevel::Debug) {
                let message = report
                    .output
                    .as_object()
                    .and_then(|o| o.get("error"))
                    .and_then(|e| e.as_object())
                    .and_then(|e| e.get("message"))
                    .and_then(|m| m.as_str())
                    .unwrap_or_default();
                self.send(
                    LogLevel::Debug,
                    "mcpgraph",
                    Value::String(format!("{label} failed: {message}")),
                );
            }
        }
        if let Some(attempts) = report.attempts.filter(|a| *a > 1) {
            self.send(
                LogLevel::Info,
                "mcpgraph",
                Value::String(format!(
                    "{label} ({}) made {attempts} attempts",
                    report.node_type
                )),
            );
        }
        if self.wants(LogLevel::Debug) {
            self.send(
                LogLevel::Debug,
                "mcpgraph",
                Value::String(format!(
                    "{label} ({}) ended after {}",
                    report.node_type,
                    client_log::millis(report.duration)
                )),
            );
        }
    }
}

impl Notifier {
    /// The notifier of a call, when it has anything to send: a progress token, or a log level
    /// (`None`: none is sent).
    pub(super) fn for_call(
        context: &RequestContext<RoleServer>,
        level: Option<LogLevel>,
    ) -> Option<Notifier> {
        let progress = context.meta.get_progress_token();
        if progress.is_none() && level.is_none() {
            return None;
        }
        let queue = Queue(Arc::new(QueueInner {
            peer: context.peer.clone(),
            runtime: tokio::runtime::Handle::current(),
            sender: std::sync::OnceLock::new(),
        }));
        let logs = level.map(|threshold| CallLogs {
            threshold,
            allowance: Arc::new(Mutex::new(Allowance::default())),
            queue: queue.clone(),
        });
        Some(Notifier {
            queue,
            progress,
            logs,
        })
    }

    /// Told of each executed node: its progress notification and what it logs, at info when
    /// the tool `reports_info` (a node catches failures or waits) and at debug. None when it
    /// would send nothing, so that the run may go inline (placement.rs).
    pub(super) fn observer(&self, reports_info: bool) -> Option<NodeObserver> {
        let progress = self
            .progress
            .clone()
            .map(|token| (token, self.queue.clone()));
        let logs = self.logs.clone().filter(|logs| {
            logs.wants(LogLevel::Debug) || (reports_info && logs.wants(LogLevel::Info))
        });
        if progress.is_none() && logs.is_none() {
            return None;
        }
        Some(Arc::new(move |report: &NodeReport<'_>| {
            if let Some((token, queue)) = &progress {
                let param = ProgressNotificationParam::new(token.clone(), report.index as f64)
                    .with_message(format!("{} ({})", report.label(), report.node_type));
                queue.send(Outgoing::Progress(param));
            }
            if let Some(logs) = &logs {
                logs.report(report);
            }
        }))
    }

    /// At debug, a watching debugger: it is told when each node of the called tool starts.
    pub(super) fn debugger(&self) -> Option<Debugger> {
        let logs = self.logs.clone().filter(|l| l.wants(LogLevel::Debug))?;
        Some(Debugger::watching(move |event| {
            if let DebugEvent::Started {
                node, node_type, ..
            } = event
            {
                logs.send(
                    LogLevel::Debug,
                    "mcpgraph",
                    Value::String(format!("{node} ({node_type}) started")),
                );
            }
        }))
    }

    /// The graph's own `log:` messages, at their levels.
    pub(super) fn log_sink(&self) -> Option<LogSink> {
        let logs = self.logs.clone()?;
        Some(Arc::new(move |message: &LogMessage<'_>| {
            if logs.wants(message.level) {
                let logger = match message.source {
                    LogSource::Graph => message.label().to_string(),
                    LogSource::Mcpgraph => "mcpgraph".to_string(),
                };
                logs.send(message.level, &logger, message.data.clone());
            }
        }))
    }

    /// The call's failure, at error.
    pub(super) fn call_failed(&self, tool: &str, error: &CallError) {
        if let Some(logs) = &self.logs {
            logs.send(
                LogLevel::Error,
                "mcpgraph",
                Value::String(format!(
                    "tools/call {} failed ({}): {}",
                    crate::metrics::client_chosen(tool),
                    error.kind_name(),
                    super::failure_text(error)
                )),
            );
        }
    }

    /// Returns once every notification queued so far was written and flushed (or the limit
    /// passed, or the connection closed); first, the count of messages the allowance refused.
    pub(super) async fn flush(self) {
        if let Some(logs) = &self.logs {
            let dropped = lock(&logs.allowance).dropped;
            // Past the allowance itself: the count is what the client is owed.
            if dropped > 0 && logs.wants(LogLevel::Warning) {
                logs.queue_message(
                    LogLevel::Warning,
                    "mcpgraph",
                    Value::String(format!(
                        "{dropped} log messages of this call were not sent (over a burst of {0}, then {0} a second)",
                        client_log::PER_SECOND
                    )),
                );
            }
        }
        if !self.queue.started() {
            return;
        }
        let (done, wait) = tokio::sync::oneshot::channel();
        self.queue.send(Outgoing::Flush(done));
        let _ = tokio::time::timeout(NOTIFICATION_FLUSH_LIMIT, wait).await;
    }
}
