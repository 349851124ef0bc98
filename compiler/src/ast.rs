//! The typed, spanned AST of a graph file, built from the YAML tree.
//!
//! Typing is done by hand rather than by serde so that one wrong value does not hide the rest of
//! the file: every problem becomes a diagnostic and the field is simply absent from the AST.
//! Embedded JSON (schemas, literal arguments, JSON Logic rules) stays as spanned YAML so later
//! stages can point into it.

use crate::diagnostics::{Diagnostic, Span, did_you_mean};
use crate::ir::{FailureKind, LogLevel, OnItemError, Retry};
use crate::yaml::{Yaml, YamlKind};

mod extensions;

/// A value and where it was written. Equality ignores the span.
#[derive(Debug, Clone)]
pub struct Sp<T> {
    pub value: T,
    pub span: Span,
}

impl<T: PartialEq> PartialEq for Sp<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

#[derive(Debug, Clone, Default)]
pub struct GraphFile {
    pub version: Option<Sp<String>>,
    pub server: ServerInfo,
    pub max_node_executions: Option<Sp<u64>>,
    pub max_execution_time_ms: Option<Sp<u64>>,
    pub max_value_bytes: Option<Sp<u64>>,
    pub servers: Vec<ServerDecl>,
    pub tools: Vec<ToolDecl>,
}

#[derive(Debug, Clone, Default)]
pub struct ServerInfo {
    pub span: Span,
    pub name: Option<Sp<String>>,
    pub version: Option<Sp<String>>,
    pub title: Option<Sp<String>>,
    pub instructions: Option<Sp<String>>,
}

#[derive(Debug, Clone)]
pub struct ServerDecl {
    pub name: Sp<String>,
    pub span: Span,
    pub transport: TransportDecl,
    pub timeout_ms: Option<Sp<u64>>,
}

#[derive(Debug, Clone)]
pub enum TransportDecl {
    Stdio {
        command: Option<Sp<String>>,
        args: Vec<Sp<String>>,
        env: Vec<(Sp<String>, Sp<String>)>,
        cwd: Option<Sp<String>>,
    },
    Http {
        url: Option<Sp<String>>,
        headers: Vec<(Sp<String>, Sp<String>)>,
        /// A PEM file of CA certificates trusted for this server besides the system's roots.
        ca_file: Option<Sp<String>>,
    },
    /// A transport we reject (SSE) or could not type; already diagnosed.
    Invalid,
}

#[derive(Debug, Clone)]
pub struct ToolDecl {
    pub span: Span,
    pub name: Option<Sp<String>>,
    pub description: Option<Sp<String>>,
    pub input_schema: Option<Yaml>,
    pub output_schema: Option<Yaml>,
    pub nodes: Vec<NodeDecl>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeType {
    Entry,
    Exit,
    Transform,
    Mcp,
    Switch,
    Map,
    Parallel,
    Ask,
}

impl NodeType {
    pub const ALL: [(&'static str, NodeType); 8] = [
        ("entry", NodeType::Entry),
        ("exit", NodeType::Exit),
        ("transform", NodeType::Transform),
        ("mcp", NodeType::Mcp),
        ("switch", NodeType::Switch),
        ("map", NodeType::Map),
        ("parallel", NodeType::Parallel),
        ("ask", NodeType::Ask),
    ];
    pub fn name(self) -> &'static str {
        match self {
            NodeType::Entry => "entry",
            NodeType::Exit => "exit",
            NodeType::Transform => "transform",
            NodeType::Mcp => "mcp",
            NodeType::Switch => "switch",
            NodeType::Map => "map",
            NodeType::Parallel => "parallel",
            NodeType::Ask => "ask",
        }
    }
}

#[derive(Debug, Clone)]
pub struct NodeDecl {
    pub span: Span,
    pub id: Option<Sp<String>>,
    pub kind: Option<NodeType>,
    pub next: Option<Sp<String>>,
    /// transform: `transform.expr`.
    pub expr: Option<Sp<String>>,
    /// mcp and map: `server`, `tool`, `args`.
    pub server: Option<Sp<String>>,
    pub tool: Option<Sp<String>>,
    pub args: Option<Yaml>,
    /// switch: `conditions`.
    pub conditions: Vec<ConditionDecl>,
    /// mcp, map (per item attempt) and ask: `timeoutMs`.
    pub timeout_ms: Option<Sp<u64>>,
    /// mcp and map (per item): `retry`, already checked.
    pub retry: Option<Retry>,
    /// mcp, transform, map, parallel, ask: `onError`.
    pub on_error: Option<OnErrorDecl>,
    /// map: `items` (JSONata), `concurrency`; map and parallel: `onItemError`.
    pub items: Option<Sp<String>>,
    pub concurrency: Option<Sp<u32>>,
    pub on_item_error: OnItemError,
    /// parallel: `branches`, in written order.
    pub branches: Vec<BranchDecl>,
    /// ask: `message` (JSONata) and `schema` (checked flat).
    pub message: Option<Sp<String>>,
    pub schema: Option<Yaml>,
    /// any node: `log` (a JSONata message, logged after the node runs).
    pub log: Option<LogDecl>,
}

/// A node's `log:`: its level (info when written as a plain string) and JSONata message.
#[derive(Debug, Clone)]
pub struct LogDecl {
    pub level: LogLevel,
    pub message: Sp<String>,
}

impl NodeDecl {
    /// Whether the node makes a `server: self` call (itself, per item, or in a branch).
    pub fn calls_self(&self) -> bool {
        self.server.as_ref().is_some_and(|s| s.value == SELF_SERVER)
            || self
                .branches
                .iter()
                .any(|b| b.server.as_ref().is_some_and(|s| s.value == SELF_SERVER))
    }

