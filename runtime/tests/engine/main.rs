//! The runtime from outside the crate: the official JSONata and JSON Logic suites, the executor's
//! semantics and extensions, `graph!`'s compile errors. One test binary, a module per subject.

mod extensions;
mod graph_macro_ui;
mod jsonata_suite;
mod jsonlogic_suite;
mod semantics;
mod shared_start;
