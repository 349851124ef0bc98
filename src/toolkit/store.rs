//! The toolkit's graph file: read when asked, edited one edit at a time.
//!
//! [`Store::edit`] reads the file, makes the edit with `mcpgraph_compiler::edit::apply` (the
//! splice and the compiler's check, with the `-m` file and the lock file beside the graph), and
//! writes the new text atomically (`crate::atomic_write`: a temporary file in the graph's
//! directory, given the graph's permissions, then renamed over it), so a reader (`serve
//! --watch`, an editor) sees the old text or the new one, never half of one. A refused edit, or
//! one that cannot be written, leaves the file byte-for-byte as it was, and comes back as a
//! [`Refusal`].
//!
//! An edit never replaces bytes it did not read, whoever else writes the file:
//!
//! - Edits of one process are serialised by the store's mutex, and edits of every toolkit
//!   process by an advisory lock (`flock`) on the graph's directory, held from the read to the
//!   rename: two edits sent at once, to one toolkit or to two, both land, each on the text the
//!   other left. The lock is on the directory because the graph itself is a new file after every
//!   edit (a lock on the old one would no longer keep anyone out), because opening the graph to
//!   lock it would block on a FIFO before it is refused as one, and because a lock file beside the
//!   graph would stay in the user's directory and could not be made in a read-only one.
//! - A program that takes no lock (an editor saving the file during a long edit) is caught by
//!   the write: just before the rename the file must still hold the bytes the edit was made from
//!   (`crate::atomic_write::write_over`). When it does not, the edit is made again on the new
//!   bytes (refused, then, if it no longer fits them: a tool of that name was added meanwhile),
//!   up to `ATTEMPTS` times; then it is refused, nothing written. Only a save in the
//!   microseconds between that compare and the rename can still be lost.
//!
//! A path with no file at it (`mcpgraph toolkit new.yaml`, in a directory that exists) reads as
//! `new_graph`'s text: the keys `mcpgraph check` requires, no tools. The first accepted edit
//! creates the file from it (`crate::atomic_write::write`, with the mode an editor gives a new
//! file), unless another program created one since the edit found none: the edit is then made
//! again on that file, as on any file changed since it was read (`create` says what a program
//! that creates it at the last moment can still lose).

use crate::atomic_write::{self, Overwrite};
use mcpgraph_compiler::edit::{self, Edit, Proposed, Refusal};
use mcpgraph_compiler::{Diagnostic, Project, SourceFile};
use serde_json::Value;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How many times one edit is made, each on the file as it is then, before it is refused because
/// another program keeps writing the file between the edit's read and its write.
const ATTEMPTS: usize = 3;

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
    /// Held from the read to the rename of every edit of this process: by the blocking task that
    /// makes it, so that an edit whose call was cancelled holds it until it is done.
    edits: Arc<tokio::sync::Mutex<()>>,
    /// Whether the toolkit started on a path with no file: only then may an edit create it. A
    /// graph that was there and is gone (deleted, or mid-way through another program's save)
    /// is never made again from nothing.
    started_missing: bool,
}

impl Store {
    pub fn new(graph: PathBuf, mcp: Option<PathBuf>) -> Store {
        let started_missing = std::fs::symlink_metadata(&graph)
            .is_err_and(|error| error.kind() == io::ErrorKind::NotFound);
        Store {
            graph,
            mcp,
            edits: Arc::new(tokio::sync::Mutex::new(())),
            started_missing,
        }
    }

    /// The graph file as it is now ([`read_graph`]).
    pub fn read(&self) -> Result<SourceFile, String> {
        read_graph(&self.graph).map_err(|d| d.message)
    }

    /// Makes one edit: read, check, write, under the store's mutex and the directory's lock.
    /// Nothing is written unless the edit is accepted on the bytes it replaces.
    pub async fn edit(&self, edit: OwnedEdit) -> Result<Proposed, Refusal> {
        let serialised = self.edits.clone().lock_owned().await;
        if !self.started_missing
            && std::fs::symlink_metadata(&self.graph)
                .is_err_and(|error| error.kind() == io::ErrorKind::NotFound)
        {
            return Err(refusal(format!(
                "{} is gone: it was there when the toolkit started, so it is not made again from nothing; nothing was written (restore the file, or start the toolkit again to begin a new graph there)",
                self.graph.display()
            )));
        }
        let (graph, mcp) = (self.graph.clone(), self.mcp.clone());
        // On a thread that may block: waiting for another toolkit's lock, the check, the writes.
        let work = tokio::task::spawn_blocking(move || {
            let _serialised = serialised;
            edit_file(&graph, mcp.as_deref(), &edit, || {})
        });
        work.await.unwrap_or_else(|e| {
            Err(refusal(format!(
                "the edit could not be finished ({e}); the file is unchanged"
            )))
        })
    }
}