    /// The `server: self` calls of the node: (called tool, where it is named).
    pub fn self_calls(&self) -> Vec<&Sp<String>> {
        let mut out = Vec::new();
        if self.server.as_ref().is_some_and(|s| s.value == SELF_SERVER)
            && let Some(tool) = &self.tool
        {
            out.push(tool);
        }
        for b in &self.branches {
            if b.server.as_ref().is_some_and(|s| s.value == SELF_SERVER)
                && let Some(tool) = &b.tool
            {
                out.push(tool);
            }
        }
        out
    }
}

/// The server name that calls a tool of this graph (extensions §6); no server may take it.
pub const SELF_SERVER: &str = "self";

/// `onError`: the short form (a node id) or the long form `{next, kinds}`.
#[derive(Debug, Clone)]
pub struct OnErrorDecl {
    /// The whole value, for labels.
    pub span: Span,
    pub next: Option<Sp<String>>,
    /// `None`: every kind (short form, or long form without `kinds`). Already checked.
    pub kinds: Option<Vec<FailureKind>>,
}

/// One branch of a parallel node.
#[derive(Debug, Clone)]
pub struct BranchDecl {
    pub name: Sp<String>,
    pub server: Option<Sp<String>>,
    pub tool: Option<Sp<String>>,
    pub args: Option<Yaml>,
    pub timeout_ms: Option<Sp<u64>>,
    pub retry: Option<Retry>,
}

#[derive(Debug, Clone)]
pub struct ConditionDecl {
    pub span: Span,
    /// `None` or a YAML null: a default condition (0.1.23 dialect).
    pub rule: Option<Yaml>,
    /// `target` (0.1.23) or `next` (0.1.32).
    pub target: Option<Sp<String>>,
}

/// Types the YAML tree. Never fails: problems are pushed to `diags`.
pub fn build(root: &Yaml, diags: &mut Vec<Diagnostic>) -> GraphFile {
    let mut file = GraphFile::default();
    let Some(map) = mapping(root, "the graph file", TOP_KEYS, diags) else {
        return file;
    };
    let owner = "the graph file";
    file.version = required_str(root, map, "version", owner, diags);
    match get(map, "server") {
        Some(server) => file.server = server_info(server, diags),
        None => diags.push(Diagnostic::missing_key(key_span(root), "server", owner)),
    }
    if let Some(limits) = get(map, "executionLimits")
        && let Some(lm) = mapping(limits, "executionLimits", LIMIT_KEYS, diags)
    {
        file.max_node_executions = positive_int(lm, "maxNodeExecutions", diags);
        file.max_execution_time_ms = positive_int(lm, "maxExecutionTimeMs", diags);
        file.max_value_bytes = positive_int(lm, "maxValueBytes", diags).filter(|v| {
            let in_range = v.value <= crate::ir::MAX_MAX_VALUE_BYTES;
            if !in_range {
                diags.push(Diagnostic::invalid_value(
                    v.span,
                    format!(
                        "`maxValueBytes` must be at most {} (4 GiB)",
                        crate::ir::MAX_MAX_VALUE_BYTES
                    ),
                    "too large",
                ));
            }
            in_range
        });
    }
    if let Some(servers) = get(map, "mcpServers") {
        file.servers = servers_map(servers, "mcpServers", diags);
    }
    if let Some(tools) = get(map, "tools") {
        match &tools.kind {
            YamlKind::Seq(items) => file.tools = items.iter().map(|t| tool(t, diags)).collect(),
            YamlKind::Null => {}
            _ => diags.push(Diagnostic::wrong_type(
                tools.span,
                "`tools`",
                "a sequence of tools",
                tools.kind_name(),
            )),
        }
    }
    file
}

/// Types the `mcpServers` mapping of a graph file or of an MCP JSON file (`-m`).
pub fn servers_map(servers: &Yaml, what: &str, diags: &mut Vec<Diagnostic>) -> Vec<ServerDecl> {
    let Some(entries) = mapping(servers, what, &[], &mut Vec::new()) else {
        if !matches!(servers.kind, YamlKind::Null) {
            diags.push(Diagnostic::wrong_type(
                servers.span,
                &format!("`{what}`"),
                "a mapping of server names to configurations",
                servers.kind_name(),
            ));
        }
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| {
            if k.key_text() == SELF_SERVER {
                diags.push(Diagnostic::reserved_server_name(k.span));
                return None;
            }
            server_decl(k, v, diags)
        })
        .collect()
}

const TOP_KEYS: &[&str] = &[
    "version",
    "server",
    "executionLimits",
    "mcpServers",
    "tools",
];
const SERVER_KEYS: &[&str] = &["name", "version", "title", "instructions"];
const LIMIT_KEYS: &[&str] = &["maxNodeExecutions", "maxExecutionTimeMs", "maxValueBytes"];
const TOOL_KEYS: &[&str] = &[
    "name",
    "description",
    "inputSchema",
    "outputSchema",
    "nodes",
];
const STDIO_KEYS: &[&str] = &["type", "command", "args", "env", "cwd", "timeoutMs"];
const HTTP_KEYS: &[&str] = &["type", "url", "headers", "caFile", "timeoutMs"];
const CONDITION_KEYS: &[&str] = &["rule", "target", "next"];

fn node_keys(kind: Option<NodeType>) -> &'static [&'static str] {
    match kind {
        Some(NodeType::Entry | NodeType::Exit) => &["id", "type", "next", "log"],
        Some(NodeType::Transform) => &["id", "type", "next", "transform", "onError", "log"],
        Some(NodeType::Mcp) => &[
            "id",
            "type",
            "next",
            "log",
            "server",
            "tool",
            "args",
            "timeoutMs",
            "retry",
            "onError",
        ],
        Some(NodeType::Switch) => &["id", "type", "next", "conditions", "log"],
        // `branches` is known here so that it gets E0606 rather than W0101.
        Some(NodeType::Map) => &[
            "id",
            "type",
            "next",
            "log",
            "items",
            "concurrency",
            "server",
            "tool",
            "args",
            "timeoutMs",
            "retry",
            "onItemError",
            "onError",
            "branches",
        ],
        // `server`, `tool` and `args` likewise (E0606).
        Some(NodeType::Parallel) => &[
            "id",
            "type",
            "next",
            "log",
            "branches",
            "onItemError",
            "onError",
            "server",
            "tool",
            "args",
        ],
        Some(NodeType::Ask) => &[
            "id",
            "type",
            "next",
            "log",
            "message",
            "schema",
            "timeoutMs",
            "onError",
        ],
        None => &[
            "id",
            "type",
            "next",
            "log",
            "transform",
            "server",
            "tool",
            "args",
            "conditions",
            "timeoutMs",
            "retry",
            "onError",
            "items",
            "concurrency",
            "onItemError",
            "branches",
            "message",
            "schema",
        ],
    }
}

