//! The MCP server: a hand-written rmcp `ServerHandler` over the engine (contract §4).

use crate::client_log::{self, ConnectionLevel};
use crate::engine::{CallError, CallOptions, Engine};
use crate::executor::{Asker, Question, Refusal};
use crate::mrtr::{BadState, Round, Sealer};
use crate::versions::{self, Versions};
use mcpgraph_compiler::ir::LogLevel;
use mcpgraph_compiler::{Checked, SourceFile, render};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, CustomRequest, CustomResult, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, SubscriptionFilter,
};
use rmcp::service::{
    NotificationContext, RequestContext, RoleServer, SubscriptionContext, SubscriptionSink,
};
use rmcp::{ErrorData, ServerHandler};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

mod notify;
use notify::Notifier;

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
    /// The level `logging/setLevel` set (client_log.rs): the process's over stdio, a
    /// session's or a request's over HTTP ([`GraphServer::for_connection`]).
    level: ConnectionLevel,
}

struct Inner {
    /// The version new calls run on, and replaced ones still finishing calls. `serve --watch`
    /// replaces it; each call takes the current one at its start, so a call in flight finishes
    /// on the version it began with.
    versions: Versions<Served>,
    /// The graph file is watched (`serve --watch`): `tools.listChanged` is advertised, and the
    /// connections are told of each new version.
    watching: AtomicBool,
    /// The connections to tell of a new version (`notifications/tools/list_changed`).
    peers: Mutex<Vec<rmcp::Peer<RoleServer>>>,
    /// The same for clients of protocol 2026-07-28, which ask for it with `subscriptions/listen`.
    subscriptions: Listeners<SubscriptionSink>,
    /// Cancelled when serving ends: no new version is taken after that.
    stopped: CancellationToken,
    /// Tool calls running now: an HTTP server's drain waits for none (docs/http.md).
    running: tokio::sync::watch::Sender<usize>,
    /// Seals the state of questions asked of 2026-07-28 clients (made on first use).
    sealer: std::sync::OnceLock<Sealer>,
    /// Cancelled to end every `subscriptions/listen` stream (a draining HTTP server).
    listening: CancellationToken,
}

/// One version of the served graph: the one loaded at start, or one `serve --watch` read later.
pub(crate) type Version = versions::Version<Served>;

/// What a version serves.
pub(crate) struct Served {
    identity: Identity,
    state: State,
}

enum State {
    Ready {
        tools: Vec<rmcp::model::Tool>,
    },
    /// The graph did not check: no tools, and every call answers with the diagnostics.
    Broken {
        diagnostics: String,
    },
}

impl Served {
    fn ready(engine: Arc<Engine>) -> Version {
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
        Version::new(
            Served {
                identity,
                state: State::Ready { tools },
            },
            Some(engine),
        )
    }

    /// The version of a checked graph file: a working one, or — when the graph does not check
    /// or cannot be loaded — one that reports why on every request.
    pub(crate) fn for_checked(checked: Checked, file: &SourceFile) -> Version {
        let diagnostics = render::plain_list(&checked, file);
        let Some(graph) = checked.graph else {
            return Served::broken(
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
            Ok(engine) => Served::ready(Arc::new(engine)),
            Err(e) => Served::broken(identity, e.to_string()),
        }
    }

    /// A version for a graph that does not check: it completes the handshake, puts the
    /// diagnostics in `instructions`, lists no tools and answers every call with them.
    fn broken(identity: Identity, diagnostics: String) -> Version {
        let diagnostics = capped(&diagnostics);
        let identity = Identity {
            instructions: Some(format!(
                "This graph does not check; no tool can run until it is fixed.\n{diagnostics}"
            )),
            ..identity
        };
        Version::new(
            Served {
                identity,
                state: State::Broken { diagnostics },
            },
            None,
        )
    }

    /// Why it serves nothing (`None` when it works).
    pub(crate) fn diagnostics(&self) -> Option<&str> {
        match &self.state {
            State::Ready { .. } => None,
            State::Broken { diagnostics } => Some(diagnostics),
        }
    }

    /// How many tools it serves.
    pub(crate) fn tool_count(&self) -> usize {
        match &self.state {
            State::Ready { tools, .. } => tools.len(),
            State::Broken { .. } => 0,
        }
    }
}

impl GraphServer {
    /// The server of a loaded graph.
    pub fn new(engine: Arc<Engine>) -> Self {
        GraphServer::serving(Served::ready(engine))
    }

