//! The `mcpgraph` command: its products side by side, each over the compiler and the runtime,
//! none importing the command line (`cli`), which only parses arguments and prints:
//! - `aot`: `emit` and `build` (the generated crate, the build driver);
//! - `lock`: lock files made and compared, as data;
//! - `picture`: `graph`'s drawings;
//! - `studio`: the visual debugger;
//! - `toolkit`: the authoring MCP server;
//! - `atomic_write`: how each of them replaces a user's file.

mod aot;
mod atomic_write;
mod cli;
mod lock;
mod picture;
mod studio;
mod toolkit;

fn main() -> std::process::ExitCode {
    cli::main()
}
