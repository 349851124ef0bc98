//! Worker threads that drive runs. A run's values are jsonata-core `JValue`s (`Rc`-based, so
//! `!Send`); each worker runs a current-thread runtime with a `LocalSet`, and each call goes to
//! the worker with the fewest runs in flight. Runs on one worker interleave at their awaits
//! (downstream calls).

use futures::future::LocalBoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{mpsc, oneshot};

type Job = Box<dyn FnOnce() -> LocalBoxFuture<'static, ()> + Send>;

pub struct Pool {
    workers: Vec<Worker>,
    /// Where the search for the least-loaded worker starts: rotating, so equally loaded workers
    /// take turns.
    next: AtomicUsize,
}

struct Worker {
    jobs: mpsc::UnboundedSender<Job>,
    /// Runs sent to this worker and not yet finished.
    in_flight: Arc<AtomicUsize>,
}

/// Counts a run as finished when dropped: when the run completes, or when its future is dropped
/// unfinished (the worker stopped).
struct Finished(Arc<AtomicUsize>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
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
            workers.push(Worker {
                jobs: tx,
                in_flight: Arc::new(AtomicUsize::new(0)),
            });
        }
        Ok(Pool {
            workers,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `make()`'s future on the least-loaded worker; `None` if the pool has stopped.
    pub async fn run<T, F>(&self, make: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce() -> LocalBoxFuture<'static, T> + Send + 'static,
    {
        let worker = self.least_loaded();
        worker.in_flight.fetch_add(1, Ordering::Relaxed);
        let finished = Finished(worker.in_flight.clone());
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            Box::pin(async move {
                let _finished = finished;
                let _ = tx.send(make().await);
            })
        });
        // A job the worker never received is dropped here, and counted as finished.
        worker.jobs.send(job).ok()?;
        rx.await.ok()
    }

    fn least_loaded(&self) -> &Worker {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.workers.len();
        (0..n)
            .map(|k| &self.workers[(start + k) % n])
            .min_by_key(|w| w.in_flight.load(Ordering::Relaxed))
            .unwrap_or(&self.workers[start % n])
    }
}
