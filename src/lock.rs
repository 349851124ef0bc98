//! Lock updates as data: what `mcpgraph lock`, `lock --check` and `check --online` find, and the
//! toolkit's `lockGraph` too. The runtime reads the live contracts (`mcpgraph_runtime::discover`),
//! the compiler owns the lock file's format and the diff (`mcpgraph_compiler::lock`); here the
//! two meet: which servers a graph calls, what the new lock holds, what became of each server
//! (locked, unreadable, kept from the previous lock) and how the live servers differ from the
//! locked ones. Nothing here prints or decides an exit code: the CLI (`crate::cli::lock`) prints
//! these values, the toolkit returns them as JSON ([`LockUpdate::to_json`]).
//!
//! The graph is read without its lock: a stale lock (a renamed tool) is what `lock` repairs, so
//! it must not stand in the way. A graph with other errors is locked all the same, as far as its
//! servers can be read.

use crate::atomic_write;
use mcpgraph_compiler::ir::Server;
use mcpgraph_compiler::lock::{self, Lock, LockedServer, PartChange, ToolChange};
use mcpgraph_compiler::{
    Checked, Diagnostic, LockFile, Project, SourceFile, compile, compile_with,
};
use mcpgraph_runtime::ServeError;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The mode of a new lock file, less the umask: what `std::fs::write` gives a file.
const NEW_LOCK_MODE: u32 = 0o666;

/// Why a server named by a call has no contract: it is not declared (or its declaration does
/// not check), so there is nothing to start.
const UNDECLARED: &str =
    "no such server is declared (or its declaration has errors: `mcpgraph check` shows them)";

/// Why a server of the previous lock that no call names is kept.
const KEPT_FOR_ERRORS: &str = "the graph has errors, so its calls may not all be read";

/// The graph and `-m` files a lock is made for, read.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The graph's files: the lock file is named from the graph's path (`<stem>.lock.json`).
    pub project: Project,
    pub graph: SourceFile,
    pub mcp: Option<SourceFile>,
}

impl Inputs {
    /// Reads the graph and the `-m` file. A graph whose YAML cannot be parsed at all is refused
    /// with its diagnostics: it would look like a graph that calls nothing, and lock an empty
    /// list over a good lock.
    pub fn read(project: &Project) -> Result<Inputs, LockError> {
        let read = |path: &Path| {
            SourceFile::read(path).map_err(|diagnostic| LockError::Unreadable(Box::new(diagnostic)))
        };
        // The graph without its lock: the lock is what is being made (a stale one may be why
        // the graph does not check).
        let graph = read(project.graph_path())?;
        let mcp = project.mcp_path().map(read).transpose()?;
        if mcpgraph_compiler::yaml::parse(&graph.text).is_err() {
            let checked = compile(&graph, mcp.as_ref());
            return Err(LockError::NotYaml {
                graph: Box::new(graph),
                checked: Box::new(checked),
            });
        }
        Ok(Inputs {
            project: project.clone(),
            graph,
            mcp,
        })
    }

    /// `<stem>.lock.json` beside the graph.
    pub fn lock_path(&self) -> PathBuf {
        self.project.lock_path()
    }

    /// Starts every server the graph's calls use and reads its contract (inside a runtime: the
    /// toolkit's).
    pub async fn discover(&self) -> Live {
        let (servers, calls) = self.servers_used();
        Live::new(calls, mcpgraph_runtime::discover(&servers).await)
    }

    /// [`Inputs::discover`] as a whole process does it (`mcpgraph lock`): a runtime of its own,
    /// every server closed before it returns.
    pub fn discover_once(&self) -> Result<Live, LockError> {
        let (servers, calls) = self.servers_used();
        let found = mcpgraph_runtime::discover_once(&servers)
            .map_err(|error| LockError::Discovery(Box::new(error)))?;
        Ok(Live::new(calls, found))
    }

