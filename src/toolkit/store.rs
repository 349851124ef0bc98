//! The toolkit's graph file: read when asked, edited one edit at a time.
//!
//! [`Store::edit`] reads the file, makes the edit with `mcpgraph_compiler::edit::apply` (the
//! splice and the compiler's check, with the `-m` file and the lock file beside the graph), and
//! writes the new text atomically (`crate::atomic_write`: a temporary file in the graph's
//! directory, given the graph's permissions, then renamed over it), so a reader (`serve
//! --watch`, an editor) sees the old text or the new one, never half of one. All of it happens
//! under one mutex, so two concurrent edits both land, one after the other, each on the text the
//! other left. A refused edit, or one that cannot be written, leaves the file byte-for-byte as it
//! was, and comes back as a [`Refusal`].

use mcpgraph_compiler::edit::{self, Edit, Proposed, Refusal};
use mcpgraph_compiler::{Project, SourceFile};
use serde_json::Value;
use std::path::PathBuf;

/// The mode of a graph file that is gone by the time its edit is written, less the umask.
const NEW_FILE_MODE: u32 = 0o666;

/// An edit whose parts the store owns (what the toolkit's tools receive), for [`Store::edit`].
#[derive(Debug, Clone)]
pub enum OwnedEdit {
    Add(Value),
    Update { name: String, tool: Value },
    Delete { name: String },
}

impl OwnedEdit {
    fn borrowed(&self) -> Edit<'_> {
        match self {
            OwnedEdit::Add(tool) => Edit::Add(tool),
            OwnedEdit::Update { name, tool } => Edit::Update { name, tool },
            OwnedEdit::Delete { name } => Edit::Delete { name },
        }
    }
}

/// The graph file the toolkit serves and edits.
#[derive(Debug)]
pub struct Store {
    graph: PathBuf,
    mcp: Option<PathBuf>,
    /// Held from the read to the rename of every edit.
    edits: tokio::sync::Mutex<()>,
}

impl Store {
    pub fn new(graph: PathBuf, mcp: Option<PathBuf>) -> Store {
        Store {
            graph,
            mcp,
            edits: tokio::sync::Mutex::new(()),
        }
    }

    /// The graph file as it is now.
    pub fn read(&self) -> Result<SourceFile, String> {
        SourceFile::read(&self.graph).map_err(|d| d.message)
    }

    /// Makes one edit: read, check, write, under the store's mutex. Nothing is written unless the
    /// edit is accepted.
    pub async fn edit(&self, edit: OwnedEdit) -> Result<Proposed, Refusal> {
        let _serialised = self.edits.lock().await;
        let file = self.read().map_err(refusal)?;
        let mcp = match &self.mcp {
            Some(path) => Some(SourceFile::read(path).map_err(|d| refusal(d.message))?),
            None => None,
        };
        // An unreadable lock file is the same problem before and after the edit: the edit is
        // checked without it (`check` reports it).
        let lock = Project::new(&self.graph, self.mcp.clone()).read_lock();
        let proposed = edit::apply(&file, mcp.as_ref(), lock.text(), edit.borrowed())?;
        let written =
            crate::atomic_write::write(&self.graph, proposed.text.as_bytes(), NEW_FILE_MODE);
        written.map_err(|e| {
            refusal(format!(
                "the edit was checked but could not be written to {}: {e}; the file is unchanged",
                self.graph.display()
            ))
        })?;
        Ok(proposed)
    }
}

