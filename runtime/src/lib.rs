//! The mcpgraph runtime: the one executor behind `mcpgraph serve`, built servers and `graph!`.

/// `graph!("x.yaml")`: embed a graph checked at compile time, with typed tools.
pub use mcpgraph_macros::graph;

pub mod cancel;
pub mod downstream;
pub mod engine;
pub mod envsubst;
pub mod executor;
pub mod failure;
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

pub use engine::{CallError, Engine, LoadError};
pub use executor::{NodeObserver, NodeReport};
pub use failure::{Failure, FailureKind, RunError};
pub use serve::{ServeError, call_once, init_logging, run_stdio, serve_stdio};
pub use server::GraphServer;
pub use value::{to_js_json, to_json};

/// What generated code (built servers, `graph!`) refers to, through absolute paths. Not a stable
/// API: it changes with the generator.
#[doc(hidden)]
pub mod __private {
    pub use crate::engine::{CallError, Engine, LoadError};
    pub use crate::serve::{ServeError, serve_stdio};
    pub use crate::server::GraphServer;
    pub use crate::standalone::main;
    pub use mcpgraph_compiler::Graph;
    pub use serde;
    pub use serde_json;
    pub use tokio;
    pub use tokio_util::sync::CancellationToken;
}
