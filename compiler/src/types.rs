//! The types of values a graph passes between nodes, as far as the compiler can know them.
//!
//! A type is read from a JSON Schema (a tool's `inputSchema`, a locked downstream tool's
//! `outputSchema`, an ask's schema) or inferred from a JSONata expression. Anything not understood
//! is [`Type::Unknown`], and `Unknown` never produces a diagnostic: every check built on types
//! warns only about what is certain under the types it was given.
//!
//! JSONata's sequences (a path over an array yields an array, or one value, or nothing) are not
//! modelled: a path through an array checks each step against the element type and yields
//! `Unknown`.

use crate::diagnostics::did_you_mean;
use jsonata_core::ast::{AstNode, BinaryOp, Stage, UnaryOp};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Type {
    #[default]
    Unknown,
    Null,
    Boolean,
    Number,
    String,
    Array(Box<Type>),
    Object(ObjectType),
    /// Two or more members, none `Unknown`, none a union.
    Union(Vec<Type>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectType {
    /// In the order written.
    pub properties: Vec<Property>,
    pub keys: Keys,
    /// Where the type comes from, for messages: "inputSchema of tool `greet`".
    pub origin: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    pub name: String,
    pub ty: Type,
    /// Always present (a schema's `required`, a constructor's key).
    pub required: bool,
}

/// What is known of an object's keys besides its properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Keys {
    /// Built by an object constructor with literal keys: no other key exists.
    Exact,
    /// Declared by an open schema: other keys may exist, but none is documented.
    Declared,
    /// A schema with `additionalProperties: false`: no other key is allowed.
    Closed,
    /// Any key (computed keys, `additionalProperties` with a schema, no `properties`).
    Any,
}

/// Types nest at most this deep; deeper parts are `Unknown` (a loop that wraps its own output in
/// an object would otherwise grow without end).
const MAX_DEPTH: usize = 8;
/// Unions with more members are `Unknown`.
const MAX_MEMBERS: usize = 12;
/// Types built by expressions with more parts are `Unknown`: an object built of copies of
/// another object, over a chain of nodes, would otherwise grow exponentially (a hostile graph
/// must still check fast, in bounded memory).
const MAX_SIZE: usize = 128;
/// Types read from a schema may be larger (a tool with many documented properties).
const MAX_SCHEMA_SIZE: usize = 2048;

impl Type {
    pub fn is_unknown(&self) -> bool {
        matches!(self, Type::Unknown)
    }

    /// The number of parts of the type, counted up to `limit` (then `limit + 1`).
    fn size(&self, limit: usize) -> usize {
        let mut count = 0;
        let mut stack = vec![self];
        while let Some(t) = stack.pop() {
            count += 1;
            if count > limit {
                break;
            }
            match t {
                Type::Array(item) => stack.push(item),
                Type::Object(o) => stack.extend(o.properties.iter().map(|p| &p.ty)),
                Type::Union(members) => stack.extend(members.iter()),
                _ => {}
            }
        }
        count
    }

    /// `Unknown` when the type has more than [`MAX_SIZE`] parts.
    fn bounded(self) -> Type {
        self.bounded_to(MAX_SIZE)
    }

    fn bounded_to(self, limit: usize) -> Type {
        if self.size(limit) > limit {
            Type::Unknown
        } else {
            self
        }
    }

    /// The union of two types (`Unknown` absorbs everything).
    pub fn or(self, other: Type) -> Type {
        Type::union([self, other])
    }

    pub fn union(types: impl IntoIterator<Item = Type>) -> Type {
        let mut members: Vec<Type> = Vec::new();
        // Past the cap the result is `Unknown` whatever follows: stop comparing (a union of
        // thousands of distinct types would be quadratic).
        let add = |m: Type, members: &mut Vec<Type>| {
            if !members.contains(&m) {
                members.push(m);
            }
            members.len() <= MAX_MEMBERS
        };
        for t in types {
            match t {
                Type::Unknown => return Type::Unknown,
                Type::Union(inner) => {
                    for m in inner {
                        if !add(m, &mut members) {
                            return Type::Unknown;
                        }
                    }
                }
                t => {
                    if !add(t, &mut members) {
                        return Type::Unknown;
                    }
                }
            }
        }
        match members.len() {
            0 => Type::Unknown,
            1 => members.pop().unwrap_or_default(),
            n if n > MAX_MEMBERS => Type::Unknown,
            _ => Type::Union(members).bounded_to(MAX_SCHEMA_SIZE),
        }
    }

    pub fn members(&self) -> &[Type] {
        match self {
            Type::Union(members) => members,
            t => std::slice::from_ref(t),
        }
    }

    /// A JSON value's type (an object's keys are exact).
    pub fn of_value(value: &Value, origin: &str) -> Type {
        Type::of_value_at(value, origin, 0).bounded()
    }

    fn of_value_at(value: &Value, origin: &str, depth: usize) -> Type {
        if depth > MAX_DEPTH {
            return Type::Unknown;
        }
        match value {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Boolean,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::Array(items) => Type::Array(Box::new(if items.is_empty() {
                Type::Unknown
            } else {
                Type::union(
                    items
                        .iter()
                        .map(|i| Type::of_value_at(i, origin, depth + 1)),
                )
            })),
            Value::Object(map) => Type::Object(ObjectType {
                properties: map
                    .iter()
                    .map(|(k, v)| Property {
                        name: k.clone(),
                        ty: Type::of_value_at(v, origin, depth + 1),
                        required: true,
                    })
                    .collect(),
                keys: Keys::Exact,
                origin: origin.to_string(),
            }),
        }
    }

    /// The type a JSON Schema describes; `origin` names the schema in messages.
    pub fn from_schema(schema: &Value, origin: &str) -> Type {
        Type::from_schema_at(schema, origin, 0).bounded_to(MAX_SCHEMA_SIZE)
    }

    fn from_schema_at(schema: &Value, origin: &str, depth: usize) -> Type {
        let Some(s) = schema.as_object() else {
            return Type::Unknown;
        };
        if depth > MAX_DEPTH
            || ["$ref", "$dynamicRef", "allOf", "not", "if", "nullable"]
                .iter()
                .any(|k| s.contains_key(*k))
        {
            return Type::Unknown;
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(options) = s.get(key) {
                // Keywords beside the options constrain each of them: not modelled.
                if s.keys().any(|k| {
                    matches!(
                        k.as_str(),
                        "type"
                            | "properties"
                            | "required"
                            | "additionalProperties"
                            | "patternProperties"
                            | "items"
                            | "anyOf"
                            | "oneOf"
                    ) && k != key
                }) {
                    return Type::Unknown;
                }
                return match options.as_array() {
                    Some(options) if !options.is_empty() => Type::union(
                        options
                            .iter()
                            .map(|o| Type::from_schema_at(o, origin, depth + 1)),
                    ),
                    _ => Type::Unknown,
                };
            }
        }
        if let Some(value) = s.get("const") {
            return Type::kind_of(value);
        }
        if let Some(values) = s.get("enum") {
            return match values.as_array() {
                Some(values) if !values.is_empty() => Type::union(values.iter().map(Type::kind_of)),
                _ => Type::Unknown,
            };
        }
        let one = |name: &str| -> Type {
            match name {
                "null" => Type::Null,
                "boolean" => Type::Boolean,
                "number" | "integer" => Type::Number,
                "string" => Type::String,
                "array" => Type::Array(Box::new(s.get("items").map_or(Type::Unknown, |i| {
                    Type::from_schema_at(i, origin, depth + 1)
                }))),
                "object" => Type::object_schema(s, origin, depth),
                _ => Type::Unknown,
            }
        };
        match s.get("type") {
            Some(Value::String(t)) => one(t),
            Some(Value::Array(ts)) if !ts.is_empty() => {
                Type::union(ts.iter().map(|t| t.as_str().map_or(Type::Unknown, one)))
            }
            // `properties` without `type` constrains objects only: anything else passes too.
            _ => Type::Unknown,
        }
    }

    fn object_schema(s: &serde_json::Map<String, Value>, origin: &str, depth: usize) -> Type {
        let required: Vec<&str> = s
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let properties: Vec<Property> = s
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .map(|(name, schema)| Property {
                        name: name.clone(),
                        ty: Type::from_schema_at(schema, origin, depth + 1),
                        required: required.contains(&name.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let keys = if s.contains_key("patternProperties")
            || s.contains_key("propertyNames")
            || s.contains_key("unevaluatedProperties")
            || s.contains_key("dependentSchemas")
        {
            Keys::Any
        } else {
            match s.get("additionalProperties") {
                Some(Value::Bool(false)) => Keys::Closed,
                None | Some(Value::Bool(true)) if s.contains_key("properties") => Keys::Declared,
                _ => Keys::Any,
            }
        };
        Type::Object(ObjectType {
            properties,
            keys,
            origin: origin.to_string(),
        })
    }

    /// A literal's type as a schema's `const`/`enum` means it: the kind only.
    fn kind_of(value: &Value) -> Type {
        match value {
            Value::Null => Type::Null,
            Value::Bool(_) => Type::Boolean,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::Array(_) => Type::Array(Box::new(Type::Unknown)),
            Value::Object(_) => Type::Object(ObjectType {
                properties: Vec::new(),
                keys: Keys::Any,
                origin: String::new(),
            }),
        }
    }

    /// A short name for messages: `string`, `object`, `array of string`, `number or null`.
    pub fn describe(&self) -> String {
        match self {
            Type::Unknown => "unknown".into(),
            Type::Null => "null".into(),
            Type::Boolean => "boolean".into(),
            Type::Number => "number".into(),
            Type::String => "string".into(),
            Type::Array(item) if item.is_unknown() => "array".into(),
            Type::Array(item) => format!("array of {}", item.describe()),
            Type::Object(_) => "object".into(),
            Type::Union(members) => members
                .iter()
                .map(Type::describe)
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }

    /// Whether a value of `self` can be a value of `other`, as far as the kinds go (an integer
    /// schema is a number here; object properties are not compared).
    pub fn may_be(&self, other: &Type) -> bool {
        if self.is_unknown() || other.is_unknown() {
            return true;
        }
        self.members().iter().any(|a| {
            other.members().iter().any(|b| match (a, b) {
                // `[]` is an array of anything.
                (Type::Array(_), Type::Array(_)) => true,
                (Type::Object(_), Type::Object(_)) => true,
                _ => std::mem::discriminant(a) == std::mem::discriminant(b),
            })
        })
    }

    /// The type of the error object a caught failure leaves as a node's output (extensions §3).
    pub fn error_object(node: &str) -> Type {
        let origin = format!("the error object of node `{node}`");
        let prop = |name: &str, ty: Type, required: bool| Property {
            name: name.into(),
            ty,
            required,
        };
        Type::Object(ObjectType {
            properties: vec![prop(
                "error",
                Type::Object(ObjectType {
                    properties: vec![
                        prop("kind", Type::String, true),
                        prop("message", Type::String, true),
                        prop("node", Type::String, true),
                        prop("index", Type::Number, false),
                        prop("branch", Type::String, false),
                        prop("attempts", Type::Number, false),
                    ],
                    keys: Keys::Exact,
                    origin: origin.clone(),
                }),
                true,
            )],
            keys: Keys::Exact,
            origin,
        })
    }

    /// Bounds the depth of a type (deeper parts become `Unknown`).
    pub fn truncated(self, depth: usize) -> Type {
        if depth > MAX_DEPTH {
            return Type::Unknown;
        }
        match self {
            Type::Array(item) => Type::Array(Box::new(item.truncated(depth + 1))),
            Type::Object(mut o) => {
                o.properties = o
                    .properties
                    .into_iter()
                    .map(|mut p| {
                        p.ty = p.ty.truncated(depth + 1);
                        p
                    })
                    .collect();
                Type::Object(o)
            }
            Type::Union(members) => Type::union(members.into_iter().map(|m| m.truncated(depth))),
            t => t,
        }
    }
}

/// What an expression's types say about its reads of the graph context.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// A path reads the output of this node (`$.node…` or `node…`).
    Root(String),
    /// A path step names a property that the value's type does not have.
    MissingProperty {
        /// The names from the root up to the missing one, included: `["entry", "nmae"]`.
        path: Vec<String>,
        /// The type's origin ("inputSchema of tool `greet`").
        origin: String,
        /// A closed schema forbids the property (an error rather than a warning).
        closed: bool,
        suggestion: Option<String>,
        /// The properties the type has (of its first object type).
        known: Vec<String>,
    },
}

/// What an expression is evaluated against.
pub trait Scope {
    /// The output type of a node of the tool, as this expression reads it; `None`: no such node.
    fn node(&self, id: &str) -> Option<Type>;
    /// The type of a variable the graph binds here (`$item`, `$index` in a map's args).
    fn variable(&self, name: &str) -> Option<Type>;
}

/// The type of an expression's value, with what it reads pushed to `findings`.
pub fn infer(ast: &AstNode, scope: &dyn Scope, findings: &mut Vec<Finding>) -> Type {
    let mut rebound = Vec::new();
    bound_names(ast, &mut rebound, 0);
    let mut walk = Infer {
        scope,
        findings,
        frames: Vec::new(),
        rebound,
        depth: 0,
    };
    walk.expr(ast).truncated(0)
}

/// Deeper expressions are not walked: `Unknown`, and no finding (the walk is recursive).
const MAX_EXPR_DEPTH: usize = 200;

struct Infer<'a> {
    scope: &'a dyn Scope,
    findings: &'a mut Vec<Finding>,
    /// Variables bound by `:=` in enclosing blocks.
    frames: Vec<Vec<(String, Type)>>,
    /// The names the expression binds anywhere (`:=`, lambda parameters): a function of that
    /// name may not be the built-in.
    rebound: Vec<String>,
    depth: usize,
}

impl Infer<'_> {
    fn variable(&self, name: &str) -> Type {
        for frame in self.frames.iter().rev() {
            if let Some((_, t)) = frame.iter().rev().find(|(n, _)| n == name) {
                return t.clone();
            }
        }
        self.scope.variable(name).unwrap_or_default()
    }

    fn bind(&mut self, name: &str, t: Type) {
        if self.frames.is_empty() {
            self.frames.push(Vec::new());
        }
        if let Some(frame) = self.frames.last_mut() {
            frame.push((name.to_string(), t));
        }
    }

    /// Walks a part that may not be evaluated (a branch of `?:`, the right side of `and`/`or`):
    /// what it binds may or may not be bound after it, so those variables become unknown.
    fn maybe(&mut self, ast: &AstNode) -> Type {
        if self.frames.is_empty() {
            self.frames.push(Vec::new());
        }
        let before: Vec<usize> = self.frames.iter().map(Vec::len).collect();
        let t = self.expr(ast);
        let mut rebound = Vec::new();
        for (frame, &len) in self.frames.iter_mut().zip(&before) {
            rebound.extend(frame.drain(len..).map(|(n, _)| n));
        }
        for name in rebound {
            self.bind(&name, Type::Unknown);
        }
        t
    }

    /// An expression evaluated against the graph context (`$` is the context).
    fn expr(&mut self, ast: &AstNode) -> Type {
        if self.depth >= MAX_EXPR_DEPTH {
            return Type::Unknown;
        }
        self.depth += 1;
        let t = self.expr_inner(ast);
        self.depth -= 1;
        t
    }

    fn expr_inner(&mut self, ast: &AstNode) -> Type {
        match ast {
            AstNode::String(_) => Type::String,
            AstNode::Number(_) => Type::Number,
            AstNode::Boolean(_) => Type::Boolean,
            AstNode::Null => Type::Null,
            AstNode::Name(name) => self.root(name),
            AstNode::Variable(name) if name.is_empty() => Type::Unknown,
            AstNode::Variable(name) => self.variable(name),
            AstNode::Path { steps } => self.path(steps),
            AstNode::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs),
            AstNode::Unary { op, operand } => {
                self.expr(operand);
                match op {
                    UnaryOp::Negate => Type::Number,
                    UnaryOp::Not => Type::Boolean,
                }
            }
            AstNode::Function { name, args, .. } => {
                for a in args {
                    self.expr(a);
                }
                if self.rebound.iter().any(|n| n == name) {
                    Type::Unknown
                } else {
                    builtin(name)
                }
            }
            AstNode::Array(items) => {
                let mut element = Vec::new();
                for item in items {
                    let t = self.expr(item);
                    element.push(if matches!(item, AstNode::Array(_)) {
                        t
                    } else {
                        // A path's array is appended element by element.
                        flatten(t)
                    });
                }
                Type::Array(Box::new(if element.is_empty() {
                    Type::Unknown
                } else {
                    Type::union(element)
                }))
                .bounded()
            }
            AstNode::Object(pairs) => {
                let mut properties: Vec<Property> = Vec::new();
                let mut keys = Keys::Exact;
                let mut too_big = false;
                for (k, v) in pairs {
                    let t = self.expr(v);
                    match k {
                        AstNode::String(name) if !too_big => {
                            match properties.iter_mut().find(|p| &p.name == name) {
                                // A repeated key: jsonata-js's later value wins, or an error.
                                Some(p) => p.ty = Type::Unknown,
                                None => properties.push(Property {
                                    name: name.clone(),
                                    ty: t,
                                    // A key whose value is undefined is left out.
                                    required: defined(v),
                                }),
                            }
                            too_big = properties.len() > MAX_SIZE;
                        }
                        AstNode::String(_) => {}
                        other => {
                            self.expr(other);
                            keys = Keys::Any;
                        }
                    }
                }
                if too_big {
                    return Type::Unknown;
                }
                Type::Object(ObjectType {
                    properties,
                    keys,
                    origin: "the object built here".into(),
                })
                .bounded()
            }
            AstNode::Block(items) => {
                self.frames.push(Vec::new());
                let mut last = Type::Unknown;
                for item in items {
                    last = self.expr(item);
                }
                self.frames.pop();
                last
            }
            AstNode::Conditional {
                condition,
                then_branch,
                else_branch,
            } => {
                self.expr(condition);
                let then = self.maybe(then_branch);
                match else_branch {
                    Some(e) => {
                        let other = self.maybe(e);
                        then.or(other)
                    }
                    None => then,
                }
            }
            // Functions, regexes, and the operators whose input is not the context.
            _ => Type::Unknown,
        }
    }

    /// The output of node `name`, read from the context root.
    fn root(&mut self, name: &str) -> Type {
        self.findings.push(Finding::Root(name.to_string()));
        self.scope.node(name).unwrap_or_default()
    }

    fn path(&mut self, steps: &[jsonata_core::ast::PathStep]) -> Type {
        let Some((first, rest)) = steps.split_first() else {
            return Type::Unknown;
        };
        let mut names: Vec<String> = Vec::new();
        let (mut current, rest) = match &first.node {
            AstNode::Variable(v) if v.is_empty() && first.stages.is_empty() => {
                match rest.split_first() {
                    Some((second, rest)) => match &second.node {
                        AstNode::Name(name) if plain(second) => {
                            names.push(name.clone());
                            (self.root(name), rest)
                        }
                        _ => return Type::Unknown,
                    },
                    None => return Type::Unknown,
                }
            }
            AstNode::Name(name) if plain(first) => {
                names.push(name.clone());
                (self.root(name), rest)
            }
            AstNode::Name(_) => return Type::Unknown,
            other => {
                if !first.stages.is_empty() || first.focus.is_some() || first.index_var.is_some() {
                    return Type::Unknown;
                }
                // `$item.name`: messages name the variable.
                if let AstNode::Variable(v) = other {
                    names.push(format!("${v}"));
                }
                (self.expr(other), rest)
            }
        };
        for step in rest {
            let AstNode::Name(name) = &step.node else {
                return Type::Unknown;
            };
            if step.focus.is_some() || step.index_var.is_some() || step.is_tuple {
                return Type::Unknown;
            }
            names.push(name.clone());
            current = self.property(current, &names);
            for stage in &step.stages {
                current = match stage {
                    // An index or a filter picks elements: the element type, or the array.
                    Stage::Filter(_) => match current {
                        Type::Array(item) => {
                            let item = *item;
                            item.clone().or(Type::Array(Box::new(item)))
                        }
                        other => other,
                    },
                    Stage::KeepArray | Stage::Index(_) => Type::Unknown,
                };
            }
        }
        current
    }

    /// The type of property `path.last()` of a value of type `of`; reports it when certainly
    /// missing.
    fn property(&mut self, of: Type, path: &[String]) -> Type {
        let Some(name) = path.last() else {
            return Type::Unknown;
        };
        // The objects the value may be, looking through arrays (paths map over them).
        let mut objects: Vec<&ObjectType> = Vec::new();
        let mut other = false;
        let mut unknown = false;
        collect_objects(&of, &mut objects, &mut other, &mut unknown);
        if objects.is_empty() || unknown {
            return Type::Unknown;
        }
        let mut found = Vec::new();
        let mut missing_everywhere = true;
        for o in &objects {
            match o.properties.iter().find(|p| &p.name == name) {
                Some(p) => {
                    missing_everywhere = false;
                    found.push(p.ty.clone());
                }
                None if o.keys == Keys::Any => missing_everywhere = false,
                None => {}
            }
        }
        if missing_everywhere {
            // Built objects and closed schemas have no other key: any name is reported. An open
            // schema allows keys it does not declare: one is reported only when it is very
            // close to a declared one (a typo), with the suggestion.
            let certain = objects
                .iter()
                .all(|o| matches!(o.keys, Keys::Exact | Keys::Closed));
            let suggestion = objects
                .iter()
                .find_map(|o| did_you_mean(name, o.properties.iter().map(|p| p.name.as_str())));
            let close = objects.iter().any(|o| {
                o.properties
                    .iter()
                    .any(|p| strsim::jaro_winkler(name, &p.name) >= TYPO_SIMILARITY)
            });
            if certain || (suggestion.is_some() && close) {
                let first = objects[0];
                self.findings.push(Finding::MissingProperty {
                    path: path.to_vec(),
                    origin: first.origin.clone(),
                    closed: objects.iter().all(|o| o.keys == Keys::Closed),
                    suggestion,
                    known: first.properties.iter().map(|p| p.name.clone()).collect(),
                });
            }
            return Type::Unknown;
        }
        // Through an array, or with something other than an object possible: not modelled.
        if other || found.len() != objects.len() || !matches!(of, Type::Object(_)) {
            return Type::Unknown;
        }
        Type::union(found)
    }

    fn binary(&mut self, op: BinaryOp, lhs: &AstNode, rhs: &AstNode) -> Type {
        if op == BinaryOp::ColonEqual {
            let value = self.expr(rhs);
            if let AstNode::Variable(name) = lhs {
                self.bind(name, value.clone());
            }
            return value;
        }
        self.expr(lhs);
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            // Short-circuit: the right side may not run.
            self.maybe(rhs);
        } else {
            self.expr(rhs);
        }
        match op {
            BinaryOp::Add
            | BinaryOp::Subtract
            | BinaryOp::Multiply
            | BinaryOp::Divide
            | BinaryOp::Modulo => Type::Number,
            BinaryOp::Equal
            | BinaryOp::NotEqual
            | BinaryOp::LessThan
            | BinaryOp::LessThanOrEqual
            | BinaryOp::GreaterThan
            | BinaryOp::GreaterThanOrEqual
            | BinaryOp::In
            | BinaryOp::And
            | BinaryOp::Or => Type::Boolean,
            BinaryOp::Concatenate => Type::String,
            BinaryOp::Range => Type::Array(Box::new(Type::Number)),
            _ => Type::Unknown,
        }
    }
}

