//! A graph's project: the files one graph is made from — the graph file, the `-m` file given with
//! it, and the lock file beside the graph — read under one policy and compiled, and the list of
//! paths whose change makes a new version. Every front end goes through it: `check`, `call`,
//! `serve` (and `--watch`), `build`, `emit`, the toolkit, the studio and `graph!` compile with
//! it, so a lock file is found, read and judged the same way everywhere; `lock` takes its paths,
//! its reading of the lock and [`servers_used`] from it, and reads the graph without its lock
//! (the lock is what it makes).
//!
//! The policy, in one place:
//! - the graph file and the `-m` file must be readable: [`Project::read`] says why not;
//! - no lock file beside the graph: the graph is checked without contracts;
//! - a lock file that cannot be read, or does not parse, is an error (E0701), first in the
//!   list: a graph whose contracts cannot be known does not check.

use crate::diagnostics::{Diagnostic, SourceFile};
use crate::{Checked, check, compile_from, lock};
use std::path::{Path, PathBuf};

/// The files of one graph, by path; nothing is read until asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    graph: PathBuf,
    mcp: Option<PathBuf>,
    /// How diagnostics name the graph file: its path, unless the front end names it otherwise
    /// (`graph!` names it as written, relative to the crate).
    name: Option<String>,
}

/// The texts of a project as read at one moment.
#[derive(Debug, Clone)]
pub struct Sources {
    pub graph: SourceFile,
    pub mcp: Option<SourceFile>,
    pub lock: LockFile,
    /// The directory relative paths written in the graph (a server's `caFile`) are taken from.
    dir: PathBuf,
}

/// The lock file beside a graph, as read.
#[derive(Debug, Clone)]
pub enum LockFile {
    /// There is none.
    Absent,
    Read(SourceFile),
    /// It exists but cannot be read: the diagnostic says why (E0701, at no place).
    Unreadable(Diagnostic),
}

impl Project {
    pub fn new(graph: impl Into<PathBuf>, mcp: Option<PathBuf>) -> Project {
        Project {
            graph: graph.into(),
            mcp,
            name: None,
        }
    }

    /// A project whose graph file diagnostics call `name` rather than its path.
    pub fn named(graph: impl Into<PathBuf>, name: impl Into<String>) -> Project {
        Project {
            name: Some(name.into()),
            ..Project::new(graph, None)
        }
    }

    pub fn graph_path(&self) -> &Path {
        &self.graph
    }

    pub fn mcp_path(&self) -> Option<&Path> {
        self.mcp.as_deref()
    }

    /// Where the graph's lock file is (whether or not it exists).
    pub fn lock_path(&self) -> PathBuf {
        lock::lock_path(&self.graph)
    }

    /// The files whose change makes a new version of the graph: the graph, its lock and the
    /// `-m` file (`serve --watch`, the studio), and which the toolkit never overwrites.
    pub fn watched(&self) -> Vec<PathBuf> {
        let mut files = vec![self.graph.clone(), self.lock_path()];
        files.extend(self.mcp.clone());
        files
    }