    fn servers_used(&self) -> (Vec<Server>, Vec<(String, String)>) {
        mcpgraph_compiler::project::servers_used(&self.graph, self.mcp.as_ref())
    }
}

/// What the graph calls and what the live servers said.
#[derive(Debug, Clone)]
pub struct Live {
    /// `(server, tool)`: the calls of the graph, sorted.
    calls: Vec<(String, String)>,
    /// The used servers, in declaration order, each with its contract or why it is missing; a
    /// server named by a call but not declared comes last (`check` has E-codes of its own for
    /// it).
    servers: Vec<(String, Result<LockedServer, String>)>,
}

impl Live {
    fn new(calls: Vec<(String, String)>, mut servers: mcpgraph_runtime::Discovered) -> Live {
        let mut undeclared: Vec<&str> = calls
            .iter()
            .map(|(server, _)| server.as_str())
            .filter(|name| servers.iter().all(|(s, _)| s != name))
            .collect();
        undeclared.dedup();
        let undeclared: Vec<String> = undeclared.into_iter().map(str::to_string).collect();
        for name in undeclared {
            servers.push((name, Err(UNDECLARED.to_string())));
        }
        Live { calls, servers }
    }

    /// Whether the graph calls `tool` of `server`.
    pub fn calls(&self, server: &str, tool: &str) -> bool {
        self.calls.iter().any(|(s, t)| s == server && t == tool)
    }

    /// `(server, why)` for each server that could not be read, in order.
    pub fn unreadable(&self) -> Vec<(&str, &str)> {
        self.servers
            .iter()
            .filter_map(|(name, contract)| {
                contract
                    .as_ref()
                    .err()
                    .map(|reason| (name.as_str(), reason.as_str()))
            })
            .collect()
    }
}

/// What `mcpgraph lock` makes of the live servers: the new lock's text and, per server, what
/// became of it. Made by [`LockUpdate::new`], which writes nothing; [`LockUpdate::write`] does.
#[derive(Debug, Clone)]
pub struct LockUpdate {
    pub lock_file: PathBuf,
    /// Each server the graph calls, in [`Live`]'s order, then the servers of the previous lock
    /// kept because the graph has errors ([`ServerOutcome::KeptForErrors`]).
    pub servers: Vec<ServerUpdate>,
    /// The new lock's text.
    pub text: String,
    /// The lock file's text before, if it could be read.
    pub previous_text: Option<String>,
    /// The new text is the file's: writing would change nothing.
    pub up_to_date: bool,
    /// The graph checked with the new lock (`check` will report these).
    pub checked: Checked,
}

/// One server of a [`LockUpdate`].
#[derive(Debug, Clone)]
pub struct ServerUpdate {
    pub name: String,
    pub outcome: ServerOutcome,
}

#[derive(Debug, Clone)]
pub enum ServerOutcome {
    /// Read, and locked as read. `drift`: how it differs from its entry in the previous lock
    /// (`None`: the previous lock had none).
    Locked {
        contract: LockedServer,
        drift: Option<Box<Drift>>,
    },
    /// Could not be read. `kept`: its entry of the previous lock, kept in the new one, if there
    /// was one.
    Unreadable {
        reason: String,
        kept: Option<LockedServer>,
    },
    /// In the previous lock, called by no call that could be read: kept, since the graph has
    /// errors (a node whose type is misspelt has no call to read).
    KeptForErrors { contract: LockedServer },
}

/// What [`LockUpdate::write`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// The file already held the new text: it was not touched.
    UpToDate,
    /// The file was replaced (or created) with the new text.
    Wrote,
}

