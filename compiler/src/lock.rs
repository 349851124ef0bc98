//! Lock files: the contracts of the downstream servers a graph calls (`serverInfo` and the full
//! `tools/list`), written by `mcpgraph lock` beside the graph as `<stem>.lock.json`, and read by
//! every front end so that `check` knows the real tools without starting anything.
//!
//! The text is deterministic: object keys sorted at every depth (schemas included), two-space
//! indentation, a final newline. Two locks of the same servers are byte-for-byte equal, so the
//! file diffs well in review.

use crate::diagnostics::{Diagnostic, SourceFile};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The format of the lock file; a newer one is refused with a clear message.
pub const LOCK_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Lock {
    pub lock_version: u32,
    /// The mcpgraph version that wrote the file.
    pub mcpgraph: String,
    /// By the name the graph (or the `-m` file) gives the server.
    pub servers: BTreeMap<String, LockedServer>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LockedServer {
    /// As the server sent it in `initialize` (`name`, `version`, and whatever else it sent).
    pub server_info: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    pub tools: BTreeMap<String, LockedTool>,
}

/// One tool of `tools/list`, without its name (the key).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LockedTool {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl LockedTool {
    /// A tool as `tools/list` shows it (a JSON object with `name`); `None` without a name.
    pub fn from_listed(tool: &Value) -> Option<(String, LockedTool)> {
        let name = tool.get("name")?.as_str()?.to_string();
        let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_string);
        let value = |key: &str| tool.get(key).filter(|v| !v.is_null()).map(canonical);
        Some((
            name,
            LockedTool {
                title: text("title"),
                description: text("description"),
                input_schema: value("inputSchema")
                    .unwrap_or_else(|| Value::Object(Default::default())),
                output_schema: value("outputSchema"),
                annotations: value("annotations"),
            },
        ))
    }
}

impl Lock {
    pub fn new(servers: BTreeMap<String, LockedServer>) -> Lock {
        Lock {
            lock_version: LOCK_VERSION,
            mcpgraph: env!("CARGO_PKG_VERSION").to_string(),
            servers,
        }
    }

    /// Reads a lock file; a problem is one E0701 pointing into it.
    #[expect(
        clippy::result_large_err,
        reason = "read once per compile; boxing would only burden every caller"
    )]
    pub fn parse(file: &SourceFile) -> Result<Lock, Diagnostic> {
        let shared = std::sync::Arc::new(file.clone());
        let at = |line: usize, column: usize| {
            let mut offset = 0;
            for (i, l) in file.text.split_inclusive('\n').enumerate() {
                if i + 1 == line {
                    // serde_json counts the column in bytes.
                    let mut byte = column.saturating_sub(1).min(l.len());
                    while !l.is_char_boundary(byte) {
                        byte -= 1;
                    }
                    offset += byte;
                    break;
                }
                offset += l.len();
            }
            offset.min(file.text.len())
        };
        // The format's version first: a newer format may have fields this one does not know.
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Version {
            lock_version: u32,
        }
        if let Ok(Version { lock_version }) = serde_json::from_str::<Version>(&file.text)
            && lock_version != LOCK_VERSION
        {
            let offset = file.text.find("\"lockVersion\"").unwrap_or(0);
            return Err(Diagnostic::in_file(
                &shared,
                Diagnostic::lock_file(
                    offset,
                    &format!(
                        "lock format {lock_version} is not the one this mcpgraph reads ({LOCK_VERSION}); run `mcpgraph lock` again"
                    ),
                ),
            ));
        }
        let lock: Lock = serde_json::from_str(&file.text).map_err(|e| {
            let offset = at(e.line(), e.column());
            let message = e.to_string();
            // serde_json appends " at line L column C": the position is shown by the label.
            let message = message
                .rsplit_once(" at line ")
                .map_or(message.as_str(), |(m, _)| m);
            Diagnostic::in_file(&shared, Diagnostic::lock_file(offset, message))
        })?;
        if lock.lock_version != LOCK_VERSION {
            let offset = file.text.find("\"lockVersion\"").unwrap_or(0);
            return Err(Diagnostic::in_file(
                &shared,
                Diagnostic::lock_file(
                    offset,
                    &format!(
                        "lock format {} is not the one this mcpgraph reads ({LOCK_VERSION}); run `mcpgraph lock` again",
                        lock.lock_version
                    ),
                ),
            ));
        }
        Ok(lock)
    }

    /// The file's text: keys sorted at every depth, a final newline.
    pub fn to_text(&self) -> String {
        let value = canonical(&serde_json::to_value(self).unwrap_or(Value::Null));
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    }

    /// A server's locked tool.
    pub fn tool(&self, server: &str, tool: &str) -> Option<&LockedTool> {
        self.servers.get(server)?.tools.get(tool)
    }
}

