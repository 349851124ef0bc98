//! Switch conditions and their JSON Logic rules.

use super::ToolChecker;
use crate::ast::ConditionDecl;
use crate::diagnostics::{Diagnostic, Span, did_you_mean};
use crate::ir::{Condition, NodeId};
use crate::logic::{self, PathStep, Problem, VarMode};
use crate::yaml::{Yaml, YamlKind};
use std::collections::HashMap;

impl ToolChecker<'_> {
    pub(super) fn condition(
        &mut self,
        node: &str,
        cond: &ConditionDecl,
        index: &HashMap<&str, NodeId>,
    ) -> Option<Condition> {
        let target = cond
            .target
            .as_ref()
            .and_then(|t| self.resolve(node, t, index));
        let rule = match &cond.rule {
            None => None,
            Some(rule) => Some(self.rule(rule, index)?),
        };
        Some(Condition {
            rule,
            target: target?,
            native: None,
        })
    }

    pub(super) fn rule(
        &mut self,
        rule: &Yaml,
        index: &HashMap<&str, NodeId>,
    ) -> Option<logic::Rule> {
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
            let at = find_string(rule, &var.source).unwrap_or(span);
            self.item_variables(&var.source, at, "a switch `var`");
            self.written.push(super::types::Written {
                node: self.current_node,
                ast: var.ast.clone(),
                scalar: at,
                item_scope: false,
                after_node: false,
            });
        }
        ok.then_some(tree)
    }
}

/// The span of the first string scalar of `node` whose value is `text`.
fn find_string(node: &Yaml, text: &str) -> Option<Span> {
    match &node.kind {
        YamlKind::Str(s) if s == text => Some(node.span),
        YamlKind::Seq(items) => items.iter().find_map(|i| find_string(i, text)),
        YamlKind::Map(entries) => entries.iter().find_map(|(_, v)| find_string(v, text)),
        _ => None,
    }
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
