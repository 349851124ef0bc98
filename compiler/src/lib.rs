//! The mcpgraph front end: an mcpGraph YAML file → a checked [`ir::Graph`], or diagnostics.
//!
//! ```text
//! YAML text ─ yaml::parse ─▶ spanned tree ─ ast::build ─▶ typed AST ─ check::check ─▶ IR
//! ```
//! Every stage pushes diagnostics and carries on, so one run reports every problem in the file.
//! This crate depends on neither tokio nor rmcp: the `graph!` macro links it.

pub mod ast;
pub mod check;
#[cfg(feature = "codegen")]
pub mod codegen;
pub mod diagnostics;
pub mod edit;
pub mod expr;
pub mod fuse;
pub mod ir;
pub mod lock;
pub mod logic;
#[cfg(feature = "codegen")]
pub mod names;
#[cfg(feature = "codegen")]
pub mod native;
pub mod project;
pub mod render;
pub mod types;
pub mod yaml;

pub use diagnostics::{Code, Diagnostic, Severity, SourceFile, Span};
pub use ir::Graph;
pub use project::{LockFile, Project, Sources};

/// What checking a graph file produced.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Present when there is no error (warnings allowed).
    pub graph: Option<Graph>,
    /// Sorted by position; errors of the MCP file (`-m`) first.
    pub diagnostics: Vec<Diagnostic>,
}

impl Checked {
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
    pub fn warning_count(&self) -> usize {
        self.diagnostics.len() - self.error_count()
    }
}

/// Parses and checks a graph file, with the servers of an optional MCP JSON file (`-m`), and no
/// lock file.
pub fn compile(file: &SourceFile, mcp_file: Option<&SourceFile>) -> Checked {
    compile_with(file, mcp_file, None)
}

/// Parses and checks a graph file, with the servers of an optional MCP JSON file (`-m`) and the
/// downstream contracts of an optional lock file ([`lock`]): with a lock, calls are checked
/// against the locked tools and their outputs are typed by the locked output schemas.
pub fn compile_with(
    file: &SourceFile,
    mcp_file: Option<&SourceFile>,
    lock_file: Option<&SourceFile>,
) -> Checked {
    compile_from(file, &check::directory_of(&file.name), mcp_file, lock_file)
}

/// [`compile_with`] for a file whose name is not its path from the current directory (`graph!`
/// names it relative to the crate's `Cargo.toml`): `dir` is the directory it is in, from which
/// relative paths written in it (a server's `caFile`) are taken.
pub fn compile_from(
    file: &SourceFile,
    dir: &std::path::Path,
    mcp_file: Option<&SourceFile>,
    lock_file: Option<&SourceFile>,
) -> Checked {
    let mut diagnostics = Vec::new();
    let extra_servers = mcp_file
        .map(|m| mcp_servers(m, &mut diagnostics))
        .unwrap_or_default();
    let lock = lock_file.and_then(|l| match lock::Lock::parse(l) {
        Ok(lock) => Some(lock),
        Err(d) => {
            diagnostics.push(d);
            None
        }
    });
    let mut file_diags = Vec::new();
    let graph = match yaml::parse(&file.text) {
        Ok(tree) => {
            let mut typed = ast::build(&tree, &mut file_diags);
            check::anchor_paths(&mut typed.servers, dir);
            check::check(
                &typed,
                &file.text,
                &file.name,
                &extra_servers,
                lock.as_ref(),
                &mut file_diags,
            )
        }
        Err(d) => {
            file_diags.push(d);
            None
        }
    };
    // A stable sort by a cheap key: diagnostics at one place keep the order they were found in.
    file_diags.sort_by_cached_key(|d| (d.span().map(|s| s.start), d.severity, d.code.as_str()));
    file_diags.dedup();
    diagnostics.extend(file_diags);
    let graph = graph.filter(|_| diagnostics.iter().all(|d| !d.is_error()));
    Checked { graph, diagnostics }
}

/// The servers of an MCP JSON file (`-m`), for a built server at run time; the error is the text
/// of every problem.
pub fn mcp_file_servers(file: &SourceFile) -> Result<Vec<ir::Server>, String> {
    let mut diagnostics = Vec::new();
    let decls = mcp_servers(file, &mut diagnostics);
    // A built server starts whatever warnings its MCP file deserves; `check -m` shows them.
    diagnostics.retain(Diagnostic::is_error);
    let mut more = Vec::new();
    let servers = check::servers(&[], &decls, &mut more);
    diagnostics.extend(more.into_iter().filter(Diagnostic::is_error));
    if diagnostics.is_empty() {
        Ok(servers)
    } else {
        // The caller names the file; each line gives the position in it.
        Err(diagnostics
            .iter()
            .map(|d| match d.span() {
                Some(span) => {
                    let (line, column) = diagnostics::line_col(&file.text, span.start);
                    format!("{line}:{column}: {}", d.message)
                }
                None => d.message.clone(),
            })
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// The `mcpServers` of an MCP JSON file (Claude Desktop format). Its problems are reported as
/// E0501, pointing into that file.
fn mcp_servers(file: &SourceFile, diagnostics: &mut Vec<Diagnostic>) -> Vec<ast::ServerDecl> {
    let shared = std::sync::Arc::new(file.clone());
    let tree = match yaml::parse(&file.text) {
        Ok(tree) => tree,
        Err(d) => {
            diagnostics.push(Diagnostic::in_mcp_file(&shared, d));
            return Vec::new();
        }
    };
    let Some(servers) = tree.get("mcpServers") else {
        return Vec::new();
    };
    let mut inner = Vec::new();
    let mut decls = ast::servers_map(servers, "mcpServers", &mut inner);
    check::anchor_paths(&mut decls, &check::directory_of(&file.name));
    for d in inner.into_iter().filter(Diagnostic::is_error) {
        // A reserved name keeps its own code; other problems are "the file cannot be used".
        diagnostics.push(if d.code == Code::E0612 {
            Diagnostic::in_file(&shared, d)
        } else {
            Diagnostic::in_mcp_file(&shared, d)
        });
    }
    for d in check::secret_headers(&decls) {
        diagnostics.push(Diagnostic::in_file(&shared, d));
    }
    decls
}
