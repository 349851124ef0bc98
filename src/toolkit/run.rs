//! The graph as the toolkit runs it: the current file compiled (with the `-m` file and the lock
//! beside it) and loaded into an engine, reloaded when the text changes; and `runGraphTool`.

use super::history::Recorder;
use super::tools::Failed;
use mcpgraph_compiler::{Checked, Graph, Project, SourceFile};
use mcpgraph_runtime::{CallError, CallOptions, Debugger, Engine};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// One version of the graph (the runtime's one version lifecycle): the texts it was made from,
/// its check, and its engine when it checks. The engine is shut down when the last holder lets go
/// (a run in flight on a version that an edit replaced finishes on it).
pub type Loaded = mcpgraph_runtime::Version<Texts>;

/// What a version was made from, and its check.
pub struct Texts {
    /// `None` before the first version is loaded.
    key: Option<Key>,
    pub file: SourceFile,
    pub checked: Checked,
}

/// The texts a version depends on: the graph, the `-m` file and the lock file.
type Key = (String, Option<String>, Option<String>);

/// The current version, made anew when one of its files changed.
pub struct Versions {
    project: Project,
    versions: mcpgraph_runtime::Versions<Texts>,
    /// Held while a version is made, so two calls that see the same change load it once.
    loading: tokio::sync::Mutex<()>,
}

impl Versions {
    pub fn new(graph: PathBuf, mcp: Option<PathBuf>) -> Self {
        let nothing = Texts {
            key: None,
            file: SourceFile::new(graph.display().to_string(), String::new()),
            checked: Checked {
                graph: None,
                diagnostics: Vec::new(),
            },
        };
        Versions {
            project: Project::new(graph, mcp),
            versions: mcpgraph_runtime::Versions::new(Loaded::new(nothing, None)),
            loading: tokio::sync::Mutex::new(()),
        }
    }

    /// The version of `file` (the graph's current text), loaded if it is not yet.
    pub async fn of(&self, file: SourceFile) -> Result<Arc<Loaded>, Failed> {
        let mcp = match self.project.mcp_path() {
            Some(path) => Some(SourceFile::read(path).map_err(|d| Failed::new(d.message))?),
            None => None,
        };
        let sources = self.project.sources(file, mcp);
        let key = sources.texts();
        let _loading = self.loading.lock().await;
        let current = self.versions.current();
        if current.key.as_ref() == Some(&key) {
            return Ok(current);
        }
        let checked = sources.compile();
        let file = sources.graph;
        let engine = match &checked.graph {
            Some(graph) => Some(Arc::new(
                Engine::load(graph.clone()).map_err(|e| Failed::new(e.to_string()))?,
            )),
            None => None,
        };
        let texts = Texts {
            key: Some(key),
            file,
            checked,
        };
        self.versions
            .replace(Loaded::new(texts, engine))
            .map_err(|_| Failed::new("The toolkit is stopping"))
    }

    /// Shuts every engine down (the toolkit is stopping).
    pub async fn shutdown(&self) {
        for engine in self.versions.stop() {
            engine.shutdown().await;
        }
    }

    pub fn project(&self) -> &Project {
        &self.project
    }

    pub fn graph_path(&self) -> &Path {
        self.project.graph_path()
    }

    pub fn mcp_path(&self) -> Option<&Path> {
        self.project.mcp_path()
    }
}

/// The graph of a version, or why there is none (the diagnostics, one per line).
pub fn graph_of(loaded: &Loaded) -> Result<&Graph, Failed> {
    loaded.checked.graph.as_ref().ok_or_else(|| {
        let diagnostics = mcpgraph_compiler::render::json_all(&loaded.checked, &loaded.file);
        Failed::new(format!(
            "The graph does not check; no tool can run until it is fixed (checkGraph lists the problems):\n{}",
            mcpgraph_compiler::render::plain_list(&loaded.checked, &loaded.file)
        ))
        .with("diagnostics", diagnostics)
    })
}

/// `runGraphTool` on a loaded graph: the result and the history, or where a breakpoint
/// stopped it, or the failure with the history so far.
pub async fn run(
    engine: &Engine,
    tool: &str,
    arguments: Map<String, Value>,
    breakpoints: Vec<String>,
    cancel: CancellationToken,
) -> Result<Value, Failed> {
    if !engine.graph().tools.iter().any(|t| t.name == tool) {
        return Err(Failed::new(format!("Tool not found: {tool}")));
    }
    let recorder = Recorder::new();
    let debugger = (!breakpoints.is_empty()).then(|| Debugger::stopping(breakpoints));
    let options = CallOptions {
        cancel,
        observer: Some(recorder.observer()),
        debugger: debugger.clone(),
        ..CallOptions::default()
    };
    let outcome = engine.call_with(tool, arguments, options).await;
    let stopped_at = debugger.and_then(|d| d.stopped_at());
    match outcome {
        Ok(result) => Ok(json!({"result": result, "executionHistory": recorder.history(None)})),
        Err(CallError::Cancelled) if stopped_at.is_some() => Ok(json!({
            "result": null,
            "executionHistory": recorder.history(None),
            "stoppedAt": stopped_at,
        })),
        Err(CallError::Run(e)) => {
            let message = CallError::Run(e.clone()).to_string();
            let failed_node = e
                .node
                .as_ref()
                .map(|(id, node_type)| (id.as_str(), *node_type, e.failure.message.as_str()));
            let history = recorder
                .history(failed_node.map(|(id, node_type, text)| (id, node_type, text, e.kind())));
            let mut failed = Failed::new(message)
                .with_error("kind", e.kind().as_str())
                .with("executionHistory", history);
            if let Some((id, _)) = &e.node {
                failed = failed.with_error("nodeId", id.as_str());
            }
            Err(failed)
        }
        Err(other) => Err(Failed::new(other.to_string())
            .with_error("kind", other.kind().as_str())
            .with("executionHistory", recorder.history(None))),
    }
}
