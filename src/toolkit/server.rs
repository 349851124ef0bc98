//! The toolkit's MCP server: a hand-written rmcp `ServerHandler`, as the runtime's own
//! (runtime/src/server.rs), and each tool's work. A call is read into a typed [`Call`] by the
//! catalogue (tools.rs: its arguments checked against the tool's inputSchema), dispatched by an
//! exhaustive match, and answered with `structuredContent` that fits the tool's outputSchema;
//! every failure is an `isError` result carrying the reason (text, and
//! `structuredContent.error`).

use super::run::{self, Versions, graph_of};
use super::store::{OwnedEdit, Store};
use super::tools::{
    self, AddArguments, BuildArguments, Call, Catalogue, DrawArguments, Failed, HistoryRecord,
    JsonataArguments, LogicArguments, McpTrialArguments, RunArguments, ServerAndTool, ServerFilter,
    ToolNameArgument, UpdateArguments,
};
use mcpgraph_compiler::ir::Server;
use mcpgraph_compiler::{SourceFile, ast, check, render, yaml};
use mcpgraph_runtime::rmcp;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The server's name in `initialize`: the original toolkit's, so that clients configured for it
/// keep working.
const NAME: &str = "mcpgraphtoolkit";

const INSTRUCTIONS: &str = "Tools for building, testing and running the tools of one mcpGraph file (the guide: docs/toolkit.md). \
Workflow: listMcpServers / listMcpServerTools / getMcpServerTool to discover the downstream tools; testJSONata, testJSONLogic and testMcpTool to try expressions and calls; \
addGraphTool to add a tool; runGraphTool to run it and read its executionHistory (each record has the context its node saw; breakpoints stop a run before a node); \
updateGraphTool to fix it, deleteGraphTool to remove it. Every edit is checked by the compiler before it is written: a refused edit is an isError result with diagnostics \
(line and column inside the tool you sent) and the file is unchanged; comments and the other tools are kept as written. checkGraph lists the file's problems, drawGraph draws a tool, \
lockGraph records the downstream tools so calls are checked against them, buildGraph builds a native server.";

#[derive(Clone)]
pub struct Toolkit {
    inner: Arc<Inner>,
}

struct Inner {
    store: Store,
    versions: Versions,
    tools: Catalogue,
}

/// What a call needs of its request beyond its arguments: its cancellation (a run stops when
/// the client cancels).
pub struct CallContext {
    cancel: CancellationToken,
}

impl CallContext {
    fn of(request: &RequestContext<RoleServer>) -> Self {
        CallContext {
            cancel: request.ct.clone(),
        }
    }

    /// A call that nobody cancels (the tests' calls).
    #[cfg(test)]
    pub(super) fn detached() -> Self {
        CallContext {
            cancel: CancellationToken::new(),
        }
    }
}

impl Toolkit {
    pub fn new(graph: PathBuf, mcp: Option<PathBuf>) -> Self {
        Toolkit {
            inner: Arc::new(Inner {
                store: Store::new(graph.clone(), mcp.clone()),
                versions: Versions::new(graph, mcp),
                tools: tools::catalogue(),
            }),
        }
    }

    pub async fn shutdown(&self) {
        self.inner.versions.shutdown().await;
    }

    fn file(&self) -> Result<SourceFile, Failed> {
        self.inner.store.read().map_err(Failed::new)
    }

    fn mcp_file(&self) -> Result<Option<SourceFile>, Failed> {
        self.inner
            .versions
            .mcp_path()
            .map(|p| SourceFile::read(p).map_err(|d| Failed::new(d.message)))
            .transpose()
    }

    async fn current(&self) -> Result<Arc<run::Loaded>, Failed> {
        let file = self.file()?;
        self.inner.versions.of(file).await
    }

