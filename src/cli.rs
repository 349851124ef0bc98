use clap::{Args, Parser, Subcommand, ValueEnum};
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Checked, SourceFile, compile, compile_with};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) mod lock;
pub(crate) mod picture;

use crate::aot;

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

    /// With -g: serve each new version of the graph (and of its lock and -m files) when saved.
    #[arg(long, requires = "graph")]
    watch: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check a graph file and report every problem, pointing into the YAML.
    Check(CheckArgs),
    /// Draw the tools of a graph file as Mermaid or Graphviz diagrams.
    Graph(GraphArgs),
    /// Serve a graph as an MCP server over stdio, or over streamable HTTP with --http.
    Serve(ServeArgs),
    /// Run one tool once, without an MCP client: the result JSON on stdout.
    Call(CallArgs),
    /// Write the Rust crate of a graph's server (readable; builds with cargo and crates.io only).
    Emit(EmitArgs),
    /// Build a graph into a native MCP server binary.
    Build(BuildArgs),
    /// Lock the tools of the downstream servers a graph calls, in `<stem>.lock.json` beside it.
    ///
    /// Starts each server the graph's calls use (as `serve` would), reads its `serverInfo` and
    /// `tools/list`, and writes them for `check`, `build`, `emit` and `serve` to read.
    Lock(LockArgs),
    /// Serve the authoring toolkit over stdio: build, run and fix a graph's tools over MCP.
    ///
    /// The original `mcpgraphtoolkit`'s tools (discover servers, test expressions, add, update,
    /// delete and run tools) and checkGraph, drawGraph, lockGraph, buildGraph. Every edit is
    /// checked by the compiler before it is written (docs/toolkit.md).
    Toolkit(Common),
    /// Debug a graph in the browser: its tools drawn, runs live, breakpoints, steps, history.
    ///
    /// Serves a local web page on 127.0.0.1 (everything embedded, nothing from the network)
    /// that follows the file as it is edited (docs/studio.md).
    Studio(StudioArgs),
}

#[derive(Args, Debug)]
struct StudioArgs {
    #[command(flatten)]
    common: Common,
    /// The port on 127.0.0.1 (0: any free port; the address is printed on stderr).
    #[arg(long, default_value_t = 7821)]
    port: u16,
    /// Open the page in the default browser.
    #[arg(long)]
    open: bool,
}

#[derive(Args, Debug)]
struct LockArgs {
    #[command(flatten)]
    common: Common,
    /// Compare the live servers with the lock file instead of writing it: exit 1 when a tool the
    /// graph calls differs.
    #[arg(long)]
    check: bool,
}

#[derive(Args, Debug)]
struct EmitArgs {
    #[command(flatten)]
    common: Common,
    /// The directory to write the crate into.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: PathBuf,
}

#[derive(Args, Debug)]
struct BuildArgs {
    #[command(flatten)]
    common: Common,
    /// Where to put the server binary.
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: PathBuf,
    /// Link glibc statically (x86_64-unknown-linux-gnu, crt-static): one file with no dependencies.
    #[arg(long = "static")]
    static_: bool,
    /// A debug build (faster to build, slower to run).
    #[arg(long, conflicts_with = "small")]
    debug: bool,
    /// Optimise the whole server for size at link time: about a third less resident memory,
    /// the same speed, but each build takes minutes (the runtime is re-optimised every time).
    #[arg(long)]
    small: bool,
}

#[derive(Args, Debug)]
struct CallArgs {
    #[command(flatten)]
    common: Common,
    /// The tool to run.
    tool: String,
    /// The arguments, as a JSON object (default `{}`).
    args: Option<String>,
    /// Write each node execution (index, node, type, duration, output; attempts and failure
    /// kind where they apply; map items and parallel branches too) as a JSON line to stderr.
    #[arg(long)]
    trace: bool,
    /// Answer the `ask` node NODE: a JSON object accepts with that content, `decline` declines.
    /// Repeatable; a node's answers are used in order. An ask without an answer is unavailable.
    #[arg(long = "answer", value_name = "NODE=ANSWER")]
    answers: Vec<String>,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// Serve each new version of the graph (and of its lock and -m files) when it is saved;
    /// calls in flight finish on the old one, a version that does not check is only reported.
    #[arg(long)]
    watch: bool,
    #[command(flatten)]
    http: HttpArgs,
}