    /// Reads the graph file and the `-m` file (either unreadable: why), and the lock file.
    #[expect(
        clippy::result_large_err,
        reason = "read once per version, as `SourceFile::read`"
    )]
    pub fn read(&self) -> Result<Sources, Diagnostic> {
        let mut graph = SourceFile::read(&self.graph)?;
        if let Some(name) = &self.name {
            graph.name = name.clone();
        }
        let mcp = self.mcp.as_deref().map(SourceFile::read).transpose()?;
        Ok(self.sources(graph, mcp))
    }

    /// The project with `graph` as the graph file's text (a text in hand: an edit being
    /// checked, the toolkit's current text) and `mcp` as the `-m` file's; the lock is read.
    pub fn sources(&self, graph: SourceFile, mcp: Option<SourceFile>) -> Sources {
        Sources {
            graph,
            mcp,
            lock: self.read_lock(),
            dir: self.dir(),
        }
    }

    /// The lock file beside the graph, as it is now.
    pub fn read_lock(&self) -> LockFile {
        match lock::read_beside(&self.graph) {
            None => LockFile::Absent,
            Some(Ok(file)) => LockFile::Read(file),
            Some(Err(diagnostic)) => LockFile::Unreadable(diagnostic),
        }
    }

    /// Reads and compiles. A graph or `-m` file that cannot be read is a graph that does not
    /// check, its one diagnostic saying why (what a server shows its client rather than dying).
    pub fn load(&self) -> (SourceFile, Checked) {
        match self.read() {
            Ok(sources) => {
                let checked = sources.compile();
                (sources.graph, checked)
            }
            Err(diagnostic) => {
                let name = self
                    .name
                    .clone()
                    .unwrap_or_else(|| self.graph.display().to_string());
                let checked = Checked {
                    graph: None,
                    diagnostics: vec![diagnostic],
                };
                (SourceFile::new(name, String::new()), checked)
            }
        }
    }

    fn dir(&self) -> PathBuf {
        check::directory_of(&self.graph.to_string_lossy())
    }
}

impl Sources {
    /// The graph checked with its `-m` file and its lock (see the module's policy).
    pub fn compile(&self) -> Checked {
        match &self.lock {
            LockFile::Absent => compile_from(&self.graph, &self.dir, self.mcp.as_ref(), None),
            LockFile::Read(lock) => {
                compile_from(&self.graph, &self.dir, self.mcp.as_ref(), Some(lock))
            }
            LockFile::Unreadable(diagnostic) => {
                let mut checked = compile_from(&self.graph, &self.dir, self.mcp.as_ref(), None);
                checked.diagnostics.insert(0, diagnostic.clone());
                checked.graph = None;
                checked
            }
        }
    }

    /// The lock's text, when it could be read (an edit is checked against it).
    pub fn lock_text(&self) -> Option<&SourceFile> {
        self.lock.text()
    }

    /// What the version depends on, to tell whether any of its texts changed.
    pub fn texts(&self) -> (String, Option<String>, Option<String>) {
        let lock = match &self.lock {
            LockFile::Absent => None,
            LockFile::Read(lock) => Some(lock.text.clone()),
            // Unreadable now and unreadable later are the same version (and the same error).
            LockFile::Unreadable(d) => Some(format!("\u{0}unreadable: {}", d.message)),
        };
        (
            self.graph.text.clone(),
            self.mcp.as_ref().map(|m| m.text.clone()),
            lock,
        )
    }
}

impl LockFile {
    /// The lock's text, when it could be read (an edit is checked against it).
    pub fn text(&self) -> Option<&SourceFile> {
        match self {
            LockFile::Read(lock) => Some(lock),
            LockFile::Absent | LockFile::Unreadable(_) => None,
        }
    }
}