/// How close (Jaro-Winkler) an undeclared name must be to a declared one of an open schema to be
/// reported as a typo: `nmae` for `name` (0.93), `contnt` for `content`; not `last_name` for
/// `first_name` (0.83), which a server may well send undocumented.
const TYPO_SIMILARITY: f64 = 0.9;

/// Whether an expression certainly has a value (is never undefined), as far as its form tells:
/// literals, constructors, and operators and functions that always give one.
pub fn defined(ast: &AstNode) -> bool {
    match ast {
        AstNode::String(_)
        | AstNode::Number(_)
        | AstNode::Boolean(_)
        | AstNode::Null
        | AstNode::Object(_)
        | AstNode::Array(_)
        | AstNode::Lambda { .. } => true,
        AstNode::Binary { op, rhs, .. } => match op {
            BinaryOp::Concatenate
            | BinaryOp::Equal
            | BinaryOp::NotEqual
            | BinaryOp::In
            | BinaryOp::And
            | BinaryOp::Or => true,
            BinaryOp::ColonEqual => defined(rhs),
            _ => false,
        },
        AstNode::Function { name, .. } => matches!(name.as_str(), "count" | "exists" | "boolean"),
        AstNode::Conditional {
            then_branch,
            else_branch,
            ..
        } => defined(then_branch) && else_branch.as_deref().is_some_and(defined),
        AstNode::Block(items) => items.last().is_some_and(defined),
        _ => false,
    }
}