impl LockUpdate {
    /// The new lock of every server that could be read; a server that could not keeps its
    /// previous entry, if any. Reads the previous lock file; writes nothing.
    pub fn new(inputs: &Inputs, live: Live) -> LockUpdate {
        let lock_file = inputs.lock_path();
        let previous_text = SourceFile::read(&lock_file).ok().map(|file| file.text);
        let previous = previous_text.as_ref().and_then(|text| {
            Lock::parse(&SourceFile::new(
                lock_file.display().to_string(),
                text.clone(),
            ))
            .ok()
        });
        let previous_entry = |name: &str| {
            previous
                .as_ref()
                .and_then(|previous| previous.servers.get(name))
        };
        let mut entries = BTreeMap::new();
        let mut servers = Vec::new();
        for (name, contract) in &live.servers {
            let outcome = match contract {
                Ok(now) => {
                    entries.insert(name.clone(), now.clone());
                    ServerOutcome::Locked {
                        contract: now.clone(),
                        drift: previous_entry(name)
                            .map(|then| Box::new(Drift::between(name, then, now, &live))),
                    }
                }
                Err(reason) => {
                    let kept = previous_entry(name).cloned();
                    if let Some(old) = &kept {
                        entries.insert(name.clone(), old.clone());
                    }
                    ServerOutcome::Unreadable {
                        reason: reason.clone(),
                        kept,
                    }
                }
            };
            servers.push(ServerUpdate {
                name: name.clone(),
                outcome,
            });
        }
        // A graph with errors may hide calls (a node whose type is misspelt has no call to
        // read): its servers' previous entries are kept rather than dropped.
        if let Some(previous) = &previous
            && compile(&inputs.graph, inputs.mcp.as_ref()).error_count() > 0
        {
            for (name, old) in &previous.servers {
                if !entries.contains_key(name) {
                    entries.insert(name.clone(), old.clone());
                    servers.push(ServerUpdate {
                        name: name.clone(),
                        outcome: ServerOutcome::KeptForErrors {
                            contract: old.clone(),
                        },
                    });
                }
            }
        }
        let text = Lock::new(entries).to_text();
        let up_to_date = previous_text.as_deref() == Some(text.as_str());
        let new_lock = SourceFile::new(lock_file.display().to_string(), text.clone());
        let checked = compile_with(&inputs.graph, inputs.mcp.as_ref(), Some(&new_lock));
        LockUpdate {
            lock_file,
            servers,
            text,
            previous_text,
            up_to_date,
            checked,
        }
    }

    /// Replaces the lock file atomically with the new text, unless it already holds it.
    pub fn write(&self) -> Result<Written, LockError> {
        if self.up_to_date {
            return Ok(Written::UpToDate);
        }
        atomic_write::write(&self.lock_file, self.text.as_bytes(), NEW_LOCK_MODE).map_err(
            |error| LockError::Write {
                lock_file: self.lock_file.clone(),
                error,
            },
        )?;
        Ok(Written::Wrote)
    }

    /// `(server, why)` for each server the graph calls that could not be read, in order.
    pub fn unreadable(&self) -> Vec<(&str, &str)> {
        self.servers
            .iter()
            .filter_map(|server| match &server.outcome {
                ServerOutcome::Unreadable { reason, .. } => {
                    Some((server.name.as_str(), reason.as_str()))
                }
                _ => None,
            })
            .collect()
    }

    /// Whether the graph has an error with the new lock that it did not have with the previous
    /// one (or with none), errors compared by code and message, each counted: the toolkit does
    /// not write such a lock, so that none of its calls leaves the graph unservable.
    pub fn errors_added(&self, inputs: &Inputs) -> bool {
        let previous = self
            .previous_text
            .as_ref()
            .map(|text| SourceFile::new(self.lock_file.display().to_string(), text.clone()));
        let before = compile_with(&inputs.graph, inputs.mcp.as_ref(), previous.as_ref());
        let key = |d: &Diagnostic| (d.code, d.message.clone());
        let mut old: Vec<_> = before
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(key)
            .collect();
        self.checked
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(key)
            .any(|error| match old.iter().position(|o| *o == error) {
                Some(i) => {
                    old.remove(i);
                    false
                }
                None => true,
            })
    }

