//! Discovery for `mcpgraph lock` and `check --online`: each downstream server started the way a
//! call would start it (its env, `${VAR}` expansion, stdio or HTTP), its contract read, and the
//! server closed again. The lock file itself is the compiler's (`mcpgraph_compiler::lock`).

use crate::downstream::{self, Connection};
use crate::failure::Failure;
use crate::serve::{ServeError, init_logging};
use mcpgraph_compiler::ir::Server;
use mcpgraph_compiler::lock::LockedServer;
use std::sync::Arc;

/// What discovery found: each server by name, in the order given, with its contract or why it
/// could not be read (the text is redacted: no expanded `${VAR}` value in it).
pub type Discovered = Vec<(String, Result<LockedServer, String>)>;

/// Reads the contracts of `servers`, all at once. A server that cannot be started, does not
/// answer `initialize` or `tools/list` within its `timeoutMs` (each), or answers with an error
/// has its reason; the others are read all the same.
pub async fn discover(servers: &[Server]) -> Discovered {
    let reads = servers.iter().map(|server| async move {
        let contract = read_contract(server)
            .await
            .map_err(|failure| downstream::redacted(failure).to_string());
        (server.name.clone(), contract)
    });
    futures::future::join_all(reads).await
}

/// [`discover`] as a whole process does it (`mcpgraph lock`): logging, a runtime, every server
/// closed before it returns.
pub fn discover_once(servers: &[Server]) -> Result<Discovered, ServeError> {
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    Ok(runtime.block_on(discover(servers)))
}

async fn read_contract(server: &Server) -> Result<LockedServer, Failure> {
    let connection = Arc::new(downstream::start(server).await?);
    let contract = connection.contract(server.timeout_ms).await;
    Connection::close(connection).await;
    contract
}
