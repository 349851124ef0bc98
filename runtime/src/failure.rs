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

/// A limit of a run that was reached (contract §9, extensions §8): which one, with the numbers its
/// text gives. Its `Display` is the only place a limit's text is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `maxExecutionTimeMs`, with the run's time when it was reached (pauses left out).
    Time { max_ms: u64, elapsed_ms: u128 },
    /// `maxNodeExecutions`, with the count reached.
    NodeExecutions { max: u64, executed: u64 },
    /// `maxValueBytes`: one value would be larger.
    ValueSize {
        max_bytes: u64,
        value: SizedValue,
        bytes: u64,
    },
    /// The outputs a run holds in its history, together: `max_bytes` is
    /// [`RUN_BYTES_PER_VALUE_BYTES`] × `maxValueBytes`.
    RunValues { max_bytes: u64, held: u64 },
}

/// How many times `maxValueBytes` the outputs a run holds in its history may take together.
pub const RUN_BYTES_PER_VALUE_BYTES: u64 = 16;

/// The value a [`Limit::ValueSize`] measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizedValue {
    /// A node's output (or the outputs of a map or parallel so far).
    Output,
    /// An argument of a downstream call.
    Argument,
    /// The result of a size-checked built-in, named as the text shows it (`the result of $pad`).
    BuiltIn(&'static str),
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Execution limit exceeded: ")?;
        match *self {
            Limit::Time { max_ms, elapsed_ms } => write!(
                f,
                "maximum execution time ({max_ms}ms) reached. Elapsed time: {elapsed_ms}ms"
            ),
            Limit::NodeExecutions { max, executed } => write!(
                f,
                "maximum node executions ({max}) reached. Current execution count: {executed}"
            ),
            Limit::ValueSize {
                max_bytes,
                value,
                bytes,
            } => {
                write!(f, "maximum value size ({max_bytes} bytes) reached: ")?;
                match value {
                    SizedValue::Output => write!(f, "the output takes at least {bytes} bytes"),
                    SizedValue::Argument => write!(f, "the argument takes at least {bytes} bytes"),
                    SizedValue::BuiltIn(what) => {
                        write!(f, "{what} would take at least {bytes} bytes")
                    }
                }
            }
            Limit::RunValues { max_bytes, held } => write!(
                f,
                "maximum size of a run's values ({max_bytes} bytes, {RUN_BYTES_PER_VALUE_BYTES} × maxValueBytes) reached: the outputs of its nodes take {held} bytes"
            ),
        }
    }
}

impl From<Limit> for Failure {
    fn from(limit: Limit) -> Failure {
        Failure::new(FailureKind::Limit, limit.to_string())
    }
}

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
