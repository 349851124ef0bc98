//! Graphs over real MCP servers from npm (installed by scripts/test-setup).

use crate::common;

use crate::common::{Mcp, structured, text};
use serde_json::json;

#[test]
fn count_files_example_against_the_real_filesystem_server() {
    let dir = tempdir("count-files");
    for name in ["a.txt", "b.txt", "c.md"] {
        std::fs::write(dir.join(name), "x").unwrap();
    }
    std::fs::create_dir(dir.join("sub")).unwrap();
    let example = common::root().join("examples/count_files.yaml");
    let root = dir.to_string_lossy().to_string();
    // npx resolves the package installed in tests/support.
    let mut server = Mcp::start(
        &["serve", example.to_str().unwrap()],
        &common::root().join("tests/support"),
        &[("FS_ROOT", &root)],
    );
    let listed = server.request("tools/list", json!({}));
    assert_eq!(listed["result"]["tools"][0]["name"], "count_files");
    let answer = server.call("count_files", json!({"directory": root}));
    assert_eq!(structured(&answer), &json!({"count": 4}), "{answer}");
    assert_eq!(text(&answer), r#"{"count":4}"#);

    // Outside the served root: the filesystem server's own isError becomes ours, naming the node.
    let denied = server.call("count_files", json!({"directory": "/etc"}));
    assert_eq!(denied["result"]["isError"], json!(true), "{denied}");
    let message = text(&denied);
    assert!(
        message.contains("list_directory_node") && message.contains("outside allowed directories"),
        "{message}"
    );
}

#[test]
fn a_graph_over_the_real_everything_server() {
    let graph = common::root().join("tests/graphs/everything.yaml");
    let path = common::path_with_test_servers();
    let mut server = Mcp::start(
        &["serve", graph.to_str().unwrap()],
        &common::root(),
        &[
            ("PATH", &path),
            ("MCPGRAPH_TEST_GREETING", "expanded at run time"),
        ],
    );
    let answer = server.call("sum_and_echo", json!({"a": 2, "b": 3.5}));
    assert_eq!(
        structured(&answer),
        &json!({"total": 5.5, "echo": "Echo: total is 5.5"}),
        "{answer}"
    );
    let env = server.call("child_env", json!({}));
    assert_eq!(
        structured(&env),
        &json!({"greeting": "expanded at run time"}),
        "{env}"
    );
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
