//! Where a pure tool's run goes: on the runtime worker whose task received the call (inline),
//! or on a thread of tokio's blocking pool.
//!
//! A pure run completes in one poll, so it can run inline, and most take microseconds: sending
//! them to the blocking pool cost more than running them (two thread wake-ups a call, about a
//! third of a one-node call's CPU time over HTTP, and its latency). But a run that holds a
//! worker holds every task queued behind it, and as many such runs as there are workers would
//! stall the server, the reading of `notifications/cancelled` included. So a run goes inline
//! only when:
//! - the runtime is multi-threaded, and fewer runs are inline than it has workers less one: one
//!   worker is always free to read requests and cancellations (a cancelled run is stopped by
//!   the watchdog's thread, whichever thread it is on: watchdog.rs). The count is the
//!   process's, whatever runtime a run is on;
//! - its tool's last run was short: a tool's first runs go to the blocking pool; a run that
//!   took less than [`SLICE`], there or inline, lets the next run inline; one that took longer
//!   sends the next runs to the pool;
//! - the run can send no progress or log messages (no progress token; at the call's log level
//!   the tool's nodes report nothing, server/notify.rs; no `log:` it would send): what a run
//!   wakes while it holds its worker (the call's notification writer) waits in that worker's
//!   LIFO slot, which other workers cannot take tasks from, until the run ends; a run that
//!   turned long would send its progress only at its end.
//!
//! A task already waiting in the worker's LIFO slot when an inline run starts waits for the
//! run too (a short wait: runs that go inline are short). Yielding first would move it, but
//! the yield woke a parked worker on every call: six times the context switches.
//!
//! A serving process has one worker more than the machine has cores ([`serving_workers`]), so
//! that on every machine as many runs as it has cores can be inline while a worker is left for
//! the requests (the kernel shares the cores between them).
//!
//! Both are decided before the run starts (a run cannot move between threads: its values are
//! jsonata-core's, which are not `Send`), so the price of a run that turns out long is bounded
//! but not nil: it holds its worker until it ends (at most the graph's `maxExecutionTimeMs`, or
//! its cancellation, which the watchdog's thread applies whichever thread the run is on), and
//! calls of the same tool that arrive meanwhile may go inline too, until the first long one
//! ends and marks the tool; never more than the workers less one, so one worker always reads.
//! (`tokio::task::block_in_place` would hand the worker's queue to another thread instead, but
//! it costs a thread wake-up on every call, the hop this module avoids.)

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::runtime::{Handle, RuntimeFlavor};

/// How long an inline run may take before its tool's next runs go to the blocking pool.
pub(crate) const SLICE: Duration = Duration::from_millis(1);

/// Runs inline now, in the whole process.
static INLINE: AtomicUsize = AtomicUsize::new(0);

/// The worker threads of a serving process's runtime: `TOKIO_WORKER_THREADS` when set (as
/// tokio's own default reads it), else one more than the cores it may use (see the module's
/// text); tokio's default is as many.
pub(crate) fn serving_workers() -> usize {
    std::env::var("TOKIO_WORKER_THREADS")
        .ok()
        .and_then(|n| n.trim().parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()) + 1)
}

/// Which tools of a program go to the blocking pool for now.
pub(crate) struct Placement {
    long: Box<[AtomicBool]>,
    /// [`INLINE`], or a test's own count.
    inline: &'static AtomicUsize,
}

impl Placement {
    pub(crate) fn new(tools: usize) -> Placement {
        Placement {
            // Unknown: to the pool, until a run there was short.
            long: (0..tools).map(|_| AtomicBool::new(true)).collect(),
            inline: &INLINE,
        }
    }

    /// Whether tool `index`'s next run may go inline (its last run was short).
    pub(crate) fn short(&self, index: usize) -> bool {
        self.long
            .get(index)
            .is_some_and(|long| !long.load(Ordering::Relaxed))
    }

    /// A place to run tool `index` inline on `runtime`'s current worker, or `None`: the blocking
    /// pool. Hold it for the run.
    pub(crate) fn inline(&self, runtime: &Handle, index: usize) -> Option<Inline<'_>> {
        if runtime.runtime_flavor() != RuntimeFlavor::MultiThread || !self.short(index) {
            return None;
        }
        let workers = runtime.metrics().num_workers();
        self.inline
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |inline| {
                (inline + 1 < workers).then_some(inline + 1)
            })
            .ok()?;
        let started = Instant::now();
        let id = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
        running().push(Running {
            id,
            runtime: runtime.clone(),
            started,
            nudged: false,
        });
        Some(Inline {
            placement: self,
            index,
            started,
            id,
        })
    }

    /// Told how long a run of tool `index` on the blocking pool took: a short one lets the
    /// next run inline, a long one keeps the tool on the pool (a tool marked short that went to
    /// the pool for want of a place, or because its call asked for progress).
    pub(crate) fn pooled(&self, index: usize, took: Duration) {
        if let Some(long) = self.long.get(index) {
            long.store(took >= SLICE, Ordering::Relaxed);
        }
    }
}

