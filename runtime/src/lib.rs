//! The mcpgraph runtime: the one executor behind `mcpgraph serve`, built servers and `graph!`.

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
pub mod value;
