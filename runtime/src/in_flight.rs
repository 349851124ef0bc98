//! The calls in flight of one HTTP app, by who made them and their request id, so that a
//! `notifications/cancelled` POSTed on its own (stateless HTTP, docs/http.md "Cancellation")
//! cancels the one it names, from its own caller only. `http/cancel.rs` fills it and cancels
//! through it; the server's `call_tool` lists each call here while it runs. A module of its
//! own, beside `server.rs` and `http.rs`, so that neither imports the other for it.

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{HeaderValue, header};
use rmcp::model::RequestId;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Who made a request, as far as cancelling its calls goes. Not `Debug`: it holds a credential.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Scope {
    /// The client's address, without the port: a client's cancellation comes on another
    /// connection than its call (that one is busy with the call's stream).
    address: IpAddr,
    /// The `Authorization` header it presented, if any.
    credential: Option<HeaderValue>,
}

impl Scope {
    /// The scope of a request; `None` when its peer's address is unknown (every connection's
    /// requests carry it as `ConnectInfo<SocketAddr>`): such a request is not listed and
    /// cancels nothing, rather than sharing one scope with every other client.
    pub(crate) fn of(parts: &Parts) -> Option<Scope> {
        let ConnectInfo(peer) = parts.extensions.get::<ConnectInfo<SocketAddr>>()?;
        Some(Scope {
            // An IPv4 client of a dual-stack listener is the same client as over IPv4.
            address: peer.ip().to_canonical(),
            credential: parts.headers.get(header::AUTHORIZATION).cloned(),
        })
    }
}

/// What a request's calls are listed under: put in its extensions by `http/cancel.rs`'s `track`.
#[derive(Clone)]
pub(crate) struct Caller {
    calls: Calls,
    scope: Scope,
}

impl Caller {
    pub(crate) fn new(calls: Calls, scope: Scope) -> Caller {
        Caller { calls, scope }
    }

    /// The caller of the request rmcp handed to a handler with these extensions (rmcp puts the
    /// HTTP request's parts there). `None` over stdio and in a session.
    pub(crate) fn of(extensions: &rmcp::model::Extensions) -> Option<&Caller> {
        extensions.get::<Parts>()?.extensions.get::<Caller>()
    }

    /// Lists the call `id` until the returned guard is dropped: meanwhile a
    /// `notifications/cancelled` for `id` from this caller's scope cancels `token`.
    pub(crate) fn register(&self, id: RequestId, token: CancellationToken) -> Registered {
        self.calls.register(self.scope.clone(), id, token)
    }
}

/// The calls in flight of one HTTP app.
#[derive(Clone, Default)]
pub(crate) struct Calls {
    registry: Arc<Mutex<Registry>>,
}

#[derive(Default)]
struct Registry {
    /// The serial of the next call listed: it tells apart calls listed under one key.
    next: u64,
    calls: HashMap<(Scope, RequestId), Vec<(u64, CancellationToken)>>,
    /// Keys whose call ended within [`LATE`], and when: a cancellation may arrive after the
    /// call it names has ended (a client's notification crosses its answer), and must then not
    /// stop another client's call that has the same id in the same scope.
    ended: HashMap<(Scope, RequestId), Instant>,
    /// The same keys in the order they ended, for pruning in constant time per call.
    ended_order: std::collections::VecDeque<(Instant, (Scope, RequestId))>,
}

/// How long an ended call's key makes a cancellation of that key ambiguous.
const LATE: Duration = Duration::from_secs(60);
/// The most ended keys remembered; past it the oldest are forgotten first.
const MAX_ENDED: usize = 10_000;

impl Registry {
    /// Forgets ended keys older than [`LATE`], and the oldest beyond [`MAX_ENDED`].
    fn prune(&mut self, now: Instant) {
        while let Some((at, _)) = self.ended_order.front() {
            if now.duration_since(*at) < LATE && self.ended_order.len() <= MAX_ENDED {
                break;
            }
            let Some((at, key)) = self.ended_order.pop_front() else {
                break;
            };
            // A key that ended again later is kept until its latest end is old.
            if self.ended.get(&key) == Some(&at) {
                self.ended.remove(&key);
            }
        }
    }

