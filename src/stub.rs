//! `mcpgraph-stub`, the prebuilt server that `mcpgraph build` copies and attaches a checked graph
//! to (docs/build.md). It is the runtime's `main` and nothing else: it links neither the compiler's
//! code generation nor clap, the studio or the toolkit, so a server built from it is the size of one
//! built by `--native`.

fn main() -> std::process::ExitCode {
    mcpgraph_runtime::__private::main_attached()
}
