//! `mcpgraph build` from the stub (docs/build.md): what it refuses before writing anything, and
//! what a server whose attachment was stripped, cut, changed or made by another version says.
//! Real files, the real stub, `strip` from binutils.

use crate::build::{build_from_stub, built_from_stub};
use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn dir(name: &str) -> PathBuf {
    let dir = common::root().join("target/stub-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a test directory");
    dir
}

fn example() -> PathBuf {
    common::root().join("examples/loop.yaml")
}

/// The stub the tests' mcpgraph finds beside itself.
fn stub() -> PathBuf {
    Path::new(common::mcpgraph()).with_file_name("mcpgraph-stub")
}

/// Runs a program this test process has just written. Another test thread's fork may still
/// hold the written file's descriptor for an instant (until its child execs), during which
/// Linux refuses to execute it (`ETXTBSY`): that, and only that, is tried again.
fn run_written(program: &Path) -> std::process::Output {
    for _ in 0..100 {
        match Command::new(program)
            .stdin(std::process::Stdio::null())
            .output()
        {
            // A back-off between attempts, not a wait for an event: there is none to wait on.
            Err(error) if error.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => return other.expect("the server runs"),
        }
    }
    panic!("{} stayed busy", program.display());
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Runs a server as a client would start it; it must exit 1 before reading stdin, saying `what`.
fn refuses_to_start(server: &Path, what: &[&str]) {
    let output = run_written(server);
    let said = stderr(&output);
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}: {said}",
        server.display()
    );
    for word in what {
        assert!(
            said.contains(word),
            "{} says {said:?}, not {word:?}",
            server.display()
        );
    }
    assert!(
        said.contains("mcpgraph build"),
        "no way to rebuild in {said:?}"
    );
}

#[test]
fn the_same_inputs_give_the_same_bytes_and_an_executable() {
    let dir = dir("same");
    let (a, b) = (dir.join("a"), dir.join("b"));
    built_from_stub(&example(), &a, &[]);
    built_from_stub(&example(), &b, &[]);
    let bytes = std::fs::read(&a).unwrap();
    assert_eq!(bytes, std::fs::read(&b).unwrap(), "two builds differ");
    let mode = std::fs::metadata(&a).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    // The stub's bytes come first, then the graph: the server is the stub plus its attachment.
    let stub = std::fs::read(stub()).unwrap();
    assert!(bytes.len() > stub.len());
    assert_eq!(bytes[..64], stub[..64]);
    // A rebuild over a running server replaces it in one rename (no "text file busy"); the
    // running one goes on answering, and the new file is a whole server.
    let mut running = common::Mcp::start_program(&a.to_string_lossy(), &dir);
    built_from_stub(&example(), &a, &[]);
    let answer = running.call("sum_to_n", serde_json::json!({"n": 10}));
    assert_eq!(common::structured(&answer)["sum"], 55, "{answer}");
    let mut fresh = common::Mcp::start_program(&a.to_string_lossy(), &dir);
    let answer = fresh.call("sum_to_n", serde_json::json!({"n": 100}));
    assert_eq!(common::structured(&answer)["sum"], 5050, "{answer}");
}

