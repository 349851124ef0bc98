//! A tool's input and output schemas: object schemas, valid against the JSON Schema meta-schema.

use super::ToolChecker;
use crate::diagnostics::Diagnostic;
use crate::yaml::{Yaml, YamlKind};

impl ToolChecker<'_> {
    pub(super) fn object_schema(&mut self, schema: &Yaml, which: &str) {
        let ok = schema.get("type").and_then(Yaml::as_str) == Some("object");
        if !ok {
            let span = schema.get("type").map_or(schema.span, |t| t.span);
            self.diags.push(Diagnostic::schema_not_object(span, which));
        }
    }

    /// Every violation of the JSON Schema meta-schema (the draft the schema names, else
    /// 2020-12), each pointing at the offending value in the YAML.
    pub(super) fn meta_schema(&mut self, schema: &Yaml, json: &serde_json::Value, which: &str) {
        let tool = self.tool_name().to_string();
        let validator = match jsonschema::meta::validator_for(json) {
            Ok(v) => v,
            // An unknown `$schema`: nothing can be checked (and nothing is fetched).
            Err(e) => {
                let span = schema.get("$schema").map_or(schema.span, |s| s.span);
                self.diags.push(Diagnostic::invalid_schema(
                    span,
                    which,
                    &tool,
                    "/$schema",
                    &e.to_string(),
                ));
                return;
            }
        };
        for error in validator.iter_errors(json) {
            let pointer = error.instance_path().as_str();
            let span = locate_pointer(schema, pointer).span;
            let problem = schema_problem(&error);
            self.diags.push(Diagnostic::invalid_schema(
                span, which, &tool, pointer, &problem,
            ));
        }
    }
}

/// A meta-schema violation in words. jsonschema's own text names the failed keyword of the
/// meta-schema (`anyOf`), which says little about a misspelt type, so `type` gets its own.
fn schema_problem(error: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind;
    let at_type = error.instance_path().as_str().ends_with("/type");
    match error.kind() {
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::Enum { .. } if at_type => format!(
            "{} is not a JSON Schema type: allowed are \"array\", \"boolean\", \"integer\", \"null\", \"number\", \"object\", \"string\", or a list of them",
            error.instance()
        ),
        _ => error.to_string(),
    }
}

/// The YAML node a JSON pointer (RFC 6901) names inside `root`, or the nearest ancestor that
/// exists.
fn locate_pointer<'a>(root: &'a Yaml, pointer: &str) -> &'a Yaml {
    let mut node = root;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let child = match &node.kind {
            YamlKind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.key_text() == token)
                .map(|(_, v)| v),
            YamlKind::Seq(items) => token.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        };
        match child {
            Some(c) => node = c,
            None => break,
        }
    }
    node
}
