//! The mcpgraph runtime: the one executor behind `mcpgraph serve`, built servers and `graph!`.

/// `graph!("x.yaml")`: embed a graph checked at compile time, with typed tools (the `macros`
/// feature, on by default).
#[cfg(feature = "macros")]
pub use mcpgraph_macros::graph;

pub mod attached;
mod cancel;
mod child;
mod client_log;
mod downstream;
mod engine;
mod envsubst;
mod evaluate;
mod executor;
mod failure;
mod graph;
mod history;
mod http;
mod in_flight;
mod js;
mod jsonata;
mod jsonlogic;
mod line_transport;
mod lock;
mod metrics;
mod mrtr;
pub mod native;
mod placement;
mod pool;
mod program;
mod serve;
mod server;
mod standalone;
pub mod stdio;
mod telemetry;
mod trace_context;
mod value;
mod versions;
mod watch;
mod watchdog;

pub use engine::{CallError, CallOptions, Engine, LoadError};
pub use evaluate::{
    EvaluateError, call_tool_once, evaluate_args, evaluate_jsonata, evaluate_logic,
};
pub use executor::debug::{DebugEvent, DebugSink, Debugger};
pub use executor::{
    Asker, Frame, LogMessage, LogSink, LogSource, NodeObserver, NodeReport, Place, Question,
    Refusal,
};
pub use failure::{Failure, FailureKind, Limit, RunError, SizedValue};
pub use graph::{EmbeddedGraph, GraphHandle, TypedTools};
pub use http::{
    DEFAULT_ADDR, ENDPOINT, FlagError, FlagValue, HTTP_FLAGS, HttpFlag, HttpFlags, HttpOptions,
    run_http, serve_http, serve_http_until, token_from_env, without_delay,
};
pub use line_transport::LineTransport;
pub use lock::{Discovered, discover, discover_once};
pub use serve::{
    HttpError, LogFormat, ServeError, call_once, init_logging, init_logging_as, run_stdio,
    serve_stdio, shutdown_signal,
};
pub use server::GraphServer;
pub use telemetry::flush as flush_traces;
pub use trace_context::TraceContext;
pub use value::{to_js_json, to_json};
pub use versions::{Version, Versions};
pub use watch::Watch;

/// Makes ring rustls' process-wide crypto provider, for HTTP clients built without a TLS
/// configuration of their own (rmcp's default client, a test's). Idempotent.
pub fn init_tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The MCP library the runtime is built on, for front ends with a handler of their own (the
/// toolkit): one version, one set of features, for every MCP server mcpgraph runs.
pub use rmcp;

/// What the runtime's own tests and the benchmarks reach inside for. Not an API.
#[doc(hidden)]
pub mod internals {
    pub use crate::evaluate::{Evaluated, both_ways};
    pub use crate::history::{History, Record};
    pub use crate::jsonata::{EvalError, Jsonata, Settings, error_code};
    pub use crate::jsonlogic::{NoVars, apply};
    pub use crate::value::{to_json, to_jvalue};
}

/// What generated code (built servers, `graph!`) refers to, through absolute paths. Not a stable
/// API: it changes with the generator.
#[doc(hidden)]
pub mod __private {
    pub use crate::engine::CallError;
    pub use crate::graph::{EmbeddedGraph, GraphHandle, TypedTools};
    pub use crate::native;
    pub use crate::standalone::{main, main_attached, main_native};
    #[cfg(feature = "macros")]
    pub use mcpgraph_macros::__compiled_expressions as compiled_expressions;
    #[cfg(feature = "macros")]
    pub use mcpgraph_macros::__differential_corpus as differential_corpus;
    pub use serde;
    pub use serde_json;
}
