//! `mcpgraph emit` and `mcpgraph build`: a graph → a Rust crate → a server binary. The CLI only
//! parses arguments and prints; the crate is written here and built by [`build`].

use mcpgraph_compiler::{Graph, codegen};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod build;
mod stub;

pub use build::{BuildOptions, From, Profile, build, build_stub, cache_dir};
pub use stub::{STUB, StubOptions, build_from_stub, cached_stub};

mod vendor {
    include!(concat!(env!("OUT_DIR"), "/vendor.rs"));
}

/// The lock file the generated crate builds `--locked` against: the versions mcpgraph was tested
/// with (kept current by a test).
const LOCK: &str = include_str!("../templates/server/Cargo.lock");
const MAIN_RS: &str = include_str!("../templates/server/main.rs");
const GITIGNORE: &str = include_str!("../templates/server/gitignore");
/// The generated crate's build script: hands [`FUNCTIONS_ORDER`] to the linker (docs/build.md,
/// "The stub's layout").
const BUILD_RS: &str = include_str!("../templates/server/build.rs");
/// The functions a server runs, which the linker lays out side by side (scripts/stub-order).
const FUNCTIONS_ORDER: &str = include_str!("stub.order");
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The generated crate's package name: fixed, so that one lock file fits every graph.
pub const PACKAGE: &str = "mcpgraph-server";

#[derive(Serialize)]
struct Manifest {
    package: Package,
    bin: Vec<Bin>,
    dependencies: BTreeMap<&'static str, Dependency>,
    profile: BTreeMap<&'static str, ProfileToml>,
    workspace: BTreeMap<&'static str, Vec<String>>,
}

#[derive(Serialize)]
struct Package {
    name: &'static str,
    version: &'static str,
    edition: &'static str,
    description: String,
    publish: bool,
}

#[derive(Serialize)]
struct Bin {
    name: String,
    path: &'static str,
}

#[derive(Serialize)]
struct Dependency {
    path: String,
    version: String,
    /// Always false: a generated crate does not use `graph!` (the runtime's `macros` feature),
    /// whose proc macro would compile the compiler's tree a second time, for the host.
    #[serde(rename = "default-features")]
    default_features: bool,
}

#[derive(Serialize)]
struct ProfileToml {
    #[serde(skip_serializing_if = "Option::is_none")]
    inherits: Option<&'static str>,
    #[serde(rename = "opt-level")]
    opt_level: OptLevel,
    debug: bool,
    strip: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    lto: Option<&'static str>,
    #[serde(rename = "codegen-units", skip_serializing_if = "Option::is_none")]
    codegen_units: Option<u32>,
    /// Per-package settings: [`ONE_UNIT`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    package: BTreeMap<&'static str, PackageProfile>,
}

#[derive(Serialize)]
struct PackageProfile {
    #[serde(rename = "codegen-units")]
    codegen_units: u32,
}

/// The packages a release build compiles in one codegen unit each, as mcpgraph's own workspace
/// does (its Cargo.toml): the runtime and the compiler. In several units, LLVM renames the
/// functions one unit calls in another (`.llvm.<hash>` of the unit's code), so any change to the
/// runtime renamed a few hundred of the functions src/stub.order lists; in one unit their names
/// change only with the functions themselves (docs/build.md "Where it applies").
const ONE_UNIT: [&str; 2] = ["mcpgraph-compiler", "mcpgraph-runtime"];