    /// One call as a client makes it: its arguments read into the tool's [`Call`], the tool's
    /// work, and the outcome as a result (a failure an `isError` one). `None`: the toolkit has no
    /// tool of that name.
    pub(super) async fn call(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        context: &CallContext,
    ) -> Option<CallToolResult> {
        let entry = self.inner.tools.find(name)?;
        let outcome = match entry.call(arguments) {
            Ok(call) => self.dispatch(call, context).await,
            Err(failed) => Err(failed),
        };
        Some(match outcome {
            Ok(value) => success(value),
            Err(failed) => failure(failed),
        })
    }

    async fn dispatch(&self, call: Call, context: &CallContext) -> Result<Value, Failed> {
        match call {
            Call::GetGraphServer(_) => self.graph_server(),
            Call::ListGraphTools(_) => self.graph_tools(),
            Call::GetGraphTool(ToolNameArgument { tool_name }) => {
                mcpgraph_compiler::edit::tool_json(&self.file()?, &tool_name)
                    .ok_or_else(|| Failed::new(format!("Tool \"{tool_name}\" not found")))
            }
            Call::ListMcpServers(_) => Ok(servers_result(self.discover(None).await?)),
            Call::ListMcpServerTools(ServerFilter { server_name }) => Ok(server_tools_result(
                self.discover(server_name.as_deref()).await?,
            )),
            Call::GetMcpServerTool(ServerAndTool {
                server_name,
                tool_name,
            }) => {
                let found = self.discover(Some(server_name.as_str())).await?;
                server_tool_result(&server_name, &tool_name, found)
            }
            Call::AddGraphTool(AddArguments { tool }) => {
                let message = format!("Tool \"{}\" added successfully", tool_name(&tool));
                self.edit(OwnedEdit::Add(tool), message).await
            }
            Call::UpdateGraphTool(UpdateArguments { tool_name, tool }) => {
                let message = format!("Tool \"{tool_name}\" updated successfully");
                let edit = OwnedEdit::Update {
                    name: tool_name,
                    tool,
                };
                self.edit(edit, message).await
            }
            Call::DeleteGraphTool(ToolNameArgument { tool_name }) => {
                let message = format!("Tool \"{tool_name}\" deleted successfully");
                self.edit(OwnedEdit::Delete { name: tool_name }, message)
                    .await
            }
            Call::RunGraphTool(arguments) => self.run_graph_tool(arguments, context).await,
            Call::TestJsonata(arguments) => test_jsonata(arguments).await,
            Call::TestJsonLogic(arguments) => test_logic(arguments).await,
            Call::TestMcpTool(arguments) => self.test_mcp_tool(arguments).await,
            Call::CheckGraph(_) => self.check_graph().await,
            Call::DrawGraph(DrawArguments { tool_name }) => {
                self.draw_graph(tool_name.as_deref()).await
            }
            Call::BuildGraph(BuildArguments {
                output,
                static_linking,
            }) => {
                self.build_graph(&output, static_linking == Some(true))
                    .await
            }
            Call::LockGraph(_) => self.lock_graph().await,
        }
    }

    /// The file's typed tree (what can be read of it even when it does not check).
    fn tree(&self) -> Result<ast::GraphFile, Failed> {
        let file = self.file()?;
        let tree = yaml::parse(&file.text)
            .map_err(|d| Failed::new(format!("The graph file is not valid YAML: {}", d.message)))?;
        Ok(ast::build(&tree, &mut Vec::new()))
    }

    fn graph_server(&self) -> Result<Value, Failed> {
        let server = self.tree()?.server;
        let text =
            |s: &Option<mcpgraph_compiler::ast::Sp<String>>| s.as_ref().map(|s| s.value.clone());
        let name = text(&server.name).unwrap_or_default();
        let mut out = json!({
            "name": name,
            "version": text(&server.version).unwrap_or_default(),
            "title": text(&server.title).unwrap_or_else(|| name.clone()),
        });
        if let Some(instructions) = text(&server.instructions) {
            out["instructions"] = instructions.into();
        }
        Ok(out)
    }

