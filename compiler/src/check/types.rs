//! Types along a tool's graph, and the checks they allow (docs/types.md): each node's output type
//! (recorded in the IR), every path into the context checked against the type of what it reads,
//! reads of nodes that cannot have run yet, JSONata arguments against the locked input schemas,
//! and the exit's result against the tool's `outputSchema`.

use super::ToolChecker;
use crate::diagnostics::{Diagnostic, Span};
use crate::ir::{Call, Node, NodeId, NodeKind, OnItemError, Target, Template};
use crate::types::{Finding, Keys, ObjectType, Property, Scope, Type, infer};
use jsonata_core::ast::AstNode;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// An expression as written in the tool, recorded while checking it.
#[derive(Debug, Clone)]
pub(super) struct Written {
    /// The node it belongs to.
    pub node: Option<NodeId>,
    pub ast: Arc<AstNode>,
    /// The YAML scalar it is written in.
    pub scalar: Span,
    /// A map's args, where `$item` and `$index` are bound.
    pub item_scope: bool,
    /// Evaluated after its node has run (a `log:` message): the node's own output is there.
    pub after_node: bool,
}

/// How many edges the "can it have run yet" searches may visit, per tool, before the check is
/// skipped (a 20k-node hostile graph must still check in milliseconds).
const REACH_BUDGET: usize = 4_000_000;
/// Passes over the tool's nodes to let types flow around loops; each pass is sound on its own
/// (it starts from what the previous one knew, and the first from nothing).
const PASSES: usize = 3;

