//! A downstream server's start is shared by the calls that need it: calls that give up while it
//! starts (their node's `timeoutMs` ends them) leave that one start going, and the next call
//! takes it, so the server is started once however many calls were cancelled on the way.

use mcpgraph_compiler::{SourceFile, compile};
use mcpgraph_runtime::{Engine, FailureKind};
use serde_json::{Map, json};
use std::path::{Path, PathBuf};

fn mock_server() -> PathBuf {
    let shared = match std::env::var_os("MCPGRAPH_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    shared.join("tools/mock-mcp-server.py")
}

/// A graph whose server `slow` appends a line to `starts` each time it is started, then waits
/// until `gate` exists before it becomes the mock server. `hurried` gives up on it after 200 ms;
/// `patient` waits (up to the server's 60 s).
fn graph(starts: &Path, gate: &Path) -> mcpgraph_compiler::Graph {
    let text = format!(
        r#"version: "1.0"
server: {{ name: t, version: "1" }}
mcpServers:
  slow:
    command: sh
    args: ["-c", "echo started >> '{starts}'; while [ ! -e '{gate}' ]; do sleep 0.01; done; exec python3 '{mock}'"]
    timeoutMs: 60000
tools:
  - name: hurried
    description: gives up on the server after 200 ms
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: call }}
      - {{ id: call, type: mcp, server: slow, tool: echo, args: {{ n: 1 }}, timeoutMs: 200, next: exit }}
      - {{ id: exit, type: exit }}
  - name: patient
    description: waits for the server
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: call }}
      - {{ id: call, type: mcp, server: slow, tool: echo, args: {{ n: 2 }}, next: exit }}
      - {{ id: exit, type: exit }}
"#,
        starts = starts.display(),
        gate = gate.display(),
        mock = mock_server().display(),
    );
    let checked = compile(&SourceFile::new("t.yaml", text), None);
    checked
        .graph
        .unwrap_or_else(|| panic!("graph does not check: {:?}", checked.diagnostics))
}

/// Five rounds of four concurrent calls, each round cancelled (by its timeout) while the server
/// is still starting: the server is started once, and that start serves the next call. Before
/// the start was shared, each round started another child (six or more in all).
#[test]
fn calls_cancelled_while_the_server_starts_share_one_start() {
    let dir = std::env::temp_dir().join(format!("mcpgraph-shared-start-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (starts, gate) = (dir.join("starts.log"), dir.join("gate"));
    let engine = Engine::load(graph(&starts, &gate)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    for round in 0..5 {
        let calls = (0..4).map(|_| engine.call("hurried", Map::new(), Default::default(), None));
        for outcome in runtime.block_on(futures::future::join_all(calls)) {
            let error = outcome.expect_err("the server cannot answer before its gate opens");
            assert_eq!(error.kind(), FailureKind::Timeout, "round {round}: {error}");
        }
    }
    std::fs::write(&gate, "").unwrap();
    let answer = runtime
        .block_on(engine.call("patient", Map::new(), Default::default(), None))
        .expect("the start the cancelled calls left serves this call");
    assert_eq!(answer, json!({"received": {"n": 2}}));
    let started = std::fs::read_to_string(&starts).unwrap_or_default();
    assert_eq!(
        started.lines().count(),
        1,
        "the server was started once per line:\n{started}"
    );
    runtime.block_on(engine.shutdown());
    let _ = std::fs::remove_dir_all(&dir);
}
