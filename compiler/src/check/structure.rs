//! The shape of a tool: node ids, one entry and one exit, `next` edges, reachability.

use super::ToolChecker;
use crate::ast::{NodeDecl, NodeType, SELF_SERVER, Sp};
use crate::diagnostics::{Diagnostic, Span, did_you_mean};
use crate::ir::{
    self, Branch, Call, Node, NodeId, NodeKind, OnError, Retry, ServerId, Target, Template, Tool,
};
use crate::yaml::Yaml;
use std::collections::{HashMap, HashSet, VecDeque};

impl ToolChecker<'_> {
    pub(super) fn check(&mut self) -> Option<Tool> {
        let tool = self.tool_name().to_string();
        let decl = self.decl;

        // Schemas: kept as written; the input schema must describe an object.
        let input_schema = decl.input_schema.as_ref().map(|s| {
            self.object_schema(s, "inputSchema");
            let json = s.to_json();
            self.meta_schema(s, &json, "inputSchema");
            json
        });
        let output_schema = decl.output_schema.as_ref().map(|s| {
            self.object_schema(s, "outputSchema");
            let json = s.to_json();
            self.meta_schema(s, &json, "outputSchema");
            json
        });

        // Node ids → indices; the first definition of an id wins, later ones are errors.
        let mut index: HashMap<&str, NodeId> = HashMap::new();
        let mut first_spans: Vec<Span> = Vec::new();
        for node in &decl.nodes {
            if let Some(id) = &node.id {
                match index.get(id.value.as_str()) {
                    Some(first) => self.diags.push(Diagnostic::duplicate_node(
                        id.span,
                        first_spans[first.index()],
                        &id.value,
                        &tool,
                    )),
                    None => {
                        index.insert(id.value.as_str(), NodeId(index.len() as u32));
                        first_spans.push(id.span);
                    }
                }
            }
        }
        let unique: Vec<&NodeDecl> = {
            let mut seen = HashSet::new();
            decl.nodes
                .iter()
                .filter(|n| n.id.as_ref().is_some_and(|i| seen.insert(i.value.as_str())))
                .collect()
        };

        let entries: Vec<&NodeDecl> = decl
            .nodes
            .iter()
            .filter(|n| n.kind == Some(NodeType::Entry))
            .collect();
        let exits: Vec<&NodeDecl> = decl
            .nodes
            .iter()
            .filter(|n| n.kind == Some(NodeType::Exit))
            .collect();
        let names = |nodes: &[&NodeDecl]| {
            nodes
                .iter()
                .filter_map(|n| n.id.as_ref().map(|i| i.value.clone()))
                .collect::<Vec<_>>()
        };
        match entries.len() {
            0 => self
                .diags
                .push(Diagnostic::entry_count(self.tool_span(), &tool, &[])),
            1 => {}
            _ => {
                let all = names(&entries);
                for extra in &entries[1..] {
                    self.diags
                        .push(Diagnostic::entry_count(node_span(extra), &tool, &all));
                }
            }
        }
        match exits.len() {
            0 => self
                .diags
                .push(Diagnostic::exit_count(self.tool_span(), &tool, &[])),
            1 => {}
            _ => {
                let all = names(&exits);
                for extra in &exits[1..] {
                    self.diags
                        .push(Diagnostic::exit_count(node_span(extra), &tool, &all));
                }
            }
        }

        self.entry = match entries.as_slice() {
            [entry] => entry
                .id
                .as_ref()
                .and_then(|i| index.get(i.value.as_str()).copied()),
            _ => None,
        };
        let mut nodes = Vec::new();
        let mut complete = true;
        for node in &unique {
            match self.node(node, &index) {
                Some(n) => nodes.push(n),
                None => complete = false,
            }
        }

        // Reachability, over the edges that resolved.
        if let ([entry], [exit]) = (entries.as_slice(), exits.as_slice())
            && let (Some(entry_id), Some(exit_id)) = (&entry.id, &exit.id)
            && complete
        {
            let entry_ix = index[entry_id.value.as_str()];
            let exit_ix = index[exit_id.value.as_str()];
            let forward = reach(&nodes, entry_ix, false);
            if !forward.contains(&exit_ix) {
                self.diags.push(Diagnostic::exit_unreachable(
                    node_span(exit),
                    &tool,
                    &exit_id.value,
                    &entry_id.value,
                ));
            } else {
                let backward = reach(&nodes, exit_ix, true);
                for (i, node) in unique.iter().enumerate() {
                    let id = NodeId(i as u32);
                    let name = node.id.as_ref().map_or("?", |n| n.value.as_str());
                    if !forward.contains(&id) {
                        self.diags
                            .push(Diagnostic::unreachable_node(node_span(node), name, &tool));
                    } else if !backward.contains(&id) {
                        self.diags
                            .push(Diagnostic::dead_end(node_span(node), name, &tool));
                    }
                }
            }
            self.types(&mut nodes, exit_ix);
            let (line, column) = self.line_col(self.tool_span().start);
            return Some(Tool {
                name: tool,
                description: decl.description.as_ref()?.value.clone(),
                input_schema: input_schema?,
                output_schema,
                nodes,
                entry: entry_ix,
                exit: exit_ix,
                line,
                column,
            });
        }
        None
    }

    pub(super) fn resolve(
        &mut self,
        from: &str,
        target: &Sp<String>,
        index: &HashMap<&str, NodeId>,
    ) -> Option<NodeId> {
        match index.get(target.value.as_str()) {
            Some(id) => Some(*id),
            None => {
                let tool = self.tool_name().to_string();
                let suggestion = self.suggest_node(&target.value);
                self.diags.push(Diagnostic::unknown_next(
                    target.span,
                    from,
                    &target.value,
                    &tool,
                    suggestion,
                ));
                None
            }
        }
    }

    /// Checks one node; `None` when it could not be fully resolved (already diagnosed).
    pub(super) fn node(&mut self, decl: &NodeDecl, index: &HashMap<&str, NodeId>) -> Option<Node> {
        let id = decl.id.as_ref()?.value.clone();
        self.current_node = index.get(id.as_str()).copied();
        let (line, column) = self.line_col(node_span(decl).start);
        let kind = decl.kind?;
        let next = match (&decl.next, kind) {
            (Some(next), NodeType::Exit) => {
                self.diags.push(Diagnostic::next_on_exit(next.span, &id));
                None
            }
            (Some(next), _) => Some(self.resolve(&id, next, index)),
            (
                None,
                NodeType::Entry
                | NodeType::Transform
                | NodeType::Mcp
                | NodeType::Map
                | NodeType::Parallel
                | NodeType::Ask,
            ) => {
                self.diags
                    .push(Diagnostic::missing_next(node_span(decl), &id, kind.name()));
                Some(None)
            }
            (None, _) => None,
        };
        let kind = match kind {
            NodeType::Entry => Some(NodeKind::Entry),
            NodeType::Exit => Some(NodeKind::Exit),
            NodeType::Transform => {
                let expr = decl.expr.as_ref()?;
                self.expression(expr, "the transform expression", index)
                    .map(NodeKind::Transform)
            }
            NodeType::Mcp => self
                .call(
                    &id,
                    decl.server.as_ref(),
                    decl.tool.as_ref(),
                    decl.args.as_ref(),
                    decl.timeout_ms.as_ref().map(|t| t.value),
                    decl.retry.as_ref(),
                    index,
                )
                .map(NodeKind::Mcp),
            NodeType::Map => {
                let items = decl
                    .items
                    .as_ref()
                    .and_then(|items| self.expression(items, "`items`", index));
                // `$item` and `$index` are bound in a map's args, and only there.
                self.item_scope = true;
                let call = self.call(
                    &id,
                    decl.server.as_ref(),
                    decl.tool.as_ref(),
                    decl.args.as_ref(),
                    decl.timeout_ms.as_ref().map(|t| t.value),
                    decl.retry.as_ref(),
                    index,
                );
                self.item_scope = false;
                Some(NodeKind::Map {
                    items: items?,
                    call: call?,
                    concurrency: decl.concurrency.as_ref().map_or(1, |c| c.value),
                    on_item_error: decl.on_item_error,
                })
            }
            NodeType::Parallel => {
                let mut branches = Vec::new();
                let mut ok = !decl.branches.is_empty();
                for b in &decl.branches {
                    match self.call(
                        &id,
                        b.server.as_ref(),
                        b.tool.as_ref(),
                        b.args.as_ref(),
                        b.timeout_ms.as_ref().map(|t| t.value),
                        b.retry.as_ref(),
                        index,
                    ) {
                        Some(call) => branches.push(Branch {
                            name: b.name.value.clone(),
                            call,
                        }),
                        None => ok = false,
                    }
                }
                ok.then_some(NodeKind::Parallel {
                    branches,
                    on_item_error: decl.on_item_error,
                })
            }
            NodeType::Ask => {
                let message = decl
                    .message
                    .as_ref()
                    .and_then(|m| self.expression(m, "the ask message", index));
                Some(NodeKind::Ask {
                    message: message?,
                    schema: decl.schema.as_ref()?.to_json(),
                    timeout_ms: decl.timeout_ms.as_ref().map(|t| t.value),
                })
            }
            NodeType::Switch => {
                let mut conditions = Vec::new();
                let mut ok = true;
                for cond in &decl.conditions {
                    match self.condition(&id, cond, index) {
                        Some(c) => conditions.push(c),
                        None => ok = false,
                    }
                }
                ok.then_some(NodeKind::Switch { conditions })
            }
        };
        let on_error = match &decl.on_error {
            Some(route) => {
                let target = route.next.as_ref()?;
                Some(OnError {
                    next: self.error_target(&id, target, index)?,
                    kinds: route.kinds.clone(),
                })
            }
            None => None,
        };
        // Evaluated after the node has run: its own output may be read (types.rs).
        let log = match &decl.log {
            Some(log) => {
                let message = self.expression(&log.message, "the log message", index);
                if let Some(written) = self.written.last_mut().filter(|_| message.is_some()) {
                    written.after_node = true;
                }
                Some(message.map(|message| ir::Log {
                    level: log.level,
                    message,
                }))
            }
            None => None,
        };
        let next = match next {
            Some(resolved) => Some(resolved?),
            None => None,
        };
        let log = match log {
            Some(log) => Some(log?),
            None => None,
        };
        Some(Node {
            id,
            kind: kind?,
            next,
            on_error,
            output_type: crate::types::Type::Unknown,
            log,
            line,
            column,
        })
    }
}