#[derive(Serialize)]
#[serde(untagged)]
enum OptLevel {
    Speed(u8),
    Size(&'static str),
}

/// The cargo profile `build --small` uses: the whole program optimised for size at link time.
/// Measured on the transform benchmark graph: resident memory after 1000 calls 15.5 → 10.2 MiB
/// (the code pages a call touches), the same call latency and loop speed as `release`, but every
/// build re-optimises the whole runtime (about 2 minutes on 2 cores instead of 1 second).
pub const SMALL_PROFILE: &str = "small";

/// Where the vendored runtime goes relative to (or for `build`, outside) the crate.
pub enum VendorAt {
    /// `vendor/` inside the crate (`emit`: a self-contained directory).
    Inside,
    /// One shared directory, so every built graph shares the compiled runtime. On Unix the
    /// crate's `vendor` is a link to it: the runtime is then inside the crate's workspace, and
    /// cargo hashes its path relative to the workspace into the runtime's symbol names, which are
    /// then the same in every cache, and so match the layout list (docs/build.md "Where it
    /// applies"). Elsewhere the manifest names the shared directory itself.
    Shared(PathBuf),
}

/// Puts the runtime where `vendor_at` says, and returns the path the crate's manifest gives it.
fn place_vendor(dir: &Path, vendor_at: &VendorAt) -> std::io::Result<String> {
    const INSIDE: &str = "vendor/mcpgraph-runtime";
    match vendor_at {
        VendorAt::Inside => {
            write_vendor(&dir.join("vendor"))?;
            Ok(INSIDE.into())
        }
        VendorAt::Shared(shared) => {
            // A relative cache (`MCPGRAPH_CACHE_DIR=cache`) would name another place from the
            // crate's directory, where both the link and the manifest are read.
            let shared = &std::path::absolute(shared)?;
            write_vendor(shared)?;
            #[cfg(unix)]
            {
                link_vendor(shared, &dir.join("vendor"))?;
                Ok(INSIDE.into())
            }
            #[cfg(not(unix))]
            Ok(shared
                .join("mcpgraph-runtime")
                .to_string_lossy()
                .into_owned())
        }
    }
}

/// Makes `link` a symbolic link to `shared`, replacing whatever was there (the cache's crates
/// are mcpgraph's own: an older layout had no `vendor` in them).
#[cfg(unix)]
fn link_vendor(shared: &Path, link: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if std::fs::read_link(link)? == shared {
                return Ok(());
            }
            std::fs::remove_file(link)?;
        }
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(link)?,
        Ok(_) => std::fs::remove_file(link)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::os::unix::fs::symlink(shared, link)
}

/// The binary name for a graph: its server name as a file name.
pub fn binary_name(graph: &Graph) -> String {
    let name: String = graph
        .server
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if name.is_empty() {
        "mcpgraph-server".into()
    } else {
        name
    }
}

/// What of a graph compiled to Rust, for the person building it: the counts, then each
/// expression that stays interpreted, where it is and why.
pub fn native_report(emitted: &mcpgraph_compiler::native::Emitted) -> String {
    let compiled = emitted.compiled.len();
    let all = compiled + emitted.fell_back.len();
    let rules = emitted.rules_compiled + emitted.rules_fell_back;
    let mut out = format!(
        "compiled to Rust: {compiled} of {all} expressions, {} of {rules} switch rules\n",
        emitted.rules_compiled
    );
    for (source, why, places) in &emitted.fell_back {
        let source = source.split_whitespace().collect::<Vec<_>>().join(" ");
        for place in places {
            out.push_str(&format!("  interpreted: {place}: `{source}` ({why})\n"));
        }
    }
    out
}

/// Writes the crate for `graph` into `dir`; what of the graph compiled to Rust comes back.
pub fn emit(
    graph: &Graph,
    dir: &Path,
    vendor_at: &VendorAt,
    regenerate: &str,
) -> std::io::Result<mcpgraph_compiler::native::Emitted> {
    std::fs::create_dir_all(dir.join("src"))?;
    let runtime_path = place_vendor(dir, vendor_at)?;
    let manifest = manifest(
        format!(
            "MCP server generated by mcpgraph from {}",
            graph.source_name
        ),
        binary_name(graph),
        runtime_path,
    );
    let toml = toml::to_string(&manifest).map_err(std::io::Error::other)?;
    write_if_changed(
        &dir.join("Cargo.toml"),
        &format!("# Generated by mcpgraph {VERSION}: {regenerate}\n{toml}"),
    )?;
    write_if_changed(&dir.join("Cargo.lock"), LOCK)?;
    write_if_changed(&dir.join(".gitignore"), GITIGNORE)?;
    write_layout(dir)?;
    write_if_changed(&dir.join("src/main.rs"), MAIN_RS)?;
    write_if_changed(
        &dir.join("src/server.rs"),
        &codegen::server_module(graph, regenerate),
    )?;
    let (native, emitted) = codegen::native_module(graph, regenerate);
    write_if_changed(&dir.join("src/native.rs"), &native)?;
    let json = serde_json::to_string_pretty(graph).map_err(std::io::Error::other)?;
    write_if_changed(&dir.join("src/graph.json"), &json)?;
    Ok(emitted)
}

