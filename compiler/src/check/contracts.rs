//! Calls against the downstream contracts of the lock file (issue 13, item 3): the tool exists
//! on its server, and the literal arguments fit the tool's inputSchema.
//!
//! Only what is certain is reported. The top-level arguments are checked against `properties`,
//! `required` and `additionalProperties`; a literal value (at any depth, when it is entirely
//! literal) against the `type`, `enum` and `const` of its property's schema, and nested objects
//! and arrays against their `properties` and `items`. A JSONata argument is present (it satisfies
//! `required`) and nothing more is known of it here. A schema keyword this module does not
//! understand never yields a diagnostic: a `$ref` accepts anything at its level, and composition
//! (`anyOf`, `oneOf`, `allOf`, `not`, `if`, pattern or unevaluated properties) turns off the check
//! of undeclared properties, since it may declare or allow them. docs/contracts.md has the rules.

use super::ToolChecker;
use crate::ast::Sp;
use crate::diagnostics::{Diagnostic, Span, did_you_mean};
use crate::ir::{Call, Target, Template};
use crate::yaml::{Yaml, YamlKind};
use serde_json::{Map, Value};
use std::collections::HashSet;

impl ToolChecker<'_> {
    /// Checks one call against the lock, when there is one. `server` and `tool` are where the call
    /// names them; `args` is its arguments as written (absent: none).
    pub(super) fn contract(
        &mut self,
        call: &Call,
        server: &Sp<String>,
        tool: &Sp<String>,
        args: Option<&Yaml>,
    ) {
        let Some(lock) = self.lock else { return };
        // `server: self` calls a tool of this graph, checked by its own schema elsewhere.
        let Target::Server(_) = call.target else {
            return;
        };
        let Some(locked) = lock.servers.get(&server.value) else {
            if self.unlocked_servers.insert(server.value.clone()) {
                self.diags
                    .push(Diagnostic::server_not_locked(server.span, &server.value));
            }
            return;
        };
        let Some(locked_tool) = locked.tools.get(&call.tool) else {
            let names: Vec<&str> = locked.tools.keys().map(String::as_str).collect();
            let suggestion = suggest(&mut self.suggestion_budget, &call.tool, &names);
            self.diags.push(Diagnostic::unknown_locked_tool(
                tool.span,
                &server.value,
                &call.tool,
                locked.tools.len(),
                suggestion,
            ));
            return;
        };
        let qualified = format!("{}.{}", server.value, call.tool);
        let diags = arguments(
            self.source,
            &qualified,
            &locked_tool.input_schema,
            &call.args,
            args,
            tool.span,
            &mut self.suggestion_budget,
        );
        self.diags.extend(diags);
    }
}

/// The span of a flow mapping (`{ a: 1 }`) with its closing brace: the parser's ends at the last
/// value, and a label under `{ a: 1` reads as if the brace were missing.
fn closed_flow_mapping(source: &str, span: Span) -> Span {
    let Some(rest) = source.get(span.end..) else {
        return span;
    };
    let after = rest.trim_start_matches([' ', '\t']);
    if source.get(span.start..).is_some_and(|s| s.starts_with('{')) && after.starts_with('}') {
        Span::new(span.start, span.end + (rest.len() - after.len()) + 1)
    } else {
        span
    }
}

/// Keywords that may declare or allow properties in ways this module does not follow.
const COMPOSITION: &[&str] = &[
    "anyOf",
    "oneOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "patternProperties",
    "unevaluatedProperties",
    "propertyNames",
    "$dynamicRef",
    "$recursiveRef",
];

