//! AST → checked IR: every check of the contract's §2, all reported at once.
//!
//! `check` walks the file; each tool is checked by a `ToolChecker`, whose methods live with
//! the job they do: `structure` (ids, entry and exit, edges, reachability), `expressions`
//! (JSONata, argument templates, references to nodes), `rules` (switch conditions, JSON Logic),
//! `schemas` (tool schemas) and `servers` (transports, the secret lint).

mod contracts;
mod expressions;
mod rules;
mod schemas;
mod servers;
mod structure;
mod types;

pub use servers::{anchor_paths, directory_of, secret_headers, servers};

use crate::ast::{GraphFile, ServerDecl, ToolDecl};
use crate::diagnostics::{Diagnostic, LineIndex, Span, did_you_mean};
use crate::ir::{self, Graph, Limits};
use crate::lock::Lock;
use std::collections::{HashMap, HashSet};

/// Checks the typed file. `extra_servers` come from an MCP JSON file (`-m`); on a name clash the
/// graph file wins. Returns the IR only when there is no error.
pub fn check(
    file: &GraphFile,
    source: &str,
    source_name: &str,
    extra_servers: &[ServerDecl],
    lock: Option<&Lock>,
    diags: &mut Vec<Diagnostic>,
) -> Option<Graph> {
    let errors_before = diags.iter().filter(|d| d.is_error()).count();
    let mut servers = servers(&file.servers, extra_servers, diags);
    // The run-time drift check compares each server's live tools with these.
    if let Some(lock) = lock {
        for server in &mut servers {
            server.lock = lock.servers.get(&server.name).cloned();
        }
    }
    let server_names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();

    // Positions of nodes and tools, for the IR: one index, not a scan per node.
    let lines = LineIndex::new(source);
    // `server: self` targets: the tools in file order, which is the order of `Graph::tools` when
    // the file checks (a duplicate name is an error, so the first of a name is the one).
    let self_tools: Vec<&str> = file
        .tools
        .iter()
        .map(|t| t.name.as_ref().map_or("", |n| n.value.as_str()))
        .collect();
    let mut unlocked_servers = HashSet::new();
    // Their output schemas type the results of `server: self` calls.
    let self_output_schemas: Vec<Option<serde_json::Value>> = file
        .tools
        .iter()
        .map(|t| t.output_schema.as_ref().map(|s| s.to_json()))
        .collect();
    let mut tools = Vec::new();
    let mut seen_tools: HashMap<&str, Span> = HashMap::new();
    for decl in &file.tools {
        if let Some(name) = &decl.name {
            match seen_tools.get(name.value.as_str()) {
                Some(&first) => {
                    diags.push(Diagnostic::duplicate_tool(name.span, first, &name.value))
                }
                None => {
                    seen_tools.insert(name.value.as_str(), name.span);
                }
            }
        }
        let mut checker = ToolChecker {
            source,
            lines: &lines,
            decl,
            server_names: &server_names,
            ids: decl
                .nodes
                .iter()
                .filter_map(|n| n.id.as_ref().map(|i| i.value.as_str()))
                .collect(),
            suggestion_budget: SUGGESTION_BUDGET,
            self_tools: &self_tools,
            entry: None,
            item_scope: false,
            current_node: None,
            written: Vec::new(),
            self_output_schemas: &self_output_schemas,
            lock,
            unlocked_servers: &mut unlocked_servers,
            diags,
        };
        if let Some(tool) = checker.check() {
            tools.push(tool);
        }
    }

    self_call_cycles(file, diags);

    let errors_after = diags.iter().filter(|d| d.is_error()).count();
    if errors_after > errors_before
        || file.server.name.is_none()
        || file.server.version.is_none()
        || file.version.is_none()
    {
        return None;
    }
    let name = file.server.name.as_ref()?.value.clone();
    Some(Graph {
        source_name: source_name.to_string(),
        server: ir::ServerInfo {
            title: file
                .server
                .title
                .as_ref()
                .map_or_else(|| name.clone(), |t| t.value.clone()),
            name,
            version: file.server.version.as_ref()?.value.clone(),
            instructions: file.server.instructions.as_ref().map(|i| i.value.clone()),
        },
        limits: Limits {
            max_node_executions: file
                .max_node_executions
                .as_ref()
                .map_or(Limits::default().max_node_executions, |v| v.value),
            max_execution_time_ms: file
                .max_execution_time_ms
                .as_ref()
                .map_or(Limits::default().max_execution_time_ms, |v| v.value),
            max_value_bytes: file
                .max_value_bytes
                .as_ref()
                .map_or(Limits::default().max_value_bytes, |v| v.value),
        },
        servers,
        tools,
    })
}