/// A run in progress inline; its end frees its place, and marks its tool when it was long.
pub(crate) struct Inline<'a> {
    placement: &'a Placement,
    index: usize,
    started: Instant,
    /// Its entry in [`RUNNING`].
    id: u64,
}

/// The runs inline now, for [`nudge`]: each one's runtime and start.
static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());
static NEXT_RUN: AtomicU64 = AtomicU64::new(0);

struct Running {
    id: u64,
    runtime: Handle,
    started: Instant,
    nudged: bool,
}

fn running() -> MutexGuard<'static, Vec<Running>> {
    // The list stays consistent whatever panicked while holding the lock.
    RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wakes a worker of the runtime of each run that has been inline for [`SLICE`] or longer (once
/// a run); the watchdog's thread calls it at each of its looks (watchdog.rs).
///
/// tokio reads sockets and pipes (the I/O driver) only from a worker that is parked; a worker
/// with nothing to do sleeps until it is woken for work. So when the worker an inline run holds
/// was the one parked on the driver, nothing is read, stdin and HTTP connections included,
/// until some other worker parks again, which may be when the run ends: the free worker the
/// module keeps would sleep through the requests. A task spawned from outside the runtime wakes
/// one; it runs the empty task, finds nothing else to do, and parks on the driver. Once a run:
/// that worker stays parked there between tasks.
pub(crate) fn nudge(now: Instant) {
    for run in running()
        .iter_mut()
        .filter(|run| !run.nudged && now.saturating_duration_since(run.started) >= SLICE)
    {
        run.nudged = true;
        drop(run.runtime.spawn(async {}));
    }
}

impl Drop for Inline<'_> {
    fn drop(&mut self) {
        {
            let mut running = running();
            if let Some(at) = running.iter().position(|run| run.id == self.id) {
                running.swap_remove(at);
            }
        }
        self.placement.inline.fetch_sub(1, Ordering::AcqRel);
        if self.started.elapsed() >= SLICE
            && let Some(long) = self.placement.long.get(self.index)
        {
            long.store(true, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A placement with its own count of inline runs (the tests run side by side).
    fn placement(tools: usize) -> Placement {
        Placement {
            inline: Box::leak(Box::new(AtomicUsize::new(0))),
            ..Placement::new(tools)
        }
    }

    fn runtime(workers: usize) -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .build()
            .expect("a runtime")
    }

    #[test]
    fn one_worker_stays_free() {
        let placement = placement(1);
        placement.pooled(0, Duration::ZERO);
        let two = runtime(2);
        let first = placement.inline(two.handle(), 0);
        assert!(first.is_some(), "a first run goes inline");
        assert!(
            placement.inline(two.handle(), 0).is_none(),
            "a second would leave no worker free"
        );
        drop(first);
        assert!(placement.inline(two.handle(), 0).is_some());
        let one = runtime(1);
        assert!(placement.inline(one.handle(), 0).is_none());
        let current = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        assert!(placement.inline(current.handle(), 0).is_none());
    }

    #[test]
    fn a_tool_goes_inline_after_a_short_run_and_back_after_a_long_one() {
        let placement = placement(2);
        let handle = runtime(4);
        assert!(
            placement.inline(handle.handle(), 0).is_none(),
            "unknown: the pool"
        );
        placement.pooled(0, SLICE * 2);
        assert!(placement.inline(handle.handle(), 0).is_none(), "a long run");
        placement.pooled(0, SLICE / 2);
        let mut run = placement.inline(handle.handle(), 0).expect("inline");
        run.started -= SLICE * 2;
        drop(run);
        assert!(
            placement.inline(handle.handle(), 0).is_none(),
            "tool 0 is long"
        );
        placement.pooled(1, SLICE / 2);
        assert!(
            placement.inline(handle.handle(), 1).is_some(),
            "tool 1 is not"
        );
        placement.pooled(0, SLICE / 8);
        assert!(placement.inline(handle.handle(), 0).is_some());
        placement.pooled(0, SLICE);
        assert!(
            placement.inline(handle.handle(), 0).is_none(),
            "a long run on the pool marks the tool too"
        );
    }
}
