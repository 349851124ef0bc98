//! The MCP server: a hand-written rmcp `ServerHandler` over the engine (contract §4).

use crate::engine::{CallError, CallOptions, Engine};
use crate::executor::{Asker, NodeObserver, NodeReport, Question, Refusal};
use mcpgraph_compiler::{Checked, SourceFile, render};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, Implementation, InitializeResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use std::sync::Arc;

/// What the server says about itself in `initialize`.
#[derive(Clone, Debug)]
struct Identity {
    name: String,
    version: String,
    title: String,
    instructions: Option<String>,
}

#[derive(Clone)]
pub struct GraphServer {
    inner: Arc<Inner>,
}

struct Inner {
    identity: Identity,
    state: State,
}

enum State {
    Ready {
        engine: Arc<Engine>,
        tools: Vec<rmcp::model::Tool>,
    },
    /// The graph did not check: no tools, and every call answers with the diagnostics.
    Broken { diagnostics: String },
}

impl GraphServer {
    /// The server of a loaded graph.
    pub fn new(engine: Arc<Engine>) -> Self {
        let graph = engine.graph();
        let identity = Identity {
            name: graph.server.name.clone(),
            version: graph.server.version.clone(),
            title: graph.server.title.clone(),
            instructions: graph.server.instructions.clone(),
        };
        let tools = engine
            .program()
            .tools
            .iter()
            .map(|t| t.advertised.clone())
            .collect();
        GraphServer {
            inner: Arc::new(Inner {
                identity,
                state: State::Ready { engine, tools },
            }),
        }
    }

