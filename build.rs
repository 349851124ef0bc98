//! Ships the runtime inside the `mcpgraph` binary: `mcpgraph emit`/`build` write these sources
//! beside a generated crate, so it builds with nothing but this binary and crates.io.
//! Manifests are written standalone: workspace inheritance is resolved here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const CRATES: &[(&str, &str)] = &[
    ("compiler", "mcpgraph-compiler"),
    ("runtime", "mcpgraph-runtime"),
    ("macros", "mcpgraph-macros"),
];

fn main() {
    let root =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace: toml::Table = read_toml(&root.join("Cargo.toml"));
    let mut out = String::from(
        "/// (path inside the vendor directory, contents)\npub const FILES: &[(&str, &str)] = &[\n",
    );
    for (dir, name) in CRATES {
        let crate_dir = root.join(dir);
        println!("cargo:rerun-if-changed={}", crate_dir.join("src").display());
        println!(
            "cargo:rerun-if-changed={}",
            crate_dir.join("Cargo.toml").display()
        );
        let mut sources = Vec::new();
        collect(&crate_dir.join("src"), &mut sources);
        sources.sort();
        for file in sources {
            let relative = file
                .strip_prefix(&crate_dir)
                .expect("inside the crate")
                .to_string_lossy()
                .replace('\\', "/");
            writeln!(
                out,
                "    ({:?}, include_str!({:?})),",
                format!("{name}/{relative}"),
                file.display().to_string()
            )
            .expect("write to a String");
        }
        let manifest = standalone_manifest(&read_toml(&crate_dir.join("Cargo.toml")), &workspace);
        writeln!(
            out,
            "    ({:?}, {:?}),",
            format!("{name}/Cargo.toml"),
            manifest
        )
        .expect("write to a String");
    }
    out.push_str("];\n");
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("vendor.rs");
    std::fs::write(dest, out).expect("write vendor.rs");
    // The functions a server runs, side by side in mcpgraph-stub and mcpgraph (the generated
    // crates' build script, shared: docs/build.md "The stub's layout").
    lay_out_hot_functions(&root.join("src").join("stub.order"));
}

mod layout {
    include!("templates/server/build.rs");
}
use layout::lay_out_hot_functions;

fn read_toml(path: &Path) -> toml::Table {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("parse {}: {e}", path.display()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .flatten()
    {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A crate manifest without workspace inheritance, without dev-dependencies and lints.
fn standalone_manifest(manifest: &toml::Table, workspace: &toml::Table) -> String {
    let ws_package = workspace["workspace"]["package"]
        .as_table()
        .expect("[workspace.package]");
    let ws_deps = workspace["workspace"]["dependencies"]
        .as_table()
        .expect("[workspace.dependencies]");
    let mut out = toml::Table::new();
    let mut package = toml::Table::new();
    for (key, value) in manifest["package"].as_table().expect("[package]") {
        let resolved = match value.as_table() {
            Some(t) if t.get("workspace").and_then(toml::Value::as_bool) == Some(true) => {
                ws_package[key].clone()
            }
            _ => value.clone(),
        };
        package.insert(key.clone(), resolved);
    }
    out.insert("package".into(), toml::Value::Table(package));
    for section in ["lib", "features"] {
        if let Some(v) = manifest.get(section) {
            out.insert(section.into(), v.clone());
        }
    }
    let mut deps = toml::Table::new();
    for (name, spec) in manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
    {
        // `name = "1"` is `name = { version = "1" }`.
        let spec_table = match spec {
            toml::Value::String(version) => toml::Table::from_iter([(
                "version".to_string(),
                toml::Value::String(version.clone()),
            )]),
            other => other.as_table().cloned().unwrap_or_default(),
        };
        let mut resolved =
            if spec_table.get("workspace").and_then(toml::Value::as_bool) == Some(true) {
                match &ws_deps[name] {
                    toml::Value::String(version) => {
                        let mut t = toml::Table::new();
                        t.insert("version".into(), toml::Value::String(version.clone()));
                        t
                    }
                    toml::Value::Table(t) => t.clone(),
                    other => panic!("unexpected workspace dependency {name}: {other}"),
                }
            } else {
                spec_table.clone()
            };
        // Local keys (features, optional) add to the workspace's.
        for (k, v) in &spec_table {
            match (k.as_str(), resolved.get_mut(k)) {
                ("workspace", _) => {}
                ("features", Some(toml::Value::Array(existing))) => {
                    for f in v.as_array().into_iter().flatten() {
                        if !existing.contains(f) {
                            existing.push(f.clone());
                        }
                    }
                }
                _ => {
                    resolved.insert(k.clone(), v.clone());
                }
            }
        }
        // Sibling crates sit side by side in the vendor directory.
        if resolved.contains_key("path") {
            resolved.insert("path".into(), toml::Value::String(format!("../{name}")));
        }
        deps.insert(name.clone(), toml::Value::Table(resolved));
    }
    out.insert("dependencies".into(), toml::Value::Table(deps));
    format!(
        "# Vendored by mcpgraph: the runtime its generated servers build against.\n{}",
        toml::to_string(&out).expect("serialize a manifest")
    )
}
