//! `serve --watch`: the graph file, the lock file beside it and the `-m` file are polled every
//! [`POLL`]; a change that has settled is read and checked again. A version that checks
//! replaces the served one (calls in flight finish on theirs) and the clients get
//! `notifications/tools/list_changed`; one that does not is reported on stderr once, and the
//! last good version keeps serving (docs/watch.md).
//!
//! Polling rather than inotify: no dependency, the same code on every platform, and it follows
//! editors that save by renaming a new file over the old one (a watch on the old inode would go
//! quiet). A poll reads each file and hashes its contents.

use crate::server::{GraphServer, Served, Version};
use mcpgraph_compiler::diagnostics::MAX_SOURCE_BYTES;
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Checked, SourceFile};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the files are looked at. A change is taken once two polls in a row saw the same
/// files, so a save is picked up within two polls and a half-written one is never read.
const POLL: Duration = Duration::from_millis(250);

/// Reads and checks the watched files, as `serve` did at start.
type Load = dyn Fn() -> (SourceFile, Checked) + Send + Sync;

/// What to watch, and how to read a new version.
pub struct Watch {
    files: Vec<PathBuf>,
    load: Arc<Load>,
    style: Style,
    /// The files as they were when the served version was read (or reported, if it did not
    /// check).
    served: Snapshot,
}

impl Watch {
    /// Watches `files` (missing ones too: creating one is a change) from how they are now; so
    /// make it before reading the first version, and a save in between is not missed. `load`
    /// reads and checks a new version; its diagnostics are rendered in `style` on stderr.
    pub fn new(
        files: Vec<PathBuf>,
        style: Style,
        load: impl Fn() -> (SourceFile, Checked) + Send + Sync + 'static,
    ) -> Watch {
        let served = Snapshot::take(&files);
        Watch {
            files,
            load: Arc::new(load),
            style,
            served,
        }
    }

    /// Waits until the watched files changed (from how they were at the last version) and
    /// settled, then reads and checks them: the next version. `serve --watch` and
    /// `mcpgraph studio` follow a file with it.
    pub async fn next_version(&mut self) -> (SourceFile, Checked) {
        let mut ticks = tokio::time::interval(POLL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = self.served.clone();
        loop {
            ticks.tick().await;
            let files = self.files.clone();
            let Ok(now) = tokio::task::spawn_blocking(move || Snapshot::take(&files)).await else {
                continue;
            };
            // Still being written (or just saved): wait for a poll that sees the same files.
            if now != last {
                last = now;
                continue;
            }
            if now == self.served {
                continue;
            }
            let load = self.load.clone();
            let files = self.files.clone();
            // The files again after reading them: a save that began between the poll and the
            // read is not taken half-written; the next polls see it settle and read it again.
            let Ok((read, after)) =
                tokio::task::spawn_blocking(move || (load(), Snapshot::take(&files))).await
            else {
                continue;
            };
            if after != now {
                last = after;
                continue;
            }
            self.served = now;
            return read;
        }
    }

    async fn run(mut self, server: GraphServer) {
        loop {
            let (file, checked) = tokio::select! {
                () = server.stopped().cancelled() => return,
                read = self.next_version() => read,
            };
            let style = self.style;
            let Ok(read) =
                tokio::task::spawn_blocking(move || Read::new(file, checked, style)).await
            else {
                continue;
            };
            read.take(&server).await;
        }
    }
}

impl GraphServer {
    /// Serves each new version of the watched files from now on (`serve --watch`), and
    /// advertises `tools.listChanged`. Call it inside a tokio runtime, before serving; the watch
    /// ends with [`GraphServer::shutdown`].
    pub fn watch(self, watch: Watch) -> GraphServer {
        self.set_watching();
        tokio::spawn(watch.run(self.clone()));
        self
    }
}

/// A new version read from the files: the version, and what to say about it on stderr.
struct Read {
    name: String,
    /// The diagnostics, rendered as `check` shows them (empty when there are none).
    diagnostics: String,
    version: Version,
}

impl Read {
    fn new(file: SourceFile, checked: Checked, style: Style) -> Read {
        let diagnostics = if checked.diagnostics.is_empty() {
            String::new()
        } else {
            render::human_all(&checked, &file, style)
        };
        let checks = checked.graph.is_some();
        let version = Served::for_checked(checked, &file);
        // A graph that checks but cannot be loaded (no worker threads): say why.
        let diagnostics = match (checks, version.diagnostics()) {
            (true, Some(why)) => format!("{diagnostics}error: {why}\n"),
            _ => diagnostics,
        };
        Read {
            name: file.name,
            diagnostics,
            version,
        }
    }