/// The diagnostics of one call's arguments against `schema`, its tool's inputSchema. `template`
/// is the arguments as checked (which tells literals from JSONata), `args` as written (for
/// spans, in `source`; absent: none), `tool_span` where the call names the tool. Suggestions
/// spend `budget` (see `ToolChecker::suggest_node`).
fn arguments(
    source: &str,
    tool: &str,
    schema: &Value,
    template: &Template,
    args: Option<&Yaml>,
    tool_span: Span,
    budget: &mut usize,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // A missing argument is shown on `args`, or on `tool` when the call has none.
    let (place, no_args) = args.map_or((tool_span, true), |a| (a.span, false));
    // `args: {expr: ...}`: the whole object is computed, nothing is known of it.
    if matches!(template, Template::Expr(_)) {
        return out;
    }
    let Some(schema) = schema.as_object() else {
        return out;
    };
    // Before draft 2019-09 the siblings of a `$ref` are ignored: nothing here is certain.
    if schema.contains_key("$ref") {
        return out;
    }
    let entries: &[(Yaml, Yaml)] = args.and_then(Yaml::as_map).unwrap_or(&[]);
    // Which written values are entirely literal: the template keeps the entries in source order.
    let literal: Vec<bool> = match template {
        Template::Literal(_) => vec![true; entries.len()],
        Template::Object(parts) if parts.len() == entries.len() => parts
            .iter()
            .map(|(_, t)| matches!(t, Template::Literal(_)))
            .collect(),
        _ => vec![false; entries.len()],
    };
    let empty = Map::new();
    let properties = schema
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let declared: Vec<&str> = properties.keys().map(String::as_str).collect();

    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        let present: HashSet<String> = entries.iter().map(|(k, _)| k.key_text()).collect();
        for name in required.iter().filter_map(Value::as_str) {
            if !present.contains(name) {
                let description = properties
                    .get(name)
                    .and_then(|p| p.get("description"))
                    .and_then(Value::as_str);
                out.push(Diagnostic::missing_argument(
                    closed_flow_mapping(source, place),
                    tool,
                    name,
                    description,
                    no_args,
                ));
            }
        }
    }

    let composed = COMPOSITION.iter().any(|k| schema.contains_key(*k));
    // An open schema without `properties` (`{type: object}`: "any object") declares nothing, so
    // no argument is undeclared; with `properties`, even `{}`, the tool said what it takes.
    let declares = schema.get("properties").is_some_and(Value::is_object);
    let additional = schema.get("additionalProperties");
    for ((key, value), &is_literal) in entries.iter().zip(&literal) {
        let name = key.key_text();
        let property = match properties.get(&name) {
            Some(property) => Some(property),
            None if composed => None,
            None => match additional {
                Some(Value::Bool(false)) => {
                    let suggestion = suggest(budget, &name, &declared);
                    out.push(Diagnostic::closed_argument(
                        key.span, tool, &name, suggestion, &declared,
                    ));
                    None
                }
                // A schema for the other properties: they are expected, and must fit it.
                Some(other @ Value::Object(o)) if !o.is_empty() => Some(other),
                // `additionalProperties: true` (or `{}`): the tool says it takes others.
                Some(Value::Bool(true) | Value::Object(_)) => None,
                _ if !declares => None,
                _ => {
                    let suggestion = suggest(budget, &name, &declared);
                    out.push(Diagnostic::undeclared_argument(
                        key.span, tool, &name, suggestion, &declared,
                    ));
                    None
                }
            },
        };
        if let (Some(property), true) = (property, is_literal) {
            let mut mismatches = Vec::new();
            literal_fits(value, property, &name, &mut mismatches);
            for m in mismatches {
                out.push(Diagnostic::argument_type(
                    closed_flow_mapping(source, m.span),
                    tool,
                    &m.path,
                    &m.expected,
                    &m.found,
                ));
            }
        }
    }
    out
}

/// "Did you mean" over `candidates`, while the budget lasts: a hostile lock may declare
/// thousands of names, and a hostile graph pass as many unknown ones.
fn suggest(budget: &mut usize, word: &str, candidates: &[&str]) -> Option<String> {
    if candidates.len() > *budget {
        return None;
    }
    *budget -= candidates.len();
    did_you_mean(word, candidates.iter().copied())
}

