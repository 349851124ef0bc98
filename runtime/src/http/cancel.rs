//! `notifications/cancelled` over stateless HTTP (docs/http.md, "Cancellation"). rmcp serves
//! each POST of a stateless server as a one-shot service of its own, and answers a POSTed
//! notification 202 without handing it to anyone: a 2025-era client's cancellation, which the
//! TypeScript SDKs POST while the call's response stream stays open, never reached the run.
//! This layer replaces that much: it lists the calls in flight of one HTTP app by who made them
//! and their request id, and a cancellation that rmcp accepted cancels the one it names, as
//! rmcp's session loop does over stdio (the run stops, its downstream calls are told).
//!
//! Who made a call is its scope (`crate::in_flight`): the client's address and the `Authorization` header it
//! presented. A cancellation counts only from the scope of the call it names, so no other
//! machine can cancel a call, and with a token, no one without it; every holder of the token
//! on one machine (or behind one proxy) is one principal. Two calls in flight in one scope with
//! the same id (two clients on one machine, each counting from 0) are both left running: a
//! cancellation may be ignored, a call cancelled for another client may not.
//!
//! A request in a session (`Mcp-Session-Id`, `--sessions`) is rmcp's: its session cancels its
//! calls itself.

use super::{is_json, read_body};
use crate::in_flight::{Caller, Calls, Cancellation, Scope};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{Method, Request, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, RequestId};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;

/// The state of [`track`]: the calls in flight of one HTTP app, and the body limit.
#[derive(Clone)]
pub(crate) struct Cancellations {
    calls: Calls,
    /// `--max-body`: [`super::json_rpc_body`], outside this layer, has read the body within it
    /// already; the limit holds here too should the layers ever be put in another order.
    max_body: usize,
}

impl Cancellations {
    pub(crate) fn new(max_body: usize) -> Cancellations {
        Cancellations {
            calls: Calls::default(),
            max_body,
        }
    }
}

/// Every POST to `/mcp` outside a session, inside the token check (only authorized requests
/// are listed or cancel): its [`Caller`] is put in its extensions, where the server's
/// `call_tool` finds it (rmcp hands a handler the request's parts), and a
/// `notifications/cancelled` that rmcp answered 202 cancels the call it names in its scope.
/// Deciding after rmcp keeps its Host, Origin and protocol-version checks first: a page of a
/// foreign origin cancels nothing.
pub(crate) async fn track(
    State(state): State<Cancellations>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    // Only a POST carries a call or a cancellation; a session's are rmcp's.
    let tracked = parts.method == Method::POST && !parts.headers.contains_key(HEADER_SESSION_ID);
    let scope = if tracked { Scope::of(&parts) } else { None };
    let Some(scope) = scope else {
        return next.run(Request::from_parts(parts, body)).await;
    };
    parts
        .extensions
        .insert(Caller::new(state.calls.clone(), scope.clone()));
    if !is_json(&parts.headers) {
        // rmcp answers 415 without reading the body.
        return next.run(Request::from_parts(parts, body)).await;
    }
    let bytes: Bytes = match read_body(body, state.max_body).await {
        Ok(bytes) => bytes,
        Err(response) => return response,
    };
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes.clone())))
        .await;
    if response.status() == StatusCode::ACCEPTED
        && let Some(id) = cancelled_request(&bytes)
    {
        let outcome = state.calls.cancel(&scope, &id);
        let id = crate::metrics::client_chosen(&id.to_string()).into_owned();
        match outcome {
            Cancellation::Cancelled => tracing::debug!("call {id} cancelled by its client"),
            Cancellation::Unknown => {
                tracing::debug!("cancellation of {id}: no such call in flight of its sender");
            }
            Cancellation::Ambiguous(calls) => tracing::info!(
                "cancellation of {id} ignored: {calls} calls in flight from its sender have that id"
            ),
        }
    }
    response
}

/// The request id a `notifications/cancelled` names; `None` for any other message.
fn cancelled_request(body: &[u8]) -> Option<RequestId> {
    match serde_json::from_slice::<ClientJsonRpcMessage>(body).ok()? {
        ClientJsonRpcMessage::Notification(message) => match message.notification {
            ClientNotification::CancelledNotification(cancelled) => cancelled.params.request_id,
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    #[test]
    fn only_cancelled_notifications_name_a_request() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"x"}}"#,
                Some(id(3)),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#,
                Some(RequestId::String("a".into())),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}"#,
                None,
            ),
            ("not json", None),
        ];
        for (body, expected) in cases {
            assert_eq!(cancelled_request(body.as_bytes()), expected, "{body}");
        }
    }
}
