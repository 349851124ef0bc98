//! A run's cancellation: the client cancelling the call, or the server shutting down.

use tokio_util::sync::CancellationToken;

/// Two tokens looked at together, so no task has to combine them into one.
#[derive(Clone, Default)]
pub struct Cancel {
    call: CancellationToken,
    shutdown: CancellationToken,
}

impl Cancel {
    pub fn new(call: CancellationToken, shutdown: CancellationToken) -> Cancel {
        Cancel { call, shutdown }
    }

    pub fn is_cancelled(&self) -> bool {
        self.call.is_cancelled() || self.shutdown.is_cancelled()
    }

    /// Completes when either token is cancelled.
    pub async fn cancelled(&self) {
        tokio::select! {
            () = self.call.cancelled() => {}
            () = self.shutdown.cancelled() => {}
        }
    }
}
