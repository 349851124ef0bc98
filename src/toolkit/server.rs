//! The toolkit's MCP server: a hand-written rmcp `ServerHandler`, as the runtime's own
//! (runtime/src/server.rs): every call's arguments checked against its inputSchema, every
//! failure an `isError` result carrying the reason (text, and `structuredContent.error`).

use super::run::{self, Versions, graph_of};
use super::store::{OwnedEdit, Store};
use super::tools::{self, Failed};
use mcpgraph_compiler::ir::Server;
use mcpgraph_compiler::{SourceFile, ast, check, render, yaml};
use mcpgraph_runtime::rmcp;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

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
    tools: Vec<rmcp::model::Tool>,
}

impl Toolkit {
    pub fn new(graph: PathBuf, mcp: Option<PathBuf>) -> Self {
        Toolkit {
            inner: Arc::new(Inner {
                store: Store::new(graph.clone(), mcp.clone()),
                versions: Versions::new(graph, mcp),
                tools: tools::advertised(),
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

    async fn dispatch(
        &self,
        name: &str,
        args: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, Failed> {
        let text = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
        match name {
            "getGraphServer" => self.graph_server(),
            "listGraphTools" => self.graph_tools(),
            "getGraphTool" => {
                let name = text("toolName");
                mcpgraph_compiler::edit::tool_json(&self.file()?, name)
                    .ok_or_else(|| Failed::new(format!("Tool \"{name}\" not found")))
            }
            "listMcpServers" => self.mcp_servers().await,
            "listMcpServerTools" => {
                self.mcp_server_tools(args.get("serverName").and_then(Value::as_str))
                    .await
            }
            "getMcpServerTool" => {
                self.mcp_server_tool(text("serverName"), text("toolName"))
                    .await
            }
            "addGraphTool" => {
                let tool = args.get("tool").cloned().unwrap_or_default();
                let name = tool_name(&tool);
                self.edit(
                    OwnedEdit::Add(tool),
                    format!("Tool \"{name}\" added successfully"),
                )
                .await
            }
            "updateGraphTool" => {
                let name = text("toolName").to_string();
                let tool = args.get("tool").cloned().unwrap_or_default();
                let message = format!("Tool \"{name}\" updated successfully");
                self.edit(OwnedEdit::Update { name, tool }, message).await
            }
            "deleteGraphTool" => {
                let name = text("toolName").to_string();
                let message = format!("Tool \"{name}\" deleted successfully");
                self.edit(OwnedEdit::Delete { name }, message).await
            }
            "runGraphTool" => self.run_graph_tool(args, context).await,
            "testJSONata" => test_jsonata(&args).await,
            "testJSONLogic" => test_logic(&args).await,
            "testMcpTool" => self.test_mcp_tool(&args).await,
            "checkGraph" => self.check_graph().await,
            "drawGraph" => {
                self.draw_graph(args.get("toolName").and_then(Value::as_str))
                    .await
            }
            "buildGraph" => {
                let static_ = args.get("static").and_then(Value::as_bool) == Some(true);
                self.build_graph(text("output"), static_, context).await
            }
            "lockGraph" => self.lock_graph().await,
            other => Err(Failed::new(format!("Unknown tool: {other}"))),
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

    async fn mcp_servers(&self) -> Result<Value, Failed> {
        let items: Vec<Value> = self
            .discover(None)
            .await?
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
        Ok(json!({"items": items}))
    }

    async fn mcp_server_tools(&self, only: Option<&str>) -> Result<Value, Failed> {
        let mut items = Vec::new();
        for (server, contract) in self.discover(only).await? {
            let Ok(contract) = contract else { continue };
            for (name, tool) in contract.tools {
                items.push(json!({
                    "name": name,
                    "description": tool.description.unwrap_or_default(),
                    "server": server,
                }));
            }
        }
        Ok(json!({"items": items}))
    }

    async fn mcp_server_tool(&self, server: &str, tool: &str) -> Result<Value, Failed> {
        let found = self.discover(Some(server)).await?;
        let Some((_, contract)) = found.into_iter().next() else {
            return Err(Failed::new(format!("Server \"{server}\" not found")));
        };
        let contract = contract.map_err(|reason| {
            Failed::new(format!("Server \"{server}\" cannot be read: {reason}"))
        })?;
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
        args: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, Failed> {
        let arguments = match args.get("arguments") {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        };
        let breakpoints: Vec<String> = args
            .get("breakpoints")
            .and_then(Value::as_array)
            .map(|b| {
                b.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let name = args.get("toolName").and_then(Value::as_str);
        let definition = args.get("toolDefinition").filter(|d| !d.is_null());
        match (name, definition) {
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
                let Some(engine) = loaded.engine.clone() else {
                    return Err(Failed::new("The graph is not loaded"));
                };
                run::run(&engine, name, arguments, breakpoints, context.ct.clone()).await
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
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, Failed> {
        use mcpgraph_compiler::edit::{Edit, apply};
        let file = self.file()?;
        let mcp = self.mcp_file()?;
        let lock = match mcpgraph_compiler::lock::read_beside(self.inner.versions.graph_path()) {
            Some(Ok(lock)) => Some(lock),
            _ => None,
        };
        let name = tool_name(definition);
        let edit = if mcpgraph_compiler::edit::tool_names(&file).contains(&name) {
            Edit::Update {
                name: &name,
                tool: definition,
            }
        } else {
            Edit::Add(definition)
        };
        let proposed = apply(&file, mcp.as_ref(), lock.as_ref(), edit).map_err(|refusal| {
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
        let outcome = run::run(&engine, &name, arguments, breakpoints, context.ct.clone()).await;
        engine.shutdown().await;
        outcome
    }

    async fn test_mcp_tool(&self, args: &Map<String, Value>) -> Result<Value, Failed> {
        let server_name = args
            .get("server")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let tool = args.get("tool").and_then(Value::as_str).unwrap_or_default();
        let Some(server) = self.servers()?.into_iter().find(|s| s.name == server_name) else {
            return Err(Failed::new(format!("Server \"{server_name}\" not found")));
        };
        let raw = args.get("args").cloned().unwrap_or_else(|| json!({}));
        let started = Instant::now();
        let elapsed = |started: Instant| (started.elapsed().as_secs_f64() * 1000.0).round();
        let (sent, evaluated) = match args.get("context").filter(|c| !c.is_null()) {
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
        let outcome = mcpgraph_runtime::call_tool_once(&server, tool, map).await;
        let time = elapsed(started);
        Ok(match outcome {
            Ok(output) => {
                let mut out = json!({"output": output, "executionTime": time});
                if evaluated {
                    out["evaluatedArgs"] = sent;
                }
                out
            }
            Err(failure) => json!({
                "output": null,
                "executionTime": time,
                "error": {"message": failure.message, "details": {"kind": failure.kind.as_str()}},
            }),
        })
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
        let mermaid = crate::cli::picture::draw(graph, tool, crate::cli::Diagram::Mermaid)
            .map_err(Failed::new)?;
        Ok(json!({"mermaid": mermaid}))
    }

    /// Refuses a build output that would replace the graph, its `-m` file or its lock file, or
    /// anything but an earlier build (an executable file): a build replaces what is there.
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
        let graph = self.inner.versions.graph_path();
        let mut kept = vec![
            graph.to_path_buf(),
            mcpgraph_compiler::lock::lock_path(graph),
        ];
        kept.extend(self.inner.versions.mcp_path().map(PathBuf::from));
        let target = real(out);
        if kept.iter().any(|k| real(k) == target) {
            return Err(Failed::new(format!(
                "The output {} is one of the graph's own files: choose another path",
                out.display()
            )));
        }
        if let Ok(meta) = std::fs::metadata(out) {
            use std::os::unix::fs::PermissionsExt;
            if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
                return Err(Failed::new(format!(
                    "The output {} exists and is not an earlier build (an executable file): choose another path",
                    out.display()
                )));
            }
        }
        Ok(())
    }

    /// `mcpgraph build` of the current graph to `output` (relative to the graph file's
    /// directory), with cargo's progress forwarded as notifications.
    async fn build_graph(
        &self,
        output: &str,
        static_: bool,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, Failed> {
        let loaded = self.current().await?;
        let graph = graph_of(&loaded)?.clone();
        let source = self.inner.versions.graph_path().to_path_buf();
        let mut out = PathBuf::from(output);
        if out.is_relative() {
            let dir = source.parent().filter(|p| !p.as_os_str().is_empty());
            out = dir.map_or(out.clone(), |d| d.join(&out));
        }
        self.check_output(&out)?;
        let options = crate::aot::BuildOptions {
            profile: crate::aot::Profile::Release,
            static_,
            source: source.clone(),
            regenerate: format!("mcpgraph build {} -o {}", source.display(), out.display()),
            cache: crate::aot::cache_dir(),
        };
        let (lines, mut received) = tokio::sync::mpsc::unbounded_channel::<String>();
        let built = {
            let (graph, out) = (graph.clone(), out.clone());
            tokio::task::spawn_blocking(move || {
                crate::aot::build_reporting(&graph, &out, &options, &mut |line: &str| {
                    let _ = lines.send(line.to_string());
                })
            })
        };
        let token = context.meta.get_progress_token();
        let mut count = 0u32;
        while let Some(line) = received.recv().await {
            count += 1;
            if let Some(token) = &token {
                let param = ProgressNotificationParam::new(token.clone(), f64::from(count))
                    .with_message(line);
                let _ = context.peer.notify_progress(param).await;
            }
        }
        let built = built
            .await
            .map_err(|e| Failed::new(format!("the build panicked: {e}")))?
            .map_err(|e| Failed::new(e.to_string()))?;
        Ok(json!({
            "path": built.path,
            "bytes": built.bytes,
            "clientConfig": built.client_config(&graph),
        }))
    }

    /// `mcpgraph lock`, on a thread of its own (it runs a runtime of its own), then what the
    /// written lock holds.
    async fn lock_graph(&self) -> Result<Value, Failed> {
        let common = crate::cli::Common {
            file: self.inner.versions.graph_path().to_path_buf(),
            mcp: self.inner.versions.mcp_path().map(PathBuf::from),
        };
        let path = mcpgraph_compiler::lock::lock_path(&common.file);
        // What the graph's errors are with the lock as it is: a new lock that adds errors is
        // rolled back, so no toolkit call leaves the graph unservable.
        let graph_file = self.file()?;
        let mcp_file = common.mcp.as_deref().and_then(|p| SourceFile::read(p).ok());
        let old_text = std::fs::read_to_string(&path).ok();
        let errors = |lock: Option<&str>| -> (Vec<(String, String)>, mcpgraph_compiler::Checked) {
            let lock = lock.map(|t| SourceFile::new(path.display().to_string(), t));
            let checked =
                mcpgraph_compiler::compile_with(&graph_file, mcp_file.as_ref(), lock.as_ref());
            let errors = checked
                .diagnostics
                .iter()
                .filter(|d| d.is_error())
                .map(|d| (d.code.as_str().to_string(), d.message.clone()))
                .collect();
            (errors, checked)
        };
        let (before, _) = errors(old_text.as_deref());
        let (done, wait) = tokio::sync::oneshot::channel();
        std::thread::spawn(move || {
            let _ = done.send(crate::cli::lock::write(&common));
        });
        let code = wait
            .await
            .map_err(|_| Failed::new("mcpgraph lock stopped unexpectedly"))?;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let (after, checked) = errors(Some(&text));
        let mut old_errors = before.clone();
        let added = after
            .iter()
            .any(|e| match old_errors.iter().position(|o| o == e) {
                Some(i) => {
                    old_errors.remove(i);
                    false
                }
                None => true,
            });
        if added && Some(&text) != old_text.as_ref() {
            // Put the previous lock back (or none), atomically.
            let restored = match &old_text {
                Some(old) => {
                    let temp = path.with_extension("json.tmp");
                    std::fs::write(&temp, old).and_then(|()| std::fs::rename(&temp, &path))
                }
                None => std::fs::remove_file(&path),
            };
            let diagnostics = mcpgraph_compiler::render::json_all(&checked, &graph_file);
            let mut failed = Failed::new(format!(
                "The live servers no longer match the graph: with their contracts the graph has errors it did not have, so {} was {}. Fix the graph (the diagnostics), then lock again",
                path.display(),
                if restored.is_ok() {
                    "left as it was"
                } else {
                    "written, and could not be put back"
                }
            ));
            failed = failed.with("diagnostics", diagnostics);
            return Err(failed);
        }
        let lock_file = SourceFile::new(path.display().to_string(), text);
        let servers: Map<String, Value> = mcpgraph_compiler::lock::Lock::parse(&lock_file)
            .map(|lock| {
                lock.servers
                    .into_iter()
                    .map(|(name, s)| (name, json!({"tools": s.tools.keys().collect::<Vec<_>>()})))
                    .collect()
            })
            .unwrap_or_default();
        if code != std::process::ExitCode::SUCCESS {
            return Err(Failed::new(format!(
                "mcpgraph lock could not read every server the graph calls (the toolkit's stderr has the reasons); {} holds the others",
                path.display()
            ))
            .with("servers", Value::Object(servers)));
        }
        Ok(json!({"lockFile": path, "servers": servers}))
    }
}

fn tool_name(tool: &Value) -> String {
    tool.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `[{nodeId, output}]` as history records.
fn history_arg(args: &Map<String, Value>) -> Vec<(String, Value)> {
    args.get("history")
        .and_then(Value::as_array)
        .map(|records| {
            records
                .iter()
                .filter_map(|r| {
                    let id = r.get("nodeId")?.as_str()?.to_string();
                    Some((id, r.get("output").cloned().unwrap_or(Value::Null)))
                })
                .collect()
        })
        .unwrap_or_default()
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
async fn test_jsonata(args: &Map<String, Value>) -> Result<Value, Failed> {
    let expression = args
        .get("expression")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let context = args.get("context").cloned().unwrap_or_else(|| json!({}));
    let history = history_arg(args);
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

async fn test_logic(args: &Map<String, Value>) -> Result<Value, Failed> {
    let mut rule = args.get("expression").cloned().unwrap_or_default();
    // A rule sent as JSON text is the rule it spells.
    if let Value::String(text) = &rule
        && let Ok(parsed) = serde_json::from_str::<Value>(text)
    {
        rule = parsed;
    }
    let context = args.get("context").cloned().unwrap_or_else(|| json!({}));
    let history = history_arg(args);
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
        Ok(ListToolsResult::with_all_items(self.inner.tools.clone()))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.inner.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(tool) = self.get_tool(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        };
        let args = request.arguments.unwrap_or_default();
        let outcome = match tools::check_arguments(&tool, &args) {
            Ok(()) => self.dispatch(&request.name, args, &context).await,
            Err(failed) => Err(failed),
        };
        Ok(match outcome {
            Ok(value) => success(value),
            Err(failed) => failure(failed),
        }
        .into())
    }
}