    fn ended(&mut self, key: (Scope, RequestId), now: Instant) {
        self.prune(now);
        self.ended.insert(key.clone(), now);
        self.ended_order.push_back((now, key));
    }
}

/// What a cancellation did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cancellation {
    Cancelled,
    /// No call of that id is in flight in the scope (it ended, or was never made there).
    Unknown,
    /// That many calls of that id are in flight in the scope: none was cancelled.
    Ambiguous(usize),
}

impl Calls {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        // A list of tokens is whole after any panic.
        self.registry
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn register(&self, scope: Scope, id: RequestId, token: CancellationToken) -> Registered {
        let key = (scope, id);
        let mut guard = self.registry();
        let registry = &mut *guard;
        let serial = registry.next;
        registry.next += 1;
        registry
            .calls
            .entry(key.clone())
            .or_default()
            .push((serial, token));
        Registered {
            calls: self.clone(),
            key,
            serial,
        }
    }

    pub(crate) fn cancel(&self, scope: &Scope, id: &RequestId) -> Cancellation {
        let mut registry = self.registry();
        registry.prune(Instant::now());
        let key = (scope.clone(), id.clone());
        let ended_lately = registry.ended.contains_key(&key);
        match registry.calls.get(&key).map(Vec::as_slice) {
            None | Some([]) => Cancellation::Unknown,
            // Another call of this key ended lately: the cancellation may be its, late.
            Some([_]) if ended_lately => Cancellation::Ambiguous(2),
            Some([(_, token)]) => {
                token.cancel();
                Cancellation::Cancelled
            }
            Some(calls) => Cancellation::Ambiguous(calls.len()),
        }
    }

    /// How many calls are listed (the tests' view).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.registry().calls.values().map(Vec::len).sum()
    }
}

