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
                input_schema: value("inputSchema").unwrap_or_else(|| Value::Object(Default::default())),
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
                    offset += l
                        .char_indices()
                        .nth(column.saturating_sub(1))
                        .map_or(l.len(), |(b, _)| b);
                    break;
                }
                offset += l.len();
            }
            offset.min(file.text.len())
        };
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
/// text or why it cannot be read.
pub fn read_beside(graph: &Path) -> Option<Result<SourceFile, Diagnostic>> {
    let path = lock_path(graph);
    path.exists().then(|| SourceFile::read(&path))
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
        assert_eq!(lock_path(Path::new("a/b/g.yaml")), Path::new("a/b/g.lock.json"));
    }

    #[test]
    fn bad_lock_points_into_the_file() {
        let file = SourceFile::new("g.lock.json", "{\n  \"lockVersion\": 1,\n  \"oops\": 2\n}\n");
        let d = Lock::parse(&file).unwrap_err();
        assert_eq!(d.code, crate::Code::E0701);
        assert!(d.message.contains("oops"), "{}", d.message);
        // serde_json reports the key's last character.
        let key = file.text.find("\"oops\"").unwrap();
        let at = d.span().unwrap().start;
        assert!((key..key + 6).contains(&at), "{at}");
    }
}