/// How many candidate names "did you mean" may compare, per tool. A suggestion costs one
/// comparison per node id, so a tool with thousands of nodes and as many unknown names would
/// otherwise take quadratic time; no hand-written graph comes near this.
const SUGGESTION_BUDGET: usize = 1 << 20;

struct ToolChecker<'a> {
    source: &'a str,
    lines: &'a LineIndex,
    decl: &'a ToolDecl,
    server_names: &'a [&'a str],
    /// The tool's node ids in source order (duplicates included), for suggestions.
    ids: Vec<&'a str>,
    suggestion_budget: usize,
    /// The graph's tool names in file order, for `server: self` (see `check`).
    self_tools: &'a [&'a str],
    /// The tool's entry node, once known (an `onError` may not route to it).
    entry: Option<ir::NodeId>,
    /// Whether the expressions being checked are a map's args, where `$item` and `$index` are
    /// bound.
    item_scope: bool,
    /// The node being checked, for the expressions it holds.
    current_node: Option<ir::NodeId>,
    /// Every expression of the tool that parsed, for the type checks (`types`).
    written: Vec<types::Written>,
    /// The output schemas of the graph's tools, in file order (see `self_tools`).
    self_output_schemas: &'a [Option<serde_json::Value>],
    /// The downstream contracts, when the graph has a lock file.
    lock: Option<&'a Lock>,
    /// The servers already reported missing from the lock (W0703, once per graph).
    unlocked_servers: &'a mut HashSet<String>,
    diags: &'a mut Vec<Diagnostic>,
}

/// E0611 for every cycle of `server: self` calls between the tools (a tool calling itself
/// included), found by a depth-first search without recursion (a hostile file may chain many
/// tools). Each back edge found gives one cycle, printed `a → b → a`.
fn self_call_cycles(file: &GraphFile, diags: &mut Vec<Diagnostic>) {
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, t) in file.tools.iter().enumerate() {
        if let Some(n) = &t.name {
            first.entry(n.value.as_str()).or_insert(i);
        }
    }
    // calls[i]: (callee, where the call names it), in source order.
    let calls: Vec<Vec<(usize, Span)>> = file
        .tools
        .iter()
        .map(|t| {
            t.nodes
                .iter()
                .flat_map(|n| n.self_calls())
                .filter_map(|tool| first.get(tool.value.as_str()).map(|&j| (j, tool.span)))
                .collect()
        })
        .collect();
    let name = |i: usize| {
        file.tools[i]
            .name
            .as_ref()
            .map_or_else(|| "?".to_string(), |n| n.value.clone())
    };
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; calls.len()];
    for start in 0..calls.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // The current path: (tool, index of its next call to follow, the call that led here).
        let mut path: Vec<(usize, usize, Option<Span>)> = vec![(start, 0, None)];
        mark[start] = Mark::OnPath;
        while let Some(&mut (tool, ref mut next, _)) = path.last_mut() {
            let Some(&(callee, span)) = calls[tool].get(*next) else {
                mark[tool] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match mark[callee] {
                Mark::New => {
                    mark[callee] = Mark::OnPath;
                    path.push((callee, 0, Some(span)));
                }
                Mark::OnPath => {
                    let from = path.iter().position(|p| p.0 == callee).unwrap_or(0);
                    let cycle = &path[from..];
                    let mut names: Vec<String> = cycle.iter().map(|p| name(p.0)).collect();
                    names.push(name(callee));
                    // The calls along the cycle: the one leaving each tool of it.
                    let mut spans: Vec<Span> = cycle.iter().skip(1).filter_map(|p| p.2).collect();
                    spans.push(span);
                    let primary = spans[0];
                    let labels = spans
                        .iter()
                        .enumerate()
                        .skip(1)
                        .map(|(k, s)| (*s, format!("`{}` calls `{}`", names[k], names[k + 1])))
                        .collect();
                    diags.push(Diagnostic::self_cycle(primary, &names, labels));
                }
                Mark::Done => {}
            }
        }
    }
}

impl ToolChecker<'_> {
    pub(super) fn tool_name(&self) -> &str {
        self.decl.name.as_ref().map_or("?", |n| n.value.as_str())
    }

    pub(super) fn tool_span(&self) -> Span {
        self.decl.name.as_ref().map_or(self.decl.span, |n| n.span)
    }

    /// 1-based line and column of a byte offset of the graph file.
    pub(super) fn line_col(&self, offset: usize) -> (usize, usize) {
        self.lines.line_col(self.source, offset)
    }

    /// The node id closest to `word`, while the tool's suggestion budget lasts.
    pub(super) fn suggest_node(&mut self, word: &str) -> Option<String> {
        let cost = self.ids.len();
        if cost > self.suggestion_budget {
            return None;
        }
        self.suggestion_budget -= cost;
        did_you_mean(word, self.ids.iter().copied())
    }
}
