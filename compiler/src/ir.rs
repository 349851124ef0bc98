//! The checked graph: what every back end (serve, build, graph!) reads.
//!
//! Names are resolved to indices (`NodeId`, `ServerId`), every expression is already parsed, and
//! nothing here refers to YAML. The IR is serializable so that generated servers embed it already
//! checked, without parsing YAML or expressions at start-up.

pub use crate::expr::Expr;
use crate::logic::Rule;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Graph {
    /// The file the graph came from, as given on the command line (for messages and provenance).
    pub source_name: String,
    pub server: ServerInfo,
    pub limits: Limits,
    pub servers: Vec<Server>,
    pub tools: Vec<Tool>,
}

impl Graph {
    /// Every JSONata expression of the graph (transforms, arguments, map items, questions, the
    /// graph-level vars of switch rules), in source order, to be changed in place.
    pub fn for_each_expr_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        for tool in &mut self.tools {
            tool.for_each_expr_mut(f);
        }
    }

    /// Every switch condition of the graph, in source order, to be changed in place.
    pub fn for_each_condition_mut(&mut self, f: &mut dyn FnMut(&mut Condition)) {
        for node in self.tools.iter_mut().flat_map(|t| t.nodes.iter_mut()) {
            if let NodeKind::Switch { conditions } = &mut node.kind {
                conditions.iter_mut().for_each(&mut *f);
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
    pub title: String,
    pub instructions: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Limits {
    pub max_node_executions: u64,
    pub max_execution_time_ms: u64,
    /// The largest string, array or object (in bytes of its JSON text) a run may build; absent
    /// from the IR of an older mcpgraph, which had no such bound.
    #[serde(default = "default_max_value_bytes")]
    pub max_value_bytes: u64,
}

/// 64 MiB: far above any value a graph passes between nodes, far below what takes a server down.
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 64 << 20;

/// The largest `maxValueBytes` accepted: 4 GiB, beyond which the bound protects nothing.
pub const MAX_MAX_VALUE_BYTES: u64 = 4 << 30;

fn default_max_value_bytes() -> u64 {
    DEFAULT_MAX_VALUE_BYTES
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_node_executions: 1000,
            max_execution_time_ms: 300_000,
            max_value_bytes: DEFAULT_MAX_VALUE_BYTES,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ServerId(pub u32);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Server {
    pub name: String,
    /// Came from an MCP JSON file (`-m`) rather than the graph file: a built server's own `-m`
    /// may replace it at run time (servers of the graph file always win).
    #[serde(default)]
    pub external: bool,
    pub transport: Transport,
    /// Per-request timeout of calls to this server.
    pub timeout_ms: u64,
    /// The server's contract in the graph's lock file, when it has one: a server compares its
    /// live `tools/list` with it on first connection and warns of drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<crate::lock::LockedServer>,
}

pub const DEFAULT_SERVER_TIMEOUT_MS: u64 = 60_000;

/// Strings here may hold `${VAR}` / `${VAR:-default}`: they are expanded at run time, never at
/// compile time, so no secret is baked into a binary.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<String>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// A PEM file of CA certificates trusted besides the system's roots (`caFile`). Written
        /// relative, it was made absolute from the directory of the file it is written in;
        /// absent from the IR of an older mcpgraph, which had no TLS.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ca_file: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub description: String,
    /// As written (every keyword kept), advertised as is.
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub nodes: Vec<Node>,
    pub entry: NodeId,
    pub exit: NodeId,
    pub line: usize,
    pub column: usize,
}

impl Tool {
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    /// Every JSONata expression of the tool, as [`Graph::for_each_expr_mut`] lists them.
    pub fn for_each_expr_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        for node in &mut self.nodes {
            match &mut node.kind {
                NodeKind::Entry | NodeKind::Exit => {}
                NodeKind::Transform(expr) => f(expr),
                NodeKind::Mcp(call) => call.args.for_each_expr_mut(f),
                NodeKind::Switch { conditions } => {
                    for rule in conditions.iter_mut().filter_map(|c| c.rule.as_mut()) {
                        rule.for_each_var_mut(f);
                    }
                }
                NodeKind::Map { items, call, .. } => {
                    f(items);
                    call.args.for_each_expr_mut(f);
                }
                NodeKind::Parallel { branches, .. } => {
                    for branch in branches {
                        branch.call.args.for_each_expr_mut(f);
                    }
                }
                NodeKind::Ask { message, .. } => f(message),
            }
            if let Some(log) = &mut node.log {
                f(&mut log.message);
            }
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    /// Where control goes after this node (for a switch: the default when no condition matches).
    pub next: Option<NodeId>,
    /// Where control goes when the node fails (extensions §3); `None`: a failure ends the run.
    #[serde(default)]
    pub on_error: Option<OnError>,
    /// What the compiler knows of the node's output (docs/types.md); `Unknown` when nothing.
    #[serde(default, skip_serializing_if = "crate::types::Type::is_unknown")]
    pub output_type: crate::types::Type,
    /// A message the node logs after it runs (`log:`), sent to the client and written to
    /// stderr; its expression sees the node's own output as `$.<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<Log>,
    pub line: usize,
    pub column: usize,
}

/// A node's `log:` (docs/semantics.md §22).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Log {
    pub level: LogLevel,
    /// JSONata; its value is sent as the message's `data` (a string as it is).
    pub message: Expr,
}

/// The levels of MCP logging (RFC 5424's, as MCP names them), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub const ALL: [LogLevel; 8] = [
        LogLevel::Debug,
        LogLevel::Info,
        LogLevel::Notice,
        LogLevel::Warning,
        LogLevel::Error,
        LogLevel::Critical,
        LogLevel::Alert,
        LogLevel::Emergency,
    ];

    /// The word MCP and the YAML use.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }

    pub fn parse(word: &str) -> Option<LogLevel> {
        LogLevel::ALL.into_iter().find(|level| level.name() == word)
    }
}

impl Node {
    /// Where control may go after this node, each edge with why: a switch's conditions in
    /// written order, then its `next` (the default) or another node's `next`, then the `onError`
    /// route. This one list serves the reachability and type checks and both drawings (the
    /// `mcpgraph graph` pictures, the studio's), so that none walks the node's fields by hand.
    /// An error route is an edge like any other (extensions §9). A map's per-item call and a
    /// parallel's branches are calls, not nodes, so they give no edges here; the studio draws
    /// them as boxes of its own.
    pub fn successors(&self) -> impl Iterator<Item = Edge> {
        let conditions: &[Condition] = match &self.kind {
            NodeKind::Switch { conditions } => conditions,
            _ => &[],
        };
        let next_kind = match self.kind {
            NodeKind::Switch { .. } => EdgeKind::Default,
            _ => EdgeKind::Next,
        };
        let by_condition = conditions
            .iter()
            .enumerate()
            .map(|(index, condition)| Edge {
                to: condition.target,
                kind: EdgeKind::Condition(index),
            });
        let by_next = self.next.map(|to| Edge {
            to,
            kind: next_kind,
        });
        let by_error = self.on_error.as_ref().map(|route| Edge {
            to: route.next,
            kind: EdgeKind::OnError,
        });
        by_condition.chain(by_next).chain(by_error)
    }
}

/// One edge out of a node (see [`Node::successors`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub to: NodeId,
    pub kind: EdgeKind,
}

