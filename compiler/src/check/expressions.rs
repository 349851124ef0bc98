//! JSONata in a tool: transform expressions, the arguments of mcp nodes, and what they refer to.

use super::ToolChecker;
use super::types::Written;
use crate::ast::Sp;
use crate::diagnostics::{Diagnostic, Span};
use crate::expr::{Expr, Reference, error_position, free_variables, inner_span, references};
use crate::ir::{NodeId, Template};
use crate::yaml::{Yaml, YamlKind};
use jsonata_core::ast::AstNode;
use std::collections::HashMap;

impl ToolChecker<'_> {
    /// Parses one JSONata expression written at `text` (a YAML scalar).
    pub(super) fn expression(
        &mut self,
        text: &Sp<String>,
        where_: &str,
        index: &HashMap<&str, NodeId>,
    ) -> Option<Expr> {
        match Expr::parse(&text.value) {
            Ok(expr) => {
                self.analyse(&expr.ast, text.span, index);
                self.written.push(Written {
                    node: self.current_node,
                    ast: expr.ast.clone(),
                    scalar: text.span,
                    item_scope: self.item_scope,
                    after_node: false,
                });
                if !self.item_scope {
                    self.item_variables(&text.value, text.span, where_);
                }
                Some(expr)
            }
            Err(message) => {
                self.jsonata_error(text.span, &text.value, &message, where_);
                None
            }
        }
    }

    /// E0608 for each `$item` or `$index` the expression written at `scalar` uses without
    /// binding it: they are bound in a map's args only.
    pub(super) fn item_variables(&mut self, expr: &str, scalar: Span, where_: &str) {
        for (name, at) in free_variables(expr, &["item", "index"]) {
            let span = match inner_span(self.source, scalar, expr, at) {
                Some(s) => Span::new(s.start, s.start + 1 + name.len()),
                None => find_in_scalar(self.source, scalar, &[format!("${name}")]),
            };
            self.diags
                .push(Diagnostic::item_outside_map(span, &name, where_));
        }
    }

    pub(super) fn jsonata_error(&mut self, scalar: Span, expr: &str, message: &str, where_: &str) {
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
    pub(super) fn template(
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
    pub(super) fn analyse(&mut self, ast: &AstNode, span: Span, index: &HashMap<&str, NodeId>) {
        let mut found = Vec::new();
        references(ast, &mut found);
        let tool = self.tool_name().to_string();
        for reference in found {
            match reference {
                Reference::History(function, name) if !index.contains_key(name.as_str()) => {
                    let suggestion = self.suggest_node(&name);
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
                    let suggestion = self.suggest_node(&name);
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
pub(super) fn find_in_scalar(source: &str, scalar: Span, needles: &[String]) -> Span {
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
