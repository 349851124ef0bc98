//! JSONata expressions as the compiler reads them: parsing (once, at check time), where in the
//! YAML a syntax error is, and which graph names an expression refers to.
//!
//! The IR (`ir.rs`) and JSON Logic (`logic.rs`) both hold expressions; both depend on this module
//! and not on each other.

use crate::diagnostics::Span;
use jsonata_core::ast::AstNode;
use jsonata_core::evaluator::EvaluatorError;
use jsonata_core::value::JValue;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The built-ins compiled code calls with its evaluated arguments (through the runtime, which
/// hands them to jsonata-core's own dispatch): the ones that take values only, never a function
/// to call back, and give the same answer on every call.
pub const VALUE_BUILTINS: &[&str] = &[
    "abs",
    "append",
    "average",
    "base64decode",
    "base64encode",
    "boolean",
    "ceil",
    "contains",
    "count",
    "decodeUrl",
    "decodeUrlComponent",
    "distinct",
    "encodeUrl",
    "encodeUrlComponent",
    "floor",
    "formatBase",
    "formatInteger",
    "formatNumber",
    "join",
    "keys",
    "length",
    "lookup",
    "lowercase",
    "max",
    "merge",
    "min",
    "not",
    "number",
    "pad",
    "parseInteger",
    "power",
    "reverse",
    "round",
    "split",
    "spread",
    "sqrt",
    "string",
    "substring",
    "substringAfter",
    "substringBefore",
    "sum",
    "trim",
    "type",
    "uppercase",
    "zip",
];

/// The history functions the runtime registers with every evaluator (`runtime/src/history.rs`),
/// in one list so that the compiler's analysis and the runtime cannot disagree on the names.
pub const HISTORY_FUNCTIONS: &[&str] = &[
    "previousNode",
    "executionCount",
    "nodeExecution",
    "nodeExecutions",
];

/// Whether `function` is a history function whose first argument names a node
/// (`$previousNode` takes a count instead).
pub fn names_a_node(function: &str) -> bool {
    function != "previousNode" && HISTORY_FUNCTIONS.contains(&function)
}

/// A parsed JSONata expression. The AST is shared between concurrent calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Expr {
    pub source: String,
    pub ast: Arc<AstNode>,
    /// The expression compiled to Rust, when a generated module (`build --native`, `graph!`)
    /// has it: set by the runtime when it loads the graph, never part of the IR's text.
    #[serde(skip)]
    pub native: Option<NativeFn>,
}

/// What compiled expressions call back: the `$name` variables bound for the evaluation, and the
/// functions the runtime registers (the history functions, the fused built-ins of
/// [`crate::fuse`]). Implemented by the runtime's evaluator.
pub trait NativeHost {
    /// A bound `$name`; undefined when nothing is bound to it.
    fn var(&self, name: &str) -> JValue;
    /// A function the runtime registers, called with its evaluated arguments.
    fn call(&mut self, name: &str, args: &[JValue]) -> Result<JValue, EvaluatorError>;
    /// A built-in function called with its evaluated arguments over `data`, as jsonata-core
    /// calls it (its argument checks, coercions and errors included).
    fn builtin(
        &mut self,
        name: &str,
        args: Vec<JValue>,
        data: &JValue,
    ) -> Result<JValue, EvaluatorError>;
}

/// An expression compiled to Rust: its value against `data` (the whole expression's input),
/// exactly as the interpreter gives it.
pub type NativeFn = fn(&mut dyn NativeHost, &JValue) -> Result<JValue, EvaluatorError>;

/// A JSON Logic rule compiled to Rust, with its graph-level vars evaluated through the host.
pub type NativeRuleFn = fn(&mut dyn NativeHost, &JValue) -> Result<JValue, RuleFailure>;

/// Why a compiled rule failed: json-logic-js's own failure in its words, or a graph-level
/// `var` whose JSONata failed (with that expression's source).
#[derive(Debug)]
pub enum RuleFailure {
    Rule(String),
    Var {
        error: EvaluatorError,
        source: &'static str,
    },
}

impl Expr {
    /// Parses an expression (with the rewrites of [`crate::fuse`]); the error text is
    /// jsonata-core's message.
    pub fn parse(source: &str) -> Result<Expr, String> {
        jsonata_core::parser::parse(source)
            .map(|ast| Expr {
                source: source.to_string(),
                ast: Arc::new(crate::fuse::fuse(ast)),
                native: None,
            })
            .map_err(|e| readable_parse_error(&e.to_string()))
    }
}

