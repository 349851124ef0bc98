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
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Node {
    pub id: String,
    pub kind: NodeKind,
    /// Where control goes after this node (for a switch: the default when no condition matches).
    pub next: Option<NodeId>,
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum NodeKind {
    Entry,
    Exit,
    Transform(Expr),
    Mcp {
        server: ServerId,
        tool: String,
        args: Template,
    },
    Switch {
        conditions: Vec<Condition>,
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
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Condition {
    /// `None`: a rule-less condition, taken when reached (0.1.23 default).
    pub rule: Option<Rule>,
    pub target: NodeId,
}

/// The arguments of an `mcp` node: literal JSON with JSONata holes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Template {
    Literal(Value),
    Expr(Expr),
    Object(Vec<(String, Template)>),
    Array(Vec<Template>),
}
