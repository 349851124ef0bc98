//! YAML text → a generic tree in which every node carries its byte span.
//!
//! The graph file embeds arbitrary JSON (schemas, literal arguments, JSON Logic rules), and a wrong
//! type in one field must not stop the check of the rest of the file, so we do not deserialize
//! straight into typed structs: serde-saphyr gives us this spanned tree (strict YAML 1.2 booleans,
//! duplicate keys rejected), and `ast.rs` types it by hand, collecting every error it finds.

use crate::diagnostics::{Diagnostic, Span};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// One YAML node and where it is.
#[derive(Debug, Clone)]
pub struct Yaml {
    pub span: Span,
    pub kind: YamlKind,
}

#[derive(Debug, Clone)]
pub enum YamlKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Yaml>),
    /// Keys are kept in source order; duplicates were already rejected by the parser.
    Map(Vec<(Yaml, Yaml)>),
}

impl Yaml {
    /// What the user wrote, as a word for messages ("a string", "a mapping" ...).
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            YamlKind::Null => "null",
            YamlKind::Bool(_) => "a boolean",
            YamlKind::Int(_) => "an integer",
            YamlKind::Float(_) => "a number",
            YamlKind::Str(_) => "a string",
            YamlKind::Seq(_) => "a sequence",
            YamlKind::Map(_) => "a mapping",
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            YamlKind::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(Yaml, Yaml)]> {
        match &self.kind {
            YamlKind::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value under a string key of a mapping.
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// The plain JSON value of this subtree (spans dropped).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            YamlKind::Null => Value::Null,
            YamlKind::Bool(b) => Value::Bool(*b),
            YamlKind::Int(i) => Value::from(*i),
            YamlKind::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            YamlKind::Str(s) => Value::String(s.clone()),
            YamlKind::Seq(items) => Value::Array(items.iter().map(Yaml::to_json).collect()),
            YamlKind::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.key_text(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// A mapping key as JSON object key text (YAML allows non-string keys; JSON does not).
    pub fn key_text(&self) -> String {
        match &self.kind {
            YamlKind::Str(s) => s.clone(),
            YamlKind::Null => "null".into(),
            YamlKind::Bool(b) => b.to_string(),
            YamlKind::Int(i) => i.to_string(),
            YamlKind::Float(f) => f.to_string(),
            YamlKind::Seq(_) | YamlKind::Map(_) => self.to_json().to_string(),
        }
    }
}

/// Parses one YAML document. The only errors here are YAML syntax errors, duplicate keys and a
/// file past the `budget`, which end parsing: there is no tree to check after them.
#[expect(
    clippy::result_large_err,
    reason = "the error happens at most once per file; boxing it would only burden every caller"
)]
pub fn parse(source: &str) -> Result<Yaml, Diagnostic> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        with_snippet: false,
        budget: Some(budget()),
    };
    match serde_saphyr::from_str_with_options::<Option<Spanned<Raw>>>(source, options) {
        Ok(Some(spanned)) => Ok(from_spanned(spanned, source)),
        // An empty file is an empty document: report it like any top-level type error later.
        Ok(None) => Ok(Yaml {
            span: Span::new(0, 0),
            kind: YamlKind::Null,
        }),
        Err(error) => Err(yaml_error(&error, source)),
    }
}

/// The limits a graph file's YAML is read within: serde-saphyr's defaults, named here so that a
/// refusal can quote the limit it met. They bound the memory and time a runaway or hostile file
/// takes before its tree is built; the tightest in practice is the 250,000 YAML nodes, which a
/// tool of about 24,000 graph nodes reaches.
pub(crate) fn budget() -> serde_saphyr::Budget {
    serde_saphyr::Budget::default()
}