fn refusal(message: String) -> Refusal {
    Refusal {
        message,
        diagnostics: Vec::new(),
        tool_text: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GRAPH: &str = "# comments stay\nversion: \"1.0\"\nserver:\n  name: \"stored\"\n  version: \"1.0.0\"\ntools:\n  # the one tool\n  - name: \"one\"\n    description: \"one\"\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: exit }\n      - { id: exit, type: exit }\n";

    /// A fresh directory holding `graph.yaml`, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("mcpgraph-store-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("graph.yaml"), GRAPH).unwrap();
            Scratch(dir)
        }
        fn graph(&self) -> PathBuf {
            self.0.join("graph.yaml")
        }
        fn text(&self) -> String {
            std::fs::read_to_string(self.graph()).unwrap()
        }
        /// Every file in the directory but the graph (temporary files left behind).
        fn others(&self) -> Vec<String> {
            std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != "graph.yaml")
                .collect()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn tool(name: &str) -> Value {
        json!({
            "name": name,
            "description": "echo",
            "inputSchema": {"type": "object"},
            "nodes": [
                {"id": "entry", "type": "entry", "next": "exit"},
                {"id": "exit", "type": "exit"}
            ]
        })
    }

    #[tokio::test]
    async fn an_accepted_edit_is_written_and_keeps_the_rest() {
        let scratch = Scratch::new("accepted");
        let store = Store::new(scratch.graph(), None);
        let proposed = store.edit(OwnedEdit::Add(tool("two"))).await.unwrap();
        let text = scratch.text();
        assert_eq!(text, proposed.text);
        assert!(text.starts_with(GRAPH), "{text}");
        assert_eq!(edit::tool_names(&store.read().unwrap()), ["one", "two"]);
        assert!(scratch.others().is_empty(), "{:?}", scratch.others());
    }

    #[tokio::test]
    async fn a_refused_edit_writes_nothing() {
        let scratch = Scratch::new("refused");
        let store = Store::new(scratch.graph(), None);
        let refusal = store
            .edit(OwnedEdit::Add(
                json!({"name": "half", "description": "no nodes"}),
            ))
            .await
            .unwrap_err();
        assert!(
            refusal.message.starts_with("the edit was refused"),
            "{refusal:?}"
        );
        assert!(!refusal.diagnostics.is_empty());
        let refusal = store
            .edit(OwnedEdit::Delete {
                name: "nope".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(refusal.message, "Tool \"nope\" not found");
        assert_eq!(scratch.text(), GRAPH);
        assert!(scratch.others().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_edits_all_land() {
        let scratch = Scratch::new("concurrent");
        let store = std::sync::Arc::new(Store::new(scratch.graph(), None));
        let names: Vec<String> = (0..8).map(|i| format!("tool_{i}")).collect();
        let tasks: Vec<_> = names
            .iter()
            .map(|name| {
                let store = store.clone();
                let tool = tool(name);
                tokio::spawn(async move { store.edit(OwnedEdit::Add(tool)).await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        let mut stored = edit::tool_names(&store.read().unwrap());
        assert_eq!(stored.remove(0), "one");
        stored.sort();
        assert_eq!(stored, names);
        assert!(scratch.text().starts_with(GRAPH));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn permissions_are_kept_and_a_read_only_directory_is_a_refusal() {
        use std::os::unix::fs::PermissionsExt;
        let scratch = Scratch::new("permissions");
        let graph = scratch.graph();
        std::fs::set_permissions(&graph, std::fs::Permissions::from_mode(0o640)).unwrap();
        let store = Store::new(graph.clone(), None);
        store.edit(OwnedEdit::Add(tool("two"))).await.unwrap();
        let mode = std::fs::metadata(&graph).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640);

        std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o555)).unwrap();
        let before = scratch.text();
        // Root ignores directory permissions: then the edit lands, which is right too (the write
        // error itself is tested on /proc in crate::atomic_write).
        let privileged = std::fs::write(scratch.0.join("probe"), "").is_ok();
        let _ = std::fs::remove_file(scratch.0.join("probe"));
        let result = store.edit(OwnedEdit::Add(tool("three"))).await;
        std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o755)).unwrap();
        if privileged {
            assert!(result.is_ok());
        } else {
            let refusal = result.unwrap_err();
            assert!(
                refusal.message.contains("could not be written"),
                "{refusal:?}"
            );
            assert_eq!(scratch.text(), before);
            assert!(scratch.others().is_empty());
        }
    }

    #[tokio::test]
    async fn an_unreadable_graph_is_a_refusal() {
        let store = Store::new(PathBuf::from("/nonexistent/graph.yaml"), None);
        let refusal = store.edit(OwnedEdit::Add(tool("x"))).await.unwrap_err();
        assert!(!refusal.message.is_empty());
    }
}
