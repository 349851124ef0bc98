//! One thread that stops the JSONata evaluations of runs past their time limit or cancelled by
//! the client.
//!
//! jsonata-core can bound an evaluation itself (`timeout_ms`), but then it reads the clock at every
//! node it evaluates: 13 % of a loop's time in `clock_gettime` on the benchmark machine. It also
//! checks a [`CancelToken`] there, which costs one atomic load; so runs register their token here
//! and this thread trips it. It works whatever thread the run is on, even one busy with a long
//! evaluation (a tokio task on that thread could not run until the evaluation ended).
//!
//! At each look it also wakes a worker of the runtime of each run that has held its worker
//! inline for a millisecond, so that a worker is parked on the I/O driver (placement.rs `nudge`).
//!
//! The thread sleeps until the earliest deadline, waking every [`POLL`] to look for cancelled
//! runs while any run is registered, and stops polling after [`LINGER`] without runs.

use crate::cancel::Cancel;
use jsonata_core::evaluator::CancelToken;
use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// How often cancellation by the client is looked for while runs are registered.
const POLL: Duration = Duration::from_millis(10);
/// How long the thread keeps polling after the last run ended (so sequential calls need not
/// wake it each time).
const LINGER: Duration = Duration::from_secs(1);

/// A registered run; dropping it unregisters the run.
pub struct Watch {
    id: u64,
}

struct Entry {
    deadline: Instant,
    run: Cancel,
    evaluation: CancelToken,
}

#[derive(Default)]
struct State {
    next_id: u64,
    runs: HashMap<u64, Entry>,
    /// When the thread will next look, if it is waiting with a timeout; `None` while it waits for
    /// a notification.
    next_wake: Option<Instant>,
}

struct Watchdog {
    state: Mutex<State>,
    wake: Condvar,
}

fn watchdog() -> Option<&'static Watchdog> {
    static WATCHDOG: OnceLock<Option<&'static Watchdog>> = OnceLock::new();
    *WATCHDOG.get_or_init(|| {
        let dog: &'static Watchdog = Box::leak(Box::new(Watchdog {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("mcpgraph-watchdog".into())
            .spawn(move || dog.watch())
            .ok()
            .map(|_| dog)
    })
}

/// Trips `evaluation` at `deadline` or as soon as `run` is cancelled, until the returned [`Watch`]
/// is dropped. `None` when the watchdog thread could not be started: the caller bounds its
/// evaluations some other way.
pub fn watch(deadline: Instant, run: &Cancel, evaluation: &CancelToken) -> Option<Watch> {
    let dog = watchdog()?;
    let mut state = dog.lock();
    let id = state.next_id;
    state.next_id += 1;
    state.runs.insert(
        id,
        Entry {
            deadline,
            run: run.clone(),
            evaluation: evaluation.clone(),
        },
    );
    if state.next_wake.is_none_or(|wake| deadline < wake) {
        dog.wake.notify_one();
    }
    Some(Watch { id })
}

impl Watch {
    /// Moves the run's deadline (a run paused in its debugger); `false` when the run is no
    /// longer watched (its deadline passed, or it was cancelled: its evaluations are stopped).
    pub fn set_deadline(&self, deadline: Instant) -> bool {
        let Some(dog) = watchdog() else { return true };
        let mut state = dog.lock();
        let Some(entry) = state.runs.get_mut(&self.id) else {
            return false;
        };
        entry.deadline = deadline;
        if state.next_wake.is_none_or(|wake| deadline < wake) {
            dog.wake.notify_one();
        }
        true
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(dog) = watchdog() {
            dog.lock().runs.remove(&self.id);
        }
    }
}

impl Watchdog {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while holding the lock.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn watch(&self) {
        let mut state = self.lock();
        let mut last_run = Instant::now();
        loop {
            let now = Instant::now();
            state.runs.retain(|_, entry| {
                let stop = now >= entry.deadline || entry.run.is_cancelled();
                if stop {
                    entry.evaluation.cancel();
                }
                !stop
            });
            if !state.runs.is_empty() {
                last_run = now;
            }
            // Runs held inline long enough to keep the I/O driver unpolled (placement.rs).
            crate::placement::nudge(now);
            let earliest = state.runs.values().map(|e| e.deadline).min();
            let wake = match earliest {
                Some(deadline) => Some(deadline.min(now + POLL)),
                None if now < last_run + LINGER => Some(now + POLL),
                None => None,
            };
            state.next_wake = wake;
            state = match wake {
                Some(wake) => {
                    let timeout = wake.saturating_duration_since(Instant::now());
                    self.wake
                        .wait_timeout(state, timeout)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.wake.wait(state).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::sync::CancellationToken;

    #[test]
    fn trips_at_the_deadline_and_on_cancellation_and_not_after_drop() {
        let run = Cancel::default();
        let at_deadline = CancelToken::new();
        // Wide margins: a loaded CI machine may stall this thread for a while.
        let started = Instant::now();
        let _a = watch(started + Duration::from_millis(300), &run, &at_deadline).unwrap();
        let shutdown = crate::cancel::Shutdown::default();
        let other_run = Cancel::new(CancellationToken::new(), shutdown.clone());
        let on_cancel = CancelToken::new();
        let _b = watch(
            Instant::now() + Duration::from_secs(60),
            &other_run,
            &on_cancel,
        )
        .unwrap();
        let dropped = CancelToken::new();
        drop(watch(Instant::now() + Duration::from_millis(200), &run, &dropped).unwrap());

        if started.elapsed() < Duration::from_millis(250) {
            assert!(!at_deadline.is_cancelled() && !on_cancel.is_cancelled());
        }
        let until = Instant::now() + Duration::from_secs(5);
        while !at_deadline.is_cancelled() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(at_deadline.is_cancelled(), "the deadline trips the token");
        assert!(
            started.elapsed() >= Duration::from_millis(300),
            "not before the deadline"
        );
        assert!(!on_cancel.is_cancelled());
        shutdown.cancel();
        while !on_cancel.is_cancelled() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(
            on_cancel.is_cancelled(),
            "cancellation (here: shutdown) trips the token"
        );
        assert!(!dropped.is_cancelled(), "a dropped watch is forgotten");
    }
}
