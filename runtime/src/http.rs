//! Serving over streamable HTTP (docs/http.md): rmcp's `StreamableHttpService` mounted in axum,
//! stateless for every protocol era, so any replica behind a round-robin proxy answers any
//! request. Secure by default: a loopback bind, the Host allowlist, Origin validation, a bearer
//! token (required off loopback unless waived), a body limit, a deadline for each request head
//! and a cap on open connections. `/healthz`, `/readyz` and `/metrics` for operators; SIGTERM
//! drains the calls in flight before the process exits.

use crate::serve::{
    HttpError, LogFormat, ServeError, init_logging_as, run_serving, shutdown_signal,
};
use crate::server::GraphServer;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use connections::{BusyBody, Connection, Connections};
use futures::StreamExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, RequestId};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde::Deserialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

pub(crate) mod cancel;
mod connections;
pub(crate) mod flags;

pub use flags::{FlagError, FlagValue, HTTP_FLAGS, HttpFlag, HttpFlags, token_from_env};

/// Where `--http` listens when no address is given.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// The MCP endpoint's path.
pub const ENDPOINT: &str = "/mcp";
/// The largest request body taken by default (rmcp's own default).
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;
/// How long a shutdown waits for calls in flight by default.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(30);
/// How long a connection gets to send a whole request head by default: ample for any client,
/// short enough that a peer holding connections open without requests gains little.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest header timeout taken: hyper adds it to the current instant, which a larger one
/// would overflow (a panic in every connection).
pub const MAX_HEADER_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// How many connections may be open at once by default: under the common limit of 256 file
/// descriptors, with room for the pipes of the downstream servers.
pub const DEFAULT_MAX_CONNECTIONS: usize = 128;
/// How often an idle SSE stream gets a comment: also how soon a closed stream is noticed, and
/// so how soon its run is cancelled.
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// How long answers get to be written once their calls have ended, before the streams still
/// open are cut.
const ANSWER_GRACE: Duration = Duration::from_millis(500);
/// How long an idle connection closed for a newcomer at the cap gets to write what hyper still
/// holds of its last answer.
const EVICTION_GRACE: Duration = Duration::from_secs(1);
/// Once the drain has ended, the most the open connections get to close.
const CLOSE_LIMIT: Duration = Duration::from_secs(5);
/// The most the downstream servers get to close.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(8);

/// How a graph is served over HTTP: the same for `mcpgraph serve --http`, built servers'
/// `--http` and `graph!`'s `serve_http`. The flags that make it are in [`HTTP_FLAGS`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpOptions {
    /// `host:port` to listen on; port 0 picks a free one (the address is printed). `--http`
    /// takes a bare port (`8090`, `:8090`) as one on 127.0.0.1.
    pub addr: String,
    /// More names (or `name:port`) the `Host` header may carry: a proxy's public name.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (`https://app.example.com`); any other `Origin` is refused.
    pub allowed_origins: Vec<String>,
    /// The bearer token every request to `/mcp` and `/metrics` must carry.
    pub auth_token: Option<String>,
    /// Serve off loopback without a token: the user said so explicitly.
    pub allow_unauthenticated: bool,
    pub max_body_bytes: usize,
    /// How long a connection gets to send a whole request head, from when it opens or from the
    /// end of its previous answer; then it is closed. So a connection that never completes a
    /// request, or an idle keep-alive one, does not hold its place. Taken up to
    /// [`MAX_HEADER_TIMEOUT`].
    pub header_timeout: Duration,
    /// The most connections open at once (at least 1). At the cap a new connection takes the
    /// place of an idle one (of the address holding the most places); when all are busy, it
    /// waits for one, and the next ones wait in the listening socket's backlog.
    pub max_connections: usize,
    /// How long SIGTERM waits for calls in flight before cancelling them.
    pub drain_timeout: Duration,
    /// Legacy-era (2025) clients get sessions (`Mcp-Session-Id`), for one replica: they can
    /// then be asked questions and told of new versions, but a round-robin proxy breaks them.
    pub sessions: bool,
    pub log_format: LogFormat,
}

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            addr: DEFAULT_ADDR.to_string(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            auth_token: None,
            allow_unauthenticated: false,
            max_body_bytes: DEFAULT_MAX_BODY,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain_timeout: DEFAULT_DRAIN,
            sessions: false,
            log_format: LogFormat::Text,
        }
    }
}

/// A whole process's HTTP serving: logging, a multi-threaded runtime, the server `make_server`
/// builds, serving until SIGTERM/SIGINT, the drain, the downstream servers closed. Exit 0, or 1
/// with the error on stderr.
pub fn run_http(
    make_server: impl FnOnce() -> Result<GraphServer, ServeError>,
    options: HttpOptions,
) -> ExitCode {
    init_logging_as(
        options.log_format,
        "warn,mcpgraph::call=info,mcpgraph_runtime::http=info",
    );
    run_serving(async move { serve_http(make_server()?, options).await })
}

