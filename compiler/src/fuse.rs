//! Expression rewrites that keep a JSONata expression's meaning and drop work, or bound it.
//!
//! Size checks: calls of the built-ins that can build a value far larger than their arguments
//! (`$pad`, `$string`, `$join`, `$replace`) get one argument wrapped in a host function that
//! returns it unchanged after checking that the result will fit the run's `maxValueBytes` (it
//! sees the call's other arguments when they are literals, variables or plain paths such as
//! `$.entry.text`, which are evaluated a second time for it; otherwise it checks what it can). The built-in itself still does the
//! work, so results and errors are unchanged. Inside a function body, where it can repeat
//! without bound, `a & b` becomes a call of [`CONCAT`], which concatenates after the same check.
//! `$distinct(x)` becomes a call of [`DISTINCT`], which gives the same result in linear time for
//! strings, numbers, booleans and null, and looks at the run's cancellation while it compares
//! arrays and objects (jsonata-core compares every pair, and nothing stops it).
//! Calls with placeholders (partial applications) and calls with fewer arguments than the
//! context-filling forms need are left alone.
//!
//! And one rewrite that drops work: `$count($split(x, "sep"))`, the idiom for counting lines (the count_files example
//! counts a directory listing this way), becomes a call of [`COUNT_SPLIT`], a host function the
//! runtime registers in every evaluator. It counts the separators in a string instead of
//! building one string per piece and an array to hold them, which jsonata-core does one heap
//! allocation at a time. For any value but a string it evaluates the original
//! `$count($split(x, sep))`, so undefined, numbers, arrays and their errors are exactly as
//! before. The rewrite is skipped wherever `$count` or `$split` could mean something other than
//! the built-ins (the expression binds or references a variable of either name).

use jsonata_core::ast::{AstNode, BinaryOp, PathStep, Stage};

/// The host function the fused call invokes: `(x, separator)` with a non-empty string literal as
/// separator. Not a name a graph can bind by accident (the rewrite is skipped if it does).
pub const COUNT_SPLIT: &str = "__mcpgraph_count_split";

/// `$pad`'s width passed through a check: `(width)`.
pub const PAD_WIDTH: &str = "__mcpgraph_pad_width";
/// `$string`'s value passed through a check: `(value)`.
pub const STRING_ARG: &str = "__mcpgraph_string_arg";
/// `$join`'s array passed through a check: `(array, separator?)`.
pub const JOIN_ARG: &str = "__mcpgraph_join_arg";
/// `$replace`'s string passed through a check: `(string, pattern, replacement, limit?)`.
pub const REPLACE_ARG: &str = "__mcpgraph_replace_arg";
/// `$distinct(array)`, whole: jsonata-core's is quadratic and cannot be interrupted.
pub const DISTINCT: &str = "__mcpgraph_distinct";
/// `a & b` inside a function body: `(a, b)`.
pub const CONCAT: &str = "__mcpgraph_concat";

/// What a check is given in place of an argument it does not see (one that is neither a
/// literal nor a variable): `false`, which no checked argument can be, so the check can tell.
pub const UNSEEN: AstNode = AstNode::Boolean(false);

/// Every host function a rewrite may call. Their names start with `__mcpgraph_`; an expression
/// that binds or mentions such a name itself is not rewritten at all.
pub const HOST_FUNCTIONS: &[&str] = &[
    COUNT_SPLIT,
    DISTINCT,
    PAD_WIDTH,
    STRING_ARG,
    JOIN_ARG,
    REPLACE_ARG,
    CONCAT,
];
const RESERVED_PREFIX: &str = "__mcpgraph_";

/// Which rewrites an expression allows: each is skipped where a name it involves could mean
/// something other than the built-in (the expression binds or references a variable of it).
struct Allowed {
    count_split: bool,
    pad: bool,
    string: bool,
    join: bool,
    replace: bool,
    distinct: bool,
}

