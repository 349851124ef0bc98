//! `mcpgraph studio FILE [-m mcp.json] [--port P] [--open]`: the visual debugger, a local web
//! application (docs/studio.md).
//!
//! ```text
//! mod.rs      the command: the listener, the file followed, the HTTP API and its event stream
//! run.rs      one run under the engine's debugger: node states, records, contexts, the end
//! view.rs     the drawing of a tool: node boxes, edge routes, readable rules
//! assets/     the page (HTML, JS, CSS), embedded in the binary
//! ```
//!
//! The page talks to the API only; the API talks to the engine only through its debugging
//! surface (`mcpgraph_runtime::Debugger`), the one the toolkit and `call --trace` use.

mod run;
mod view;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Checked, SourceFile};
use mcpgraph_runtime::{Engine, Versions};
use run::Run;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// The page may load and connect to this server only.
const CSP: &str = "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// The largest request body the API reads (a tool's arguments): axum's default limit for a
/// body read whole, said here so the 413 names it.
const MAX_BODY: usize = 2 << 20;

/// How many events a slow page may fall behind before it is told to fetch the state again.
const EVENT_BACKLOG: usize = 4096;

pub struct Options {
    pub file: PathBuf,
    pub mcp: Option<PathBuf>,
    pub port: u16,
    pub open: bool,
}

/// Serves the studio until SIGTERM/SIGINT; exit 0, or 1 with the reason on stderr.
pub fn main(options: Options) -> ExitCode {
    mcpgraph_runtime::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(serve(options));
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(1)
        }
    }
}

async fn serve(options: Options) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", options.port))
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", options.port))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?
        .port();
    let project = mcpgraph_compiler::Project::new(&options.file, options.mcp.clone());
    let loading = project.clone();
    // Made before the first read, so a save during it is seen as a change.
    let mut watch =
        mcpgraph_runtime::Watch::new(project.watched(), plain(), move || loading.load());
    let (file, checked) = project.load();
    let (events, _) = broadcast::channel(EVENT_BACKLOG);
    let studio = Arc::new(Studio {
        port,
        versions: Versions::new(version(1, file, checked)),
        events,
        run: Mutex::new(None),
        next_run: AtomicU64::new(1),
        closing: CancellationToken::new(),
    });
    let follower = studio.clone();
    tokio::spawn(async move {
        loop {
            let (file, checked) = watch.next_version().await;
            follower.replace(file, checked);
        }
    });

    let url = format!("http://127.0.0.1:{port}/");
    eprintln!("mcpgraph studio: {url}");
    if options.open {
        open_browser(&url);
    }
    let app = router(studio.clone());
    let stopping = studio.clone();
    let signalled = async move {
        mcpgraph_runtime::shutdown_signal().await;
        // The run first, so the pages see it end before their streams close.
        let run = stopping.lock_run().clone();
        if let Some(run) = run {
            run.stop();
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), run.ended()).await;
        }
        stopping.closing.cancel();
    };
    axum::serve(mcpgraph_runtime::without_delay(listener), app)
        .with_graceful_shutdown(signalled)
        .await
        .map_err(|e| format!("serving failed: {e}"))?;
    let run = studio.lock_run().take();
    if let Some(run) = run {
        run.stop();
        // Its version's downstream servers close as it ends.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), run.ended()).await;
    }
    for engine in studio.versions.stop() {
        engine.shutdown().await;
    }
    Ok(())
}

fn plain() -> Style {
    Style {
        color: false,
        width: Some(100),
    }
}

fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        eprintln!("mcpgraph studio: cannot open a browser ({opener}: {e}); open {url}");
    }
}

/// The studio's state: the current version of the file, the run, the event stream.
pub struct Studio {
    port: u16,
    /// The current version of the file, and a replaced one while its run finishes.
    versions: Versions<View>,
    /// Every event, as the JSON text of one SSE `data:` line.
    events: broadcast::Sender<Arc<str>>,
    run: Mutex<Option<Arc<Run>>>,
    next_run: AtomicU64,
    /// Cancelled at SIGTERM/SIGINT: the event streams end, so the server can.
    closing: CancellationToken,
}

/// One version of the file, with its engine when it checks (a run on a version an edit replaced
/// finishes on it: the runtime's one version lifecycle).
pub type Version = mcpgraph_runtime::Version<View>;

/// What the page sees of a version.
pub struct View {
    number: u64,
    /// The `/api/graph` answer.
    view: Value,
}

/// The version `number` of the file.
fn version(number: u64, file: SourceFile, checked: Checked) -> Version {
    let engine = checked
        .graph
        .as_ref()
        .and_then(|graph| Engine::load(graph.clone()).ok().map(Arc::new));
    let tools: Vec<Value> = checked
        .graph
        .as_ref()
        .map(|graph| {
            graph
                .tools
                .iter()
                .map(|tool| view::tool_view(graph, tool))
                .collect()
        })
        .unwrap_or_default();
    let diagnostics = render::json_all(&checked, &file);
    let rendered = if checked.diagnostics.is_empty() {
        String::new()
    } else {
        render::human_all(&checked, &file, plain())
    };
    let checks = checked.graph.is_some() && engine.is_some();
    let view = json!({
        "version": number,
        "file": file.name,
        "source": file.text,
        "checks": checks,
        "diagnostics": diagnostics,
        "rendered": rendered,
        "tools": tools,
    });
    Version::new(View { number, view }, engine)
}