/// Serves `server` over HTTP until SIGTERM/SIGINT, then drains (docs/http.md): `/readyz` turns
/// 503 and new connections are refused at once, calls in flight get
/// [`HttpOptions::drain_timeout`] to finish, what is left is cancelled, and the downstream
/// servers are closed.
pub async fn serve_http(server: GraphServer, options: HttpOptions) -> Result<(), ServeError> {
    serve_http_until(server, options, shutdown_signal()).await
}

/// `listener` with `TCP_NODELAY` set on every connection it accepts. Without it, a response
/// written in two parts (head, then body) on a keep-alive connection waits for the client's
/// delayed ACK: about 40 ms a call, for every real client. Every HTTP server of mcpgraph
/// (`serve --http`, built servers, the studio) accepts through this.
pub fn without_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|stream| {
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a connection: {error}");
        }
    })
}

/// [`serve_http`], stopping when `stop` resolves instead of on a signal.
pub async fn serve_http_until(
    server: GraphServer,
    options: HttpOptions,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let listener = tokio::net::TcpListener::bind(&options.addr)
        .await
        .map_err(|source| HttpError::Bind {
            addr: options.addr.clone(),
            source,
        })?;
    let local = listener.local_addr().map_err(HttpError::Serve)?;
    if !local.ip().is_loopback() && options.auth_token.is_none() && !options.allow_unauthenticated {
        return Err(HttpError::Unauthenticated { addr: local }.into());
    }
    server
        .check_request_state_key()
        .map_err(HttpError::RequestStateKey)?;
    if server.asks() && std::env::var_os(crate::mrtr::KEY_VARIABLE).is_none() {
        tracing::warn!(
            "{} is not set: a question (ask) put to a 2026-07-28 client can only be continued by this process; give every replica the same key",
            crate::mrtr::KEY_VARIABLE
        );
    }
    let mcp_token = CancellationToken::new();
    let draining = Arc::new(AtomicBool::new(false));
    let app = router(
        &server,
        &options,
        local,
        mcp_token.clone(),
        draining.clone(),
    );
    let title = server.title();
    eprintln!(
        "mcpgraph: serving {title} at http://{local}{ENDPOINT} (stateless{}{})",
        if options.sessions {
            ", sessions for 2025 clients"
        } else {
            ""
        },
        if options.auth_token.is_some() {
            ", bearer token required"
        } else {
            ""
        }
    );

    // The drain: on the signal, not ready and no new connections ([`serve_connections`]),
    // subscriptions end; calls in flight finish and their answers are written, and serving
    // ends when the last connection closes. At the drain timeout what is left is cancelled
    // (its client told so), and a moment later every stream still open is cut.
    let stopping = CancellationToken::new();
    let drained = {
        let server = server.clone();
        let stopping = stopping.clone();
        let mcp_token = mcp_token.clone();
        let drain = options.drain_timeout;
        let sessions = options.sessions;
        tokio::spawn(async move {
            stop.await;
            let started = std::time::Instant::now();
            draining.store(true, Ordering::Release);
            stopping.cancel();
            server.end_subscriptions();
            tracing::info!("draining: no new connections; waiting for calls in flight");
            let idle = tokio::time::timeout(drain, server.idle()).await.is_ok();
            if idle && sessions {
                // A 2025 client's session stream never ends by itself: once every call has
                // been answered, the answers get a moment to be written, then it is cut.
                tokio::time::sleep(ANSWER_GRACE).await;
            } else {
                // Connections close as their answers are written; this runs only if one
                // outlives the drain.
                tokio::time::sleep(drain.saturating_sub(started.elapsed())).await;
                if idle {
                    tracing::warn!(
                        "drain timeout ({} s) reached: closing the connections still open",
                        drain.as_secs_f64()
                    );
                } else {
                    tracing::warn!(
                        "drain timeout ({} s) reached: cancelling the calls still running",
                        drain.as_secs_f64()
                    );
                }
                server.cancel_calls();
                tokio::time::sleep(ANSWER_GRACE).await;
            }
            mcp_token.cancel();
        })
    };
    tokio::select! {
        () = serve_connections(without_delay(listener), app, &options, stopping) => {}
        // A connection that does not close after the drain (a client that stopped reading)
        // does not hold the process.
        () = async {
            mcp_token.cancelled().await;
            tokio::time::sleep(CLOSE_LIMIT).await;
        } => {}
    }
    drained.abort();
    let _ = tokio::time::timeout(SHUTDOWN_LIMIT, server.shutdown()).await;
    // The spans still held go to the collector (telemetry.rs), those of calls the drain cut
    // short too: they end as their calls unwind, which takes a moment after the shutdown.
    let _ = tokio::time::timeout(ANSWER_GRACE, server.idle()).await;
    crate::telemetry::flush().await;
    Ok(())
}

