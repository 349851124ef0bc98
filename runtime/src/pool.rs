//! The run workers: one pool of threads per process, shared by every engine. A run's values are
//! jsonata-core `JValue`s (`Rc`-based, so `!Send`); each worker runs a current-thread runtime with
//! a `LocalSet`, and each call goes to the worker with the fewest runs in flight. Runs on one
//! worker interleave at their awaits (downstream calls).
//!
//! One pool per process, not one per engine: `serve --watch`, the studio and the toolkit load an
//! engine for every saved version, and the toolkit one for every inline `runGraphTool` run; a pool
//! each would start `available_parallelism()` threads every time, and keep them while a replaced
//! version finishes its calls. So the pool is made the first time an engine needs it
//! ([`Pool::shared`], the watchdog's pattern) and lives as long as the process (it is never
//! stopped; its threads end with the process). A run belongs to its engine, not to the pool: an
//! engine's shutdown stops its runs through their cancellation (engine.rs), and leaves the runs
//! of other engines on the same workers alone. What engines now share is the workers' time: a
//! busy run of a replaced version holds its worker for the new version's runs too, as runs of
//! one engine always did for each other; a new run goes to the least-loaded worker.

use futures::future::LocalBoxFuture;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
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
    /// The process's pool, started on the first call: one worker per core
    /// (`available_parallelism`, at least one).
    ///
    /// A start that failed is not remembered: the next call tries again, and fails the same way
    /// only if the cause is still there. Threads fail to start for passing reasons (the process's
    /// or the user's thread limit, memory), and a long-lived `serve --watch` or studio should
    /// serve the next version once they have passed rather than refuse every version after one
    /// bad moment. The workers a failed start did make stop at once: their job channels close
    /// with it. Starts are made one at a time, so there is never more than one pool.
    pub fn shared() -> std::io::Result<&'static Pool> {
        static POOL: OnceLock<Pool> = OnceLock::new();
        static STARTING: Mutex<()> = Mutex::new(());
        if let Some(pool) = POOL.get() {
            return Ok(pool);
        }
        // A start that panicked left nothing behind (the pool is set whole or not at all), so a
        // poisoned lock is as good as a clean one.
        let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pool) = POOL.get() {
            return Ok(pool);
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let pool = Pool::start(threads)?;
        Ok(POOL.get_or_init(|| pool))
    }

    /// `threads` workers (at least one), each started before the next.
    fn start(threads: usize) -> std::io::Result<Pool> {
        let workers = (0..threads.max(1))
            .map(Worker::start)
            .collect::<std::io::Result<Vec<Worker>>>()?;
        Ok(Pool {
            workers,
            next: AtomicUsize::new(0),
        })
    }

    /// Runs `make()`'s future on the least-loaded worker; `None` if the run was lost (its worker
    /// stopped) or no worker is left.
    pub async fn run<T, F>(&self, make: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce() -> LocalBoxFuture<'static, T> + Send + 'static,
    {
        let worker = self.least_loaded()?;
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

    /// The worker with the fewest runs in flight, among those still running. A worker whose
    /// thread ended (only a panic outside every run can end it) is passed over: the pool lives as
    /// long as the process, and a dead worker, with nothing in flight, would otherwise look the
    /// least loaded forever and be handed every call.
    fn least_loaded(&self) -> Option<&Worker> {
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let n = self.workers.len();
        (0..n)
            .map(|k| &self.workers[start.wrapping_add(k) % n])
            .filter(|w| !w.jobs.is_closed())
            .min_by_key(|w| w.in_flight.load(Ordering::Relaxed))
    }
}

impl Worker {
    /// Starts worker `index`: its thread, and on it the runtime its runs are driven by. Returns
    /// once the runtime is made (or could not be).
    fn start(index: usize) -> std::io::Result<Worker> {
        let (jobs, mut received) = mpsc::unbounded_channel::<Job>();
        let (made, runtime_made) = std::sync::mpsc::sync_channel::<std::io::Result<()>>(1);
        std::thread::Builder::new()
            .name(format!("mcpgraph-run-{index}"))
            .spawn(move || {
                // Made here, not by the thread that starts the pool: that one may be inside a
                // runtime (a call, a load in an async function), and it would have to drop a
                // runtime it had made for a thread that did not start, which panics there.
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = made.send(Err(e));
                        return;
                    }
                };
                let _ = made.send(Ok(()));
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    while let Some(job) = received.recv().await {
                        tokio::task::spawn_local(job());
                    }
                });
            })?;
        // A thread that ended without saying (it panicked) made no runtime.
        runtime_made.recv().unwrap_or_else(|_| {
            Err(std::io::Error::other(
                "the worker thread ended as it started",
            ))
        })?;
        Ok(Worker {
            jobs,
            in_flight: Arc::new(AtomicUsize::new(0)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_caller_gets_the_one_pool_and_its_runs_complete() {
        let first = Pool::shared().unwrap();
        let second = Pool::shared().unwrap();
        assert!(std::ptr::eq(first, second), "one pool per process");
        assert!(!first.workers.is_empty());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let runs = (0..8u32).map(|i| first.run::<u32, _>(move || Box::pin(async move { i * 2 })));
        let answers = runtime.block_on(futures::future::join_all(runs));
        assert_eq!(answers, (0..8u32).map(|i| Some(i * 2)).collect::<Vec<_>>());
    }
}
