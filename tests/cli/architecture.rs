//! ARCHITECTURE.md's invariant that no crate's modules import each other in a cycle, checked on
//! the sources: for each crate (compiler, runtime, the `mcpgraph` binary), the top-level modules
//! (a file, or a folder with its files) and the `crate::x` paths each one's code names (tests
//! and comments left out) must form a graph without cycles.

use crate::common;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of a crate's `src`: name → its files.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src).expect("read src") {
        let path = entry.expect("a directory entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        if name == "lib" || name == "main" || name.is_empty() {
            continue;
        }
        let mut files = Vec::new();
        if path.extension().is_some_and(|e| e == "rs") {
            files.push(path.clone());
        }
        let folder = src.join(&name);
        if folder.is_dir() {
            collect(&folder, &mut files);
        }
        if !files.is_empty() {
            modules.entry(name).or_insert_with(Vec::new).extend(files);
        }
    }
    modules
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read a module folder") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The code of a file without its unit tests and line comments.
fn code(path: &Path) -> String {
    strip(&std::fs::read_to_string(path).expect("read a source file"))
}

/// `text` without its unit tests (a trailing `mod tests`) and line comments.
fn strip(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules `code` names through `crate::`.
fn named(code: &str, modules: &BTreeMap<String, Vec<PathBuf>>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let group = &group[..group.find('}').unwrap_or(group.len())];
            for part in group.split(',') {
                names.insert(ident(part.trim()));
            }
        } else {
            names.insert(ident(rest));
        }
    }
    names.retain(|n| modules.contains_key(n));
    names
}

/// A cycle in `edges`, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, bool>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), false);
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next) {
                Some(false) => {
                    let start = path.iter().position(|n| n == next).unwrap_or(0);
                    let mut found = path[start..].to_vec();
                    found.push(next.clone());
                    return Some(found);
                }
                Some(true) => {}
                None => {
                    if let Some(found) = visit(next, edges, state, path) {
                        return Some(found);
                    }
                }
            }
        }
        path.pop();
        state.insert(node.to_string(), true);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node)
            && let Some(found) = visit(node, edges, &mut state, &mut Vec::new())
        {
            return Some(found);
        }
    }
    None
}

#[test]
fn no_crate_has_a_module_cycle() {
    for src in ["compiler/src", "runtime/src", "src"] {
        let modules = modules(&common::root().join(src));
        assert!(modules.len() > 3, "{src}: modules not found");
        let edges: BTreeMap<String, BTreeSet<String>> = modules
            .iter()
            .map(|(name, files)| {
                let mut uses = BTreeSet::new();
                for file in files {
                    uses.extend(named(&code(file), &modules));
                }
                uses.remove(name);
                (name.clone(), uses)
            })
            .collect();
        assert_eq!(
            cycle(&edges),
            None,
            "{src}: these modules import each other in a cycle"
        );
    }
}

/// The check itself finds a cycle where there is one (a test that could not fail proves
/// nothing).
#[test]
fn the_cycle_check_finds_a_cycle() {
    let modules: BTreeMap<String, Vec<PathBuf>> = ["a", "b", "c"]
        .into_iter()
        .map(|n| (n.to_string(), Vec::new()))
        .collect();
    let uses = |code: &str| named(&strip(code), &modules);
    assert_eq!(
        uses("use crate::{b, c::X}; // crate::a\nfn f() { crate::zzz::y() }"),
        ["b", "c"].map(String::from).into()
    );
    assert_eq!(
        uses("use crate::b;\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}"),
        ["b"].map(String::from).into()
    );
    let edges: BTreeMap<String, BTreeSet<String>> = [
        ("a", uses("use crate::b;")),
        ("b", uses("use crate::c::Thing;")),
        ("c", uses("fn f() { crate::a::g() }")),
    ]
    .into_iter()
    .map(|(n, u)| (n.to_string(), u))
    .collect();
    assert_eq!(
        cycle(&edges),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
    let mut acyclic = edges.clone();
    acyclic.insert("c".into(), BTreeSet::new());
    assert_eq!(cycle(&acyclic), None);
}
