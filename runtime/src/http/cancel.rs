//! `notifications/cancelled` over stateless HTTP (docs/http.md, "Cancellation"). rmcp serves
//! each POST of a stateless server as a one-shot service of its own, and answers a POSTed
//! notification 202 without handing it to anyone: a 2025-era client's cancellation, which the
//! TypeScript SDKs POST while the call's response stream stays open, never reached the run.
//! This module, which the layer reading `/mcp` bodies calls (`super::json_rpc_body`), replaces
//! that much: it lists the calls in flight of one HTTP app by who made them and their request
//! id, and a cancellation that rmcp accepted cancels the one it names, as rmcp's session loop
//! does over stdio (the run stops, its downstream calls are told).
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

use crate::in_flight::{Caller, Calls, Cancellation, Scope};
use axum::http::Method;
use axum::http::request::Parts;
use rmcp::model::{ClientJsonRpcMessage, ClientNotification, RequestId};
use rmcp::transport::common::http_header::HEADER_SESSION_ID;

/// The calls in flight of one HTTP app: the state the body layer (`super::json_rpc_body`)
/// keeps for cancellation. That layer is inside the token check, so only authorized requests
/// are listed or cancel.
#[derive(Clone, Default)]
pub(crate) struct Cancellations {
    calls: Calls,
}

impl Cancellations {
    /// A POST outside a session: its [`Caller`] is put in its extensions, where the server's
    /// `call_tool` finds it (rmcp hands a handler the request's parts), and its scope returned
    /// for [`Cancellations::accepted`]. Only a POST carries a call or a cancellation; a
    /// session's are rmcp's.
    pub(crate) fn track(&self, parts: &mut Parts) -> Option<Scope> {
        if parts.method != Method::POST || parts.headers.contains_key(HEADER_SESSION_ID) {
            return None;
        }
        let scope = Scope::of(parts)?;
        parts
            .extensions
            .insert(Caller::new(self.calls.clone(), scope.clone()));
        Some(scope)
    }

    /// A message rmcp answered 202 (a notification) from `scope`: a `notifications/cancelled`
    /// cancels the call it names in that scope. Deciding after rmcp keeps its Host, Origin and
    /// protocol-version checks first: a page of a foreign origin cancels nothing.
    pub(crate) fn accepted(&self, scope: &Scope, body: &[u8]) {
        let Some(id) = cancelled_request(body) else {
            return;
        };
        let outcome = self.calls.cancel(scope, &id);
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
