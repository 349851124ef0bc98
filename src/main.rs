//! The `mcpgraph` command line: a thin shell over the compiler and the runtime.

mod aot;
mod cli;
mod studio;
mod toolkit;

fn main() -> std::process::ExitCode {
    cli::main()
}