    /// The update as the toolkit's `lockGraph` returns it (its outputSchema is in
    /// src/toolkit/tools.rs, the shape in docs/toolkit.md): `{lockFile, upToDate, servers:
    /// {name: {status, ...}}, errors, warnings}`.
    pub fn to_json(&self) -> Value {
        let servers: Map<String, Value> = self
            .servers
            .iter()
            .map(|server| (server.name.clone(), server.outcome.to_json()))
            .collect();
        json!({
            "lockFile": self.lock_file.display().to_string(),
            "upToDate": self.up_to_date,
            "servers": servers,
            "errors": self.checked.error_count(),
            "warnings": self.checked.warning_count(),
        })
    }
}

impl ServerOutcome {
    fn to_json(&self) -> Value {
        match self {
            ServerOutcome::Locked { contract, drift } => {
                let mut out = contract_json("locked", contract);
                if let Some(drift) = drift {
                    out["drift"] = drift.to_json();
                }
                out
            }
            ServerOutcome::Unreadable { reason, kept } => {
                let mut out = json!({
                    "status": "unreadable",
                    "reason": reason,
                    "keptPrevious": kept.is_some(),
                });
                if let Some(kept) = kept {
                    out["tools"] = tool_names(kept);
                }
                out
            }
            ServerOutcome::KeptForErrors { contract } => {
                let mut out = contract_json("kept", contract);
                out["reason"] = KEPT_FOR_ERRORS.into();
                out
            }
        }
    }
}

/// `{status, serverInfo, protocolVersion?, tools: [name, ...]}`.
fn contract_json(status: &str, contract: &LockedServer) -> Value {
    let mut out = json!({
        "status": status,
        "serverInfo": contract.server_info.clone(),
        "tools": tool_names(contract),
    });
    if let Some(version) = &contract.protocol_version {
        out["protocolVersion"] = version.clone().into();
    }
    out
}

fn tool_names(contract: &LockedServer) -> Value {
    contract
        .tools
        .keys()
        .cloned()
        .collect::<Vec<String>>()
        .into()
}

/// How a live server differs from its locked entry: its `serverInfo`, its protocol version and
/// its tools.
#[derive(Debug, Clone)]
pub struct Drift {
    pub server_info: Option<InfoChange>,
    pub protocol_version: Option<VersionChange>,
    /// By tool name.
    pub tools: Vec<ToolDrift>,
}

/// How `serverInfo` differs, and both of them.
#[derive(Debug, Clone)]
pub struct InfoChange {
    pub change: PartChange,
    pub then: Value,
    pub now: Value,
}

#[derive(Debug, Clone)]
pub struct VersionChange {
    pub then: Option<String>,
    pub now: Option<String>,
}

/// One tool that differs.
#[derive(Debug, Clone)]
pub struct ToolDrift {
    pub tool: String,
    /// The graph calls it: for `lock --check`, a difference here is an error, elsewhere a note.
    pub called: bool,
    pub change: ToolChange,
}

impl Drift {
    /// How `now` (live) differs from `then` (locked), for `server` of `live`.
    pub fn between(server: &str, then: &LockedServer, now: &LockedServer, live: &Live) -> Drift {
        let server_info = lock::diff_value(
            "serverInfo",
            Some(&then.server_info),
            Some(&now.server_info),
        )
        .map(|change| InfoChange {
            change,
            then: then.server_info.clone(),
            now: now.server_info.clone(),
        });
        let protocol_version =
            (then.protocol_version != now.protocol_version).then(|| VersionChange {
                then: then.protocol_version.clone(),
                now: now.protocol_version.clone(),
            });
        let tools = lock::diff_tools(then, now)
            .into_iter()
            .map(|(tool, change)| ToolDrift {
                called: live.calls(server, &tool),
                tool,
                change,
            })
            .collect();
        Drift {
            server_info,
            protocol_version,
            tools,
        }
    }