/// Serves `app` on the connections `listener` accepts until `stopping` is cancelled; then
/// accepts no more and closes the listening socket (new connections are refused), lets each
/// open connection finish the answer it is writing (an idle one closes at once), and returns
/// when the last has closed. This is `axum::serve` with its graceful shutdown, plus the two
/// limits of `options` that axum has no place for. Without them a connection that never sends
/// a whole request (opened before any token is checked) held its file descriptor forever, and
/// a few hundred of them left no client able to connect (issue 24, item 6):
/// - [`HttpOptions::header_timeout`], hyper's header read timeout: a connection that has not
///   sent a whole request head within it of opening, or of its previous answer, is closed, so
///   an idle keep-alive connection is closed too. The connections are served as HTTP/1 only
///   (the one protocol axum is built with here): hyper-util's automatic choice would first
///   read for an HTTP/2 preface, with no deadline, before the HTTP/1 reader and its clock.
/// - [`HttpOptions::max_connections`]: each connection holds a permit while it is open. At
///   the cap, a connection accepted takes the place of an idle one (connections.rs: of the
///   address holding the most places, the least recently active); if every one is busy it
///   waits for a place, and the next ones wait in the kernel's backlog instead of taking the
///   descriptors the downstream servers' pipes need. So at most one more than the cap is open.
async fn serve_connections(
    mut listener: impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = SocketAddr>,
    app: axum::Router,
    options: &HttpOptions,
    stopping: CancellationToken,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout.min(MAX_HEADER_TIMEOUT));
    let builder = Arc::new(builder);
    let permits = Arc::new(Semaphore::new(
        options.max_connections.clamp(1, Semaphore::MAX_PERMITS),
    ));
    let connections = Arc::new(Connections::default());
    // Every connection's task holds a receiver: `closed()` resolves when the last has ended.
    let (all_closed, open) = watch::channel(());
    loop {
        let (stream, peer) = tokio::select! {
            biased;
            () = stopping.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        // At the cap an idle connection gives up its place (connections.rs); if every one is
        // busy, this one waits, looking again whenever one turns idle.
        let permit = loop {
            if let Ok(permit) = permits.clone().try_acquire_owned() {
                break Some(permit);
            }
            let turned_idle = connections.turned_idle();
            let mut turned_idle = std::pin::pin!(turned_idle);
            turned_idle.as_mut().enable();
            let declined = connections.declined();
            let mut declined = std::pin::pin!(declined);
            declined.as_mut().enable();
            let evicted = connections.evict_one();
            tokio::select! {
                biased;
                () = stopping.cancelled() => break None,
                permit = permits.clone().acquire_owned() => break permit.ok(),
                () = turned_idle, if !evicted => {}
                () = declined, if evicted => {}
            }
        };
        let Some(permit) = permit else { break };
        let builder = builder.clone();
        let registered = connections.open(peer);
        let connection = registered.0.clone();
        // A cancellation counts only from the address its call came from (http/cancel.rs);
        // the guard marks the connection busy while it answers (connections.rs).
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            app.clone(),
            move |mut request: Request<_>| {
                request
                    .extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
                request.extensions_mut().insert(connection.clone());
                request
            },
        ));
        let stopping = stopping.clone();
        let open = open.clone();
        tokio::spawn(async move {
            // Held until the connection has closed: its place, and the drain's count of it.
            let _held = (permit, open);
            let connection = registered.0.clone();
            let _registered = registered;
            let served = builder.serve_connection(TokioIo::new(stream), service);
            let mut served = std::pin::pin!(served);
            let closed = tokio::select! {
                closed = served.as_mut() => closed,
                () = stopping.cancelled() => {
                    served.as_mut().graceful_shutdown();
                    served.await
                }
                () = connection.evicted() => {
                    if connection.is_idle() {
                        if connection.never_active() {
                            // Nothing was ever written on it: closed at once (dropped).
                            return;
                        }
                        // hyper may still hold the end of its last answer: written, briefly.
                        served.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(EVICTION_GRACE, served).await;
                        return;
                    }
                    // A request began after it was chosen: closed after that answer, and
                    // the newcomer chooses another.
                    connection.decline();
                    served.as_mut().graceful_shutdown();
                    served.await
                }
            };
            if let Err(error) = closed {
                tracing::debug!("a connection closed: {error}");
            }
        });
    }
    drop(listener);
    drop(open);
    all_closed.closed().await;
}

