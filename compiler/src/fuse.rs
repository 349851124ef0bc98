//! Expression rewrites that keep a JSONata expression's meaning and drop work.
//!
//! One today: `$count($split(x, "sep"))`, the idiom for counting lines (the count_files example
//! counts a directory listing this way), becomes a call of [`COUNT_SPLIT`], a host function the
//! runtime registers in every evaluator. It counts the separators in a string instead of
//! building one string per piece and an array to hold them, which jsonata-core does one heap
//! allocation at a time. For any value but a string it evaluates the original
//! `$count($split(x, sep))`, so undefined, numbers, arrays and their errors are exactly as
//! before. The rewrite is skipped wherever `$count` or `$split` could mean something other than
//! the built-ins (the expression binds or references a variable of either name).

use jsonata_core::ast::{AstNode, PathStep, Stage};

/// The host function the fused call invokes: `(x, separator)` with a non-empty string literal as
/// separator. Not a name a graph can bind by accident (the rewrite is skipped if it does).
pub const COUNT_SPLIT: &str = "__mcpgraph_count_split";

/// The names whose rebinding anywhere in an expression disables the rewrite.
const BUILTINS: &[&str] = &["count", "split", COUNT_SPLIT];

/// Applies every rewrite to `ast`, unless the expression could rebind a name involved.
pub fn fuse(mut ast: AstNode) -> AstNode {
    let mut rebinds = false;
    visit(&mut ast, &mut |node| {
        rebinds |= match node {
            AstNode::Variable(name) => BUILTINS.contains(&name.as_str()),
            AstNode::Lambda { params, .. } => params.iter().any(|p| BUILTINS.contains(&p.as_str())),
            _ => false,
        };
    });
    visit_steps(&mut ast, &mut |step| {
        rebinds |= [&step.focus, &step.index_var]
            .into_iter()
            .flatten()
            .any(|name| BUILTINS.contains(&name.as_str()));
    });
    if !rebinds {
        rewrite(&mut ast);
    }
    ast
}

/// `$count($split(x, "sep"))` with a non-empty literal separator and no placeholders.
fn count_split_operands(node: &AstNode) -> Option<(&AstNode, &str)> {
    let AstNode::Function {
        name,
        args,
        is_builtin: true,
    } = node
    else {
        return None;
    };
    let [inner] = args.as_slice() else {
        return None;
    };
    let AstNode::Function {
        name: inner_name,
        args: inner_args,
        is_builtin: true,
    } = inner
    else {
        return None;
    };
    let [subject, AstNode::String(separator)] = inner_args.as_slice() else {
        return None;
    };
    (name == "count"
        && inner_name == "split"
        && !separator.is_empty()
        && !matches!(subject, AstNode::Placeholder))
    .then_some((subject, separator.as_str()))
}

fn rewrite(node: &mut AstNode) {
    if let Some((subject, separator)) = count_split_operands(node) {
        *node = AstNode::Function {
            name: COUNT_SPLIT.to_string(),
            args: vec![subject.clone(), AstNode::String(separator.to_string())],
            is_builtin: true,
        };
    }
    children_mut(node, &mut rewrite);
}

/// Calls `f` on every node of the tree, parents first.
fn visit(node: &mut AstNode, f: &mut dyn FnMut(&AstNode)) {
    f(node);
    children_mut(node, &mut |child| visit(child, f));
}

/// Calls `f` on every path step of the tree.
fn visit_steps(node: &mut AstNode, f: &mut dyn FnMut(&PathStep)) {
    if let AstNode::Path { steps } = node {
        steps.iter().for_each(&mut *f);
    }
    children_mut(node, &mut |child| visit_steps(child, f));
}

/// The direct children of a node, in no particular order (mutably: the one walker serves both
/// the scan and the rewrite).
fn children_mut(node: &mut AstNode, f: &mut dyn FnMut(&mut AstNode)) {
    match node {
        AstNode::String(_)
        | AstNode::Name(_)
        | AstNode::Number(_)
        | AstNode::Boolean(_)
        | AstNode::Null
        | AstNode::Undefined
        | AstNode::Placeholder
        | AstNode::Regex { .. }
        | AstNode::Variable(_)
        | AstNode::ParentVariable(_)
        | AstNode::Wildcard
        | AstNode::Descendant
        | AstNode::Parent(_) => {}
        AstNode::Path { steps } => {
            for step in steps {
                f(&mut step.node);
                for stage in &mut step.stages {
                    if let Stage::Filter(filter) = stage {
                        f(filter);
                    }
                }
            }
        }
        AstNode::Binary { lhs, rhs, .. } => {
            f(lhs);
            f(rhs);
        }
        AstNode::Unary { operand, .. } => f(operand),
        AstNode::Function { args, .. } => args.iter_mut().for_each(f),
        AstNode::Call { procedure, args } => {
            f(procedure);
            args.iter_mut().for_each(f);
        }
        AstNode::Lambda { body, .. } => f(body),
        AstNode::Array(items) | AstNode::Block(items) | AstNode::ArrayGroup(items) => {
            items.iter_mut().for_each(f)
        }
        AstNode::Object(pairs) => pairs.iter_mut().for_each(|(k, v)| {
            f(k);
            f(v);
        }),
        AstNode::ObjectTransform { input, pattern } => {
            f(input);
            pattern.iter_mut().for_each(|(k, v)| {
                f(k);
                f(v);
            });
        }
        AstNode::Conditional {
            condition,
            then_branch,
            else_branch,
        } => {
            f(condition);
            f(then_branch);
            if let Some(e) = else_branch {
                f(e);
            }
        }
        AstNode::FunctionApplication(inner) => f(inner),
        AstNode::Sort { input, terms } => {
            f(input);
            terms.iter_mut().for_each(|(t, _)| f(t));
        }
        AstNode::Transform {
            location,
            update,
            delete,
        } => {
            f(location);
            f(update);
            if let Some(d) = delete {
                f(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fused(source: &str) -> bool {
        let mut ast = fuse(jsonata_core::parser::parse(source).unwrap());
        let mut found = false;
        visit(
            &mut ast,
            &mut |n| found |= matches!(n, AstNode::Function { name, .. } if name == COUNT_SPLIT),
        );
        found
    }

    #[test]
    fn the_idiom_is_fused_wherever_it_appears() {
        assert!(fused(r#"$count($split(s, "\n"))"#));
        assert!(fused(r#"{ "n": $count($split($.a.content, ", ")) }"#));
        assert!(fused(r#"items[$count($split(text, " ")) > 2].id"#));
        assert!(fused(
            r#"$map(xs, function($v) { $count($split($v, "\n")) })"#
        ));
    }

    #[test]
    fn anything_else_is_left_alone() {
        assert!(!fused(r#"$count($split(s, ""))"#), "empty separator");
        assert!(!fused(r#"$count($split(s, sep))"#), "computed separator");
        assert!(!fused(r#"$count($split(s, /\n/))"#), "regex separator");
        assert!(!fused(r#"$count($split(s, "\n", 2))"#), "limit");
        assert!(!fused(r#"$count($split(?, "\n"))"#), "placeholder");
        assert!(!fused(r#"$split(s, "\n")"#));
        assert!(
            !fused(r#"($count := function($x) { 7 }; $count($split(s, "\n")))"#),
            "$count rebound"
        );
        assert!(
            !fused(r#"$map(xs, function($split) { $count($split(s, "\n")) })"#),
            "$split shadowed by a parameter"
        );
        assert!(
            !fused(r#"xs@$count.$count($split(s, "\n"))"#),
            "$count bound by a focus"
        );
    }
}