    /// The differences that are notes for `lock --check`: all but those of called tools.
    fn notes(&self) -> usize {
        usize::from(self.server_info.is_some())
            + usize::from(self.protocol_version.is_some())
            + self.tools.iter().filter(|t| !t.called).count()
    }

    fn called_differences(&self) -> usize {
        self.tools.iter().filter(|t| t.called).count()
    }

    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(info) = &self.server_info {
            out.insert(
                "serverInfo".into(),
                json!({"change": part_json(&info.change), "then": info.then, "now": info.now}),
            );
        }
        if let Some(version) = &self.protocol_version {
            out.insert(
                "protocolVersion".into(),
                json!({"then": version.then, "now": version.now}),
            );
        }
        let tools: Vec<Value> = self.tools.iter().map(ToolDrift::to_json).collect();
        out.insert("tools".into(), tools.into());
        Value::Object(out)
    }
}

impl ToolDrift {
    /// `{tool, called, change: added|removed|changed, parts?, text}`; `text` is the line the CLI
    /// prints after the tool's name.
    fn to_json(&self) -> Value {
        let kind = match &self.change {
            ToolChange::Added => "added",
            ToolChange::Removed => "removed",
            ToolChange::Changed(_) => "changed",
        };
        let mut out = json!({
            "tool": self.tool,
            "called": self.called,
            "change": kind,
            "text": self.change.to_string(),
        });
        if let ToolChange::Changed(parts) = &self.change {
            out["parts"] = parts.iter().map(part_json).collect::<Vec<Value>>().into();
        }
        out
    }
}

/// `{part, change: changed|added|removed|differs, places?, more?, text}`.
fn part_json(change: &PartChange) -> Value {
    let text = change.to_string();
    match change {
        PartChange::Text(part) => json!({"part": part, "change": "changed", "text": text}),
        PartChange::Presence(part, added) => {
            let presence = if *added { "added" } else { "removed" };
            json!({"part": part, "change": presence, "text": text})
        }
        PartChange::Value { part, places, more } => json!({
            "part": part,
            "change": "differs",
            "places": places,
            "more": more,
            "text": text,
        }),
    }
}

/// `lock --check`: the live servers against the lock file, per server.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub lock_file: PathBuf,
    /// Each server the graph calls, in [`Live`]'s order.
    pub servers: Vec<ServerComparison>,
    /// Servers of the lock that no call names any more, in the lock's order.
    pub no_longer_called: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct ServerComparison {
    pub name: String,
    pub compared: Compared,
}

#[derive(Debug, Clone)]
pub enum Compared {
    /// The server could not be read: why.
    Unreadable(String),
    /// The server was read, but the lock has no entry for it.
    NotInLock,
    /// How the live server differs from its entry (perhaps not at all).
    Drift(Box<Drift>),
}

impl Comparison {
    pub fn new(inputs: &Inputs, locked: &Lock, live: &Live) -> Comparison {
        let servers = live
            .servers
            .iter()
            .map(|(name, contract)| {
                let compared = match contract {
                    Err(reason) => Compared::Unreadable(reason.clone()),
                    Ok(now) => match locked.servers.get(name) {
                        None => Compared::NotInLock,
                        Some(then) => {
                            Compared::Drift(Box::new(Drift::between(name, then, now, live)))
                        }
                    },
                };
                ServerComparison {
                    name: name.clone(),
                    compared,
                }
            })
            .collect();
        let no_longer_called = locked
            .servers
            .keys()
            .filter(|name| live.servers.iter().all(|(s, _)| s != *name))
            .cloned()
            .collect();
        Comparison {
            lock_file: inputs.lock_path(),
            servers,
            no_longer_called,
        }
    }

    /// `(server, why)` for each server that could not be read, in order.
    pub fn unreadable(&self) -> Vec<(&str, &str)> {
        self.servers
            .iter()
            .filter_map(|server| match &server.compared {
                Compared::Unreadable(reason) => Some((server.name.as_str(), reason.as_str())),
                _ => None,
            })
            .collect()
    }

