//! Failures as values: a kind (extensions §1, plus the run's limits and cancellation) travels
//! from where a failure happens — the evaluator, JSON Logic, a downstream client — to the MCP
//! edge, where its text is made once.

use std::fmt;

/// What kind of failure stopped a node or a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// A JSONata or JSON Logic evaluation failed.
    Expression,
    /// The downstream tool answered `isError: true`.
    Tool,
    /// The downstream server answered with a JSON-RPC error, or with something mcpgraph cannot
    /// use.
    Protocol,
    /// The downstream server could not be started or reached, or closed during the call.
    Connection,
    /// The server's (or node's) `timeoutMs` elapsed for the call.
    Timeout,
    /// Arguments or result violate a tool's schemas.
    Schema,
    /// An `ask` was declined or cancelled by the person.
    Declined,
    /// An `ask` ran where nobody can answer.
    Unavailable,
    /// A switch matched no condition and has no default: a graph bug, never caught.
    Route,
    /// `maxNodeExecutions` or `maxExecutionTimeMs` was reached.
    Limit,
    /// The client cancelled the call, or the server is shutting down.
    Cancelled,
}

impl FailureKind {
    /// The kind as graphs and error objects name it (`"timeout"`).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Expression => "expression",
            FailureKind::Tool => "tool",
            FailureKind::Protocol => "protocol",
            FailureKind::Connection => "connection",
            FailureKind::Timeout => "timeout",
            FailureKind::Schema => "schema",
            FailureKind::Declined => "declined",
            FailureKind::Unavailable => "unavailable",
            FailureKind::Route => "route",
            FailureKind::Limit => "limit",
            FailureKind::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's (or a downstream call's) failure: its kind, its message, and what the downstream
/// server wrote on stderr meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
    /// The downstream child's stderr lines written during the call, joined by newlines.
    pub stderr_tail: Option<String>,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            message: message.into(),
            stderr_tail: None,
        }
    }

    /// The failure with the stderr `lines` (none: unchanged).
    pub fn with_stderr(mut self, lines: &[String]) -> Failure {
        if !lines.is_empty() {
            self.stderr_tail = Some(lines.join("\n"));
        }
        self
    }
}

impl fmt::Display for Failure {
    /// The message, then the stderr tail under a heading (the original's words).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.stderr_tail {
            Some(tail) => write!(f, "\n\nServer stderr output:\n{tail}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for Failure {}

/// Why a run failed: the tool, the node (none for limits and cancellation, which fall between
/// nodes) and the failure.
#[derive(Debug, Clone, PartialEq)]
pub struct RunError {
    pub tool: String,
    /// The node's id and type name.
    pub node: Option<(String, &'static str)>,
    pub failure: Failure,
}

impl RunError {
    pub fn kind(&self) -> FailureKind {
        self.failure.kind
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.node {
            Some((id, node_type)) => write!(
                f,
                "tool \"{}\", node \"{id}\" ({node_type}): {}",
                self.tool, self.failure
            ),
            None => write!(f, "tool \"{}\": {}", self.tool, self.failure),
        }
    }
}

impl std::error::Error for RunError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_the_originals() {
        let failure = Failure::new(
            FailureKind::Connection,
            "MCP error -32000: Connection closed",
        )
        .with_stderr(&["boom".into(), "bang".into()]);
        let error = RunError {
            tool: "t".into(),
            node: Some(("n".into(), "mcp")),
            failure,
        };
        assert_eq!(
            error.to_string(),
            "tool \"t\", node \"n\" (mcp): MCP error -32000: Connection closed\n\nServer stderr output:\nboom\nbang"
        );
        assert_eq!(error.kind().as_str(), "connection");
        let limit = RunError {
            tool: "t".into(),
            node: None,
            failure: Failure::new(FailureKind::Limit, "x").with_stderr(&[]),
        };
        assert_eq!(limit.to_string(), "tool \"t\": x");
    }
}
