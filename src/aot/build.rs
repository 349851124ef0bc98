//! `mcpgraph build --native` (and `mcpgraph stub`): a generated crate compiled by cargo into one
//! binary.
//!
//! Every build shares mcpgraph's cache: one vendored runtime per mcpgraph version and one target
//! directory for every build, so the first build compiles the runtime and later builds of any
//! graph only the generated crate. A static build differs from a dynamic one only at the final
//! link (`cargo rustc -- -C target-feature=+crt-static`), so the two share every compiled
//! dependency. The binary is put at `-o` atomically, mode 0755.

use super::{SMALL_PROFILE, VendorAt, binary_name, emit, emit_stub, fnv, is_static_elf};
use mcpgraph_compiler::Graph;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The mode of a built server binary, whatever the file it replaces had.
pub(super) const BINARY_MODE: u32 = 0o755;

/// Which cargo profile builds the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Release,
    Debug,
    /// The generated crate's size-optimised profile (`build --small`).
    Small,
}

#[derive(Debug, Clone)]
pub struct BuildOptions {
    pub profile: Profile,
    /// Link glibc statically and verify that the result asks for no dynamic loader.
    pub static_: bool,
    /// The graph file as given: its absolute path names the generated crate's directory.
    pub source: PathBuf,
    /// The command that regenerates the crate, for the generated files' headers.
    pub regenerate: String,
    /// mcpgraph's cache (see [`cache_dir`]).
    pub cache: PathBuf,
}

/// A server binary that was built.
#[derive(Debug, Clone)]
pub struct Built {
    /// The binary, as an absolute path when it can be made one.
    pub path: PathBuf,
    pub bytes: u64,
    pub static_: bool,
    pub from: From,
}

/// What a server was made from.
#[derive(Debug, Clone)]
pub enum From {
    /// The stub, with the graph attached (the default build).
    Stub(PathBuf),
    /// The generated crate, compiled by cargo (`--native`).
    Crate(PathBuf),
}

impl Built {
    /// What an MCP client's configuration needs to start this server.
    pub fn client_config(&self, graph: &Graph) -> serde_json::Value {
        serde_json::json!({"mcpServers": {graph.server.name.clone(): {"command": self.path}}})
    }
}

#[derive(Debug)]
pub enum BuildError {
    WriteCrate(PathBuf, std::io::Error),
    RunCargo(std::io::Error),
    CargoFailed(ExitStatus),
    Copy {
        from: PathBuf,
        to: PathBuf,
        error: std::io::Error,
    },
    NotStatic(PathBuf),
    Verify(PathBuf, String),
    /// No stub where one is looked for (`looked`, in order).
    NoStub {
        static_: bool,
        looked: Vec<PathBuf>,
    },
    BadStub {
        stub: PathBuf,
        reason: String,
    },
    OutputIsDirectory(PathBuf),
    OutputIsStub(PathBuf),
    Lock(PathBuf, std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::WriteCrate(dir, e) => write!(
                f,
                "cannot write the generated crate to {}: {e}",
                dir.display()
            ),
            BuildError::RunCargo(e) => write!(f, "cannot run cargo: {e}"),
            BuildError::CargoFailed(status) => write!(f, "cargo failed ({status})"),
            BuildError::Copy { from, to, error } => write!(
                f,
                "cannot copy {} to {}: {error}",
                from.display(),
                to.display()
            ),
            BuildError::NotStatic(path) => write!(
                f,
                "{} is not statically linked (it asks for a program interpreter)",
                path.display()
            ),
            BuildError::Verify(path, e) => write!(f, "cannot verify {}: {e}", path.display()),
            BuildError::NoStub { static_, looked } => {
                let looked: Vec<String> = looked.iter().map(|p| p.display().to_string()).collect();
                if *static_ {
                    write!(
                        f,
                        "no statically linked server stub (looked for {}). Make it once with `mcpgraph stub --static` (it needs cargo; minutes the first time), or from a checkout with `scripts/build-static-stub`; or name one with --stub PATH or ${}; or build with cargo: `--native --static`",
                        looked.join(", "),
                        super::stub::STATIC_STUB_VAR
                    )
                } else {
                    write!(
                        f,
                        "no server stub (looked for {}). It is built and installed with mcpgraph (`cargo install --path .`, or `cargo build --release` beside target/release/mcpgraph); or make one with `mcpgraph stub`; or name one with --stub PATH or ${}; or build with cargo: `--native`",
                        looked.join(", "),
                        super::stub::STUB_VAR
                    )
                }
            }
            BuildError::BadStub { stub, reason } => {
                write!(
                    f,
                    "cannot use {} as the server stub: {reason}",
                    stub.display()
                )
            }
            BuildError::OutputIsDirectory(out) => write!(
                f,
                "the output {} is a directory: name the server file, e.g. {}",
                out.display(),
                out.join("server").display()
            ),
            BuildError::OutputIsStub(out) => write!(
                f,
                "the output {} is the server stub itself: choose another path",
                out.display()
            ),
            BuildError::Lock(path, e) => {
                write!(f, "cannot lock the build cache ({}): {e}", path.display())
            }
        }
    }
}

impl std::error::Error for BuildError {}

