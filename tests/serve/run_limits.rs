//! Attacks on a served graph's memory and time (issue 11): each reproduces what took a server
//! down or stalled it, through a real `mcpgraph serve` over stdio, and asserts what the client
//! sees: the attacking call fails with the limit's error, the server lives, and other calls
//! answer meanwhile.

use crate::common;

use crate::common::{Mcp, structured, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn start() -> Mcp {
    let graph = common::root().join("tests/graphs/run_limits.yaml");
    Mcp::start(&["serve", &graph.to_string_lossy()], &common::root(), &[])
}

fn call(server: &mut Mcp, tool: &str, args: Value) -> u64 {
    server.send_request("tools/call", json!({"name": tool, "arguments": args}))
}

/// A tool call that keeps a core busy, once it has started: its entry node's progress
/// notification has arrived, so the heavy node is running.
fn start_spin(server: &mut Mcp, token: &str) -> u64 {
    server.send_request(
        "tools/call",
        json!({"name": "spin", "arguments": {"rounds": 100000}, "_meta": {"progressToken": token}}),
    )
}

fn wait_started(server: &mut Mcp, token: &str) {
    let started = |m: &Value| {
        m["method"] == "notifications/progress" && m["params"]["progressToken"] == token
    };
    // A trivial call answered after the notification arrived pushes it into `pending`.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server.pending.iter().any(started) {
        assert!(Instant::now() < deadline, "spin {token} never started");
        let id = call(server, "trivial", json!({}));
        server.response(id, Duration::from_secs(30));
    }
}

fn cancel(server: &mut Mcp, id: u64) {
    server.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "test"}),
    );
}

/// The server process's CPU time so far (user + system), from /proc.
fn cpu_time(server: &Mcp) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", server.child.id())).unwrap();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    // Fields 14 and 15 of stat(5), counted after the command's closing parenthesis.
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// A trivial call answers, and within 2 s, beside the busy runs described by `beside`.
fn trivial_answers_soon(server: &mut Mcp, beside: &str) {
    let asked = Instant::now();
    let id = call(server, "trivial", json!({}));
    assert_eq!(
        structured(&server.response(id, Duration::from_secs(10))),
        &json!({"ok": true})
    );
    let latency = asked.elapsed();
    println!("a trivial call beside {beside} answered in {latency:?}");
    assert!(
        latency < Duration::from_secs(2),
        "a trivial call waited {latency:?}"
    );
}

/// After cancellations: the runs stop within the watchdog's poll, then the process is idle
/// while trivial calls keep answering. (The window is an observation, not a synchronisation: a
/// run still going would use a core all of it.)
fn falls_idle_after_cancelling(server: &mut Mcp) {
    // A call sent after the cancellations is read after them.
    let id = call(server, "trivial", json!({}));
    server.response(id, Duration::from_secs(10));
    let before = cpu_time(server);
    let window = Duration::from_millis(1000);
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        let id = call(server, "trivial", json!({}));
        assert_eq!(
            structured(&server.response(id, Duration::from_secs(10))),
            &json!({"ok": true})
        );
        std::thread::park_timeout(Duration::from_millis(100));
    }
    let used = cpu_time(server) - before;
    println!("CPU used in the {window:?} after cancelling: {used:?}");
    assert!(
        used < window / 2,
        "a cancelled run is still running: {used:?} of CPU in {window:?}"
    );
}

fn assert_size_error(response: &Value, node: &str) {
    let message = text(response);
    assert_eq!(response["result"]["isError"], json!(true), "{response}");
    assert!(
        message.contains(&format!("node \"{node}\""))
            && message
                .contains("Execution limit exceeded: maximum value size (67108864 bytes) reached"),
        "{message}"
    );
}