/// Applies every rewrite to `ast` that the expression's own names allow.
pub fn fuse(mut ast: AstNode) -> AstNode {
    let mut names: Vec<String> = Vec::new();
    visit(&mut ast, &mut |node| match node {
        AstNode::Variable(name) => names.push(name.clone()),
        AstNode::Lambda { params, .. } => names.extend(params.iter().cloned()),
        AstNode::Function { name, .. } if name.starts_with(RESERVED_PREFIX) => {
            names.push(name.clone())
        }
        _ => {}
    });
    visit_steps(&mut ast, &mut |step| {
        names.extend(
            [&step.focus, &step.index_var]
                .into_iter()
                .flatten()
                .cloned(),
        );
    });
    if names.iter().any(|n| n.starts_with(RESERVED_PREFIX)) {
        return ast;
    }
    let free = |name: &str| !names.iter().any(|n| n == name);
    let allowed = Allowed {
        count_split: free("count") && free("split"),
        pad: free("pad"),
        string: free("string"),
        join: free("join"),
        replace: free("replace"),
        distinct: free("distinct"),
    };
    rewrite(&mut ast, &allowed, false);
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

fn rewrite(node: &mut AstNode, allowed: &Allowed, in_function: bool) {
    if allowed.count_split
        && let Some((subject, separator)) = count_split_operands(node)
    {
        *node = AstNode::Function {
            name: COUNT_SPLIT.to_string(),
            args: vec![subject.clone(), AstNode::String(separator.to_string())],
            is_builtin: true,
        };
    }
    match node {
        AstNode::Function {
            name,
            args,
            is_builtin: true,
        } if !args.iter().any(|a| matches!(a, AstNode::Placeholder)) => {
            match (name.as_str(), args.len()) {
                ("pad", 2 | 3) if allowed.pad => check_argument(args, 1, PAD_WIDTH, &[]),
                ("string", 1 | 2) if allowed.string => check_argument(args, 0, STRING_ARG, &[]),
                ("join", 1) if allowed.join => check_argument(args, 0, JOIN_ARG, &[]),
                ("join", 2) if allowed.join => check_argument(args, 0, JOIN_ARG, &[1]),
                ("replace", 3) if allowed.replace => check_argument(args, 0, REPLACE_ARG, &[1, 2]),
                ("replace", 4) if allowed.replace => {
                    check_argument(args, 0, REPLACE_ARG, &[1, 2, 3])
                }
                ("distinct", 1) if allowed.distinct => *name = DISTINCT.to_string(),
                _ => {}
            }
        }
        AstNode::Binary {
            op: BinaryOp::Concatenate,
            lhs,
            rhs,
        } if in_function => {
            let args = vec![
                std::mem::replace(&mut **lhs, AstNode::Null),
                std::mem::replace(&mut **rhs, AstNode::Null),
            ];
            *node = AstNode::Function {
                name: CONCAT.to_string(),
                args,
                is_builtin: true,
            };
        }
        _ => {}
    }
    let in_function = in_function || matches!(node, AstNode::Lambda { .. });
    children_mut(node, &mut |child| rewrite(child, allowed, in_function));
}

/// Wraps argument `index` of a call in `check`, which also gets the arguments `others` when it
/// may evaluate them again (literals and variables), [`UNSEEN`] in their place otherwise.
fn check_argument(args: &mut [AstNode], index: usize, check: &str, others: &[usize]) {
    let seen: Vec<AstNode> = others
        .iter()
        .map(|&k| match &args[k] {
            a @ (AstNode::String(_)
            | AstNode::Number(_)
            | AstNode::Boolean(_)
            | AstNode::Null
            | AstNode::Regex { .. }
            | AstNode::Variable(_)) => a.clone(),
            a @ AstNode::Path { steps } if steps.iter().all(plain_step) => a.clone(),
            _ => UNSEEN,
        })
        .collect();
    let checked = std::mem::replace(&mut args[index], AstNode::Null);
    args[index] = AstNode::Function {
        name: check.to_string(),
        args: std::iter::once(checked).chain(seen).collect(),
        is_builtin: true,
    };
}

/// A step of a path such as `$.entry.text`: a name (or `$`), with no predicate or binding, so
/// evaluating the path again costs a few lookups and gives the same value.
fn plain_step(step: &PathStep) -> bool {
    matches!(&step.node, AstNode::Name(_) | AstNode::Variable(_))
        && step.stages.is_empty()
        && step.focus.is_none()
        && step.index_var.is_none()
        && step.ancestor_label.is_none()
}

/// The names the (rewritten) tree calls, refers to as `$name` or has as a field: every function
/// call by name, every variable (bound or free) and every field name, anywhere in it.
pub fn mentioned_names(ast: &AstNode) -> Vec<String> {
    let mut ast = ast.clone();
    let mut names = Vec::new();
    visit(&mut ast, &mut |node| {
        if let AstNode::Function { name, .. } | AstNode::Variable(name) | AstNode::Name(name) = node
        {
            names.push(name.clone());
        }
    });
    names
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
        calls(source, COUNT_SPLIT)
    }

    /// Whether the rewritten `source` calls host function `host`.
    fn calls(source: &str, host: &str) -> bool {
        let mut ast = fuse(jsonata_core::parser::parse(source).unwrap());
        let mut found = false;
        visit(&mut ast, &mut |n| {
            found |= matches!(n, AstNode::Function { name, .. } if name == host)
        });
        found
    }

    #[test]
    fn size_checks_wrap_the_builtins_that_can_grow_a_value() {
        assert!(calls(r#"$pad(s, 5)"#, PAD_WIDTH));
        assert!(calls(r#"$pad(s, n, "-")"#, PAD_WIDTH));
        assert!(calls(r#"$string(o)"#, STRING_ARG));
        assert!(calls(r#"$join(xs, ", ")"#, JOIN_ARG));
        assert!(calls(r#"$replace(s, "x", $.entry.t)"#, REPLACE_ARG));
        assert!(calls(r#"$replace(s, /x+/, "y", 2)"#, REPLACE_ARG));
        assert!(calls(r#"function($s) { $s & $s }"#, CONCAT));
        assert!(calls(r#"$distinct(xs)"#, DISTINCT));
        // Outside a function body `&` runs a bounded number of times: left to the node check.
        assert!(!calls(r#""Hello " & name"#, CONCAT));
        // Partial applications, context-filling forms and rebound names are left alone.
        assert!(!calls(r#"$pad(?, 5)"#, PAD_WIDTH));
        assert!(!calls(r#"$pad(5)"#, PAD_WIDTH));
        assert!(!calls(r#"$replace("a", "b")"#, REPLACE_ARG));
        assert!(!calls(
            r#"($pad := function($a, $b) { $a }; $pad(s, 5))"#,
            PAD_WIDTH
        ));
        assert!(!calls(r#"($__mcpgraph_x := 1; $pad(s, 5))"#, PAD_WIDTH));
    }

    #[test]
    fn a_check_sees_only_the_arguments_it_may_evaluate_again() {
        let mut ast = fuse(jsonata_core::parser::parse(r#"$join(xs, $f(1))"#).unwrap());
        let mut seen = Vec::new();
        visit(&mut ast, &mut |n| {
            if let AstNode::Function { name, args, .. } = n
                && name == JOIN_ARG
            {
                seen = args.clone();
            }
        });
        assert_eq!(seen.len(), 2);
        assert!(
            matches!(seen[1], AstNode::Boolean(false)),
            "a call is not evaluated twice"
        );
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