fn yaml_error(error: &serde_saphyr::Error, source: &str) -> Diagnostic {
    let span = error
        .location()
        .map(|loc| location_span(&loc, source))
        .unwrap_or_else(|| Span::new(0, 0));
    if let serde_saphyr::Error::Budget { breach, .. } = original_error(error) {
        return Diagnostic::yaml_syntax(span, budget_breach_message(breach, &budget())).with_help(
            "the limit bounds the memory and time reading a graph file takes; make the file \
             smaller: write repeated steps once (a `map` node over a list instead of one node per \
             item), or move tools into another graph file served as an MCP server of this one",
        );
    }
    let message = own_words(plain_message(&error.without_snippet().to_string()));
    if message.contains("duplicate") {
        Diagnostic::duplicate_key(span, message)
    } else {
        Diagnostic::yaml_syntax(span, message)
    }
}

/// The error serde-saphyr met, out of the wrappers that add a source snippet or an alias's site.
fn original_error(mut error: &serde_saphyr::Error) -> &serde_saphyr::Error {
    use serde_saphyr::Error;
    while let Error::WithSnippet { error: inner, .. } | Error::AliasError { error: inner, .. } =
        error
    {
        error = &**inner;
    }
    error
}

/// Which of the budget's limits the file passed, and the limit, in a graph file's terms:
/// serde-saphyr's own text is its enum's `Debug` form (`Nodes { nodes: 250001 }`).
fn budget_breach_message(
    breach: &serde_saphyr::budget::BudgetBreach,
    budget: &serde_saphyr::Budget,
) -> String {
    use serde_saphyr::budget::BudgetBreach;
    let (limit, what) = match breach {
        BudgetBreach::Nodes { .. } => (
            budget.max_nodes,
            "YAML nodes (mappings, sequences and scalars)",
        ),
        BudgetBreach::Events { .. } => (budget.max_events, "YAML parser events"),
        BudgetBreach::Depth { .. } => (budget.max_depth, "levels of nesting"),
        BudgetBreach::ScalarBytes { .. } => (budget.max_total_scalar_bytes, "bytes of scalar text"),
        BudgetBreach::Aliases { .. } => (budget.max_aliases, "aliases (`*name`)"),
        BudgetBreach::Anchors { .. } => (budget.max_anchors, "anchors (`&name`)"),
        BudgetBreach::MergeKeys { .. } => (budget.max_merge_keys, "merge keys (`<<`)"),
        BudgetBreach::Documents { .. } => (budget.max_documents, "YAML documents"),
        BudgetBreach::RecordedAnchorEvents { .. } => (
            budget.max_recorded_anchor_events,
            "parser events copied for anchors",
        ),
        BudgetBreach::RecordedAnchorBytes { .. } => (
            budget.max_recorded_anchor_bytes,
            "bytes of text copied for anchors",
        ),
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => {
            return format!(
                "the file is too large to read: its {aliases} aliases use its {anchors} anchors more than {} times each, the most a graph file may",
                budget.alias_anchor_ratio_multiplier
            );
        }
        other => {
            return format!(
                "the file is too large or too complex to read (a YAML budget was passed: {other:?})"
            );
        }
    };
    format!(
        "the file is too large to read: it holds more than {limit} {what}, the most a graph file may hold"
    )
}

/// serde-saphyr's messages in a graph file's terms: some of them address a Rust programmer
/// calling the library ("use from_str_multiple ...").
fn own_words(message: String) -> String {
    if message.contains("from_str_multiple") || message.contains("multiple documents") {
        return "the file holds more than one YAML document: a graph file is a single document (remove the `---` or `...` separating them)".to_string();
    }
    message
}

/// serde-saphyr prefixes messages with their position ("line 6 column 18: ..."); our renderer
/// prints positions itself.
fn plain_message(text: &str) -> String {
    let text = text.trim();
    // ... and sometimes suffix them (" at line 7, column 10").
    let text = match text.rfind(" at line ") {
        Some(i) if text[i..].contains("column") => &text[..i],
        _ => text,
    };
    let text = text.strip_prefix("error: ").unwrap_or(text);
    if let Some(rest) = text.strip_prefix("line ")
        && let Some(colon) = rest.find(": ")
        && rest[..colon].contains("column")
    {
        return rest[colon + 2..].to_string();
    }
    text.to_string()
}