impl ToolChecker<'_> {
    /// One call, of an mcp node, of each item of a map, or of a branch; `None` when something
    /// is missing or wrong (already diagnosed).
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of a call live in different places of a node and of a branch"
    )]
    fn call(
        &mut self,
        node: &str,
        server: Option<&Sp<String>>,
        tool: Option<&Sp<String>>,
        args: Option<&Yaml>,
        timeout_ms: Option<u64>,
        retry: Option<&Retry>,
        index: &HashMap<&str, NodeId>,
    ) -> Option<Call> {
        let target = server.and_then(|s| {
            if s.value == SELF_SERVER {
                let tool = tool?;
                return match self.self_tools.iter().position(|t| *t == tool.value) {
                    Some(i) => Some(Target::SelfTool(i)),
                    None => {
                        self.diags.push(Diagnostic::unknown_self_tool(
                            tool.span,
                            node,
                            &tool.value,
                            did_you_mean(&tool.value, self.self_tools.iter().copied()),
                        ));
                        None
                    }
                };
            }
            match self.server_names.iter().position(|n| *n == s.value) {
                Some(i) => Some(Target::Server(ServerId(i as u32))),
                None => {
                    self.diags.push(Diagnostic::unknown_server(
                        s.span,
                        node,
                        &s.value,
                        did_you_mean(&s.value, self.server_names.iter().copied()),
                    ));
                    None
                }
            }
        });
        let template = match args {
            Some(args) => self.template(args, true, index),
            None => Some(Template::Literal(serde_json::Value::Object(
                Default::default(),
            ))),
        };
        let call = Call {
            target: target?,
            tool: tool?.value.clone(),
            args: template?,
            timeout_ms,
            retry: retry.cloned(),
        };
        self.contract(&call, server?, tool?, args);
        Some(call)
    }

    /// The target of an `onError` route: a node of the tool, not the failing node, not the entry.
    fn error_target(
        &mut self,
        from: &str,
        target: &Sp<String>,
        index: &HashMap<&str, NodeId>,
    ) -> Option<NodeId> {
        let tool = self.tool_name().to_string();
        let Some(&id) = index.get(target.value.as_str()) else {
            let suggestion = self.suggest_node(&target.value);
            let mut d = Diagnostic::on_error_target(
                target.span,
                format!(
                    "`onError` of node `{from}` in tool `{tool}` names non-existent node `{}`",
                    target.value
                ),
                format!("no node `{}` in tool `{tool}`", target.value),
            );
            if let Some(s) = suggestion {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            self.diags.push(d);
            return None;
        };
        if target.value == from {
            self.diags.push(
                Diagnostic::on_error_target(
                    target.span,
                    format!("`onError` of node `{from}` routes to the node itself"),
                    "the failing node",
                )
                .with_help("route the failure to another node, which may retry through a `next` edge if that is meant"),
            );
            return None;
        }
        if self.entry == Some(id) {
            self.diags.push(
                Diagnostic::on_error_target(
                    target.span,
                    format!(
                        "`onError` of node `{from}` routes to the entry node `{}`",
                        target.value
                    ),
                    "the entry",
                )
                .with_help(
                    "the entry starts a run and is never a target; route to the node after it",
                ),
            );
            return None;
        }
        Some(id)
    }
}

fn node_span(node: &NodeDecl) -> Span {
    node.id.as_ref().map_or(node.span, |i| i.span)
}

/// Nodes reachable from `start` following edges forward, or backward when `reverse`.
fn reach(nodes: &[Node], start: NodeId, reverse: bool) -> HashSet<NodeId> {
    let mut edges: Vec<Vec<NodeId>> = vec![Vec::new(); nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        // Every kind of edge counts, error routes included (extensions §9).
        for edge in node.successors() {
            if reverse {
                edges[edge.to.index()].push(NodeId(i as u32));
            } else {
                edges[i].push(edge.to);
            }
        }
    }
    let mut seen = HashSet::from([start]);
    let mut queue = VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        for &s in &edges[n.index()] {
            if seen.insert(s) {
                queue.push_back(s);
            }
        }
    }
    seen
}
