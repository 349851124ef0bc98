//! One version lifecycle for everything that serves a graph file which can change under it
//! (`serve --watch`, the studio, the toolkit): the current version, which new work takes, and
//! the versions it replaced, kept while work that took them still runs.
//!
//! A [`Version`] is what a front end shows of one state of the files (`T`) together with its
//! engine, when the graph checks. Work takes the current version as an `Arc` and keeps it to its
//! end, so a call in flight finishes on the version it began with. A replaced version's engine is
//! shut down (its downstream children closed) when the last holder lets go; [`Versions::stop`]
//! stops taking versions and hands back every engine still alive, current and replaced, to shut
//! down or cancel. The engines share the process's run workers (pool.rs): a new version starts
//! no threads.

use crate::engine::Engine;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};

/// One version: the front end's view of it, and its engine when the graph checks.
pub struct Version<T> {
    value: T,
    engine: Option<Arc<Engine>>,
    /// Set when a newer version replaced this one: only then does its last holder shut the
    /// engine down (an engine given to a server by its caller stays the caller's).
    retired: AtomicBool,
}

impl<T> Version<T> {
    pub fn new(value: T, engine: Option<Arc<Engine>>) -> Version<T> {
        Version {
            value,
            engine,
            retired: AtomicBool::new(false),
        }
    }

    pub fn engine(&self) -> Option<&Arc<Engine>> {
        self.engine.as_ref()
    }
}

impl<T> Deref for Version<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> Drop for Version<T> {
    /// The last holder of a replaced version let go: nothing can call this engine any more, so
    /// its downstream servers are closed (on the runtime of whoever dropped it; without one, the
    /// children end with the process, as their pipes close). The current version's engine is
    /// shut down by whoever stops serving ([`Versions::stop`]).
    fn drop(&mut self) {
        if !self.retired.load(Ordering::Acquire) {
            return;
        }
        if let Some(engine) = self.engine.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                engine.shutdown().await;
                tracing::debug!("closed the downstream servers of a replaced version");
            });
        }
    }
}

/// The current version and the replaced ones still in use.
pub struct Versions<T> {
    current: RwLock<Arc<Version<T>>>,
    /// Replaced versions, as long as something holds them.
    retired: Mutex<Vec<Weak<Version<T>>>>,
    /// Set by [`Versions::stop`]: no version is taken after it.
    stopped: AtomicBool,
}

impl<T> Versions<T> {
    pub fn new(first: Version<T>) -> Versions<T> {
        Versions {
            current: RwLock::new(Arc::new(first)),
            retired: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
        }
    }

    /// The version new work runs on; holding it keeps it (and its engine) alive.
    pub fn current(&self) -> Arc<Version<T>> {
        match self.current.read() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// New work runs on `next` from now on; work in flight finishes on the version it took,
    /// whose engine is shut down after the last of it. Gives `next` back when the versions were
    /// stopped.
    pub fn replace(&self, next: Version<T>) -> Result<Arc<Version<T>>, Version<T>> {
        let mut current = match self.current.write() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Looked at under the write lock, which `stop` takes too: a version is never taken
        // after `stop` has collected the engines.
        if self.stopped.load(Ordering::Acquire) {
            return Err(next);
        }
        let next = Arc::new(next);
        let old = std::mem::replace(&mut *current, next.clone());
        old.retired.store(true, Ordering::Release);
        // Listed before the write lock is let go, so that `stop` and `engines`, which take it
        // first, always see the version being replaced (its calls may still run).
        let mut retired = lock(&self.retired);
        retired.retain(|v| v.strong_count() > 0);
        retired.push(Arc::downgrade(&old));
        drop(retired);
        drop(current);
        Ok(next)
    }

    /// Lets go of `version`. When this was its last holder (so it is no longer current), its
    /// engine is shut down here, awaited, rather than in the background: a front end that must
    /// know the downstream servers are closed (a run's end) awaits this.
    pub async fn release(&self, version: Arc<Version<T>>) {
        if let Some(mut version) = Arc::into_inner(version)
            && let Some(engine) = version.engine.take()
        {
            engine.shutdown().await;
        }
    }

    /// Every engine alive: the current version's and those of replaced versions still in use.
    pub fn engines(&self) -> Vec<Arc<Engine>> {
        // Under the read lock: a version being replaced is in one list or the other.
        let current = match self.current.read() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut engines: Vec<Arc<Engine>> = current.engine().cloned().into_iter().collect();
        engines.extend(
            lock(&self.retired)
                .iter()
                .filter_map(Weak::upgrade)
                .filter_map(|v| v.engine().cloned()),
        );
        drop(current);
        engines
    }

    /// Takes no version after this; returns every engine alive, to shut down.
    pub fn stop(&self) -> Vec<Arc<Engine>> {
        {
            let _current = match self.current.write() {
                Ok(current) => current,
                Err(poisoned) => poisoned.into_inner(),
            };
            self.stopped.store(true, Ordering::Release);
        }
        self.engines()
    }
}

/// A mutex's contents, poisoned or not (what it guards is a list, whole after any panic).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> Arc<Engine> {
        let text = r#"version: "1.0"
server: { name: t, version: "1" }
tools:
  - name: t
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: exit }
      - { id: exit, type: exit }
"#;
        let checked =
            mcpgraph_compiler::compile(&mcpgraph_compiler::SourceFile::new("t.yaml", text), None);
        Arc::new(Engine::load(checked.graph.expect("the graph checks")).expect("it loads"))
    }

    #[test]
    fn a_replaced_version_lives_while_it_is_held() {
        let versions = Versions::new(Version::new(1, Some(engine())));
        let held = versions.current();
        assert!(versions.replace(Version::new(2, Some(engine()))).is_ok());
        assert_eq!(**versions.current(), 2);
        // The first version is still held: both engines are alive.
        assert_eq!(versions.engines().len(), 2);
        drop(held);
        assert_eq!(versions.engines().len(), 1);
    }

    #[test]
    fn no_version_is_taken_after_stop() {
        let versions = Versions::new(Version::new("a", None));
        let _held = versions.current();
        assert!(versions.replace(Version::new("b", Some(engine()))).is_ok());
        let engines = versions.stop();
        assert_eq!(engines.len(), 1);
        let refused = versions.replace(Version::new("c", None));
        assert!(matches!(refused, Err(v) if *v == "c"));
        assert_eq!(**versions.current(), "b");
    }
}
