//! `mcpgraph build`: the generated crate compiled by cargo into one server binary.
//!
//! Every build shares mcpgraph's cache: one vendored runtime per mcpgraph version and one target
//! directory for every build, so the first build compiles the runtime and later builds of any
//! graph only the generated crate. The binary is put at `-o` atomically, mode 0755.

use super::{SMALL_PROFILE, VendorAt, binary_name, emit, fnv, is_static_elf};
use mcpgraph_compiler::Graph;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};

/// The only target `--static` supports: glibc linked statically with `crt-static`.
pub const STATIC_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The mode of a built server binary, whatever the file it replaces had.
const BINARY_MODE: u32 = 0o755;

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
    /// The generated crate it was built from.
    pub crate_dir: PathBuf,
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
    build_inner(graph, out, options, None)
}

/// [`build`], with cargo's output handed to `report` line by line instead of inherited (the
/// toolkit, whose stdout is MCP, forwards them as progress notifications).
pub fn build_reporting(
    graph: &Graph,
    out: &Path,
    options: &BuildOptions,
    report: &mut dyn FnMut(&str),
) -> Result<Built, BuildError> {
    build_inner(graph, out, options, Some(report))
}

fn build_inner(
    graph: &Graph,
    out: &Path,
    options: &BuildOptions,
    report: Option<&mut dyn FnMut(&str)>,
) -> Result<Built, BuildError> {
    let absolute =
        std::fs::canonicalize(&options.source).unwrap_or_else(|_| options.source.clone());
    let name = binary_name(graph);
    let crate_dir = options
        .cache
        .join("crates")
        .join(format!("{name}-{:016x}", fnv(&absolute.to_string_lossy())));
    let vendor = options.cache.join("vendor").join(env!("CARGO_PKG_VERSION"));
    // One target directory for every build: the runtime is compiled once.
    let target_dir = std::env::var_os("MCPGRAPH_TARGET_DIR")
        .map_or_else(|| options.cache.join("target"), PathBuf::from);
    emit(
        graph,
        &crate_dir,
        &VendorAt::Shared(vendor),
        &options.regenerate,
    )
    .map_err(|e| BuildError::WriteCrate(crate_dir.clone(), e))?;

    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .arg("build")
        .arg("--locked")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
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
    let mut artifacts = target_dir;
    if options.static_ {
        // With an explicit --target, RUSTFLAGS reach only the target: build scripts and the
        // graph! proc macro stay dynamically linked, as they must.
        command.arg("--target").arg(STATIC_TARGET);
        let flags = std::env::var("RUSTFLAGS").unwrap_or_default();
        command.env(
            "RUSTFLAGS",
            format!("{flags} -C target-feature=+crt-static").trim(),
        );
        artifacts = artifacts.join(STATIC_TARGET);
    }
    let status = match report {
        None => command.status().map_err(BuildError::RunCargo)?,
        Some(report) => {
            use std::io::BufRead;
            command
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            let mut child = command.spawn().map_err(BuildError::RunCargo)?;
            if let Some(stderr) = child.stderr.take() {
                for line in std::io::BufReader::new(stderr)
                    .lines()
                    .map_while(Result::ok)
                {
                    report(line.trim());
                }
            }
            child.wait().map_err(BuildError::RunCargo)?
        }
    };
    if !status.success() {
        return Err(BuildError::CargoFailed(status));
    }

    let built = artifacts.join(profile_dir).join(&name);
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
    crate::atomic_write::write_program(out, &bytes, BINARY_MODE).map_err(copy_failed)?;
    if options.static_ {
        match is_static_elf(&bytes) {
            Ok(true) => {}
            Ok(false) => return Err(BuildError::NotStatic(out.to_path_buf())),
            Err(e) => return Err(BuildError::Verify(out.to_path_buf(), e)),
        }
    }
    Ok(Built {
        path: std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf()),
        bytes: bytes.len() as u64,
        static_: options.static_,
        crate_dir,
    })
}