impl Studio {
    pub(crate) fn current_version(&self) -> Arc<Version> {
        self.versions.current()
    }

    /// Lets go of a version a run held (its engine closed, awaited, when it was replaced).
    pub(crate) async fn release(&self, version: Arc<Version>) {
        self.versions.release(version).await;
    }

    fn lock_run(&self) -> MutexGuard<'_, Option<Arc<Run>>> {
        self.run.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new version of the file: served from now on (runs in flight finish on theirs).
    fn replace(&self, file: SourceFile, checked: Checked) {
        let number = self.current_version().number + 1;
        // Refused only once the studio is closing, when no new version matters.
        let _ = self.versions.replace(version(number, file, checked));
        self.publish(&json!({"type": "graph", "version": number}));
    }

    fn publish(&self, event: &Value) {
        let _ = self.events.send(Arc::from(event.to_string()));
    }

    /// `{"type": kind, "version": …, "run": …}`: the file's version and the latest run.
    fn where_things_stand(&self, kind: &str) -> Value {
        json!({
            "type": kind,
            "version": self.current_version().number,
            "run": self.lock_run().as_ref().map(|run| run.id()),
        })
    }

    fn run(&self, id: u64) -> Option<Arc<Run>> {
        self.lock_run().clone().filter(|run| run.id() == id)
    }
}

