//! A downstream server as a child process: its own process group, our line transport over its
//! pipes, and a shutdown that ends the whole group (contract §5).
//!
//! rmcp's `TokioChildProcess` reads with rmcp's line transport, which drops a reply it cannot
//! decode (the node then waits out its whole timeout), and signals only the child it started:
//! a server started through `sh -c` or `npx` leaves its own children running after shutdown.
//! Here every child leads a process group, and shutdown signals the group.

use crate::line_transport::LineTransport;
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::borrow::Cow;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// How long a child gets to exit after its stdin closed, and again after SIGTERM.
pub const GRACE: Duration = Duration::from_secs(2);

pub struct ChildProcess {
    /// Present until the child has exited and been waited for.
    child: Option<Child>,
    /// The child's process group (its pid): present until the group has been sent SIGKILL.
    group: Option<u32>,
    transport: LineTransport<RoleClient, ChildStdout, ChildStdin>,
}

impl ChildProcess {
    /// Starts `command` with piped stdio, as the leader of a new process group.
    pub fn spawn(mut command: Command) -> std::io::Result<(ChildProcess, ChildStderr)> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn()?;
        let missing = || std::io::Error::other("a pipe to the child is missing");
        let stdin = child.stdin.take().ok_or_else(missing)?;
        let stdout = child.stdout.take().ok_or_else(missing)?;
        let stderr = child.stderr.take().ok_or_else(missing)?;
        let group = child.id();
        Ok((
            ChildProcess {
                child: Some(child),
                group,
                transport: LineTransport::new(stdout, stdin),
            },
            stderr,
        ))
    }

    /// Closes the child's stdin and gives it [`GRACE`] to exit, then SIGTERM and [`GRACE`]
    /// again, then SIGKILL; whatever is left of its process group gets SIGTERM, [`GRACE`] to
    /// go, and SIGKILL. The child stays in `self` until it has been waited for, so dropping a
    /// shutdown half-way still kills it (see `Drop`).
    ///
    /// Closing stdin waits for the write in progress, and that write may never end: a child
    /// blocked writing a large reply that nobody reads any more (the client stopped reading
    /// when it was cancelled, say after a map passed `maxValueBytes` with replies in flight)
    /// reads none of what we write. So the close gets [`GRACE`], and a child whose stdin could
    /// not be closed goes straight to SIGTERM: its death ends the stuck write.
    async fn shutdown(&mut self) -> std::io::Result<()> {
        let stdin_closed = matches!(
            tokio::time::timeout(GRACE, self.transport.close()).await,
            Ok(Ok(()))
        );
        let group = self.group;
        let signal = |signal| {
            if let Some(group) = group {
                group_signal(group, Some(signal));
            }
        };
        let alive = || group.is_some_and(|group| group_signal(group, None));
        if let Some(child) = self.child.as_mut() {
            // A child whose stdin is still open has no end of input to exit on.
            let exited = stdin_closed
                && matches!(tokio::time::timeout(GRACE, child.wait()).await, Ok(Ok(_)));
            if !exited {
                signal(Signal::Terminate);
                let exited = matches!(tokio::time::timeout(GRACE, child.wait()).await, Ok(Ok(_)));
                if !exited {
                    signal(Signal::Kill);
                    let _ = child.kill().await;
                }
            }
            self.child = None;
        }
        // The leader is gone; its own children may not be.
        if alive() {
            signal(Signal::Terminate);
            let deadline = tokio::time::Instant::now() + GRACE;
            while alive() && tokio::time::Instant::now() < deadline {
                // The group's processes are not our children: there is nothing to wait on but
                // the group's existence.
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        signal(Signal::Kill);
        self.group = None;
        Ok(())
    }
}

#[derive(Clone, Copy)]
enum Signal {
    Terminate,
    Kill,
}

/// Sends `signal` (none: only checks it exists) to process group `group`; whether it exists.
#[cfg(unix)]
fn group_signal(group: u32, signal: Option<Signal>) -> bool {
    use nix::sys::signal::{Signal as Nix, killpg};
    let Ok(group) = i32::try_from(group) else {
        return false;
    };
    let signal = signal.map(|s| match s {
        Signal::Terminate => Nix::SIGTERM,
        Signal::Kill => Nix::SIGKILL,
    });
    killpg(nix::unistd::Pid::from_raw(group), signal).is_ok()
}

/// Without process groups, the child itself is killed on drop (`kill_on_drop`).
#[cfg(not(unix))]
fn group_signal(_group: u32, _signal: Option<Signal>) -> bool {
    false
}

impl Drop for ChildProcess {
    /// A connection dropped without a shutdown (the runtime ending, a cancelled close): the
    /// group is killed at once; `kill_on_drop` kills the leader and tokio reaps it.
    fn drop(&mut self) {
        if let Some(group) = self.group {
            group_signal(group, Some(Signal::Kill));
        }
    }
}

impl Transport<RoleClient> for ChildProcess {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "child process".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shutdown()
    }
}
