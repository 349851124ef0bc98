//! A real client: the Python `mcp` package (installed by scripts/test-setup) over stdio.

mod common;

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