fn server_info(node: &Yaml, diags: &mut Vec<Diagnostic>) -> ServerInfo {
    let mut info = ServerInfo {
        span: node.span,
        ..ServerInfo::default()
    };
    let Some(map) = mapping(node, "`server`", SERVER_KEYS, diags) else {
        return info;
    };
    info.name = required_str(node, map, "name", "`server`", diags);
    info.version = required_str(node, map, "version", "`server`", diags);
    info.title = optional_str(map, "title", diags);
    info.instructions = optional_str(map, "instructions", diags);
    info
}

fn server_decl(key: &Yaml, node: &Yaml, diags: &mut Vec<Diagnostic>) -> Option<ServerDecl> {
    let name = Sp {
        value: key.key_text(),
        span: key.span,
    };
    let owner = format!("server `{}`", name.value);
    let kind = node.get("type").and_then(Yaml::as_str).unwrap_or("stdio");
    let keys = match kind {
        "streamableHttp" | "http" | "sse" => HTTP_KEYS,
        _ => STDIO_KEYS,
    };
    let map = mapping(node, &owner, keys, diags)?;
    let timeout_ms = positive_int(map, "timeoutMs", diags);
    let transport = match kind {
        "stdio" => TransportDecl::Stdio {
            command: required_str(node, map, "command", &owner, diags),
            args: get(map, "args")
                .map(|a| string_list(a, "`args`", diags))
                .unwrap_or_default(),
            env: get(map, "env")
                .map(|e| string_map(e, "`env`", diags))
                .unwrap_or_default(),
            cwd: optional_str(map, "cwd", diags),
        },
        "streamableHttp" | "http" => TransportDecl::Http {
            url: required_str(node, map, "url", &owner, diags),
            headers: get(map, "headers")
                .map(|h| string_map(h, "`headers`", diags))
                .unwrap_or_default(),
            ca_file: optional_str(map, "caFile", diags),
        },
        "sse" => {
            let span = get(map, "type").map_or(node.span, |t| t.span);
            diags.push(Diagnostic::unsupported_transport(span, kind));
            TransportDecl::Invalid
        }
        other => {
            let span = get(map, "type").map_or(node.span, |t| t.span);
            let suggestion = did_you_mean(other, ["stdio", "streamableHttp", "http"]);
            let mut d = Diagnostic::invalid_value(
                span,
                format!("unknown server type `{other}`"),
                "expected stdio, streamableHttp or http",
            );
            if let Some(s) = suggestion {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            diags.push(d);
            TransportDecl::Invalid
        }
    };
    Some(ServerDecl {
        name,
        span: node.span,
        transport,
        timeout_ms,
    })
}

fn tool(node: &Yaml, diags: &mut Vec<Diagnostic>) -> ToolDecl {
    let mut decl = ToolDecl {
        span: node.span,
        name: None,
        description: None,
        input_schema: None,
        output_schema: None,
        nodes: Vec::new(),
    };
    let Some(map) = mapping(node, "a tool", TOOL_KEYS, diags) else {
        return decl;
    };
    decl.name = required_str(node, map, "name", "a tool", diags);
    let owner = decl
        .name
        .as_ref()
        .map_or_else(|| "a tool".to_string(), |n| format!("tool `{}`", n.value));
    decl.description = required_str(node, map, "description", &owner, diags);
    decl.input_schema = get(map, "inputSchema").cloned();
    if decl.input_schema.is_none() {
        diags.push(Diagnostic::missing_key(
            key_span(node),
            "inputSchema",
            &owner,
        ));
    }
    decl.output_schema = get(map, "outputSchema").cloned();
    match get(map, "nodes") {
        Some(Yaml {
            kind: YamlKind::Seq(items),
            ..
        }) => decl.nodes = items.iter().map(|n| node_decl(n, diags)).collect(),
        Some(other) => diags.push(Diagnostic::wrong_type(
            other.span,
            "`nodes`",
            "a sequence of nodes",
            other.kind_name(),
        )),
        None => diags.push(Diagnostic::missing_key(key_span(node), "nodes", &owner)),
    }
    decl
}

fn node_decl(node: &Yaml, diags: &mut Vec<Diagnostic>) -> NodeDecl {
    let mut decl = NodeDecl {
        span: node.span,
        id: None,
        kind: None,
        next: None,
        expr: None,
        server: None,
        tool: None,
        args: None,
        conditions: Vec::new(),
        timeout_ms: None,
        retry: None,
        on_error: None,
        items: None,
        concurrency: None,
        on_item_error: OnItemError::Fail,
        branches: Vec::new(),
        message: None,
        schema: None,
        log: None,
    };
    let Some(raw) = node.as_map() else {
        diags.push(Diagnostic::wrong_type(
            node.span,
            "a node",
            "a mapping",
            node.kind_name(),
        ));
        return decl;
    };
    let id = optional_str(raw, "id", diags);
    let owner = id
        .as_ref()
        .map_or_else(|| "a node".to_string(), |i| format!("node `{}`", i.value));
    if id.is_none() && get(raw, "id").is_none() {
        diags.push(Diagnostic::missing_key(key_span(node), "id", "a node"));
    }
    decl.id = id;
    match get(raw, "type") {
        None => diags.push(Diagnostic::missing_key(key_span(node), "type", &owner)),
        Some(t) => match t.as_str() {
            Some(name) => match NodeType::ALL.iter().find(|(n, _)| *n == name) {
                Some((_, kind)) => decl.kind = Some(*kind),
                None => diags.push(Diagnostic::unknown_node_type(
                    t.span,
                    name,
                    did_you_mean(name, NodeType::ALL.iter().map(|(n, _)| *n)),
                )),
            },
            None => diags.push(Diagnostic::wrong_type(
                t.span,
                "`type`",
                "a string",
                t.kind_name(),
            )),
        },
    }
    // Unknown keys are judged against the keys of the node's own type; `onError`, `retry` and
    // `timeoutMs` where the type does not take them are errors (extensions::misplaced).
    let known = node_keys(decl.kind);
    for (key, _) in raw {
        let text = key.key_text();
        if known.contains(&text.as_str())
            || decl
                .kind
                .is_some_and(|kind| extensions::misplaced(key, kind, &owner, diags))
        {
            continue;
        }
        diags.push(extensions::unknown_key(key.span, &text, &owner, known));
    }
    decl.next = optional_str(raw, "next", diags);
    match decl.kind {
        Some(NodeType::Transform) => match get(raw, "transform") {
            Some(t) => {
                if let Some(tm) = mapping(t, "`transform`", &["expr"], diags) {
                    decl.expr = required_str(t, tm, "expr", "`transform`", diags);
                }
            }
            None => diags.push(Diagnostic::missing_key(key_span(node), "transform", &owner)),
        },
        Some(NodeType::Mcp) => {
            decl.server = required_str(node, raw, "server", &owner, diags);
            decl.tool = required_str(node, raw, "tool", &owner, diags);
            decl.args = args(raw, diags);
        }
        Some(NodeType::Switch) => match get(raw, "conditions") {
            Some(Yaml {
                kind: YamlKind::Seq(items),
                ..
            }) => decl.conditions = items.iter().filter_map(|c| condition(c, diags)).collect(),
            Some(other) => diags.push(Diagnostic::wrong_type(
                other.span,
                "`conditions`",
                "a sequence",
                other.kind_name(),
            )),
            None => diags.push(Diagnostic::missing_key(
                key_span(node),
                "conditions",
                &owner,
            )),
        },
        _ => {}
    }
    if let Some(kind) = decl.kind {
        extensions::node(&mut decl, node, raw, kind, &owner, diags);
    }
    decl
}

/// `args` of a call: a mapping (or null, no arguments).
fn args(map: &[(Yaml, Yaml)], diags: &mut Vec<Diagnostic>) -> Option<Yaml> {
    let args = get(map, "args")?;
    if !matches!(args.kind, YamlKind::Map(_) | YamlKind::Null) {
        diags.push(Diagnostic::wrong_type(
            args.span,
            "`args`",
            "a mapping",
            args.kind_name(),
        ));
        return None;
    }
    Some(args.clone())
}

fn condition(node: &Yaml, diags: &mut Vec<Diagnostic>) -> Option<ConditionDecl> {
    let map = mapping(node, "a switch condition", CONDITION_KEYS, diags)?;
    let target = optional_str(map, "target", diags);
    let next = optional_str(map, "next", diags);
    let target = match (target, next) {
        (Some(t), None) | (None, Some(t)) => Some(t),
        (Some(t), Some(_)) => {
            diags.push(Diagnostic::condition_target(
                node.span,
                "a switch condition has both `target` and `next`; write one",
            ));
            Some(t)
        }
        (None, None) => {
            if get(map, "target").is_none() && get(map, "next").is_none() {
                diags.push(Diagnostic::condition_target(
                    node.span,
                    "a switch condition has neither `target` nor `next`",
                ));
            }
            None
        }
    };
    let rule = get(map, "rule")
        .filter(|r| !matches!(r.kind, YamlKind::Null))
        .cloned();
    Some(ConditionDecl {
        span: node.span,
        rule,
        target,
    })
}

// ---- helpers ---------------------------------------------------------------------------------

fn get<'a>(map: &'a [(Yaml, Yaml)], key: &str) -> Option<&'a Yaml> {
    map.iter()
        .find(|(k, _)| k.as_str() == Some(key))
        .map(|(_, v)| v)
}