/// `$pad("x", 2^32)` used to pass 4 GiB and abort the process with every call in flight; now it
/// fails at once with the size limit, and a call sent with it answers.
#[test]
fn a_huge_pad_fails_with_the_size_limit_and_a_concurrent_call_answers() {
    let mut server = start();
    let started = Instant::now();
    let pad = call(&mut server, "pad", json!({"n": 4294967296u64}));
    let trivial = call(&mut server, "trivial", json!({}));
    assert_eq!(
        structured(&server.response(trivial, Duration::from_secs(10))),
        &json!({"ok": true})
    );
    let response = server.response(pad, Duration::from_secs(10));
    assert_size_error(&response, "padded");
    assert!(text(&response).contains("$pad"), "{response}");
    // A billion, which ran 5 s whatever the time limit: the limit too.
    let pad = call(&mut server, "pad", json!({"n": 1e9}));
    assert_size_error(&server.response(pad, Duration::from_secs(10)), "padded");
    println!("two huge pads refused in {:?}", started.elapsed());
    // Under the limit, as before.
    let pad = call(&mut server, "pad", json!({"n": 1000}));
    assert_eq!(text(&server.response(pad, Duration::from_secs(10))), "1000");
}

/// `$replace` of every character of 100 KB by 100 KB (10 GB).
#[test]
fn a_quadratic_replace_fails_with_the_size_limit() {
    let mut server = start();
    let s = "x".repeat(100_000);
    let id = call(&mut server, "replace", json!({"s": s, "t": s}));
    assert_size_error(&server.response(id, Duration::from_secs(10)), "replaced");
    let id = call(&mut server, "replace", json!({"s": "axbx", "t": "yy"}));
    assert_eq!(text(&server.response(id, Duration::from_secs(10))), "6");
}

/// A loop doubling a string once per node stops at the node whose output passes the limit.
#[test]
fn a_string_doubled_from_node_to_node_stops_at_the_size_limit() {
    let mut server = start();
    let id = call(&mut server, "double_loop", json!({}));
    assert_size_error(&server.response(id, Duration::from_secs(20)), "grow");
    let id = call(&mut server, "trivial", json!({}));
    assert_eq!(
        structured(&server.response(id, Duration::from_secs(10))),
        &json!({"ok": true})
    );
}

/// Doubling inside one expression (a recursive function) stops at the `&` that passes the limit.
#[test]
fn a_string_doubled_by_recursion_stops_at_the_size_limit() {
    let mut server = start();
    let id = call(&mut server, "double_recursion", json!({"n": 40}));
    let response = server.response(id, Duration::from_secs(20));
    assert_size_error(&response, "grow");
    assert!(text(&response).contains("the result of &"), "{response}");
    let id = call(&mut server, "double_recursion", json!({"n": 10}));
    assert_eq!(text(&server.response(id, Duration::from_secs(10))), "1024");
}

/// `$distinct` compared every pair of items and looked at no time limit: numbers now take
/// linear time, and a quadratic comparison of objects stops at the time limit.
#[test]
fn distinct_is_linear_for_numbers_and_stops_at_the_time_limit_for_objects() {
    let mut server = start();
    let id = call(
        &mut server,
        "distinct",
        json!({"n": 1_000_000, "m": 1000, "objects": false}),
    );
    assert_eq!(text(&server.response(id, Duration::from_secs(10))), "1000");
    let id = call(
        &mut server,
        "distinct",
        json!({"n": 5000, "m": 1000, "objects": true}),
    );
    assert_eq!(text(&server.response(id, Duration::from_secs(10))), "1000");
    // All different: 5 × 10^9 comparisons, minutes of work.
    let started = Instant::now();
    let id = call(
        &mut server,
        "distinct",
        json!({"n": 100_000, "m": 100_000, "objects": true}),
    );
    let trivial = call(&mut server, "trivial", json!({}));
    assert_eq!(
        structured(&server.response(trivial, Duration::from_secs(10))),
        &json!({"ok": true})
    );
    let response = server.response(id, Duration::from_secs(30));
    assert!(
        text(&response)
            .contains("Execution limit exceeded: maximum execution time (4000ms) reached"),
        "{response}"
    );
    println!(
        "a quadratic $distinct stopped after {:?}",
        started.elapsed()
    );
}