fn location_span(loc: &serde_saphyr::Location, source: &str) -> Span {
    let span = loc.span();
    if let (Some(offset), Some(len)) = (span.byte_offset(), span.byte_len()) {
        let start = (offset as usize).min(source.len());
        let end = (start + len as usize).min(source.len());
        return Span::new(start, end);
    }
    // Fall back on line/column (1-based, in characters).
    let start = offset_of(source, loc.line() as usize, loc.column() as usize);
    Span::new(start, start)
}

/// Byte offset of a 1-based (line, character column) position.
pub fn offset_of(source: &str, line: usize, column: usize) -> usize {
    let mut offset = 0;
    for (index, text) in source.split_inclusive('\n').enumerate() {
        if index + 1 == line {
            let within: usize = text
                .chars()
                .take(column.saturating_sub(1))
                .map(char::len_utf8)
                .sum();
            return offset + within;
        }
        offset += text.len();
    }
    source.len()
}

fn from_spanned(spanned: Spanned<Raw>, source: &str) -> Yaml {
    let span = location_span(&spanned.referenced, source);
    let kind = match spanned.value {
        Raw::Null => YamlKind::Null,
        Raw::Bool(b) => YamlKind::Bool(b),
        Raw::Int(i) => YamlKind::Int(i),
        Raw::Float(f) => YamlKind::Float(f),
        Raw::Str(s) => YamlKind::Str(s),
        Raw::Seq(items) => {
            YamlKind::Seq(items.into_iter().map(|i| from_spanned(i, source)).collect())
        }
        Raw::Map(entries) => YamlKind::Map(
            entries
                .into_iter()
                .map(|(k, v)| (from_spanned(k, source), from_spanned(v, source)))
                .collect(),
        ),
    };
    // A collection's span as reported covers its first token; widen it to its last child so that
    // labels on a whole mapping read naturally.
    let span = match &kind {
        YamlKind::Seq(items) => items.last().map_or(span, |l| span.to(l.span)),
        YamlKind::Map(entries) => entries.last().map_or(span, |(_, v)| span.to(v.span)),
        _ => span,
    };
    Yaml { span, kind }
}

/// The untyped YAML value serde-saphyr deserializes, each child wrapped in `Spanned`.
enum Raw {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Raw>>),
    Map(Vec<(Spanned<Raw>, Spanned<Raw>)>),
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        Ok(i64::try_from(v).map_or(Raw::Float(v as f64), Raw::Int))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Raw, E> {
        Ok(i64::try_from(v).map_or(Raw::Float(v as f64), Raw::Int))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Raw, E> {
        Ok(i64::try_from(v).map_or(Raw::Float(v as f64), Raw::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Raw, E> {
        Ok(Raw::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Raw>>()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Spanned<Raw>>()? {
            let value = map.next_value::<Spanned<Raw>>()?;
            entries.push((key, value));
        }
        Ok(Raw::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file with more YAML nodes than the budget allows names the budget and its limit, not
    /// serde-saphyr's `Nodes { nodes: 250001 }`, and says what to do.
    #[test]
    fn a_file_past_the_node_budget_names_the_budget() {
        let limit = budget().max_nodes;
        // One scalar node an item, and the mapping, its `tools` key and the sequence besides.
        let text = format!("tools:\n{}", "- 0\n".repeat(limit));
        let error = parse(&text).expect_err("the file is past the budget");
        assert!(
            error
                .message
                .contains(&format!("more than {limit} YAML nodes")),
            "{}",
            error.message
        );
        assert!(
            error
                .help
                .as_deref()
                .is_some_and(|help| help.contains("memory")),
            "{:?}",
            error.help
        );
    }
}