/// Where to point when a key is missing from a mapping: its first line.
fn key_span(node: &Yaml) -> Span {
    match &node.kind {
        YamlKind::Map(entries) => entries.first().map_or(node.span, |(k, _)| k.span),
        _ => node.span,
    }
}

/// The entries of a mapping, warning about keys not in `known` (when `known` is not empty).
fn mapping<'a>(
    node: &'a Yaml,
    what: &str,
    known: &[&str],
    diags: &mut Vec<Diagnostic>,
) -> Option<&'a [(Yaml, Yaml)]> {
    let Some(entries) = node.as_map() else {
        diags.push(Diagnostic::wrong_type(
            node.span,
            what,
            "a mapping",
            node.kind_name(),
        ));
        return None;
    };
    if !known.is_empty() {
        for (key, _) in entries {
            let text = key.key_text();
            if !known.contains(&text.as_str()) {
                diags.push(Diagnostic::unknown_key(
                    key.span,
                    &text,
                    what,
                    did_you_mean(&text, known.iter().copied()),
                ));
            }
        }
    }
    Some(entries)
}

fn string_value(value: &Yaml, key: &str, diags: &mut Vec<Diagnostic>) -> Option<Sp<String>> {
    match &value.kind {
        YamlKind::Str(s) => Some(Sp {
            value: s.clone(),
            span: value.span,
        }),
        _ => {
            diags.push(Diagnostic::wrong_type(
                value.span,
                &format!("`{key}`"),
                "a string",
                value.kind_name(),
            ));
            None
        }
    }
}

