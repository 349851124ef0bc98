//! JSON Logic rules, parsed once into an operator tree.
//!
//! The reading of a rule follows json-logic-js 2.0.5's `apply`: an array is a list of rules, an
//! object with exactly one key is an operation, anything else is a literal. Unknown operators
//! become `Rule::Unknown`, which fails only if evaluated (as in json-logic-js), while the compiler
//! reports every one of them before anything runs.

use crate::expr::Expr;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    Eq,
    StrictEq,
    NotEq,
    StrictNotEq,
    Gt,
    Ge,
    Lt,
    Le,
    Not,
    NotNot,
    Or,
    And,
    If,
    In,
    Cat,
    Substr,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Min,
    Max,
    Merge,
    Map,
    Filter,
    Reduce,
    All,
    Some,
    None,
    Missing,
    MissingSome,
    Var,
    Log,
}

pub const OPERATORS: &[(&str, Op)] = &[
    ("==", Op::Eq),
    ("===", Op::StrictEq),
    ("!=", Op::NotEq),
    ("!==", Op::StrictNotEq),
    (">", Op::Gt),
    (">=", Op::Ge),
    ("<", Op::Lt),
    ("<=", Op::Le),
    ("!", Op::Not),
    ("!!", Op::NotNot),
    ("or", Op::Or),
    ("and", Op::And),
    ("if", Op::If),
    ("?:", Op::If),
    ("in", Op::In),
    ("cat", Op::Cat),
    ("substr", Op::Substr),
    ("+", Op::Add),
    ("-", Op::Sub),
    ("*", Op::Mul),
    ("/", Op::Div),
    ("%", Op::Mod),
    ("min", Op::Min),
    ("max", Op::Max),
    ("merge", Op::Merge),
    ("map", Op::Map),
    ("filter", Op::Filter),
    ("reduce", Op::Reduce),
    ("all", Op::All),
    ("some", Op::Some),
    ("none", Op::None),
    ("missing", Op::Missing),
    ("missing_some", Op::MissingSome),
    ("var", Op::Var),
    ("log", Op::Log),
];

impl Op {
    pub fn name(self) -> &'static str {
        OPERATORS
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("?", |(name, _)| name)
    }
    /// Operators whose second argument is evaluated once per item, with the item as data.
    pub fn is_iterator(self) -> bool {
        matches!(
            self,
            Op::Map | Op::Filter | Op::Reduce | Op::All | Op::Some | Op::None
        )
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Rule {
    /// A value returned as is: a scalar, or an object that is not an operation.
    Literal(Value),
    Array(Vec<Rule>),
    Op {
        op: Op,
        args: Vec<Rule>,
    },
    /// A graph-level `{"var": "<JSONata>"}`: evaluated against the graph context.
    Jsonata(Expr),
    /// An unrecognized operation; evaluating it fails like json-logic-js does.
    Unknown(String),
}

/// One step of the path from a rule's root to a part of it, to locate problems in the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone)]
pub enum Problem {
    UnknownOperator(String),
    /// A graph-level var whose operand is not a string.
    VarNotString(&'static str),
    /// A graph-level var whose JSONata does not parse: (expression, message).
    VarSyntax(String, String),
}

/// How `var` reads data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarMode {
    /// Standard JSON Logic: dotted paths into the data (the compatibility suites).
    Standard,
    /// mcpGraph: outside iterator bodies, a var string is JSONata over the graph context.
    Graph,
}

/// Parses a rule. Problems are returned with the path to where they are; the tree is always built.
pub fn parse(rule: &Value, mode: VarMode) -> (Rule, Vec<(Vec<PathStep>, Problem)>) {
    let mut problems = Vec::new();
    let mut path = Vec::new();
    let tree = parse_at(rule, mode == VarMode::Graph, &mut path, &mut problems);
    (tree, problems)
}

fn parse_at(
    rule: &Value,
    graph_vars: bool,
    path: &mut Vec<PathStep>,
    problems: &mut Vec<(Vec<PathStep>, Problem)>,
) -> Rule {
    match rule {
        Value::Array(items) => Rule::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    path.push(PathStep::Index(i));
                    let r = parse_at(item, graph_vars, path, problems);
                    path.pop();
                    r
                })
                .collect(),
        ),
        Value::Object(map) if map.len() == 1 => {
            let Some((name, operand)) = map.iter().next() else {
                return Rule::Literal(rule.clone());
            };
            path.push(PathStep::Key(name.clone()));
            let parsed = parse_operation(name, operand, graph_vars, path, problems);
            path.pop();
            parsed
        }
        other => Rule::Literal(other.clone()),
    }
}

