//! Ahead-of-time equivalence: servers from `mcpgraph build` (statically linked: the stricter
//! build) and a `graph!` program answer the shared corpus exactly as `serve` does.
//! All builds share one target directory (`target/mcpgraph-test-cache`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn cache() -> PathBuf {
    common::root().join("target/mcpgraph-test-cache")
}

fn build(graph: &Path, out: &Path, flags: &[&str]) {
    let status = Command::new(common::mcpgraph())
        .arg("build")
        .arg(graph)
        .arg("-o")
        .arg(out)
        .args(flags)
        .env("MCPGRAPH_CACHE_DIR", cache())
        .status()
        .expect("mcpgraph runs");
    assert!(
        status.success(),
        "mcpgraph build {} failed",
        graph.display()
    );
}

/// The shared corpus runner, for one graph, against a server that ignores the graph argument.
fn corpus(name: &str, binary: &Path) {
    let binary = binary.to_string_lossy();
    common::run_shared_runner(
        "run-conformance.py",
        &[
            "--only",
            name,
            "--",
            "sh",
            "-c",
            "exec \"$0\"",
            &binary,
            "{yaml}",
        ],
    );
}

fn corpus_graphs() -> Vec<(String, PathBuf)> {
    let dir = common::shared_dir().join("conformance/graphs");
    let mut graphs: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("the shared graph corpus")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            (
                p.file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                p,
            )
        })
        .collect();
    graphs.sort();
    graphs
}

#[test]
fn static_built_servers_answer_the_whole_corpus() {
    let bins = common::root().join("target/mcpgraph-test-bins");
    for (name, graph) in corpus_graphs() {
        let binary = bins.join(format!("{name}-static"));
        build(&graph, &binary, &["--static"]);
        // Checked independently of mcpgraph's own verification: ldd knows a static binary.
        let ldd = Command::new("ldd").arg(&binary).output().expect("ldd runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&ldd.stdout),
            String::from_utf8_lossy(&ldd.stderr)
        );
        assert!(
            said.contains("not a dynamic executable") || said.contains("statically linked"),
            "{name}: ldd says {said}"
        );
        // The corpus's downstream graphs start the mock relative to the graph's directory,
        // which the runner makes the working directory: the same as for serve.
        corpus(&name, &binary);
    }
    let binary = bins.join("transforms-static");
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .expect("runs");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("transforms 1.0.0 (mcpgraph {})", env!("CARGO_PKG_VERSION"))
    );
    let help = Command::new(&binary).arg("--help").output().expect("runs");
    assert!(String::from_utf8_lossy(&help.stdout).contains("-m, --mcp <FILE>"));
    let bad = Command::new(&binary).arg("--bogus").output().expect("runs");
    assert_eq!(bad.status.code(), Some(2));
}

/// A program embedding a corpus graph with `graph!` and serving it over stdio.
#[test]
fn a_graph_macro_program_answers_the_corpus() {
    let dir = common::root().join("target/graph-macro-program");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let graph = common::shared_dir().join("conformance/graphs/switches_next.yaml");
    let graph = std::fs::canonicalize(&graph).expect("the corpus graph");
    let manifest = format!(
        "[package]\nname = \"graph-macro-program\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\nmcpgraph-runtime = {{ path = {:?} }}\ntokio = {{ version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }}\n\n[workspace]\n\n# As the workspace's, so the runtime the workspace compiled is reused.\n[profile.release]\ndebug = \"line-tables-only\"\n",
        common::root().join("runtime").to_string_lossy()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    // The workspace's versions, so the build reuses what the workspace compiled.
    std::fs::copy(common::root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let main = format!(
        "mcpgraph_runtime::graph!({:?});\n\n#[tokio::main]\nasync fn main() -> Result<(), String> {{\n    Graph::new()?.serve_stdio().await\n}}\n",
        graph.to_string_lossy()
    );
    std::fs::write(dir.join("src/main.rs"), main).unwrap();
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(common::root().join("target"))
        .status()
        .expect("cargo runs");
    assert!(status.success());
    corpus(
        "switches_next",
        &common::root().join("target/release/graph-macro-program"),
    );
}

/// The generated module of an example, as committed in `tests/snapshots/` (regenerate with
/// `MCPGRAPH_BLESS=1`). The builds above compile generated code under `#![deny(warnings)]`.
#[test]
fn generated_code_snapshot() {
    let out = common::root().join("target/emit-snapshot");
    let _ = std::fs::remove_dir_all(&out);
    let status = Command::new(common::mcpgraph())
        .current_dir(common::root())
        .args(["emit", "examples/loop.yaml", "-o"])
        .arg(&out)
        .status()
        .expect("mcpgraph runs");
    assert!(status.success());
    for file in ["src/server.rs", "src/main.rs", "Cargo.toml"] {
        let got = std::fs::read_to_string(out.join(file))
            .expect("emitted")
            .replace(&out.to_string_lossy().into_owned(), "OUT");
        let snapshot = common::root()
            .join("tests/snapshots/loop")
            .join(file.replace('/', "_"));
        if std::env::var_os("MCPGRAPH_BLESS").is_some() {
            std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
            std::fs::write(&snapshot, &got).unwrap();
        }
        let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
        assert_eq!(
            got, expected,
            "{file} changed: run MCPGRAPH_BLESS=1 cargo test --test build"
        );
    }
    let lock = std::fs::read_to_string(out.join("Cargo.lock")).unwrap();
    assert_eq!(
        lock,
        std::fs::read_to_string(common::root().join("templates/server/Cargo.lock")).unwrap()
    );
}