impl ToolChecker<'_> {
    /// Types the tool's nodes (stored in `nodes[i].output_type`) and reports what they show.
    pub(super) fn types(&mut self, nodes: &mut [Node], exit: NodeId) {
        let tool = self.tool_name().to_string();
        let ids: HashMap<&str, NodeId> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.as_str(), NodeId(i as u32)))
            .collect();
        let input = self.decl.input_schema.as_ref().map(|s| s.to_json());
        let preds_of_exit: Vec<NodeId> = (0..nodes.len())
            .map(|i| NodeId(i as u32))
            .filter(|&i| nodes[i.index()].successors().any(|edge| edge.to == exit))
            .collect();

        let mut types = vec![Type::Unknown; nodes.len()];
        for _ in 0..PASSES {
            for i in 0..nodes.len() {
                let t = self.output_type(
                    nodes,
                    NodeId(i as u32),
                    &types,
                    &ids,
                    input.as_ref(),
                    &preds_of_exit,
                    &tool,
                );
                types[i] = t;
            }
        }

        // What each expression reads, against the final types.
        let mut reach = Reach::new(nodes);
        let entry = self.entry;
        let written = std::mem::take(&mut self.written);
        for w in &written {
            let Some(at) = w.node else { continue };
            let item = if w.item_scope {
                match &nodes[at.index()].kind {
                    NodeKind::Map { items, .. } => {
                        let scope = FlowScope {
                            ids: &ids,
                            types: &types,
                            item: None,
                        };
                        Some(element(infer(&items.ast, &scope, &mut Vec::new())))
                    }
                    _ => None,
                }
            } else {
                None
            };
            let scope = FlowScope {
                ids: &ids,
                types: &types,
                item,
            };
            let mut findings = Vec::new();
            infer(&w.ast, &scope, &mut findings);
            // One diagnostic per distinct finding of an expression (a path read twice is
            // located once).
            let mut seen: Vec<&Finding> = Vec::new();
            for f in &findings {
                if seen.contains(&f) {
                    continue;
                }
                seen.push(f);
                // A node the entry cannot reach has its own warning; what it reads is moot.
                if matches!(f, Finding::Root(_))
                    && entry.is_some_and(|e| e != at && reach.before(e, at) == Some(false))
                {
                    continue;
                }
                self.finding(f.clone(), w, at, nodes, &ids, &mut reach);
            }
        }

        // JSONata arguments against the locked input schemas.
        for i in 0..nodes.len() {
            for call in nodes[i].kind.calls() {
                self.argument_types(call, NodeId(i as u32), &written, &ids, &types, nodes);
            }
        }

        self.exit_result(&types[exit.index()], &tool);
        self.written = written;
        for (node, t) in nodes.iter_mut().zip(types) {
            node.output_type = t;
        }
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the tool's parts a node's type depends on"
    )]
    fn output_type(
        &self,
        nodes: &[Node],
        i: NodeId,
        types: &[Type],
        ids: &HashMap<&str, NodeId>,
        input: Option<&Value>,
        preds_of_exit: &[NodeId],
        tool: &str,
    ) -> Type {
        let node = &nodes[i.index()];
        let scope = FlowScope {
            ids,
            types,
            item: None,
        };
        let own = match &node.kind {
            NodeKind::Entry => input.map_or(Type::Unknown, |s| {
                Type::from_schema(s, &format!("inputSchema of tool `{tool}`"))
            }),
            NodeKind::Exit => exit_type(preds_of_exit.iter().map(|p| {
                // A transform whose value may be undefined gives `{}` at the exit.
                let undefined = matches!(&nodes[p.index()].kind,
                    NodeKind::Transform(expr) if !crate::types::defined(&expr.ast));
                (types[p.index()].clone(), undefined)
            })),
            NodeKind::Transform(expr) => match infer(&expr.ast, &scope, &mut Vec::new()) {
                Type::Object(mut o) if o.keys == Keys::Exact => {
                    o.origin = format!("the object node `{}` builds", node.id);
                    Type::Object(o)
                }
                t => t,
            },
            NodeKind::Mcp(call) => self.call_type(call),
            NodeKind::Switch { .. } => Type::String,
            NodeKind::Map {
                call,
                on_item_error,
                ..
            } => {
                let item = self.call_type(call);
                Type::Array(Box::new(match on_item_error {
                    OnItemError::Keep => item.or(Type::error_object(&node.id)),
                    _ => item,
                }))
            }
            NodeKind::Parallel {
                branches,
                on_item_error,
            } => Type::Object(ObjectType {
                properties: branches
                    .iter()
                    .map(|b| Property {
                        name: b.name.clone(),
                        ty: match on_item_error {
                            OnItemError::Keep => {
                                self.call_type(&b.call).or(Type::error_object(&node.id))
                            }
                            _ => self.call_type(&b.call),
                        },
                        required: *on_item_error != OnItemError::Skip,
                    })
                    .collect(),
                keys: Keys::Exact,
                origin: format!("the branches of parallel node `{}`", node.id),
            }),
            NodeKind::Ask { schema, .. } => {
                Type::from_schema(schema, &format!("the schema of ask node `{}`", node.id))
            }
        };
        match &node.on_error {
            Some(_) => own.or(Type::error_object(&node.id)),
            None => own,
        }
    }

    /// The output of one call: a locked tool's `outputSchema`, a `self` tool's `outputSchema`.
    fn call_type(&self, call: &Call) -> Type {
        match call.target {
            Target::Server(server) => {
                let name = self.server_names.get(server.0 as usize).copied();
                name.and_then(|n| {
                    self.lock
                        .and_then(|l| l.tool(n, &call.tool))
                        .map(|t| (n, t))
                })
                .and_then(|(n, t)| {
                    t.output_schema.as_ref().map(|s| {
                        Type::from_schema(
                            s,
                            &format!("outputSchema of `{n}.{}` in the lock", call.tool),
                        )
                    })
                })
                .unwrap_or_default()
            }
            Target::SelfTool(i) => self
                .self_output_schemas
                .get(i)
                .and_then(|s| s.as_ref())
                .map_or(Type::Unknown, |s| {
                    Type::from_schema(s, &format!("outputSchema of tool `{}`", call.tool))
                }),
        }
    }

    fn finding(
        &mut self,
        finding: Finding,
        w: &Written,
        at: NodeId,
        nodes: &[Node],
        ids: &HashMap<&str, NodeId>,
        reach: &mut Reach,
    ) {
        let tool = self.tool_name().to_string();
        match finding {
            Finding::Root(name) => {
                let Some(&read) = ids.get(name.as_str()) else {
                    return; // W0302 already
                };
                let own_output = w.after_node && read == at;
                if !own_output && reach.before(read, at) == Some(false) {
                    // `$.later` when written so.
                    let span = find_path(self.source, w.scalar, std::slice::from_ref(&name))
                        .map_or(w.scalar, |s| {
                            match self.source.get(s.start.saturating_sub(2)..s.start) {
                                Some("$.") => Span::new(s.start - 2, s.end),
                                _ => s,
                            }
                        });
                    self.diags.push(Diagnostic::not_yet_run(
                        span,
                        &name,
                        &nodes[at.index()].id,
                        &tool,
                    ));
                }
            }
            Finding::MissingProperty {
                path,
                origin,
                closed,
                suggestion,
                known,
            } => {
                let Some(last) = path.last() else { return };
                let span = find_path(self.source, w.scalar, &path).map_or(w.scalar, |found| {
                    Span::new(found.end - last.len(), found.end)
                });
                let of = path[..path.len() - 1].join(".");
                self.diags.push(Diagnostic::missing_property(
                    span, last, &of, &origin, closed, suggestion, &known,
                ));
            }
        }
    }

    /// W0702 for each top-level JSONata argument whose type cannot be what the locked tool's
    /// inputSchema declares for it.
    fn argument_types(
        &mut self,
        call: &Call,
        node: NodeId,
        written: &[Written],
        ids: &HashMap<&str, NodeId>,
        types: &[Type],
        nodes: &[Node],
    ) {
        let Target::Server(server) = call.target else {
            return;
        };
        let Some(server_name) = self.server_names.get(server.0 as usize).copied() else {
            return;
        };
        let Some(locked) = self.lock.and_then(|l| l.tool(server_name, &call.tool)) else {
            return;
        };
        let Template::Object(entries) = &call.args else {
            return;
        };
        let Some(properties) = locked
            .input_schema
            .get("properties")
            .and_then(Value::as_object)
        else {
            return;
        };
        let item = match &nodes[node.index()].kind {
            NodeKind::Map { items, .. } => {
                let scope = FlowScope {
                    ids,
                    types,
                    item: None,
                };
                Some(element(infer(&items.ast, &scope, &mut Vec::new())))
            }
            _ => None,
        };
        for (key, value) in entries {
            let Template::Expr(expr) = value else {
                continue;
            };
            let Some(schema) = properties.get(key) else {
                continue;
            };
            let wanted = Type::from_schema(schema, "");
            let scope = FlowScope {
                ids,
                types,
                item: item.clone(),
            };
            let got = infer(&expr.ast, &scope, &mut Vec::new());
            if got.may_be(&wanted) {
                continue;
            }
            let span = written
                .iter()
                .find(|w| Arc::ptr_eq(&w.ast, &expr.ast))
                .map_or(self.tool_span(), |w| w.scalar);
            self.diags.push(Diagnostic::expression_argument_type(
                span,
                key,
                &format!("{server_name}.{}", call.tool),
                &wanted.describe(),
                &got.describe(),
            ));
        }
    }

    /// W0803 when no value the exit can return matches the tool's `outputSchema`.
    fn exit_result(&mut self, result: &Type, tool: &str) {
        let Some(schema) = self.decl.output_schema.as_ref() else {
            return;
        };
        let json = schema.to_json();
        let wanted = Type::from_schema(&json, "");
        let Type::Object(want) = &wanted else { return };
        // As written: a required property need not be declared.
        let required: Vec<&str> = json
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if result.is_unknown() {
            return;
        }
        let mut reasons = Vec::new();
        for member in result.members() {
            match mismatch(member, want, &required) {
                Some(reason) => reasons.push(reason),
                None => return,
            }
        }
        let Some(reason) = reasons.into_iter().next() else {
            return;
        };
        self.diags
            .push(Diagnostic::result_never_matches(schema.span, tool, &reason));
    }
}