    fn graph_tools(&self) -> Result<Value, Failed> {
        let items: Vec<Value> = self
            .tree()?
            .tools
            .iter()
            .filter_map(|t| {
                let name = t.name.as_ref()?.value.clone();
                let description = t.description.as_ref().map(|d| d.value.clone());
                Some(json!({"name": name, "description": description.unwrap_or_default()}))
            })
            .collect();
        Ok(json!({"items": items}))
    }

    /// Every server discovery sees: the graph's and the `-m` file's (the graph's wins on a
    /// name clash), as far as the files can be read.
    fn servers(&self) -> Result<Vec<Server>, Failed> {
        let file = self.file()?;
        let mcp = self.mcp_file()?;
        let mut ignored = Vec::new();
        let own = match yaml::parse(&file.text) {
            Ok(tree) => ast::build(&tree, &mut ignored).servers,
            Err(_) => Vec::new(),
        };
        let extra = match &mcp {
            Some(m) => match yaml::parse(&m.text) {
                Ok(tree) => match tree.get("mcpServers") {
                    Some(servers) => ast::servers_map(servers, "mcpServers", &mut ignored),
                    None => Vec::new(),
                },
                Err(d) => {
                    return Err(Failed::new(format!(
                        "The MCP file is not valid JSON: {}",
                        d.message
                    )));
                }
            },
            None => Vec::new(),
        };
        Ok(check::servers(&own, &extra, &mut ignored))
    }

    async fn discover(&self, only: Option<&str>) -> Result<mcpgraph_runtime::Discovered, Failed> {
        let servers: Vec<Server> = self
            .servers()?
            .into_iter()
            .filter(|s| only.is_none_or(|o| s.name == o))
            .collect();
        Ok(mcpgraph_runtime::discover(&servers).await)
    }

    /// An edit through the store: written when the compiler accepts it, refused with the
    /// diagnostics otherwise (the file untouched).
    async fn edit(&self, edit: OwnedEdit, message: String) -> Result<Value, Failed> {
        match self.inner.store.edit(edit).await {
            Ok(proposed) => {
                // Load the new version now: the next run should not pay for it.
                let file = SourceFile::new(self.file()?.name, proposed.text);
                let _ = self.inner.versions.of(file).await;
                Ok(json!({"success": true, "message": message}))
            }
            Err(refusal) => {
                let mut failed = Failed::new(refusal.message.clone()).with_error("kind", "refused");
                if !refusal.diagnostics.is_empty() {
                    failed = failed.with(
                        "diagnostics",
                        serde_json::to_value(&refusal.diagnostics).unwrap_or_default(),
                    );
                }
                if let Some(text) = &refusal.tool_text {
                    failed = failed.with("toolText", text.as_str());
                }
                Err(failed)
            }
        }
    }

    async fn run_graph_tool(
        &self,
        arguments: RunArguments,
        context: &CallContext,
    ) -> Result<Value, Failed> {
        let RunArguments {
            tool_name,
            tool_definition,
            arguments,
            breakpoints,
        } = arguments;
        let arguments = arguments.unwrap_or_default();
        let breakpoints = breakpoints.unwrap_or_default();
        match (tool_name.as_deref(), tool_definition.as_ref()) {
            (None, None) => Err(Failed::new(
                "Either toolName or toolDefinition must be provided",
            )),
            (Some(_), Some(_)) => Err(Failed::new(
                "Cannot specify both toolName and toolDefinition",
            )),
            (Some(name), None) => {
                let loaded = self.current().await?;
                let graph = graph_of(&loaded)?;
                if graph.tools.iter().all(|t| t.name != name) {
                    return Err(Failed::new(format!("Tool not found: {name}")));
                }
                let Some(engine) = loaded.engine().cloned() else {
                    return Err(Failed::new("The graph is not loaded"));
                };
                run::run(
                    &engine,
                    name,
                    arguments,
                    breakpoints,
                    context.cancel.clone(),
                )
                .await
            }
            (None, Some(definition)) => {
                self.run_definition(definition, arguments, breakpoints, context)
                    .await
            }
        }
    }

