//! Serving over stdio as MCP clients see it: the shared corpora through `serve` and `-g`, the
//! process lifecycle, real npm servers downstream, the Python `mcp` client and the TypeScript
//! ones, `--watch`, the run limits, hostile downstream servers and requests, the toolkit. One
//! test binary, a module per subject.

#[path = "../common/mod.rs"]
mod common;

mod downstream_hardening;
mod hostile_ids;
mod lifecycle;
mod logging;
mod python_client;
mod real_clients;
mod real_servers;
mod request_hardening;
mod run_limits;
mod serve_conformance;
mod toolkit;
mod watch;