/// What the routes and layers share, behind one `Arc`: each layer's `State` is a clone per
/// request.
struct AppState {
    server: GraphServer,
    token: Option<Arc<str>>,
    draining: Arc<AtomicBool>,
    /// The `Host`s and `Origin`s this server answers (rmcp checks them on `/mcp`; [`guard`]
    /// on `/metrics`).
    hosts: Arc<[String]>,
    origins: Arc<[String]>,
}

fn router(
    server: &GraphServer,
    options: &HttpOptions,
    local: SocketAddr,
    mcp_token: CancellationToken,
    draining: Arc<AtomicBool>,
) -> axum::Router {
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .map(String::from)
        .collect();
    // The address bound, when it is one (not 0.0.0.0): clients reaching it directly name it.
    if !local.ip().is_unspecified() && !local.ip().is_loopback() {
        hosts.push(local.ip().to_string());
    }
    hosts.extend(options.allowed_hosts.iter().cloned());
    // The server's own origins (a page it serves, a same-origin tool) and the user's; any other
    // Origin is refused. Requests without one (every non-browser client) pass.
    let mut origins: Vec<String> = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|host| format!("http://{host}:{}", local.port()))
        .collect();
    if !local.ip().is_unspecified() && !local.ip().is_loopback() {
        origins.push(format!("http://{local}"));
    }
    origins.extend(options.allowed_origins.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(options.sessions)
        .with_sse_keep_alive(Some(KEEP_ALIVE))
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(options.max_body_bytes)
        .with_cancellation_token(mcp_token);
    let state = Arc::new(AppState {
        server: server.clone(),
        token: options.auth_token.as_deref().map(Arc::from),
        draining,
        hosts: hosts.into(),
        origins: origins.into(),
    });
    let factory = {
        let server = server.clone();
        move || Ok(server.for_connection())
    };
    let guarded: axum::Router<Arc<AppState>> = if options.sessions {
        axum::Router::new().route_service(
            ENDPOINT,
            Shared {
                stream: Arc::new(StreamableHttpService::new(
                    factory,
                    Arc::new(LocalSessionManager::default()),
                    config,
                )),
                at_once: None,
            },
        )
    } else {
        // Two services that differ in how a call is answered: as an event stream, or as one
        // JSON body once the answer is there (rmcp's `json_response`, which still turns to a
        // stream when the handler sends a notification first). [`json_rpc_body`] picks.
        axum::Router::new().route_service(
            ENDPOINT,
            Shared {
                stream: Arc::new(StreamableHttpService::new(
                    factory.clone(),
                    Arc::new(NeverSessionManager::default()),
                    config.clone(),
                )),
                at_once: Some(Arc::new(StreamableHttpService::new(
                    factory,
                    Arc::new(NeverSessionManager::default()),
                    config.with_json_response(true),
                ))),
            },
        )
    };
    let guarded = guarded
        // Inside the token check (added below, so outside this): no body is read before the
        // request is authorized. The body's limits, and the calls listed for a POSTed
        // `notifications/cancelled` to cancel (cancel.rs), in one layer that reads it once.
        .route_layer(axum::middleware::from_fn_with_state(
            BodyLayer {
                limits: BodyLimits {
                    max_bytes: options.max_body_bytes,
                    deadline: options.header_timeout.min(MAX_HEADER_TIMEOUT),
                },
                cancellations: cancel::Cancellations::default(),
                answers: (!options.sessions).then(|| server.clone()),
            },
            json_rpc_body,
        ))
        .route("/metrics", axum::routing::get(metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authorize,
        ));
    axum::Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/readyz", axum::routing::get(readyz))
        .merge(guarded)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// What every request passes before it is routed. Its connection is busy from here until the
/// answer has been written, so it keeps its place at the connection cap (connections.rs).
/// Then exactly one `Host` (RFC 9112 §3.2: a request with more is answered 400; which one
/// would the checks read?). `/metrics` also takes the Host and Origin rules `/mcp` has (rmcp
/// applies them there): tool names and call counts are not for a page that a DNS-rebinding
/// attack points at the loopback address.
async fn guard(State(state): State<Arc<AppState>>, request: Request<Body>, next: Next) -> Response {
    let Some(connection) = request.extensions().get::<Arc<Connection>>().cloned() else {
        return checked(state, request, next).await;
    };
    connection.request_started();
    let busy = connection.busy();
    checked(state, request, next)
        .await
        .map(|body| BusyBody::wrap(body, busy))
}

/// [`guard`]'s checks.
async fn checked(state: Arc<AppState>, request: Request<Body>, next: Next) -> Response {
    let hosts: Vec<&HeaderValue> = request.headers().get_all(header::HOST).iter().collect();
    if hosts.len() > 1 {
        return (
            StatusCode::BAD_REQUEST,
            "Bad Request: more than one Host header\n",
        )
            .into_response();
    }
    if request.uri().path() == "/metrics" {
        let host = hosts
            .first()
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default();
        if !host_allowed(host, &state.hosts) {
            return (
                StatusCode::FORBIDDEN,
                "Forbidden: Host header is not allowed\n",
            )
                .into_response();
        }
        let origin = request.headers().get(header::ORIGIN);
        if let Some(origin) = origin
            && !origin.to_str().is_ok_and(|o| {
                state
                    .origins
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(o.trim()))
            })
        {
            return (StatusCode::FORBIDDEN, "Forbidden: Origin is not allowed\n").into_response();
        }
    }
    next.run(request).await
}

