//! A run's cancellation: the client cancelling the call, or the server shutting down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// Two tokens looked at together, so no task has to combine them into one.
#[derive(Clone, Default)]
pub struct Cancel {
    call: CancellationToken,
    shutdown: Shutdown,
}

impl Cancel {
    pub fn new(call: CancellationToken, shutdown: Shutdown) -> Cancel {
        Cancel { call, shutdown }
    }

    pub fn is_cancelled(&self) -> bool {
        self.shutdown.is_cancelled() || self.call.is_cancelled()
    }

    /// Whether the server is shutting down: an atomic load, where [`Cancel::is_cancelled`]
    /// locks the call's token too (tokio-util's tree node is a mutex).
    pub fn shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Completes when either token is cancelled.
    pub async fn cancelled(&self) {
        tokio::select! {
            () = self.call.cancelled() => {}
            () = self.shutdown.0.token.cancelled() => {}
        }
    }
}

/// An engine's shutdown, which every run of it looks at before each node. A
/// `CancellationToken` shared by all runs would be locked by each look, clone and drop (its
/// tree node is a mutex): with runs on every worker, that lock was contended on every call. So
/// the flag is read without a lock; the token is for what awaits the shutdown.
#[derive(Clone, Default)]
pub struct Shutdown(Arc<ShutdownInner>);

#[derive(Default)]
struct ShutdownInner {
    flag: AtomicBool,
    token: CancellationToken,
}

impl Shutdown {
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::Release);
        self.0.token.cancel();
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn either_token_cancels() {
        let shutdown = Shutdown::default();
        let call = CancellationToken::new();
        let cancel = Cancel::new(call.clone(), shutdown.clone());
        assert!(!cancel.is_cancelled());
        call.cancel();
        assert!(cancel.is_cancelled());
        cancel.cancelled().await;

        let other = Cancel::new(CancellationToken::new(), shutdown.clone());
        let waiting = tokio::spawn(async move { other.cancelled().await });
        shutdown.cancel();
        assert!(Cancel::new(CancellationToken::new(), shutdown).is_cancelled());
        waiting.await.expect("the wait ends at the shutdown");
    }
}
