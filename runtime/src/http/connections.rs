//! The open connections of `serve --http` (docs/http.md "Limits"), and which one gives up its
//! place when a new connection arrives at `--max-connections`.
//!
//! A connection is *busy* from the moment a request's head has arrived until its answer has
//! been written: reading the body (bounded by the header timeout, http.rs `json_rpc_body`), a
//! call's event stream, a `subscriptions/listen` stream. Otherwise it is *idle*: it has not yet
//! sent a whole request head, or waits between keep-alive requests. An idle connection costs the
//! server a file descriptor and nothing it owes anyone, so at the cap it is the idle ones that
//! are closed: of the address (an IPv6 /64) holding the most places, the one least recently
//! active (its last request's start or answer's end, or its opening). One that never carried a
//! request is closed at once; one that did gets a moment to write what hyper still holds of
//! its last answer. A peer that opens connections
//! and sends nothing, or sends a byte at a time, then fills the server for no one but itself:
//! each new connection, its own or another client's, takes one of its places. A busy connection
//! is never closed for a newcomer; when every place is busy, the newcomer waits for one to end,
//! or to turn idle.

use axum::body::{Body, Bytes, HttpBody};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Every open connection of one listener.
#[derive(Default)]
pub(crate) struct Connections {
    open: Mutex<Registry>,
    /// Told whenever a connection turns idle: a newcomer waiting at the cap looks again.
    turned_idle: Notify,
    /// Told when a connection chosen to give up its place turned out busy (a request began
    /// after it was chosen): the newcomer chooses another.
    declined: Notify,
}

#[derive(Default)]
struct Registry {
    next_id: u64,
    by_id: HashMap<u64, Arc<Connection>>,
}

/// One open connection, shared by its task (which closes it when told) and the requests it
/// carries (which mark it busy and active).
pub(crate) struct Connection {
    id: u64,
    peer: IpAddr,
    opened: Instant,
    /// Answers being produced for it (more than one only for pipelined requests).
    busy: AtomicUsize,
    /// When it was last active (its latest request's start, or its latest answer's end), in
    /// milliseconds after `opened`; 0: no request yet.
    active_ms: AtomicU64,
    evicted: CancellationToken,
    owner: Arc<Connections>,
}

impl Connections {
    /// A newly accepted connection from `peer`; it leaves the registry when the returned value
    /// (held by the connection's task) is dropped.
    pub(crate) fn open(self: &Arc<Self>, peer: SocketAddr) -> Registered {
        let mut registry = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let id = registry.next_id;
        registry.next_id += 1;
        let connection = Arc::new(Connection {
            id,
            peer: peer.ip(),
            opened: Instant::now(),
            busy: AtomicUsize::new(0),
            active_ms: AtomicU64::new(0),
            evicted: CancellationToken::new(),
            owner: self.clone(),
        });
        registry.by_id.insert(id, connection.clone());
        Registered(connection)
    }

    /// Tells the idle connection that should give up its place to close (see the module's
    /// text), and returns whether there was one.
    pub(crate) fn evict_one(&self) -> bool {
        let registry = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let mut places: HashMap<IpAddr, usize> = HashMap::new();
        for connection in registry.by_id.values() {
            *places.entry(holder(connection.peer)).or_default() += 1;
        }
        let victim = registry
            .by_id
            .values()
            .filter(|c| !c.evicted.is_cancelled() && c.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|c| (std::cmp::Reverse(places[&c.peer]), c.last_active(), c.id));
        match victim {
            Some(victim) => {
                tracing::debug!(
                    "at the connection cap: closing an idle connection from {}",
                    victim.peer
                );
                victim.evicted.cancel();
                true
            }
            None => false,
        }
    }

    /// Resolves when some connection turns idle; enable it before [`Connections::evict_one`]
    /// so that no change in between is missed.
    pub(crate) fn turned_idle(&self) -> tokio::sync::futures::Notified<'_> {
        self.turned_idle.notified()
    }

    /// Resolves when a connection chosen by [`Connections::evict_one`] keeps its place for now
    /// (it turned busy); enable it before choosing.
    pub(crate) fn declined(&self) -> tokio::sync::futures::Notified<'_> {
        self.declined.notified()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_id
            .len()
    }
}

impl Connection {
    /// A request has begun on it (its head has arrived).
    pub(crate) fn request_started(&self) {
        self.touch();
    }

    fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.active_ms.store(ms.max(1), Ordering::Release);
    }

    /// Whether it has never carried a request: nothing was ever written on it, so it can be
    /// closed at once.
    pub(crate) fn never_active(&self) -> bool {
        self.active_ms.load(Ordering::Acquire) == 0
    }

    /// Chosen, it keeps its place until its answer has been written: the newcomer is told to
    /// choose another.
    pub(crate) fn decline(&self) {
        self.owner.declined.notify_waiters();
    }

    /// An answer is being produced for a request it sent whole: it is busy until the returned
    /// guard is dropped, with the response body it is moved into.
    pub(crate) fn busy(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// When it was last active: its latest request's start or answer's end, or its opening.
    fn last_active(&self) -> Instant {
        self.opened + std::time::Duration::from_millis(self.active_ms.load(Ordering::Acquire))
    }

    /// Resolves when the connection is to close for a newcomer.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }

    /// Whether it carries no answer now. An eviction is acted on at once only then: a
    /// connection whose request began after it was chosen closes after that answer instead.
    pub(crate) fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }
}