/// Whether a `Host` header names one of `allowed` (`host` or `host:port`; an entry without a
/// port allows any), as rmcp matches it on `/mcp`.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let split = |authority: &str| -> Option<(String, Option<u16>)> {
        let authority = authority.trim();
        if authority.is_empty() {
            return None;
        }
        let parsed = axum::http::uri::Authority::try_from(authority).ok();
        let (name, port) = match &parsed {
            Some(a) => (a.host(), a.port_u16()),
            None => (authority, None),
        };
        let name = name.trim_matches(['[', ']']).to_ascii_lowercase();
        Some((name, port))
    };
    let Some((name, port)) = split(host) else {
        return false;
    };
    allowed
        .iter()
        .filter_map(|a| split(a))
        .any(|(allowed_name, allowed_port)| {
            allowed_name == name && allowed_port.is_none_or(|p| port == Some(p))
        })
}

/// A POST to `/mcp`, before rmcp reads its body. rmcp counts a body as it arrives, so a
/// `Content-Length` over the limit would wait for the body (or forever): it is answered 413 at
/// once, from the header. A JSON body is read here, within the limit and the deadline (408
/// after it), and handed to rmcp as it came. rmcp answers a body it cannot decode with 415 and a line of text; such a body gets
/// what stdio answers the same message instead (line_transport.rs): 400 with a JSON-RPC error
/// (`-32700`, `-32600`, `-32602`), with the id when it is a string or a number. Deciding after
/// rmcp keeps its checks first (Host, Origin, Accept, Content-Type: 403, 406, 415) and costs a
/// well-formed message nothing.
///
/// The same reading serves cancellation (cancel.rs): a POST outside a session gets its caller
/// in its extensions, and a `notifications/cancelled` that rmcp accepted cancels the call it
/// names.
async fn json_rpc_body(
    State(layer): State<BodyLayer>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let limits = layer.limits;
    let max_body = limits.max_bytes;
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|length| length.to_str().ok())
        .and_then(|length| length.trim().parse::<u64>().ok());
    if let Some(length) = declared
        && length > u64::try_from(max_body).unwrap_or(u64::MAX)
    {
        return too_large(Some(length), max_body);
    }
    let (mut parts, body) = request.into_parts();
    let scope = layer.cancellations.track(&mut parts);
    if !is_json(&parts.headers) {
        // rmcp answers 415 without reading the body.
        return next.run(Request::from_parts(parts, body)).await;
    }
    let bytes = match tokio::time::timeout(limits.deadline, read_body(body, max_body)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(response)) => return response,
        Err(_) => return too_slow(limits.deadline),
    };
    if let Some(server) = &layer.answers
        && answered_at_once(server, &bytes)
    {
        parts.extensions.insert(AtOnce);
    }
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    match response.status() {
        StatusCode::ACCEPTED => {
            if let Some(scope) = scope {
                layer.cancellations.accepted(&scope, &bytes);
            }
            response
        }
        StatusCode::UNSUPPORTED_MEDIA_TYPE => match refusal(&bytes) {
            Some((id, error)) => json_rpc_error(id, error),
            None => response,
        },
        _ => response,
    }
}

/// The state of [`json_rpc_body`].
#[derive(Clone)]
struct BodyLayer {
    limits: BodyLimits,
    cancellations: cancel::Cancellations,
    /// The server whose quick calls are answered with one JSON body ([`answered_at_once`]);
    /// `None` with sessions, whose answers are always streams.
    answers: Option<GraphServer>,
}

/// Marks a request for [`Shared`]'s `at_once` service.
#[derive(Clone, Copy)]
struct AtOnce;

