//! Attacks on a served graph's memory and time (issue 11): each reproduces what took a server
//! down or stalled it, through a real `mcpgraph serve` over stdio, and asserts what the client
//! sees: the attacking call fails with the limit's error, the server lives, and other calls
//! answer meanwhile.

mod common;

use common::{Mcp, structured, text};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn start() -> Mcp {
    let graph = common::root().join("tests/graphs/run_limits.yaml");
    Mcp::start(&["serve", &graph.to_string_lossy()], &common::root(), &[])
}

fn call(server: &mut Mcp, tool: &str, args: Value) -> u64 {
    server.send_request("tools/call", json!({"name": tool, "arguments": args}))
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
