//! The engine's one debugging surface: what `mcpgraph studio`, the toolkit's breakpoints and
//! `call --trace` use alike.
//!
//! A [`Debugger`] given to a call ([`crate::CallOptions::debugger`]) is told when each node of
//! the called tool starts and when each node, map item, parallel branch and callee node ends
//! ([`DebugEvent`]), and is asked before each node of the called tool whether the run goes on.
//! It stops there when the node has a breakpoint, when it was asked to pause, or after a step;
//! the run then waits (nothing of it is in flight between nodes) until [`Debugger::resume`],
//! [`Debugger::step`] or [`Debugger::stop`]. A stopping debugger ([`Debugger::stopping`]) ends
//! the run at the first breakpoint instead, as a cancellation (the toolkit's `runGraphTool`).
//!
//! Time spent paused does not count toward `maxExecutionTimeMs`. A call without a debugger pays
//! one `Option` test per node.

use super::Run;
use super::report::NodeReport;
use crate::cancel::Cancel;
use crate::failure::{Failure, FailureKind, RunError};
use mcpgraph_compiler::ir::Node;
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What a debugger is told, in the order it happens.
pub enum DebugEvent<'a> {
    /// A node of the called tool starts (after any pause before it). `at`: since the run began.
    Started {
        node: &'a str,
        node_type: &'static str,
        at: Duration,
    },
    /// A node, map item, parallel branch or callee node ended (what progress reports carry).
    /// A node whose failure ends the run has no report: the call's error names it.
    Finished(&'a NodeReport<'a>),
    /// The run waits before `node`.
    Paused { node: &'a str },
    /// The run goes on after waiting before `node`.
    Resumed { node: &'a str },
}

/// Told of every [`DebugEvent`]; called on the run's thread, so keep it short.
pub type DebugSink = Arc<dyn Fn(&DebugEvent<'_>) + Send + Sync>;

/// Controls the runs it is given to (one at a time is what it is meant for). Clones share it.
#[derive(Clone)]
pub struct Debugger {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    changed: Notify,
    sink: Option<DebugSink>,
    kind: Kind,
}

/// What a debugger does at a breakpoint.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The run waits there.
    Waits,
    /// The run ends there.
    Stops,
    /// Nothing: it only watches (`call --trace`).
    Watches,
}

#[derive(Default)]
struct State {
    breakpoints: HashSet<String>,
    mode: Mode,
    /// The node the run waits before.
    paused_at: Option<String>,
    /// Where the run was ended: a breakpoint of a stopping debugger, or [`Debugger::stop`].
    stopped_at: Option<String>,
    /// Bumped by each command, so a waiting run knows one came.
    generation: u64,
    /// The run waits and no command has come since it began to.
    waiting: bool,
}

#[derive(Default, Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Run to the next breakpoint.
    #[default]
    Run,
    /// Wait before the next node (a step ended, or pause was asked for).
    PauseNext,
    /// Run the node waited before, then wait before the next.
    Step,
    /// End the run before the next node.
    Stop,
}

impl Default for Debugger {
    fn default() -> Self {
        Debugger::new()
    }
}

impl Debugger {
    /// A debugger that waits at breakpoints.
    pub fn new() -> Debugger {
        Debugger::with(None, Kind::Waits)
    }