/// Whether `body` is a `tools/call` of a tool whose answer comes at once: a pure tool whose
/// last run was short ([`GraphServer::answers_at_once`]). Its answer is then one JSON body
/// (`application/json`) rather than an event stream: hyper writes the head and the body in one
/// `writev`, where a stream takes three (the head, the event, the last chunk), and the call
/// costs about a fifth less, in calls a second over a kept-alive connection (docs/http.md).
/// Everything else keeps the stream, whose comment every [`KEEP_ALIVE`] keeps a proxy from
/// cutting a long call and notices a client that has gone: calls of tools that wait on
/// downstream servers or were long last time, and every other method (`subscriptions/listen`
/// is a stream). A call that sends a notification first (progress, a log message) is streamed
/// by rmcp whichever service has it.
fn answered_at_once(server: &GraphServer, body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Message<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        params: Option<Params<'a>>,
    }
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
    }
    let Ok(Message {
        method: Some(method),
        params: Some(Params { name: Some(tool) }),
    }) = serde_json::from_slice::<Message>(body)
    else {
        return false;
    };
    method == "tools/call" && server.answers_at_once(&tool)
}

/// How much of a request body is read, and for how long.
#[derive(Clone, Copy)]
struct BodyLimits {
    max_bytes: usize,
    /// The whole body must arrive within this of its head: the header timeout, so that a
    /// request sent a byte at a time holds its connection (busy, so kept at the cap) no longer
    /// than one that never finishes its head.
    deadline: Duration,
}

/// 408 for a body that did not arrive in time; the connection is closed after it.
fn too_slow(deadline: Duration) -> Response {
    (
        StatusCode::REQUEST_TIMEOUT,
        [(header::CONNECTION, HeaderValue::from_static("close"))],
        format!(
            "Request Timeout: the request body did not arrive within {} s of its head \
             (--header-timeout)\n",
            deadline.as_secs_f64()
        ),
    )
        .into_response()
}

/// Whether the request says its body is JSON, as rmcp decides it (the media type before any
/// parameters).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// The whole body, or 413 as soon as it passes `max_body` bytes.
/// A body that came in one chunk (a small request, as most are) is that chunk, not a copy.
async fn read_body(body: Body, max_body: usize) -> Result<Bytes, Response> {
    let unreadable = |error: axum::Error| {
        (
            StatusCode::BAD_REQUEST,
            format!("Bad Request: the request body could not be read: {error}\n"),
        )
            .into_response()
    };
    let mut chunks = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(unreadable)?;
        let read = first.as_ref().map_or(0, Bytes::len) + bytes.len();
        if chunk.len() > max_body.saturating_sub(read) {
            return Err(too_large(None, max_body));
        }
        match first.take() {
            None if bytes.is_empty() => first = Some(chunk),
            earlier => {
                if let Some(earlier) = earlier {
                    bytes.extend_from_slice(&earlier);
                }
                bytes.extend_from_slice(&chunk);
            }
        }
    }
    Ok(first.unwrap_or_else(|| Bytes::from(bytes)))
}

/// 413, naming the limit and the flag that sets it.
fn too_large(length: Option<u64>, max_body: usize) -> Response {
    let size = length.map_or_else(String::new, |length| format!(" of {length} bytes"));
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "Payload Too Large: the request body{size} exceeds the limit of {max_body} bytes (--max-body)\n"
        ),
    )
        .into_response()
}

/// 400 with a JSON-RPC error answering `id`.
fn json_rpc_error(id: Value, error: ErrorData) -> Response {
    let message = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error});
    (
        StatusCode::BAD_REQUEST,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        message.to_string(),
    )
        .into_response()
}

