//! The checked graph: what every back end (serve, build, graph!) reads.
//!
//! Names are resolved to indices (`NodeId`, `ServerId`), every expression is already parsed, and
//! nothing here refers to YAML. The IR is serializable so that generated servers embed it already
//! checked, without parsing YAML or expressions at start-up.

use crate::logic::Rule;
use jsonata_core::ast::AstNode;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

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
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_node_executions: 1000,
            max_execution_time_ms: 300_000,
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

/// A parsed JSONata expression. The AST is shared between concurrent calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Expr {
    pub source: String,
    pub ast: Arc<AstNode>,
}

impl Expr {
    /// Parses an expression (with the rewrites of [`crate::fuse`]); the error text is
    /// jsonata-core's message.
    pub fn parse(source: &str) -> Result<Expr, String> {
        jsonata_core::parser::parse(source)
            .map(|ast| Expr {
                source: source.to_string(),
                ast: Arc::new(crate::fuse::fuse(ast)),
            })
            .map_err(|e| readable_parse_error(&e.to_string()))
    }
}

/// jsonata-core names tokens by their Rust variant (`RightBrace`); show the symbol the user typed,
/// as jsonata-js does (`The symbol "}" cannot be used as a unary operator`).
fn readable_parse_error(message: &str) -> String {
    const SYMBOLS: &[(&str, &str)] = &[
        ("LessThanOrEqual", "<="),
        ("GreaterThanOrEqual", ">="),
        ("QuestionQuestion", "??"),
        ("QuestionColon", "?:"),
        ("ColonEqual", ":="),
        ("TildeArrow", "~>"),
        ("LeftParen", "("),
        ("RightParen", ")"),
        ("LeftBracket", "["),
        ("RightBracket", "]"),
        ("LeftBrace", "{"),
        ("RightBrace", "}"),
        ("StarStar", "**"),
        ("NotEqual", "!="),
        ("LessThan", "<"),
        ("GreaterThan", ">"),
        ("Semicolon", ";"),
        ("Ampersand", "&"),
        ("Question", "?"),
        ("Percent", "%"),
        ("DotDot", ".."),
        ("Comma", ","),
        ("Colon", ":"),
        ("Caret", "^"),
        ("Equal", "="),
        ("Slash", "/"),
        ("Minus", "-"),
        ("Plus", "+"),
        ("Star", "*"),
        ("Pipe", "|"),
        ("Hash", "#"),
        ("Dot", "."),
        ("At", "@"),
    ];
    let mut out = String::with_capacity(message.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match SYMBOLS.iter().find(|(name, _)| *name == word.as_str()) {
            Some((_, symbol)) => out.push_str(&format!("\"{symbol}\"")),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in message.chars() {
        if c.is_ascii_alphabetic() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// The arguments of an `mcp` node: literal JSON with JSONata holes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Template {
    Literal(Value),
    Expr(Expr),
    Object(Vec<(String, Template)>),
    Array(Vec<Template>),
}