/// [`Store::edit`]'s work: under the lock on the graph's directory, each attempt reads the
/// files, makes the edit and writes it over the bytes it read, until one finds them still there.
/// `after_read` runs between each attempt's read and its write: in the toolkit it does nothing;
/// a test's editor saves the file there.
fn edit_file(
    graph: &Path,
    mcp: Option<&Path>,
    edit: &OwnedEdit,
    mut after_read: impl FnMut(),
) -> Result<Proposed, Refusal> {
    let _locked = lock_directory(graph);
    for _ in 0..ATTEMPTS {
        let (file, found) = read_start(graph).map_err(|d| refusal(d.message))?;
        let mcp_file = match mcp {
            Some(path) => Some(SourceFile::read(path).map_err(|d| refusal(d.message))?),
            None => None,
        };
        // An unreadable lock file is the same problem before and after the edit: the edit is
        // checked without it (`check` reports it).
        let lock = Project::new(graph, mcp.map(Path::to_path_buf)).read_lock();
        let proposed = edit::apply(&file, mcp_file.as_ref(), lock.text(), edit.borrowed())?;
        after_read();
        let written = match found {
            Found::File => {
                atomic_write::write_over(graph, file.text.as_bytes(), proposed.text.as_bytes())
            }
            Found::NoFileYet => create(graph, proposed.text.as_bytes()),
        };
        match written {
            Ok(Overwrite::Written) => return Ok(proposed),
            // Another program wrote the file since it was read: again, on what it wrote.
            Ok(Overwrite::ChangedSinceRead) => {}
            Err(e) => {
                return Err(refusal(format!(
                    "the edit was checked but could not be written to {}: {e}; \
                     the file is unchanged",
                    graph.display()
                )));
            }
        }
    }
    Err(refusal(format!(
        "another program changed {} while the edit was being made, {ATTEMPTS} times in a row; \
         nothing was written: try the edit again once the other program has saved the file",
        graph.display()
    )))
}

/// The graph the toolkit reads and edits: the file at `graph`, or, while there is no file there
/// and its directory exists, `new_graph`'s text, which the first accepted edit writes. A
/// missing directory is an error naming it: the toolkit would never be able to write the file.
#[expect(
    clippy::result_large_err,
    reason = "the error is `SourceFile::read`'s, shown once"
)]
pub fn read_graph(graph: &Path) -> Result<SourceFile, Diagnostic> {
    read_start(graph).map(|(file, _)| file)
}

/// What an edit starts from: a file, or nothing at the graph's path yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    File,
    NoFileYet,
}

/// [`read_graph`], and which of the two it read.
#[expect(
    clippy::result_large_err,
    reason = "the error is `SourceFile::read`'s, shown once"
)]
fn read_start(graph: &Path) -> Result<(SourceFile, Found), Diagnostic> {
    // Only a path with nothing at all at it is a new graph: a dangling link, or a file that
    // cannot be read, is `SourceFile::read`'s error, and is never replaced by a new graph.
    match std::fs::symlink_metadata(graph) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let name = graph.display().to_string();
            let directory = directory_of(graph);
            if !directory.is_dir() {
                return Err(Diagnostic::unreadable_file(
                    &name,
                    &format!(
                        "there is no file there, and no directory {} to create it in: create the directory first",
                        directory.display()
                    ),
                ));
            }
            Ok((SourceFile::new(name, new_graph(graph)), Found::NoFileYet))
        }
        _ => SourceFile::read(graph).map(|file| (file, Found::File)),
    }
}

/// The graph a toolkit started on a path with no file serves until its first edit creates the
/// file from it: the keys `mcpgraph check` requires (compiler/src/ast.rs) and nothing else, the
/// server named after the file (`new.yaml` serves `new`). No `tools` key: the first tool added
/// brings it (`mcpgraph_compiler::edit` appends `tools:` with the tool under it).
fn new_graph(graph: &Path) -> String {
    // Control characters are not printable in YAML: a stem holding one still names a server.
    let stem: String = graph
        .file_stem()
        .map(|stem| stem.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { '_' } else { c })
        .collect();
    let name = if stem.is_empty() {
        "graph".to_string()
    } else {
        stem
    };
    // A JSON string is a YAML double-quoted scalar: quotes and backslashes in the stem are
    // escaped.
    let name = Value::String(name);
    format!("version: \"1.0\"\nserver:\n  name: {name}\n  version: \"1.0.0\"\n")
}

