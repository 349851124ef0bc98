//! The servers a graph may call: its own, then an MCP file's; literal secrets in their
//! configuration (headers, URLs, `env`, `args`); relative `caFile` paths anchored to their file.

use crate::ast::{ServerDecl, TransportDecl};
use crate::diagnostics::Diagnostic;
use crate::ir::{self, Server, Transport};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The servers of the graph file, then those of the MCP file whose names the graph does not use.
pub fn servers(
    own: &[ServerDecl],
    extra: &[ServerDecl],
    diags: &mut Vec<Diagnostic>,
) -> Vec<Server> {
    let mut out: Vec<Server> = Vec::new();
    let own_names: HashSet<&str> = own.iter().map(|s| s.name.value.as_str()).collect();
    let chosen = own.iter().map(|d| (d, false)).chain(
        extra
            .iter()
            .filter(|s| !own_names.contains(s.name.value.as_str()))
            .map(|d| (d, true)),
    );
    for (decl, external) in chosen {
        let transport = match &decl.transport {
            TransportDecl::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                if !external {
                    diags.extend(secret_headers(std::slice::from_ref(decl)));
                }
                let Some(command) = command else { continue };
                Transport::Stdio {
                    command: command.value.clone(),
                    args: args.iter().map(|a| a.value.clone()).collect(),
                    env: env
                        .iter()
                        .map(|(k, v)| (k.value.clone(), v.value.clone()))
                        .collect(),
                    cwd: cwd.as_ref().map(|c| c.value.clone()),
                }
            }
            TransportDecl::Http {
                url,
                headers,
                ca_file,
            } => {
                // The MCP file's servers are linted by the caller, which knows that file.
                if !external {
                    diags.extend(secret_headers(std::slice::from_ref(decl)));
                }
                let Some(url) = url else { continue };
                Transport::Http {
                    url: url.value.clone(),
                    headers: headers
                        .iter()
                        .map(|(k, v)| (k.value.clone(), v.value.clone()))
                        .collect(),
                    ca_file: ca_file.as_ref().map(|c| c.value.clone()),
                }
            }
            TransportDecl::Invalid => continue,
        };
        out.push(Server {
            name: decl.name.value.clone(),
            external,
            transport,
            timeout_ms: decl
                .timeout_ms
                .as_ref()
                .map_or(ir::DEFAULT_SERVER_TIMEOUT_MS, |t| t.value),
            lock: None,
        });
    }
    out
}

/// The absolute directory of the file named `name` (a path from the current directory).
pub fn directory_of(name: &str) -> PathBuf {
    let parent = Path::new(name)
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::path::absolute(parent).unwrap_or_else(|_| parent.to_path_buf())
}

/// Makes each relative `caFile` and stdio `cwd` of `decls` absolute from `dir`, the directory
/// of the file it is written in (docs/semantics.md, "Paths in server configurations"): the
/// graph runs in a process whose current directory is the MCP client's choice, or in a built
/// server that has left the build's directory. A path that begins with `${` is taken as
/// written (the variable decides where it points).
pub fn anchor_paths(decls: &mut [ServerDecl], dir: &Path) {
    for decl in decls {
        let path = match &mut decl.transport {
            TransportDecl::Http { ca_file, .. } => ca_file,
            TransportDecl::Stdio { cwd, .. } => cwd,
            TransportDecl::Invalid => continue,
        };
        if let Some(path) = path
            && !path.value.starts_with("${")
            && Path::new(&path.value).is_relative()
        {
            path.value = dir.join(&path.value).to_string_lossy().into_owned();
        }
    }
}

/// W0102 for every literal value of `decls` that looks like a secret: a header such as
/// `Authorization`, `Proxy-Authorization`, `Cookie` or `X-Api-Key`; credentials or a key-like
/// query parameter in a URL; a key-like `env` variable; a key-like `args` flag and its value.
/// A value that reads the environment (`${VAR}`) is never one.
pub fn secret_headers(decls: &[ServerDecl]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for decl in decls {
        match &decl.transport {
            TransportDecl::Http { headers, url, .. } => {
                for (name, value) in headers {
                    if secret_header_name(&name.value) && is_literal(&value.value) {
                        out.push(Diagnostic::secret_header(value.span, &name.value));
                    }
                }
                if let Some(url) = url
                    && let Some(what) = secret_in_url(&url.value)
                {
                    out.push(Diagnostic::secret_in_url(url.span, &what));
                }
            }
            TransportDecl::Stdio { env, args, .. } => {
                for (name, value) in env {
                    if key_like(&name.value) && is_literal(&value.value) && !value.value.is_empty()
                    {
                        out.push(Diagnostic::secret_in_env(value.span, &name.value));
                    }
                }
                let mut previous: Option<&str> = None;
                for arg in args {
                    if let Some(flag) = secret_in_arg(previous, &arg.value) {
                        out.push(Diagnostic::secret_in_args(arg.span, &flag));
                    }
                    previous = Some(arg.value.as_str());
                }
                if let Some(url) = args.iter().find_map(|a| {
                    secret_in_url(&a.value)
                        .filter(|_| a.value.contains("://"))
                        .map(|w| (a, w))
                }) {
                    out.push(Diagnostic::secret_in_url(url.0.span, &url.1));
                }
            }
            TransportDecl::Invalid => {}
        }
    }
    out
}