/// The generated crate's manifest: its one binary `bin` over the vendored runtime.
fn manifest(description: String, bin: String, runtime_path: String) -> Manifest {
    Manifest {
        package: Package {
            name: PACKAGE,
            version: VERSION,
            edition: "2024",
            description,
            publish: false,
        },
        bin: vec![Bin {
            name: bin,
            path: "src/main.rs",
        }],
        dependencies: BTreeMap::from([(
            "mcpgraph-runtime",
            Dependency {
                path: runtime_path,
                version: format!("={VERSION}"),
                default_features: false,
            },
        )]),
        profile: BTreeMap::from([
            (
                "release",
                ProfileToml {
                    inherits: None,
                    opt_level: OptLevel::Speed(3),
                    debug: false,
                    strip: true,
                    lto: None,
                    codegen_units: None,
                    package: ONE_UNIT
                        .iter()
                        .map(|name| (*name, PackageProfile { codegen_units: 1 }))
                        .collect(),
                },
            ),
            (
                SMALL_PROFILE,
                ProfileToml {
                    inherits: Some("release"),
                    opt_level: OptLevel::Size("s"),
                    debug: false,
                    strip: true,
                    lto: Some("fat"),
                    codegen_units: Some(1),
                    package: BTreeMap::new(),
                },
            ),
        ]),
        // Its own workspace, even when emitted inside another project. The runtime in `vendor`
        // (a copy for `emit`, a link to the cache's shared copy for `build`) is not a member: a
        // member's optional dependencies (`graph!`, the compiler's code generation) would go
        // into the lock file, which then differs from the cache's, and `--locked` refuses one or
        // the other.
        workspace: BTreeMap::from([
            ("members", Vec::new()),
            ("exclude", vec!["vendor".to_string()]),
        ]),
    }
}

/// Writes the stub's crate into `dir` (`mcpgraph stub`): the same manifest, lock and vendored
/// runtime as a graph's crate, and a `main` that runs the graph attached to its own file.
pub fn emit_stub(dir: &Path, vendor_at: &VendorAt) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("src"))?;
    let runtime_path = place_vendor(dir, vendor_at)?;
    let manifest = manifest(
        "mcpgraph's server stub, which `mcpgraph build` attaches graphs to".into(),
        STUB.into(),
        runtime_path,
    );
    let toml = toml::to_string(&manifest).map_err(std::io::Error::other)?;
    write_if_changed(
        &dir.join("Cargo.toml"),
        &format!("# Generated by mcpgraph {VERSION}: mcpgraph stub\n{toml}"),
    )?;
    write_if_changed(&dir.join("Cargo.lock"), LOCK)?;
    write_layout(dir)?;
    write_if_changed(&dir.join("src/main.rs"), STUB_MAIN_RS)
}

/// The build script and the list of functions it hands to the linker.
fn write_layout(dir: &Path) -> std::io::Result<()> {
    write_if_changed(&dir.join("build.rs"), BUILD_RS)?;
    write_if_changed(&dir.join("functions.order"), FUNCTIONS_ORDER)
}

/// The stub crate's `main` (`src/stub.rs` of the workspace is the same program).
const STUB_MAIN_RS: &str = "//! mcpgraph's server stub: a graph attached by `mcpgraph build` is read from this file and served.\n\nfn main() -> std::process::ExitCode {\n    mcpgraph_runtime::__private::main_attached()\n}\n";

/// Writes the runtime sources (unchanged files are left alone: cargo fingerprints path
/// dependencies by modification time).
fn write_vendor(dir: &Path) -> std::io::Result<()> {
    for (path, contents) in vendor::FILES {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        write_if_changed(&target, contents)?;
    }
    Ok(())
}

fn write_if_changed(path: &Path, contents: &str) -> std::io::Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == contents) {
        return Ok(());
    }
    std::fs::write(path, contents)
}

