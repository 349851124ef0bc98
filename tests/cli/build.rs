//! Ahead-of-time equivalence: servers from `mcpgraph build` (statically linked: the stricter
//! build) answer the shared corpus and our extensions' cases (`tests/conformance`) exactly as
//! `serve` does, and hostile tool names build.
//! All builds share one target directory (`target/mcpgraph-test-cache`). The `graph!` side of
//! the same corpus is the workspace member `tests/graph-macro`, compiled by the workspace build.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn build(graph: &Path, out: &Path, flags: &[&str]) {
    let status = Command::new(common::mcpgraph())
        .arg("build")
        .arg(graph)
        .arg("-o")
        .arg(out)
        .args(flags)
        // The cache and the cargo settings every test shares (opt-level 1: see there).
        .envs(common::SHARED_BUILD_ENV.iter().copied())
        .status()
        .expect("mcpgraph runs");
    assert!(
        status.success(),
        "mcpgraph build {} failed",
        graph.display()
    );
}

/// The shared corpus runner, for graph `name` of `dir`, against a server that ignores the graph
/// argument.
fn corpus(dir: &Path, name: &str, binary: &Path) {
    let binary = binary.to_string_lossy();
    let dir = dir.to_string_lossy();
    common::run_shared_runner(
        "run-conformance.py",
        &[
            "--dir",
            &dir,
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

/// The names of the cases files (`NAME.cases.json`) of `dir`, sorted.
fn extension_case_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("tests/conformance")
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".cases.json"))
                .map(str::to_owned)
        })
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no cases files in {}", dir.display());
    names
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
        corpus(
            &common::shared_dir().join("conformance/graphs"),
            &name,
            &binary,
        );
    }
    // Tool and property names that collide with generated items, with keywords or with each
    // other once converted: the generated crate compiles under `#![deny(warnings)]`.
    let hostile = bins.join("hostile_names-static");
    build(
        &common::root().join("tests/graphs/hostile_names.yaml"),
        &hostile,
        &["--static"],
    );
    corpus(
        &common::root().join("tests/graphs"),
        "hostile_names",
        &hostile,
    );
    // The extensions' cases (tests/conformance): every cases file there runs against ONE
    // static build of `extensions.yaml` (each further build costs CI about a minute), so each
    // of its graphs must be that file (the others are symlinks, run with other client
    // capabilities).
    let conformance = common::root().join("tests/conformance");
    let extensions = conformance.join("extensions.yaml");
    let built = bins.join("extensions-static");
    build(&extensions, &built, &["--static"]);
    for name in extension_case_files(&conformance) {
        let graph = conformance.join(format!("{name}.yaml"));
        assert_eq!(
            std::fs::canonicalize(&graph).ok(),
            std::fs::canonicalize(&extensions).ok(),
            "tests/conformance/{name}.yaml must be extensions.yaml (a symlink to it): put new \
             tools into extensions.yaml so that one static build serves every cases file"
        );
        corpus(&conformance, &name, &built);
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

/// The generated crates of an example and of the hostile-names fixture, as committed in
/// `tests/snapshots/` (regenerate with `MCPGRAPH_BLESS=1`). The static build above compiles the
/// generated code under `#![deny(warnings)]`.
#[test]
fn generated_code_snapshot() {
    for (graph, snapshot_dir) in [
        ("examples/loop.yaml", "loop"),
        ("tests/graphs/hostile_names.yaml", "hostile_names"),
    ] {
        let out = common::root()
            .join("target/emit-snapshot")
            .join(snapshot_dir);
        let _ = std::fs::remove_dir_all(&out);
        let status = Command::new(common::mcpgraph())
            .current_dir(common::root())
            .args(["emit", graph, "-o"])
            .arg(&out)
            .status()
            .expect("mcpgraph runs");
        assert!(status.success());
        for file in ["src/server.rs", "src/main.rs", "Cargo.toml"] {
            let got = std::fs::read_to_string(out.join(file))
                .expect("emitted")
                .replace(&out.to_string_lossy().into_owned(), "OUT");
            let snapshot = common::root()
                .join("tests/snapshots")
                .join(snapshot_dir)
                .join(file.replace('/', "_"));
            if std::env::var_os("MCPGRAPH_BLESS").is_some() {
                std::fs::create_dir_all(snapshot.parent().unwrap()).unwrap();
                std::fs::write(&snapshot, &got).unwrap();
            }
            let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
            assert_eq!(
                got, expected,
                "{snapshot_dir}/{file} changed: run MCPGRAPH_BLESS=1 cargo test --release --test cli build::"
            );
        }
        let lock = std::fs::read_to_string(out.join("Cargo.lock")).unwrap();
        assert_eq!(
            lock,
            std::fs::read_to_string(common::root().join("templates/server/Cargo.lock")).unwrap()
        );
    }
}
