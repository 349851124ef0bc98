//! `mcpgraph lock` (write the lock, or `--check` it against the live servers) and
//! `check --online`. The runtime reads the live contracts (`mcpgraph_runtime::discover_once`);
//! the compiler owns the file's format and the diff. Here: what is written and printed.
//!
//! The graph is read without its lock: a stale lock (a renamed tool) is what `lock` repairs, so
//! it must not stand in the way. A graph with other errors is locked all the same, as far as its
//! servers can be read.

use super::{Common, read, style};
use mcpgraph_compiler::lock::{self, Lock, LockedServer};
use mcpgraph_compiler::render;
use mcpgraph_compiler::{Checked, SourceFile, compile_with};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

/// What the graph uses and what the live servers said.
struct Live {
    /// `(server, tool)`: the calls of the graph, sorted.
    calls: Vec<(String, String)>,
    /// The used servers, in declaration order, each with its contract or why it is missing.
    servers: Vec<(String, Result<LockedServer, String>)>,
}

impl Live {
    /// Starts every server the graph's calls use and reads its contract. A server that is named
    /// by a call but not declared is left to `check` (E-codes of its own), noted here.
    fn discover(file: &SourceFile, mcp: Option<&SourceFile>) -> Result<Live, ExitCode> {
        let (servers, calls) = lock::servers_used(file, mcp);
        let mut servers: Vec<(String, Result<LockedServer, String>)> =
            mcpgraph_runtime::discover_once(&servers)
                .map_err(|e| {
                    eprintln!("error: {e}");
                    ExitCode::from(1)
                })?
                .into_iter()
                .collect();
        let mut undeclared: Vec<&str> = calls
            .iter()
            .map(|(server, _)| server.as_str())
            .filter(|name| servers.iter().all(|(s, _)| s != name))
            .collect();
        undeclared.dedup();
        for name in undeclared {
            servers.push((
                name.to_string(),
                Err("no such server is declared (or its declaration has errors: `mcpgraph check` shows them)".into()),
            ));
        }
        Ok(Live { calls, servers })
    }

    fn calls(&self, server: &str, tool: &str) -> bool {
        self.calls.iter().any(|(s, t)| s == server && t == tool)
    }

    /// Prints an error line for each server that could not be read; whether there was one.
    fn report_failures(&self) -> bool {
        let mut failed = false;
        for (name, contract) in &self.servers {
            if let Err(reason) = contract {
                eprintln!("error: cannot read server `{name}`: {}", indent(reason));
                failed = true;
            }
        }
        failed
    }
}

