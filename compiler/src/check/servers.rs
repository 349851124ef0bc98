//! The servers a graph may call: its own, then an MCP file's; literal secrets in headers.

use crate::ast::{ServerDecl, TransportDecl};
use crate::diagnostics::Diagnostic;
use crate::ir::{self, Server, Transport};
use std::collections::HashSet;

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
            TransportDecl::Http { url, headers } => {
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
        });
    }
    out
}

/// W0102 for every header of `decls` whose literal value looks like a secret.
pub fn secret_headers(decls: &[ServerDecl]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for decl in decls {
        if let TransportDecl::Http { headers, .. } = &decl.transport {
            for (name, value) in headers {
                if looks_secret(&name.value) && !value.value.contains("${") {
                    out.push(Diagnostic::secret_header(value.span, &name.value));
                }
            }
        }
    }
    out
}

fn looks_secret(header: &str) -> bool {
    let h = header.to_ascii_lowercase();
    h == "authorization" || h.contains("token") || h.contains("key") || h.contains("secret")
}
