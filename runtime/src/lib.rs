//! The mcpgraph runtime: the one executor behind `mcpgraph serve`, built servers and `graph!`.

pub mod history;
pub mod js;
pub mod jsonata;
pub mod jsonlogic;
pub mod value;