    /// The server for a checked graph file (`mcpgraph serve`): a working one, or — when the
    /// graph does not check or cannot be loaded — one that reports why on every request.
    pub fn for_checked(checked: Checked, file: &SourceFile) -> GraphServer {
        GraphServer::serving(Served::for_checked(checked, file))
    }

    fn serving(version: Version) -> GraphServer {
        GraphServer {
            inner: Arc::new(Inner {
                versions: Versions::new(version),
                watching: AtomicBool::new(false),
                peers: Mutex::new(Vec::new()),
                subscriptions: Listeners::new(),
                stopped: CancellationToken::new(),
                running: tokio::sync::watch::Sender::new(0),
                sealer: std::sync::OnceLock::new(),
                listening: CancellationToken::new(),
            }),
            level: ConnectionLevel::default(),
        }
    }

    /// The same server for another connection: everything shared but the log level, which
    /// each HTTP session (or stateless request) sets for itself.
    pub(crate) fn for_connection(&self) -> GraphServer {
        GraphServer {
            inner: self.inner.clone(),
            level: ConnectionLevel::default(),
        }
    }

    /// The level of a call's log messages (client_log.rs): a 2026-07-28 request's own (none
    /// without one), else the connection's.
    fn log_threshold(&self, context: &RequestContext<RoleServer>) -> Option<LogLevel> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        if modern {
            context.meta.log_level().map(client_log::from_mcp)
        } else {
            Some(self.level.get())
        }
    }

    /// The engine new calls run on (`None` while the graph does not check).
    pub fn engine(&self) -> Option<Arc<Engine>> {
        self.current().engine().cloned()
    }

    /// Whether a call of `tool` on the current version is answered at once
    /// ([`Engine::answers_at_once`]).
    pub(crate) fn answers_at_once(&self, tool: &str) -> bool {
        self.current()
            .engine()
            .is_some_and(|engine| engine.answers_at_once(tool))
    }

    /// The version new calls run on.
    pub(crate) fn current(&self) -> Arc<Version> {
        self.inner.versions.current()
    }

    /// Marks the server as watched: `tools.listChanged` in its capabilities, and connections
    /// remembered so they can be told of new versions.
    pub(crate) fn set_watching(&self) {
        self.inner.watching.store(true, Ordering::Release);
    }

    fn watching(&self) -> bool {
        self.inner.watching.load(Ordering::Acquire)
    }

    /// The served graph's title (its server's name when it has none).
    pub fn title(&self) -> String {
        let version = self.current();
        let identity = &version.identity;
        if identity.title.is_empty() {
            identity.name.clone()
        } else {
            identity.title.clone()
        }
    }

    fn sealer(&self) -> &Sealer {
        self.inner.sealer.get_or_init(Sealer::from_env)
    }

    /// Whether questions asked of 2026-07-28 clients can be sealed: the key in
    /// `MCPGRAPH_REQUEST_STATE_KEY` is usable (or a random one was made). An HTTP server checks
    /// it before serving, so a bad key is not found by the first question.
    pub fn check_request_state_key(&self) -> Result<(), String> {
        self.sealer().check()
    }

    /// Some tool of the served graph has an `ask` node.
    pub fn asks(&self) -> bool {
        self.current().engine().is_some_and(|engine| {
            engine.graph().tools.iter().any(|tool| {
                tool.nodes
                    .iter()
                    .any(|n| matches!(n.kind, mcpgraph_compiler::ir::NodeKind::Ask { .. }))
            })
        })
    }