/// A literal value that its schema does not allow.
#[derive(Debug)]
struct Mismatch {
    span: Span,
    /// Where in the arguments: `path`, `options.depth`, `paths[2]`.
    path: String,
    expected: String,
    found: String,
}

/// Pushes every place in `value` (literal) that `schema` certainly rejects. A level is checked
/// by its `type`, then `enum` and `const`; only a value that passes is looked into.
fn literal_fits(value: &Yaml, schema: &Value, path: &str, out: &mut Vec<Mismatch>) {
    // `true`, `false` and anything that is not a schema object: accepted (see the module doc).
    let Some(schema) = schema.as_object() else {
        return;
    };
    if schema.contains_key("$ref") {
        return;
    }
    let mismatch = |expected: String, found: String| Mismatch {
        span: value.span,
        path: path.to_string(),
        expected,
        found,
    };
    // OpenAPI's `nullable: true` admits null beside `type`.
    let nullable = schema.get("nullable") == Some(&Value::Bool(true));
    if let Some(types) = schema_types(schema)
        && !(nullable && value.to_json().is_null())
        && !types.iter().any(|t| has_type(value, t))
    {
        let integer = types.contains(&"integer");
        out.push(mismatch(
            or_list(&types),
            type_name(value, integer).to_string(),
        ));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        let json = value.to_json();
        if !allowed.iter().any(|a| json_equal(a, &json)) {
            let shown: Vec<String> = allowed.iter().take(8).map(Value::to_string).collect();
            let more = if allowed.len() > 8 { ", …" } else { "" };
            out.push(mismatch(
                format!("one of {}{more}", shown.join(", ")),
                json.to_string(),
            ));
            return;
        }
    }
    if let Some(constant) = schema.get("const") {
        let json = value.to_json();
        if !json_equal(constant, &json) {
            out.push(mismatch(constant.to_string(), json.to_string()));
            return;
        }
    }
    match &value.kind {
        YamlKind::Map(entries) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema
                .get("additionalProperties")
                .filter(|a| a.is_object() && !COMPOSITION.iter().any(|k| schema.contains_key(*k)));
            for (key, item) in entries {
                let name = key.key_text();
                let property = properties.and_then(|p| p.get(&name)).or(additional);
                if let Some(property) = property {
                    literal_fits(item, property, &format!("{path}.{name}"), out);
                }
            }
        }
        YamlKind::Seq(items) => {
            // Draft 2020-12 `prefixItems`, or draft 7's array form of `items`: by position.
            let positional = schema
                .get("prefixItems")
                .or_else(|| schema.get("items").filter(|i| i.is_array()))
                .and_then(Value::as_array);
            let rest = schema.get("items").filter(|i| i.is_object());
            for (i, item) in items.iter().enumerate() {
                let item_schema = match positional {
                    Some(p) => p.get(i).or(if schema.contains_key("prefixItems") {
                        rest
                    } else {
                        None
                    }),
                    None => rest,
                };
                if let Some(item_schema) = item_schema {
                    literal_fits(item, item_schema, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

/// The `type` of a schema, one name or several; `None` when it does not say.
fn schema_types(schema: &Map<String, Value>) -> Option<Vec<&str>> {
    match schema.get("type")? {
        Value::String(t) => Some(vec![t.as_str()]),
        Value::Array(ts) => {
            let names: Option<Vec<&str>> = ts.iter().map(Value::as_str).collect();
            names.filter(|n| !n.is_empty())
        }
        _ => None,
    }
}

/// Whether a literal has a JSON Schema type; a type name that is not one of the seven accepts
/// anything (an invalid schema is not this check's business).
fn has_type(value: &Yaml, name: &str) -> bool {
    match name {
        "null" => matches!(value.kind, YamlKind::Null),
        "boolean" => matches!(value.kind, YamlKind::Bool(_)),
        "string" => matches!(value.kind, YamlKind::Str(_)),
        "array" => matches!(value.kind, YamlKind::Seq(_)),
        "object" => matches!(value.kind, YamlKind::Map(_)),
        "number" => matches!(value.kind, YamlKind::Int(_) | YamlKind::Float(_)),
        // A number with no fraction, `2.0` included (JSON Schema since draft 6).
        "integer" => match value.kind {
            YamlKind::Int(_) => true,
            YamlKind::Float(f) => f.is_finite() && f.fract() == 0.0,
            _ => false,
        },
        _ => true,
    }
}

/// The JSON type of a literal, for messages; a fractional number says so when an integer was
/// expected.
fn type_name(value: &Yaml, integer_expected: bool) -> &'static str {
    match value.kind {
        YamlKind::Null => "null",
        YamlKind::Bool(_) => "boolean",
        YamlKind::Str(_) => "string",
        YamlKind::Seq(_) => "array",
        YamlKind::Map(_) => "object",
        YamlKind::Float(f) if integer_expected && f.fract() != 0.0 => "a number with a fraction",
        YamlKind::Int(_) | YamlKind::Float(_) => "number",
    }
}

fn or_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => (*one).to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// JSON equality as JSON Schema has it: `1` and `1.0` are the same number.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;
    use serde_json::json;

    /// The diagnostics of literal `args` (YAML) against `schema`.
    fn check(schema: Value, args: &str) -> Vec<(Code, String)> {
        let yaml = crate::yaml::parse(args).unwrap();
        let template = Template::Literal(yaml.to_json());
        let mut budget = usize::MAX;
        arguments(
            args,
            "s.t",
            &schema,
            &template,
            Some(&yaml),
            yaml.span,
            &mut budget,
        )
        .into_iter()
        .map(|d| (d.code, d.message))
        .collect()
    }

    fn codes(schema: Value, args: &str) -> Vec<Code> {
        check(schema, args).into_iter().map(|(c, _)| c).collect()
    }

    #[test]
    fn integer_is_a_number_without_fraction() {
        let schema = json!({"properties": {"n": {"type": "integer"}}});
        assert_eq!(codes(schema.clone(), "{n: 3}"), []);
        assert_eq!(codes(schema.clone(), "{n: 3.0}"), []);
        let got = check(schema, "{n: 3.5}");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Code::E0705);
        assert!(
            got[0].1.contains("found a number with a fraction"),
            "{}",
            got[0].1
        );
        let number = json!({"properties": {"n": {"type": "number"}}});
        assert_eq!(codes(number.clone(), "{n: 3}"), []);
        assert_eq!(codes(number, "{n: \"3\"}"), [Code::E0705]);
    }

    #[test]
    fn type_lists_enum_and_const() {
        let schema = json!({"properties": {
            "a": {"type": ["string", "null"]},
            "b": {"enum": ["r", "w", 1]},
            "c": {"const": 2},
        }});
        assert_eq!(codes(schema.clone(), "{a: null, b: r, c: 2.0}"), []);
        assert_eq!(codes(schema.clone(), "{b: 1.0}"), []);
        let got = check(schema, "{a: 1, b: x, c: 3}");
        let messages: Vec<&str> = got.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`a` must be string or null (inputSchema of `s.t`), found number",
                "`b` must be one of \"r\", \"w\", 1 (inputSchema of `s.t`), found \"x\"",
                "`c` must be 2 (inputSchema of `s.t`), found 3",
            ]
        );
    }

    #[test]
    fn nested_literals_follow_properties_and_items() {
        let schema = json!({"properties": {
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}}},
            "paths": {"type": "array", "items": {"type": "string"}},
            "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
        }});
        assert_eq!(
            codes(
                schema.clone(),
                "{opts: {depth: 2, other: x}, paths: [a, b], pair: [a, 1]}"
            ),
            []
        );
        let got = check(schema, "{opts: {depth: deep}, paths: [a, 2], pair: [1, 1]}");
        let messages: Vec<&str> = got.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(
            messages,
            [
                "`opts.depth` must be integer (inputSchema of `s.t`), found string",
                "`paths[1]` must be string (inputSchema of `s.t`), found number",
                "`pair[0]` must be string (inputSchema of `s.t`), found number",
            ]
        );
    }

    #[test]
    fn what_is_not_understood_is_accepted() {
        // A `$ref` at the top, or at a property; composition at a property.
        let top_ref =
            json!({"$ref": "#/$defs/A", "required": ["x"], "additionalProperties": false});
        assert_eq!(codes(top_ref, "{y: 1}"), []);
        let schema = json!({"properties": {
            "a": {"$ref": "#/$defs/A", "type": "string"},
            "b": {"anyOf": [{"type": "string"}, {"type": "number"}]},
            "c": {"oneOf": [{"type": "string"}]},
            "d": true,
        }});
        assert_eq!(codes(schema, "{a: 1, b: true, c: 1, d: 1}"), []);
        // Composition at the top may declare properties: no undeclared-argument diagnostic,
        // though `required` and the declared properties still apply.
        let composed = json!({
            "properties": {"a": {"type": "string"}},
            "required": ["a"],
            "anyOf": [{"properties": {"b": {"type": "number"}}}],
            "additionalProperties": false,
        });
        assert_eq!(codes(composed.clone(), "{a: x, b: 1}"), []);
        assert_eq!(codes(composed, "{b: 1}"), [Code::E0703]);
    }

    #[test]
    fn open_closed_and_additional_schemas() {
        let open = json!({"properties": {"path": {"type": "string"}}});
        let got = check(open, "{path: ., pth: x}");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, Code::W0701);
        let closed = json!({"properties": {"path": {}}, "additionalProperties": false});
        assert_eq!(codes(closed, "{pth: x}"), [Code::E0704]);
        let any = json!({"type": "object"});
        assert_eq!(codes(any, "{anything: 1}"), []);
        let none = json!({"type": "object", "properties": {}});
        assert_eq!(codes(none, "{anything: 1}"), [Code::W0701]);
        let map = json!({"additionalProperties": {"type": "string"}});
        assert_eq!(codes(map.clone(), "{a: x, b: y}"), []);
        assert_eq!(codes(map, "{a: 1}"), [Code::E0705]);
    }

    #[test]
    fn a_jsonata_argument_satisfies_required_and_is_not_typed() {
        let mut budget = usize::MAX;
        let schema = json!({"properties": {"path": {"type": "string"}}, "required": ["path"]});
        let args = "{path: \"$.entry.n\"}";
        let yaml = crate::yaml::parse(args).unwrap();
        let expr = crate::expr::Expr::parse("$.entry.n").unwrap();
        let template = Template::Object(vec![("path".into(), Template::Expr(expr))]);
        let got = arguments(
            args,
            "s.t",
            &schema,
            &template,
            Some(&yaml),
            yaml.span,
            &mut budget,
        );
        assert!(got.is_empty(), "{got:?}");
        // The whole of `args` computed: nothing is known.
        let expr = crate::expr::Expr::parse("$.entry").unwrap();
        let got = arguments(
            "",
            "s.t",
            &schema,
            &Template::Expr(expr),
            None,
            Span::default(),
            &mut budget,
        );
        assert!(got.is_empty(), "{got:?}");
        // Absent args: `{}`, so a required property is missing.
        let empty = Template::Literal(json!({}));
        let got = arguments(
            "",
            "s.t",
            &schema,
            &empty,
            None,
            Span::default(),
            &mut budget,
        );
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].code, Code::E0703);
    }

    #[test]
    fn suggestions_stop_when_the_budget_is_spent() {
        let mut budget = 3;
        assert_eq!(
            suggest(&mut budget, "pth", &["path", "mode"]),
            Some("path".into())
        );
        assert_eq!(budget, 1);
        assert_eq!(suggest(&mut budget, "pth", &["path", "mode"]), None);
        assert_eq!(budget, 1);
    }
}
