//! The extension examples (`examples/*.yaml` using map, parallel, retry, `server: self`, ask)
//! served and called as a client would, over the real filesystem server from npm (installed by
//! scripts/test-setup) or the shared mock. Each test checks what the example promises in its
//! header comment.

use crate::common;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// A stdio MCP client that, unlike `common::Mcp`, answers the server's own requests
/// (`elicitation/create`) while it waits for a response.
struct Client {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    next_id: u64,
}

impl Client {
    /// Serves `example` from `cwd` with `env`, and completes the handshake advertising
    /// `capabilities`.
    fn serve(example: &str, cwd: &Path, env: &[(&str, &str)], capabilities: Value) -> Client {
        let graph = common::root().join("examples").join(example);
        let mut cmd = Command::new(common::mcpgraph());
        cmd.arg("serve")
            .arg(&graph)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("mcpgraph starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take().expect("piped stdin");
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
        let mut client = Client {
            child,
            stdin,
            lines: rx,
            next_id: 1,
        };
        let (init, _) = client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                   "clientInfo": {"name": "mcpgraph-examples", "version": "1"}}),
            &[],
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write to server");
        self.stdin.flush().expect("flush");
    }

    /// Sends a request and returns its response and the params of the elicitation requests the
    /// server made meanwhile, each answered with the next of `answers` (a JSON-RPC error once
    /// they run out).
    fn request(&mut self, method: &str, params: Value, answers: &[Value]) -> (Value, Vec<Value>) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut answers = answers.iter();
        let mut asked = Vec::new();
        loop {
            let message = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("no response to {method} ({e})"));
            if message.get("method").is_none() && message["id"] == json!(id) {
                return (message, asked);
            }
            if message["method"] == "elicitation/create" {
                asked.push(message["params"].clone());
                let reply = match answers.next() {
                    Some(answer) => {
                        json!({"jsonrpc": "2.0", "id": message["id"], "result": answer})
                    }
                    None => json!({"jsonrpc": "2.0", "id": message["id"],
                                   "error": {"code": -32601, "message": "no answer"}}),
                };
                self.send(&reply);
            }
        }
    }

    /// The structured result of a successful call of `tool`.
    fn call(&mut self, tool: &str, args: Value, answers: &[Value]) -> (Value, Vec<Value>) {
        let (response, asked) = self.request(
            "tools/call",
            json!({"name": tool, "arguments": args}),
            answers,
        );
        let result = &response["result"];
        assert_ne!(result["isError"], json!(true), "{tool} failed: {response}");
        (result["structuredContent"].clone(), asked)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The working directory for examples that start the filesystem server with `npx`: there npx
/// finds the package scripts/test-setup installed, and never downloads one.
fn npx_cwd() -> PathBuf {
    let dir = common::root().join("tests/support");
    assert!(
        dir.join("node_modules/.bin/mcp-server-filesystem").exists(),
        "run scripts/test-setup first"
    );
    dir
}

#[test]
fn fetch_files_reads_concurrently_and_keeps_what_it_cannot_read() {
    let dir = tempdir("fetch-files");
    std::fs::write(dir.join("a.txt"), "alpha").unwrap();
    std::fs::write(dir.join("b.txt"), "beta").unwrap();
    let root = dir.to_string_lossy().into_owned();
    let mut client = Client::serve(
        "fetch_files.yaml",
        &npx_cwd(),
        &[("FS_ROOT", &root)],
        json!({}),
    );
    let a = format!("{root}/a.txt");
    let missing = format!("{root}/missing.txt");
    let b = format!("{root}/b.txt");

    let (out, _) = client.call("read_files", json!({"paths": [a, missing, b]}), &[]);
    assert_eq!(out["unreadable"], json!(1), "{out}");
    assert_eq!(
        out["files"][0],
        json!({"path": a, "text": "alpha"}),
        "{out}"
    );
    assert_eq!(out["files"][2], json!({"path": b, "text": "beta"}), "{out}");
    assert_eq!(out["files"][1]["path"], json!(missing), "{out}");
    assert_eq!(out["files"][1]["error"], json!("tool"), "{out}");
    assert!(
        out["files"][1]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("missing.txt") || r.contains("ENOENT")),
        "{out}"
    );

    let (all, _) = client.call("read_all_or_nothing", json!({"paths": [a, b]}), &[]);
    assert_eq!(all, json!({"ok": true, "texts": ["alpha", "beta"]}));
    let (none, _) = client.call("read_all_or_nothing", json!({"paths": [a, missing]}), &[]);
    assert_eq!(none["ok"], json!(false), "{none}");
    assert_eq!(none["kind"], json!("tool"), "{none}");
}