/// Written as is in the file, not read from the environment at run time. A file path (a key
/// file, say) names where a secret is, which is not a secret.
fn is_literal(value: &str) -> bool {
    !value.contains("${")
        && !["/", "./", "../", "~/"]
            .iter()
            .any(|p| value.starts_with(p))
}

fn secret_header_name(header: &str) -> bool {
    let h = header.to_ascii_lowercase();
    matches!(
        h.as_str(),
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) || key_like(&h)
}

/// A name that usually holds a credential: `API_KEY`, `githubToken`, `client-secret`,
/// `password`, `access_token`, `sig`...
fn key_like(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    const PARTS: &[&str] = &[
        "token",
        "key",
        "secret",
        "password",
        "passwd",
        "credential",
        "cookie",
        "signature",
    ];
    // `auth` as in `x-auth`, `oauth`, `authorization`; not `author`.
    let auth = n.contains("auth") && (!n.contains("author") || n.contains("authoriz"));
    auth || PARTS.iter().any(|p| n.contains(p))
        || matches!(n.as_str(), "pwd" | "pass" | "sig" | "jwt")
}

/// What of a URL carries a literal secret: a password in its credentials (`user:pass@`), or a
/// key-like query parameter with a value.
fn secret_in_url(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && let Some((_, password)) = userinfo.split_once(':')
        && !password.is_empty()
        && is_literal(password)
    {
        return Some("the password of its credentials".to_string());
    }
    let query = url.split_once('?')?.1;
    let query = query.split('#').next().unwrap_or("");
    query.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (key_like(name) && !value.is_empty() && is_literal(value))
            .then(|| format!("the query parameter `{name}`"))
    })
}

/// The flag of an `args` entry that carries a literal secret: `--api-key=abc`, `TOKEN=abc`, or
/// the value after a key-like flag (`--token`, `abc`).
fn secret_in_arg(previous: Option<&str>, arg: &str) -> Option<String> {
    if let Some((flag, value)) = arg.split_once('=')
        && !value.is_empty()
        && is_literal(value)
        && !flag.contains(['/', ' '])
        && key_like(flag)
    {
        return Some(flag.to_string());
    }
    let previous = previous?;
    (is_literal(arg)
        && previous.starts_with('-')
        && !previous.contains('=')
        && key_like(previous)
        && !arg.starts_with('-'))
    .then(|| previous.to_string())
}

#[cfg(test)]
mod tests {
    use crate::diagnostics::SourceFile;
    use crate::ir::Transport;
    use std::path::Path;

    /// The `cwd` of each stdio server of a graph checked as if it were in `dir`.
    fn cwds(servers: &str, dir: &Path) -> Vec<Option<String>> {
        let text = format!(
            "version: \"1.0\"\nserver: {{ name: s, version: \"1\" }}\nmcpServers:\n{servers}tools:\n  - name: t\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: exit }}\n      - {{ id: exit, type: exit }}\n"
        );
        let checked = crate::compile_from(&SourceFile::new("g.yaml", text), dir, None, None);
        let graph = checked
            .graph
            .unwrap_or_else(|| panic!("{:?}", checked.diagnostics));
        graph
            .servers
            .iter()
            .map(|server| match &server.transport {
                Transport::Stdio { cwd, .. } => cwd.clone(),
                Transport::Http { .. } => None,
            })
            .collect()
    }

    #[test]
    fn a_relative_cwd_is_taken_from_the_graph_files_directory() {
        let dir = Path::new("/srv/graphs");
        let servers = "  rel: { command: python3, args: [s.py], cwd: ../tools }\n  \
                       abs: { command: python3, args: [s.py], cwd: /opt/tools }\n  \
                       var: { command: python3, args: [s.py], cwd: \"${TOOLS:-tools}\" }\n  \
                       none: { command: python3, args: [s.py] }\n";
        assert_eq!(
            cwds(servers, dir),
            [
                Some("/srv/graphs/../tools".to_string()),
                Some("/opt/tools".to_string()),
                Some("${TOOLS:-tools}".to_string()),
                None,
            ]
        );
    }
}
