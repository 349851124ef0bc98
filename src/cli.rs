use clap::{Args, Parser, Subcommand, ValueEnum};
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Checked, Project, SourceFile};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub(crate) mod lock;

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

    /// With -g: the flags of `serve` for streamable HTTP (`-g FILE --http` is `serve FILE --http`).
    #[command(flatten)]
    http: HttpArgs,
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
    /// Build a graph into an MCP server binary (the stub with the graph attached; --native: cargo).
    ///
    /// By default the prebuilt server stub, installed beside mcpgraph, is copied and the checked
    /// graph attached to it: milliseconds, no Rust toolchain (docs/build.md). With --native the
    /// graph's generated crate is compiled by cargo.
    Build(BuildArgs),
    /// Build the server stub with cargo (--static: the one `build --static` uses).
    ///
    /// The stub is installed with mcpgraph; this makes one where it is not, into mcpgraph's cache
    /// where `build` finds it.
    Stub(StubArgs),
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
    /// Link glibc statically (crt-static): one file with no dependencies. From the static stub
    /// (`mcpgraph stub --static` makes it), or with --native by cargo.
    #[arg(long = "static")]
    static_: bool,
    /// Compile the graph's generated crate with cargo (needs a Rust toolchain; minutes the first
    /// time, then seconds) instead of attaching it to the prebuilt stub.
    #[arg(long)]
    native: bool,
    /// The server stub to attach the graph to [env: MCPGRAPH_STUB, or MCPGRAPH_STATIC_STUB with
    /// --static; default: the one installed beside mcpgraph].
    #[arg(long, value_name = "PATH", conflicts_with_all = ["native", "debug", "small"])]
    stub: Option<PathBuf>,
    /// A debug build with cargo (implies --native: faster to build, slower to run).
    #[arg(long, conflicts_with = "small")]
    debug: bool,
    /// Optimise the whole server for size at link time with cargo (implies --native): about a
    /// third less resident memory, the same speed, but each build takes minutes.
    #[arg(long)]
    small: bool,
}

#[derive(Args, Debug)]
struct StubArgs {
    /// The statically linked stub (crt-static), for `build --static`.
    #[arg(long = "static")]
    static_: bool,
    /// Where to put it [default: mcpgraph's cache, where `build` looks for it].
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    out: Option<PathBuf>,
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

/// Serving over streamable HTTP (docs/http.md). The arguments are the runtime's table of HTTP
/// flags, one clap argument per row, each value checked by the table as clap parses it: a built
/// server parses its command line with the same table, so the two accept, refuse (with clap's
/// words) and describe the same flags.
#[derive(Debug)]
struct HttpArgs {
    flags: mcpgraph_runtime::HttpFlags,
}

impl clap::Args for HttpArgs {
    fn augment_args(command: clap::Command) -> clap::Command {
        mcpgraph_runtime::HTTP_FLAGS
            .iter()
            .fold(command, |command, flag| command.arg(http_arg(flag)))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

/// One row of the table as a clap argument, its id the long name. A value is checked by the
/// table as clap reads it, so a bad one is refused at parse time, with clap's "invalid value"
/// and the table's reason.
fn http_arg(flag: &'static mcpgraph_runtime::HttpFlag) -> clap::Arg {
    use mcpgraph_runtime::FlagValue;
    let arg = clap::Arg::new(flag.long())
        .long(flag.long())
        .help(flag.help());
    let takes_value = move |arg: clap::Arg, name: &'static str| {
        arg.value_name(name)
            .value_parser(move |text: &str| flag.check(text).map(|()| text.to_string()))
            .action(if flag.repeatable() {
                clap::ArgAction::Append
            } else {
                clap::ArgAction::Set
            })
    };
    let arg = match flag.value() {
        FlagValue::Switch => arg.action(clap::ArgAction::SetTrue),
        FlagValue::Required(name) => takes_value(arg, name).num_args(1),
        FlagValue::Optional(name) => takes_value(arg, name).num_args(0..=1),
    };
    match flag.requires() {
        Some(other) => arg.requires(other),
        None => arg,
    }
}

impl clap::FromArgMatches for HttpArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        // Clap has checked each value and each `requires`; the table applies them, so the
        // options are made as a built server makes them.
        let mut flags = mcpgraph_runtime::HttpFlags::default();
        for flag in mcpgraph_runtime::HTTP_FLAGS {
            for value in given_values(matches, flag)? {
                flags.apply(flag, value.as_deref()).map_err(flag_error)?;
            }
        }
        let flags = flags.finish().map_err(flag_error)?;
        Ok(HttpArgs { flags })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

/// Each occurrence of `flag` on the command line: `None` for a switch, or for `--http` without
/// its address.
fn given_values(
    matches: &clap::ArgMatches,
    flag: &mcpgraph_runtime::HttpFlag,
) -> Result<Vec<Option<String>>, clap::Error> {
    let id = flag.long();
    let read_error = |e: clap::parser::MatchesError| {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!("--{id}: {e}"),
        )
    };
    if flag.value() == mcpgraph_runtime::FlagValue::Switch {
        let given = matches.try_get_one::<bool>(id).map_err(read_error)?;
        return Ok(if given == Some(&true) {
            vec![None]
        } else {
            Vec::new()
        });
    }
    let Some(values) = matches.try_get_many::<String>(id).map_err(read_error)? else {
        return Ok(Vec::new());
    };
    let values: Vec<Option<String>> = values.map(|value| Some(value.clone())).collect();
    Ok(if values.is_empty() {
        vec![None]
    } else {
        values
    })
}

fn flag_error(error: mcpgraph_runtime::FlagError) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ValueValidation, error.to_string())
}