/// A stable 64-bit FNV-1a hash, for cache directory names.
pub fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Whether an ELF executable is statically linked: it asks for no program interpreter.
pub fn is_static_elf(bytes: &[u8]) -> Result<bool, String> {
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 {
        return Err("not a 64-bit ELF file".into());
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u32_at = |o: usize| {
        bytes
            .get(o..o.checked_add(4)?)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let phoff = bytes
        .get(0x20..0x28)
        .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as usize)
        .unwrap_or(0);
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    for i in 0..phnum {
        // A crafted offset is a truncated table, never an overflow.
        match phoff.checked_add(i * phentsize).and_then(u32_at) {
            Some(PT_INTERP) => return Ok(false),
            Some(_) => {}
            None => return Err("truncated program headers".into()),
        }
    }
    Ok(true)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// mcpgraph's own release profile compiles in one codegen unit exactly the packages the
    /// generated crates' manifest names ([`ONE_UNIT`]), and scripts/test builds the same ones in
    /// cargo's default units: three places that name one list.
    #[test]
    fn the_workspace_compiles_the_generated_crates_one_unit_packages_alike() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let text =
            std::fs::read_to_string(root.join("Cargo.toml")).expect("the workspace manifest");
        let manifest: toml::Table = text.parse().expect("a manifest");
        let packages = manifest["profile"]["release"]["package"]
            .as_table()
            .expect("[profile.release.package]");
        let mut one_unit: Vec<&str> = packages
            .iter()
            .filter(|(_, settings)| {
                settings
                    .get("codegen-units")
                    .and_then(toml::Value::as_integer)
                    == Some(1)
            })
            .map(|(name, _)| name.as_str())
            .collect();
        one_unit.sort_unstable();
        let mut expected = ONE_UNIT.to_vec();
        expected.sort_unstable();
        assert_eq!(one_unit, expected);
        let script = std::fs::read_to_string(root.join("scripts/test")).expect("scripts/test");
        for name in ONE_UNIT {
            assert!(
                script.contains(&format!("profile.release.package.{name}.codegen-units=16")),
                "scripts/test builds {name} in the default units"
            );
        }
    }

    /// A crate in the cache reaches the shared runtime through its own `vendor` link, so its
    /// manifest names the runtime inside the crate; whatever an older layout left there is
    /// replaced, and the shared copy is not touched by it.
    #[test]
    fn a_cached_crate_links_the_shared_runtime() {
        let root = std::env::temp_dir().join(format!("mcpgraph-vendor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let shared = root.join("vendor/0.1.0");
        let crate_dir = root.join("crates/x");
        let at = VendorAt::Shared(shared.clone());
        let runtime_manifest = shared.join("mcpgraph-runtime/Cargo.toml");

        for old in [None, Some("dir"), Some("file"), Some("elsewhere")] {
            let _ = std::fs::remove_dir_all(&crate_dir);
            std::fs::create_dir_all(&crate_dir).unwrap();
            let link = crate_dir.join("vendor");
            match old {
                Some("dir") => std::fs::create_dir_all(link.join("mcpgraph-runtime")).unwrap(),
                Some("file") => std::fs::write(&link, "old").unwrap(),
                Some(_) => std::os::unix::fs::symlink(root.join("gone"), &link).unwrap(),
                None => {}
            }
            for _ in 0..2 {
                assert_eq!(
                    place_vendor(&crate_dir, &at).unwrap(),
                    "vendor/mcpgraph-runtime",
                    "{old:?}"
                );
                assert_eq!(std::fs::read_link(&link).unwrap(), shared, "{old:?}");
                assert_eq!(
                    std::fs::read(link.join("mcpgraph-runtime/Cargo.toml")).unwrap(),
                    std::fs::read(&runtime_manifest).unwrap(),
                    "{old:?}"
                );
            }
        }
        // A relative cache: the link names the shared copy wherever it is read from.
        let relative = PathBuf::from(format!("target/mcpgraph-vendor-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&relative);
        let at = VendorAt::Shared(relative.join("vendor/0.1.0"));
        std::fs::create_dir_all(relative.join("crates/x")).unwrap();
        place_vendor(&relative.join("crates/x"), &at).unwrap();
        assert!(
            relative
                .join("crates/x/vendor/mcpgraph-runtime/Cargo.toml")
                .is_file()
        );
        std::fs::remove_dir_all(&relative).unwrap();

        assert_eq!(
            place_vendor(&root.join("emitted"), &VendorAt::Inside).unwrap(),
            "vendor/mcpgraph-runtime"
        );
        assert!(
            !std::fs::symlink_metadata(root.join("emitted/vendor"))
                .unwrap()
                .is_symlink()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
