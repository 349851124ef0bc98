//! The front end (`compile`, `check`, edits) from outside the crate: a fixture and a rendered
//! snapshot per diagnostic code, hostile input, never panicking, types, contracts, extensions,
//! edits. One test binary, a module per subject.

mod contracts;
mod diagnostic_snapshots;
mod edit;
mod extensions;
mod hostile_input;
mod never_panics;
mod types;