/// The names an expression binds anywhere: `$x := …` and lambda parameters.
fn bound_names(ast: &AstNode, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_EXPR_DEPTH {
        return;
    }
    let mut walk = |a: &AstNode| bound_names(a, out, depth + 1);
    match ast {
        AstNode::Binary { op, lhs, rhs } => {
            if *op == BinaryOp::ColonEqual
                && let AstNode::Variable(v) = &**lhs
            {
                walk(rhs);
                out.push(v.clone());
                return;
            }
            walk(lhs);
            walk(rhs);
        }
        AstNode::Lambda { params, body, .. } => {
            walk(body);
            out.extend(params.iter().cloned());
        }
        AstNode::Unary { operand, .. } => walk(operand),
        AstNode::Function { args, .. } => args.iter().for_each(walk),
        AstNode::Call { procedure, args } => {
            walk(procedure);
            args.iter().for_each(walk);
        }
        AstNode::Array(items) | AstNode::Block(items) | AstNode::ArrayGroup(items) => {
            items.iter().for_each(walk)
        }
        AstNode::Object(pairs) => pairs.iter().for_each(|(k, v)| {
            walk(k);
            walk(v);
        }),
        AstNode::ObjectTransform { input, pattern } => {
            walk(input);
            pattern.iter().for_each(|(k, v)| {
                walk(k);
                walk(v);
            });
        }
        AstNode::Conditional {
            condition,
            then_branch,
            else_branch,
        } => {
            walk(condition);
            walk(then_branch);
            if let Some(e) = else_branch {
                walk(e);
            }
        }
        AstNode::Path { steps } => {
            for step in steps {
                walk(&step.node);
                for stage in &step.stages {
                    if let Stage::Filter(e) = stage {
                        walk(e);
                    }
                }
            }
        }
        AstNode::FunctionApplication(e) => walk(e),
        AstNode::Sort { input, terms } => {
            walk(input);
            terms.iter().for_each(|(t, _)| walk(t));
        }
        AstNode::Transform {
            location,
            update,
            delete,
        } => {
            walk(location);
            walk(update);
            if let Some(d) = delete {
                walk(d);
            }
        }
        _ => {}
    }
}

