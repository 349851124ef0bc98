//! What observers are told of executed nodes (progress notifications, `--trace`, the studio, the
//! toolkit's history): one [`NodeReport`] per executed node, map item, parallel branch and node
//! of a `server: self` callee. A report says where it happened as data: the node's id, the
//! [`Place`] in it, and the [`Frame`]s of the `self` calls around it. Its label (`fetch[3]`,
//! `both.news`, `call › double.entry`) is only its `Display`, for people: node ids are free
//! text, so a label cannot be read back.

use super::Session;
use crate::failure::FailureKind;
use jsonata_core::value::JValue;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Called after each executed node of a call (progress notifications, `--trace`).
pub type NodeObserver = Arc<dyn Fn(&NodeReport<'_>) + Send + Sync>;

/// Told of each message a node's `log:` makes (docs/semantics.md §22), after it is written to
/// stderr, and of mcpgraph's own messages about a node (a downstream server slow to start):
/// the MCP server sends them to the client as `notifications/message`.
pub type LogSink = Arc<dyn Fn(&LogMessage<'_>) + Send + Sync>;

/// Who says a [`LogMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogSource {
    /// The node's `log:` (logger: the node's label).
    Graph,
    /// mcpgraph, about the node (logger `mcpgraph`; the text names the node).
    Mcpgraph,
}

/// One message of a node's `log:`, or of mcpgraph about a node.
pub struct LogMessage<'a> {
    pub source: LogSource,
    pub level: mcpgraph_compiler::ir::LogLevel,
    /// The node's id (of the callee's tool, for a node of a `server: self` callee).
    pub node: &'a str,
    /// The `server: self` calls the node ran inside, outermost first.
    pub callers: &'a [Frame],
    /// The message's value: a string as it is, or any JSON value.
    pub data: &'a serde_json::Value,
}

impl LogMessage<'_> {
    /// Where it was logged, for people: the node's label (`fetch`, `call › double.entry`).
    pub fn label(&self) -> Label<'_> {
        Label {
            callers: self.callers,
            node: self.node,
            place: &Place::Node,
        }
    }
}

/// One executed node (or map item, or parallel branch, or node of a `self` callee).
pub struct NodeReport<'a> {
    /// 1 for the first report of the call.
    pub index: usize,
    /// The node's id, as the graph writes it (of the callee's tool, for a callee's node).
    pub node: &'a str,
    /// Where in the node: the node itself, a map item or a parallel branch.
    pub place: &'a Place,
    /// The `server: self` calls this node ran inside, outermost first; empty for a node of the
    /// called tool.
    pub callers: &'a [Frame],
    pub node_type: &'static str,
    pub start: Duration,
    pub duration: Duration,
    pub output: &'a JValue,
    /// The attempts made, where the call has a `retry` block.
    pub attempts: Option<u32>,
    /// The failure's kind, when this node (or item) failed and its error object is the output.
    pub failed: Option<FailureKind>,
}

impl NodeReport<'_> {
    /// Whether this is a node of the called tool itself (not an item, a branch or a callee's).
    pub fn is_own_node(&self) -> bool {
        self.callers.is_empty() && *self.place == Place::Node
    }

    /// The report's label for people: `fetch[3]`, `both.news`, `call › double.entry`.
    pub fn label(&self) -> Label<'_> {
        Label {
            callers: self.callers,
            node: self.node,
            place: self.place,
        }
    }
}

/// Where in a node a report or a call happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The node itself.
    Node,
    /// A map's item, by index.
    Item(usize),
    /// A parallel's branch, by name.
    Branch(String),
}

/// A `server: self` call a report happened inside: the calling node (and the item or branch
/// that called) and the tool it called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub node: String,
    pub place: Place,
    pub tool: String,
}

/// A report's label (see [`NodeReport::label`]).
pub struct Label<'a> {
    callers: &'a [Frame],
    node: &'a str,
    place: &'a Place,
}

impl fmt::Display for Label<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for frame in self.callers {
            write!(f, "{}{} › {}.", frame.node, frame.place, frame.tool)?;
        }
        write!(f, "{}{}", self.node, self.place)
    }
}

impl fmt::Display for Place {
    /// What a place adds to a node's id in a label: nothing, `[3]`, `.news`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Node => Ok(()),
            Place::Item(index) => write!(f, "[{index}]"),
            Place::Branch(name) => write!(f, ".{name}"),
        }
    }
}

impl Site<'_> {
    /// Its label, as a report made here has (`fetch[3]`, `call › double.entry`).
    pub(super) fn label(&self) -> Label<'_> {
        Label {
            callers: self.callers,
            node: self.node,
            place: &self.place,
        }
    }
}

/// Where a report happened, as the executor passes it around.
pub(super) struct Site<'s> {
    pub(super) callers: &'s [Frame],
    pub(super) node: &'s str,
    pub(super) place: Place,
}

/// What a node, item or branch did, for its report.
pub(super) struct Outcome<'o> {
    pub(super) node_type: &'static str,
    pub(super) times: (Duration, Duration),
    pub(super) output: &'o JValue,
    pub(super) attempts: Option<u32>,
    pub(super) failed: Option<FailureKind>,
}

impl Session<'_> {
    /// Reports a node, item or branch to the observer and the debugger.
    pub(super) fn report(&self, site: &Site<'_>, outcome: Outcome<'_>) {
        let index = self.reports.get() + 1;
        self.reports.set(index);
        let report = NodeReport {
            index,
            node: site.node,
            place: &site.place,
            callers: site.callers,
            node_type: outcome.node_type,
            start: outcome.times.0,
            duration: outcome.times.1,
            output: outcome.output,
            attempts: outcome.attempts,
            failed: outcome.failed,
        };
        if let Some(observer) = &self.env.on_node {
            observer(&report);
        }
        if let Some(debugger) = &self.env.debugger {
            debugger.tell(&super::debug::DebugEvent::Finished(&report));
        }
    }

    /// Whether anyone is told of executed nodes.
    pub(super) fn reporting(&self) -> bool {
        self.env.on_node.is_some() || self.env.debugger.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_display_of_the_structure() {
        let callers = [
            Frame {
                node: "call".into(),
                place: Place::Node,
                tool: "double".into(),
            },
            Frame {
                node: "fetch[0]".into(),
                place: Place::Item(2),
                tool: "a.b".into(),
            },
        ];
        let label = |callers: &[Frame], node: &str, place: &Place| {
            Label {
                callers,
                node,
                place,
            }
            .to_string()
        };
        assert_eq!(label(&[], "fetch", &Place::Item(3)), "fetch[3]");
        assert_eq!(
            label(&[], "both", &Place::Branch("news".into())),
            "both.news"
        );
        assert_eq!(
            label(&callers, "with space", &Place::Node),
            "call › double.fetch[0][2] › a.b.with space"
        );
    }
}
