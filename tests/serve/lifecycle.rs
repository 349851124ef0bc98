//! Concurrency, shutdown, cancellation, progress and crash recovery of `mcpgraph serve`, over the
//! shared mock downstream server.

use crate::common;

use crate::common::{Mcp, structured, text};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn graph() -> String {
    common::root()
        .join("tests/graphs/lifecycle.yaml")
        .to_string_lossy()
        .into_owned()
}

fn mock() -> String {
    common::shared_dir()
        .join("tools/mock-mcp-server.py")
        .to_string_lossy()
        .into_owned()
}

fn log_file(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mcpgraph-{name}-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn start(log: Option<&PathBuf>) -> Mcp {
    let mock = mock();
    let log = log
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "/dev/null".into());
    Mcp::start(
        &["serve", &graph()],
        &common::root(),
        &[("MCPGRAPH_MOCK", &mock), ("MCPGRAPH_MOCK_LOG", &log)],
    )
}

#[test]
fn fifty_overlapping_calls_each_get_their_own_answer() {
    let mut server = start(None);
    let ids: Vec<(u64, String)> = (0..60)
        .map(|i| {
            let tag = format!("call-{i}");
            (
                server.send_request(
                    "tools/call",
                    json!({"name": "tagged", "arguments": {"tag": tag}}),
                ),
                tag,
            )
        })
        .collect();
    for (id, tag) in ids {
        let answer = server.response(id, Duration::from_secs(60));
        assert_eq!(
            structured(&answer),
            &json!({"tag": tag, "spins": 21}),
            "{answer}"
        );
    }
}

#[test]
fn stdin_eof_stops_the_server_and_its_children() {
    let mut server = start(None);
    // Start the downstream child.
    let answer = server.call("tagged", json!({"tag": "x"}));
    assert_eq!(structured(&answer)["tag"], "x");
    let children = common::children_of(server.child.id());
    assert!(
        !children.is_empty(),
        "the mock server should be running as a child"
    );
    let started = Instant::now();
    server.close_stdin();
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("the server exits within 5 s of stdin EOF");
    assert!(status.success(), "exit status {status}");
    println!("exited {:?} after stdin EOF", started.elapsed());
    for pid in children {
        assert!(
            !common::process_alive(pid),
            "child {pid} outlived the server"
        );
    }
}

#[test]
fn a_cancelled_call_cancels_its_downstream_call() {
    let log = log_file("cancel");
    let mut server = start(Some(&log));
    let id = server.send_request(
        "tools/call",
        json!({"name": "nap", "arguments": {"ms": 1500}}),
    );
    // Cancel once the downstream call is in flight: the mock has logged it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains("\"method\": \"tools/call\""))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the downstream call never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    server.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
    // The server goes on serving; the mock (single-threaded) reads the cancellation once its
    // sleep is over.
    let after = server.call("tagged", json!({"tag": "after"}));
    assert_eq!(structured(&after)["tag"], "after");
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let cancelled: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("notifications/cancelled"))
        .collect();
    assert_eq!(
        cancelled.len(),
        1,
        "the downstream server was told about the cancellation:\n{logged}"
    );
    // No answer was sent for the cancelled request (MCP: the receiver does not respond).
    assert!(
        !server
            .pending
            .iter()
            .any(|m| m.get("id") == Some(&json!(id))),
        "{:?}",
        server.pending
    );
}

/// Map items, parallel branches and the nodes of a `server: self` callee are reported too, each
/// named by where it ran, all before the result.
#[test]
fn progress_notifications_name_items_branches_and_callee_nodes() {
    let mut server = start(None);
    let id = server.send_request(
        "tools/call",
        json!({"name": "fanout", "arguments": {}, "_meta": {"progressToken": "f"}}),
    );
    let answer = server.response(id, Duration::from_secs(30));
    assert_eq!(structured(&answer), &json!({"one": {"n": 3}}));
    let messages: Vec<String> = server
        .pending
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["message"].as_str().map(str::to_string))
        .collect();
    assert_eq!(
        messages,
        [
            "entry (entry)",
            "all[0] (map)",
            "all[1] (map)",
            "all[2] (map)",
            "all (map)",
            "both.one › steps.entry (entry)",
            "both.one › steps.a (transform)",
            "both.one › steps.b (transform)",
            "both.one › steps.c (transform)",
            "both.one › steps.exit (exit)",
            "both.one (parallel)",
            "both (parallel)",
            "exit (exit)"
        ]
    );
}

