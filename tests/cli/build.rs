//! Ahead-of-time equivalence: servers from `mcpgraph build` (from the stub, and from cargo with
//! `--native`, dynamic and static) answer the shared corpus and our extensions' cases
//! (`tests/conformance`) exactly as `serve` does, and hostile tool names build. The stub's
//! refusals and a damaged server's messages are in `stub.rs`.
//! All cargo builds share one target directory (`target/mcpgraph-test-cache`). The `graph!`
//! side of the same corpus is the workspace member `tests/graph-macro`, compiled by the
//! workspace build.

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

/// A server of `graph` at `out`, from the stub, with nothing but mcpgraph: no cargo, no rustc
/// on PATH (and no `CARGO` for a child to find one by).
pub(crate) fn build_from_stub(graph: &Path, out: &Path, flags: &[&str]) -> std::process::Output {
    Command::new(common::mcpgraph())
        .arg("build")
        .arg(graph)
        .arg("-o")
        .arg(out)
        .args(flags)
        .env("PATH", "/nonexistent")
        .env_remove("CARGO")
        .env_remove("RUSTC")
        .envs(common::SHARED_BUILD_ENV.iter().copied())
        .output()
        .expect("mcpgraph runs")
}

pub(crate) fn built_from_stub(graph: &Path, out: &Path, flags: &[&str]) {
    let output = build_from_stub(graph, out, flags);
    assert!(
        output.status.success(),
        "mcpgraph build {} failed: {}",
        graph.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Every graph case `serve` passes, against servers built from the stub (the default build).
#[test]
fn stub_built_servers_answer_the_whole_corpus() {
    let bins = common::root().join("target/mcpgraph-test-bins");
    for (name, graph) in corpus_graphs() {
        let binary = bins.join(&name);
        built_from_stub(&graph, &binary, &[]);
        corpus(
            &common::shared_dir().join("conformance/graphs"),
            &name,
            &binary,
        );
    }
    let hostile = bins.join("hostile_names");
    built_from_stub(
        &common::root().join("tests/graphs/hostile_names.yaml"),
        &hostile,
        &[],
    );
    corpus(
        &common::root().join("tests/graphs"),
        "hostile_names",
        &hostile,
    );
    let conformance = common::root().join("tests/conformance");
    let built = bins.join("extensions");
    built_from_stub(&conformance.join("extensions.yaml"), &built, &[]);
    for name in extension_case_files(&conformance) {
        corpus(&conformance, &name, &built);
    }
    let binary = bins.join("transforms");
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

/// The cargo path (`--native`), dynamic and static: the corpus statically linked (the stricter
/// build), the extensions' cases and the hostile names dynamically. A static build relinks the
/// dynamic one's dependencies, so the runtime's tree is compiled once. The static stub is made
/// by `mcpgraph stub --static` in the same cache, which compiles only its own small crate.
#[test]
fn native_builds_answer_the_corpus() {
    let bins = common::root().join("target/mcpgraph-test-bins");
    let static_linked = |binary: &Path, name: &str| {
        // Checked independently of mcpgraph's own verification: ldd knows a static binary.
        let ldd = Command::new("ldd").arg(binary).output().expect("ldd runs");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&ldd.stdout),
            String::from_utf8_lossy(&ldd.stderr)
        );
        assert!(
            said.contains("not a dynamic executable") || said.contains("statically linked"),
            "{name}: ldd says {said}"
        );
    };
    // Tool and property names that collide with generated items, with keywords or with each
    // other once converted: the generated crate compiles under `#![deny(warnings)]`.
    let hostile = bins.join("hostile_names-native");
    build(
        &common::root().join("tests/graphs/hostile_names.yaml"),
        &hostile,
        &["--native"],
    );
    corpus(
        &common::root().join("tests/graphs"),
        "hostile_names",
        &hostile,
    );
    // The extensions' cases (tests/conformance): every cases file there runs against ONE
    // build of `extensions.yaml`, so each of its graphs must be that file (the others are
    // symlinks, run with other client capabilities).
    let conformance = common::root().join("tests/conformance");
    let extensions = conformance.join("extensions.yaml");
    let built = bins.join("extensions-native");
    build(&extensions, &built, &["--native"]);
    for name in extension_case_files(&conformance) {
        let graph = conformance.join(format!("{name}.yaml"));
        assert_eq!(
            std::fs::canonicalize(&graph).ok(),
            std::fs::canonicalize(&extensions).ok(),
            "tests/conformance/{name}.yaml must be extensions.yaml (a symlink to it): put new \
             tools into extensions.yaml so that one build serves every cases file"
        );
        corpus(&conformance, &name, &built);
    }
    for (name, graph) in corpus_graphs() {
        let binary = bins.join(format!("{name}-native-static"));
        build(&graph, &binary, &["--native", "--static"]);
        static_linked(&binary, &name);
        // The corpus's downstream graphs start the mock relative to the graph's directory,
        // which the runner makes the working directory: the same as for serve.
        corpus(
            &common::shared_dir().join("conformance/graphs"),
            &name,
            &binary,
        );
    }
    let binary = bins.join("transforms-native-static");
    let version = Command::new(&binary)
        .arg("--version")
        .output()
        .expect("runs");
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("transforms 1.0.0 (mcpgraph {})", env!("CARGO_PKG_VERSION"))
    );

    // The static stub, then a static server from it without cargo.
    let stub = Command::new(common::mcpgraph())
        .args(["stub", "--static"])
        .envs(common::SHARED_BUILD_ENV.iter().copied())
        .status()
        .expect("mcpgraph runs");
    assert!(stub.success(), "mcpgraph stub --static failed");
    let graph = common::shared_dir().join("conformance/graphs/transforms.yaml");
    let binary = bins.join("transforms-static");
    built_from_stub(&graph, &binary, &["--static"]);
    static_linked(&binary, "transforms (from the static stub)");
    corpus(
        &common::shared_dir().join("conformance/graphs"),
        "transforms",
        &binary,
    );
}

/// The generated crates of an example and of the hostile-names fixture, as committed in
/// `tests/snapshots/` (regenerate with `MCPGRAPH_BLESS=1`). The native builds above compile the
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
        for file in [
            "src/server.rs",
            "src/native.rs",
            "src/main.rs",
            "Cargo.toml",
        ] {
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
        // The lock, the build script and the list of functions it hands to the linker
        // (docs/build.md, "The stub's layout") are copied as they are.
        for (emitted, source) in [
            ("Cargo.lock", "templates/server/Cargo.lock"),
            ("build.rs", "templates/server/build.rs"),
            ("functions.order", "src/stub.order"),
        ] {
            assert!(
                std::fs::read(out.join(emitted)).unwrap()
                    == std::fs::read(common::root().join(source)).unwrap(),
                "{snapshot_dir}/{emitted} is not {source}"
            );
        }
    }
}
