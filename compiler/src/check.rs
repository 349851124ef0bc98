//! AST → checked IR: every check of the contract's §2, all reported at once.

use crate::ast::{
    ConditionDecl, GraphFile, NodeDecl, NodeType, ServerDecl, Sp, ToolDecl, TransportDecl,
};
use crate::diagnostics::{Diagnostic, Span, did_you_mean, line_col};
use crate::expr::{Expr, Reference, error_position, inner_span, references};
use crate::ir::{
    self, Condition, Graph, Limits, Node, NodeId, NodeKind, Server, ServerId, Template, Tool,
    Transport,
};
use crate::logic::{self, PathStep, Problem, VarMode};
use crate::yaml::{Yaml, YamlKind};
use jsonata_core::ast::AstNode;
use std::collections::{HashMap, HashSet, VecDeque};

/// Checks the typed file. `extra_servers` come from an MCP JSON file (`-m`); on a name clash the
/// graph file wins. Returns the IR only when there is no error.
pub fn check(
    file: &GraphFile,
    source: &str,
    source_name: &str,
    extra_servers: &[ServerDecl],
    diags: &mut Vec<Diagnostic>,
) -> Option<Graph> {
    let errors_before = diags.iter().filter(|d| d.is_error()).count();
    let servers = servers(&file.servers, extra_servers, diags);
    let server_names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();

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
            decl,
            server_names: &server_names,
            diags,
        };
        if let Some(tool) = checker.check() {
            tools.push(tool);
        }
    }

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
        },
        servers,
        tools,
    })
}

/// The servers of the graph file, then those of the MCP file whose names the graph does not use.
pub fn servers(
    own: &[ServerDecl],
    extra: &[ServerDecl],
    diags: &mut Vec<Diagnostic>,
) -> Vec<Server> {
    let mut out: Vec<Server> = Vec::new();
    let own_names: HashSet<&str> = own.iter().map(|s| s.name.value.as_str()).collect();
    let chosen = own.iter().map(|d| (d, false)).chain(
        extra
            .iter()
            .filter(|s| !own_names.contains(s.name.value.as_str()))
            .map(|d| (d, true)),
    );
    for (decl, external) in chosen {
        let transport = match &decl.transport {
            TransportDecl::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let Some(command) = command else { continue };
                Transport::Stdio {
                    command: command.value.clone(),
                    args: args.iter().map(|a| a.value.clone()).collect(),
                    env: env
                        .iter()
                        .map(|(k, v)| (k.value.clone(), v.value.clone()))
                        .collect(),
                    cwd: cwd.as_ref().map(|c| c.value.clone()),
                }
            }
            TransportDecl::Http { url, headers } => {
                // The MCP file's servers are linted by the caller, which knows that file.
                if !external {
                    diags.extend(secret_headers(std::slice::from_ref(decl)));
                }
                let Some(url) = url else { continue };
                Transport::Http {
                    url: url.value.clone(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.value.clone(), v.value.clone()))
                        .collect(),
                }
            }
            TransportDecl::Invalid => continue,
        };
        out.push(Server {
            name: decl.name.value.clone(),
            external,
            transport,
            timeout_ms: decl
                .timeout_ms
                .as_ref()
                .map_or(ir::DEFAULT_SERVER_TIMEOUT_MS, |t| t.value),
        });
    }
    out
}

/// W0102 for every header of `decls` whose literal value looks like a secret.
pub fn secret_headers(decls: &[ServerDecl]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for decl in decls {
        if let TransportDecl::Http { headers, .. } = &decl.transport {
            for (name, value) in headers {
                if looks_secret(&name.value) && !value.value.contains("${") {
                    out.push(Diagnostic::secret_header(value.span, &name.value));
                }
            }
        }
    }
    out
}

fn looks_secret(header: &str) -> bool {
    let h = header.to_ascii_lowercase();
    h == "authorization" || h.contains("token") || h.contains("key") || h.contains("secret")
}

struct ToolChecker<'a> {
    source: &'a str,
    decl: &'a ToolDecl,
    server_names: &'a [&'a str],
    diags: &'a mut Vec<Diagnostic>,
}

