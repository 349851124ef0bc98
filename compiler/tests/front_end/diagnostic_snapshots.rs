//! One fixture per diagnostic code (`tests/codes/CODE.yaml`): it must produce that code, and its
//! rendering (plain, fixed width) must match `tests/codes/CODE.stderr`.
//! A fixture may have an MCP JSON file (`CODE.mcp.json`, as `-m`) and a lock file
//! (`CODE.lock.json`, as the lock beside the graph) next to it.
//! `MCPGRAPH_BLESS=1 cargo test` rewrites the snapshots after a deliberate change.

use mcpgraph_compiler::Code;
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{SourceFile, compile_with};
use std::path::Path;

#[test]
fn every_code_has_a_fixture_that_produces_it() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/codes");
    let bless = std::env::var_os("MCPGRAPH_BLESS").is_some();
    let mut failures = Vec::new();
    for &code in Code::ALL {
        let rendered = if code == Code::E0003 {
            // Relative (tests run in the crate directory), so the snapshot holds no machine path.
            let missing = Path::new("tests/codes/no-such-file.yaml");
            let d = SourceFile::read(missing).expect_err("the file does not exist");
            assert_eq!(d.code, Code::E0003);
            render::human(&d, &SourceFile::new("no-such-file.yaml", ""), Style::PLAIN)
        } else {
            let path = dir.join(format!("{code}.yaml"));
            let Ok(text) = std::fs::read_to_string(&path) else {
                failures.push(format!("{code}: no fixture {}", path.display()));
                continue;
            };
            let file = SourceFile::new(format!("{code}.yaml"), text);
            let mcp = std::fs::read_to_string(dir.join(format!("{code}.mcp.json")))
                .ok()
                .map(|t| SourceFile::new(format!("{code}.mcp.json"), t));
            let lock = std::fs::read_to_string(dir.join(format!("{code}.lock.json")))
                .ok()
                .map(|t| SourceFile::new(format!("{code}.lock.json"), t));
            let checked = compile_with(&file, mcp.as_ref(), lock.as_ref());
            if !checked.diagnostics.iter().any(|d| d.code == code) {
                let got: Vec<&str> = checked
                    .diagnostics
                    .iter()
                    .map(|d| d.code.as_str())
                    .collect();
                failures.push(format!("{code}: the fixture produced {got:?}"));
            }
            render::human_all(&checked, &file, Style::PLAIN)
        };
        let snapshot = dir.join(format!("{code}.stderr"));
        match std::fs::read_to_string(&snapshot) {
            Ok(expected) if expected == rendered => {}
            _ if bless => std::fs::write(&snapshot, &rendered).expect("write snapshot"),
            Ok(expected) => failures.push(format!(
                "{code}: rendering changed\n--- expected\n{expected}\n--- got\n{rendered}"
            )),
            Err(_) => failures.push(format!(
                "{code}: no snapshot {} (run with MCPGRAPH_BLESS=1)",
                snapshot.display()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// `docs/diagnostics.md` lists exactly the codes of the catalogue (regenerated with MCPGRAPH_BLESS=1).
#[test]
fn diagnostics_catalogue_doc_is_current() {
    let mut text = String::from(
        "# Diagnostics\n\nEvery problem `mcpgraph check` reports has a stable code: `E` for errors (they stop `build`\nand `serve` from running the graph), `W` for warnings (`check --deny-warnings` fails on them).\nEach code has a fixture and its rendering under `compiler/tests/codes/`.\n\n| code | meaning |\n|---|---|\n",
    );
    for code in Code::ALL {
        let meaning = code.summary();
        text.push_str(&format!(
            "| [{code}](../compiler/tests/codes/{code}.stderr) | {meaning} |\n"
        ));
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/diagnostics.md");
    if std::env::var_os("MCPGRAPH_BLESS").is_some() {
        std::fs::write(&path, &text).expect("write docs/diagnostics.md");
    }
    let current = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        current, text,
        "docs/diagnostics.md is stale: run MCPGRAPH_BLESS=1 cargo test"
    );
}