#[derive(Args, Debug)]
pub(crate) struct Common {
    /// The graph file.
    pub(crate) file: PathBuf,
    /// An MCP JSON file (`{"mcpServers": {...}}`) adding downstream servers.
    #[arg(short = 'm', long = "mcp", value_name = "FILE")]
    pub(crate) mcp: Option<PathBuf>,
}

impl Common {
    /// The graph's files: the graph, the `-m` file, the lock beside the graph.
    pub(crate) fn project(&self) -> Project {
        Project::new(&self.file, self.mcp.clone())
    }
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
    #[arg(long, value_enum, default_value_t = crate::picture::Diagram::Mermaid)]
    format: crate::picture::Diagram,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match (cli.command, cli.graph) {
        (Some(Command::Check(args)), _) => check(args),
        (Some(Command::Graph(args)), _) => graph(args),
        (Some(Command::Serve(args)), _) => {
            let flags = args.http.flags;
            let log_format = flags.options.log_format;
            serve(
                &args.common,
                args.watch,
                flags.http.then_some(flags.options),
                log_format,
            )
        }
        (Some(Command::Call(args)), _) => call(args),
        (Some(Command::Emit(args)), _) => emit(args),
        (Some(Command::Build(args)), _) => build(args),
        (Some(Command::Stub(args)), _) => stub(args),
        (Some(Command::Lock(args)), _) if args.check => lock::check(&args.common),
        (Some(Command::Lock(args)), _) => lock::write(&args.common),
        (Some(Command::Toolkit(common)), _) => crate::toolkit::main(common.file, common.mcp),
        (Some(Command::Studio(args)), _) => crate::studio::main(crate::studio::Options {
            file: args.common.file,
            mcp: args.common.mcp,
            port: args.port,
            open: args.open,
        }),
        (None, Some(graph)) => {
            let flags = cli.http.flags;
            let log_format = flags.options.log_format;
            serve(
                &Common {
                    file: graph,
                    mcp: cli.mcp,
                },
                cli.watch,
                flags.http.then_some(flags.options),
                log_format,
            )
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

/// Reads and checks the graph file (and the MCP file, and the lock file beside the graph);
/// `Err` carries the exit code after the problem was shown.
fn load(common: &Common) -> Result<(SourceFile, Checked), ExitCode> {
    let sources = common.project().read().map_err(|d| {
        eprintln!("error[{}]: {}", d.code, d.message);
        ExitCode::from(1)
    })?;
    let checked = sources.compile();
    Ok((sources.graph, checked))
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
    match crate::picture::draw(graph, args.tool.as_deref(), args.format) {
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
    let project = common.project();
    // Made before the first read, so a save during it is seen as a change.
    let watch = watch.then(|| {
        let loading = project.clone();
        mcpgraph_runtime::Watch::new(project.watched(), style(), move || loading.load())
    });
    let (file, checked) = project.load();
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
                "node": r.label().to_string(),
                "type": r.node_type,
                "durationMs": r.duration.as_secs_f64() * 1000.0,
                "output": mcpgraph_runtime::to_json(r.output),
            });
            // Where an item, a branch or a callee's node is, as data: the label is for people,
            // and node ids are free text (`fetch[0]` may be a node or item 0 of `fetch`).
            if !r.is_own_node() {
                line["nodeId"] = r.node.into();
                match r.place {
                    mcpgraph_runtime::Place::Node => {}
                    mcpgraph_runtime::Place::Item(i) => line["item"] = (*i).into(),
                    mcpgraph_runtime::Place::Branch(b) => line["branch"] = b.as_str().into(),
                }
                if !r.callers.is_empty() {
                    line["callers"] = r.callers.iter().map(frame_json).collect();
                }
            }
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
        Ok(emitted) => {
            eprint!("{}", aot::native_report(&emitted));
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
    let started = std::time::Instant::now();
    let graph = match checked_graph(&args.common) {
        Ok(g) => g,
        Err(code) => return code,
    };
    // Refused before anything is built: a build replaces what is at its output.
    if let Some(own) = args
        .common
        .project()
        .watched()
        .into_iter()
        .find(|file| same_file(file, &args.out))
    {
        eprintln!(
            "error: the output {} is the graph's own file {}: choose another path",
            args.out.display(),
            own.display()
        );
        return ExitCode::from(1);
    }
    if args.out.is_dir() {
        eprintln!(
            "error: the output {} is a directory: name the server file, e.g. {}",
            args.out.display(),
            args.out.join("server").display()
        );
        return ExitCode::from(1);
    }
    let built = if args.native || args.debug || args.small {
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
            "building {} from {} with cargo",
            aot::binary_name(&graph),
            graph.source_name
        );
        aot::build(&graph, &args.out, &options)
    } else {
        let options = aot::StubOptions {
            static_: args.static_,
            stub: args.stub.clone(),
            cache: aot::cache_dir(),
        };
        aot::build_from_stub(&graph, &args.out, &options)
    };
    match built {
        Ok(built) => {
            let linkage = if built.static_ {
                ", statically linked"
            } else {
                ""
            };
            let from = match &built.from {
                aot::From::Stub(stub) => format!("the stub {}", stub.display()),
                aot::From::Crate(dir) => format!("the crate {}", dir.display()),
            };
            eprintln!(
                "built {} ({:.1} MiB{linkage}) from {from} in {}\n\nAdd it to an MCP client's configuration:\n{}",
                args.out.display(),
                built.bytes as f64 / (1024.0 * 1024.0),
                elapsed(started.elapsed()),
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

/// Whether two paths name one existing file.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// `1.2 s` or `35 ms`.
fn elapsed(time: std::time::Duration) -> String {
    if time.as_secs() >= 1 {
        format!("{:.1} s", time.as_secs_f64())
    } else {
        format!("{} ms", time.as_millis())
    }
}

fn stub(args: StubArgs) -> ExitCode {
    let cache = aot::cache_dir();
    let out = args
        .out
        .unwrap_or_else(|| aot::cached_stub(&cache, args.static_));
    let options = aot::BuildOptions {
        profile: aot::Profile::Release,
        static_: args.static_,
        source: PathBuf::new(),
        regenerate: String::new(),
        cache,
    };
    eprintln!(
        "building the {}server stub with cargo",
        if args.static_ { "static " } else { "" }
    );
    match aot::build_stub(&out, &options) {
        Ok(built) => {
            let found = if out == aot::cached_stub(&aot::cache_dir(), args.static_) {
                format!(
                    "`mcpgraph build{}` finds it there",
                    if args.static_ { " --static" } else { "" }
                )
            } else {
                format!(
                    "use it with `mcpgraph build{} --stub {}`",
                    if args.static_ { " --static" } else { "" },
                    out.display()
                )
            };
            eprintln!(
                "built {} ({:.1} MiB); {found}",
                out.display(),
                built.bytes as f64 / (1024.0 * 1024.0),
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

/// A `server: self` call a traced node ran inside: `{node, item? | branch?, tool}`.
fn frame_json(frame: &mcpgraph_runtime::Frame) -> serde_json::Value {
    let mut json = serde_json::json!({"node": frame.node});
    match &frame.place {
        mcpgraph_runtime::Place::Node => {}
        mcpgraph_runtime::Place::Item(i) => json["item"] = (*i).into(),
        mcpgraph_runtime::Place::Branch(b) => json["branch"] = b.as_str().into(),
    }
    json["tool"] = frame.tool.as_str().into();
    json
}

#[cfg(test)]
mod tests {
    //! The HTTP flags through both front ends, clap's (`mcpgraph serve`) and a built server's (the
    //! runtime's parser): each command line must come out as the same options, or be refused
    //! with the same words.

    use super::*;
    use mcpgraph_runtime::{HTTP_FLAGS, HttpFlags, HttpOptions};

    /// `mcpgraph serve graph.yaml FLAGS...` as clap parses it: whether HTTP was asked for and
    /// the options, or clap's whole error text.
    fn through_clap(flags: &[&str]) -> Result<(bool, HttpOptions), String> {
        let args = ["mcpgraph", "serve", "graph.yaml"]
            .into_iter()
            .chain(flags.iter().copied());
        match Cli::try_parse_from(args) {
            Ok(Cli {
                command: Some(Command::Serve(serve)),
                ..
            }) => {
                let flags = serve.http.flags;
                Ok((flags.http, flags.options))
            }
            Ok(other) => panic!("not `serve`: {other:?}"),
            Err(error) => Err(error.to_string()),
        }
    }

    /// The same flags as a built server parses them, or its refusal.
    fn through_built_server(flags: &[&str]) -> Result<(bool, HttpOptions), String> {
        HttpFlags::parse(flags.iter().map(|flag| flag.to_string()))
            .map(|flags| (flags.http, flags.options))
            .map_err(|error| error.to_string())
    }

    #[test]
    fn every_flag_parses_the_same_in_both_front_ends() {
        let every_flag = [
            "--http",
            "0.0.0.0:0",
            "--allowed-host",
            "a.example",
            "--allowed-host",
            "b.example",
            "--allowed-origin",
            "https://app.example.com",
            "--auth-token-env",
            "PATH",
            "--allow-unauthenticated",
            "--max-body",
            "1000",
            "--header-timeout",
            "2.5",
            "--max-connections",
            "4",
            "--drain-timeout",
            "2.5",
            "--sessions",
            "--log-format",
            "json",
        ];
        for flag in HTTP_FLAGS {
            let long = format!("--{}", flag.long());
            assert!(
                every_flag.contains(&long.as_str()),
                "{long} is not tried here"
            );
        }
        let lines: &[&[&str]] = &[
            &every_flag,
            &[],
            &["--http"],
            &["--http", "--sessions"],
            &["--http", "8090"],
            &["--http", ":8091"],
            &["--http=8092"],
            &["--http", "[::1]:0"],
            &["--http", "localhost:8080"],
            &["--log-format", "json"],
            &["--max-body=1000", "--http"],
            &[
                "--allowed-origin=https://a.example",
                "--http",
                "--allowed-origin",
                "https://b.example",
            ],
        ];
        for line in lines {
            let clap = through_clap(line);
            assert!(clap.is_ok(), "{line:?}: {clap:?}");
            assert_eq!(clap, through_built_server(line), "{line:?}");
        }
    }

    #[test]
    fn a_bare_port_is_one_on_loopback_in_both_front_ends() {
        let addr = |parsed: Result<(bool, HttpOptions), String>| parsed.map(|(_, o)| o.addr);
        for (given, listens) in [
            ("8090", "127.0.0.1:8090"),
            (":8091", "127.0.0.1:8091"),
            ("0.0.0.0:0", "0.0.0.0:0"),
        ] {
            let line = ["--http", given];
            assert_eq!(addr(through_clap(&line)), Ok(listens.to_string()));
            assert_eq!(addr(through_built_server(&line)), Ok(listens.to_string()));
        }
        assert_eq!(
            addr(through_clap(&["--http"])),
            Ok(mcpgraph_runtime::DEFAULT_ADDR.to_string())
        );
    }

    #[test]
    fn refusals_read_the_same_in_both_front_ends() {
        let refused: &[&[&str]] = &[
            &["--http", "nope"],
            &["--http", "8090x"],
            &["--http", "host:99999"],
            &["--http", "::1:80"],
            &["--http", ":"],
            &["--http", "70000"],
            &["--http", "--max-body", "lots"],
            &["--http", "--max-body"],
            &["--http", "--drain-timeout", "soon"],
            &["--log-format", "xml"],
            &["--http", "--sessions", "--sessions"],
            &["--http", "--max-body", "1", "--max-body", "2"],
            &["--http", "--sessions=yes"],
            &["--sessions"],
            &["--allowed-host", "a.example"],
            &[
                "--http",
                "--auth-token-env",
                "MCPGRAPH_CLI_TEST_UNSET_VARIABLE",
            ],
        ];
        for line in refused {
            let built = through_built_server(line).expect_err("the built server refuses it");
            let clap = through_clap(line).expect_err("clap refuses it");
            // Clap goes on with the usage and a pointer to --help; the refusal itself is the same.
            assert!(
                clap.starts_with(&format!("error: {built}\n")),
                "{line:?}\nclap:  {clap}\nbuilt: {built}"
            );
        }
    }

    #[test]
    fn serve_help_is_made_from_the_table() {
        let mut command = <Cli as clap::CommandFactory>::command();
        let help = command
            .find_subcommand_mut("serve")
            .expect("serve is a subcommand")
            .render_help()
            .to_string();
        for flag in HTTP_FLAGS {
            assert!(help.contains(&format!("    {flag}  ")), "{flag}:\n{help}");
            assert!(help.contains(&flag.help()), "{flag}:\n{help}");
        }
    }
}