/// Why an edge leaves its node: what a drawing labels and styles it by, and what a check names
/// when the edge is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// The `next` of a node other than a switch.
    Next,
    /// The switch's condition at this index of its `conditions`; its rule may be absent (a
    /// rule-less condition, taken whenever it is reached).
    Condition(usize),
    /// A switch's `next`: taken when no condition matches.
    Default,
    /// The node's `onError` route.
    OnError,
}

/// An error route (extensions §3).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OnError {
    pub next: NodeId,
    /// The kinds routed; `None` (the short form): every kind a node can fail with. Limits and
    /// cancellation are never routed.
    pub kinds: Option<Vec<FailureKind>>,
}

impl OnError {
    /// Whether a failure of `kind` takes this route.
    pub fn catches(&self, kind: FailureKind) -> bool {
        !matches!(kind, FailureKind::Limit | FailureKind::Cancelled)
            && self
                .kinds
                .as_ref()
                .is_none_or(|kinds| kinds.contains(&kind))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NodeKind {
    Entry,
    Exit,
    Transform(Expr),
    /// A call of a downstream tool, or of a tool of this graph (`server: self`).
    Mcp(Call),
    Switch {
        conditions: Vec<Condition>,
    },
    /// Fan-out over items (extensions §4).
    Map {
        /// Evaluated once: an array gives its elements, undefined none, anything else one item.
        items: Expr,
        /// The work of each item; its args may read `$item` and `$index`.
        call: Call,
        /// Items in flight at once, 1..=[`MAX_CONCURRENCY`].
        concurrency: u32,
        on_item_error: OnItemError,
    },
    /// Named branches started together (extensions §5), in written order.
    Parallel {
        branches: Vec<Branch>,
        on_item_error: OnItemError,
    },
    /// A question for the person at the client (extensions §7).
    Ask {
        /// Evaluates to the question's text.
        message: Expr,
        /// A flat object schema (checked), sent as the elicitation's `requestedSchema`.
        schema: Value,
        /// `None`: the rest of the run's time.
        timeout_ms: Option<u64>,
    },
}

impl NodeKind {
    pub fn type_name(&self) -> &'static str {
        match self {
            NodeKind::Entry => "entry",
            NodeKind::Exit => "exit",
            NodeKind::Transform(_) => "transform",
            NodeKind::Mcp { .. } => "mcp",
            NodeKind::Switch { .. } => "switch",
            NodeKind::Map { .. } => "map",
            NodeKind::Parallel { .. } => "parallel",
            NodeKind::Ask { .. } => "ask",
        }
    }

    /// The calls this node makes (an mcp node's, a map's per-item call, each branch's).
    pub fn calls(&self) -> Vec<&Call> {
        match self {
            NodeKind::Mcp(call) | NodeKind::Map { call, .. } => vec![call],
            NodeKind::Parallel { branches, .. } => branches.iter().map(|b| &b.call).collect(),
            _ => Vec::new(),
        }
    }

    /// Whether a run of this node may wait (on a downstream server, a callee, the person).
    pub fn awaits(&self) -> bool {
        matches!(
            self,
            NodeKind::Mcp(_)
                | NodeKind::Map { .. }
                | NodeKind::Parallel { .. }
                | NodeKind::Ask { .. }
        )
    }
}

/// The most items a map runs at once.
pub const MAX_CONCURRENCY: u32 = 64;

/// One call: of an mcp node, of each item of a map, of a parallel branch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Call {
    pub target: Target,
    pub tool: String,
    pub args: Template,
    /// Per attempt; overrides the server's `timeoutMs`. `None`: the server's (for `self`: only
    /// the run's deadline).
    pub timeout_ms: Option<u64>,
    pub retry: Option<Retry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Target {
    Server(ServerId),
    /// `server: self`: the tool of this graph at this index of [`Graph::tools`].
    SelfTool(usize),
}

/// A retry policy (extensions §2): exact waits, no jitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retry {
    /// Attempts in all, 1..=10.
    pub max_attempts: u32,
    /// The wait before the second attempt.
    pub delay_ms: u64,
    /// Each later wait is the one before times this (>= 1).
    pub backoff_rate: f64,
    /// The cap on one wait.
    pub max_delay_ms: u64,
    /// The kinds retried: drawn from tool, protocol, timeout, connection.
    pub kinds: Vec<FailureKind>,
}