/// As many CPU-heavy calls as the machine has cores (at least two) no longer stall a trivial
/// call; cancelling them all stops them all (the process's CPU use falls to nothing), and none
/// answers.
#[test]
fn busy_cores_stall_no_call_and_cancellation_stops_every_run() {
    let mut server = start();
    let cores = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .max(2);
    let spins: Vec<(u64, String)> = (0..cores)
        .map(|i| {
            let token = format!("spin-{i}");
            (start_spin(&mut server, &token), token)
        })
        .collect();
    for (_, token) in &spins {
        wait_started(&mut server, token);
    }
    trivial_answers_soon(&mut server, &format!("{cores} busy runs"));

    for (id, _) in &spins {
        cancel(&mut server, *id);
    }
    falls_idle_after_cancelling(&mut server);
    for (id, _) in &spins {
        assert!(
            !server.pending.iter().any(|m| m["id"] == json!(id)),
            "the cancelled call {id} answered"
        );
    }
}

/// A tool whose runs were short runs inline, on the worker that read the call
/// (runtime/src/placement.rs); when one of its runs turns out long, it holds that worker only:
/// other calls answer, its cancellation is read and stops it, and it never answers. (No progress
/// token: a call that asks for progress is not run inline.) That it ran inline is in the
/// server's debug log (`mcpgraph::placement`).
#[test]
fn a_short_tools_run_turning_long_stalls_nothing_and_is_cancelled() {
    let log = std::env::temp_dir().join(format!(
        "mcpgraph-placement-stderr-{}.log",
        std::process::id()
    ));
    let graph = common::root().join("tests/graphs/run_limits.yaml");
    let mut server = Mcp::spawn_with_stderr(
        &["serve", &graph.to_string_lossy()],
        &common::root(),
        &[("MCPGRAPH_LOG", "warn,mcpgraph::placement=debug")],
        std::process::Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let init = server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    server.notify("notifications/initialized", json!({}));
    let inline_spins = || {
        std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter(|l| l.contains("a run inline") && l.contains("tool=\"spin\""))
            .count()
    };
    // Short runs: the first goes to the blocking pool, the next ones inline (a run that a busy
    // machine made take a millisecond sends the next to the pool again: tries, bounded).
    let short_spin = |server: &mut Mcp| {
        let id = call(server, "spin", json!({"rounds": 0}));
        let response = server.response(id, Duration::from_secs(10));
        assert_eq!(response["result"]["isError"], json!(false), "{response}");
    };
    let mut tries = 0;
    while inline_spins() < 2 {
        tries += 1;
        assert!(tries <= 50, "no short spin ran inline");
        short_spin(&mut server);
    }
    let inline_before = inline_spins();
    let before_spin = cpu_time(&server);
    let spin = call(&mut server, "spin", json!({"rounds": 100000}));
    // Running once the process has used a third of a second of CPU since (trivial calls
    // answered meanwhile cost a thousandth of that).
    let deadline = Instant::now() + Duration::from_secs(30);
    while cpu_time(&server) - before_spin < Duration::from_millis(300) {
        assert!(Instant::now() < deadline, "the spin never ran");
        let asked = Instant::now();
        let id = call(&mut server, "trivial", json!({}));
        server.response(id, Duration::from_secs(30));
        // The worker the run holds may have been the one reading stdin (placement.rs `nudge`).
        let waited = asked.elapsed();
        assert!(
            waited < Duration::from_secs(2),
            "a trivial call waited {waited:?} beside the long inline run"
        );
    }
    // The line is written before the run starts, and the run has used CPU since.
    assert_eq!(
        inline_spins(),
        inline_before + 1,
        "the long spin ran inline: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    trivial_answers_soon(&mut server, "a long inline run");
    cancel(&mut server, spin);
    falls_idle_after_cancelling(&mut server);
    let answer = server.pending.iter().find(|m| m["id"] == json!(spin));
    assert!(answer.is_none(), "the cancelled call answered: {answer:?}");
    // The long run marked the tool: the next spin goes to the pool, and, short there, lets the
    // one after it inline again.
    short_spin(&mut server);
    assert_eq!(
        inline_spins(),
        inline_before + 1,
        "after a long run the tool's next run goes to the pool"
    );
    let mut tries = 0;
    while inline_spins() < inline_before + 2 {
        tries += 1;
        assert!(tries <= 50, "the tool never went inline again");
        short_spin(&mut server);
    }
    let _ = std::fs::remove_file(&log);
}