    /// An inline definition: the current file with the tool added (or, when one of its name
    /// exists, replaced) in memory, checked and run on an engine of its own. Nothing is written.
    async fn run_definition(
        &self,
        definition: &Value,
        arguments: Map<String, Value>,
        breakpoints: Vec<String>,
        context: &CallContext,
    ) -> Result<Value, Failed> {
        use mcpgraph_compiler::edit::{Edit, apply};
        let file = self.file()?;
        let mcp = self.mcp_file()?;
        // An unreadable lock is the same problem before and after the edit (checkGraph
        // reports it, as every front end does): the edit is checked without it.
        let lock = self.inner.versions.project().read_lock();
        let name = tool_name(definition);
        let edit = if mcpgraph_compiler::edit::tool_names(&file).contains(&name) {
            Edit::Update {
                name: &name,
                tool: definition,
            }
        } else {
            Edit::Add(definition)
        };
        let proposed = apply(&file, mcp.as_ref(), lock.text(), edit).map_err(|refusal| {
            Failed::new(format!("Tool validation failed: {}", refusal.message))
                .with_error("kind", "refused")
                .with(
                    "diagnostics",
                    serde_json::to_value(&refusal.diagnostics).unwrap_or_default(),
                )
        })?;
        let Some(graph) = proposed.checked.graph else {
            return Err(Failed::new(
                "Tool validation failed: the graph does not check",
            ));
        };
        let engine =
            mcpgraph_runtime::Engine::load(graph).map_err(|e| Failed::new(e.to_string()))?;
        let outcome = run::run(
            &engine,
            &name,
            arguments,
            breakpoints,
            context.cancel.clone(),
        )
        .await;
        engine.shutdown().await;
        outcome
    }

    async fn test_mcp_tool(&self, arguments: McpTrialArguments) -> Result<Value, Failed> {
        let McpTrialArguments {
            server: server_name,
            tool,
            args,
            context,
        } = arguments;
        let Some(server) = self.servers()?.into_iter().find(|s| s.name == server_name) else {
            return Err(Failed::new(format!("Server \"{server_name}\" not found")));
        };
        let raw = Value::Object(args);
        let started = Instant::now();
        let elapsed = |started: Instant| (started.elapsed().as_secs_f64() * 1000.0).round();
        let (sent, evaluated) = match &context {
            Some(context) => match mcpgraph_runtime::evaluate_args(&raw, context) {
                Ok((value, found)) => (value, found),
                Err(e) => {
                    return Ok(json!({
                        "output": null,
                        "executionTime": elapsed(started),
                        "error": error_object(&e),
                    }));
                }
            },
            None => (raw, false),
        };
        let map = match &sent {
            Value::Object(map) => map.clone(),
            _ => Map::new(),
        };
        let outcome = mcpgraph_runtime::call_tool_once(&server, &tool, map).await;
        Ok(trial_result(
            outcome,
            elapsed(started),
            evaluated.then_some(sent),
        ))
    }

    async fn check_graph(&self) -> Result<Value, Failed> {
        let loaded = self.current().await?;
        Ok(json!({
            "diagnostics": render::json_all(&loaded.checked, &loaded.file),
            "errors": loaded.checked.error_count(),
            "warnings": loaded.checked.warning_count(),
        }))
    }

    async fn draw_graph(&self, tool: Option<&str>) -> Result<Value, Failed> {
        let loaded = self.current().await?;
        let graph = graph_of(&loaded)?;
        if let Some(name) = tool
            && graph.tools.iter().all(|t| t.name != name)
        {
            return Err(Failed::new(format!("Tool \"{name}\" not found")));
        }
        let mermaid = crate::picture::draw(graph, tool, crate::picture::Diagram::Mermaid)
            .map_err(Failed::new)?;
        Ok(json!({"mermaid": mermaid}))
    }