/// mcpgraph's cache: `$MCPGRAPH_CACHE_DIR`, else `$XDG_CACHE_HOME/mcpgraph`, else `~/.cache/mcpgraph`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("MCPGRAPH_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("mcpgraph");
    }
    match std::env::var_os("HOME") {
        Some(home) => PathBuf::from(home).join(".cache/mcpgraph"),
        None => std::env::temp_dir().join("mcpgraph-cache"),
    }
}

/// Emits the crate of `graph` into the cache, runs cargo on it and copies the binary to `out`.
pub fn build(graph: &Graph, out: &Path, options: &BuildOptions) -> Result<Built, BuildError> {
    let absolute =
        std::fs::canonicalize(&options.source).unwrap_or_else(|_| options.source.clone());
    let name = binary_name(graph);
    let crate_dir = options
        .cache
        .join("crates")
        .join(format!("{name}-{:016x}", fnv(&absolute.to_string_lossy())));
    let vendor = options.cache.join("vendor").join(env!("CARGO_PKG_VERSION"));
    let _locked = lock_cache(options)?;
    let emitted = emit(
        graph,
        &crate_dir,
        &VendorAt::Shared(vendor),
        &options.regenerate,
    )
    .map_err(|e| BuildError::WriteCrate(crate_dir.clone(), e))?;
    eprint!("{}", super::native_report(&emitted));
    let bytes = cargo_build(&crate_dir, &name, out, options)?;
    Ok(Built {
        path: std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf()),
        bytes,
        static_: options.static_,
        from: From::Crate(crate_dir),
    })
}

/// `mcpgraph stub`: the stub's crate (the runtime's `main_attached` and nothing else) built by
/// cargo in the cache, as `--native` builds a graph, and put at `out`.
pub fn build_stub(out: &Path, options: &BuildOptions) -> Result<Built, BuildError> {
    let crate_dir = options.cache.join("crates").join("mcpgraph-stub");
    let vendor = options.cache.join("vendor").join(env!("CARGO_PKG_VERSION"));
    let _locked = lock_cache(options)?;
    emit_stub(&crate_dir, &VendorAt::Shared(vendor))
        .map_err(|e| BuildError::WriteCrate(crate_dir.clone(), e))?;
    let bytes = cargo_build(&crate_dir, super::stub::STUB, out, options)?;
    Ok(Built {
        path: std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf()),
        bytes,
        static_: options.static_,
        from: From::Crate(crate_dir),
    })
}

/// One target directory for every build: the runtime is compiled once.
fn target_dir(options: &BuildOptions) -> PathBuf {
    std::env::var_os("MCPGRAPH_TARGET_DIR")
        .map_or_else(|| options.cache.join("target"), PathBuf::from)
}

/// The cache's build lock, held from writing a crate until its binary is copied: two builds of
/// one graph share its crate directory, and two servers with one name (or a static and a
/// dynamic build of one graph) share the artifact's path. Says so when it has to wait.
fn lock_cache(options: &BuildOptions) -> Result<std::fs::File, BuildError> {
    let target_dir = target_dir(options);
    let _ = std::fs::create_dir_all(&target_dir);
    let lock_path = target_dir.join(".mcpgraph-build.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| BuildError::Lock(lock_path.clone(), e))?;
    if lock.try_lock().is_err() {
        eprintln!(
            "waiting for another mcpgraph build ({})",
            lock_path.display()
        );
        lock.lock()
            .map_err(|e| BuildError::Lock(lock_path.clone(), e))?;
    }
    Ok(lock)
}

/// Runs cargo on the crate at `crate_dir` for its binary `name` and copies the binary to `out`;
/// returns its size. The caller holds [`lock_cache`].
fn cargo_build(
    crate_dir: &Path,
    name: &str,
    out: &Path,
    options: &BuildOptions,
) -> Result<u64, BuildError> {
    let target_dir = target_dir(options);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg(if options.static_ { "rustc" } else { "build" })
        .arg("--locked")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir)
        .arg("--bin")
        .arg(name);
    let profile_dir = match options.profile {
        Profile::Debug => "debug",
        Profile::Small => {
            command.arg("--profile").arg(SMALL_PROFILE);
            SMALL_PROFILE
        }
        Profile::Release => {
            command.arg("--release");
            "release"
        }
    };
    if options.static_ {
        // Only the final link changes: every dependency is the dynamic build's, already
        // compiled (and `crt-static` never reaches build scripts or the graph! proc macro).
        command
            .arg("--")
            .arg("-C")
            .arg("target-feature=+crt-static");
    }
    let status = command.status().map_err(BuildError::RunCargo)?;
    if !status.success() {
        return Err(BuildError::CargoFailed(status));
    }

    let built = target_dir.join(profile_dir).join(name);
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = std::fs::create_dir_all(parent);
    }
    let copy_failed = |error: std::io::Error| BuildError::Copy {
        from: built.clone(),
        to: out.to_path_buf(),
        error,
    };
    // Replaced in one rename, never overwritten: an earlier build may be running, and a client
    // that starts the server meanwhile finds the old binary or the new one, never half of one.
    let bytes = std::fs::read(&built).map_err(copy_failed)?;
    if options.static_ {
        match is_static_elf(&bytes) {
            Ok(true) => {}
            Ok(false) => return Err(BuildError::NotStatic(out.to_path_buf())),
            Err(e) => return Err(BuildError::Verify(out.to_path_buf(), e)),
        }
    }
    crate::atomic_write::write_program(out, &bytes, BINARY_MODE).map_err(copy_failed)?;
    Ok(bytes.len() as u64)
}
