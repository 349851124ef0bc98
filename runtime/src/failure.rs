//! Failures as values: a kind (extensions §1, plus the run's limits and cancellation) travels
//! from where a failure happens — the evaluator, JSON Logic, a downstream client — to the MCP
//! edge, where its text is made once.

use std::fmt;

pub use mcpgraph_compiler::ir::FailureKind;

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
                "tool \"{}\", node \"{id}\" ({node_type}, {}): {}",
                self.tool, self.failure.kind, self.failure
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
            "tool \"t\", node \"n\" (mcp, connection): MCP error -32000: Connection closed\n\nServer stderr output:\nboom\nbang"
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