    fn drifts(&self) -> impl Iterator<Item = &Drift> {
        self.servers
            .iter()
            .filter_map(|server| match &server.compared {
                Compared::Drift(drift) => Some(&**drift),
                _ => None,
            })
    }

    /// The tools the graph calls that differ (changed, removed, or new where the lock lacks
    /// them): errors.
    pub fn called_differences(&self) -> usize {
        self.drifts().map(Drift::called_differences).sum()
    }

    /// Every other difference (tools the graph does not call, `serverInfo`, the protocol
    /// version, servers no longer called): notes.
    pub fn notes(&self) -> usize {
        self.drifts().map(Drift::notes).sum::<usize>() + self.no_longer_called.len()
    }

    /// A server the graph calls could not be read, or is not in the lock: errors too.
    pub fn servers_missing(&self) -> bool {
        self.servers
            .iter()
            .any(|server| !matches!(server.compared, Compared::Drift(_)))
    }
}

/// The lock file beside the graph, parsed, for [`Comparison::new`].
pub fn read_lock(inputs: &Inputs) -> Result<Lock, LockError> {
    let lock_file = match inputs.project.read_lock() {
        LockFile::Absent => {
            return Err(LockError::NoLockFile {
                lock_file: inputs.lock_path(),
            });
        }
        LockFile::Read(lock_file) => lock_file,
        LockFile::Unreadable(diagnostic) => {
            return Err(LockError::BadLockFile(Box::new(diagnostic)));
        }
    };
    Lock::parse(&lock_file).map_err(|diagnostic| LockError::BadLockFile(Box::new(diagnostic)))
}

/// `check --online`: the graph checked against a lock made in memory from the live servers that
/// could be read, named like the lock file; nothing is written.
pub fn check_online(inputs: &Inputs, live: &Live) -> Checked {
    let servers = live
        .servers
        .iter()
        .filter_map(|(name, contract)| {
            contract
                .as_ref()
                .ok()
                .map(|contract| (name.clone(), contract.clone()))
        })
        .collect();
    let text = Lock::new(servers).to_text();
    let lock_file = SourceFile::new(inputs.lock_path().display().to_string(), text);
    compile_with(&inputs.graph, inputs.mcp.as_ref(), Some(&lock_file))
}

/// Why a lock could not be made, checked or written. Each shell renders it: the CLI as it
/// always has (diagnostics through miette), the toolkit as an `isError` result.
#[derive(Debug)]
pub enum LockError {
    /// The graph or the `-m` file cannot be read.
    Unreadable(Box<Diagnostic>),
    /// The graph's YAML cannot be parsed; `checked` has its diagnostics.
    NotYaml {
        graph: Box<SourceFile>,
        checked: Box<Checked>,
    },
    /// Discovery could not start (its async runtime).
    Discovery(Box<ServeError>),
    /// `lock --check` without a lock file.
    NoLockFile { lock_file: PathBuf },
    /// The lock file cannot be read or parsed (E0701).
    BadLockFile(Box<Diagnostic>),
    /// The new lock could not be written; the file is as it was.
    Write {
        lock_file: PathBuf,
        error: std::io::Error,
    },
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Unreadable(diagnostic) | LockError::BadLockFile(diagnostic) => {
                f.write_str(&diagnostic.message)
            }
            LockError::NotYaml { graph, checked } => {
                write!(f, "the graph file {} is not valid YAML", graph.name)?;
                if let Some(first) = checked.diagnostics.iter().find(|d| d.is_error()) {
                    write!(f, " ({})", first.message)?;
                }
                f.write_str(
                    ": nothing was locked, so that a good lock is not replaced by an empty one",
                )
            }
            LockError::Discovery(error) => write!(f, "{error}"),
            LockError::NoLockFile { lock_file } => {
                write!(f, "there is no lock file {}", lock_file.display())
            }
            LockError::Write { lock_file, error } => {
                write!(f, "cannot write {}: {error}", lock_file.display())
            }
        }
    }
}