/// jsonata-core names tokens by their Rust variant (`RightBrace`); show the symbol the user typed,
/// as jsonata-js does (`The symbol "}" cannot be used as a unary operator`).
pub fn readable_parse_error(message: &str) -> String {
    const SYMBOLS: &[(&str, &str)] = &[
        ("LessThanOrEqual", "<="),
        ("GreaterThanOrEqual", ">="),
        ("QuestionQuestion", "??"),
        ("QuestionColon", "?:"),
        ("ColonEqual", ":="),
        ("TildeArrow", "~>"),
        ("LeftParen", "("),
        ("RightParen", ")"),
        ("LeftBracket", "["),
        ("RightBracket", "]"),
        ("LeftBrace", "{"),
        ("RightBrace", "}"),
        ("StarStar", "**"),
        ("NotEqual", "!="),
        ("LessThan", "<"),
        ("GreaterThan", ">"),
        ("Semicolon", ";"),
        ("Ampersand", "&"),
        ("Question", "?"),
        ("Percent", "%"),
        ("DotDot", ".."),
        ("Comma", ","),
        ("Colon", ":"),
        ("Caret", "^"),
        ("Equal", "="),
        ("Slash", "/"),
        ("Minus", "-"),
        ("Plus", "+"),
        ("Star", "*"),
        ("Pipe", "|"),
        ("Hash", "#"),
        ("Dot", "."),
        ("At", "@"),
    ];
    let mut out = String::with_capacity(message.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        match SYMBOLS.iter().find(|(name, _)| *name == word.as_str()) {
            Some((_, symbol)) => out.push_str(&format!("\"{symbol}\"")),
            None => out.push_str(word),
        }
        word.clear();
    };
    for c in message.chars() {
        if c.is_ascii_alphabetic() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Byte position in `expr` of a syntax error, found by re-parsing prefixes: the parser reads left
/// to right, so the shortest prefix failing with the same message ends at the offending token.
/// Errors about the end of input are at the end.
pub fn error_position(expr: &str, message: &str) -> Option<usize> {
    if message.contains("end of expression")
        || message.contains("must be terminated")
        || message.contains("Unclosed")
    {
        return Some(expr.trim_end().len());
    }
    let mut ends: Vec<usize> = expr.char_indices().map(|(i, c)| i + c.len_utf8()).collect();
    ends.dedup();
    for end in ends {
        if let Err(e) = Expr::parse(&expr[..end])
            && e == message
        {
            // Point at the start of the token that ends there.
            let before = &expr[..end];
            let last = before.chars().last()?;
            let start = if last.is_alphanumeric() || last == '_' {
                before
                    .char_indices()
                    .rev()
                    .take_while(|(_, c)| c.is_alphanumeric() || *c == '_' || *c == '$')
                    .last()
                    .map_or(end - last.len_utf8(), |(i, _)| i)
            } else {
                end - last.len_utf8()
            };
            return Some(start);
        }
    }
    None
}

/// The span in the file of byte `pos` of an expression written as the scalar at `scalar`, when
/// the scalar is written on one line and without escapes (so positions map one to one).
pub fn inner_span(source: &str, scalar: Span, expr: &str, pos: usize) -> Option<Span> {
    let written = source.get(scalar.start..scalar.end)?;
    if written.contains('\n') {
        return None;
    }
    let body_start = if written == expr {
        scalar.start
    } else if (written.starts_with('\'')
        && !written[1..written.len().saturating_sub(1)].contains("''")
        || written.starts_with('"') && !written.contains('\\'))
        && written.len() >= 2
        && &written[1..written.len() - 1] == expr
    {
        scalar.start + 1
    } else if source
        .get(scalar.start..)
        .is_some_and(|s| s.starts_with(expr))
    {
        scalar.start
    } else if source
        .get(scalar.start + 1..)
        .is_some_and(|s| s.starts_with(expr))
        && matches!(source.as_bytes().get(scalar.start), Some(b'"' | b'\''))
    {
        scalar.start + 1
    } else {
        return None;
    };
    let start = body_start + pos;
    let len = expr[pos..].chars().next().map_or(0, char::len_utf8);
    Some(Span::new(start, start + len.max(1)))
}

/// What an expression refers to in the graph context.
pub enum Reference {
    /// A history function called with a literal node name: (function, name).
    History(String, String),
    /// The first step of a path from the context root.
    Root(String),
}

/// Root-level references of an expression. Only the first step of a top-level path reads the
/// graph context; names inside later steps, predicates and lambdas are relative to something else.
pub fn references(ast: &AstNode, out: &mut Vec<Reference>) {
    match ast {
        AstNode::Name(name) => out.push(Reference::Root(name.clone())),
        AstNode::Path { steps } => {
            let mut steps = steps.iter();
            let first = steps.next();
            match first.map(|s| &s.node) {
                Some(AstNode::Name(name)) => out.push(Reference::Root(name.clone())),
                Some(AstNode::Variable(v)) if v.is_empty() => {
                    if let Some(AstNode::Name(name)) = steps.next().map(|s| &s.node) {
                        out.push(Reference::Root(name.clone()));
                    }
                }
                Some(other) => references(other, out),
                None => {}
            }
        }
        AstNode::Function { name, args, .. } => {
            if names_a_node(name)
                && let Some(AstNode::String(node)) = args.first()
            {
                out.push(Reference::History(name.clone(), node.clone()));
            }
            args.iter().for_each(|a| references(a, out));
        }
        AstNode::Binary { lhs, rhs, .. } => {
            references(lhs, out);
            references(rhs, out);
        }
        AstNode::Unary { operand, .. } => references(operand, out),
        AstNode::Array(items) | AstNode::Block(items) => {
            items.iter().for_each(|i| references(i, out))
        }
        AstNode::Object(pairs) => pairs.iter().for_each(|(k, v)| {
            references(k, out);
            references(v, out);
        }),
        AstNode::Conditional {
            condition,
            then_branch,
            else_branch,
        } => {
            references(condition, out);
            references(then_branch, out);
            if let Some(e) = else_branch {
                references(e, out);
            }
        }
        _ => {}
    }
}

/// Where an expression uses a variable of `names` that it does not bind itself: (name, byte
/// position of its `$` in `source`), in source order. A variable is bound by a lambda's
/// parameters (in its body), by `$x := …` (in the rest of the enclosing block), and by `@$x` and
/// `#$x` (in the rest of the path). Expressions that do not parse give nothing.
///
/// jsonata-core's tree has no positions, so the walk lists every mention of the names (uses and
/// bindings) in source order and pairs it with the `$name` tokens of the text; when the two
/// counts differ (a form the walk orders differently), each free use is placed at the first
/// token of its name, which is still the right variable in the right expression.
pub fn free_variables(source: &str, names: &[&str]) -> Vec<(String, usize)> {
    if !names.iter().any(|n| source.contains(&format!("${n}"))) {
        return Vec::new();
    }
    // The tree before our rewrites (crate::fuse), which may evaluate an argument twice.
    let Ok(ast) = jsonata_core::parser::parse(source) else {
        return Vec::new();
    };
    let mut walk = ScopeWalk {
        names,
        frames: vec![Vec::new()],
        mentions: Vec::new(),
    };
    walk.node(&ast);
    let tokens = variable_tokens(source, names);
    let paired = walk.mentions.len() == tokens.len()
        && walk
            .mentions
            .iter()
            .zip(&tokens)
            .all(|((name, _), (token, _))| name == token);
    let mut out = Vec::new();
    for (i, (name, free)) in walk.mentions.iter().enumerate() {
        if !free {
            continue;
        }
        let at = if paired {
            Some(tokens[i].1)
        } else {
            tokens.iter().find(|(t, _)| t == name).map(|(_, p)| *p)
        };
        if let Some(at) = at
            && !out.iter().any(|(n, p)| n == name && *p == at)
        {
            out.push((name.clone(), at));
        }
    }
    out
}

struct ScopeWalk<'a> {
    names: &'a [&'a str],
    frames: Vec<Vec<String>>,
    /// (name, whether free), for uses and bindings, in source order.
    mentions: Vec<(String, bool)>,
}

