//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod nginx;
pub mod raw_http;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` beside the project (as CI lays it out), or `MCPGRAPH_SHARED`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("MCPGRAPH_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => root().join("../shared"),
    }
}

/// Runs one of the shared corpus runners (`../shared/tools/NAME`) with `args` and requires it to
/// end with "N passed, 0 failed"; returns its output.
pub fn run_shared_runner<S: AsRef<std::ffi::OsStr>>(name: &str, args: &[S]) -> String {
    let output = Command::new("python3")
        .arg(shared_dir().join("tools").join(name))
        .args(args)
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.contains(" passed, 0 failed"),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

pub fn mcpgraph() -> &'static str {
    env!("CARGO_BIN_EXE_mcpgraph")
}

/// The environment of every `mcpgraph build` the tests run: one shared cache
/// (`target/mcpgraph-test-cache`), so the runtime's dependency tree is compiled once for all of
/// them. A test that builds there with any other cargo setting compiles the whole tree again.
///
/// `opt-level = 0` instead of the generated crate's 3: the build pipeline, the static linking
/// and mcpgraph's verification of the binary are the same, only the optimisation differs, and
/// the cold compile of the runtime's tree is most of what these builds cost in CI (opt-level 1
/// took 4m28s of the suite's run on 2 busy cores).
pub const SHARED_BUILD_ENV: &[(&str, &str)] = &[
    (
        "MCPGRAPH_CACHE_DIR",
        concat!(env!("CARGO_MANIFEST_DIR"), "/target/mcpgraph-test-cache"),
    ),
    ("CARGO_PROFILE_RELEASE_OPT_LEVEL", "0"),
];

/// PATH with the npm test servers' binaries first (installed by scripts/test-setup).
pub fn path_with_test_servers() -> String {
    let bin = root().join("tests/support/node_modules/.bin");
    assert!(
        bin.join("mcp-server-everything").exists(),
        "run scripts/test-setup first: {} is missing",
        bin.display()
    );
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// An MCP server process driven over stdio with newline-delimited JSON-RPC.
pub struct Mcp {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    /// Messages read but not yet asked for (notifications, other responses).
    pub pending: Vec<Value>,
    next_id: u64,
}

impl Mcp {
    /// Starts `mcpgraph ARGS` in `cwd` with extra environment, and completes the handshake.
    pub fn start(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Mcp {
        Mcp::handshake(Mcp::spawn(args, cwd, env))
    }

    /// Starts another server program (a built server) in `cwd`, and completes the handshake.
    pub fn start_program(program: &str, cwd: &Path) -> Mcp {
        Mcp::handshake(Mcp::spawn_program(program, &[], cwd, &[], Stdio::null()))
    }

    fn handshake(mut mcp: Mcp) -> Mcp {
        let init = mcp.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcpgraph-tests", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        mcp.notify("notifications/initialized", json!({}));
        mcp
    }

    pub fn spawn(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> Mcp {
        Mcp::spawn_with_stderr(args, cwd, env, Stdio::null())
    }

    /// [`Mcp::spawn`] with the server's stderr going to `stderr` (a file, to look for panics).
    pub fn spawn_with_stderr(
        args: &[&str],
        cwd: &Path,
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Mcp {
        Mcp::spawn_program(mcpgraph(), args, cwd, env, stderr)
    }

    fn spawn_program(
        program: &str,
        args: &[&str],
        cwd: &Path,
        env: &[(&str, &str)],
        stderr: Stdio,
    ) -> Mcp {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("mcpgraph starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        Mcp {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            pending: Vec::new(),
            next_id: 1,
        }
    }

    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to server");
        stdin.flush().expect("flush");
    }

    /// Writes `bytes` and a newline as they are (not necessarily JSON, nor UTF-8).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to server");
        stdin.write_all(b"\n").expect("write to server");
        stdin.flush().expect("flush");
    }

    /// The response carrying `id` (any JSON value; `null` for errors that could not name the
    /// request), keeping other messages in `pending`.
    pub fn response_to(&mut self, id: &Value, timeout: Duration) -> Value {
        let is_it = |m: &Value| m.get("id") == Some(id) && m.get("method").is_none();
        if let Some(i) = self.pending.iter().position(is_it) {
            return self.pending.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(m) if is_it(&m) => return m,
                Ok(m) => self.pending.push(m),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no response to request {id} within {timeout:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server closed stdout before answering request {id}")
                }
            }
        }
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request without waiting; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The response to request `id` (notifications and other responses are kept in `pending`).
    pub fn response(&mut self, id: u64, timeout: Duration) -> Value {
        if let Some(i) = self
            .pending
            .iter()
            .position(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none())
        {
            return self.pending.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(m) if m.get("id") == Some(&json!(id)) && m.get("method").is_none() => return m,
                Ok(m) => self.pending.push(m),
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no response to request {id} within {timeout:?}")
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server closed stdout before answering request {id}")
                }
            }
        }
    }

    /// The first notification `method` (one already read first), waiting up to `timeout` for it;
    /// the other messages are kept in `pending`.
    pub fn notification(&mut self, method: &str, timeout: Duration) -> Value {
        let is_it = |m: &Value| m["method"] == method && m.get("id").is_none();
        if let Some(i) = self.pending.iter().position(is_it) {
            return self.pending.remove(i);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(m) if is_it(&m) => return m,
                Ok(m) => self.pending.push(m),
                Err(RecvTimeoutError::Timeout) => panic!("no {method} within {timeout:?}"),
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server closed stdout before sending {method}")
                }
            }
        }
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(id, Duration::from_secs(60))
    }

    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": args}))
    }

    /// Closes stdin, as an MCP client does to stop a stdio server.
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to exit; `None` when it is still running after `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        wait_child(&mut self.child, limit)
    }
}

/// Waits for `child` to exit; `None` when it is still running after `limit`.
pub fn wait_child(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The structured result of a successful tools/call response.
pub fn structured(response: &Value) -> &Value {
    let result = &response["result"];
    assert_ne!(
        result["isError"],
        json!(true),
        "the call failed: {response}"
    );
    &result["structuredContent"]
}

/// The text of a tools/call result.
pub fn text(response: &Value) -> String {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Process ids of the children of `pid` (Linux).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// The threads of process `pid` (Linux): id and name, from /proc/PID/task, sorted. A thread that
/// ends while they are read is left out.
pub fn threads(pid: u32) -> Vec<(u32, String)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("/proc lists the threads");
    let mut threads: Vec<(u32, String)> = tasks
        .flatten()
        .filter_map(|task| {
            let id = task.file_name().to_str()?.parse().ok()?;
            let name = std::fs::read_to_string(task.path().join("comm")).ok()?;
            Some((id, name.trim_end().to_string()))
        })
        .collect();
    threads.sort();
    threads
}

/// tokio names its runtime's workers and its blocking-pool threads alike (`tokio-rt-worker` in
/// the version locked here; `tokio-runtime-worker`, cut to 15 bytes in /proc, in older ones).
pub fn is_tokio(thread: &(u32, String)) -> bool {
    thread.1.starts_with("tokio-")
}

pub fn process_alive(pid: u32) -> bool {
    // A zombie has exited; only its entry is left for the parent to reap.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}