/// Serving over streamable HTTP (docs/http.md).
#[derive(Args, Debug)]
struct HttpArgs {
    /// Serve streamable HTTP at ADDR (default 127.0.0.1:8080), endpoint /mcp, stateless for
    /// every protocol era, instead of stdio.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = mcpgraph_runtime::DEFAULT_ADDR, value_parser = parse_addr)]
    http: Option<String>,
    /// Also accept this Host header: a proxy's public name (loopback names always pass).
    #[arg(long = "allowed-host", value_name = "NAME", requires = "http")]
    allowed_hosts: Vec<String>,
    /// Accept browser requests from this Origin (scheme://host:port); any other Origin is refused.
    #[arg(long = "allowed-origin", value_name = "ORIGIN", requires = "http")]
    allowed_origins: Vec<String>,
    /// Require `Authorization: Bearer <token>` on /mcp and /metrics, the token read from $VAR.
    #[arg(long = "auth-token-env", value_name = "VAR", requires = "http")]
    auth_token_env: Option<String>,
    /// Serve on a non-loopback address without a token.
    #[arg(long, requires = "http")]
    allow_unauthenticated: bool,
    /// The largest request body, in bytes.
    #[arg(long = "max-body", value_name = "BYTES", default_value_t = mcpgraph_runtime::HttpOptions::default().max_body_bytes, requires = "http")]
    max_body: usize,
    /// How long SIGTERM waits for calls in flight, in seconds.
    #[arg(
        long = "drain-timeout",
        value_name = "SECS",
        default_value_t = 30.0,
        requires = "http"
    )]
    drain_timeout: f64,
    /// Give 2025-era clients sessions (Mcp-Session-Id): questions and list_changed reach them,
    /// but only one replica can serve them.
    #[arg(long, requires = "http")]
    sessions: bool,
    /// Log lines as text or as JSON objects (HTTP logs one line per call).
    #[arg(long = "log-format", value_name = "FORMAT", default_value = "text", value_parser = parse_log_format)]
    log_format: mcpgraph_runtime::LogFormat,
}

fn parse_addr(text: &str) -> Result<String, String> {
    match text.rsplit_once(':') {
        Some((_, port)) if port.parse::<u16>().is_ok() => Ok(text.to_string()),
        _ => Err("expected HOST:PORT, such as 127.0.0.1:8080 or 0.0.0.0:0".to_string()),
    }
}

fn parse_log_format(text: &str) -> Result<mcpgraph_runtime::LogFormat, String> {
    text.parse()
}

impl HttpArgs {
    /// The options, when HTTP was asked for; the token variable's problem otherwise.
    fn options(&self) -> Result<Option<mcpgraph_runtime::HttpOptions>, String> {
        let Some(addr) = &self.http else {
            return Ok(None);
        };
        let mut options = mcpgraph_runtime::HttpOptions::default();
        options.addr = addr.clone();
        options.allowed_hosts = self.allowed_hosts.clone();
        options.allowed_origins = self.allowed_origins.clone();
        options.auth_token = match &self.auth_token_env {
            Some(var) => Some(mcpgraph_runtime::token_from_env(var)?),
            None => None,
        };
        options.allow_unauthenticated = self.allow_unauthenticated;
        options.max_body_bytes = self.max_body;
        options.drain_timeout = std::time::Duration::try_from_secs_f64(self.drain_timeout)
            .map_err(|_| "--drain-timeout needs a number of seconds".to_string())?;
        options.sessions = self.sessions;
        options.log_format = self.log_format;
        Ok(Some(options))
    }
}

