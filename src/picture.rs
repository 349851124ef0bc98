//! `mcpgraph graph`: each tool as a Mermaid flowchart or a Graphviz digraph.

use mcpgraph_compiler::ir::{Call, EdgeKind, Graph, Node, NodeKind, Target, Tool};

/// The diagram languages a picture is drawn in.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagram {
    Mermaid,
    Dot,
}

pub fn draw(graph: &Graph, only: Option<&str>, format: Diagram) -> Result<String, String> {
    let tools: Vec<&Tool> = graph
        .tools
        .iter()
        .filter(|t| only.is_none_or(|o| t.name == o))
        .collect();
    if tools.is_empty()
        && let Some(name) = only
    {
        let names: Vec<&str> = graph.tools.iter().map(|t| t.name.as_str()).collect();
        return Err(format!(
            "no tool `{name}` in {} (tools: {})",
            graph.source_name,
            names.join(", ")
        ));
    }
    Ok(tools
        .iter()
        .map(|t| match format {
            Diagram::Mermaid => mermaid(graph, t),
            Diagram::Dot => dot(graph, t),
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

/// How an edge is drawn.
#[derive(Clone, Copy, PartialEq)]
enum Stroke {
    Solid,
    /// An `onError` route: dashed, labelled `error`.
    Dashed,
}

/// Edges of a node, in the order of [`Node::successors`]: (target index, label, stroke).
fn edges(tool: &Tool, index: usize) -> Vec<(usize, Option<String>, Stroke)> {
    let node = &tool.nodes[index];
    node.successors()
        .map(|edge| {
            let (label, stroke) = match edge.kind {
                EdgeKind::Next => (None, Stroke::Solid),
                EdgeKind::Condition(at) => (Some(condition_label(node, at)), Stroke::Solid),
                EdgeKind::Default => (Some("default".to_string()), Stroke::Solid),
                EdgeKind::OnError => (Some(error_label(node)), Stroke::Dashed),
            };
            (edge.to.index(), label, stroke)
        })
        .collect()
}

/// The label of a switch's condition: its rule as compact JSON (shortened for the picture), or
/// `default` for a rule-less condition, which is taken whenever it is reached.
fn condition_label(node: &Node, at: usize) -> String {
    let NodeKind::Switch { conditions } = &node.kind else {
        return String::new();
    };
    let Some(rule) = conditions.get(at).and_then(|c| c.rule.as_ref()) else {
        return "default".into();
    };
    let text = rule.to_json().to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

/// The label of an error route: `error`, or `error: ` and the kinds it routes.
fn error_label(node: &Node) -> String {
    match node
        .on_error
        .as_ref()
        .and_then(|route| route.kinds.as_ref())
    {
        None => "error".to_string(),
        Some(kinds) => format!(
            "error: {}",
            kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// What a call calls, for a label: `server.tool` (`self.tool` for a tool of this graph).
fn call_text(graph: &Graph, call: &Call) -> String {
    let target = match call.target {
        Target::Server(id) => graph
            .servers
            .get(id.0 as usize)
            .map_or("?", |s| s.name.as_str()),
        Target::SelfTool(_) => "self",
    };
    format!("{target}.{}", call.tool)
}

/// The lines under a node's type in its label: the calls of a map or a parallel.
fn call_lines(graph: &Graph, kind: &NodeKind) -> Vec<String> {
    match kind {
        NodeKind::Map { call, .. } => vec![call_text(graph, call)],
        NodeKind::Parallel { branches, .. } => branches
            .iter()
            .map(|b| format!("{}: {}", b.name, call_text(graph, &b.call)))
            .collect(),
        _ => Vec::new(),
    }
}

fn mermaid(graph: &Graph, tool: &Tool) -> String {
    let mut out = format!("---\ntitle: {}\n---\nflowchart TD\n", tool.name);
    for (i, node) in tool.nodes.iter().enumerate() {
        let mut label = format!(
            "{}<br/><i>{}</i>",
            escape_mermaid(&node.id),
            node.kind.type_name()
        );
        for line in call_lines(graph, &node.kind) {
            label.push_str(&format!("<br/>{}", escape_mermaid(&line)));
        }
        let shape = match node.kind {
            NodeKind::Entry | NodeKind::Exit => format!("n{i}([\"{label}\"])"),
            NodeKind::Switch { .. } => format!("n{i}{{\"{label}\"}}"),
            // Fan-out shaped apart: a subroutine, a parallelogram, a hexagon.
            NodeKind::Map { .. } => format!("n{i}[[\"{label}\"]]"),
            NodeKind::Parallel { .. } => format!("n{i}[/\"{label}\"/]"),
            NodeKind::Ask { .. } => format!("n{i}{{{{\"{label}\"}}}}"),
            _ => format!("n{i}[\"{label}\"]"),
        };
        out.push_str(&format!("    {shape}\n"));
    }
    for i in 0..tool.nodes.len() {
        for (to, label, stroke) in edges(tool, i) {
            let arrow = match stroke {
                Stroke::Solid => "-->",
                Stroke::Dashed => "-.->",
            };
            match label {
                Some(l) => out.push_str(&format!(
                    "    n{i} {arrow}|\"{}\"| n{to}\n",
                    escape_mermaid(&l)
                )),
                None => out.push_str(&format!("    n{i} {arrow} n{to}\n")),
            }
        }
    }
    out
}

fn escape_mermaid(s: &str) -> String {
    s.replace('"', "#quot;").replace('|', "#124;")
}

fn dot(graph: &Graph, tool: &Tool) -> String {
    let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut out = format!("digraph {} {{\n    rankdir=TB;\n", q(&tool.name));
    for (i, node) in tool.nodes.iter().enumerate() {
        let shape = match node.kind {
            NodeKind::Entry | NodeKind::Exit => "oval",
            NodeKind::Switch { .. } => "diamond",
            NodeKind::Map { .. } => "box3d",
            NodeKind::Parallel { .. } => "parallelogram",
            NodeKind::Ask { .. } => "hexagon",
            _ => "box",
        };
        let mut label = format!("{}\n{}", node.id, node.kind.type_name());
        for line in call_lines(graph, &node.kind) {
            label.push_str(&format!("\n{line}"));
        }
        out.push_str(&format!("    n{i} [label={}, shape={shape}];\n", q(&label)));
    }
    for i in 0..tool.nodes.len() {
        for (to, label, stroke) in edges(tool, i) {
            let style = match stroke {
                Stroke::Solid => "",
                Stroke::Dashed => ", style=dashed",
            };
            match label {
                Some(l) => out.push_str(&format!("    n{i} -> n{to} [label={}{style}];\n", q(&l))),
                None => out.push_str(&format!("    n{i} -> n{to};\n")),
            }
        }
    }
    out.push_str("}\n");
    out
}