/// `graph.yaml` → `graph.lock.json`, in the same directory.
pub fn lock_path(graph: &Path) -> PathBuf {
    let stem = graph
        .file_stem()
        .map_or_else(|| "graph".into(), |s| s.to_string_lossy().into_owned());
    graph.with_file_name(format!("{stem}.lock.json"))
}

/// The lock file beside a graph, when there is one: `None` when it does not exist, else its
/// text or why it cannot be read (an E0701 without a place: there is no text to point into).
pub fn read_beside(graph: &Path) -> Option<Result<SourceFile, Diagnostic>> {
    let path = lock_path(graph);
    if path.exists() {
        Some(read_lock(&path))
    } else {
        None
    }
}

#[expect(
    clippy::result_large_err,
    reason = "read once per compile, as `SourceFile::read`"
)]
fn read_lock(path: &Path) -> Result<SourceFile, Diagnostic> {
    SourceFile::read(path).map_err(|unreadable| Diagnostic {
        location: crate::diagnostics::Location::Nowhere,
        ..Diagnostic::lock_file(0, &unreadable.message)
    })
}

/// How a tool of the live server differs from the lock.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChange {
    /// The live server has it; the lock does not.
    Added,
    /// The lock has it; the live server does not.
    Removed,
    /// Both have it; these parts differ, in the order of [`LockedTool`]'s fields.
    Changed(Vec<PartChange>),
}

/// One differing part of a tool (or of a server's `serverInfo`).
#[derive(Debug, Clone, PartialEq)]
pub enum PartChange {
    /// A text (`title`, `description`) differs.
    Text(&'static str),
    /// The part is on one side only; `true`: the live server has it.
    Presence(&'static str, bool),
    /// A JSON value (`inputSchema`, `outputSchema`, `annotations`) differs at these JSON
    /// pointers (the first [`MAX_PLACES`] in key order); `more`: elsewhere too.
    Value {
        part: &'static str,
        places: Vec<String>,
        more: bool,
    },
}

/// The most differing places a [`PartChange::Value`] names.
pub const MAX_PLACES: usize = 3;

/// The tools whose live contract differs from the locked one, by name.
pub fn diff_tools(locked: &LockedServer, live: &LockedServer) -> Vec<(String, ToolChange)> {
    let names: std::collections::BTreeSet<&String> =
        locked.tools.keys().chain(live.tools.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        let change = match (locked.tools.get(name), live.tools.get(name)) {
            (Some(_), None) => ToolChange::Removed,
            (None, Some(_)) => ToolChange::Added,
            (Some(old), Some(new)) => {
                let parts = diff_tool(old, new);
                if parts.is_empty() {
                    continue;
                }
                ToolChange::Changed(parts)
            }
            (None, None) => continue,
        };
        out.push((name.clone(), change));
    }
    out
}

fn diff_tool(old: &LockedTool, new: &LockedTool) -> Vec<PartChange> {
    let mut parts = Vec::new();
    let mut text = |part, a: &Option<String>, b: &Option<String>| match (a, b) {
        (Some(a), Some(b)) if a != b => parts.push(PartChange::Text(part)),
        (None, Some(_)) => parts.push(PartChange::Presence(part, true)),
        (Some(_), None) => parts.push(PartChange::Presence(part, false)),
        _ => {}
    };
    text("title", &old.title, &new.title);
    text("description", &old.description, &new.description);
    parts.extend(diff_value(
        "inputSchema",
        Some(&old.input_schema),
        Some(&new.input_schema),
    ));
    parts.extend(diff_value(
        "outputSchema",
        old.output_schema.as_ref(),
        new.output_schema.as_ref(),
    ));
    parts.extend(diff_value(
        "annotations",
        old.annotations.as_ref(),
        new.annotations.as_ref(),
    ));
    parts
}

/// How a JSON part differs, if it does: presence, or the pointers of the first differences.
pub fn diff_value(
    part: &'static str,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Option<PartChange> {
    match (old, new) {
        (None, None) => None,
        (None, Some(_)) => Some(PartChange::Presence(part, true)),
        (Some(_), None) => Some(PartChange::Presence(part, false)),
        (Some(a), Some(b)) => {
            let mut places = Vec::new();
            differences(a, b, &mut String::new(), &mut places);
            if places.is_empty() {
                return None;
            }
            let more = places.len() > MAX_PLACES;
            places.truncate(MAX_PLACES);
            Some(PartChange::Value { part, places, more })
        }
    }
}

/// Pushes the JSON pointers where `a` and `b` differ, in key order, stopping after one more than
/// [`MAX_PLACES`] (enough to know there are more).
fn differences(a: &Value, b: &Value, pointer: &mut String, out: &mut Vec<String>) {
    if out.len() > MAX_PLACES || a == b {
        return;
    }
    let mut at = |key: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>| {
        let len = pointer.len();
        pointer.push('/');
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
        match (a, b) {
            (Some(a), Some(b)) => differences(a, b, pointer, out),
            _ if out.len() <= MAX_PLACES => out.push(pointer.clone()),
            _ => {}
        }
        pointer.truncate(len);
    };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                at(key, x.get(key), y.get(key), out);
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                at(&i.to_string(), x.get(i), y.get(i), out);
            }
        }
        _ => out.push(pointer.clone()),
    }
}

