//! `mcpgraph build` without a toolchain: the prebuilt server stub copied, the checked graph
//! attached to it (the format is the runtime's `attached` module; docs/build.md). No cargo, no
//! compiler: a build reads the stub, writes one file, and takes milliseconds.

use super::build::{BINARY_MODE, BuildError, Built};
use super::is_static_elf;
use mcpgraph_compiler::Graph;
use mcpgraph_runtime::attached;
use std::path::{Path, PathBuf};

/// The stub's file name beside `mcpgraph` (cargo builds and installs it with `mcpgraph`).
pub const STUB: &str = "mcpgraph-stub";
/// The statically linked stub's file name (`mcpgraph stub --static` or scripts/build-static-stub).
pub const STATIC_STUB: &str = "mcpgraph-stub-static";

/// How a build from the stub was asked for.
#[derive(Debug, Clone, Default)]
pub struct StubOptions {
    /// The stub must be statically linked (and the server is then too).
    pub static_: bool,
    /// `--stub PATH`: this stub and no other.
    pub stub: Option<PathBuf>,
    /// mcpgraph's cache, where `mcpgraph stub` puts the stubs it builds.
    pub cache: PathBuf,
}

/// The environment variable naming the stub, and the one naming the static stub.
pub const STUB_VAR: &str = "MCPGRAPH_STUB";
pub const STATIC_STUB_VAR: &str = "MCPGRAPH_STATIC_STUB";

/// Where `mcpgraph stub` writes a stub it builds: the cache, one per mcpgraph version.
pub fn cached_stub(cache: &Path, static_: bool) -> PathBuf {
    cache
        .join("stubs")
        .join(attached::VERSION)
        .join(if static_ { STATIC_STUB } else { STUB })
}

/// The stub a build uses: `--stub`, else the environment variable, else the one installed beside
/// this `mcpgraph`, else the one `mcpgraph stub` built into the cache.
pub fn find_stub(options: &StubOptions) -> Result<PathBuf, BuildError> {
    if let Some(stub) = &options.stub {
        return Ok(stub.clone());
    }
    let (name, var) = if options.static_ {
        (STATIC_STUB, STATIC_STUB_VAR)
    } else {
        (STUB, STUB_VAR)
    };
    if let Some(path) = std::env::var_os(var).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)));
    let cached = cached_stub(&options.cache, options.static_);
    let candidates: Vec<PathBuf> = beside.into_iter().chain([cached]).collect();
    match candidates.iter().find(|path| path.is_file()) {
        Some(found) => Ok(found.clone()),
        None => Err(BuildError::NoStub {
            static_: options.static_,
            looked: candidates,
        }),
    }
}

/// Checks `graph`'s stub and writes the server to `out` (atomically, mode 0755). Everything is
/// refused before anything is written: an output that is a directory or the stub itself, a stub
/// that is missing, not a stub, from another version, already carrying a graph, or (for
/// `--static`) dynamically linked.
pub fn build_from_stub(
    graph: &Graph,
    out: &Path,
    options: &StubOptions,
) -> Result<Built, BuildError> {
    let stub = find_stub(options)?;
    if out.is_dir() {
        return Err(BuildError::OutputIsDirectory(out.to_path_buf()));
    }
    if same_file(out, &stub) {
        return Err(BuildError::OutputIsStub(out.to_path_buf()));
    }
    let bad_stub = |reason: String| BuildError::BadStub {
        stub: stub.clone(),
        reason,
    };
    let bytes = std::fs::read(&stub).map_err(|e| bad_stub(format!("cannot read it: {e}")))?;
    if options.static_ {
        match is_static_elf(&bytes) {
            Ok(true) => {}
            Ok(false) => {
                return Err(bad_stub(
                    "it is dynamically linked, and --static needs a statically linked stub".into(),
                ));
            }
            Err(e) => return Err(bad_stub(e)),
        }
    }
    let payload = serde_json::to_vec(graph).map_err(|e| bad_stub(e.to_string()))?;
    let server = attached::attach(&bytes, &payload).map_err(|e| bad_stub(e.to_string()))?;
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty())
        && let Err(error) = std::fs::create_dir_all(parent)
    {
        return Err(BuildError::Copy {
            from: stub.clone(),
            to: out.to_path_buf(),
            error,
        });
    }
    crate::atomic_write::write_program(out, &server, BINARY_MODE).map_err(|error| {
        BuildError::Copy {
            from: stub.clone(),
            to: out.to_path_buf(),
            error,
        }
    })?;
    Ok(Built {
        path: std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf()),
        bytes: server.len() as u64,
        static_: options.static_,
        from: super::build::From::Stub(std::fs::canonicalize(&stub).unwrap_or(stub)),
    })
}

/// Whether two paths name one file (the output may not exist yet).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}
