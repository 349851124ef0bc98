//! JSONata expressions and JSON Logic rules compiled to Rust, for `build --native` and `graph!`.
//!
//! Each expression in the subset graphs use becomes one Rust function over the runtime's
//! operations (`mcpgraph_runtime::__private::native`), which have jsonata-core's semantics
//! exactly; the source expression is in its doc comment. The subset: literals, `$`, bound
//! variables, paths of field steps without stages (from `$`, a field, a variable or a call),
//! object constructors with literal keys, array constructors, arithmetic, `&`, comparisons,
//! `and`/`or`, conditionals, `??`, unary minus, blocks, and calls of the history functions and
//! of the runtime's fused built-ins. Anything else stays interpreted, for that expression alone:
//! [`Emitted::fell_back`] says which and why.
//!
//! A JSON Logic rule compiles when each of its graph-level vars did and it uses no iterator
//! operator (`map`, `filter`, `reduce`, `all`, `some`, `none`), whose bodies read per-item data.

use crate::expr::{HISTORY_FUNCTIONS, VALUE_BUILTINS};
use crate::fuse::{COUNT_SPLIT, HOST_FUNCTIONS};
use crate::ir::{Graph, NodeKind, Template};
use crate::logic::{Op, Rule, rule_key};
use jsonata_core::ast::{AstNode, BinaryOp, PathStep, Stage, UnaryOp};
use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};
use std::collections::BTreeMap;

/// Where an expression is, for the build's report: `file:line:col (what)`.
pub type Place = String;

/// What compiling a graph's expressions gave.
#[derive(Debug, Default)]
pub struct Emitted {
    /// The functions and their table `NATIVES`, as items.
    pub items: TokenStream,
    /// Each expression that compiled, with every place it is used.
    pub compiled: Vec<(String, Vec<Place>)>,
    /// Each expression that stays interpreted, why, and every place it is used.
    pub fell_back: Vec<(String, String, Vec<Place>)>,
    /// How many switch rules compiled, and how many did not.
    pub rules_compiled: usize,
    pub rules_fell_back: usize,
}

/// Why an expression is not compiled: the construct the compiler does not translate.
#[derive(Debug, Clone, PartialEq)]
pub struct Unsupported(pub String);

fn unsupported<T>(what: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported(what.into()))
}

/// The path generated code names the runtime's operations by.
fn rt() -> TokenStream {
    quote!(rt)
}