    /// Serves the new version if it works, or if nothing works yet (its diagnostics are then
    /// the ones calls answer with); says on stderr what happened.
    async fn take(self, server: &GraphServer) {
        let works = self.version.engine().is_some();
        let served_works = server.current().engine().is_some();
        let line = if works {
            format!(
                "{} changed: serving the new version ({} tools)",
                self.name,
                self.version.tool_count()
            )
        } else if served_works {
            format!(
                "{} changed but does not check: the previous version keeps serving",
                self.name
            )
        } else {
            format!(
                "{} changed but still does not check: no tool is served until it does",
                self.name
            )
        };
        // One write, so the lines of a report stay together.
        let _ = std::io::stderr().write_all(format!("{}{line}\n", self.diagnostics).as_bytes());
        if !works && served_works {
            return;
        }
        // A broken version replaces only a broken one: calls then answer with its diagnostics.
        if server.replace(self.version) && works {
            server.tools_changed().await;
        }
    }
}

/// The watched files as one poll saw them, in order.
#[derive(Clone, PartialEq, Eq, Debug)]
struct Snapshot(Vec<FileState>);

#[derive(Clone, PartialEq, Eq, Debug)]
enum FileState {
    Missing,
    /// A FIFO, a device or a directory: never read (a FIFO would block the watch until a writer
    /// came, a device might never end); the load that follows says why it cannot be used.
    NotAFile,
    /// Larger than a source file may be ([`MAX_SOURCE_BYTES`]): not read either.
    TooLarge {
        len: u64,
    },
    /// The length and a hash of the contents. Contents, not modification times: a file's time
    /// has the clock tick's resolution (milliseconds), so two saves of the same length in one
    /// tick would look alike, and a touch without a change would look like a save. Graph files
    /// are small; reading them four times a second costs nothing that shows.
    Present {
        len: u64,
        contents: u64,
    },
}

impl Snapshot {
    fn take(files: &[PathBuf]) -> Snapshot {
        let states = files.iter().map(|path| match std::fs::metadata(path) {
            Err(_) => FileState::Missing,
            Ok(metadata) if !metadata.is_file() => FileState::NotAFile,
            Ok(metadata) if metadata.len() > MAX_SOURCE_BYTES => FileState::TooLarge {
                len: metadata.len(),
            },
            Ok(_) => Snapshot::read(path),
        });
        Snapshot(states.collect())
    }

    fn read(path: &std::path::Path) -> FileState {
        match std::fs::read(path) {
            Ok(bytes) => {
                let mut hasher = std::hash::DefaultHasher::new();
                bytes.hash(&mut hasher);
                FileState::Present {
                    len: bytes.len() as u64,
                    contents: hasher.finish(),
                }
            }
            Err(_) => FileState::Missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO in the watched list is looked at, never read: reading it would block the watch
    /// (and `serve --watch` with it) until something wrote to it.
    #[test]
    fn a_fifo_is_never_read() {
        let dir = std::env::temp_dir().join(format!("mcpgraph-watch-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("g.yaml");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()));
        let (sent, taken) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = sent.send(Snapshot::take(&[fifo]));
        });
        let snapshot = taken
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the snapshot returns within 5 s");
        assert_eq!(snapshot.0, [FileState::NotAFile]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_snapshot_sees_saves_of_the_same_length_and_ignores_a_touch() {
        let dir = std::env::temp_dir().join(format!("mcpgraph-watch-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("g.yaml");
        let files = vec![file.clone(), dir.join("missing.json")];
        std::fs::write(&file, "one").unwrap();
        let first = Snapshot::take(&files);
        assert_eq!(first.0[1], FileState::Missing);

        // Renamed over the file, as editors save, within the same clock tick and length.
        let temp = dir.join("g.yaml.tmp");
        std::fs::write(&temp, "two").unwrap();
        std::fs::rename(&temp, &file).unwrap();
        let second = Snapshot::take(&files);
        assert_ne!(second, first);

        let touched = std::fs::File::options().write(true).open(&file).unwrap();
        touched
            .set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
            .unwrap();
        assert_eq!(Snapshot::take(&files), second);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