    /// The question round of a call from a 2026-07-28 client that advertised elicitation: such
    /// a client cannot be sent `elicitation/create`, so a run that asks stops and the call
    /// answers `input_required` (MRTR). `None` for every other client.
    fn round(
        &self,
        tool: &str,
        arguments: &serde_json::Map<String, Value>,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Arc<Round>>, BadState> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28);
        let asks = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        if !(modern && asks) {
            return Ok(None);
        }
        Round::start(
            self.sealer(),
            tool,
            arguments,
            request.request_state.as_deref(),
            request.input_responses.as_ref(),
            &context.ct,
        )
        .map(|round| Some(Arc::new(round)))
    }

    /// The graph checked and loaded: `/readyz` answers 200 (while not draining).
    pub fn is_ready(&self) -> bool {
        self.current().engine().is_some()
    }

    /// Resolves once no tool call is running (at once when none is).
    pub async fn idle(&self) {
        let mut running = self.inner.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Ends every `subscriptions/listen` stream (a draining HTTP server): each gets its final
    /// result, and the ones opened later end at once.
    pub fn end_subscriptions(&self) {
        self.inner.listening.cancel();
    }

    /// Cancels every call still running, on every version; their clients are answered that the
    /// execution was cancelled.
    pub fn cancel_calls(&self) {
        for engine in self.inner.versions.engines() {
            engine.cancel_runs();
        }
    }

    /// Serving has ended ([`GraphServer::shutdown`]).
    pub(crate) fn stopped(&self) -> &CancellationToken {
        &self.inner.stopped
    }

    /// New calls run on `version`; calls in flight finish on the one they started with, whose
    /// engine is shut down after the last of them. `false` (and `version` dropped) when serving
    /// has ended.
    pub(crate) fn replace(&self, version: Version) -> bool {
        self.inner.versions.replace(version).is_ok()
    }

    /// Tells every connection and subscription that the tools changed
    /// (`notifications/tools/list_changed`); closed connections are forgotten, and those made
    /// meanwhile kept. A subscription leaves the list when its stream ends ([`Listed`]).
    pub(crate) async fn tools_changed(&self) {
        let peers = std::mem::take(&mut *lock(&self.inner.peers));
        let mut open = Vec::with_capacity(peers.len());
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                open.push(peer);
            }
        }
        lock(&self.inner.peers).extend(open);
        for sink in self.inner.subscriptions.open() {
            // One that closed meanwhile refuses; its `listen` ends, and that unlists it.
            let _ = sink.notify_tool_list_changed().await;
        }
    }

    /// Stops taking new versions, then stops every run and closes the downstream servers of
    /// the current version and of replaced ones still finishing calls.
    pub async fn shutdown(&self) {
        self.inner.stopped.cancel();
        let engines = self.inner.versions.stop();
        futures::future::join_all(engines.iter().map(|e| e.shutdown())).await;
    }
}

/// One running call, counted while it lives.
struct Running<'a>(&'a tokio::sync::watch::Sender<usize>);

impl<'a> Running<'a> {
    fn start(running: &'a tokio::sync::watch::Sender<usize>) -> Running<'a> {
        running.send_modify(|n| *n += 1);
        Running(running)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// The `subscriptions/listen` streams open now. Each is listed while its `listen` runs and
/// leaves the list when that returns or is dropped (its client went away), not at the graph's
/// next change: closed streams kept until then grew a `--watch` server by 86 MB over 7,500 of
/// them (issue 24).
struct Listeners<T> {
    /// By the order they were listed in, which is the order they are told of a change.
    open: Mutex<BTreeMap<u64, T>>,
    next: AtomicU64,
}

impl<T: Clone> Listeners<T> {
    fn new() -> Listeners<T> {
        Listeners {
            open: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
        }
    }

    /// Lists `item` until the returned guard is dropped.
    fn add(&self, item: T) -> Listed<'_, T> {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.open).insert(key, item);
        Listed {
            listeners: self,
            key,
        }
    }

    /// What is listed now, in the order it was listed.
    fn open(&self) -> Vec<T> {
        lock(&self.open).values().cloned().collect()
    }
}

/// One entry of [`Listeners`], unlisted when this is dropped.
struct Listed<'a, T> {
    listeners: &'a Listeners<T>,
    key: u64,
}

impl<T> Drop for Listed<'_, T> {
    fn drop(&mut self) {
        lock(&self.listeners.open).remove(&self.key);
    }
}

/// A mutex's contents, poisoned or not (what it guards is a list, whole after any panic).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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

/// `-32601` for a method this server does not have, naming it and the methods it has (a
/// watched server also takes `subscriptions/listen`). The name is the client's: it is cut as
/// [`crate::metrics::client_chosen`] cuts one.
fn method_not_found(method: &str, watching: bool) -> ErrorData {
    let mut methods = vec![
        "initialize",
        "server/discover",
        "ping",
        "tools/list",
        "tools/call",
        "logging/setLevel",
    ];
    if watching {
        methods.push("subscriptions/listen");
    }
    ErrorData::new(
        rmcp::model::ErrorCode::METHOD_NOT_FOUND,
        format!(
            "Method not found: {} (this server answers {})",
            crate::metrics::client_chosen(method),
            methods.join(", ")
        ),
        None,
    )
}