/// An ask nobody answers within its `timeoutMs` is withdrawn: the client gets
/// `notifications/cancelled` for the elicitation request before the call's result, which is the
/// `timeout` routed by `onError`.
#[test]
fn an_unanswered_ask_is_withdrawn_before_the_result() {
    let mut server = Mcp::spawn(
        &["serve", &graph()],
        &common::root(),
        &[("MCPGRAPH_MOCK", &mock())],
    );
    let init = server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "mcpgraph-tests", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    server.notify("notifications/initialized", json!({}));
    let id = server.send_request("tools/call", json!({"name": "asks", "arguments": {}}));
    let answer = server.response(id, Duration::from_secs(10));
    assert_eq!(
        structured(&answer),
        &json!({"kind": "timeout", "message": "No answer within timeoutMs 300"})
    );
    // Everything in `pending` arrived before the result.
    let asked = server
        .pending
        .iter()
        .find(|m| m["method"] == "elicitation/create")
        .unwrap_or_else(|| panic!("no elicitation request: {:?}", server.pending));
    assert_eq!(asked["params"]["message"], "Go ahead?");
    let withdrawn = server
        .pending
        .iter()
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap_or_else(|| panic!("no cancellation before the result: {:?}", server.pending));
    assert_eq!(withdrawn["params"]["requestId"], asked["id"]);
}

#[test]
fn progress_notifications_arrive_one_per_node() {
    let mut server = start(None);
    let id = server.send_request(
        "tools/call",
        json!({"name": "steps", "arguments": {}, "_meta": {"progressToken": "p1"}}),
    );
    let answer = server.response(id, Duration::from_secs(30));
    assert_eq!(structured(&answer), &json!({"n": 3}));
    // Notifications precede the response on the wire, but give the last one a moment anyway.
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let progress: Vec<_> = server
            .pending
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .cloned()
            .collect();
        if progress.len() >= 5 || Instant::now() > deadline {
            let messages: Vec<&str> = progress
                .iter()
                .filter_map(|m| m["params"]["message"].as_str())
                .collect();
            assert_eq!(
                messages,
                [
                    "entry (entry)",
                    "a (transform)",
                    "b (transform)",
                    "c (transform)",
                    "exit (exit)"
                ]
            );
            let counts: Vec<f64> = progress
                .iter()
                .filter_map(|m| m["params"]["progress"].as_f64())
                .collect();
            assert_eq!(counts, [1.0, 2.0, 3.0, 4.0, 5.0]);
            assert!(
                progress
                    .iter()
                    .all(|m| m["params"]["progressToken"] == "p1")
            );
            break;
        }
        let id = server.send_request("ping", json!({}));
        server.response(id, Duration::from_secs(5));
    }
    // Without a token, no notification.
    server.pending.clear();
    let answer = server.call("steps", json!({}));
    assert_eq!(structured(&answer), &json!({"n": 3}));
    assert!(
        !server
            .pending
            .iter()
            .any(|m| m["method"] == "notifications/progress")
    );
}

#[test]
fn a_crashed_downstream_server_is_restarted_on_next_use() {
    let mut server = Mcp::start(
        &["serve", "downstream.yaml"],
        &common::shared_dir().join("conformance/graphs"),
        &[],
    );
    let ok = server.call("failing", json!({"how": "ok"}));
    assert_eq!(structured(&ok), &json!({"received": {"alive": true}}));
    let crash = server.call("failing", json!({"how": "die"}));
    assert_eq!(crash["result"]["isError"], json!(true), "{crash}");
    let message = text(&crash);
    assert!(
        message.contains("die_node")
            && message.contains("Connection closed")
            && message.contains("mock server dying on purpose"),
        "{message}"
    );
    for _ in 0..2 {
        let again = server.call("failing", json!({"how": "ok"}));
        assert_eq!(
            structured(&again),
            &json!({"received": {"alive": true}}),
            "{again}"
        );
    }
}

#[test]
fn malformed_requests_get_errors_and_the_server_lives_on() {
    let mut server = start(None);
    let unknown = server.call("no_such_tool", json!({}));
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("Unknown tool: no_such_tool")
    );
    let bad_args = server.request(
        "tools/call",
        json!({"name": "tagged", "arguments": "not an object"}),
    );
    assert_eq!(bad_args["error"]["code"], json!(-32602), "{bad_args}");
    let no_name = server.request("tools/call", json!({"arguments": {}}));
    assert!(no_name.get("error").is_some(), "{no_name}");
    server.send(&json!("garbage"));
    let ping = server.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    let fine = server.call("tagged", json!({"tag": "still alive"}));
    assert_eq!(structured(&fine)["tag"], "still alive");
}

