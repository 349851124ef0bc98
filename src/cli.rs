use clap::{Args, Parser, Subcommand, ValueEnum};
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Checked, SourceFile, compile};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod picture;

/// Compile mcpGraph YAML files into native MCP servers, check them, or serve them.
#[derive(Parser, Debug)]
#[command(name = "mcpgraph", version, about, long_about = None, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,

    /// Serve a graph over stdio, like the original `mcpgraph -g FILE` (same as `serve FILE`).
    #[arg(short = 'g', long = "graph", value_name = "FILE")]
    graph: Option<PathBuf>,

    /// An MCP JSON file (`{"mcpServers": {...}}`) adding downstream servers; the graph file wins on a name clash.
    #[arg(short = 'm', long = "mcp", value_name = "FILE")]
    mcp: Option<PathBuf>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a graph file and report every problem, pointing into the YAML.
    Check(CheckArgs),
    /// Draw the tools of a graph file as Mermaid or Graphviz diagrams.
    Graph(GraphArgs),
}

#[derive(Args, Debug)]
struct Common {
    /// The graph file.
    file: PathBuf,
    /// An MCP JSON file (`{"mcpServers": {...}}`) adding downstream servers.
    #[arg(short = 'm', long = "mcp", value_name = "FILE")]
    mcp: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct CheckArgs {
    #[command(flatten)]
    common: Common,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Fail (exit 1) on warnings too.
    #[arg(long)]
    deny_warnings: bool,
}

#[derive(Args, Debug)]
struct GraphArgs {
    #[command(flatten)]
    common: Common,
    /// Only this tool.
    #[arg(long, value_name = "TOOL")]
    tool: Option<String>,
    /// Diagram language.
    #[arg(long, value_enum, default_value_t = Diagram::Mermaid)]
    format: Diagram,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diagram {
    Mermaid,
    Dot,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match (cli.command, cli.graph) {
        (Some(Command::Check(args)), _) => check(args),
        (Some(Command::Graph(args)), _) => graph(args),
        (None, Some(_graph)) => {
            eprintln!("mcpgraph: serving is not available in this build yet");
            ExitCode::from(2)
        }
        (None, None) => {
            let _ = <Cli as clap::CommandFactory>::command().print_help();
            ExitCode::from(2)
        }
    }
}

fn style() -> Style {
    let color = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    Style { color, width: None }
}

/// Reads and checks the graph file (and the MCP file); `Err` carries the exit code after the
/// problem was shown.
fn load(common: &Common) -> Result<(SourceFile, Checked), ExitCode> {
    let file = read(&common.file)?;
    let mcp = match &common.mcp {
        Some(path) => Some(read(path)?),
        None => None,
    };
    let checked = compile(&file, mcp.as_ref());
    Ok((file, checked))
}

fn read(path: &Path) -> Result<SourceFile, ExitCode> {
    SourceFile::read(path).map_err(|d| {
        eprintln!("error[{}]: {}", d.code, d.message);
        ExitCode::from(1)
    })
}

fn check(args: CheckArgs) -> ExitCode {
    let (file, checked) = match load(&args.common) {
        Ok(x) => x,
        Err(code) => return code,
    };
    match args.format {
        Format::Human => {
            let text = render::human_all(&checked, &file, style());
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
        Format::Json => {
            let list: Vec<_> = checked
                .diagnostics
                .iter()
                .map(|d| render::json(d, &file))
                .collect();
            println!("{}", serde_json::Value::Array(list));
        }
    }
    let failed = checked.error_count() > 0 || (args.deny_warnings && checked.warning_count() > 0);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn graph(args: GraphArgs) -> ExitCode {
    let (file, checked) = match load(&args.common) {
        Ok(x) => x,
        Err(code) => return code,
    };
    let Some(graph) = &checked.graph else {
        let text = render::human_all(&checked, &file, style());
        let _ = std::io::stderr().write_all(text.as_bytes());
        return ExitCode::from(1);
    };
    match picture::draw(graph, args.tool.as_deref(), args.format) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}
