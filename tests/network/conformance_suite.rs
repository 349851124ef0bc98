//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! tests/support/package.json, installed by scripts/test-setup) against `mcpgraph serve --http`
//! serving the suite's fixture tools (tests/http/conformance.yaml); docs/conformance.md has the
//! results per scenario.
//!
//! - The active suite against the default, stateless server, with the scenarios a graph cannot
//!   pass in tests/http/conformance-baseline.yml. The suite itself fails the run both for an
//!   unexpected failure and for a baseline entry that now passes, so the baseline stays exact.
//! - The pending suite's `json-schema-2020-12` against the same kind of server.
//! - Against `--sessions`, the scenarios that need a session (in the stateless baseline for
//!   that reason), each of which must pass outright.

use crate::common;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const GRAPH: &str = "tests/http/conformance.yaml";
const BASELINE: &str = "tests/http/conformance-baseline.yml";
/// How long the server gets to print where it listens.
const START_LIMIT: Duration = Duration::from_secs(20);
/// How long one run of the suite may take (the whole active suite takes about two seconds).
const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The active suite, stateless: everything outside the baseline passes, and everything in it
/// still fails.
#[test]
fn active_suite_passes_on_a_stateless_server_but_for_the_baseline() {
    active_suite_passes("active", &HttpServer::start(&[]));
}