#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = start(None);
    let answer = server.call("tagged", json!({"tag": "x"}));
    assert_eq!(structured(&answer)["tag"], "x");
    let children = common::children_of(server.child.id());
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = server
        .wait_exit(Duration::from_secs(5))
        .expect("the server exits within 5 s of SIGTERM");
    assert!(exit.success(), "exit status {exit}");
    for pid in children {
        assert!(
            !common::process_alive(pid),
            "child {pid} outlived the server"
        );
    }
}

#[test]
fn a_graph_that_does_not_check_is_still_served_with_its_diagnostics() {
    let broken = common::root().join("compiler/tests/codes/E0205.yaml");
    let mut server = Mcp::spawn(&["serve", broken.to_str().unwrap()], &common::root(), &[]);
    let init = server.request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}));
    let instructions = init["result"]["instructions"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        instructions.contains("E0205.yaml:8:") && instructions.contains("exti"),
        "{instructions}"
    );
    server.notify("notifications/initialized", json!({}));
    let listed = server.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
    let call = server.call("t", json!({}));
    assert_eq!(call["result"]["isError"], json!(true), "{call}");
    assert!(text(&call).contains("E0205"), "{call}");
}

/// The caller's W3C trace context (`params._meta.traceparent` and `tracestate`) reaches every
/// downstream MCP request of its call, unchanged: an mcp node's and each map item's; a malformed
/// one is dropped, and a call without one sends none (docs/observability.md).
#[test]
fn the_callers_trace_context_reaches_every_downstream_request() {
    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let log = log_file("trace");
    let mut server = start(Some(&log));
    let call = |server: &mut Mcp, tool: &str, args: serde_json::Value, meta: serde_json::Value| {
        let response = server.request(
            "tools/call",
            json!({"name": tool, "arguments": args, "_meta": meta}),
        );
        assert_ne!(response["result"]["isError"], json!(true), "{response}");
    };
    call(
        &mut server,
        "tagged",
        json!({"tag": "traced"}),
        json!({"traceparent": PARENT, "tracestate": "congo=t61rcWkgMzE"}),
    );
    call(
        &mut server,
        "fanout",
        json!({}),
        json!({"traceparent": PARENT}),
    );
    call(
        &mut server,
        "tagged",
        json!({"tag": "malformed"}),
        json!({"traceparent": "00-not-a-trace-01", "tracestate": "a=b"}),
    );
    call(&mut server, "tagged", json!({"tag": "untraced"}), json!({}));
    let requests: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .filter(|m: &serde_json::Value| m["method"] == "tools/call")
        .collect();
    let meta_of = |tag: &str| {
        requests
            .iter()
            .find(|m| m["params"]["arguments"]["tag"] == tag)
            .map(|m| m["params"]["_meta"].clone())
            .unwrap_or_else(|| panic!("no downstream call tagged {tag}: {requests:?}"))
    };
    let traced = meta_of("traced");
    assert_eq!(traced["traceparent"], json!(PARENT), "{traced}");
    assert_eq!(traced["tracestate"], json!("congo=t61rcWkgMzE"), "{traced}");
    let items: Vec<&serde_json::Value> = requests
        .iter()
        .filter(|m| m["params"]["arguments"].get("n").is_some())
        .collect();
    assert_eq!(items.len(), 3, "{requests:?}");
    for item in items {
        assert_eq!(
            item["params"]["_meta"]["traceparent"],
            json!(PARENT),
            "{item}"
        );
    }
    for tag in ["malformed", "untraced"] {
        let meta = meta_of(tag);
        assert!(
            meta.get("traceparent").is_none() && meta.get("tracestate").is_none(),
            "{tag}: {meta}"
        );
    }
    let _ = std::fs::remove_file(&log);
}

/// The three messages of a session that calls the pure tool `steps` once.
fn steps_session() -> String {
    [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "mcpgraph-tests", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "steps", "arguments": {}}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect()
}

/// Reads lines until the answer to request 1, which must be `steps`'s (lines that are not JSON,
/// stderr's when it shares the pipe, are passed over).
fn steps_answer(out: impl std::io::Read) {
    use std::io::BufRead;
    for line in std::io::BufReader::new(out).lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(&line.expect("a line")) else {
            continue;
        };
        if message["id"] == 1 {
            assert_eq!(structured(&message), &json!({"n": 3}), "{message}");
            return;
        }
    }
    panic!("the server closed stdout before answering");
}