/// Whose places a connection's address counts among: an IPv6 peer's /64 (one host can use a
/// whole /64, which a per-address count would see as many peers), an IPv4 address (mapped to
/// IPv6 or not) as itself.
fn holder(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(std::net::Ipv6Addr::from(prefix))
            }
        },
    }
}

/// A connection's place in the registry, held by its task.
pub(crate) struct Registered(pub(crate) Arc<Connection>);

impl Drop for Registered {
    fn drop(&mut self) {
        let owner = &self.0.owner;
        owner
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_id
            .remove(&self.0.id);
    }
}

/// A connection kept busy; dropped when its answer has been written (or abandoned).
pub(crate) struct Busy(Arc<Connection>);

impl Drop for Busy {
    fn drop(&mut self) {
        // Its answer has just been handed over: recently active, so not the first to go.
        self.0.touch();
        if self.0.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.owner.turned_idle.notify_waiters();
        }
    }
}

/// A response body that keeps its connection busy until it has been written or dropped.
pub(crate) struct BusyBody {
    inner: Body,
    _busy: Busy,
}

impl BusyBody {
    pub(crate) fn wrap(inner: Body, busy: Busy) -> Body {
        Body::new(BusyBody { inner, _busy: busy })
    }
}

impl HttpBody for BusyBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8, port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, last], port))
    }

    fn evicted(connection: &Connection) -> bool {
        connection.evicted.is_cancelled()
    }

    #[test]
    fn the_idle_connection_of_the_address_holding_most_places_goes_first() {
        let connections = Arc::new(Connections::default());
        let client = connections.open(addr(1, 1));
        let flood: Vec<Registered> = (0..3).map(|port| connections.open(addr(2, port))).collect();
        // The flood's first connection started a request since, so its second is the one
        // least recently active.
        std::thread::sleep(std::time::Duration::from_millis(2));
        flood[0].0.request_started();
        assert!(connections.evict_one());
        assert!(
            evicted(&flood[1].0),
            "the flood's least recently active goes"
        );
        assert!(!evicted(&client.0) && !evicted(&flood[0].0) && !evicted(&flood[2].0));
        assert!(connections.evict_one());
        assert!(evicted(&flood[2].0));
        // An evicted connection is not chosen again while it closes; the flood's last idle one
        // still outnumbers the client, then the client's turn comes.
        assert!(connections.evict_one());
        assert!(evicted(&flood[0].0));
        assert!(connections.evict_one());
        assert!(evicted(&client.0));
        assert!(!connections.evict_one(), "nothing left to evict");
    }

    #[test]
    fn a_busy_connection_is_never_evicted_and_tells_when_it_turns_idle() {
        let connections = Arc::new(Connections::default());
        let busy = connections.open(addr(1, 1));
        let answer = busy.0.busy();
        assert!(!busy.0.is_idle());
        assert!(!connections.evict_one(), "the only connection is busy");
        assert!(!evicted(&busy.0));
        let turned_idle = connections.turned_idle();
        let mut turned_idle = std::pin::pin!(turned_idle);
        turned_idle.as_mut().enable();
        drop(answer);
        let waker = futures::task::noop_waker();
        let mut context = Context::from_waker(&waker);
        assert!(
            std::future::Future::poll(turned_idle.as_mut(), &mut context).is_ready(),
            "a waiting newcomer is told"
        );
        assert!(busy.0.is_idle());
        assert!(connections.evict_one());
        assert!(evicted(&busy.0));
    }

    #[test]
    fn an_ipv6_peer_holds_its_places_as_a_64_and_a_mapped_ipv4_as_itself() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(holder(a), holder(b));
        assert_ne!(holder(a), holder(other));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(holder(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn an_answer_just_written_makes_its_connection_recent() {
        let connections = Arc::new(Connections::default());
        let served = connections.open(addr(1, 1));
        let fresh = connections.open(addr(1, 2));
        assert!(served.0.never_active() && fresh.0.never_active());
        served.0.request_started();
        std::thread::sleep(std::time::Duration::from_millis(2));
        drop(served.0.busy());
        assert!(!served.0.never_active());
        // The connection that opened later but has done nothing since is the one to go.
        assert!(connections.evict_one());
        assert!(evicted(&fresh.0) && !evicted(&served.0));
    }

    #[test]
    fn a_closed_connection_leaves_the_registry() {
        let connections = Arc::new(Connections::default());
        let first = connections.open(addr(1, 1));
        let second = connections.open(addr(1, 2));
        assert_eq!(connections.len(), 2);
        drop(first);
        assert_eq!(connections.len(), 1);
        drop(second);
        assert_eq!(connections.len(), 0);
        assert!(!connections.evict_one());
    }

    #[test]
    fn a_busy_body_keeps_its_connection_busy_until_dropped() {
        let connections = Arc::new(Connections::default());
        let open = connections.open(addr(1, 1));
        let body = BusyBody::wrap(Body::from("answer"), open.0.busy());
        assert!(!open.0.is_idle());
        assert_eq!(body.size_hint().exact(), Some(6), "the length is kept");
        drop(body);
        assert!(open.0.is_idle());
    }
}