impl Retry {
    pub const DEFAULT_DELAY_MS: u64 = 100;
    pub const DEFAULT_BACKOFF_RATE: f64 = 2.0;
    pub const DEFAULT_MAX_DELAY_MS: u64 = 10_000;
    pub const MAX_ATTEMPTS: u32 = 10;
    pub const DEFAULT_KINDS: [FailureKind; 3] = [
        FailureKind::Tool,
        FailureKind::Timeout,
        FailureKind::Connection,
    ];
    /// The kinds that may be retried at all.
    pub const RETRYABLE: [FailureKind; 4] = [
        FailureKind::Tool,
        FailureKind::Protocol,
        FailureKind::Timeout,
        FailureKind::Connection,
    ];

    /// The wait before attempt `attempt` (2 for the first retry): `delayMs × backoffRate^(attempt-2)`,
    /// capped at `maxDelayMs`, in whole milliseconds.
    pub fn delay_before(&self, attempt: u32) -> u64 {
        let exponent = attempt.saturating_sub(2) as i32;
        let wait = self.delay_ms as f64 * self.backoff_rate.powi(exponent);
        if wait.is_finite() {
            (wait.round() as u64).min(self.max_delay_ms)
        } else {
            self.max_delay_ms
        }
    }

    pub fn retries(&self, kind: FailureKind) -> bool {
        self.kinds.contains(&kind)
    }
}

/// What a map or parallel does with a failed item or branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum OnItemError {
    /// The first failure fails the node; the items in flight are cancelled.
    #[default]
    Fail,
    /// Failed items are left out.
    Skip,
    /// A failed item's place holds its error object.
    Keep,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Branch {
    pub name: String,
    pub call: Call,
}