impl ServerHandler for GraphServer {
    #[expect(
        deprecated,
        reason = "rmcp marks MCP logging deprecated (SEP-2577); clients use it"
    )]
    fn get_info(&self) -> InitializeResult {
        let current = self.current();
        let id = &current.identity;
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_logging()
            .build();
        if self.watching()
            && let Some(tools) = capabilities.tools.as_mut()
        {
            tools.list_changed = Some(true);
        }
        let info = InitializeResult::new(capabilities).with_server_info(
            Implementation::new(id.name.clone(), id.version.clone()).with_title(id.title.clone()),
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
        let tools = match &self.current().state {
            State::Ready { tools, .. } => tools.clone(),
            State::Broken { .. } => Vec::new(),
        };
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        match &self.current().state {
            State::Ready { tools, .. } => tools.iter().find(|t| t.name == name).cloned(),
            State::Broken { .. } => None,
        }
    }

    /// A watched server remembers each connection, to tell it of new versions; those closed
    /// since are forgotten then, so closed sessions are not kept until the next version.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if self.watching() {
            let mut peers = lock(&self.inner.peers);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.push(context.peer);
        }
    }

    /// Protocol 2026-07-28 clients ask for `notifications/tools/list_changed` with
    /// `subscriptions/listen`: a watched server accepts that much (rmcp narrows it to what was
    /// asked for and advertised); an unwatched one offers no subscriptions.
    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.watching()
            .then(|| SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // Listed while this runs: a stream its client closed ends it (or drops it), unlisted.
        let _listed = (context.accepted().tools_list_changed == Some(true))
            .then(|| self.inner.subscriptions.add(context.sink().clone()));
        tokio::select! {
            () = context.cancelled() => {}
            () = self.inner.listening.cancelled() => {}
        }
        Ok(())
    }

    /// rmcp hands over requests whose params it could not decode as custom requests; a standard
    /// method with malformed params is `-32602 Invalid params`, not "method not found". Any
    /// other method is not found, and the error says which methods there are.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        const STANDARD: &[&str] = &[
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "logging/setLevel",
        ];
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
        Err(method_not_found(&request.method, self.watching()))
    }

    // The methods a graph server does not offer, which rmcp would refuse with their bare name:
    // refused with the same text as any unknown method, naming what the server does answer
    // (clients probe them: the Inspector lists resources and prompts on connecting).
    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Err(method_not_found("resources/list", self.watching()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Err(method_not_found(
            "resources/templates/list",
            self.watching(),
        ))
    }

    async fn read_resource(
        &self,
        _request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(method_not_found("resources/read", self.watching()))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(method_not_found("prompts/list", self.watching()))
    }

    async fn get_prompt(
        &self,
        _request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(method_not_found("prompts/get", self.watching()))
    }

    /// A 2025-era client's level for this connection (client_log.rs); answered `{}`.
    #[expect(
        deprecated,
        reason = "rmcp marks MCP logging deprecated (SEP-2577); clients use it"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.set(client_log::from_mcp(request.level));
        Ok(())
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(method_not_found("completion/complete", self.watching()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Over stateless HTTP a `notifications/cancelled` comes in a request of its own: the
        // call is listed where that request finds it, while it runs (in_flight.rs).
        let _cancellable = crate::in_flight::Caller::of(&context.extensions)
            .map(|caller| caller.register(context.id.clone(), context.ct.clone()));
        // The version this call runs on to its end, even if a newer one is taken meanwhile.
        let version = self.current();
        let _running = Running::start(&self.inner.running);
        // Made-up tool names share one label: they must not crowd the real tools out.
        let label = match &version.state {
            State::Ready { tools, .. } if tools.iter().any(|t| t.name == request.name) => {
                request.name.as_ref()
            }
            _ => "(unknown tool)",
        };
        let call = crate::metrics::CallGuard::start(label);
        let Some(engine) = version.engine() else {
            let diagnostics = version.diagnostics().unwrap_or_default();
            call.finish(Some(("graph_does_not_check", diagnostics)));
            return Ok(failure(format!(
                "The graph does not check; no tool can run until it is fixed:\n{diagnostics}"
            ))
            .into());
        };
        let args = request.arguments.clone().unwrap_or_default();
        // A 2026-07-28 client that can answer questions gets them as `input_required` rounds.
        let round = match self.round(&request.name, &args, &request, &context) {
            Ok(round) => round,
            Err(BadState(message)) => {
                call.finish(Some(("invalid_arguments", &message)));
                return Err(ErrorData::invalid_params(message, None));
            }
        };
        let notifier = Notifier::for_call(&context, self.log_threshold(&context));
        let options = CallOptions {
            cancel: round
                .as_ref()
                .map_or_else(|| context.ct.clone(), |r| r.stop.clone()),
            observer: notifier
                .as_ref()
                .and_then(|n| n.observer(engine.reports_info(&request.name))),
            asker: match &round {
                Some(round) => Some(round.asker()),
                None => elicitation(&context),
            },
            debugger: notifier.as_ref().and_then(Notifier::debugger),
            log: notifier.as_ref().and_then(Notifier::log_sink),
            trace: trace_context(&context),
            request_id: crate::telemetry::enabled().then(|| context.id.to_string()),
        };
        let outcome = engine.call_with(&request.name, args, options).await;
        if let (Some(notifier), Err(error)) = (&notifier, &outcome)
            && !matches!(error, CallError::Cancelled)
        {
            notifier.call_failed(&request.name, error);
        }
        // Notifications after the result are lost to the client: every one is written and
        // flushed before the result is handed to rmcp.
        if let Some(notifier) = notifier {
            notifier.flush().await;
        }
        if let Some(input) = round.and_then(|r| r.input_required(self.sealer())) {
            return match input {
                Ok(input) => {
                    call.input_required();
                    Ok(input.into())
                }
                Err(message) => {
                    call.finish(Some(("unavailable", &message)));
                    Ok(failure(message).into())
                }
            };
        }
        let failed = outcome
            .as_ref()
            .err()
            .map(|e| (e.kind_name(), failure_text(e)));
        call.finish(failed.as_ref().map(|(kind, text)| (*kind, text.as_str())));
        match outcome {
            Ok(value) => Ok(success(value).into()),
            Err(error @ CallError::UnknownTool(_)) => {
                Err(ErrorData::invalid_params(failure_text(&error), None))
            }
            Err(CallError::Cancelled) => {
                Err(ErrorData::internal_error("Execution was cancelled", None))
            }
            Err(other) => Ok(failure(other.to_string()).into()),
        }
    }
}

/// The caller's trace context (trace_context.rs): `params._meta.traceparent` (any transport),
/// else the HTTP request's `traceparent` header; each with its `tracestate`.
fn trace_context(context: &RequestContext<RoleServer>) -> Option<crate::TraceContext> {
    if let Some(traceparent) = context.meta.get_traceparent() {
        return crate::TraceContext::parse(traceparent, context.meta.get_tracestate());
    }
    let headers = &context
        .extensions
        .get::<axum::http::request::Parts>()?
        .headers;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    crate::TraceContext::parse(header("traceparent")?, header("tracestate"))
}

/// Who answers a call's `ask` nodes: the client, through `elicitation/create`, when it
/// advertised the capability (extensions §7). Protocol 2026-07-28 forbids requests from the
/// server: its clients are asked through `input_required` rounds instead ([`GraphServer::round`]).
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
    use rmcp::model::{ClientResult, ElicitRequest, ElicitRequestParams};
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
        Ok(ClientResult::ElicitResult(result)) => match serde_json::to_value(&result) {
            Ok(result) => crate::mrtr::answer_of(&result),
            Err(e) => Err(Refusal::declined(format!("The answer cannot be read: {e}"))),
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

/// A call's failure as its log line and the client's error read it. An unknown tool's name is
/// the client's own choice and may take a megabyte, which would then be written twice per
/// request (this log line and rmcp's warning of the error response): it is cut by
/// [`crate::metrics::client_chosen`]. Other failures are written as they are: the tools they
/// name are the graph's.
fn failure_text(error: &CallError) -> String {
    match error {
        CallError::UnknownTool(name) => {
            CallError::UnknownTool(crate::metrics::client_chosen(name).into_owned()).to_string()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Streams whose clients went away leave the list at once, without any change of the graph
    /// (issue 24: they stayed until the next change); those still open stay, in order.
    #[test]
    fn closed_listen_streams_leave_the_list_at_once() {
        let listeners = Listeners::new();
        let kept = listeners.add(-1);
        let closed: Vec<Listed<'_, i64>> = (0..7500).map(|n| listeners.add(n)).collect();
        let also_kept = listeners.add(-2);
        assert_eq!(listeners.open().len(), 7502);
        drop(closed);
        assert_eq!(listeners.open(), [-1, -2]);
        drop(kept);
        drop(also_kept);
        assert!(listeners.open().is_empty());
        assert!(lock(&listeners.open).is_empty());
    }

    /// An unknown method's error names it and the methods there are; a long name is cut.
    #[test]
    fn method_not_found_names_the_method_and_the_methods_offered() {
        let error = method_not_found("foo/bar", false);
        assert_eq!(error.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(
            error.message,
            "Method not found: foo/bar (this server answers initialize, server/discover, ping, tools/list, tools/call, logging/setLevel)"
        );
        let watched = method_not_found("foo/bar", true);
        assert!(
            watched
                .message
                .ends_with("logging/setLevel, subscriptions/listen)"),
            "{}",
            watched.message
        );
        let long = "x".repeat(1 << 20);
        let error = method_not_found(&long, false);
        assert!(error.message.len() < 2048, "{} bytes", error.message.len());
    }
}