#[derive(Args, Debug)]
pub(crate) struct Common {
    /// The graph file.
    pub(crate) file: PathBuf,
    /// An MCP JSON file (`{"mcpServers": {...}}`) adding downstream servers.
    #[arg(short = 'm', long = "mcp", value_name = "FILE")]
    pub(crate) mcp: Option<PathBuf>,
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
    /// Check the calls against the live servers (started as `lock` starts them) instead of the
    /// lock file; writes nothing.
    #[arg(long)]
    online: bool,
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
        (Some(Command::Serve(args)), _) => match args.http.options() {
            Ok(http) => serve(&args.common, args.watch, http, args.http.log_format),
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        },
        (Some(Command::Call(args)), _) => call(args),
        (Some(Command::Emit(args)), _) => emit(args),
        (Some(Command::Build(args)), _) => build(args),
        (Some(Command::Lock(args)), _) if args.check => lock::check(&args.common),
        (Some(Command::Lock(args)), _) => lock::write(&args.common),
        (Some(Command::Toolkit(common)), _) => crate::toolkit::main(common.file, common.mcp),
        (Some(Command::Studio(args)), _) => crate::studio::main(crate::studio::Options {
            file: args.common.file,
            mcp: args.common.mcp,
            port: args.port,
            open: args.open,
        }),
        (None, Some(graph)) => serve(
            &Common {
                file: graph,
                mcp: cli.mcp,
            },
            cli.watch,
            None,
            mcpgraph_runtime::LogFormat::Text,
        ),
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

/// Reads and checks the graph file (and the MCP file, and the lock file beside the graph);
/// `Err` carries the exit code after the problem was shown.
fn load(common: &Common) -> Result<(SourceFile, Checked), ExitCode> {
    let file = read(&common.file)?;
    let mcp = match &common.mcp {
        Some(path) => Some(read(path)?),
        None => None,
    };
    let checked = compile_beside(&common.file, &file, mcp.as_ref());
    Ok((file, checked))
}

/// Checks a graph with the lock file beside it, when there is one (never starting a server): a
/// lock that cannot be read is one more error, first in the list.
pub(crate) fn compile_beside(path: &Path, file: &SourceFile, mcp: Option<&SourceFile>) -> Checked {
    match mcpgraph_compiler::lock::read_beside(path) {
        None => compile(file, mcp),
        Some(Ok(lock)) => compile_with(file, mcp, Some(&lock)),
        Some(Err(d)) => {
            let mut checked = compile(file, mcp);
            checked.diagnostics.insert(0, d);
            checked.graph = None;
            checked
        }
    }
}

fn read(path: &Path) -> Result<SourceFile, ExitCode> {
    SourceFile::read(path).map_err(|d| {
        eprintln!("error[{}]: {}", d.code, d.message);
        ExitCode::from(1)
    })
}

fn check(args: CheckArgs) -> ExitCode {
    let loaded = if args.online {
        lock::online(&args.common)
    } else {
        load(&args.common).map(|(file, checked)| (file, checked, true))
    };
    let (file, checked, complete) = match loaded {
        Ok(x) => x,
        Err(code) => return code,
    };
    match args.format {
        Format::Human => {
            let text = render::human_all(&checked, &file, style());
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
        Format::Json => {
            // One line index for the whole list: `json` per diagnostic would index the file each time.
            println!("{}", render::json_all(&checked, &file));
        }
    }
    // `--online` with a server that could not be read checked less than it was asked to.
    let failed = !complete
        || checked.error_count() > 0
        || (args.deny_warnings && checked.warning_count() > 0);
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

/// `serve FILE` and `-g FILE`: a graph that does not check still answers the handshake, with its
/// diagnostics in `instructions` and in every call's result (and on stderr). With `--watch`,
/// each saved version of the graph, its lock file or the -m file is read again (docs/watch.md).
fn serve(
    common: &Common,
    watch: bool,
    http: Option<mcpgraph_runtime::HttpOptions>,
    log_format: mcpgraph_runtime::LogFormat,
) -> ExitCode {
    // Made before the first read, so a save during it is seen as a change.
    let watch = watch.then(|| {
        let mut files = vec![
            common.file.clone(),
            mcpgraph_compiler::lock::lock_path(&common.file),
        ];
        files.extend(common.mcp.clone());
        let (path, mcp) = (common.file.clone(), common.mcp.clone());
        mcpgraph_runtime::Watch::new(files, style(), move || {
            read_for_serve(&path, mcp.as_deref())
        })
    });
    let (file, checked) = read_for_serve(&common.file, common.mcp.as_deref());
    if !checked.diagnostics.is_empty() {
        let text = render::human_all(&checked, &file, style());
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    let make_server = move || {
        let server = mcpgraph_runtime::GraphServer::for_checked(checked, &file);
        Ok(match watch {
            Some(watch) => server.watch(watch),
            None => server,
        })
    };
    match http {
        Some(options) => mcpgraph_runtime::run_http(make_server, options),
        None => {
            mcpgraph_runtime::init_logging_as(log_format, "warn");
            mcpgraph_runtime::run_stdio(make_server)
        }
    }
}

/// The graph file checked with its -m and lock files. A file that cannot be read (missing, not
/// UTF-8) is served like a graph that does not check: the client sees why in `instructions`
/// rather than a dead connection.
pub(crate) fn read_for_serve(path: &Path, mcp: Option<&Path>) -> (SourceFile, Checked) {
    let unreadable = |d: mcpgraph_compiler::Diagnostic| {
        let file = SourceFile::new(path.display().to_string(), String::new());
        let checked = Checked {
            graph: None,
            diagnostics: vec![d],
        };
        (file, checked)
    };
    match SourceFile::read(path) {
        Err(d) => unreadable(d),
        Ok(file) => match mcp.map(SourceFile::read).transpose() {
            Err(d) => unreadable(d),
            Ok(mcp) => {
                let checked = compile_beside(path, &file, mcp.as_ref());
                (file, checked)
            }
        },
    }
}

/// `call FILE TOOL [JSON]`: the result on stdout and exit 0, or the error on stderr and exit 1.
fn call(args: CallArgs) -> ExitCode {
    let (file, checked) = match load(&args.common) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if checked.graph.is_none() {
        let text = render::human_all(&checked, &file, style());
        let _ = std::io::stderr().write_all(text.as_bytes());
        return ExitCode::from(1);
    }
    let arguments = match args
        .args
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
    {
        None => serde_json::Map::new(),
        Some(Ok(serde_json::Value::Object(map))) => map,
        Some(Ok(other)) => {
            eprintln!("error: the arguments must be a JSON object, not {other}");
            return ExitCode::from(2);
        }
        Some(Err(e)) => {
            eprintln!("error: the arguments are not valid JSON: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(graph) = checked.graph else {
        return ExitCode::from(1);
    };
    // The engine's debugging surface, watching: one line per executed node on stderr.
    let debugger = args.trace.then(|| {
        mcpgraph_runtime::Debugger::watching(|event| {
            let mcpgraph_runtime::DebugEvent::Finished(r) = event else {
                return;
            };
            let mut line = serde_json::json!({
                "index": r.index - 1,
                "node": r.node,
                "type": r.node_type,
                "durationMs": r.duration.as_secs_f64() * 1000.0,
                "output": mcpgraph_runtime::to_json(r.output),
            });
            if let Some(attempts) = r.attempts {
                line["attempts"] = attempts.into();
            }
            if let Some(kind) = r.failed {
                line["failed"] = kind.as_str().into();
            }
            eprintln!("{line}");
        })
    });
    // Without answers nobody can be asked: asks are unavailable before their message is
    // evaluated, as for a client without elicitation.
    let asker = match answers(&args.answers) {
        Ok(asker) => (!args.answers.is_empty()).then_some(asker),
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let options = mcpgraph_runtime::CallOptions {
        debugger,
        asker,
        ..Default::default()
    };
    let outcome = mcpgraph_runtime::call_once(graph, &args.tool, arguments, options);
    match outcome {
        Ok(value) => {
            println!("{}", mcpgraph_runtime::to_js_json(&value));
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

/// The checked graph, or the diagnostics shown and exit 1: `emit` and `build` refuse a graph
/// with errors.
fn checked_graph(common: &Common) -> Result<mcpgraph_compiler::Graph, ExitCode> {
    let (file, checked) = load(common)?;
    if !checked.diagnostics.is_empty() {
        let text = render::human_all(&checked, &file, style());
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    checked.graph.ok_or(ExitCode::from(1))
}

fn regenerate_command(common: &Common, flag: &str, out: &Path) -> String {
    let mut command = format!("mcpgraph {flag} {}", common.file.display());
    if let Some(m) = &common.mcp {
        command.push_str(&format!(" -m {}", m.display()));
    }
    command.push_str(&format!(" -o {}", out.display()));
    command
}

fn emit(args: EmitArgs) -> ExitCode {
    let graph = match checked_graph(&args.common) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let regenerate = regenerate_command(&args.common, "emit", &args.out);
    match aot::emit(&graph, &args.out, &aot::VendorAt::Inside, &regenerate) {
        Ok(()) => {
            eprintln!(
                "wrote the crate of {} to {} (build it with `cargo build --release --locked`)",
                graph.source_name,
                args.out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: cannot write {}: {e}", args.out.display());
            ExitCode::from(1)
        }
    }
}

fn build(args: BuildArgs) -> ExitCode {
    let graph = match checked_graph(&args.common) {
        Ok(g) => g,
        Err(code) => return code,
    };
    let options = aot::BuildOptions {
        profile: if args.debug {
            aot::Profile::Debug
        } else if args.small {
            aot::Profile::Small
        } else {
            aot::Profile::Release
        },
        static_: args.static_,
        source: args.common.file.clone(),
        regenerate: regenerate_command(&args.common, "build", &args.out),
        cache: aot::cache_dir(),
    };
    eprintln!(
        "building {} from {}",
        aot::binary_name(&graph),
        graph.source_name
    );
    match aot::build(&graph, &args.out, &options) {
        Ok(built) => {
            let linkage = if built.static_ {
                ", statically linked"
            } else {
                ""
            };
            eprintln!(
                "built {} ({:.1} MiB{linkage}) from the crate {}\n\nAdd it to an MCP client's configuration:\n{}",
                args.out.display(),
                built.bytes as f64 / (1024.0 * 1024.0),
                built.crate_dir.display(),
                serde_json::to_string_pretty(&built.client_config(&graph)).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// One `--answer`: content to accept, or a refusal.
enum Answer {
    Accept(serde_json::Value),
    Decline,
}

/// The asker of `mcpgraph call`: each node's `--answer`s in order, then `unavailable`.
fn answers(specs: &[String]) -> Result<mcpgraph_runtime::Asker, String> {
    use std::collections::{HashMap, VecDeque};
    let mut queue: HashMap<String, VecDeque<Answer>> = HashMap::new();
    for spec in specs {
        let Some((node, answer)) = spec.split_once('=') else {
            return Err(format!("--answer {spec:?}: expected NODE=ANSWER"));
        };
        let answer = match answer.trim() {
            "decline" => Answer::Decline,
            text => match serde_json::from_str::<serde_json::Value>(text) {
                Ok(value @ serde_json::Value::Object(_)) => Answer::Accept(value),
                Ok(_) | Err(_) => {
                    return Err(format!(
                        "--answer {spec:?}: the answer must be a JSON object or `decline`"
                    ));
                }
            },
        };
        queue.entry(node.to_string()).or_default().push_back(answer);
    }
    let queue = std::sync::Mutex::new(queue);
    Ok(std::sync::Arc::new(
        move |question: mcpgraph_runtime::Question| {
            let next = queue
                .lock()
                .ok()
                .and_then(|mut q| q.get_mut(&question.node).and_then(VecDeque::pop_front));
            let outcome = match next {
                Some(Answer::Accept(content)) => Ok(content),
                Some(Answer::Decline) => Err(mcpgraph_runtime::Refusal::declined(
                    "The person declined (--answer)",
                )),
                None => Err(mcpgraph_runtime::Refusal::unavailable(format!(
                    "Nobody can answer: mcpgraph call has no --answer for node \"{}\"",
                    question.node
                ))),
            };
            Box::pin(std::future::ready(outcome))
                as std::pin::Pin<Box<dyn Future<Output = _> + Send>>
        },
    ))
}