/// Creates the graph file with the first edit's text, unless a file appeared since the edit
/// found none (another program created it: the edit is made again on its text). Toolkits are
/// kept out by the directory's lock; a program that takes none and creates the file in the
/// milliseconds between this look and the rename (the temporary file's write and flush) is
/// overwritten, as `write_over` loses a save in its last microseconds.
fn create(graph: &Path, contents: &[u8]) -> io::Result<Overwrite> {
    match std::fs::symlink_metadata(graph) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            // 0o666 less the umask: the mode an editor or `touch` gives a new file.
            atomic_write::write(graph, contents, 0o666)?;
            Ok(Overwrite::Written)
        }
        Err(error) => Err(error),
        Ok(_) => Ok(Overwrite::ChangedSinceRead),
    }
}

/// The directory `graph` is in (`.` for a bare file name).
fn directory_of(graph: &Path) -> &Path {
    match graph.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Takes the advisory lock on the graph's directory that every toolkit holds while it edits a
/// graph there, waiting while another holds it; it is released when the file is dropped.
/// `None` where the directory cannot be opened or locked (a file system without `flock`): the
/// edit then relies on the compare before the rename alone.
fn lock_directory(graph: &Path) -> Option<File> {
    // The real file's directory, as `atomic_write` writes the real file: two toolkits that
    // reach one graph through different links take one lock.
    // A graph not written yet has no real path of its own: its directory's is used.
    let directory = std::fs::canonicalize(graph)
        .map(|real| directory_of(&real).to_path_buf())
        .or_else(|_| std::fs::canonicalize(directory_of(graph)))
        .unwrap_or_else(|_| directory_of(graph).to_path_buf());
    // Opened read-only, with close-on-exec (as std opens every file): the downstream servers a
    // run starts do not inherit the lock.
    let handle = File::open(&directory).ok()?;
    handle.lock().ok()?;
    Some(handle)
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

    /// A graph deleted while the toolkit runs is not recreated by the next edit.
    #[tokio::test]
    async fn a_graph_deleted_meanwhile_is_not_made_again() {
        let scratch = Scratch::new("deleted");
        let store = Store::new(scratch.graph(), None);
        std::fs::remove_file(scratch.graph()).unwrap();
        let refusal = store.edit(OwnedEdit::Add(tool("two"))).await.unwrap_err();
        assert!(refusal.message.contains("is gone"), "{refusal:?}");
        assert!(!scratch.graph().exists(), "the edit made the graph again");
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

    /// Two toolkit processes on one file, as they were found losing edits (10 adds each, all
    /// reported as written, 10 or 11 in the file): each store has a mutex of its own, as each
    /// process has, and a runtime on a thread of its own.
    #[test]
    fn two_toolkits_on_one_file_lose_no_edit() {
        const EACH: usize = 10;
        let scratch = Scratch::new("two-toolkits");
        let added: Vec<Vec<String>> = std::thread::scope(|scope| {
            let toolkits: Vec<_> = ["a", "b"]
                .into_iter()
                .map(|toolkit| {
                    let graph = scratch.graph();
                    scope.spawn(move || {
                        let store = Store::new(graph, None);
                        let runtime = tokio::runtime::Builder::new_current_thread()
                            .build()
                            .unwrap();
                        (0..EACH)
                            .map(|i| {
                                let name = format!("{toolkit}_{i}");
                                runtime
                                    .block_on(store.edit(OwnedEdit::Add(tool(&name))))
                                    .unwrap();
                                name
                            })
                            .collect::<Vec<String>>()
                    })
                })
                .collect();
            toolkits.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut expected = added.concat();
        expected.sort();
        let mut stored = edit::tool_names(&SourceFile::read(&scratch.graph()).unwrap());
        assert_eq!(stored.remove(0), "one");
        stored.sort();
        assert_eq!(stored, expected);
        assert!(scratch.text().starts_with(GRAPH));
        assert!(scratch.others().is_empty(), "{:?}", scratch.others());
    }

    /// A tool an editor adds by hand, saved while an edit is being made.
    const EDITED: &str = "  - name: \"edited\"\n    description: \"by hand\"\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: exit }\n      - { id: exit, type: exit }\n";

    /// An editor saves (in place) after the edit read the file and before it wrote it: the save
    /// is kept, and the edit is made again on it.
    #[test]
    fn an_editors_save_during_an_edit_is_kept() {
        let scratch = Scratch::new("editor-save");
        let graph = scratch.graph();
        let saved = format!("{GRAPH}{EDITED}");
        let mut reads = 0;
        let proposed = edit_file(&graph, None, &OwnedEdit::Add(tool("two")), || {
            reads += 1;
            if reads == 1 {
                std::fs::write(&graph, &saved).unwrap();
            }
        })
        .unwrap();
        assert_eq!(reads, 2);
        let text = scratch.text();
        assert_eq!(text, proposed.text);
        assert!(text.starts_with(&saved), "{text}");
        assert_eq!(
            edit::tool_names(&SourceFile::read(&graph).unwrap()),
            ["one", "edited", "two"]
        );
        assert!(scratch.others().is_empty(), "{:?}", scratch.others());
    }

    /// An editor saves (a new file renamed over the graph) between every attempt's read and
    /// write: the edit is refused, and the file holds the editor's last save.
    #[test]
    fn an_edit_whose_file_keeps_changing_is_refused_and_writes_nothing() {
        let scratch = Scratch::new("editor-race");
        let graph = scratch.graph();
        let mut saves = 0;
        let refusal = edit_file(&graph, None, &OwnedEdit::Add(tool("two")), || {
            saves += 1;
            let saving = scratch.0.join("graph.yaml.saving");
            std::fs::write(&saving, format!("{GRAPH}# save {saves}\n")).unwrap();
            std::fs::rename(&saving, &graph).unwrap();
        })
        .unwrap_err();
        assert_eq!(saves, ATTEMPTS);
        assert!(
            refusal.message.starts_with("another program changed")
                && refusal.message.contains("nothing was written"),
            "{refusal:?}"
        );
        assert_eq!(scratch.text(), format!("{GRAPH}# save {ATTEMPTS}\n"));
        assert!(scratch.others().is_empty(), "{:?}", scratch.others());
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

    /// The graph a toolkit started on `new.yaml` serves before the file exists.
    const NEW: &str = "version: \"1.0\"\nserver:\n  name: \"new\"\n  version: \"1.0.0\"\n";

    /// A path with no file (issue 24, item 4): the graph has no tools and its server is named
    /// after the file; a refused edit creates nothing; the first accepted one creates the file,
    /// which checks clean.
    #[tokio::test]
    async fn the_first_edit_of_a_missing_graph_creates_it() {
        let scratch = Scratch::new("missing-graph");
        let graph = scratch.0.join("new.yaml");
        let store = Store::new(graph.clone(), None);
        let empty = store.read().unwrap();
        assert_eq!(empty.text, NEW);
        assert!(edit::tool_names(&empty).is_empty());
        let refusal = store
            .edit(OwnedEdit::Delete { name: "one".into() })
            .await
            .unwrap_err();
        assert_eq!(refusal.message, "Tool \"one\" not found");
        assert!(!graph.exists());

        let proposed = store.edit(OwnedEdit::Add(tool("two"))).await.unwrap();
        let text = std::fs::read_to_string(&graph).unwrap();
        assert_eq!(text, proposed.text);
        assert!(text.starts_with(&format!("{NEW}tools:\n")), "{text}");
        let (_, checked) = Project::new(&graph, None).load();
        assert_eq!(
            (checked.error_count(), checked.warning_count()),
            (0, 0),
            "{:?}",
            checked.diagnostics
        );
        assert_eq!(edit::tool_names(&store.read().unwrap()), ["two"]);
        assert_eq!(scratch.others(), ["new.yaml"]);
    }

    /// Another program creates the file after the first edit found none and before it wrote:
    /// what it wrote is kept, and the edit is made again on it.
    #[test]
    fn a_file_created_during_the_first_edit_is_kept() {
        let scratch = Scratch::new("created-meanwhile");
        let graph = scratch.0.join("new.yaml");
        let mut reads = 0;
        let proposed = edit_file(&graph, None, &OwnedEdit::Add(tool("two")), || {
            reads += 1;
            if reads == 1 {
                std::fs::write(&graph, GRAPH).unwrap();
            }
        })
        .unwrap();
        assert_eq!(reads, 2);
        let text = std::fs::read_to_string(&graph).unwrap();
        assert_eq!(text, proposed.text);
        assert!(text.starts_with(GRAPH), "{text}");
        assert_eq!(
            edit::tool_names(&SourceFile::read(&graph).unwrap()),
            ["one", "two"]
        );
    }

    /// A new graph in a directory that does not exist could never be written: reading it is an
    /// error naming the directory, and an edit is refused with it, creating nothing.
    #[test]
    fn a_new_graph_in_a_missing_directory_is_refused_naming_it() {
        let scratch = Scratch::new("missing-directory");
        let graph = scratch.0.join("no/such/new.yaml");
        let error = read_graph(&graph).unwrap_err();
        let directory = scratch.0.join("no/such");
        assert!(
            error
                .message
                .contains(&format!("no directory {}", directory.display())),
            "{}",
            error.message
        );
        let refusal = edit_file(&graph, None, &OwnedEdit::Add(tool("two")), || {}).unwrap_err();
        assert_eq!(refusal.message, error.message);
        assert!(!scratch.0.join("no").exists());
    }
}