/// Compiles every expression and switch rule of `graph`.
pub fn emit(graph: &Graph) -> Emitted {
    // Each distinct source once, in the order first met.
    let mut sources: Vec<String> = Vec::new();
    let mut places: BTreeMap<String, Vec<Place>> = BTreeMap::new();
    let mut rules: Vec<(&Rule, Place)> = Vec::new();
    for tool in &graph.tools {
        for node in &tool.nodes {
            let at = |what: &str| {
                format!(
                    "{}:{}:{} ({what} of node `{}`)",
                    graph.source_name, node.line, node.column, node.id
                )
            };
            let mut add = |source: &str, place: Place| {
                if !places.contains_key(source) {
                    sources.push(source.to_string());
                }
                places.entry(source.to_string()).or_default().push(place);
            };
            match &node.kind {
                NodeKind::Entry | NodeKind::Exit => {}
                NodeKind::Transform(e) => add(&e.source, at("transform")),
                NodeKind::Mcp(call) => template_sources(&call.args, &mut |s| add(s, at("args"))),
                NodeKind::Map { items, call, .. } => {
                    add(&items.source, at("items"));
                    template_sources(&call.args, &mut |s| add(s, at("args")));
                }
                NodeKind::Parallel { branches, .. } => {
                    for branch in branches {
                        template_sources(&branch.call.args, &mut |s| {
                            add(s, at(&format!("args of branch `{}`", branch.name)))
                        });
                    }
                }
                NodeKind::Ask { message, .. } => add(&message.source, at("message")),
                NodeKind::Switch { conditions } => {
                    for (i, condition) in conditions.iter().enumerate() {
                        if let Some(rule) = &condition.rule {
                            let mut vars = Vec::new();
                            rule.jsonata_vars(&mut vars);
                            for var in vars {
                                add(&var.source, at(&format!("var of condition {i}")));
                            }
                            rules.push((rule, at(&format!("rule of condition {i}"))));
                        }
                    }
                }
            }
            if let Some(log) = &node.log {
                add(&log.message.source, at("log message"));
            }
        }
    }
    let mut out = Emitted::default();
    let mut functions = Vec::new();
    let mut table = Vec::new();
    let mut compiled_fns: BTreeMap<String, proc_macro2::Ident> = BTreeMap::new();
    for source in &sources {
        let at = places.remove(source).unwrap_or_default();
        match crate::expr::Expr::parse(source)
            .map_err(Unsupported)
            .and_then(|expr| function(&expr.ast))
        {
            Ok(body) => {
                let name = format_ident!("expr_{}", compiled_fns.len());
                functions.push(function_item(&name, &doc_lines(source, &at), body));
                table.push(quote! {
                    rt::NativeExpr { source: #source, eval: #name }
                });
                compiled_fns.insert(source.clone(), name);
                out.compiled.push((source.clone(), at));
            }
            Err(Unsupported(why)) => out.fell_back.push((source.clone(), why, at)),
        }
    }
    let mut rule_table = Vec::new();
    let mut seen_rules = std::collections::BTreeSet::new();
    for (rule, at) in rules {
        let key = rule_key(rule);
        if !seen_rules.insert(key.clone()) {
            continue;
        }
        match rule_body(rule, &compiled_fns) {
            Ok(body) => {
                let name = format_ident!("rule_{}", rule_table.len());
                let doc = doc_lines(&key, &[at]);
                functions.push(quote! {
                    #(#[doc = #doc])*
                    fn #name(
                        host: &mut dyn rt::NativeHost,
                        data: &rt::JValue,
                    ) -> ::std::result::Result<rt::JValue, rt::RuleFailure> {
                        ::std::result::Result::Ok(#body)
                    }
                });
                rule_table.push(quote! {
                    rt::NativeRule { key: #key, eval: #name }
                });
                out.rules_compiled += 1;
            }
            Err(_) => out.rules_fell_back += 1,
        }
    }
    out.items = quote! {
        use ::mcpgraph_runtime::__private::native as rt;

        /// The graph's expressions compiled to Rust (by source) and its switch rules (by their
        /// canonical text), which the runtime gives the graph when it loads it.
        pub const NATIVES: rt::Natives =
            rt::Natives {
                exprs: &[#(#table),*],
                rules: &[#(#rule_table),*],
            };
        #(#functions)*
    };
    out
}

fn doc_lines(source: &str, places: &[Place]) -> Vec<String> {
    let mut doc: Vec<String> = vec![" ```jsonata".to_string()];
    doc.extend(source.lines().map(|l| format!(" {l}")));
    doc.push(" ```".to_string());
    for place in places {
        doc.push(format!(" At {place}."));
    }
    doc
}

fn template_sources(template: &Template, f: &mut dyn FnMut(&str)) {
    match template {
        Template::Literal(_) => {}
        Template::Expr(e) => f(&e.source),
        Template::Object(pairs) => pairs.iter().for_each(|(_, t)| template_sources(t, f)),
        Template::Array(items) => items.iter().for_each(|t| template_sources(t, f)),
    }
}

/// One expression's function named `name`, over the runtime's operations as `rt`.
pub fn function_item(name: &proc_macro2::Ident, doc: &[String], body: TokenStream) -> TokenStream {
    quote! {
        #(#[doc = #doc])*
        fn #name(
            host: &mut dyn rt::NativeHost,
            input: &rt::JValue,
        ) -> ::std::result::Result<rt::JValue, rt::Error> {
            #body
        }
    }
}

/// The body of one expression's function, or why it cannot be compiled.
pub fn function(ast: &AstNode) -> Result<TokenStream, Unsupported> {
    let mut emitter = Emitter {
        contexts: 0,
        calls: Vec::new(),
        scopes: Vec::new(),
        steps: 0,
    };
    let data = format_ident!("data");
    let (value, steps) = emitter.scoped(&quote!(#data), |emitter, data| emitter.node(ast, data))?;
    let rt = rt();
    let calls = (0..emitter.calls.len()).map(|i| format_ident!("call_{i}"));
    Ok(quote! {
        #(let #calls = ::std::cell::OnceCell::<#rt::JValue>::new();)*
        #(let #steps = ::std::cell::OnceCell::<#rt::JValue>::new();)*
        let #data: &#rt::JValue = &#rt::input(input);
        ::std::result::Result::Ok(#value)
    })
}

struct Emitter {
    /// How many object constructors have named their context so far (for unique names).
    contexts: usize,
    /// The history calls with literal arguments met so far, by their text: each is made once
    /// per evaluation and its value kept in `call_{index}` (see [`Emitter::history_call`]).
    calls: Vec<String>,
    /// The contexts an expression's parts are evaluated over once per evaluation of their
    /// scope (the expression's input, an object constructor's context), innermost last: see
    /// [`Emitter::path`].
    scopes: Vec<Scope>,
    /// How many `step_{index}` cells the scopes have declared (for unique names).
    steps: usize,
}

/// A context that holds one value while its scope is evaluated, and the first steps of paths
/// over it kept once made (`step_{index}`, declared where the context is).
struct Scope {
    /// The tokens the context is read by (`data`, `&context_2`).
    data: String,
    /// Per kept first step: its text and its cell's index.
    steps: Vec<(String, usize)>,
}

impl Scope {
    fn new(data: &TokenStream) -> Scope {
        Scope {
            data: data.to_string(),
            steps: Vec::new(),
        }
    }

    fn cells(self) -> Vec<proc_macro2::Ident> {
        self.steps
            .iter()
            .map(|(_, index)| format_ident!("step_{index}"))
            .collect()
    }
}

/// JSONata's built-in functions: a variable of such a name (unless bound) is the function
/// itself, which compiled code does not handle.
const BUILTINS: &[&str] = &[
    "abs",
    "append",
    "assert",
    "average",
    "base64decode",
    "base64encode",
    "boolean",
    "ceil",
    "clone",
    "contains",
    "count",
    "decodeUrl",
    "decodeUrlComponent",
    "distinct",
    "each",
    "encodeUrl",
    "encodeUrlComponent",
    "error",
    "eval",
    "exists",
    "filter",
    "floor",
    "formatBase",
    "formatInteger",
    "formatNumber",
    "fromMillis",
    "join",
    "keys",
    "length",
    "lookup",
    "lowercase",
    "map",
    "match",
    "max",
    "merge",
    "millis",
    "min",
    "not",
    "now",
    "number",
    "pad",
    "parseInteger",
    "power",
    "random",
    "reduce",
    "replace",
    "reverse",
    "round",
    "shuffle",
    "sift",
    "single",
    "sort",
    "split",
    "spread",
    "sqrt",
    "string",
    "substring",
    "substringAfter",
    "substringBefore",
    "sum",
    "toMillis",
    "trim",
    "type",
    "uppercase",
    "zip",
];

/// The built-ins that take the context (`$`) as their first argument when called with fewer
/// arguments: compiled calls give every argument.
fn takes_context(name: &str, args: usize) -> bool {
    match args {
        0 => true,
        1 => matches!(
            name,
            "substringBefore" | "substringAfter" | "contains" | "split"
        ),
        _ => false,
    }
}

/// `$sum`, `$max`, `$min`, `$average` of one path: jsonata-core fuses the path into the
/// aggregate, which reads nested arrays otherwise than the path does; left to it.
fn fused_aggregate(name: &str, args: &[AstNode]) -> bool {
    matches!(name, "sum" | "max" | "min" | "average") && matches!(args, [AstNode::Path { .. }])
}

fn is_function_name(name: &str) -> bool {
    BUILTINS.contains(&name) || HISTORY_FUNCTIONS.contains(&name) || HOST_FUNCTIONS.contains(&name)
}

impl Emitter {
    /// A Rust expression of type `JValue` (it may return early with `?`) giving `node`'s value
    /// over `data` (an expression of type `&JValue`).
    fn node(&mut self, node: &AstNode, data: &TokenStream) -> Result<TokenStream, Unsupported> {
        let rt = rt();
        Ok(match node {
            AstNode::String(s) => quote!(#rt::lit!(#s)),
            AstNode::Number(n) => {
                let n = number(*n);
                quote!(#rt::JValue::Number(#n))
            }
            AstNode::Boolean(b) => quote!(#rt::JValue::Bool(#b)),
            AstNode::Null => quote!(#rt::JValue::Null),
            AstNode::Undefined => quote!(#rt::JValue::Undefined),
            AstNode::Variable(name) if name.is_empty() => quote!(#rt::dollar(#data)),
            AstNode::Variable(name) => {
                if is_function_name(name) || name.starts_with("__") {
                    return unsupported(format!("the function ${name} used as a value"));
                }
                quote!(#rt::unwrap(host.var(#name)))
            }
            AstNode::Name(field) => quote!(#rt::unwrap(#rt::fields(#data, &[#field], false)?)),
            AstNode::Path { steps } => self.path(steps, data)?,
            AstNode::Binary { op, lhs, rhs } => self.binary(*op, lhs, rhs, data)?,
            AstNode::Unary { op, operand } => match (op, &**operand) {
                // A negated number literal (`-1`) is a number: negating one never fails.
                (UnaryOp::Negate, AstNode::Number(n)) => {
                    let n = number(*n);
                    quote!(#rt::JValue::Number(-#n))
                }
                _ => {
                    let value = self.node(operand, data)?;
                    match op {
                        UnaryOp::Negate => quote!(#rt::negate(&#value)?),
                        UnaryOp::Not => quote!(#rt::JValue::Bool(!#rt::truthy(&#value))),
                    }
                }
            },
            AstNode::Conditional {
                condition,
                then_branch,
                else_branch,
            } => {
                let condition = self.node(condition, data)?;
                let then_branch = self.node(then_branch, data)?;
                let else_branch = match else_branch {
                    Some(e) => self.node(e, data)?,
                    None => quote!(#rt::JValue::Undefined),
                };
                quote! {
                    if #rt::truthy(&#condition) { #then_branch } else { #else_branch }
                }
            }
            AstNode::Object(pairs) => self.object(pairs, data)?,
            AstNode::Array(items) => {
                let mut pushes = Vec::with_capacity(items.len());
                for item in items {
                    let value = self.node(item, data)?;
                    pushes.push(if is_array_constructor(item) {
                        quote!(array.nested(#value);)
                    } else {
                        quote!(array.item(#value);)
                    });
                }
                let n = items.len();
                quote! {{
                    let mut array = #rt::Array::with_capacity(#n);
                    #(#pushes)*
                    array.finish()
                }}
            }
            AstNode::Block(items) if items.len() == 1 => self.node(&items[0], data)?,
            AstNode::Block(items) if !items.is_empty() => {
                let mut values = Vec::with_capacity(items.len());
                for item in items {
                    values.push(self.node(item, data)?);
                }
                let last = values.pop().expect("not empty");
                quote! {{
                    #(let _ = #values;)*
                    #last
                }}
            }
            AstNode::Function { name, args, .. } if memoized_call(node).is_some() => {
                self.history_call(name, args, data)?
            }
            AstNode::Function {
                name,
                args,
                is_builtin: true,
            } if name == COUNT_SPLIT
                && matches!(
                    args.as_slice(),
                    [subject, AstNode::String(_)] if !matches!(subject, AstNode::Placeholder)
                ) =>
            {
                // The fused count's separator is always a literal: passed as the text it is.
                let [subject, AstNode::String(separator)] = args.as_slice() else {
                    unreachable!("matched above")
                };
                let subject = self.node(subject, data)?;
                quote!(#rt::unwrap(#rt::count_split(#subject, #separator)?))
            }
            AstNode::Function {
                name,
                args,
                is_builtin: true,
            } if HISTORY_FUNCTIONS.contains(&name.as_str())
                || HOST_FUNCTIONS.contains(&name.as_str()) =>
            {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    if matches!(arg, AstNode::Placeholder) {
                        return unsupported("a partial application");
                    }
                    values.push(self.node(arg, data)?);
                }
                quote!({
                    let args = [#(#values),*];
                    #rt::unwrap(host.call(#name, &args)?)
                })
            }
            AstNode::Function {
                name,
                args,
                is_builtin: true,
            } if name == "exists" && args.len() == 1 => {
                // jsonata-core looks at a variable argument's binding itself, before the
                // unwrap every other value goes through (a bound empty sequence exists).
                let value = match &args[0] {
                    AstNode::Variable(name) if name.is_empty() => {
                        return unsupported(
                            "$exists($), which jsonata-core answers by its binding",
                        );
                    }
                    AstNode::Variable(name) if !is_function_name(name) => quote!(host.var(#name)),
                    other => self.node(other, data)?,
                };
                quote!(#rt::JValue::Bool(!#rt::is_undefined(&#value)))
            }
            AstNode::Function {
                name,
                args,
                is_builtin: true,
            } if name == "count" && args.len() == 1 && !matches!(args[0], AstNode::Placeholder) => {
                // The built-in graphs call most, counted here; jsonata-core counts the rest.
                let value = self.node(&args[0], data)?;
                quote!({
                    let value = #value;
                    match #rt::count(&value) {
                        ::std::option::Option::Some(n) => n,
                        ::std::option::Option::None => {
                            #rt::unwrap(host.builtin("count", ::std::vec![value], #data)?)
                        }
                    }
                })
            }
            AstNode::Function {
                name,
                args,
                is_builtin: true,
            } if VALUE_BUILTINS.contains(&name.as_str())
                && !takes_context(name, args.len())
                && !fused_aggregate(name, args) =>
            {
                let mut values = Vec::with_capacity(args.len());
                for arg in args {
                    if matches!(arg, AstNode::Placeholder) {
                        return unsupported("a partial application");
                    }
                    values.push(self.node(arg, data)?);
                }
                quote!({
                    let args = ::std::vec![#(#values),*];
                    #rt::unwrap(host.builtin(#name, args, #data)?)
                })
            }
            AstNode::Function { name, .. } => {
                return unsupported(format!("a call of ${name}"));
            }
            other => return unsupported(describe(other)),
        })
    }

    fn binary(
        &mut self,
        op: BinaryOp,
        lhs: &AstNode,
        rhs: &AstNode,
        data: &TokenStream,
    ) -> Result<TokenStream, Unsupported> {
        let rt = rt();
        let arith = |name: &str| {
            let variant = format_ident!("{name}");
            quote!(#rt::Arith::#variant)
        };
        let order = |name: &str| {
            let variant = format_ident!("{name}");
            quote!(#rt::Order::#variant)
        };
        let kind = match op {
            BinaryOp::Add => Some(("arith", arith("Add"))),
            BinaryOp::Subtract => Some(("arith", arith("Sub"))),
            BinaryOp::Multiply => Some(("arith", arith("Mul"))),
            BinaryOp::Divide => Some(("arith", arith("Div"))),
            BinaryOp::Modulo => Some(("arith", arith("Mod"))),
            BinaryOp::LessThan => Some(("order", order("Lt"))),
            BinaryOp::LessThanOrEqual => Some(("order", order("Le"))),
            BinaryOp::GreaterThan => Some(("order", order("Gt"))),
            BinaryOp::GreaterThanOrEqual => Some(("order", order("Ge"))),
            _ => None,
        };
        if !matches!(
            op,
            BinaryOp::Add
                | BinaryOp::Subtract
                | BinaryOp::Multiply
                | BinaryOp::Divide
                | BinaryOp::Modulo
                | BinaryOp::LessThan
                | BinaryOp::LessThanOrEqual
                | BinaryOp::GreaterThan
                | BinaryOp::GreaterThanOrEqual
                | BinaryOp::Equal
                | BinaryOp::NotEqual
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Concatenate
                | BinaryOp::Coalesce
        ) {
            return unsupported(format!("the operator {}", operator(op)));
        }
        // `=` and `!=` with a string literal compare with its text: no value is made for it,
        // and it has no effect for the other side to be evaluated after.
        if let BinaryOp::Equal | BinaryOp::NotEqual = op
            && let Some((other, text)) = match (lhs, rhs) {
                (other, AstNode::String(text)) | (AstNode::String(text), other) => {
                    Some((other, text))
                }
                _ => None,
            }
        {
            let other = self.node(other, data)?;
            return Ok(match op {
                BinaryOp::Equal => quote!(#rt::eq_str(&#other, #text)),
                _ => quote!(#rt::ne_str(&#other, #text)),
            });
        }
        let left = self.node(lhs, data)?;
        let right = self.node(rhs, data)?;
        Ok(match (op, kind) {
            (_, Some(("arith", op))) => quote!(#rt::arith(#op, &#left, &#right)?),
            (_, Some((_, op))) => quote!(#rt::order(#op, &#left, &#right)?),
            (BinaryOp::Equal, _) => quote!(#rt::eq(&#left, &#right)),
            (BinaryOp::NotEqual, _) => quote!(#rt::ne(&#left, &#right)),
            (BinaryOp::Concatenate, _) => quote!(#rt::concat(&#left, &#right)?),
            (BinaryOp::And, _) => quote! {
                if #rt::truthy(&#left) { #rt::JValue::Bool(#rt::truthy(&#right)) } else { #rt::JValue::Bool(false) }
            },
            (BinaryOp::Or, _) => quote! {
                if #rt::truthy(&#left) { #rt::JValue::Bool(true) } else { #rt::JValue::Bool(#rt::truthy(&#right)) }
            },
            (BinaryOp::Coalesce, _) => quote! {
                match #left { #rt::JValue::Undefined => #right, left => left }
            },
            _ => unreachable!("refused above"),
        })
    }

    /// A history function called with literal arguments (`$nodeExecution("n", -1)`), as a loop
    /// step calls it several times. The history does not change while an expression evaluates
    /// and the call reads nothing else, so every such call gives what the first gave: it is
    /// made where the expression first needs it, and its value kept in `call_{index}` for the
    /// others (`rt::once`). A call that fails ends the evaluation there, as the interpreter's
    /// first would.
    fn history_call(
        &mut self,
        name: &str,
        args: &[AstNode],
        data: &TokenStream,
    ) -> Result<TokenStream, Unsupported> {
        let rt = rt();
        let text = call_text(name, args);
        let index = match self.calls.iter().position(|call| *call == text) {
            Some(index) => index,
            None => {
                self.calls.push(text);
                self.calls.len() - 1
            }
        };
        let cell = format_ident!("call_{index}");
        let mut values = Vec::with_capacity(args.len());
        for arg in args {
            values.push(self.node(arg, data)?);
        }
        Ok(quote!(#rt::once(&#cell, || {
            let args = [#(#values),*];
            host.call(#name, &args)
        })?))
    }

    fn path(&mut self, steps: &[PathStep], data: &TokenStream) -> Result<TokenStream, Unsupported> {
        let rt = rt();
        for step in steps {
            if !step.stages.is_empty() {
                return unsupported(match step.stages[0] {
                    Stage::Filter(_) => "a path step with a predicate",
                    Stage::KeepArray => "a path step with []",
                    Stage::Index(_) => "a path step with #",
                });
            }
            if step.focus.is_some()
                || step.index_var.is_some()
                || step.ancestor_label.is_some()
                || step.is_tuple
                || step.inner_tuple
            {
                return unsupported("a path step binding a variable (@, #, %)");
            }
        }
        let Some((first, rest)) = steps.split_first() else {
            return unsupported("an empty path");
        };
        let mut names = Vec::with_capacity(rest.len());
        for step in rest {
            match &step.node {
                AstNode::Name(field) => names.push(field.as_str()),
                other => return unsupported(format!("a path step that is {}", describe(other))),
            }
        }
        Ok(match &first.node {
            AstNode::Variable(name) if name.is_empty() => {
                if names.is_empty() {
                    quote!(#rt::dollar(#data))
                } else {
                    quote!(#rt::unwrap(#rt::fields(#data, &[#(#names),*], true)?))
                }
            }
            AstNode::Name(field) => {
                quote!(#rt::unwrap(#rt::fields(#data, &[#field, #(#names),*], false)?))
            }
            other if names.is_empty() => self.node(other, data)?,
            other @ (AstNode::Function { .. } | AstNode::Variable(_)) => {
                // The first step runs per item of an input array (once for a variable), with
                // `$` the item.
                let whole = matches!(other, AstNode::Variable(_));
                let item = format_ident!("item_{}", self.contexts);
                self.contexts += 1;
                let value = self.node(other, &quote!(#item))?;
                let first = quote! {
                    #rt::first_step(#data, #whole, |#item| ::std::result::Result::Ok(#value))
                };
                // A history call with literal arguments gives one value per evaluation, so its
                // first step over a context that holds one value while its scope is evaluated
                // does too (`$nodeExecution("n", -1).a + $nodeExecution("n", -1).b`): made
                // where first needed, kept for the others.
                let first = match self.kept_step(other, data) {
                    Some(cell) => quote!(#rt::memo(&#cell, || #first)?),
                    None => quote!(#first?),
                };
                quote! {
                    #rt::unwrap(#rt::fields_after(#first, &[#(#names),*])?)
                }
            }
            other => {
                return unsupported(format!("a path starting with {}", describe(other)));
            }
        })
    }

    /// `emit` with `data` a new scope's context, and the cells the scope's kept first steps
    /// need (declared by the caller beside the context).
    fn scoped<T>(
        &mut self,
        data: &TokenStream,
        emit: impl FnOnce(&mut Self, &TokenStream) -> Result<T, Unsupported>,
    ) -> Result<(T, Vec<proc_macro2::Ident>), Unsupported> {
        self.scopes.push(Scope::new(data));
        let emitted = emit(self, data);
        let scope = self.scopes.pop().expect("pushed above");
        Ok((emitted?, scope.cells()))
    }

    /// The cell keeping the first step `call` over `data`, when `call` is a history call with
    /// literal arguments and `data` a scope's context (see [`Scope`]).
    fn kept_step(&mut self, call: &AstNode, data: &TokenStream) -> Option<proc_macro2::Ident> {
        let text = memoized_call(call)?;
        let data = data.to_string();
        let scope = self
            .scopes
            .iter_mut()
            .rev()
            .find(|scope| scope.data == data)?;
        let index = match scope.steps.iter().find(|(step, _)| *step == text) {
            Some((_, index)) => *index,
            None => {
                let index = self.steps;
                self.steps += 1;
                scope.steps.push((text, index));
                index
            }
        };
        Some(format_ident!("step_{index}"))
    }

    fn object(
        &mut self,
        pairs: &[(AstNode, AstNode)],
        data: &TokenStream,
    ) -> Result<TokenStream, Unsupported> {
        let rt = rt();
        let mut keys: Vec<&str> = Vec::with_capacity(pairs.len());
        for (key, _) in pairs {
            match key {
                AstNode::String(k) if !keys.contains(&k.as_str()) => keys.push(k),
                AstNode::String(_) => {
                    return unsupported("an object constructor with a repeated key");
                }
                _ => return unsupported("an object constructor with a computed key"),
            }
        }
        self.contexts += 1;
        let context = format_ident!("context_{}", self.contexts);
        let (values, steps) = self.scoped(&quote!(&#context), |emitter, inner| {
            pairs
                .iter()
                .map(|(_, value)| emitter.node(value, inner))
                .collect::<Result<Vec<_>, _>>()
        })?;
        Ok(quote! {{
            let #context = #rt::object_context(#data);
            #(let #steps = ::std::cell::OnceCell::<#rt::JValue>::new();)*
            let values = [#(#values),*];
            #rt::object!([#(#keys),*], values)
        }})
    }
}

/// A history call's text, by which two calls with literal arguments are told the same.
fn call_text(name: &str, args: &[AstNode]) -> String {
    format!(
        "{name}({})",
        args.iter()
            .filter_map(literal)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The text of `node` when it is a history call with literal arguments (one value per
/// evaluation: see [`Emitter::history_call`]).
fn memoized_call(node: &AstNode) -> Option<String> {
    match node {
        AstNode::Function {
            name,
            args,
            is_builtin: true,
        } if HISTORY_FUNCTIONS.contains(&name.as_str())
            && args.iter().all(|arg| literal(arg).is_some()) =>
        {
            Some(call_text(name, args))
        }
        _ => None,
    }
}

/// A literal argument's text (a string, a number, a negated number), by which two calls are
/// told the same; `None` for anything else.
fn literal(node: &AstNode) -> Option<String> {
    match node {
        AstNode::String(s) => Some(format!("{s:?}")),
        AstNode::Number(n) => Some(format!("{:?}", n.to_bits())),
        AstNode::Unary {
            op: UnaryOp::Negate,
            operand,
        } => match &**operand {
            AstNode::Number(n) => Some(format!("-{:?}", n.to_bits())),
            _ => None,
        },
        _ => None,
    }
}

/// An `f64` literal, exactly.
fn number(n: f64) -> TokenStream {
    if n.is_finite() {
        let literal = Literal::f64_suffixed(n);
        quote!(#literal)
    } else if n.is_nan() {
        quote!(::std::f64::NAN)
    } else if n > 0.0 {
        quote!(::std::f64::INFINITY)
    } else {
        quote!(::std::f64::NEG_INFINITY)
    }
}

/// jsonata-js's array constructor: an item written `[...]` (with or without stages after it on
/// a one-step path) is kept whole in an enclosing constructor.
fn is_array_constructor(node: &AstNode) -> bool {
    match node {
        AstNode::Array(_) => true,
        AstNode::Path { steps } => match steps.as_slice() {
            [step] => {
                matches!(step.node, AstNode::Array(_))
                    && step.index_var.is_none()
                    && !step.stages.iter().any(|s| matches!(s, Stage::Index(_)))
            }
            _ => false,
        },
        _ => false,
    }
}

/// A construct, in words, for the report. Exhaustive on purpose: a jsonata-core that gains a
/// node the emitter does not know fails to compile here, not silently at run time.
fn describe(node: &AstNode) -> String {
    match node {
        AstNode::String(_) => "a string",
        AstNode::Name(_) => "a field",
        AstNode::Number(_) => "a number",
        AstNode::Boolean(_) => "a boolean",
        AstNode::Null => "null",
        AstNode::Undefined => "undefined",
        AstNode::Placeholder => "a partial application",
        AstNode::Regex { .. } => "a regular expression",
        AstNode::Variable(_) => "a variable",
        AstNode::ParentVariable(_) | AstNode::Parent(_) => "a parent reference (%)",
        AstNode::Path { .. } => "a path",
        AstNode::Binary { op, .. } => return format!("the operator {}", operator(*op)),
        AstNode::Unary { .. } => "a unary operator",
        AstNode::Function { .. } => "a function call",
        AstNode::Call { .. } => "a call of a function value",
        AstNode::Lambda { .. } => "a function definition",
        AstNode::Array(_) => "an array constructor",
        AstNode::Object(_) => "an object constructor",
        AstNode::ObjectTransform { .. } => "an object group-by",
        AstNode::Block(_) => "a block",
        AstNode::Conditional { .. } => "a conditional",
        AstNode::Wildcard => "a wildcard (*)",
        AstNode::Descendant => "a descendant wildcard (**)",
        AstNode::ArrayGroup(_) => "an array group",
        AstNode::FunctionApplication(_) => "a function application (~>)",
        AstNode::Sort { .. } => "a sort (^)",
        AstNode::Transform { .. } => "a transform (|...|)",
    }
    .to_string()
}

/// An operator as written (exhaustive, as [`describe`]).
fn operator(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::Add => "+",
        BinaryOp::Subtract => "-",
        BinaryOp::Multiply => "*",
        BinaryOp::Divide => "/",
        BinaryOp::Modulo => "%",
        BinaryOp::Equal => "=",
        BinaryOp::NotEqual => "!=",
        BinaryOp::LessThan => "<",
        BinaryOp::LessThanOrEqual => "<=",
        BinaryOp::GreaterThan => ">",
        BinaryOp::GreaterThanOrEqual => ">=",
        BinaryOp::And => "and",
        BinaryOp::Or => "or",
        BinaryOp::Concatenate => "&",
        BinaryOp::Range => "..",
        BinaryOp::In => "in",
        BinaryOp::ColonEqual => ":= (a variable binding)",
        BinaryOp::FocusBind => "@",
        BinaryOp::IndexBind => "#",
        BinaryOp::Coalesce => "??",
        BinaryOp::Default => "?:",
        BinaryOp::ChainPipe => "~>",
    }
}

/// The body of a compiled rule: a Rust expression of type `JValue` that may return early with a
/// `RuleFailure`.
fn rule_body(
    rule: &Rule,
    exprs: &BTreeMap<String, proc_macro2::Ident>,
) -> Result<TokenStream, Unsupported> {
    let rt = rt();
    Ok(match rule {
        Rule::Literal(value) => {
            let text = value.to_string();
            quote!(#rt::json(#text))
        }
        Rule::Array(items) => {
            let items = items
                .iter()
                .map(|r| rule_body(r, exprs))
                .collect::<Result<Vec<_>, _>>()?;
            quote!(#rt::JValue::array(::std::vec![#(#items),*]))
        }
        Rule::Jsonata(expr) => {
            let Some(function) = exprs.get(&expr.source) else {
                return unsupported("a var that is not compiled");
            };
            let source = &expr.source;
            quote!(#rt::rule_var(#function(host, data), #source)?)
        }
        Rule::Unknown(op) => {
            let message = format!("Unrecognized operation {op}");
            quote!(return ::std::result::Result::Err(#rt::RuleFailure::Rule(#message.to_string())))
        }
        Rule::Op { op, args } => {
            if op.is_iterator() {
                return unsupported(format!("the iterator operator {}", op.name()));
            }
            let values = args
                .iter()
                .map(|r| rule_body(r, exprs))
                .collect::<Result<Vec<_>, _>>()?;
            match op {
                Op::If => {
                    // if/then pairs, then an optional else; null when nothing matches.
                    let mut code = if values.len() % 2 == 1 {
                        values.last().cloned().expect("odd")
                    } else {
                        quote!(#rt::JValue::Null)
                    };
                    for pair in values.chunks_exact(2).rev() {
                        let (condition, then) = (&pair[0], &pair[1]);
                        code = quote! {
                            if #rt::logic_truthy(&#condition) { #then } else { #code }
                        };
                    }
                    code
                }
                Op::And | Op::Or => {
                    // The first value that decides, else the last; undefined for no arguments.
                    let stop_when = *op == Op::Or;
                    let mut code = quote!(#rt::JValue::Undefined);
                    if let Some((last, rest)) = values.split_last() {
                        code = last.clone();
                        for value in rest.iter().rev() {
                            code = quote! {
                                match #value {
                                    current if #rt::logic_truthy(&current) == #stop_when => current,
                                    _ => #code,
                                }
                            };
                        }
                    }
                    code
                }
                _ => {
                    let variant = format_ident!("{}", format!("{op:?}"));
                    quote!(#rt::logic(#rt::Op::#variant, &[#(#values),*], data)?)
                }
            }
        }
    })
}