    /// The server for a checked graph file (`mcpgraph serve`): a working one, or — when the
    /// graph does not check or cannot be loaded — one that reports why on every request.
    pub fn for_checked(checked: Checked, file: &SourceFile) -> GraphServer {
        let diagnostics = render::plain_list(&checked, file);
        let Some(graph) = checked.graph else {
            return GraphServer::broken(
                Identity {
                    name: "mcpgraph".to_string(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                    title: format!("mcpgraph: {} (does not check)", file.name),
                    instructions: None,
                },
                diagnostics,
            );
        };
        let identity = Identity {
            name: graph.server.name.clone(),
            version: graph.server.version.clone(),
            title: graph.server.title.clone(),
            instructions: graph.server.instructions.clone(),
        };
        match Engine::load(graph) {
            Ok(engine) => GraphServer::new(Arc::new(engine)),
            Err(e) => GraphServer::broken(identity, e.to_string()),
        }
    }

    /// A server for a graph that does not check: it completes the handshake, puts the
    /// diagnostics in `instructions`, lists no tools and answers every call with them.
    fn broken(identity: Identity, diagnostics: String) -> Self {
        let diagnostics = capped(&diagnostics);
        let identity = Identity {
            instructions: Some(format!(
                "This graph does not check; no tool can run until it is fixed.\n{diagnostics}"
            )),
            ..identity
        };
        GraphServer {
            inner: Arc::new(Inner {
                identity,
                state: State::Broken { diagnostics },
            }),
        }
    }

    pub fn engine(&self) -> Option<&Arc<Engine>> {
        match &self.inner.state {
            State::Ready { engine, .. } => Some(engine),
            State::Broken { .. } => None,
        }
    }
}

/// The most diagnostics put into `instructions` and call results: a client shows instructions
/// to a model, and thousands of lines would only crowd it out.
const SHOWN_DIAGNOSTICS: usize = 50;

/// The first [`SHOWN_DIAGNOSTICS`] lines, then how many more there are.
fn capped(diagnostics: &str) -> String {
    let total = diagnostics.lines().count();
    if total <= SHOWN_DIAGNOSTICS {
        return diagnostics.to_string();
    }
    let mut shown: Vec<&str> = diagnostics.lines().take(SHOWN_DIAGNOSTICS).collect();
    let more = format!("… and {} more", total - SHOWN_DIAGNOSTICS);
    shown.push(&more);
    shown.join("\n")
}

/// A successful result: the compact JSON text, plus `structuredContent` for an object.
fn success(value: Value) -> CallToolResult {
    let text = crate::value::to_js_json(&value);
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if value.is_object() {
        result.structured_content = Some(value);
    }
    result
}

fn failure(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

impl ServerHandler for GraphServer {
    fn get_info(&self) -> InitializeResult {
        let id = &self.inner.identity;
        let info = InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new(id.name.clone(), id.version.clone())
                    .with_title(id.title.clone()),
            );
        match &id.instructions {
            Some(text) => info.with_instructions(text.clone()),
            None => info,
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = match &self.inner.state {
            State::Ready { tools, .. } => tools.clone(),
            State::Broken { .. } => Vec::new(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        match &self.inner.state {
            State::Ready { tools, .. } => tools.iter().find(|t| t.name == name).cloned(),
            State::Broken { .. } => None,
        }
    }

    /// rmcp hands over requests whose params it could not decode as custom requests; a standard
    /// method with malformed params is `-32602 Invalid params`, not "method not found".
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        const STANDARD: &[&str] = &["initialize", "ping", "tools/list", "tools/call"];
        if STANDARD.contains(&request.method.as_str()) {
            let params = request
                .params
                .map(|p| p.to_string())
                .unwrap_or_else(|| "none".into());
            return Err(ErrorData::invalid_params(
                format!("Invalid params for {}: {params}", request.method),
                None,
            ));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "Method not found",
            None,
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let engine = match &self.inner.state {
            State::Ready { engine, .. } => engine.clone(),
            State::Broken { diagnostics } => {
                return Ok(failure(format!(
                    "The graph does not check; no tool can run until it is fixed:\n{diagnostics}"
                ))
                .into());
            }
        };
        let args = request.arguments.unwrap_or_default();
        let progress = progress_observer(&context);
        let observer = progress.as_ref().map(|p| p.observer.clone());
        let options = CallOptions {
            cancel: context.ct.clone(),
            observer,
            asker: elicitation(&context),
            ..CallOptions::default()
        };
        let outcome = engine.call_with(&request.name, args, options).await;
        // Progress after the result is lost to the client: every notification is written and
        // flushed before the result is handed to rmcp.
        if let Some(progress) = progress {
            progress.flush().await;
        }
        match outcome {
            Ok(value) => Ok(success(value).into()),
            Err(CallError::UnknownTool(name)) => Err(ErrorData::invalid_params(
                format!("Unknown tool: {name}"),
                None,
            )),
            Err(CallError::Cancelled) => {
                Err(ErrorData::internal_error("Execution was cancelled", None))
            }
            Err(other) => Ok(failure(other.to_string()).into()),
        }
    }
}

/// The longest a result waits for its progress notifications to be written (a client that
/// stopped reading would otherwise hold the result forever).
const PROGRESS_FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the forwarder of a call's progress is asked to do, in order.
enum Progress {
    Note(ProgressNotificationParam),
    /// Answer once every note before this one was written and flushed.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// A call's progress: the observer the run reports nodes to, and the queue to its forwarder.
struct ProgressForwarder {
    observer: NodeObserver,
    queue: tokio::sync::mpsc::UnboundedSender<Progress>,
}

impl ProgressForwarder {
    /// Returns once every notification queued so far was written and flushed (or the limit
    /// passed, or the connection closed).
    async fn flush(self) {
        let (done, wait) = tokio::sync::oneshot::channel();
        if self.queue.send(Progress::Flush(done)).is_ok() {
            let _ = tokio::time::timeout(PROGRESS_FLUSH_LIMIT, wait).await;
        }
    }
}

/// One `notifications/progress` per executed node when the call carries a progress token, sent
/// in order by one task. rmcp writes notifications and responses on separate paths, so order is
/// kept here: `notify_progress` returns once its line is flushed, and the call's result waits
/// for [`ProgressForwarder::flush`].
fn progress_observer(context: &RequestContext<RoleServer>) -> Option<ProgressForwarder> {
    let token = context.meta.get_progress_token()?;
    let peer = context.peer.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Progress>();
    tokio::spawn(async move {
        let mut open = true;
        while let Some(item) = rx.recv().await {
            match item {
                Progress::Note(param) if open => {
                    open = peer.notify_progress(param).await.is_ok();
                }
                Progress::Note(_) => {}
                Progress::Flush(done) => {
                    let _ = done.send(());
                }
            }
        }
    });
    let queue = tx.clone();
    let observer: NodeObserver = Arc::new(move |report: &NodeReport<'_>| {
        let param = ProgressNotificationParam::new(token.clone(), report.index as f64)
            .with_message(format!("{} ({})", report.node, report.node_type));
        let _ = tx.send(Progress::Note(param));
    });
    Some(ProgressForwarder { observer, queue })
}

/// Who answers a call's `ask` nodes: the client, through `elicitation/create`, when it
/// advertised the capability (extensions §7). Protocol 2026-07-28 forbids requests from the
/// server; its input-required round trip is not implemented yet, so its clients are
/// `unavailable` (docs/semantics.md).
fn elicitation(context: &RequestContext<RoleServer>) -> Option<Asker> {
    let info = context.peer.peer_info()?;
    info.capabilities.elicitation.as_ref()?;
    let version = context
        .protocol_version()
        .unwrap_or_else(|| info.protocol_version.clone());
    if version >= rmcp::model::ProtocolVersion::V_2026_07_28 {
        return None;
    }
    let peer = context.peer.clone();
    Some(Arc::new(move |question: Question| {
        let peer = peer.clone();
        Box::pin(ask_client(peer, question))
    }))
}

async fn ask_client(peer: rmcp::Peer<RoleServer>, question: Question) -> Result<Value, Refusal> {
    use rmcp::model::{ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction};
    let schema = serde_json::from_value(question.schema.clone())
        .map_err(|e| Refusal::unavailable(format!("The question's schema cannot be sent: {e}")))?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: question.message.clone(),
        requested_schema: schema,
    };
    let request = rmcp::model::ServerRequest::ElicitRequest(ElicitRequest::new(params));
    let handle = peer
        .send_cancellable_request(request, rmcp::service::PeerRequestOptions::no_options())
        .await
        .map_err(|e| Refusal::unavailable(format!("The question could not be sent: {e}")))?;
    let id = handle.id.clone();
    // Abandoned (the run's end, its cancellation): the client is told, from a task of its own.
    let mut abandoned = Abandoned {
        peer: Some(peer.clone()),
        id: id.clone(),
    };
    let timeout = async {
        match question.timeout_ms {
            Some(ms) => tokio::time::sleep(std::time::Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    let response = tokio::select! {
        response = handle.await_response() => response,
        // The ask's own timeout: the client is told before the run goes on, so the withdrawal
        // reaches it before the call's result.
        () = timeout => {
            abandoned.peer = None;
            let param = rmcp::model::CancelledNotificationParam::new(
                Some(id),
                Some("no answer in time".to_string()),
            );
            let _ = peer.notify_cancelled(param).await;
            return Err(Refusal::timed_out(question.timeout_ms.unwrap_or_default()));
        }
    };
    abandoned.peer = None;
    match response {
        Ok(ClientResult::ElicitResult(result)) => match result.action {
            ElicitationAction::Accept => result
                .content
                .ok_or_else(|| Refusal::declined("The answer was accepted without content")),
            ElicitationAction::Decline => Err(Refusal::declined("The person declined")),
            ElicitationAction::Cancel => Err(Refusal::declined("The person cancelled")),
            _ => Err(Refusal::declined("The person did not accept")),
        },
        Ok(_) => Err(Refusal::declined(
            "The client answered with something other than an elicitation result",
        )),
        Err(rmcp::ServiceError::McpError(e)) => Err(Refusal::declined(format!(
            "The client answered with an error: MCP error {}: {}",
            e.code.0, e.message
        ))),
        Err(e) => Err(Refusal::declined(format!(
            "The question got no answer: {e}"
        ))),
    }
}

/// Sends `notifications/cancelled` for an elicitation request dropped before its answer.
struct Abandoned {
    peer: Option<rmcp::Peer<RoleServer>>,
    id: rmcp::model::RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let param = rmcp::model::CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the question is no longer asked".to_string()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(param).await;
            });
        }
    }
}