impl std::fmt::Display for PartChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartChange::Text(part) => write!(f, "{part} changed"),
            PartChange::Presence(part, true) => write!(f, "{part} added"),
            PartChange::Presence(part, false) => write!(f, "{part} removed"),
            PartChange::Value { part, places, more } => {
                let places: Vec<&str> = places
                    .iter()
                    .map(|p| if p.is_empty() { "the root" } else { p.as_str() })
                    .collect();
                write!(f, "{part} differs at {}", places.join(", "))?;
                if *more {
                    f.write_str(" and elsewhere")?;
                }
                Ok(())
            }
        }
    }
}

impl std::fmt::Display for ToolChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolChange::Added => f.write_str("added"),
            ToolChange::Removed => f.write_str("removed"),
            ToolChange::Changed(parts) => {
                let parts: Vec<String> = parts.iter().map(ToString::to_string).collect();
                write!(f, "changed: {}", parts.join("; "))
            }
        }
    }
}

/// A JSON value with the keys of every object sorted (serde_json here keeps insertion order).
pub fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_sorted_and_round_trips() {
        let listed = serde_json::json!({
            "name": "echo",
            "inputSchema": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "number"}}},
            "description": "Echo"
        });
        let (name, tool) = LockedTool::from_listed(&listed).unwrap();
        let lock = Lock::new(BTreeMap::from([(
            "mock".to_string(),
            LockedServer {
                server_info: serde_json::json!({"version": "1", "name": "m"}),
                protocol_version: Some("2025-06-18".into()),
                tools: BTreeMap::from([(name, tool)]),
            },
        )]));
        let text = lock.to_text();
        assert!(text.find("\"a\"").unwrap() < text.find("\"z\"").unwrap());
        assert!(text.find("\"name\": \"m\"").unwrap() < text.find("\"version\": \"1\"").unwrap());
        let back = Lock::parse(&SourceFile::new("g.lock.json", text.clone())).unwrap();
        assert_eq!(back.to_text(), text);
        assert_eq!(
            lock_path(Path::new("a/b/g.yaml")),
            Path::new("a/b/g.lock.json")
        );
    }

    #[test]
    fn diff_names_the_parts_and_places() {
        let tool = |listed: Value| LockedTool::from_listed(&listed).unwrap();
        let server = |tools: Vec<(String, LockedTool)>| LockedServer {
            server_info: serde_json::json!({"name": "m"}),
            protocol_version: None,
            tools: tools.into_iter().collect(),
        };
        let locked = server(vec![
            tool(serde_json::json!({"name": "a", "description": "A",
                "inputSchema": {"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}})),
            tool(serde_json::json!({"name": "gone", "inputSchema": {"type": "object"}})),
            tool(serde_json::json!({"name": "same", "inputSchema": {"type": "object"}})),
        ]);
        let live = server(vec![
            tool(serde_json::json!({"name": "a", "description": "A!",
                "inputSchema": {"type": "object", "properties": {"p": {"type": "number"}, "q/r": {}}, "required": []},
                "outputSchema": {"type": "object"}})),
            tool(serde_json::json!({"name": "new", "inputSchema": {"type": "object"}})),
            tool(serde_json::json!({"name": "same", "inputSchema": {"type": "object"}})),
        ]);
        let diff = diff_tools(&locked, &live);
        let text: Vec<String> = diff.iter().map(|(n, c)| format!("{n}: {c}")).collect();
        assert_eq!(
            text,
            [
                "a: changed: description changed; inputSchema differs at /properties/p/type, /properties/q~1r, /required/0; outputSchema added",
                "gone: removed",
                "new: added",
            ]
        );
        let many = diff_value(
            "inputSchema",
            Some(&serde_json::json!([1, 2, 3, 4, 5])),
            Some(&serde_json::json!([0, 0, 0, 0, 0])),
        );
        assert_eq!(
            many.unwrap().to_string(),
            "inputSchema differs at /0, /1, /2 and elsewhere"
        );
    }

    #[test]
    fn bad_lock_points_into_the_file() {
        let file = SourceFile::new(
            "g.lock.json",
            "{\n  \"lockVersion\": 1,\n  \"oops\": 2\n}\n",
        );
        let d = Lock::parse(&file).unwrap_err();
        assert_eq!(d.code, crate::Code::E0701);
        assert!(d.message.contains("oops"), "{}", d.message);
        // serde_json reports the key's last character.
        let key = file.text.find("\"oops\"").unwrap();
        let at = d.span().unwrap().start;
        assert!((key..key + 6).contains(&at), "{at}");
    }
}