/// `mcpgraph lock FILE [-m FILE]`: writes `<stem>.lock.json` with every server that could be
/// read (a server that could not keeps its previous entry, if any); exit 1 when one could not.
pub fn write(common: &Common) -> ExitCode {
    let (file, mcp) = match read_files(common) {
        Ok(files) => files,
        Err(code) => return code,
    };
    let live = match Live::discover(&file, mcp.as_ref()) {
        Ok(live) => live,
        Err(code) => return code,
    };
    let path = lock::lock_path(&common.file);
    let previous = std::fs::read_to_string(&path).ok();
    let previous_lock = previous.as_ref().and_then(|text| {
        Lock::parse(&SourceFile::new(path.display().to_string(), text.clone())).ok()
    });
    let failed = live.report_failures();
    let mut servers = BTreeMap::new();
    for (name, contract) in &live.servers {
        match contract {
            Ok(server) => {
                eprintln!(
                    "locked server `{name}` ({}): {}",
                    describe(server),
                    tools(server.tools.len())
                );
                servers.insert(name.clone(), server.clone());
            }
            Err(_) => {
                if let Some(old) = previous_lock.as_ref().and_then(|l| l.servers.get(name)) {
                    eprintln!(
                        "note: server `{name}` keeps its previous entry in {}",
                        path.display()
                    );
                    servers.insert(name.clone(), old.clone());
                }
            }
        }
    }
    // A graph with errors may hide calls (a node whose type is misspelt has no call to read):
    // its servers' previous entries are kept rather than dropped.
    if let Some(previous) = &previous_lock
        && mcpgraph_compiler::compile(&file, mcp.as_ref()).error_count() > 0
    {
        for (name, old) in &previous.servers {
            if !servers.contains_key(name) {
                eprintln!(
                    "note: server `{name}` keeps its previous entry in {}: the graph has errors, so its calls may not all be read",
                    path.display()
                );
                servers.insert(name.clone(), old.clone());
            }
        }
    }
    let text = Lock::new(servers).to_text();
    if previous.as_deref() == Some(text.as_str()) {
        eprintln!("{} is up to date", path.display());
    } else if let Err(e) = std::fs::write(&path, &text) {
        eprintln!("error: cannot write {}: {e}", path.display());
        return ExitCode::from(1);
    } else {
        eprintln!("wrote {}", path.display());
    }
    // What the new lock says of the graph, in one line: `check` shows the details.
    let lock_file = SourceFile::new(path.display().to_string(), text);
    let checked = compile_with(&file, mcp.as_ref(), Some(&lock_file));
    if !checked.diagnostics.is_empty() {
        let found: Vec<String> = [
            (checked.error_count(), "error"),
            (checked.warning_count(), "warning"),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| count(n, what))
        .collect();
        eprintln!(
            "note: with this lock the graph has {}: run `mcpgraph check {}`",
            found.join(" and "),
            common.file.display()
        );
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// `mcpgraph lock --check`: the live servers against the lock file, per server and tool. Exit 1
/// when a tool the graph calls differs (changed, gone, or new where the lock lacks it), a used
/// server is missing from the lock or cannot be read, or there is no usable lock file; other
/// differences are notes. Writes nothing.
pub fn check(common: &Common) -> ExitCode {
    let (file, mcp) = match read_files(common) {
        Ok(files) => files,
        Err(code) => return code,
    };
    let path = lock::lock_path(&common.file);
    let lock_file = match lock::read_beside(&common.file) {
        None => {
            eprintln!(
                "error: there is no lock file {}: run `mcpgraph lock {}` to write it",
                path.display(),
                common.file.display()
            );
            return ExitCode::from(1);
        }
        Some(Ok(lock_file)) => lock_file,
        Some(Err(d)) => return show(&file, d),
    };
    let locked = match Lock::parse(&lock_file) {
        Ok(locked) => locked,
        Err(d) => return show(&file, d),
    };
    let live = match Live::discover(&file, mcp.as_ref()) {
        Ok(live) => live,
        Err(code) => return code,
    };
    let mut failed = live.report_failures();
    let (mut differences, mut notes) = (0, 0);
    for (name, contract) in &live.servers {
        let Ok(now) = contract else { continue };
        let Some(then) = locked.servers.get(name) else {
            eprintln!("error: server `{name}` is not in {}", path.display());
            failed = true;
            continue;
        };
        let info = lock::diff_value(
            "serverInfo",
            Some(&then.server_info),
            Some(&now.server_info),
        );
        if let Some(change) = info {
            eprintln!(
                "note: server `{name}`: {change} ({} then, {} now)",
                identity(then),
                identity(now)
            );
            notes += 1;
        }
        if then.protocol_version != now.protocol_version {
            eprintln!(
                "note: server `{name}`: protocol version {} then, {} now",
                then.protocol_version.as_deref().unwrap_or("(none)"),
                now.protocol_version.as_deref().unwrap_or("(none)")
            );
            notes += 1;
        }
        for (tool, change) in lock::diff_tools(then, now) {
            if live.calls(name, &tool) {
                eprintln!("error: server `{name}`: tool `{tool}` {change} (the graph calls it)");
                differences += 1;
            } else {
                eprintln!("note: server `{name}`: tool `{tool}` {change}");
                notes += 1;
            }
        }
    }
    for name in locked.servers.keys() {
        if live.servers.iter().all(|(s, _)| s != name) {
            eprintln!("note: server `{name}` is in the lock, but the graph calls it no more");
            notes += 1;
        }
    }
    if differences > 0 || failed {
        eprintln!(
            "error: {} does not match the live servers{}: check the graph against them (`mcpgraph check --online {}`), then run `mcpgraph lock {}`",
            path.display(),
            if differences > 0 {
                format!(" ({} the graph calls)", count(differences, "tool"))
            } else {
                String::new()
            },
            common.file.display(),
            common.file.display()
        );
        return ExitCode::from(1);
    }
    if notes > 0 {
        eprintln!(
            "{} matches the live servers in every tool the graph calls ({})",
            path.display(),
            count(notes, "note")
        );
    } else {
        eprintln!("{} matches the live servers", path.display());
    }
    ExitCode::SUCCESS
}

/// `check --online`: the graph checked against a lock made in memory from the live servers,
/// named like the lock file; nothing is written. `false` with it: a server could not be read
/// (its line is printed), so the check is incomplete.
pub fn online(common: &Common) -> Result<(SourceFile, Checked, bool), ExitCode> {
    let (file, mcp) = read_files(common)?;
    let live = Live::discover(&file, mcp.as_ref())?;
    let complete = !live.report_failures();
    let servers = live
        .servers
        .into_iter()
        .filter_map(|(name, contract)| contract.ok().map(|c| (name, c)))
        .collect();
    let text = Lock::new(servers).to_text();
    let path = lock::lock_path(&common.file);
    let lock_file = SourceFile::new(path.display().to_string(), text);
    let checked = compile_with(&file, mcp.as_ref(), Some(&lock_file));
    Ok((file, checked, complete))
}

/// The graph and MCP files. A graph whose YAML cannot be read at all is refused with its
/// diagnostics: it would look like a graph that calls nothing, and lock an empty list.
fn read_files(common: &Common) -> Result<(SourceFile, Option<SourceFile>), ExitCode> {
    let file = read(&common.file)?;
    let mcp = common.mcp.as_deref().map(read).transpose()?;
    if mcpgraph_compiler::yaml::parse(&file.text).is_err() {
        let checked = mcpgraph_compiler::compile(&file, mcp.as_ref());
        let text = render::human_all(&checked, &file, style());
        let _ = std::io::stderr().write_all(text.as_bytes());
        return Err(ExitCode::from(1));
    }
    Ok((file, mcp))
}

/// A lock file that cannot be used, rendered like any diagnostic; exit 1.
fn show(file: &SourceFile, d: mcpgraph_compiler::Diagnostic) -> ExitCode {
    let checked = Checked {
        graph: None,
        diagnostics: vec![d],
    };
    let text = render::human_all(&checked, file, style());
    let _ = std::io::stderr().write_all(text.as_bytes());
    ExitCode::from(1)
}

/// `name version` of a server, as far as its `serverInfo` says.
fn identity(server: &LockedServer) -> String {
    let field = |key: &str| server.server_info.get(key).and_then(|v| v.as_str());
    match (field("name"), field("version")) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => name.to_string(),
        _ => "no serverInfo".to_string(),
    }
}

/// [`identity`], and the protocol version agreed on.
fn describe(server: &LockedServer) -> String {
    match &server.protocol_version {
        Some(version) => format!("{}, protocol {version}", identity(server)),
        None => identity(server),
    }
}

fn tools(n: usize) -> String {
    count(n, "tool")
}

fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// A multi-line reason (a server's stderr) indented under its error line.
fn indent(reason: &str) -> String {
    reason.replace('\n', "\n  ")
}
