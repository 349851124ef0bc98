//! `mcpgraph lock` (write the lock, or `--check` it against the live servers) and
//! `check --online`: the shell over `crate::lock`, which reads the live servers and says what
//! became of each. Here: the lines printed and the exit codes.

use super::{Common, style};
use crate::lock::{
    Compared, Comparison, Drift, Inputs, LockError, LockUpdate, ServerOutcome, Written,
};
use mcpgraph_compiler::lock::LockedServer;
use mcpgraph_compiler::render;
use mcpgraph_compiler::{Checked, SourceFile};
use serde_json::Value;
use std::io::Write;
use std::process::ExitCode;

/// `mcpgraph lock FILE [-m FILE]`: writes `<stem>.lock.json` with every server that could be
/// read (a server that could not keeps its previous entry, if any); exit 1 when one could not.
pub fn write(common: &Common) -> ExitCode {
    let inputs = match Inputs::read(&common.project()) {
        Ok(inputs) => inputs,
        Err(error) => return report(error, common),
    };
    let live = match inputs.discover_once() {
        Ok(live) => live,
        Err(error) => return report(error, common),
    };
    let update = LockUpdate::new(&inputs, live);
    let path = update.lock_file.display();
    let unreadable = update.unreadable();
    for (name, reason) in &unreadable {
        eprintln!("error: cannot read server `{name}`: {}", indent(reason));
    }
    for server in &update.servers {
        let name = &server.name;
        match &server.outcome {
            ServerOutcome::Locked { contract, .. } => eprintln!(
                "locked server `{name}` ({}): {}",
                describe(contract),
                count(contract.tools.len(), "tool")
            ),
            ServerOutcome::Unreadable { kept: Some(_), .. } => {
                eprintln!("note: server `{name}` keeps its previous entry in {path}");
            }
            ServerOutcome::Unreadable { kept: None, .. } => {}
            ServerOutcome::KeptForErrors { .. } => eprintln!(
                "note: server `{name}` keeps its previous entry in {path}: the graph has errors, so its calls may not all be read"
            ),
        }
    }
    match update.write() {
        Ok(Written::UpToDate) => eprintln!("{path} is up to date"),
        Ok(Written::Wrote) => eprintln!("wrote {path}"),
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::from(1);
        }
    }
    // What the new lock says of the graph, in one line: `check` shows the details.
    let checked = &update.checked;
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
    if unreadable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// `mcpgraph lock --check`: the live servers against the lock file, per server and tool. Exit 1
/// when a tool the graph calls differs (changed, gone, or new where the lock lacks it), a used
/// server is missing from the lock or cannot be read, or there is no usable lock file; other
/// differences are notes. Writes nothing.
pub fn check(common: &Common) -> ExitCode {
    let inputs = match Inputs::read(&common.project()) {
        Ok(inputs) => inputs,
        Err(error) => return report(error, common),
    };
    let locked = match crate::lock::read_lock(&inputs) {
        Ok(locked) => locked,
        Err(LockError::BadLockFile(diagnostic)) => return show(&inputs.graph, *diagnostic),
        Err(error) => return report(error, common),
    };
    let live = match inputs.discover_once() {
        Ok(live) => live,
        Err(error) => return report(error, common),
    };
    let comparison = Comparison::new(&inputs, &locked, &live);
    let path = comparison.lock_file.display();
    for (name, reason) in comparison.unreadable() {
        eprintln!("error: cannot read server `{name}`: {}", indent(reason));
    }
    for server in &comparison.servers {
        match &server.compared {
            Compared::Unreadable(_) => {}
            Compared::NotInLock => eprintln!("error: server `{}` is not in {path}", server.name),
            Compared::Drift(drift) => print_drift(&server.name, drift),
        }
    }
    for name in &comparison.no_longer_called {
        eprintln!("note: server `{name}` is in the lock, but the graph calls it no more");
    }
    let differences = comparison.called_differences();
    if differences > 0 || comparison.servers_missing() {
        eprintln!(
            "error: {path} does not match the live servers{}: check the graph against them (`mcpgraph check --online {}`), then run `mcpgraph lock {}`",
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
    let notes = comparison.notes();
    if notes > 0 {
        eprintln!(
            "{path} matches the live servers in every tool the graph calls ({})",
            count(notes, "note")
        );
    } else {
        eprintln!("{path} matches the live servers");
    }
    ExitCode::SUCCESS
}

/// `check --online`: the graph checked against a lock made in memory from the live servers,
/// named like the lock file; nothing is written. `false` with it: a server could not be read
/// (its line is printed), so the check is incomplete.
pub fn online(common: &Common) -> Result<(SourceFile, Checked, bool), ExitCode> {
    let inputs = Inputs::read(&common.project()).map_err(|error| report(error, common))?;
    let live = inputs
        .discover_once()
        .map_err(|error| report(error, common))?;
    let unreadable = live.unreadable();
    for (name, reason) in &unreadable {
        eprintln!("error: cannot read server `{name}`: {}", indent(reason));
    }
    let complete = unreadable.is_empty();
    let checked = crate::lock::check_online(&inputs, &live);
    Ok((inputs.graph, checked, complete))
}

/// One line per difference of a server from its locked entry: errors for the tools the graph
/// calls, notes for the rest.
fn print_drift(name: &str, drift: &Drift) {
    if let Some(info) = &drift.server_info {
        eprintln!(
            "note: server `{name}`: {} ({} then, {} now)",
            info.change,
            identity(&info.then),
            identity(&info.now)
        );
    }
    if let Some(version) = &drift.protocol_version {
        eprintln!(
            "note: server `{name}`: protocol version {} then, {} now",
            version.then.as_deref().unwrap_or("(none)"),
            version.now.as_deref().unwrap_or("(none)")
        );
    }
    for tool in &drift.tools {
        if tool.called {
            eprintln!(
                "error: server `{name}`: tool `{}` {} (the graph calls it)",
                tool.tool, tool.change
            );
        } else {
            eprintln!(
                "note: server `{name}`: tool `{}` {}",
                tool.tool, tool.change
            );
        }
    }
}

/// A lock that could not be made or checked, printed as these commands always have; exit 1.
fn report(error: LockError, common: &Common) -> ExitCode {
    match error {
        LockError::Unreadable(diagnostic) => {
            eprintln!("error[{}]: {}", diagnostic.code, diagnostic.message);
        }
        LockError::NotYaml { graph, checked } => {
            let text = render::human_all(&checked, &graph, style());
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
        LockError::NoLockFile { lock_file } => eprintln!(
            "error: there is no lock file {}: run `mcpgraph lock {}` to write it",
            lock_file.display(),
            common.file.display()
        ),
        other => eprintln!("error: {other}"),
    }
    ExitCode::from(1)
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
fn identity(server_info: &Value) -> String {
    let field = |key: &str| server_info.get(key).and_then(|v| v.as_str());
    match (field("name"), field("version")) {
        (Some(name), Some(version)) => format!("{name} {version}"),
        (Some(name), None) => name.to_string(),
        _ => "no serverInfo".to_string(),
    }
}

/// [`identity`], and the protocol version agreed on.
fn describe(server: &LockedServer) -> String {
    match &server.protocol_version {
        Some(version) => format!("{}, protocol {version}", identity(&server.server_info)),
        None => identity(&server.server_info),
    }
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