fn router(studio: Arc<Studio>) -> axum::Router {
    axum::Router::new()
        .route(
            "/",
            get(|| async { page(INDEX_HTML, "text/html; charset=utf-8") }),
        )
        .route(
            "/assets/app.js",
            get(|| async { page(APP_JS, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/assets/app.css",
            get(|| async { page(APP_CSS, "text/css; charset=utf-8") }),
        )
        .route("/api/graph", get(graph))
        .route("/api/events", get(events))
        .route("/api/runs", post(start))
        .route("/api/runs/{run}", get(snapshot))
        .route("/api/runs/{run}/{command}", post(command))
        .route("/api/runs/{run}/breakpoints", put(breakpoints))
        .route("/api/runs/{run}/records/{index}", get(record))
        .layer(axum::middleware::from_fn_with_state(studio.clone(), guard))
        .with_state(studio)
}

/// DNS rebinding and cross-site requests: the Host must be this server's loopback name, an
/// Origin (when sent) this server's, and a body JSON (a cross-site form cannot send that
/// without a preflight, which is never answered).
async fn guard(State(studio): State<Arc<Studio>>, request: Request, next: Next) -> Response {
    let port = studio.port;
    let headers = request.headers();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let hosts = [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    if !host.is_some_and(|h| hosts.iter().any(|allowed| allowed.eq_ignore_ascii_case(h))) {
        return refuse(StatusCode::FORBIDDEN, "this Host is not the studio's");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = [
            format!("http://127.0.0.1:{port}"),
            format!("http://localhost:{port}"),
            format!("http://[::1]:{port}"),
        ];
        let origin = origin.to_str().unwrap_or_default();
        if !allowed.iter().any(|a| a.eq_ignore_ascii_case(origin)) {
            return refuse(
                StatusCode::FORBIDDEN,
                "requests from other origins are refused",
            );
        }
    }
    let method = request.method();
    if (method == axum::http::Method::POST || method == axum::http::Method::PUT)
        && !is_json(request.headers())
    {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "the body must be application/json",
        );
    }
    next.run(request).await
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

fn page(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn json_response(status: StatusCode, value: &Value) -> Response {
    let mut response = (status, value.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn refuse(status: StatusCode, message: &str) -> Response {
    json_response(status, &json!({"error": message}))
}

async fn graph(State(studio): State<Arc<Studio>>) -> Response {
    let version = studio.current_version();
    json_response(StatusCode::OK, &version.view)
}

async fn events(State(studio): State<Arc<Studio>>) -> impl IntoResponse {
    let receiver = studio.events.subscribe();
    // The first event says where things stand; the page fetches the rest.
    let hello = studio.where_things_stand("hello").to_string();
    let weak = Arc::downgrade(&studio);
    let closing = studio.closing.clone();
    let stream = futures::stream::unfold((Some(hello), receiver), move |(first, mut receiver)| {
        let weak = weak.clone();
        let closing = closing.clone();
        async move {
            if let Some(hello) = first {
                return Some((Ok(Event::default().data(hello)), (None, receiver)));
            }
            // At shutdown the stream ends, but only after what was published before it: the
            // end of the run that shutdown stopped.
            let received = tokio::select! {
                biased;
                received = receiver.recv() => received,
                () = closing.cancelled() => match receiver.try_recv() {
                    Ok(text) => Ok(text),
                    Err(_) => return None,
                },
            };
            let data = match received {
                Ok(text) => text.to_string(),
                // Fallen behind: where things stand now; the page fetches them again.
                Err(broadcast::error::RecvError::Lagged(_)) => match weak.upgrade() {
                    Some(studio) => studio.where_things_stand("resync").to_string(),
                    None => return None,
                },
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((
                Ok::<Event, std::convert::Infallible>(Event::default().data(data)),
                (None, receiver),
            ))
        }
    });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `POST /api/runs`: `{tool, arguments, breakpoints, startPaused}`.
async fn start(State(studio): State<Arc<Studio>>, body: Bytes) -> Response {
    if body.len() > MAX_BODY {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large");
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &format!("not JSON: {e}")),
    };
    let Some(tool) = request.get("tool").and_then(Value::as_str) else {
        return refuse(StatusCode::BAD_REQUEST, "`tool` (a string) is required");
    };
    let arguments = match request.get("arguments") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(map)) => map.clone(),
        Some(_) => return refuse(StatusCode::BAD_REQUEST, "`arguments` must be an object"),
    };
    let breakpoints = match strings(request.get("breakpoints")) {
        Ok(list) => list,
        Err(message) => return refuse(StatusCode::BAD_REQUEST, message),
    };
    let paused = request
        .get("startPaused")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let version = studio.current_version();
    let Some(engine) = version.engine().cloned() else {
        return refuse(
            StatusCode::CONFLICT,
            "the graph does not check: no tool can run until it is fixed",
        );
    };
    if !engine.graph().tools.iter().any(|t| t.name == tool) {
        return refuse(StatusCode::NOT_FOUND, &format!("no tool `{tool}`"));
    }
    let id = studio.next_run.fetch_add(1, Ordering::Relaxed);
    // One run at a time: the one before is stopped. The slot stays locked until the new run is
    // in it, so two starts at once cannot both run, and a page told of the new run (its first
    // event goes out here) finds it.
    let mut slot = studio.lock_run();
    if let Some(previous) = slot.take() {
        previous.stop();
    }
    *slot = Some(Run::start(
        id,
        tool.to_string(),
        breakpoints,
        paused,
        &studio,
        version,
        engine,
        arguments,
    ));
    drop(slot);
    json_response(StatusCode::OK, &json!({"run": id}))
}

fn strings(value: Option<&Value>) -> Result<Vec<String>, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or(()))
            .collect::<Result<_, _>>()
            .map_err(|()| "`breakpoints` must be a list of node ids"),
        Some(_) => Err("`breakpoints` must be a list of node ids"),
    }
}

fn no_run(id: u64) -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        &format!("no run {id} (only the latest run is kept)"),
    )
}

async fn snapshot(State(studio): State<Arc<Studio>>, UrlPath(id): UrlPath<u64>) -> Response {
    match studio.run(id) {
        Some(run) => json_response(StatusCode::OK, &run.snapshot()),
        None => no_run(id),
    }
}

async fn command(
    State(studio): State<Arc<Studio>>,
    UrlPath((id, command)): UrlPath<(u64, String)>,
    body: Bytes,
) -> Response {
    if body.len() > MAX_BODY {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large");
    }
    let Some(run) = studio.run(id) else {
        return no_run(id);
    };
    match command.as_str() {
        "continue" => run.debugger().resume(),
        "step" => run.debugger().step(),
        "pause" => run.debugger().pause(),
        "stop" => run.stop(),
        "answer" => {
            let value: Value = match serde_json::from_slice(&body) {
                Ok(value) => value,
                Err(e) => return refuse(StatusCode::BAD_REQUEST, &format!("not JSON: {e}")),
            };
            match run.answer(&value) {
                Ok(()) => {}
                Err(run::AnswerError::NoQuestion) => {
                    return refuse(StatusCode::CONFLICT, "the run is not waiting for an answer");
                }
                Err(run::AnswerError::Invalid(message)) => {
                    return refuse(StatusCode::BAD_REQUEST, message);
                }
            }
        }
        other => {
            return refuse(
                StatusCode::NOT_FOUND,
                &format!("no command `{other}` (continue, step, pause, stop, answer)"),
            );
        }
    }
    json_response(StatusCode::OK, &run.brief())
}

async fn breakpoints(
    State(studio): State<Arc<Studio>>,
    UrlPath(id): UrlPath<u64>,
    body: Bytes,
) -> Response {
    if body.len() > MAX_BODY {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large");
    }
    let Some(run) = studio.run(id) else {
        return no_run(id);
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, &format!("not JSON: {e}")),
    };
    match strings(Some(&value)) {
        Ok(list) => {
            run.debugger().set_breakpoints(list);
            json_response(StatusCode::OK, &run.brief())
        }
        Err(message) => refuse(StatusCode::BAD_REQUEST, message),
    }
}

async fn record(
    State(studio): State<Arc<Studio>>,
    UrlPath((id, index)): UrlPath<(u64, usize)>,
) -> Response {
    let Some(run) = studio.run(id) else {
        return no_run(id);
    };
    match run.record_with_context(index) {
        Some(record) => json_response(StatusCode::OK, &record),
        None => refuse(
            StatusCode::NOT_FOUND,
            &format!("run {id} has no record {index}"),
        ),
    }
}