#[test]
fn flaky_retry_retries_then_gives_up_with_the_attempts() {
    let examples = common::root().join("examples");
    assert!(
        examples
            .join("../../shared/tools/mock-mcp-server.py")
            .exists(),
        "flaky_retry.yaml expects the shared tools at ../shared beside the repository"
    );
    // From a directory that is not the example's: its relative `cwd` is taken from the
    // graph file's directory, not from the process's (before, it worked from examples/ only).
    let elsewhere = std::env::temp_dir();
    let mut client = Client::serve("flaky_retry.yaml", &elsewhere, &[], json!({}));
    let (ok, _) = client.call(
        "fetch_with_retry",
        json!({"key": "twice", "failures": 2}),
        &[],
    );
    assert_eq!(ok, json!({"ok": true, "calls": 3}));
    let (gave_up, _) = client.call(
        "fetch_with_retry",
        json!({"key": "always", "failures": 9}),
        &[],
    );
    assert_eq!(
        gave_up,
        json!({"ok": false, "attempts": 4, "reason": "flaky failure 4 of key always"})
    );
}

#[test]
fn parallel_inspect_looks_three_ways_at_once() {
    let dir = tempdir("parallel-inspect");
    std::fs::write(dir.join("one.txt"), "1").unwrap();
    std::fs::write(dir.join("two.txt"), "2").unwrap();
    let root = dir.to_string_lossy().into_owned();
    let mut client = Client::serve(
        "parallel_inspect.yaml",
        &npx_cwd(),
        &[("FS_ROOT", &root)],
        json!({}),
    );
    let (on_dir, _) = client.call("inspect", json!({"path": root}), &[]);
    assert_eq!(
        on_dir,
        json!({"isDirectory": true, "entries": 2, "isRoot": true})
    );
    // On a file, list_directory fails: its branch keeps the error, the others still answer.
    let file = format!("{root}/one.txt");
    let (on_file, _) = client.call("inspect", json!({"path": file}), &[]);
    assert_eq!(
        on_file,
        json!({"isDirectory": false, "entries": null, "listingError": "tool", "isRoot": false})
    );
}

#[test]
fn self_call_runs_a_tool_of_the_graph_per_item() {
    let mut client = Client::serve("self_call.yaml", &common::root(), &[], json!({}));
    let (one, _) = client.call(
        "word_stats",
        json!({"text": "  the quick  brownest fox "}),
        &[],
    );
    assert_eq!(one, json!({"words": 4, "longest": "brownest"}));
    let (all, _) = client.call(
        "corpus_stats",
        json!({"texts": ["one two three", "four", "", "five six"]}),
        &[],
    );
    assert_eq!(all, json!({"perText": [3, 1, 0, 2], "total": 6}));
}

#[test]
fn confirm_ask_writes_only_what_the_person_confirmed() {
    let dir = tempdir("confirm-ask");
    let root = dir.to_string_lossy().into_owned();
    let path = dir.join("notes.txt");
    std::fs::write(&path, "old").unwrap();
    let args = json!({"path": path.to_string_lossy(), "content": "new text"});
    let mut client = Client::serve(
        "confirm_ask.yaml",
        &npx_cwd(),
        &[("FS_ROOT", &root)],
        json!({"elicitation": {}}),
    );

    let (no, asked) = client.call(
        "overwrite_file",
        args.clone(),
        &[json!({"action": "accept", "content": {"ok": false}})],
    );
    assert_eq!(no, json!({"written": false, "reason": "the answer was no"}));
    assert_eq!(asked.len(), 1);
    let message = asked[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("notes.txt") && message.contains("8 characters"),
        "{message}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");

    let (declined, _) = client.call(
        "overwrite_file",
        args.clone(),
        &[json!({"action": "decline"})],
    );
    assert_eq!(declined, json!({"written": false, "reason": "declined"}));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");

    let (yes, _) = client.call(
        "overwrite_file",
        args.clone(),
        &[json!({"action": "accept", "content": {"ok": true}})],
    );
    assert_eq!(yes, json!({"written": true}));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new text");
    drop(client);

    // A client without the elicitation capability is never asked.
    std::fs::write(&path, "old").unwrap();
    let mut unattended = Client::serve(
        "confirm_ask.yaml",
        &npx_cwd(),
        &[("FS_ROOT", &root)],
        json!({}),
    );
    let (unavailable, asked) = unattended.call("overwrite_file", args, &[]);
    assert_eq!(
        unavailable,
        json!({"written": false, "reason": "unavailable"})
    );
    assert!(asked.is_empty());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
}