    /// Refuses a build output that would replace the graph, its `-m` file or its lock file, or
    /// anything but an earlier build (a file with a graph attached): a build replaces what is
    /// there.
    fn check_output(&self, out: &std::path::Path) -> Result<(), Failed> {
        let real = |p: &std::path::Path| -> PathBuf {
            match (p.parent(), p.file_name()) {
                (Some(dir), Some(name)) => std::fs::canonicalize(if dir.as_os_str().is_empty() {
                    std::path::Path::new(".")
                } else {
                    dir
                })
                .map_or_else(|_| p.to_path_buf(), |d| d.join(name)),
                _ => p.to_path_buf(),
            }
        };
        let kept = self.inner.versions.project().watched();
        let target = real(out);
        if kept.iter().any(|k| real(k) == target) {
            return Err(Failed::new(format!(
                "The output {} is one of the graph's own files: choose another path",
                out.display()
            )));
        }
        // Only a server mcpgraph built is replaced: any other file, executable or not, is the
        // user's (a build names its output relative to the graph, and `../x` reaches out).
        if std::fs::symlink_metadata(out).is_ok() {
            let ours = std::fs::metadata(out).is_ok_and(|meta| meta.is_file())
                && mcpgraph_runtime::attached::carries_a_graph(out).unwrap_or(false);
            if !ours {
                return Err(Failed::new(format!(
                    "The output {} exists and is not a server mcpgraph built (a file with a graph attached): choose another path",
                    out.display()
                )));
            }
        }
        Ok(())
    }

    /// `mcpgraph build` of the current graph to `output` (relative to the graph file's
    /// directory): the stub with the graph attached, in milliseconds.
    async fn build_graph(&self, output: &str, static_: bool) -> Result<Value, Failed> {
        let loaded = self.current().await?;
        let graph = graph_of(&loaded)?.clone();
        let source = self.inner.versions.graph_path().to_path_buf();
        let mut out = PathBuf::from(output);
        if out.is_relative() {
            let dir = source.parent().filter(|p| !p.as_os_str().is_empty());
            out = dir.map_or(out.clone(), |d| d.join(&out));
        }
        self.check_output(&out)?;
        let options = crate::aot::StubOptions {
            static_,
            stub: None,
            cache: crate::aot::cache_dir(),
        };
        // Reading, hashing and writing some 20 MiB: off the async workers.
        let built = {
            let (graph, out) = (graph.clone(), out.clone());
            tokio::task::spawn_blocking(move || crate::aot::build_from_stub(&graph, &out, &options))
                .await
                .map_err(|e| Failed::new(format!("the build panicked: {e}")))?
                .map_err(|e| Failed::new(e.to_string()))?
        };
        Ok(built_result(
            &built.path,
            built.bytes,
            built.client_config(&graph),
        ))
    }

    /// `mcpgraph lock` by the library the CLI prints (`crate::lock`): the servers the graph calls
    /// read, the new lock written (atomically) unless it adds errors to the graph, so that no
    /// toolkit call leaves the graph unservable, and what became of each server as data.
    async fn lock_graph(&self) -> Result<Value, Failed> {
        use crate::lock::{Inputs, LockUpdate, Written};
        let versions = &self.inner.versions;
        let inputs = Inputs::read(versions.project()).map_err(lock_failure)?;
        let live = inputs.discover().await;
        let update = LockUpdate::new(&inputs, live);
        let mut data = update.to_json();
        data["written"] = false.into();
        if update.errors_added(&inputs) {
            let failed = Failed::new(format!(
                "The live servers no longer match the graph: with their contracts the graph has errors it did not have, so {} was left as it was. Fix the graph (the diagnostics), then lock again",
                update.lock_file.display()
            ));
            let diagnostics = render::json_all(&update.checked, &inputs.graph);
            return Err(with_fields(failed, data).with("diagnostics", diagnostics));
        }
        match update.write() {
            Ok(written) => data["written"] = (written == Written::Wrote).into(),
            Err(error) => return Err(with_fields(Failed::new(error.to_string()), data)),
        }
        let unreadable: Vec<String> = update
            .unreadable()
            .into_iter()
            .map(|(name, reason)| format!("`{name}`: {reason}"))
            .collect();
        if !unreadable.is_empty() {
            return Err(with_fields(
                Failed::new(format!(
                    "mcpgraph lock could not read every server the graph calls ({}); {} holds the others",
                    unreadable.join("; "),
                    update.lock_file.display()
                )),
                data,
            ));
        }
        Ok(data)
    }
}