impl std::error::Error for LockError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls `a.one` and `b.two`; `a` also has a tool no call uses.
    const GRAPH: &str = "version: \"1.0\"\nserver: {name: s, version: \"1\"}\nmcpServers:\n  a: {command: x}\n  b: {command: y}\ntools:\n  - name: t\n    description: t\n    inputSchema: {type: object}\n    nodes:\n      - {id: entry, type: entry, next: m}\n      - {id: m, type: mcp, server: a, tool: one, args: {}, next: n}\n      - {id: n, type: mcp, server: b, tool: two, args: {}, next: exit}\n      - {id: exit, type: exit}\n";

    /// A fresh directory holding `g.yaml`, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("mcpgraph-lock-{test}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("g.yaml"), GRAPH).unwrap();
            Scratch(dir)
        }

        fn inputs(&self) -> Inputs {
            Inputs::read(&Project::new(self.0.join("g.yaml"), None)).unwrap()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn server(version: &str, tools: &[(&str, &str)]) -> LockedServer {
        LockedServer {
            server_info: json!({"name": "m", "version": version}),
            protocol_version: Some("2025-06-18".into()),
            tools: tools
                .iter()
                .map(|(name, description)| {
                    lock::LockedTool::from_listed(&json!({
                        "name": name, "description": description, "inputSchema": {"type": "object"}
                    }))
                    .unwrap()
                })
                .collect(),
        }
    }

    fn live(a: Result<LockedServer, &str>, b: Result<LockedServer, &str>) -> Live {
        Live::new(
            vec![("a".into(), "one".into()), ("b".into(), "two".into())],
            vec![
                ("a".into(), a.map_err(str::to_string)),
                ("b".into(), b.map_err(str::to_string)),
            ],
        )
    }

    #[test]
    fn an_update_is_data_and_is_written_once() {
        let scratch = Scratch::new("update");
        let inputs = scratch.inputs();
        let both = || {
            live(
                Ok(server("1", &[("one", "One"), ("spare", "Spare")])),
                Ok(server("1", &[("two", "Two")])),
            )
        };
        let first = LockUpdate::new(&inputs, both());
        assert!(!first.up_to_date && first.previous_text.is_none());
        assert!(first.unreadable().is_empty());
        assert!(matches!(
            first.servers[0].outcome,
            ServerOutcome::Locked { drift: None, .. }
        ));
        assert_eq!(
            first.checked.error_count(),
            0,
            "{:?}",
            first.checked.diagnostics
        );
        assert!(!first.errors_added(&inputs));
        assert!(!inputs.lock_path().exists(), "new wrote the lock");
        assert_eq!(first.write().unwrap(), Written::Wrote);
        assert_eq!(
            std::fs::read_to_string(inputs.lock_path()).unwrap(),
            first.text
        );

        let again = LockUpdate::new(&inputs, both());
        assert!(again.up_to_date);
        assert_eq!(again.write().unwrap(), Written::UpToDate);
        let json = again.to_json();
        assert_eq!(json["upToDate"], json!(true));
        assert_eq!(json["servers"]["a"]["status"], json!("locked"));
        assert_eq!(json["servers"]["a"]["tools"], json!(["one", "spare"]));
        assert_eq!(json["servers"]["a"]["drift"], json!({"tools": []}));
        assert_eq!(json["errors"], json!(0));
    }

    #[test]
    fn an_unreadable_server_keeps_its_entry_and_drift_is_named() {
        let scratch = Scratch::new("drift");
        let inputs = scratch.inputs();
        let first = live(
            Ok(server("1", &[("one", "One"), ("spare", "Spare")])),
            Ok(server("1", &[("two", "Two")])),
        );
        LockUpdate::new(&inputs, first).write().unwrap();

        let changed = live(
            Ok(server("2", &[("one", "One!"), ("new", "New")])),
            Err("it crashed"),
        );
        let update = LockUpdate::new(&inputs, changed);
        assert_eq!(update.unreadable(), [("b", "it crashed")]);
        assert!(!update.errors_added(&inputs));
        let json = update.to_json();
        let b = &json["servers"]["b"];
        assert_eq!(b["status"], json!("unreadable"));
        assert_eq!(b["reason"], json!("it crashed"));
        assert_eq!(b["keptPrevious"], json!(true));
        assert_eq!(b["tools"], json!(["two"]));
        let drift = &json["servers"]["a"]["drift"];
        assert_eq!(drift["serverInfo"]["change"]["places"], json!(["/version"]));
        assert_eq!(drift["serverInfo"]["now"]["version"], json!("2"));
        let tools: Vec<(&str, bool, &str)> = drift["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["tool"].as_str().unwrap(),
                    t["called"].as_bool().unwrap(),
                    t["text"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            tools,
            [
                ("new", false, "added"),
                ("one", true, "changed: description changed"),
                ("spare", false, "removed"),
            ]
        );
        // The new lock holds `b` as it was.
        let written = Lock::parse(&SourceFile::new("g.lock.json", update.text.clone())).unwrap();
        assert_eq!(written.servers["b"], server("1", &[("two", "Two")]));
    }

    #[test]
    fn a_lock_that_adds_errors_is_known_before_it_is_written() {
        let scratch = Scratch::new("errors");
        let inputs = scratch.inputs();
        let good = live(
            Ok(server("1", &[("one", "One")])),
            Ok(server("1", &[("two", "Two")])),
        );
        LockUpdate::new(&inputs, good).write().unwrap();
        // `one` is gone from `a`: the graph's call of it is now an error (E0702).
        let gone = live(Ok(server("1", &[])), Ok(server("1", &[("two", "Two")])));
        let update = LockUpdate::new(&inputs, gone);
        assert!(update.checked.error_count() > 0);
        assert!(update.errors_added(&inputs));
    }

    #[test]
    fn a_comparison_counts_errors_and_notes() {
        let scratch = Scratch::new("compare");
        let inputs = scratch.inputs();
        let mut servers = BTreeMap::new();
        servers.insert("a".to_string(), server("1", &[("one", "One")]));
        servers.insert("old".to_string(), server("1", &[]));
        let locked = Lock::new(servers);
        let now = live(
            Ok(server("1", &[("one", "One!"), ("extra", "Extra")])),
            Ok(server("1", &[("two", "Two")])),
        );
        let comparison = Comparison::new(&inputs, &locked, &now);
        assert_eq!(comparison.called_differences(), 1);
        assert_eq!(comparison.notes(), 2, "{comparison:?}");
        assert_eq!(comparison.no_longer_called, ["old"]);
        assert!(comparison.servers_missing(), "`b` is not in the lock");
        assert!(matches!(
            comparison.servers[1].compared,
            Compared::NotInLock
        ));
        assert!(comparison.unreadable().is_empty());
    }

    #[test]
    fn an_undeclared_server_is_unreadable_with_a_reason() {
        let live = Live::new(vec![("ghost".into(), "boo".into())], Vec::new());
        assert_eq!(live.unreadable(), [("ghost", UNDECLARED)]);
    }

    #[test]
    fn a_graph_that_is_not_yaml_is_refused() {
        let scratch = Scratch::new("not-yaml");
        let graph = scratch.0.join("g.yaml");
        std::fs::write(&graph, "tools: [unclosed\n").unwrap();
        let error = Inputs::read(&Project::new(&graph, None)).unwrap_err();
        assert!(matches!(error, LockError::NotYaml { .. }), "{error:?}");
        assert!(error.to_string().contains("not valid YAML"), "{error}");
        let missing = Inputs::read(&Project::new(scratch.0.join("none.yaml"), None)).unwrap_err();
        assert!(matches!(missing, LockError::Unreadable(_)), "{missing:?}");
    }
}
