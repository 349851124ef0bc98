//! `mcpgraph graph`: each tool as a Mermaid flowchart or a Graphviz digraph.

use super::Diagram;
use mcpgraph_compiler::ir::{Graph, NodeKind, Tool};

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
            Diagram::Mermaid => mermaid(t),
            Diagram::Dot => dot(t),
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

/// Edges of a node: (target index, label).
fn edges(tool: &Tool, index: usize) -> Vec<(usize, Option<String>)> {
    let node = &tool.nodes[index];
    let mut out = Vec::new();
    if let NodeKind::Switch { conditions } = &node.kind {
        for c in conditions {
            let label = match &c.rule {
                Some(_) => rule_text(tool, index, c.target.index()),
                None => "default".to_string(),
            };
            out.push((c.target.index(), Some(label)));
        }
        if let Some(next) = node.next {
            out.push((next.index(), Some("default".to_string())));
        }
    } else if let Some(next) = node.next {
        out.push((next.index(), None));
    }
    out
}

/// The rule of a switch edge, as compact JSON (shortened for the picture).
fn rule_text(tool: &Tool, from: usize, to: usize) -> String {
    let NodeKind::Switch { conditions } = &tool.nodes[from].kind else {
        return String::new();
    };
    let Some(rule) = conditions
        .iter()
        .find(|c| c.target.index() == to)
        .and_then(|c| c.rule.as_ref())
    else {
        return "default".into();
    };
    let text = rule.to_json().to_string();
    if text.chars().count() > 60 {
        format!("{}…", text.chars().take(59).collect::<String>())
    } else {
        text
    }
}

fn mermaid(tool: &Tool) -> String {
    let mut out = format!("---\ntitle: {}\n---\nflowchart TD\n", tool.name);
    for (i, node) in tool.nodes.iter().enumerate() {
        let label = format!(
            "{}<br/><i>{}</i>",
            escape_mermaid(&node.id),
            node.kind.type_name()
        );
        let shape = match node.kind {
            NodeKind::Entry | NodeKind::Exit => format!("n{i}([\"{label}\"])"),
            NodeKind::Switch { .. } => format!("n{i}{{\"{label}\"}}"),
            _ => format!("n{i}[\"{label}\"]"),
        };
        out.push_str(&format!("    {shape}\n"));
    }
    for i in 0..tool.nodes.len() {
        for (to, label) in edges(tool, i) {
            match label {
                Some(l) => {
                    out.push_str(&format!("    n{i} -->|\"{}\"| n{to}\n", escape_mermaid(&l)))
                }
                None => out.push_str(&format!("    n{i} --> n{to}\n")),
            }
        }
    }
    out
}

fn escape_mermaid(s: &str) -> String {
    s.replace('"', "#quot;").replace('|', "#124;")
}

fn dot(tool: &Tool) -> String {
    let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut out = format!("digraph {} {{\n    rankdir=TB;\n", q(&tool.name));
    for (i, node) in tool.nodes.iter().enumerate() {
        let shape = match node.kind {
            NodeKind::Entry | NodeKind::Exit => "oval",
            NodeKind::Switch { .. } => "diamond",
            _ => "box",
        };
        out.push_str(&format!(
            "    n{i} [label={}, shape={shape}];\n",
            q(&format!("{}\n{}", node.id, node.kind.type_name()))
        ));
    }
    for i in 0..tool.nodes.len() {
        for (to, label) in edges(tool, i) {
            match label {
                Some(l) => out.push_str(&format!("    n{i} -> n{to} [label={}];\n", q(&l))),
                None => out.push_str(&format!("    n{i} -> n{to};\n")),
            }
        }
    }
    out.push_str("}\n");
    out
}