/// A lock that could not be made, as a failure; a graph that is not YAML with its diagnostics.
fn lock_failure(error: crate::lock::LockError) -> Failed {
    let failed = Failed::new(error.to_string());
    match &error {
        crate::lock::LockError::NotYaml { graph, checked } => {
            failed.with("diagnostics", render::json_all(checked, graph))
        }
        _ => failed,
    }
}

/// `failed` with the fields of `data` (an object) beside its `error`.
fn with_fields(mut failed: Failed, data: Value) -> Failed {
    if let Value::Object(fields) = data {
        for (key, value) in fields {
            failed = failed.with(&key, value);
        }
    }
    failed
}

fn tool_name(tool: &Value) -> String {
    tool.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A trial's history as the evaluation reads it.
fn history_records(records: Option<Vec<HistoryRecord>>) -> Vec<(String, Value)> {
    records
        .unwrap_or_default()
        .into_iter()
        .map(|record| (record.node_id, record.output))
        .collect()
}

/// listMcpServers' result: each server with its title and version, or why it cannot be read.
pub(super) fn servers_result(found: mcpgraph_runtime::Discovered) -> Value {
    let items: Vec<Value> = found
        .into_iter()
        .map(|(name, contract)| {
            let mut item = json!({"name": name});
            match contract {
                Ok(server) => {
                    for key in ["title", "version"] {
                        if let Some(v) = server.server_info.get(key) {
                            item[key] = v.clone();
                        }
                    }
                }
                Err(reason) => item["error"] = reason.into(),
            }
            item
        })
        .collect();
    json!({"items": items})
}

/// listMcpServerTools' result: the tools of every server that could be read.
pub(super) fn server_tools_result(found: mcpgraph_runtime::Discovered) -> Value {
    let mut items = Vec::new();
    for (server, contract) in found {
        let Ok(contract) = contract else { continue };
        for (name, tool) in contract.tools {
            items.push(json!({
                "name": name,
                "description": tool.description.unwrap_or_default(),
                "server": server,
            }));
        }
    }
    json!({"items": items})
}

/// getMcpServerTool's result: `tool` of `server` as discovery found it.
pub(super) fn server_tool_result(
    server: &str,
    tool: &str,
    found: mcpgraph_runtime::Discovered,
) -> Result<Value, Failed> {
    let Some((_, contract)) = found.into_iter().next() else {
        return Err(Failed::new(format!("Server \"{server}\" not found")));
    };
    let contract = contract
        .map_err(|reason| Failed::new(format!("Server \"{server}\" cannot be read: {reason}")))?;
    let Some(found) = contract.tools.get(tool) else {
        return Err(Failed::new(format!(
            "Tool \"{tool}\" not found in server \"{server}\""
        )));
    };
    let mut out = json!({
        "name": tool,
        "description": found.description.clone().unwrap_or_default(),
        "inputSchema": found.input_schema,
    });
    if let Some(schema) = &found.output_schema {
        out["outputSchema"] = schema.clone();
    }
    Ok(out)
}

/// testMcpTool's result for a call that was made, after `time` milliseconds: what the tool
/// returned (what an mcp node would output) and the arguments sent when they were evaluated,
/// or the call's failure as data, as the original gives it.
pub(super) fn trial_result(
    outcome: Result<Option<Value>, mcpgraph_runtime::Failure>,
    time: f64,
    evaluated: Option<Value>,
) -> Value {
    match outcome {
        Ok(output) => {
            let mut out = json!({"output": output, "executionTime": time});
            if let Some(sent) = evaluated {
                out["evaluatedArgs"] = sent;
            }
            out
        }
        Err(failure) => json!({
            "output": null,
            "executionTime": time,
            "error": {"message": failure.message, "details": {"kind": failure.kind.as_str()}},
        }),
    }
}

/// buildGraph's result: the binary and the client configuration that starts it.
pub(super) fn built_result(path: &Path, bytes: u64, client_config: Value) -> Value {
    json!({
        "path": path.display().to_string(),
        "bytes": bytes,
        "clientConfig": client_config,
    })
}

/// `{message, details}` of a failed trial, as the original toolkit gives it.
fn error_object(error: &mcpgraph_runtime::EvaluateError) -> Value {
    let kind = match error {
        mcpgraph_runtime::EvaluateError::Syntax(_) => "syntax",
        mcpgraph_runtime::EvaluateError::Evaluation(_) => "evaluation",
    };
    json!({"message": error.message(), "details": {"kind": kind}})
}

/// Evaluations run on a blocking thread: a heavy expression must not hold a runtime worker.
async fn test_jsonata(arguments: JsonataArguments) -> Result<Value, Failed> {
    let JsonataArguments {
        expression,
        context,
        history,
    } = arguments;
    let history = history_records(history);
    let outcome = tokio::task::spawn_blocking(move || {
        mcpgraph_runtime::evaluate_jsonata(&expression, &context, &history)
    })
    .await
    .map_err(|e| Failed::new(format!("the evaluation panicked: {e}")))?;
    Ok(match outcome {
        Ok(value) => json!({"result": value}),
        Err(e) => json!({"result": null, "error": error_object(&e)}),
    })
}

async fn test_logic(arguments: LogicArguments) -> Result<Value, Failed> {
    let LogicArguments {
        expression: mut rule,
        context,
        history,
    } = arguments;
    // A rule sent as JSON text is the rule it spells.
    if let Value::String(text) = &rule
        && let Ok(parsed) = serde_json::from_str::<Value>(text)
    {
        rule = parsed;
    }
    let history = history_records(history);
    let outcome = tokio::task::spawn_blocking(move || {
        mcpgraph_runtime::evaluate_logic(&rule, &context, &history)
    })
    .await
    .map_err(|e| Failed::new(format!("the evaluation panicked: {e}")))?;
    Ok(match outcome {
        Ok(value) => json!({"result": value}),
        Err(e) => json!({"result": null, "error": error_object(&e)}),
    })
}

/// A successful result: the compact JSON text and `structuredContent`.
fn success(value: Value) -> CallToolResult {
    let text = mcpgraph_runtime::to_js_json(&value);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(value);
    result
}

/// A failure: the message (with each diagnostic on a line of its own) and
/// `structuredContent: {error: {message, ...}, ...}`.
fn failure(failed: Failed) -> CallToolResult {
    let mut text = failed.message.clone();
    if let Some(Value::Array(diagnostics)) = failed.extra.get("diagnostics") {
        for d in diagnostics {
            let field = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or_default();
            let number = |k: &str| d.get(k).and_then(Value::as_u64).unwrap_or_default();
            let place = if d.get("inTool").and_then(Value::as_bool) == Some(true) {
                "tool:"
            } else {
                ""
            };
            text.push_str(&format!(
                "\n{place}{}:{}: {}[{}]: {}",
                number("line"),
                number("column"),
                field("severity"),
                field("code"),
                field("message")
            ));
            if let Some(help) = d.get("help").and_then(Value::as_str) {
                text.push_str(&format!(" (help: {help})"));
            }
        }
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
    result.structured_content = Some(failed.structured());
    result
}

impl ServerHandler for Toolkit {
    fn get_info(&self) -> InitializeResult {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        InitializeResult::new(capabilities)
            .with_server_info(
                Implementation::new(NAME, env!("CARGO_PKG_VERSION"))
                    .with_title("mcpGraph Toolkit (mcpgraph)"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.inner.tools.tools()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.inner.tools.find(name).map(|entry| entry.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let context = CallContext::of(&context);
        let arguments = request.arguments.unwrap_or_default();
        match self.call(&request.name, arguments, &context).await {
            Some(result) => Ok(result.into()),
            None => Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            )),
        }
    }
}