#[test]
fn a_damaged_server_says_what_happened() {
    let dir = dir("damaged");
    let server = dir.join("server");
    built_from_stub(&example(), &server, &[]);
    let bytes = std::fs::read(&server).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };

    let stripped = write("stripped", &bytes);
    let status = Command::new("strip")
        .arg(&stripped)
        .status()
        .expect("strip runs");
    assert!(status.success());
    refuses_to_start(&stripped, &["its graph is gone", "strip"]);

    let truncated = write("truncated", &bytes[..bytes.len() - 40]);
    refuses_to_start(&truncated, &["truncated"]);

    // One byte of the graph changed (its JSON text, a few hundred bytes before the end).
    let mut changed = bytes.clone();
    let at = bytes.len() - 200;
    changed[at] ^= 0x20;
    let corrupted = write("corrupted", &changed);
    refuses_to_start(&corrupted, &["corrupted", "SHA-256"]);

    // The trailer's version (its first 32 bytes, at 96 bytes from the end) made another one.
    let mut other = bytes.clone();
    let version_at = bytes.len() - 96;
    other[version_at..version_at + 32].fill(0);
    other[version_at..version_at + 5].copy_from_slice(b"0.0.9");
    let older = write("older", &other);
    refuses_to_start(
        &older,
        &["attached by mcpgraph 0.0.9", env!("CARGO_PKG_VERSION")],
    );

    // Bytes appended after a whole server (`cat >>`, a packager): corrupted, not truncated.
    let mut appended = bytes.clone();
    appended.extend_from_slice(b"signature");
    let appended = write("appended", &appended);
    refuses_to_start(&appended, &["corrupted", "appended after its graph"]);

    // Cut inside the header that starts the attachment: truncated.
    let stub_len = std::fs::read(stub()).unwrap().len();
    let cut = write("cut-in-header", &bytes[..stub_len + 5]);
    refuses_to_start(&cut, &["truncated"]);

    let output = Command::new(stub()).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("carries no graph"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_build_refuses_before_writing_anything() {
    let dir = dir("refused");
    let out = dir.join("server");
    let refused = |flags: &[&str], out: &Path, words: &[&str]| {
        let output = build_from_stub(&example(), out, flags);
        let said = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{flags:?}: {said}");
        for word in words {
            assert!(said.contains(word), "{flags:?}: {said:?} lacks {word:?}");
        }
    };
    // A stub that already carries a graph (a built server).
    built_from_stub(&example(), &out, &[]);
    let server = out.to_string_lossy().into_owned();
    let other = dir.join("other");
    refused(&["--stub", &server], &other, &["already carries a graph"]);
    // Not a stub at all.
    refused(
        &["--stub", "/bin/true"],
        &other,
        &["not an mcpgraph server stub"],
    );
    refused(&["--stub", "/etc/hostname"], &other, &["not a 64-bit ELF"]);
    // The stub of another version (its mark's version changed in place).
    let mut bytes = std::fs::read(stub()).unwrap();
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    let mark = [b"version=".as_slice(), version, b"\0attached=0".as_slice()].concat();
    let at = bytes
        .windows(mark.len())
        .position(|w| w == mark)
        .expect("the stub's mark");
    bytes[at + 8..at + 8 + version.len()].fill(b'9');
    let old_stub = dir.join("old-stub");
    std::fs::write(&old_stub, &bytes).unwrap();
    let nines = "9".repeat(version.len());
    refused(
        &["--stub", &old_stub.to_string_lossy()],
        &other,
        &[
            &format!("stub of mcpgraph {nines}"),
            env!("CARGO_PKG_VERSION"),
        ],
    );
    // A dynamic stub for --static.
    refused(
        &["--static", "--stub", &stub().to_string_lossy()],
        &other,
        &["dynamically linked"],
    );
    // The output is the graph itself (or its lock file): refused, the graph untouched.
    let graph = dir.join("graph.yaml");
    std::fs::copy(example(), &graph).unwrap();
    let before = std::fs::read(&graph).unwrap();
    let output = build_from_stub(&graph, &graph, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("the graph's own file"),
        "{}",
        stderr(&output)
    );
    assert_eq!(std::fs::read(&graph).unwrap(), before);
    // The output is a directory, or the stub itself.
    refused(&[], &dir, &["is a directory"]);
    refused(
        &["--stub", &old_stub.to_string_lossy()],
        &old_stub,
        &["the server stub itself"],
    );
    assert!(!other.exists(), "a refused build wrote {}", other.display());
    // No static stub anywhere: what to run is named.
    let empty = dir.join("empty-cache");
    let output = Command::new(common::mcpgraph())
        .arg("build")
        .arg(example())
        .arg("-o")
        .arg(&other)
        .arg("--static")
        .env("MCPGRAPH_CACHE_DIR", &empty)
        .env_remove("MCPGRAPH_STATIC_STUB")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("mcpgraph stub --static"),
        "{}",
        stderr(&output)
    );
    // A graph that does not check: its diagnostics, and no file.
    let broken = dir.join("broken.yaml");
    std::fs::write(
        &broken,
        "version: \"1.0\"\nserver: {name: x, version: \"1\"}\ntools: [{name: t}]\n",
    )
    .unwrap();
    let output = build_from_stub(&broken, &other, &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("error["), "{}", stderr(&output));
    assert!(!other.exists());
    // The stub is untouched by all of it.
    assert!(std::fs::read(stub()).unwrap().len() < std::fs::read(&out).unwrap().len());
}

/// src/stub.order, the functions the linker lays out side by side (build.rs, docs/build.md "The
/// stub's layout"), is what scripts/stub-order writes: one defined symbol a line, each once,
/// nearly all Rust's. (What it does to memory shows only in a release build, whose symbol names
/// it lists: the bench's memory rows, not this opt-level-1 build.)
#[test]
fn the_stub_order_lists_symbols_once_each() {
    let path = common::root().join("src/stub.order");
    let text = std::fs::read_to_string(&path).expect("src/stub.order");
    let mut seen = std::collections::HashSet::new();
    let mut rust = 0;
    for (number, line) in text.lines().enumerate() {
        assert!(
            !line.is_empty() && !line.contains(char::is_whitespace),
            "line {} of {} is not one symbol: {line:?}",
            number + 1,
            path.display()
        );
        assert!(seen.insert(line), "{line} is listed twice");
        if line.starts_with("_ZN") || line.starts_with("_R") {
            rust += 1;
        }
    }
    assert!(
        seen.len() > 1000 && rust * 100 >= seen.len() * 99,
        "{} symbols, {rust} of them Rust's: not what scripts/stub-order writes",
        seen.len()
    );
}