/// Whether the open file behind `fd` is in non-blocking mode (its `flags` in fdinfo, octal).
fn nonblocking(fd: &impl std::os::fd::AsRawFd) -> bool {
    let info =
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).expect("fdinfo");
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .expect("flags in fdinfo");
    flags & 0o4000 != 0
}

/// Starts `mcpgraph serve` of the lifecycle graph on the given stdio.
fn serve_on(
    stdin: impl Into<std::process::Stdio>,
    stdout: impl Into<std::process::Stdio>,
    stderr: impl Into<std::process::Stdio>,
) -> std::process::Child {
    std::process::Command::new(common::mcpgraph())
        .args(["serve", &graph()])
        .stdin(stdin)
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .expect("mcpgraph starts")
}

/// Waits for a clean exit.
fn exits_cleanly(mut child: std::process::Child) {
    match common::wait_child(&mut child, Duration::from_secs(10)) {
        Some(status) => assert!(status.success(), "{status}"),
        None => {
            let _ = child.kill();
            panic!("the server did not exit within 10 s of stdin EOF");
        }
    }
}

/// What clients give a server as stdin and stdout: pipes (Python's subprocess, Rust), a Unix
/// socket for each (Node's child_process), a file (a shell's redirection). Each serves; pipes and
/// sockets are polled in non-blocking mode while the server runs (runtime/src/stdio.rs), and the
/// mode they had is put back when it exits, for whoever shares the open file. A stdout that is
/// also stderr (`2>&1`) stays blocking: stderr's writes block.
#[test]
fn stdio_as_pipes_sockets_or_a_file_serves_and_leaves_the_mode_it_found() {
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    use std::process::Stdio;

    // Pipes; this process keeps a descriptor of each end the server gets.
    let (read_in, mut write_in) = std::io::pipe().expect("a pipe");
    let (mut read_out, write_out) = std::io::pipe().expect("a pipe");
    let (stdin, stdout) = (
        read_in.try_clone().expect("dup"),
        write_out.try_clone().expect("dup"),
    );
    let child = serve_on(read_in, write_out, Stdio::null());
    write_in
        .write_all(steps_session().as_bytes())
        .expect("write");
    steps_answer(&mut read_out);
    assert!(nonblocking(&stdin), "stdin, a pipe, is polled");
    assert!(nonblocking(&stdout), "stdout, a pipe, is polled");
    drop(write_in);
    exits_cleanly(child);
    assert!(!nonblocking(&stdin), "stdin is blocking again after exit");
    assert!(!nonblocking(&stdout), "stdout is blocking again after exit");

    // A socket pair for each, as Node gives.
    let (ours_in, theirs_in) = UnixStream::pair().expect("a socket pair");
    let (ours_out, theirs_out) = UnixStream::pair().expect("a socket pair");
    let (stdin, stdout) = (
        theirs_in.try_clone().expect("dup"),
        theirs_out.try_clone().expect("dup"),
    );
    let child = serve_on(
        OwnedFd::from(theirs_in),
        OwnedFd::from(theirs_out),
        Stdio::null(),
    );
    (&ours_in)
        .write_all(steps_session().as_bytes())
        .expect("write");
    steps_answer(&ours_out);
    assert!(nonblocking(&stdin), "stdin, a socket, is polled");
    assert!(nonblocking(&stdout), "stdout, a socket, is polled");
    ours_in
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    exits_cleanly(child);
    assert!(!nonblocking(&stdin), "stdin is blocking again after exit");
    assert!(!nonblocking(&stdout), "stdout is blocking again after exit");

    // stdout and stderr one pipe (`2>&1`): stdout stays blocking, stdin is polled.
    let (read_in, mut write_in) = std::io::pipe().expect("a pipe");
    let (mut read_out, write_out) = std::io::pipe().expect("a pipe");
    let stdout = write_out.try_clone().expect("dup");
    let child = serve_on(read_in, write_out.try_clone().expect("dup"), write_out);
    write_in
        .write_all(steps_session().as_bytes())
        .expect("write");
    steps_answer(&mut read_out);
    assert!(!nonblocking(&stdout), "stdout, also stderr, stays blocking");
    drop(write_in);
    exits_cleanly(child);

    // A file: read as before, through tokio's blocking reads.
    let file = std::env::temp_dir().join(format!("mcpgraph-session-{}.jsonl", std::process::id()));
    std::fs::write(&file, steps_session()).expect("write the session");
    let mut child = serve_on(
        std::fs::File::open(&file).expect("open"),
        Stdio::piped(),
        Stdio::null(),
    );
    steps_answer(child.stdout.take().expect("stdout"));
    exits_cleanly(child);
    let _ = std::fs::remove_file(file);
}