/// A call listed in [`Calls`]: it leaves the list when this is dropped (the call ended, or its
/// future was dropped), so ended calls are never kept.
pub(crate) struct Registered {
    calls: Calls,
    key: (Scope, RequestId),
    serial: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut guard = self.calls.registry();
        let registry = &mut *guard;
        let ended = registry.calls.get_mut(&self.key).is_some_and(|calls| {
            calls.retain(|(serial, _)| *serial != self.serial);
            calls.is_empty()
        });
        if ended {
            registry.calls.remove(&self.key);
        }
        registry.ended(self.key.clone(), Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(address: &str, credential: Option<&'static str>) -> Scope {
        Scope {
            address: address.parse().unwrap(),
            credential: credential.map(HeaderValue::from_static),
        }
    }

    fn id(n: i64) -> RequestId {
        RequestId::Number(n)
    }

    /// A cancellation from another address or with another credential, or naming another id,
    /// does nothing; the call's own scope cancels it.
    #[test]
    fn only_the_calls_own_scope_cancels_it() {
        let calls = Calls::default();
        let token = CancellationToken::new();
        let own = scope("192.0.2.1", Some("Bearer t"));
        let _call = calls.register(own.clone(), id(7), token.clone());
        for other in [
            scope("192.0.2.2", Some("Bearer t")),
            scope("192.0.2.1", Some("Bearer u")),
            scope("192.0.2.1", None),
        ] {
            assert_eq!(calls.cancel(&other, &id(7)), Cancellation::Unknown);
        }
        assert_eq!(calls.cancel(&own, &id(8)), Cancellation::Unknown);
        assert_eq!(
            calls.cancel(&own, &RequestId::String("7".into())),
            Cancellation::Unknown
        );
        assert!(!token.is_cancelled(), "another scope cancelled the call");
        assert_eq!(calls.cancel(&own, &id(7)), Cancellation::Cancelled);
        assert!(token.is_cancelled());
    }

    /// A call leaves the list when it ends, so nothing is kept and a late cancellation of its
    /// id finds nothing.
    #[test]
    fn ended_calls_leave_the_list() {
        let calls = Calls::default();
        let own = scope("127.0.0.1", None);
        let tokens: Vec<CancellationToken> = (0..1000).map(|_| CancellationToken::new()).collect();
        let listed: Vec<Registered> = tokens
            .iter()
            .enumerate()
            .map(|(n, token)| calls.register(own.clone(), id(n as i64), token.clone()))
            .collect();
        assert_eq!(calls.len(), 1000);
        drop(listed);
        assert_eq!(calls.len(), 0);
        assert!(calls.registry().calls.is_empty());
        assert_eq!(calls.cancel(&own, &id(3)), Cancellation::Unknown);
        assert!(tokens.iter().all(|t| !t.is_cancelled()));
    }

    /// Two calls of one id in one scope: neither is cancelled; once one has ended, the other is.
    #[test]
    fn an_id_two_calls_share_cancels_neither() {
        let calls = Calls::default();
        let own = scope("127.0.0.1", None);
        let (first, second) = (CancellationToken::new(), CancellationToken::new());
        let first_call = calls.register(own.clone(), id(1), first.clone());
        let _second_call = calls.register(own.clone(), id(1), second.clone());
        assert_eq!(calls.cancel(&own, &id(1)), Cancellation::Ambiguous(2));
        assert!(!first.is_cancelled() && !second.is_cancelled());
        // Once one has ended, a cancellation of the id may still be its, arriving late: the
        // other is left running too.
        drop(first_call);
        assert_eq!(calls.cancel(&own, &id(1)), Cancellation::Ambiguous(2));
        assert!(!first.is_cancelled() && !second.is_cancelled());
    }

    /// Another client's call 7 ended, and its cancellation arrives late: the call 7 in flight
    /// in the same scope is not stopped.
    #[test]
    fn a_late_cancellation_of_an_ended_call_stops_no_other() {
        let calls = Calls::default();
        let shared = scope("127.0.0.1", None);
        let token = CancellationToken::new();
        let _alice = calls.register(shared.clone(), id(7), token.clone());
        drop(calls.register(shared.clone(), id(7), CancellationToken::new()));
        assert_eq!(calls.cancel(&shared, &id(7)), Cancellation::Ambiguous(2));
        assert!(
            !token.is_cancelled(),
            "a late cancellation stopped another call"
        );
    }

    fn parts(peer: Option<&str>, authorization: Option<&'static str>) -> Parts {
        let mut request = Request::builder().method(Method::POST).uri("/mcp");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let (mut parts, ()) = request.body(()).unwrap().into_parts();
        if let Some(peer) = peer {
            let peer: SocketAddr = peer.parse().unwrap();
            parts.extensions.insert(ConnectInfo(peer));
        }
        parts
    }

    /// A request's scope is its peer's address, whatever the port, and its credential; one
    /// whose peer is unknown has none.
    #[test]
    fn scopes_are_the_address_and_the_credential() {
        let of = |peer, authorization| Scope::of(&parts(peer, authorization));
        let call = of(Some("127.0.0.1:40000"), Some("Bearer t")).unwrap();
        assert!(call == of(Some("127.0.0.1:40001"), Some("Bearer t")).unwrap());
        assert!(call == of(Some("[::ffff:127.0.0.1]:40002"), Some("Bearer t")).unwrap());
        assert!(call != of(Some("127.0.0.2:40000"), Some("Bearer t")).unwrap());
        assert!(call != of(Some("127.0.0.1:40000"), Some("Bearer u")).unwrap());
        assert!(call != of(Some("127.0.0.1:40000"), None).unwrap());
        assert!(of(None, Some("Bearer t")).is_none());
    }

    /// A caller put in the parts rmcp hands a handler is found there.
    #[test]
    fn a_handler_finds_its_caller_in_the_request_parts() {
        let mut parts = parts(Some("127.0.0.1:1"), None);
        let calls = Calls::default();
        let own = Scope::of(&parts).unwrap();
        parts.extensions.insert(Caller::new(calls.clone(), own));
        let mut extensions = rmcp::model::Extensions::new();
        assert!(Caller::of(&extensions).is_none());
        extensions.insert(parts);
        let token = CancellationToken::new();
        let _call = Caller::of(&extensions)
            .expect("the caller")
            .register(id(4), token.clone());
        assert_eq!(
            calls.cancel(&scope("127.0.0.1", None), &id(4)),
            Cancellation::Cancelled
        );
        assert!(token.is_cancelled());
    }
    use axum::http::{Method, Request};
}