fn parse_operation(
    name: &str,
    operand: &Value,
    graph_vars: bool,
    path: &mut Vec<PathStep>,
    problems: &mut Vec<(Vec<PathStep>, Problem)>,
) -> Rule {
    let Some(op) = OPERATORS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, op)| *op)
    else {
        problems.push((path.clone(), Problem::UnknownOperator(name.to_string())));
        return Rule::Unknown(name.to_string());
    };
    if op == Op::Var && graph_vars {
        return graph_var(operand, path, problems);
    }
    // json-logic-js: a non-array operand is a one-element argument list.
    let (operands, wrapped): (Vec<&Value>, bool) = match operand {
        Value::Array(items) => (items.iter().collect(), false),
        single => (vec![single], true),
    };
    let args = operands
        .into_iter()
        .enumerate()
        .map(|(i, arg)| {
            if !wrapped {
                path.push(PathStep::Index(i));
            }
            // Inside an iterator body the data is the current item, so `var` is item-relative.
            let body = op.is_iterator() && i == 1;
            let r = parse_at(arg, graph_vars && !body, path, problems);
            if !wrapped {
                path.pop();
            }
            r
        })
        .collect();
    Rule::Op { op, args }
}

fn graph_var(
    operand: &Value,
    path: &mut [PathStep],
    problems: &mut Vec<(Vec<PathStep>, Problem)>,
) -> Rule {
    let text = match operand {
        Value::String(s) => s,
        // `{"var": ["expr"]}` is the same var as `{"var": "expr"}` in json-logic-js.
        Value::Array(items) if items.len() == 1 && items[0].is_string() => {
            let mut at = path.to_vec();
            at.push(PathStep::Index(0));
            return match items[0].as_str() {
                Some(s) => jsonata_var(s, at, problems),
                None => Rule::Literal(Value::Null),
            };
        }
        other => {
            let found = match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
                Value::String(_) => "a string",
            };
            problems.push((path.to_vec(), Problem::VarNotString(found)));
            return Rule::Unknown("var".into());
        }
    };
    jsonata_var(text, path.to_vec(), problems)
}

fn jsonata_var(
    text: &str,
    at: Vec<PathStep>,
    problems: &mut Vec<(Vec<PathStep>, Problem)>,
) -> Rule {
    match Expr::parse(text) {
        Ok(expr) => Rule::Jsonata(expr),
        Err(message) => {
            problems.push((at, Problem::VarSyntax(text.to_string(), message)));
            Rule::Unknown("var".into())
        }
    }
}

impl Rule {
    /// The rule as JSON Logic again (for messages and pictures).
    pub fn to_json(&self) -> Value {
        match self {
            Rule::Literal(v) => v.clone(),
            Rule::Array(items) => Value::Array(items.iter().map(Rule::to_json).collect()),
            Rule::Op { op, args } => {
                let mut map = serde_json::Map::new();
                map.insert(
                    op.name().to_string(),
                    Value::Array(args.iter().map(Rule::to_json).collect()),
                );
                Value::Object(map)
            }
            Rule::Jsonata(e) => {
                let mut map = serde_json::Map::new();
                map.insert("var".to_string(), Value::String(e.source.clone()));
                Value::Object(map)
            }
            Rule::Unknown(op) => {
                let mut map = serde_json::Map::new();
                map.insert(op.clone(), Value::Null);
                Value::Object(map)
            }
        }
    }

    /// Every graph-level JSONata var in the rule, to be changed in place.
    pub fn for_each_var_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        match self {
            Rule::Jsonata(e) => f(e),
            Rule::Array(items) | Rule::Op { args: items, .. } => {
                items.iter_mut().for_each(|r| r.for_each_var_mut(f))
            }
            Rule::Literal(_) | Rule::Unknown(_) => {}
        }
    }

    /// Every graph-level JSONata var in the rule.
    pub fn jsonata_vars(&self, out: &mut Vec<Expr>) {
        match self {
            Rule::Jsonata(e) => out.push(e.clone()),
            Rule::Array(items) | Rule::Op { args: items, .. } => {
                items.iter().for_each(|r| r.jsonata_vars(out))
            }
            Rule::Literal(_) | Rule::Unknown(_) => {}
        }
    }
}

/// The text a rule is known by in a generated module's table of compiled rules: two rules with
/// one key evaluate alike.
pub fn rule_key(rule: &Rule) -> String {
    rule.to_json().to_string()
}