impl ScopeWalk<'_> {
    fn tracked(&self, name: &str) -> bool {
        self.names.contains(&name)
    }

    fn bound(&self, name: &str) -> bool {
        self.frames.iter().any(|f| f.iter().any(|n| n == name))
    }

    fn use_(&mut self, name: &str) {
        if self.tracked(name) {
            let free = !self.bound(name);
            self.mentions.push((name.to_string(), free));
        }
    }

    fn bind(&mut self, name: &str) {
        if self.tracked(name) {
            self.mentions.push((name.to_string(), false));
        }
        if let Some(frame) = self.frames.last_mut() {
            frame.push(name.to_string());
        }
    }

    fn node(&mut self, ast: &AstNode) {
        use jsonata_core::ast::{BinaryOp, Stage};
        match ast {
            AstNode::Variable(v) => self.use_(v),
            AstNode::Function {
                name,
                args,
                is_builtin,
            } => {
                if *is_builtin {
                    self.use_(name);
                }
                args.iter().for_each(|a| self.node(a));
            }
            AstNode::Call { procedure, args } => {
                self.node(procedure);
                args.iter().for_each(|a| self.node(a));
            }
            AstNode::Lambda { params, body, .. } => {
                self.frames.push(Vec::new());
                params.iter().for_each(|p| self.bind(p));
                self.node(body);
                self.frames.pop();
            }
            AstNode::Binary {
                op: BinaryOp::ColonEqual,
                lhs,
                rhs,
            } => match &**lhs {
                AstNode::Variable(v) => {
                    // The binding is written first but takes effect after its value.
                    if self.tracked(v) {
                        self.mentions.push((v.clone(), false));
                    }
                    self.node(rhs);
                    if let Some(frame) = self.frames.last_mut() {
                        frame.push(v.clone());
                    }
                }
                other => {
                    self.node(other);
                    self.node(rhs);
                }
            },
            AstNode::Binary { lhs, rhs, .. } => {
                self.node(lhs);
                self.node(rhs);
            }
            AstNode::Unary { operand, .. } => self.node(operand),
            AstNode::Block(items) => {
                self.frames.push(Vec::new());
                items.iter().for_each(|i| self.node(i));
                self.frames.pop();
            }
            AstNode::Array(items) | AstNode::ArrayGroup(items) => {
                items.iter().for_each(|i| self.node(i))
            }
            AstNode::Object(pairs) => pairs.iter().for_each(|(k, v)| {
                self.node(k);
                self.node(v);
            }),
            AstNode::ObjectTransform { input, pattern } => {
                self.node(input);
                pattern.iter().for_each(|(k, v)| {
                    self.node(k);
                    self.node(v);
                });
            }
            AstNode::Path { steps } => {
                self.frames.push(Vec::new());
                for step in steps {
                    self.node(&step.node);
                    if let Some(focus) = &step.focus {
                        self.bind(focus);
                    }
                    if let Some(index) = &step.index_var {
                        self.bind(index);
                    }
                    for stage in &step.stages {
                        match stage {
                            Stage::Filter(e) => self.node(e),
                            Stage::Index(name) => self.bind(name),
                            Stage::KeepArray => {}
                        }
                    }
                }
                self.frames.pop();
            }
            AstNode::Conditional {
                condition,
                then_branch,
                else_branch,
            } => {
                self.node(condition);
                self.node(then_branch);
                if let Some(e) = else_branch {
                    self.node(e);
                }
            }
            AstNode::FunctionApplication(e) => self.node(e),
            AstNode::Sort { input, terms } => {
                self.node(input);
                terms.iter().for_each(|(t, _)| self.node(t));
            }
            AstNode::Transform {
                location,
                update,
                delete,
            } => {
                self.node(location);
                self.node(update);
                if let Some(d) = delete {
                    self.node(d);
                }
            }
            _ => {}
        }
    }
}

/// The `$name` tokens of `names` in an expression's text, outside string literals, backquoted
/// names and comments: (name, byte position of the `$`).
fn variable_tokens(source: &str, names: &[&str]) -> Vec<(String, usize)> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            quote @ (b'"' | b'\'' | b'`') => {
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    i += if bytes[i] == b'\\' && quote != b'`' {
                        2
                    } else {
                        1
                    };
                }
                i += 1;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = source[i + 2..]
                    .find("*/")
                    .map_or(bytes.len(), |e| i + 2 + e + 2);
            }
            b'$' => {
                let start = i;
                i += 1;
                if bytes.get(i) == Some(&b'$') {
                    i += 1;
                    continue;
                }
                let end = source[i..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .map_or(source.len(), |e| i + e);
                let name = &source[i..end];
                if names.contains(&name) {
                    out.push((name.to_string(), start));
                }
                i = end.max(i);
            }
            _ => i += 1,
        }
    }
    out
}
