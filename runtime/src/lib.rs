//! The mcpgraph runtime: the one executor behind `mcpgraph serve`, built servers and `graph!`.

/// `graph!("x.yaml")`: embed a graph checked at compile time, with typed tools.
pub use mcpgraph_macros::graph;

pub mod downstream;
pub mod engine;
pub mod envsubst;
pub mod executor;
pub mod history;
pub mod js;
pub mod jsonata;
pub mod jsonlogic;
pub mod pool;
pub mod program;
pub mod serve;
pub mod server;
pub mod standalone;
pub mod value;
pub mod watchdog;

/// What generated code (built servers, `graph!`) refers to, through absolute paths. Not a stable
/// API: it changes with the generator.
#[doc(hidden)]
pub mod __private {
    pub use crate::engine::{CallError, Engine};
    pub use crate::program::Program;
    pub use crate::serve::serve_stdio;
    pub use crate::server::GraphServer;
    pub use crate::standalone::main;
    pub use mcpgraph_compiler::Graph;
    pub use serde;
    pub use serde_json;
    pub use tokio;
    pub use tokio_util::sync::CancellationToken;
}