    /// A debugger that only watches: told of every event, it never pauses or stops a run.
    pub fn watching(sink: impl Fn(&DebugEvent<'_>) + Send + Sync + 'static) -> Debugger {
        Debugger::with(Some(Arc::new(sink)), Kind::Watches)
    }

    /// A debugger that ends the run at the first breakpoint it reaches (the call ends as
    /// cancelled; [`Debugger::stopped_at`] says where).
    pub fn stopping(breakpoints: impl IntoIterator<Item = String>) -> Debugger {
        let debugger = Debugger::with(None, Kind::Stops);
        debugger.set_breakpoints(breakpoints);
        debugger
    }

    /// The same debugger, telling `sink` of every event.
    pub fn with_sink(self, sink: impl Fn(&DebugEvent<'_>) + Send + Sync + 'static) -> Debugger {
        let state = std::mem::take(&mut *self.lock());
        let debugger = Debugger::with(Some(Arc::new(sink)), self.inner.kind);
        *debugger.lock() = state;
        debugger
    }

    fn with(sink: Option<DebugSink>, kind: Kind) -> Debugger {
        Debugger {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                changed: Notify::new(),
                sink,
                kind,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the breakpoints (node ids of the called tool); takes effect before the next
    /// node, also during a run.
    pub fn set_breakpoints(&self, nodes: impl IntoIterator<Item = String>) {
        self.lock().breakpoints = nodes.into_iter().collect();
    }

    /// The breakpoints, sorted.
    pub fn breakpoints(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self.lock().breakpoints.iter().cloned().collect();
        nodes.sort();
        nodes
    }

    /// Waits before the next node (the first one, before a run starts). While the run waits,
    /// nothing changes; just after a resume or step it has not yet taken, the run goes on by
    /// one node and waits before the next.
    pub fn pause(&self) {
        let mut state = self.lock();
        if state.mode != Mode::Stop {
            state.mode = Mode::PauseNext;
        }
    }

    /// Goes on to the next breakpoint.
    pub fn resume(&self) {
        let mut state = self.lock();
        if state.mode != Mode::Stop {
            state.mode = Mode::Run;
            self.wake(state);
        }
    }

    /// Runs the node the run waits before, then waits before the next one. While running (or
    /// when a command is already on its way to the waiting run), the same as
    /// [`Debugger::pause`].
    pub fn step(&self) {
        let mut state = self.lock();
        if state.mode == Mode::Stop {
            return;
        }
        if state.waiting {
            state.mode = Mode::Step;
            self.wake(state);
        } else {
            state.mode = Mode::PauseNext;
        }
    }

    /// Ends the run before its next node (at once if it waits); the call ends as cancelled.
    pub fn stop(&self) {
        let mut state = self.lock();
        if state.mode != Mode::Stop {
            state.mode = Mode::Stop;
            self.wake(state);
        }
    }

    /// Tells a waiting run that a command came (it reads which when it wakes).
    fn wake(&self, mut state: MutexGuard<'_, State>) {
        state.generation += 1;
        state.waiting = false;
        drop(state);
        self.inner.changed.notify_waiters();
    }

    /// The node the run waits before, if it waits.
    pub fn paused_at(&self) -> Option<String> {
        self.lock().paused_at.clone()
    }

    /// The node before which the run was ended, if it was.
    pub fn stopped_at(&self) -> Option<String> {
        self.lock().stopped_at.clone()
    }

    /// Whether runs may wait here (else they never do: a run without downstream calls can be
    /// completed in one poll).
    pub(crate) fn may_wait(&self) -> bool {
        self.inner.kind == Kind::Waits
    }

    pub(crate) fn tell(&self, event: &DebugEvent<'_>) {
        if let Some(sink) = &self.inner.sink {
            sink(event);
        }
    }

    /// Before node `node` of the called tool: goes on (how long the run waited, if it did), or
    /// ends the run (a cancellation). `pausing` is called as the wait begins (the run's clock
    /// stops meanwhile).
    pub(crate) async fn before(
        &self,
        node: &str,
        node_type: &'static str,
        at: Duration,
        cancel: &Cancel,
        pausing: impl FnOnce(),
    ) -> Result<Option<Duration>, Failure> {
        if self.inner.kind == Kind::Watches {
            self.tell(&DebugEvent::Started {
                node,
                node_type,
                at,
            });
            return Ok(None);
        }
        let generation = {
            let mut state = self.lock();
            let hit = state.breakpoints.contains(node);
            match state.mode {
                Mode::Stop => return Err(self.stopped(state, node)),
                _ if hit && self.inner.kind == Kind::Stops => {
                    state.mode = Mode::Stop;
                    state.stopped_at = Some(node.to_string());
                    return Err(Failure::new(
                        FailureKind::Cancelled,
                        format!("Stopped at breakpoint \"{node}\""),
                    ));
                }
                // A step ran the node it was asked for: this is the next one.
                Mode::Step | Mode::PauseNext => {}
                Mode::Run if hit => {}
                Mode::Run => {
                    drop(state);
                    self.tell(&DebugEvent::Started {
                        node,
                        node_type,
                        at,
                    });
                    return Ok(None);
                }
            }
            state.mode = Mode::PauseNext;
            state.paused_at = Some(node.to_string());
            state.waiting = true;
            state.generation
        };
        pausing();
        let began = Instant::now();
        self.tell(&DebugEvent::Paused { node });
        loop {
            let changed = self.inner.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.lock();
                if state.generation != generation {
                    state.paused_at = None;
                    state.waiting = false;
                    match state.mode {
                        Mode::Stop => return Err(self.stopped(state, node)),
                        // Step: run this node, wait before the next.
                        Mode::Step => state.mode = Mode::PauseNext,
                        Mode::Run | Mode::PauseNext => {}
                    }
                    break;
                }
            }
            tokio::select! {
                () = changed => {}
                () = cancel.cancelled() => {
                    let mut state = self.lock();
                    // A stop that also cancelled the call: still the debugger's stop.
                    if state.mode == Mode::Stop {
                        return Err(self.stopped(state, node));
                    }
                    state.paused_at = None;
                    state.waiting = false;
                    return Err(Failure::new(FailureKind::Cancelled, "Execution was cancelled"));
                }
            }
        }
        let waited = began.elapsed();
        self.tell(&DebugEvent::Resumed { node });
        self.tell(&DebugEvent::Started {
            node,
            node_type,
            at: at + waited,
        });
        Ok(Some(waited))
    }

    fn stopped(&self, mut state: MutexGuard<'_, State>, node: &str) -> Failure {
        state.paused_at = None;
        state.waiting = false;
        state.stopped_at = Some(node.to_string());
        Failure::new(
            FailureKind::Cancelled,
            format!("Stopped by the debugger before node \"{node}\""),
        )
    }
}

impl Run<'_> {
    /// Asks the debugger before `node`; a pause stops the run's clock (and the watchdog's).
    pub(super) async fn debug(&self, debugger: &Debugger, node: &Node) -> Result<(), RunError> {
        let session = self.session;
        let watched = Cell::new(true);
        let pausing = || {
            if let Some(watch) = &session.watch {
                // Far enough: never reached while waiting; set again on resuming. Gone: the
                // time limit passed just before the pause.
                watched
                    .set(watch.set_deadline(Instant::now() + Duration::from_secs(366 * 24 * 3600)));
            }
        };
        let waited = debugger
            .before(
                &node.id,
                node.kind.type_name(),
                session.started.elapsed(),
                &session.env.cancel,
                pausing,
            )
            .await;
        let waited = match waited {
            Ok(waited) => waited,
            Err(failure) => return Err(self.between_nodes(failure)),
        };
        if let Some(waited) = waited {
            if !watched.get() {
                return Err(self.between_nodes(session.time_limit()));
            }
            session.paused.set(session.paused.get() + waited);
            if let Some(watch) = &session.watch {
                watch.set_deadline(session.deadline());
            }
        }
        Ok(())
    }
}