/// The downstream servers a graph's calls use, and the calls, as far as the file can be read:
/// `mcpgraph lock` works on a graph that does not check (a stale lock may be why it does not).
/// Servers come in declaration order (the graph's, then the `-m` file's), only those some call
/// names; calls are `(server, tool)`, sorted, without `server: self`. Problems are left to
/// `check`.
pub fn servers_used(
    file: &SourceFile,
    mcp_file: Option<&SourceFile>,
) -> (Vec<crate::ir::Server>, Vec<(String, String)>) {
    let mut ignored = Vec::new();
    let extra = mcp_file
        .map(|m| crate::mcp_servers(m, &mut ignored))
        .unwrap_or_default();
    let Ok(tree) = crate::yaml::parse(&file.text) else {
        return (Vec::new(), Vec::new());
    };
    let typed = crate::ast::build(&tree, &mut ignored);
    let mut calls = std::collections::BTreeSet::new();
    for node in typed.tools.iter().flat_map(|t| &t.nodes) {
        let own = node.server.as_ref().zip(node.tool.as_ref());
        let branches = node
            .branches
            .iter()
            .filter_map(|b| b.server.as_ref().zip(b.tool.as_ref()));
        for (server, tool) in own.into_iter().chain(branches) {
            if server.value != crate::ast::SELF_SERVER {
                calls.insert((server.value.clone(), tool.value.clone()));
            }
        }
    }
    let servers = crate::check::servers(&typed.servers, &extra, &mut ignored)
        .into_iter()
        .filter(|s| calls.iter().any(|(name, _)| *name == s.name))
        .collect();
    (servers, calls.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Code;

    const GRAPH: &str = r#"version: "1.0"
server: { name: t, version: "1" }
tools:
  - name: t
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: exit }
      - { id: exit, type: exit }
"#;

    /// A fresh directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let dir = std::env::temp_dir()
                .join(format!("mcpgraph-project-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_watched_files_are_the_graph_its_lock_and_the_mcp_file() {
        let project = Project::new("a/g.yaml", Some(PathBuf::from("m.json")));
        assert_eq!(
            project.watched(),
            [
                PathBuf::from("a/g.yaml"),
                PathBuf::from("a/g.lock.json"),
                PathBuf::from("m.json")
            ]
        );
    }

    #[test]
    fn a_lock_that_cannot_be_read_or_parsed_is_the_same_error_everywhere() {
        let scratch = Scratch::new("lock");
        let graph = scratch.0.join("g.yaml");
        std::fs::write(&graph, GRAPH).unwrap();
        let project = Project::new(&graph, None);
        let (_, checked) = project.load();
        assert!(checked.graph.is_some(), "{:?}", checked.diagnostics);

        // A directory where the lock should be: it exists and cannot be read.
        std::fs::create_dir(project.lock_path()).unwrap();
        let (_, checked) = project.load();
        assert!(checked.graph.is_none());
        assert_eq!(checked.diagnostics[0].code, Code::E0701);
        assert!(matches!(project.read_lock(), LockFile::Unreadable(_)));
        // The same through a text in hand (the toolkit's), and through a named project (graph!).
        let sources = project.sources(SourceFile::new("g.yaml", GRAPH.to_string()), None);
        assert_eq!(sources.compile().diagnostics[0].code, Code::E0701);
        let named = Project::named(&graph, "g.yaml").read().unwrap();
        assert_eq!(named.graph.name, "g.yaml");
        assert_eq!(named.compile().diagnostics[0].code, Code::E0701);

        // A lock that is not a lock: the parse error, also an error.
        std::fs::remove_dir(project.lock_path()).unwrap();
        std::fs::write(project.lock_path(), "not json").unwrap();
        let (_, checked) = project.load();
        assert!(checked.graph.is_none());
        assert_eq!(checked.diagnostics[0].code, Code::E0701);
    }

    #[test]
    fn an_unreadable_graph_loads_as_a_graph_that_does_not_check() {
        let project = Project::new("/nonexistent/mcpgraph/g.yaml", None);
        assert!(project.read().is_err());
        let (file, checked) = project.load();
        assert_eq!(file.name, "/nonexistent/mcpgraph/g.yaml");
        assert!(checked.graph.is_none());
        assert_eq!(checked.diagnostics.len(), 1);
    }

    #[test]
    fn servers_used_reads_a_graph_that_does_not_check() {
        let graph = SourceFile::new(
            "g.yaml",
            "version: \"1.0\"\nserver: {name: s, version: \"1\"}\nmcpServers:\n  a: {command: x}\n  b: {command: y}\n  unused: {command: z}\ntools:\n  - name: t\n    description: t\n    inputSchema: {type: object}\n    nodes:\n      - {id: entry, type: entry, next: m}\n      - {id: m, type: mcp, server: a, tool: one, args: {}, next: p}\n      - id: p\n        type: parallel\n        branches:\n          x: {server: b, tool: two}\n          y: {server: self, tool: t}\n        next: nowhere\n      - {id: exit, type: exit}\n",
        );
        let (servers, calls) = servers_used(&graph, None);
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            calls,
            [
                ("a".to_string(), "one".to_string()),
                ("b".to_string(), "two".to_string())
            ]
        );
    }
}
