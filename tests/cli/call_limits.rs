//! `mcpgraph call` ends when its run does, whatever its downstream servers are doing: a map that
//! passes `maxValueBytes` with large replies still on their way fails with the limit and exits,
//! its downstream server stopped (contract §5). It used to wait for ever on a child blocked
//! writing a reply nobody read any more.

use crate::common;
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The longest the call may take: seconds with a bounded shutdown, for ever without one.
const OUTER_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn a_map_past_the_value_limit_with_replies_in_flight_exits_and_stops_its_server() {
    let graph = common::root().join("tests/graphs/call_limits.yaml");
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    // A file, not a pipe: nobody reads a pipe while the call is waited for.
    let stderr_path = std::env::temp_dir().join(format!(
        "mcpgraph-call-limits-{}.stderr",
        std::process::id()
    ));
    let stderr = std::fs::File::create(&stderr_path).expect("a file for the call's stderr");
    let mut call = Command::new(common::mcpgraph())
        .arg("call")
        .arg(&graph)
        .args(["gather", "{}"])
        .env("MCPGRAPH_MOCK", &mock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("mcpgraph starts");
    // The downstream children, gathered while the call runs: once it has exited they are no
    // longer its children.
    let mut children = BTreeSet::new();
    let deadline = Instant::now() + OUTER_LIMIT;
    let status = loop {
        children.extend(common::children_of(call.id()));
        if let Some(status) = call.try_wait().expect("the call can be waited for") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = call.kill();
            let _ = call.wait();
            for pid in &children {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            panic!(
                "`mcpgraph call` was still running after {OUTER_LIMIT:?}: its shutdown waits on the downstream server (children {children:?})"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_file(&stderr_path);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: tool \"gather\", node \"all\" (map, limit): Execution limit exceeded: maximum value size (8388608 bytes) reached"
        ),
        "{stderr}"
    );
    assert!(
        !children.is_empty(),
        "the mock server never ran as a child of the call"
    );
    // A child killed by a signal may still be dying as the call exits: give the kernel a moment.
    let dead_by = Instant::now() + Duration::from_secs(5);
    while children.iter().any(|&pid| common::process_alive(pid)) && Instant::now() < dead_by {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = children
        .iter()
        .copied()
        .filter(|&pid| common::process_alive(pid))
        .collect();
    assert!(
        left.is_empty(),
        "downstream processes outlived the call: {left:?}"
    );
}