impl ToolChecker<'_> {
    fn tool_name(&self) -> &str {
        self.decl.name.as_ref().map_or("?", |n| n.value.as_str())
    }

    fn tool_span(&self) -> Span {
        self.decl.name.as_ref().map_or(self.decl.span, |n| n.span)
    }

    fn check(&mut self) -> Option<Tool> {
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
        let ids: Vec<&str> = decl
            .nodes
            .iter()
            .filter_map(|n| n.id.as_ref().map(|i| i.value.as_str()))
            .collect();
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
                for extra in &entries[1..] {
                    self.diags.push(Diagnostic::entry_count(
                        node_span(extra),
                        &tool,
                        &names(&entries),
                    ));
                }
            }
        }
        match exits.len() {
            0 => self
                .diags
                .push(Diagnostic::exit_count(self.tool_span(), &tool, &[])),
            1 => {}
            _ => {
                for extra in &exits[1..] {
                    self.diags.push(Diagnostic::exit_count(
                        node_span(extra),
                        &tool,
                        &names(&exits),
                    ));
                }
            }
        }

        let mut nodes = Vec::new();
        let mut complete = true;
        for node in &unique {
            match self.node(node, &index, &ids) {
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
            let line_of = |span: Span| line_col(self.source, span.start);
            let (line, column) = line_of(self.tool_span());
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

    fn object_schema(&mut self, schema: &Yaml, which: &str) {
        let ok = schema.get("type").and_then(Yaml::as_str) == Some("object");
        if !ok {
            let span = schema.get("type").map_or(schema.span, |t| t.span);
            self.diags.push(Diagnostic::schema_not_object(span, which));
        }
    }

    /// Every violation of the JSON Schema meta-schema (the draft the schema names, else
    /// 2020-12), each pointing at the offending value in the YAML.
    fn meta_schema(&mut self, schema: &Yaml, json: &serde_json::Value, which: &str) {
        let tool = self.tool_name().to_string();
        let validator = match jsonschema::meta::validator_for(json) {
            Ok(v) => v,
            // An unknown `$schema`: nothing can be checked (and nothing is fetched).
            Err(e) => {
                let span = schema.get("$schema").map_or(schema.span, |s| s.span);
                self.diags.push(Diagnostic::invalid_schema(
                    span,
                    which,
                    &tool,
                    "/$schema",
                    &e.to_string(),
                ));
                return;
            }
        };
        for error in validator.iter_errors(json) {
            let pointer = error.instance_path().as_str();
            let span = locate_pointer(schema, pointer).span;
            let problem = schema_problem(&error);
            self.diags.push(Diagnostic::invalid_schema(
                span, which, &tool, pointer, &problem,
            ));
        }
    }

    fn resolve(
        &mut self,
        from: &str,
        target: &Sp<String>,
        index: &HashMap<&str, NodeId>,
        ids: &[&str],
    ) -> Option<NodeId> {
        match index.get(target.value.as_str()) {
            Some(id) => Some(*id),
            None => {
                let tool = self.tool_name().to_string();
                self.diags.push(Diagnostic::unknown_next(
                    target.span,
                    from,
                    &target.value,
                    &tool,
                    did_you_mean(&target.value, ids.iter().copied()),
                ));
                None
            }
        }
    }

    /// Checks one node; `None` when it could not be fully resolved (already diagnosed).
    fn node(
        &mut self,
        decl: &NodeDecl,
        index: &HashMap<&str, NodeId>,
        ids: &[&str],
    ) -> Option<Node> {
        let id = decl.id.as_ref()?.value.clone();
        let (line, column) = line_col(self.source, node_span(decl).start);
        let kind = decl.kind?;
        let next = match (&decl.next, kind) {
            (Some(next), NodeType::Exit) => {
                self.diags.push(Diagnostic::next_on_exit(next.span, &id));
                None
            }
            (Some(next), _) => Some(self.resolve(&id, next, index, ids)),
            (None, NodeType::Entry | NodeType::Transform | NodeType::Mcp) => {
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
            NodeType::Mcp => {
                let server = decl.server.as_ref().and_then(|s| {
                    match self.server_names.iter().position(|n| *n == s.value) {
                        Some(i) => Some(ServerId(i as u32)),
                        None => {
                            self.diags.push(Diagnostic::unknown_server(
                                s.span,
                                &id,
                                &s.value,
                                did_you_mean(&s.value, self.server_names.iter().copied()),
                            ));
                            None
                        }
                    }
                });
                let args = match &decl.args {
                    Some(args) => self.template(args, true, index),
                    None => Some(Template::Literal(serde_json::Value::Object(
                        Default::default(),
                    ))),
                };
                match (server, decl.tool.as_ref(), args) {
                    (Some(server), Some(tool), Some(args)) => Some(NodeKind::Mcp {
                        server,
                        tool: tool.value.clone(),
                        args,
                    }),
                    _ => None,
                }
            }
            NodeType::Switch => {
                let mut conditions = Vec::new();
                let mut ok = true;
                for cond in &decl.conditions {
                    match self.condition(&id, cond, index, ids) {
                        Some(c) => conditions.push(c),
                        None => ok = false,
                    }
                }
                ok.then_some(NodeKind::Switch { conditions })
            }
        };
        let next = match next {
            Some(resolved) => Some(resolved?),
            None => None,
        };
        Some(Node {
            id,
            kind: kind?,
            next,
            line,
            column,
        })
    }

    fn condition(
        &mut self,
        node: &str,
        cond: &ConditionDecl,
        index: &HashMap<&str, NodeId>,
        ids: &[&str],
    ) -> Option<Condition> {
        let target = cond
            .target
            .as_ref()
            .and_then(|t| self.resolve(node, t, index, ids));
        let rule = match &cond.rule {
            None => None,
            Some(rule) => Some(self.rule(rule, index)?),
        };
        Some(Condition {
            rule,
            target: target?,
        })
    }

    fn rule(&mut self, rule: &Yaml, index: &HashMap<&str, NodeId>) -> Option<logic::Rule> {
        let (tree, problems) = logic::parse(&rule.to_json(), VarMode::Graph);
        let ok = problems.is_empty();
        for (path, problem) in problems {
            let at = locate(rule, &path);
            match problem {
                Problem::UnknownOperator(op) => {
                    let key_span = locate_key(rule, &path).unwrap_or(at.span);
                    let suggestion = did_you_mean(&op, logic::OPERATORS.iter().map(|(n, _)| *n));
                    self.diags
                        .push(Diagnostic::unknown_operator(key_span, &op, suggestion));
                }
                Problem::VarNotString(found) => {
                    self.diags.push(Diagnostic::var_not_string(at.span, found))
                }
                Problem::VarSyntax(text, message) => {
                    self.jsonata_error(at.span, &text, &message, "a switch `var`")
                }
            }
        }
        // Static checks of the vars' JSONata (history function names, path roots).
        let mut vars = Vec::new();
        tree.jsonata_vars(&mut vars);
        let span = rule.span;
        for var in &vars {
            self.analyse(&var.ast, span, index);
        }
        ok.then_some(tree)
    }

    /// Parses one JSONata expression written at `text` (a YAML scalar).
    fn expression(
        &mut self,
        text: &Sp<String>,
        where_: &str,
        index: &HashMap<&str, NodeId>,
    ) -> Option<Expr> {
        match Expr::parse(&text.value) {
            Ok(expr) => {
                self.analyse(&expr.ast, text.span, index);
                Some(expr)
            }
            Err(message) => {
                self.jsonata_error(text.span, &text.value, &message, where_);
                None
            }
        }
    }

    fn jsonata_error(&mut self, scalar: Span, expr: &str, message: &str, where_: &str) {
        let position = error_position(expr, message);
        let (span, note) = match position.and_then(|p| inner_span(self.source, scalar, expr, p)) {
            Some(inner) => (inner, None),
            None => (
                scalar,
                position.map(|p| {
                    format!(
                        "the error is at character {} of the expression",
                        expr[..p].chars().count() + 1
                    )
                }),
            ),
        };
        self.diags
            .push(Diagnostic::jsonata_syntax(span, where_, message, note));
    }

    /// The arguments of an mcp node: top-level `"$…"` strings (0.1.23) and `{expr: …}` objects at
    /// any depth (0.1.32) are JSONata; everything else is literal.
    fn template(
        &mut self,
        node: &Yaml,
        top: bool,
        index: &HashMap<&str, NodeId>,
    ) -> Option<Template> {
        match &node.kind {
            YamlKind::Map(entries) if entries.iter().any(|(k, _)| k.as_str() == Some("expr")) => {
                if entries.len() > 1 {
                    let keys: Vec<String> = entries.iter().map(|(k, _)| k.key_text()).collect();
                    self.diags.push(Diagnostic::expr_object(
                        node.span,
                        format!(
                            "an object with an `expr` key must have only that key; found keys: {}",
                            keys.join(", ")
                        ),
                    ));
                    return None;
                }
                let value = &entries[0].1;
                match &value.kind {
                    YamlKind::Str(s) => self
                        .expression(
                            &Sp {
                                value: s.clone(),
                                span: value.span,
                            },
                            "an argument",
                            index,
                        )
                        .map(Template::Expr),
                    _ => {
                        self.diags.push(Diagnostic::expr_object(
                            value.span,
                            format!("`expr` must be a string, found {}", value.kind_name()),
                        ));
                        None
                    }
                }
            }
            YamlKind::Map(entries) => {
                let mut out = Vec::new();
                let mut ok = true;
                for (k, v) in entries {
                    let child = match &v.kind {
                        YamlKind::Str(s) if top && s.starts_with('$') => self
                            .expression(
                                &Sp {
                                    value: s.clone(),
                                    span: v.span,
                                },
                                "an argument",
                                index,
                            )
                            .map(Template::Expr),
                        _ => self.template(v, false, index),
                    };
                    match child {
                        Some(c) => out.push((k.key_text(), c)),
                        None => ok = false,
                    }
                }
                ok.then(|| simplify(Template::Object(out)))
            }
            YamlKind::Seq(items) => {
                let parts: Vec<Option<Template>> = items
                    .iter()
                    .map(|i| self.template(i, false, index))
                    .collect();
                let parts: Option<Vec<Template>> = parts.into_iter().collect();
                parts.map(|p| simplify(Template::Array(p)))
            }
            YamlKind::Null if top => Some(Template::Literal(serde_json::Value::Object(
                Default::default(),
            ))),
            _ => Some(Template::Literal(node.to_json())),
        }
    }

    /// Warnings from reading an expression: history functions and path roots naming no node.
    fn analyse(&mut self, ast: &AstNode, span: Span, index: &HashMap<&str, NodeId>) {
        let mut found = Vec::new();
        references(ast, &mut found);
        let tool = self.tool_name().to_string();
        let ids: Vec<&str> = index.keys().copied().collect();
        for reference in found {
            match reference {
                Reference::History(function, name) if !index.contains_key(name.as_str()) => {
                    let suggestion = did_you_mean(&name, ids.iter().copied());
                    let at = find_in_scalar(
                        self.source,
                        span,
                        &[
                            format!("{function}(\"{name}\""),
                            format!("{function}('{name}'"),
                            format!("\"{name}\""),
                        ],
                    );
                    self.diags.push(Diagnostic::unknown_history_node(
                        at, &function, &name, &tool, suggestion,
                    ));
                }
                Reference::Root(name) if !index.contains_key(name.as_str()) => {
                    let suggestion = did_you_mean(&name, ids.iter().copied());
                    let at = find_in_scalar(
                        self.source,
                        span,
                        &[format!("$.{name}"), format!("{name}.")],
                    );
                    self.diags
                        .push(Diagnostic::unknown_root(at, &name, &tool, suggestion));
                }
                _ => {}
            }
        }
    }
}

/// The span of the first of `needles` written inside the scalar at `scalar`, else the scalar.
fn find_in_scalar(source: &str, scalar: Span, needles: &[String]) -> Span {
    let Some(text) = source.get(scalar.start..scalar.end) else {
        return scalar;
    };
    needles
        .iter()
        .find_map(|n| {
            text.find(n.as_str())
                .map(|i| Span::new(scalar.start + i, scalar.start + i + n.len()))
        })
        .unwrap_or(scalar)
}

fn node_span(node: &NodeDecl) -> Span {
    node.id.as_ref().map_or(node.span, |i| i.span)
}

/// Nodes reachable from `start` following edges forward, or backward when `reverse`.
fn reach(nodes: &[Node], start: NodeId, reverse: bool) -> HashSet<NodeId> {
    let successors = |n: &Node| -> Vec<NodeId> {
        let mut out: Vec<NodeId> = n.next.into_iter().collect();
        if let NodeKind::Switch { conditions } = &n.kind {
            out.extend(conditions.iter().map(|c| c.target));
        }
        out
    };
    let mut edges: Vec<Vec<NodeId>> = vec![Vec::new(); nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        for s in successors(node) {
            if reverse {
                edges[s.index()].push(NodeId(i as u32));
            } else {
                edges[i].push(s);
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

/// A template without holes is one literal.
fn simplify(t: Template) -> Template {
    fn literal(t: &Template) -> Option<serde_json::Value> {
        match t {
            Template::Literal(v) => Some(v.clone()),
            Template::Expr(_) => None,
            Template::Object(entries) => entries
                .iter()
                .map(|(k, v)| literal(v).map(|v| (k.clone(), v)))
                .collect::<Option<serde_json::Map<_, _>>>()
                .map(serde_json::Value::Object),
            Template::Array(items) => items
                .iter()
                .map(literal)
                .collect::<Option<Vec<_>>>()
                .map(serde_json::Value::Array),
        }
    }
    literal(&t).map_or(t, Template::Literal)
}

/// A meta-schema violation in words. jsonschema's own text names the failed keyword of the
/// meta-schema (`anyOf`), which says little about a misspelt type, so `type` gets its own.
fn schema_problem(error: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind;
    let at_type = error.instance_path().as_str().ends_with("/type");
    match error.kind() {
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::Enum { .. } if at_type => format!(
            "{} is not a JSON Schema type: allowed are \"array\", \"boolean\", \"integer\", \"null\", \"number\", \"object\", \"string\", or a list of them",
            error.instance()
        ),
        _ => error.to_string(),
    }
}

/// The YAML node a JSON pointer (RFC 6901) names inside `root`, or the nearest ancestor that
/// exists.
fn locate_pointer<'a>(root: &'a Yaml, pointer: &str) -> &'a Yaml {
    let mut node = root;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let child = match &node.kind {
            YamlKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.key_text() == token)
                .map(|(_, v)| v),
            YamlKind::Seq(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match child {
            Some(c) => node = c,
            None => break,
        }
    }
    node
}

/// The YAML node at a path inside a rule (or the nearest ancestor that exists).
fn locate<'a>(mut node: &'a Yaml, path: &[PathStep]) -> &'a Yaml {
    for step in path {
        let child = match (step, &node.kind) {
            (PathStep::Key(key), YamlKind::Map(entries)) => entries
                .iter()
                .find(|(k, _)| k.key_text() == *key)
                .map(|(_, v)| v),
            (PathStep::Index(i), YamlKind::Seq(items)) => items.get(*i),
            _ => None,
        };
        match child {
            Some(c) => node = c,
            None => break,
        }
    }
    node
}

/// The span of the key that ends `path` (an operator name).
fn locate_key(root: &Yaml, path: &[PathStep]) -> Option<Span> {
    let (last, parent) = path.split_last()?;
    let parent = locate(root, parent);
    match (last, &parent.kind) {
        (PathStep::Key(key), YamlKind::Map(entries)) => entries
            .iter()
            .find(|(k, _)| k.key_text() == *key)
            .map(|(k, _)| k.span),
        _ => None,
    }
}
