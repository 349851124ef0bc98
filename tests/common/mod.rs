//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The project root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared` beside the project (as CI lays it out), or `MCPGRAPH_SHARED`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("MCPGRAPH_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => root().join("../shared"),
    }
}