/// Why a value of type `got` can never match the object type `want`; `None` when it may.
fn mismatch(got: &Type, want: &ObjectType, required: &[&str]) -> Option<String> {
    match got {
        Type::Object(o) => {
            if matches!(o.keys, Keys::Exact | Keys::Closed) {
                for r in required {
                    if !o.properties.iter().any(|p| p.name == *r) {
                        return Some(format!("it requires `{r}`, which {} never has", o.origin));
                    }
                }
            }
            for p in &o.properties {
                if let Some(w) = want.properties.iter().find(|w| w.name == p.name)
                    && p.required
                    && !p.ty.may_be(&w.ty)
                {
                    return Some(format!(
                        "`{}` must be {}, and {} makes it {}",
                        p.name,
                        w.ty.describe(),
                        o.origin,
                        p.ty.describe()
                    ));
                }
            }
            if want.keys == Keys::Closed && o.keys == Keys::Exact {
                for p in o.properties.iter().filter(|p| p.required) {
                    if !want.properties.iter().any(|w| w.name == p.name) {
                        return Some(format!(
                            "it allows no property `{}`, which {} always has",
                            p.name, o.origin
                        ));
                    }
                }
            }
            None
        }
        Type::Unknown => None,
        other => Some(format!(
            "it is an object, and the result is {}",
            other.describe()
        )),
    }
}