/// The same suite against a server built by `mcpgraph build --static` (in tests/cli/build.rs's
/// shared cache, so the runtime is compiled once for all of them), which must also answer the
/// Python `mcp` client in both protocol eras.
#[test]
fn a_built_static_server_passes_it_too() {
    let bins = common::root().join("target/mcpgraph-test-bins");
    std::fs::create_dir_all(&bins).expect("bins dir");
    let binary = bins.join("conformance-static");
    let status = Command::new(common::mcpgraph())
        .arg("build")
        .arg(common::root().join(GRAPH))
        .arg("-o")
        .arg(&binary)
        .arg("--static")
        // Exactly tests/cli/build.rs's environment, or cargo compiles the runtime again.
        .envs(common::SHARED_BUILD_ENV.iter().copied())
        .status()
        .expect("mcpgraph build runs");
    assert!(status.success(), "mcpgraph build {GRAPH} --static failed");
    let mut command = Command::new(&binary);
    command.args(["--http", "127.0.0.1:0"]);
    let server = HttpServer::spawn(command);
    // Its own results directory: the tests of this file run side by side.
    active_suite_passes("active-built", &server);
    for mode in ["2026-07-28", "legacy"] {
        let output = Command::new(common::root().join("target/test-venv/bin/python"))
            .arg(common::root().join("tests/support/http_client.py"))
            .args(["call", mode, &server.url, "test_simple_text", "{}"])
            .stdin(Stdio::null())
            .output()
            .expect("python runs");
        let report: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!(
                "no report from the Python client ({e}):\n{}\n{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let expected_protocol = if mode == "legacy" { "2025-11-25" } else { mode };
        assert_eq!(report["protocol"], expected_protocol, "{report}");
        assert_eq!(report["is_error"], false, "{report}");
        // A string result is its JSON text, as over stdio.
        assert_eq!(
            report["text"], "\"This is a simple text response for testing.\"",
            "{report}"
        );
    }
}

fn active_suite_passes(name: &str, server: &HttpServer) {
    let baseline = common::root().join(BASELINE);
    let run = Suite::run(
        name,
        server,
        &[
            "--suite".as_ref(),
            "active".as_ref(),
            "--expected-failures".as_ref(),
            baseline.as_os_str(),
        ],
    );
    let expected = baseline_entries(&baseline);
    let unexpected: Vec<&String> = run
        .not_succeeded
        .iter()
        .filter(|check| {
            !expected
                .iter()
                .any(|id| check.starts_with(&format!("{id}: ")))
        })
        .collect();
    let stale: Vec<&String> = expected
        .iter()
        .filter(|id| {
            run.ran.contains(id)
                && !run
                    .not_succeeded
                    .iter()
                    .any(|check| check.starts_with(&format!("{id}: ")))
        })
        .collect();
    assert!(
        run.exit_ok,
        "the conformance suite failed (its output is above). Checks that did not succeed, outside \
         {BASELINE}:\n{unexpected:#?}\nbaseline entries that now pass (remove them): {stale:?}\n\
         server stderr:\n{}",
        server.stderr()
    );
    // The suite ran every active scenario: 30 in 0.1.13, the baseline's among them.
    assert!(
        run.ran.len() >= 30,
        "only these scenarios ran: {:?}",
        run.ran
    );
}

/// The pending suite's JSON Schema 2020-12 scenario: the tool's schema is advertised as
/// written (`$schema`, `$defs`, `additionalProperties`).
#[test]
fn json_schema_2020_12_passes() {
    let server = HttpServer::start(&[]);
    Suite::scenario_passes(&server, "json-schema-2020-12");
}

/// What the stateless baseline lists for want of a session passes once the server gives
/// 2025-era clients sessions: concurrent POST streams of one session, and `ask` nodes put to
/// the client as `elicitation/create` (defaults of every primitive type included). The logging
/// scenarios pass in both modes (stateless: the active suite above).
#[test]
fn session_scenarios_pass_with_sessions() {
    let server = HttpServer::start(&["--sessions"]);
    for scenario in [
        "server-sse-multiple-streams",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "logging-set-level",
        "tools-call-with-logging",
    ] {
        Suite::scenario_passes(&server, scenario);
    }
}

/// The fixture graph checks clean: no errors and no warnings.
#[test]
fn fixture_graph_checks_clean() {
    let output = Command::new(common::mcpgraph())
        .args(["check", "--deny-warnings", GRAPH])
        .current_dir(common::root())
        .env("NO_COLOR", "1")
        .output()
        .expect("mcpgraph check runs");
    assert!(
        output.status.success(),
        "{GRAPH} does not check clean:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `mcpgraph serve GRAPH --http 127.0.0.1:0 EXTRA...`, on the port the system picked; killed on
/// drop.
struct HttpServer {
    child: Child,
    /// The MCP endpoint, as the server printed it.
    url: String,
    /// Everything the server wrote to stderr so far (read continuously, so it never blocks).
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    fn start(extra: &[&str]) -> HttpServer {
        let mut command = Command::new(common::mcpgraph());
        command
            .args(["serve", GRAPH, "--http", "127.0.0.1:0"])
            .args(extra);
        HttpServer::spawn(command)
    }

    /// `command`, which serves HTTP and says where on stderr.
    fn spawn(mut command: Command) -> HttpServer {
        let mut child = command
            .current_dir(common::root())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpgraph starts");
        let pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = channel();
        {
            let stderr = stderr.clone();
            std::thread::spawn(move || {
                let mut tx = Some(tx);
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    if let Some(url) = served_url(&line)
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(url);
                    }
                    let mut all = stderr.lock().unwrap_or_else(|e| e.into_inner());
                    all.push_str(&line);
                    all.push('\n');
                }
            });
        }
        // The sender goes when stderr closes, so a server that exits early is seen at once.
        let url = rx.recv_timeout(START_LIMIT);
        let mut server = HttpServer {
            child,
            url: String::new(),
            stderr,
        };
        match url {
            Ok(url) => server.url = url,
            Err(e) => {
                let _ = server.child.kill();
                let _ = server.child.wait();
                panic!(
                    "`mcpgraph serve --http` did not say where it serves ({e}); stderr:\n{}",
                    server.stderr()
                );
            }
        }
        server
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The endpoint in `mcpgraph: serving <title> at http://127.0.0.1:PORT/mcp (...)`.
fn served_url(line: &str) -> Option<String> {
    let rest = line.strip_prefix("mcpgraph: serving ")?;
    let (_, after) = rest.rsplit_once(" at http://")?;
    let address = after.split_whitespace().next()?;
    Some(format!("http://{address}"))
}

/// One run of the suite's command line, `conformance server --url URL ARGS -o DIR`.
struct Suite {
    /// Exit status 0.
    exit_ok: bool,
    /// The scenarios that wrote results, in name order.
    ran: Vec<String>,
    /// How many checks succeeded.
    succeeded: usize,
    /// `scenario: check STATUS: message` for every check that is neither SUCCESS nor INFO.
    not_succeeded: Vec<String>,
}

impl Suite {
    /// Runs the suite, prints its output, and reads the checks it wrote.
    fn run(name: &str, server: &HttpServer, args: &[&std::ffi::OsStr]) -> Suite {
        let bin = common::root().join("tests/support/node_modules/.bin/conformance");
        assert!(
            bin.exists(),
            "run scripts/test-setup first: {} is missing",
            bin.display()
        );
        let results = std::env::temp_dir().join(format!(
            "mcpgraph-conformance-suite-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&results);
        std::fs::create_dir_all(&results).expect("create the results directory");
        let mut child = Command::new(&bin)
            .arg("server")
            .arg("--url")
            .arg(&server.url)
            .args(args)
            .arg("-o")
            .arg(&results)
            .current_dir(common::root().join("tests/support"))
            .env("NO_COLOR", "1")
            .env("FORCE_COLOR", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the conformance suite starts");
        let output = read_all(&mut child, name);
        let status = child.wait().expect("the conformance suite ends");
        println!(
            "$ conformance server --url {} {args:?}\n{output}",
            server.url
        );
        let mut run = Suite {
            exit_ok: status.success(),
            ran: Vec::new(),
            succeeded: 0,
            not_succeeded: Vec::new(),
        };
        run.read_checks(&results);
        let _ = std::fs::remove_dir_all(&results);
        run
    }

    /// One scenario, no baseline: exit 0, and every check a SUCCESS (or INFO), at least one of
    /// them. A WARNING alone would exit 0 too, so the checks themselves are read.
    fn scenario_passes(server: &HttpServer, scenario: &str) {
        let run = Suite::run(
            scenario,
            server,
            &["--scenario".as_ref(), scenario.as_ref()],
        );
        assert!(
            run.exit_ok && run.not_succeeded.is_empty() && run.succeeded > 0,
            "scenario {scenario} did not pass against {}: {} checks succeeded; the others:\n{}\nserver stderr:\n{}",
            server.url,
            run.succeeded,
            run.not_succeeded.join("\n"),
            server.stderr()
        );
    }

    /// Reads `DIR/server-<scenario>-<timestamp>/checks.json`, one per scenario run.
    fn read_checks(&mut self, results: &Path) {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(results)
            .expect("read the results directory")
            .flatten()
            .map(|entry| entry.path())
            .collect();
        dirs.sort();
        for dir in dirs {
            let text = std::fs::read_to_string(dir.join("checks.json"))
                .unwrap_or_else(|e| panic!("{}/checks.json: {e}", dir.display()));
            let checks: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{}/checks.json: {e}", dir.display()));
            let scenario = scenario_of(&dir);
            self.ran.push(scenario.clone());
            for check in checks.as_array().into_iter().flatten() {
                match check["status"].as_str().unwrap_or_default() {
                    "SUCCESS" => self.succeeded += 1,
                    "INFO" => {}
                    status => self.not_succeeded.push(format!(
                        "{scenario}: {} {status}: {}",
                        check["id"].as_str().unwrap_or("?"),
                        check["errorMessage"].as_str().unwrap_or_default()
                    )),
                }
            }
        }
    }
}

/// The scenario ids a baseline file lists under `server:` (`  - id  # why`).
fn baseline_entries(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter_map(|line| line.trim_start().strip_prefix("- "))
        .filter_map(|entry| entry.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// `server-<scenario>-2026-12-01T20-02-44-698Z` → `<scenario>`.
fn scenario_of(dir: &Path) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_prefix("server-").unwrap_or(&name);
    // The timestamp is `YYYY-MM-DDTHH-MM-SS-mmmZ`: 24 characters, after a dash.
    match name.len().checked_sub(25) {
        Some(end) if name.ends_with('Z') => name[..end].to_string(),
        _ => name.to_string(),
    }
}

/// The child's stdout and stderr together, read to their end within [`RUN_LIMIT`]; the child is
/// killed (and the test fails) if it runs past it.
fn read_all(child: &mut Child, name: &str) -> String {
    let (tx, rx) = channel();
    let readers: Vec<Box<dyn Read + Send>> = vec![
        Box::new(child.stdout.take().expect("piped stdout")),
        Box::new(child.stderr.take().expect("piped stderr")),
    ];
    for mut reader in readers {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = reader.read_to_string(&mut text);
            let _ = tx.send(text);
        });
    }
    drop(tx);
    let deadline = Instant::now() + RUN_LIMIT;
    let mut output = String::new();
    for _ in 0..2 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(text) => output.push_str(&text),
            Err(RecvTimeoutError::Timeout) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the conformance run {name} took more than {RUN_LIMIT:?}:\n{output}");
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    output
}
