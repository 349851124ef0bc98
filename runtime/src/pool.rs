//! Worker threads that drive runs. A run's values are jsonata-core `JValue`s (`Rc`-based, so
//! `!Send`); each worker runs a current-thread runtime with a `LocalSet`, and calls are spread
//! over the workers. Runs on one worker interleave at their awaits (downstream calls).

use futures::future::LocalBoxFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};

type Job = Box<dyn FnOnce() -> LocalBoxFuture<'static, ()> + Send>;

pub struct Pool {
    workers: Vec<mpsc::UnboundedSender<Job>>,
    next: AtomicUsize,
}

impl Pool {
    /// `threads` workers (at least one).
    pub fn new(threads: usize) -> std::io::Result<Pool> {
        let mut workers = Vec::new();
        for i in 0..threads.max(1) {
            let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            std::thread::Builder::new()
                .name(format!("mcpgraph-run-{i}"))
                .spawn(move || {
                    let local = tokio::task::LocalSet::new();
                    local.block_on(&runtime, async move {
                        while let Some(job) = rx.recv().await {
                            tokio::task::spawn_local(job());
                        }
                    });
                })?;
            workers.push(tx);
        }
        Ok(Pool {
            workers,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `make()`'s future on a worker; `None` if the pool has stopped.
    pub async fn run<T, F>(&self, make: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce() -> LocalBoxFuture<'static, T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _ = tx.send(make().await);
            })
        });
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.workers.len();
        self.workers[i].send(job).ok()?;
        rx.await.ok()
    }
}