/// What a POSTed body earns when rmcp's message type does not decode it: the id to answer and
/// the error, in stdio's words (docs/semantics.md §4). `None` when it decodes. Over HTTP every
/// body is answered, so a notification or a reply that does not decode gets an error too (with
/// `id: null`), where stdio has no one to answer.
fn refusal(body: &[u8]) -> Option<(Value, ErrorData)> {
    let decoding = serde_json::from_slice::<ClientJsonRpcMessage>(body).err()?;
    let value = match serde_json::from_slice::<Value>(body) {
        Ok(value) => value,
        Err(error) => {
            let reason = if std::str::from_utf8(body).is_err() {
                "the message is not UTF-8".to_string()
            } else {
                error.to_string()
            };
            return Some((
                Value::Null,
                ErrorData::parse_error(format!("Parse error: {reason}"), None),
            ));
        }
    };
    let object = match &value {
        Value::Object(object) => object,
        // A batch: MCP has none since 2025-06-18. Answered with its first request's id, as
        // over stdio.
        Value::Array(items) if !items.is_empty() => {
            let first = items
                .iter()
                .find_map(|item| item.get("id").filter(|id| !id.is_null()));
            return Some((
                echoed(first),
                invalid_request("JSON-RPC batches are not supported"),
            ));
        }
        Value::Array(_) => {
            return Some((
                Value::Null,
                invalid_request("an empty batch is not a JSON-RPC message object"),
            ));
        }
        _ => {
            return Some((
                Value::Null,
                invalid_request("the body is not a JSON-RPC message object"),
            ));
        }
    };
    let id = object.get("id");
    let method = object.get("method");
    let reply = method.is_none() && (object.contains_key("result") || object.contains_key("error"));
    let reason = if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        "\"jsonrpc\" must be \"2.0\"".to_string()
    } else if method.is_some_and(|method| !method.is_string()) {
        "the method must be a string".to_string()
    } else if method.is_none() && !reply {
        "the request has no method".to_string()
    } else if id.is_some_and(|id| !(reply && id.is_null()) && RequestId::deserialize(id).is_err()) {
        // `null` answers a request whose id could not be read: a reply may carry it, a
        // request may not.
        "the id must be a string or an integer".to_string()
    } else if method.is_some()
        && object
            .get("params")
            .is_some_and(|params| !params.is_object() && !params.is_null())
    {
        return Some((
            echoed(id),
            ErrorData::invalid_params("Invalid params: params must be an object", None),
        ));
    } else {
        decoding.to_string()
    };
    Some((echoed(id), invalid_request(&reason)))
}

fn invalid_request(reason: &str) -> ErrorData {
    ErrorData::invalid_request(format!("Invalid Request: {reason}"), None)
}

/// The id to answer with: the message's own when it is a string or a number, else `null`
/// (JSON-RPC 2.0 §5: an id that cannot be detected is answered with `null`).
fn echoed(id: Option<&Value>) -> Value {
    match id {
        Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
        _ => Value::Null,
    }
}

/// 200 while the graph is loaded and the server not draining; 503 otherwise, so a load
/// balancer stops sending.
async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.draining.load(Ordering::Acquire) {
        (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response()
    } else if !state.server.is_ready() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the graph does not check\n",
        )
            .into_response()
    } else {
        (StatusCode::OK, "ready\n").into_response()
    }
}

async fn metrics() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        crate::metrics::render(),
    )
        .into_response()
}