/// What kind of failure stopped a node or a run: the kinds of extensions §1, which graphs name in
/// `retry.kinds` and `onError.kinds`, plus the run's limits and cancellation, which they cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FailureKind {
    /// A JSONata or JSON Logic evaluation failed.
    Expression,
    /// The downstream tool answered `isError: true`, or a `server: self` tool failed.
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
    /// `maxNodeExecutions`, `maxExecutionTimeMs` or a size bound was reached.
    Limit,
    /// The client cancelled the call, or the server is shutting down.
    Cancelled,
}

impl FailureKind {
    /// The kinds a graph may name, in the order of extensions §1.
    pub const NAMED: [FailureKind; 9] = [
        FailureKind::Expression,
        FailureKind::Tool,
        FailureKind::Protocol,
        FailureKind::Connection,
        FailureKind::Timeout,
        FailureKind::Schema,
        FailureKind::Declined,
        FailureKind::Unavailable,
        FailureKind::Route,
    ];

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

    /// A kind a graph may name, by its name.
    pub fn named(name: &str) -> Option<FailureKind> {
        FailureKind::NAMED.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Condition {
    /// `None`: a rule-less condition, taken when reached (0.1.23 default).
    pub rule: Option<Rule>,
    pub target: NodeId,
    /// The rule compiled to Rust, when a generated module has it (set by the runtime, never
    /// part of the IR's text).
    #[serde(skip)]
    pub native: Option<crate::expr::NativeRuleFn>,
}

/// The arguments of an `mcp` node: literal JSON with JSONata holes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Template {
    Literal(Value),
    Expr(Expr),
    Object(Vec<(String, Template)>),
    Array(Vec<Template>),
}

impl Template {
    /// Every expression of the template, in order, to be changed in place.
    pub fn for_each_expr_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        match self {
            Template::Literal(_) => {}
            Template::Expr(expr) => f(expr),
            Template::Object(pairs) => pairs.iter_mut().for_each(|(_, t)| t.for_each_expr_mut(f)),
            Template::Array(items) => items.iter_mut().for_each(|t| t.for_each_expr_mut(f)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, kind: NodeKind, next: Option<u32>, on_error: Option<u32>) -> Node {
        Node {
            id: id.to_string(),
            kind,
            next: next.map(NodeId),
            on_error: on_error.map(|to| OnError {
                next: NodeId(to),
                kinds: None,
            }),
            output_type: crate::types::Type::Unknown,
            log: None,
            line: 1,
            column: 1,
        }
    }

    fn edges(node: &Node) -> Vec<(u32, EdgeKind)> {
        node.successors()
            .map(|edge| (edge.to.0, edge.kind))
            .collect()
    }

    /// Every kind of edge, in the order the drawings show them: conditions as written, then
    /// the default or `next`, then the error route.
    #[test]
    fn successors_give_every_edge_kind_in_drawing_order() {
        let switch = node(
            "decide",
            NodeKind::Switch {
                conditions: vec![
                    Condition {
                        rule: Some(Rule::Literal(Value::Bool(true))),
                        target: NodeId(3),
                        native: None,
                    },
                    // A rule-less condition keeps its place and its index.
                    Condition {
                        rule: None,
                        target: NodeId(3),
                        native: None,
                    },
                    Condition {
                        rule: Some(Rule::Literal(Value::Bool(false))),
                        target: NodeId(1),
                        native: None,
                    },
                ],
            },
            Some(2),
            Some(4),
        );
        assert_eq!(
            edges(&switch),
            vec![
                (3, EdgeKind::Condition(0)),
                (3, EdgeKind::Condition(1)),
                (1, EdgeKind::Condition(2)),
                (2, EdgeKind::Default),
                (4, EdgeKind::OnError),
            ]
        );

        // A switch without a `next` has no default edge.
        let no_default = node(
            "decide",
            NodeKind::Switch {
                conditions: vec![Condition {
                    rule: None,
                    target: NodeId(5),
                    native: None,
                }],
            },
            None,
            None,
        );
        assert_eq!(edges(&no_default), vec![(5, EdgeKind::Condition(0))]);

        let ask = node(
            "confirm",
            NodeKind::Ask {
                message: Expr::parse("\"Sure?\"").expect("a JSONata string"),
                schema: Value::Null,
                timeout_ms: None,
            },
            Some(2),
            Some(4),
        );
        assert_eq!(
            edges(&ask),
            vec![(2, EdgeKind::Next), (4, EdgeKind::OnError)]
        );
        assert!(edges(&node("exit", NodeKind::Exit, None, None)).is_empty());
    }
}