/// The exit's output: the previous node's, with `0`, `false`, `""`, `null` and undefined
/// replaced by `{}` (compat).
fn exit_type(previous: impl Iterator<Item = (Type, bool)>) -> Type {
    let empty = Type::Object(ObjectType {
        properties: Vec::new(),
        keys: Keys::Exact,
        origin: "the `{}` that replaces a falsy result".into(),
    });
    let mut out = Vec::new();
    for (t, undefined) in previous {
        if undefined {
            out.push(empty.clone());
        }
        for m in t.members() {
            if matches!(m, Type::Null | Type::Boolean | Type::Number | Type::String) {
                out.push(empty.clone());
            }
            if *m != Type::Null {
                out.push(m.clone());
            }
        }
        if t.is_unknown() {
            return Type::Unknown;
        }
    }
    Type::union(out)
}

/// The type of each item a map's `items` value gives: an array's elements, else the value.
fn element(items: Type) -> Type {
    Type::union(items.members().iter().map(|m| match m {
        Type::Array(item) => (**item).clone(),
        other => other.clone(),
    }))
}

/// The context as an expression of the tool sees it.
struct FlowScope<'a> {
    ids: &'a HashMap<&'a str, NodeId>,
    types: &'a [Type],
    /// `$item`'s type, in a map's args.
    item: Option<Type>,
}

impl Scope for FlowScope<'_> {
    fn node(&self, id: &str) -> Option<Type> {
        self.ids.get(id).map(|i| self.types[i.index()].clone())
    }
    fn variable(&self, name: &str) -> Option<Type> {
        match (name, &self.item) {
            ("item", Some(t)) => Some(t.clone()),
            ("index", Some(_)) => Some(Type::Number),
            _ => None,
        }
    }
}

/// Which nodes can run after which: searched lazily, one breadth-first search per node read,
/// within [`REACH_BUDGET`].
struct Reach {
    edges: Vec<Vec<NodeId>>,
    /// What one search costs at most: every node and edge.
    cost: usize,
    /// For a node `x` searched: the nodes reachable from `x` by one edge or more.
    after: HashMap<NodeId, Vec<bool>>,
    budget: usize,
}

impl Reach {
    fn new(nodes: &[Node]) -> Reach {
        let edges: Vec<Vec<NodeId>> = nodes
            .iter()
            .map(|node| node.successors().map(|edge| edge.to).collect())
            .collect();
        Reach {
            cost: edges.iter().map(Vec::len).sum::<usize>() + edges.len(),
            edges,
            after: HashMap::new(),
            budget: REACH_BUDGET,
        }
    }

    /// Whether `read` can have run before `at` on some path (every node is reachable from the
    /// entry, or has its own warning); `None` when the budget is spent.
    fn before(&mut self, read: NodeId, at: NodeId) -> Option<bool> {
        if !self.after.contains_key(&read) {
            if self.cost > self.budget {
                return None;
            }
            self.budget -= self.cost;
            let mut seen = vec![false; self.edges.len()];
            let mut queue: Vec<NodeId> = self.edges[read.index()].clone();
            while let Some(n) = queue.pop() {
                if !std::mem::replace(&mut seen[n.index()], true) {
                    queue.extend(self.edges[n.index()].iter().copied());
                }
            }
            self.after.insert(read, seen);
        }
        Some(self.after[&read][at.index()])
    }
}

/// The span of the path `names` (`entry.name`, `$.entry.name`, `$item.name`) written inside the
/// scalar at `scalar`: the first occurrence that is a whole path, not the start of a longer name
/// (`entry.na` in `entry.name`) nor the end of one (`xentry.name`). Spaces around the dots are not
/// looked for.
fn find_path(source: &str, scalar: Span, names: &[String]) -> Option<Span> {
    let text = source.get(scalar.start..scalar.end)?;
    let needle = names.join(".");
    if needle.is_empty() {
        return None;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '$' || c == '`';
    // Whole-path occurrences: (start, whether written after `$.`).
    let mut found: Vec<(usize, bool)> = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(&needle) {
        let start = from + i;
        let end = start + needle.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let rooted = text[..start].ends_with("$.");
        let starts_path = match before {
            None => true,
            Some('.') => rooted,
            // A quote: the scalar's own (a bare path written first), else a JSONata string.
            Some('"' | '\'') => start == 1,
            Some(c) => !word(c),
        };
        if starts_path && !after.is_some_and(word) {
            found.push((start, rooted));
        }
        from = start + needle.chars().next().map_or(1, char::len_utf8);
    }
    let start = found
        .iter()
        .find(|(_, rooted)| *rooted)
        .or(found.first())
        .map(|(start, _)| *start)?;
    Some(Span::new(
        scalar.start + start,
        scalar.start + start + needle.len(),
    ))
}
