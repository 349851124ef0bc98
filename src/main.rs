//! The `mcpgraph` command line: a thin shell over the compiler and the runtime.

mod aot;
mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