fn required_str(
    owner_node: &Yaml,
    map: &[(Yaml, Yaml)],
    key: &str,
    owner: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Sp<String>> {
    match get(map, key) {
        Some(v) => string_value(v, key, diags),
        None => {
            diags.push(Diagnostic::missing_key(key_span(owner_node), key, owner));
            None
        }
    }
}

fn optional_str(
    map: &[(Yaml, Yaml)],
    key: &str,
    diags: &mut Vec<Diagnostic>,
) -> Option<Sp<String>> {
    get(map, key).and_then(|v| string_value(v, key, diags))
}

fn positive_int(map: &[(Yaml, Yaml)], key: &str, diags: &mut Vec<Diagnostic>) -> Option<Sp<u64>> {
    let value = get(map, key)?;
    match value.kind {
        YamlKind::Int(i) if i > 0 => Some(Sp {
            value: i as u64,
            span: value.span,
        }),
        YamlKind::Int(_) => {
            diags.push(Diagnostic::invalid_value(
                value.span,
                format!("`{key}` must be an integer greater than 0"),
                "not greater than 0",
            ));
            None
        }
        YamlKind::Float(f) if f > 0.0 && f.fract() == 0.0 && f < 9.0e15 => Some(Sp {
            value: f as u64,
            span: value.span,
        }),
        YamlKind::Float(_) => {
            diags.push(Diagnostic::invalid_value(
                value.span,
                format!("`{key}` must be an integer greater than 0"),
                "not a positive integer",
            ));
            None
        }
        _ => {
            diags.push(Diagnostic::wrong_type(
                value.span,
                &format!("`{key}`"),
                "an integer",
                value.kind_name(),
            ));
            None
        }
    }
}

fn string_list(node: &Yaml, what: &str, diags: &mut Vec<Diagnostic>) -> Vec<Sp<String>> {
    match &node.kind {
        YamlKind::Seq(items) => items
            .iter()
            .filter_map(|i| string_value(i, "an argument", diags))
            .collect(),
        YamlKind::Null => Vec::new(),
        _ => {
            diags.push(Diagnostic::wrong_type(
                node.span,
                what,
                "a sequence of strings",
                node.kind_name(),
            ));
            Vec::new()
        }
    }
}

fn string_map(
    node: &Yaml,
    what: &str,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(Sp<String>, Sp<String>)> {
    let Some(entries) = mapping(node, what, &[], diags) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| {
            let key = Sp {
                value: k.key_text(),
                span: k.span,
            };
            // Numbers and booleans are fine as environment values; write them as YAML shows them.
            let value = match &v.kind {
                YamlKind::Str(s) => s.clone(),
                YamlKind::Int(_) | YamlKind::Float(_) | YamlKind::Bool(_) => v.key_text(),
                _ => {
                    diags.push(Diagnostic::wrong_type(
                        v.span,
                        &format!("`{}`", key.value),
                        "a string",
                        v.kind_name(),
                    ));
                    return None;
                }
            };
            Some((
                key,
                Sp {
                    value,
                    span: v.span,
                },
            ))
        })
        .collect()
}
