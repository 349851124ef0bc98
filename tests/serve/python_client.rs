//! A real client: the Python `mcp` package (installed by scripts/test-setup) over stdio.

use crate::common;

#[test]
fn python_mcp_client_lists_and_calls_tools() {
    let python = common::root().join("target/test-venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/test-setup first: {} is missing",
        python.display()
    );
    let output = std::process::Command::new(python)
        .arg(common::root().join("tests/support/python_client.py"))
        .arg(common::mcpgraph())
        .arg(common::root().join("examples/greeting_next.yaml"))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "python client failed:\n{stdout}\n{stderr}"
    );
}

/// The same client answering an `ask` node (MCP elicitation): accepted, the real filesystem
/// server writes the file; declined, it does not.
#[test]
fn python_mcp_client_answers_an_ask() {
    let python = common::root().join("target/test-venv/bin/python");
    assert!(python.exists(), "run scripts/test-setup first");
    let dir = std::env::temp_dir().join(format!("mcpgraph-ask-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.canonicalize().unwrap();
    let path = dir.join("note.txt");
    // In tests/support, npx finds the filesystem server scripts/test-setup installed.
    let output = std::process::Command::new(python)
        .current_dir(common::root().join("tests/support"))
        .env("FS_ROOT", &dir)
        .arg(common::root().join("tests/support/python_elicitation.py"))
        .arg(common::mcpgraph())
        .arg(common::root().join("examples/confirm_ask.yaml"))
        .arg(&path)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "python client failed:\n{stdout}\n{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