/// The bearer token, when one is configured: missing or wrong is 401 with
/// `WWW-Authenticate: Bearer` (RFC 6750), compared in constant time.
async fn authorize(
    State(state): State<Arc<AppState>>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let Some(expected) = &state.token else {
        return next.run(request).await;
    };
    match bearer(request.headers()) {
        Some(given) if same(given.as_bytes(), expected.as_bytes()) => next.run(request).await,
        Some(_) => unauthorized("Bearer realm=\"mcpgraph\", error=\"invalid_token\""),
        None => unauthorized("Bearer realm=\"mcpgraph\""),
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn unauthorized(challenge: &'static str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        )],
        "Unauthorized: a valid bearer token is required\n",
    )
        .into_response()
}

/// Equal, in time that depends on the lengths only: every byte is compared.
fn same(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    let difference = given
        .iter()
        .zip(expected)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    std::hint::black_box(difference) == 0
}

/// rmcp's service as the endpoint's route holds it. axum clones a route's service for each
/// request and rmcp's `call` clones it once more, and a clone of `StreamableHttpService` copies
/// its config: the allowed hosts and origins, and a cancellation token, whose clone and drop
/// lock a mutex that every worker contends for. Cloning an `Arc` does neither, and rmcp's
/// `handle` takes `&self`. Without sessions it holds a second service, which answers a call
/// with one JSON body: [`AtOnce`] requests go there ([`answered_at_once`]).
struct Shared<S, M> {
    stream: Arc<StreamableHttpService<S, M>>,
    at_once: Option<Arc<StreamableHttpService<S, M>>>,
}

impl<S, M> Clone for Shared<S, M> {
    fn clone(&self) -> Self {
        Shared {
            stream: self.stream.clone(),
            at_once: self.at_once.clone(),
        }
    }
}

impl<S, M> tower::Service<Request<Body>> for Shared<S, M>
where
    S: rmcp::ServerHandler + Send + 'static,
    M: rmcp::transport::streamable_http_server::session::SessionManager,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let service = match &self.at_once {
            Some(at_once) if request.extensions().get::<AtOnce>().is_some() => at_once.clone(),
            _ => self.stream.clone(),
        };
        // As axum's route does with any service's response.
        Box::pin(async move { Ok(service.handle(request).await.into_response()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every accepted connection has `TCP_NODELAY` set (the keep-alive stall, issue 24).
    #[test]
    fn accepted_connections_have_no_delay() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            use axum::serve::Listener;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let mut listener = without_delay(listener);
            let client = tokio::net::TcpStream::connect(addr);
            let ((accepted, _), client) = tokio::join!(listener.accept(), client);
            let client = client.unwrap();
            assert!(
                accepted.nodelay().unwrap(),
                "the accepted connection delays"
            );
            // The plain listener does not: the check above is the wrapper's doing.
            let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = plain.local_addr().unwrap();
            let (accepted, _) = tokio::join!(plain.accept(), tokio::net::TcpStream::connect(addr));
            assert!(!accepted.unwrap().0.nodelay().unwrap());
            drop(client);
        });
    }

    /// A body rmcp cannot decode gets stdio's code and the id when there is one to read
    /// (issue 24, item 19); one it decodes is left to rmcp.
    #[test]
    fn undecodable_bodies_are_refused_as_over_stdio() {
        use serde_json::json;
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping""#,
                -32700,
                Value::Null,
            ),
            ("not json", -32700, Value::Null),
            ("", -32700, Value::Null),
            ("[]", -32600, Value::Null),
            (
                r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]"#,
                -32600,
                json!(1),
            ),
            ("7", -32600, Value::Null),
            (
                r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
                -32600,
                json!(1),
            ),
            (r#"{"id":"a","method":"ping"}"#, -32600, json!("a")),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                -32600,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
                -32600,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
                -32600,
                json!(1.5),
            ),
            (r#"{"jsonrpc":"2.0","id":3,"method":7}"#, -32600, json!(3)),
            (r#"{"jsonrpc":"2.0","id":4}"#, -32600, json!(4)),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":[1]}"#,
                -32602,
                json!(5),
            ),
        ];
        for (body, code, id) in cases {
            let (answered, error) =
                refusal(body.as_bytes()).unwrap_or_else(|| panic!("{body} decodes"));
            assert_eq!((error.code.0, answered), (code, id), "{body}");
        }
        let (_, error) =
            refusal(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.as_bytes()).expect("refused");
        assert_eq!(error.message, r#"Invalid Request: "jsonrpc" must be "2.0""#);
        let (_, error) =
            refusal(b"{\"jsonrpc\":\"2.0\",\"id\":8,\"x\":\"\xff\"}").expect("refused");
        assert_eq!(error.message, "Parse error: the message is not UTF-8");
        for valid in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":"vendor/anything","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no"}}"#,
        ] {
            assert!(refusal(valid.as_bytes()).is_none(), "{valid}");
        }
    }

    #[test]
    fn hosts_match_as_rmcp_matches_them() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "::1", "mcp.example.com:8443"]
            .map(String::from)
            .into();
        for host in [
            "127.0.0.1:8080",
            "LOCALHOST",
            "[::1]:9",
            "mcp.example.com:8443",
        ] {
            assert!(host_allowed(host, &allowed), "{host}");
        }
        for host in [
            "evil.example",
            "127.0.0.1.evil:80",
            "mcp.example.com:80",
            "",
            "[::2]",
        ] {
            assert!(!host_allowed(host, &allowed), "{host}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"secret-token", b"secret-token"));
        assert!(!same(b"secret-tokeN", b"secret-token"));
        assert!(!same(b"secret", b"secret-token"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn bearer_scheme_is_case_insensitive() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("bearer abc"),
        );
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&headers), None);
    }

    #[test]
    fn flags_parse_like_the_cli() {
        let mut flags = HttpFlags::default();
        let args = [
            "--allowed-host",
            "mcp.example.com",
            "--drain-timeout",
            "2.5",
            "--sessions",
        ];
        let mut rest = args.iter().map(|s| s.to_string()).peekable();
        assert!(flags.take_arg("--http", &mut rest).unwrap());
        assert_eq!(flags.options.addr, DEFAULT_ADDR);
        while let Some(arg) = rest.next() {
            assert!(flags.take_arg(&arg, &mut rest).unwrap());
        }
        assert!(flags.http && flags.options.sessions);
        assert_eq!(flags.options.allowed_hosts, ["mcp.example.com"]);
        assert_eq!(flags.options.drain_timeout, Duration::from_millis(2500));
        // A second `--http` is refused (as clap refuses it), so the address is given afresh.
        let mut flags = HttpFlags::default();
        let mut rest = ["0.0.0.0:9000".to_string()].into_iter().peekable();
        assert!(flags.take_arg("--http", &mut rest).unwrap());
        assert_eq!(flags.options.addr, "0.0.0.0:9000");
        let mut rest = std::iter::empty().peekable();
        assert!(!flags.take_arg("--other", &mut rest).unwrap());
    }
}