/// A step that is a plain name: no predicate, binding or grouping.
fn plain(step: &jsonata_core::ast::PathStep) -> bool {
    step.stages.is_empty() && step.focus.is_none() && step.index_var.is_none() && !step.is_tuple
}

/// The element type when the value is appended to an array constructor.
fn flatten(t: Type) -> Type {
    Type::union(t.members().iter().map(|m| match m {
        Type::Array(item) => (**item).clone(),
        other => other.clone(),
    }))
}

/// The object types a value of `t` may be (looking through arrays); `other`: it may be
/// something else; `unknown`: it may be anything.
fn collect_objects<'t>(
    t: &'t Type,
    out: &mut Vec<&'t ObjectType>,
    other: &mut bool,
    unknown: &mut bool,
) {
    match t {
        Type::Object(o) => out.push(o),
        Type::Array(item) => collect_objects(item, out, other, unknown),
        Type::Union(members) => members
            .iter()
            .for_each(|m| collect_objects(m, out, other, unknown)),
        Type::Unknown => *unknown = true,
        _ => *other = true,
    }
}

/// The result types of the built-in functions that have one whatever their input (documented in
/// docs/types.md); every other function is `Unknown`.
fn builtin(name: &str) -> Type {
    match name {
        "string" | "substring" | "substringBefore" | "substringAfter" | "uppercase"
        | "lowercase" | "trim" | "pad" | "join" | "formatNumber" | "formatBase"
        | "formatInteger" | "base64encode" | "base64decode" | "encodeUrl"
        | "encodeUrlComponent" | "decodeUrl" | "decodeUrlComponent" | "now" | "fromMillis" => {
            Type::String
        }
        "number" | "abs" | "floor" | "ceil" | "round" | "power" | "sqrt" | "random" | "count"
        | "length" | "sum" | "millis" | "toMillis" | "parseInteger" | "executionCount" => {
            Type::Number
        }
        "boolean" | "not" | "exists" | "contains" => Type::Boolean,
        "split" => Type::Array(Box::new(Type::String)),
        _ => Type::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Nodes(Vec<(&'static str, Type)>);
    impl Scope for Nodes {
        fn node(&self, id: &str) -> Option<Type> {
            self.0
                .iter()
                .find(|(n, _)| *n == id)
                .map(|(_, t)| t.clone())
        }
        fn variable(&self, _: &str) -> Option<Type> {
            None
        }
    }

    fn entry() -> Type {
        Type::from_schema(
            &json!({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}, "required": ["name"]}),
            "inputSchema of tool `greet`",
        )
    }

    fn run(source: &str) -> (Type, Vec<Finding>) {
        let ast = jsonata_core::parser::parse(source).unwrap();
        let mut findings = Vec::new();
        let t = infer(&ast, &Nodes(vec![("entry", entry())]), &mut findings);
        (t, findings)
    }

    fn missing(findings: &[Finding]) -> Vec<String> {
        findings
            .iter()
            .filter_map(|f| match f {
                Finding::MissingProperty { path, .. } => Some(path.join(".")),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_field_typo_is_found_with_a_suggestion() {
        let (t, findings) = run(r#"{ "greeting": "Hello, " & $.entry.nmae }"#);
        assert_eq!(missing(&findings), ["entry.nmae"]);
        assert!(findings.iter().any(|f| matches!(f, Finding::MissingProperty { suggestion: Some(s), closed: false, .. } if s == "name")));
        let Type::Object(o) = t else { panic!("{t:?}") };
        assert_eq!(o.properties[0].name, "greeting");
        assert_eq!(o.properties[0].ty, Type::String);
        assert_eq!(run("entry.name").0, Type::String);
        assert!(missing(&run("entry.name & entry.n").1).is_empty());
    }

    #[test]
    fn inference_of_operators_and_constructors() {
        assert_eq!(run("1 + $.entry.n").0, Type::Number);
        assert_eq!(run("$.entry.n > 2 and true").0, Type::Boolean);
        assert_eq!(
            run("$.entry.n > 2 ? 'a' : 3").0,
            Type::String.or(Type::Number)
        );
        assert_eq!(run("[1, 2]").0, Type::Array(Box::new(Type::Number)));
        assert_eq!(run("( $x := 'a'; $x )").0, Type::String);
        assert_eq!(run("$count([1])").0, Type::Number);
        assert_eq!(
            run("$split('a', ',')").0,
            Type::Array(Box::new(Type::String))
        );
        assert_eq!(run("$lookup($.entry, 'a')").0, Type::Unknown);
        assert_eq!(run("$.entry.name.foo").0, Type::Unknown);
    }

    #[test]
    fn unknown_never_reports() {
        for source in [
            "$.other.anything",
            "$.entry.name.length",
            "$map($.entry.name, function($v) { $v.nothing })",
            "$.entry[name = 'a'].whatever",
            "$.entry.*.x",
            "$.entry.{ 'a': nmae }",
        ] {
            assert!(missing(&run(source).1).is_empty(), "{source}");
        }
    }

    #[test]
    fn schemas() {
        let closed = Type::from_schema(
            &json!({"type": "object", "properties": {"a": {"type": ["string", "null"]}}, "additionalProperties": false}),
            "s",
        );
        let Type::Object(o) = &closed else { panic!() };
        assert_eq!(o.keys, Keys::Closed);
        assert_eq!(o.properties[0].ty, Type::String.or(Type::Null));
        assert_eq!(
            Type::from_schema(&json!({"type": "object"}), "s")
                .members()
                .len(),
            1
        );
        assert!(matches!(
            Type::from_schema(&json!({"type": "object"}), "s"),
            Type::Object(ObjectType {
                keys: Keys::Any,
                ..
            })
        ));
        assert_eq!(
            Type::from_schema(&json!({"$ref": "#/x"}), "s"),
            Type::Unknown
        );
        assert_eq!(
            Type::from_schema(&json!({"enum": ["a", 1]}), "s"),
            Type::String.or(Type::Number)
        );
        assert!(Type::Number.may_be(&Type::Number.or(Type::Null)));
        assert!(!Type::String.may_be(&Type::Number));
    }
}
