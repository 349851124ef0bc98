//! `graph!`'s compile errors, as the user sees them: each `tests/ui/NAME.rs` must fail to compile
//! with rustc's output exactly `tests/ui/NAME.stderr` (`MCPGRAPH_BLESS=1` rewrites them).
//!
//! rustc runs directly on each case against the runtime this test was built with (its rlib and
//! dependencies are in the test binary's own `deps` directory), as `cargo check` of a user crate
//! would: no second build of the dependency tree.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where cargo put this test binary and every crate of the build.
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent().expect("the deps directory").to_path_buf()
}

/// The runtime's rlibs in `deps`, newest first. The directory keeps one per build
/// configuration ever built (other profiles' settings, older sources); the newest is most likely
/// the one this test was built with, and a case is tried against the next when rustc cannot use
/// one (see [`wrong_rlib`]).
fn runtime_rlibs(deps: &Path) -> Vec<PathBuf> {
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .expect("read the deps directory")
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            if !(name.starts_with("libmcpgraph_runtime-") && name.ends_with(".rlib")) {
                return None;
            }
            Some((entry.metadata().ok()?.modified().ok()?, entry.path()))
        })
        .collect();
    found.sort();
    found.reverse();
    assert!(
        !found.is_empty(),
        "no libmcpgraph_runtime-*.rlib in {}",
        deps.display()
    );
    found.into_iter().map(|(_, path)| path).collect()
}

/// rustc could not use the rlib it was given (another build's, another compiler's): not an
/// answer about the case.
fn wrong_rlib(stderr: &str) -> bool {
    [
        "E0460",
        "E0461",
        "E0463",
        "E0514",
        "E0519",
        "can't find crate",
        "incompatible version of rustc",
    ]
    .iter()
    .any(|sign| stderr.contains(sign))
}

/// The compiler of this build: the rustc beside the cargo that ran it (rustup's toolchain
/// directory), else the one on PATH.
fn rustc() -> PathBuf {
    let beside = Path::new(env!("CARGO")).with_file_name("rustc");
    if beside.exists() {
        beside
    } else {
        PathBuf::from("rustc")
    }
}

#[test]
fn graph_macro_errors() {
    let manifest_dir = env!("CARGO_MANIFEST_DIR");
    let deps = deps_dir();
    let rlibs = runtime_rlibs(&deps);
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph_macro_ui");
    std::fs::create_dir_all(&out_dir).expect("create the output directory");
    let rustc = rustc();
    let bless = std::env::var_os("MCPGRAPH_BLESS").is_some();

    let mut cases: Vec<PathBuf> = std::fs::read_dir(Path::new(manifest_dir).join("tests/ui"))
        .expect("read tests/ui")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no cases in tests/ui");

    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_stem().and_then(|s| s.to_str()).expect("a name");
        // Run in the crate directory with the case's relative path, so rustc's `-->` lines read
        // `tests/ui/NAME.rs`; graph! takes its path from CARGO_MANIFEST_DIR, as under cargo.
        let compile = |rlib: &Path| {
            Command::new(&rustc)
                .current_dir(manifest_dir)
                .env("CARGO_MANIFEST_DIR", manifest_dir)
                .arg(format!("tests/ui/{name}.rs"))
                .args([
                    "--edition",
                    "2024",
                    "--crate-type",
                    "bin",
                    "--crate-name",
                    name,
                ])
                .args(["--emit=metadata", "--error-format=human", "--color=never"])
                .arg("-L")
                .arg(format!("dependency={}", deps.display()))
                .arg("--extern")
                .arg(format!("mcpgraph_runtime={}", rlib.display()))
                .arg("--out-dir")
                .arg(&out_dir)
                .output()
                .expect("run rustc")
        };
        let mut tried = Vec::new();
        let output = rlibs.iter().find_map(|rlib| {
            let output = compile(rlib);
            let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
            if wrong_rlib(&stderr) {
                tried.push(format!("{}:\n{stderr}", rlib.display()));
                return None;
            }
            Some(output)
        });
        let Some(output) = output else {
            // Never blessed: this says nothing about the case.
            panic!(
                "{name}: {} could use none of the runtime's rlibs:\n{}",
                rustc.display(),
                tried.join("\n")
            );
        };
        if output.status.success() {
            failures.push(format!("{name}: compiled, but must fail"));
            continue;
        }
        // The one machine-dependent part: graph!'s messages give the absolute path it tried.
        let got =
            String::from_utf8_lossy(&output.stderr).replace(manifest_dir, "$CARGO_MANIFEST_DIR");
        let snapshot = case.with_extension("stderr");
        match std::fs::read_to_string(&snapshot) {
            Ok(expected) if expected == got => {}
            _ if bless => std::fs::write(&snapshot, &got).expect("write the .stderr"),
            Ok(expected) => failures.push(format!(
                "{name}: rustc's output changed (MCPGRAPH_BLESS=1 to accept)\n\
                 --- expected\n{expected}\n--- got\n{got}"
            )),
            Err(_) => failures.push(format!(
                "{name}: no {} (MCPGRAPH_BLESS=1 writes it)\n--- got\n{got}",
                snapshot.display()
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
