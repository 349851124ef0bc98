//! The serving process's own stdin and stdout, polled by the runtime's reactor when they can be.
//!
//! tokio's `stdin()` and `stdout()` do every read and write on a thread of its blocking pool:
//! a message in wakes a pool thread, which wakes a worker; a message out is handed to a pool
//! thread and its completion handed back. Over stdio that was two thread hand-offs more per call
//! than the run itself needs, on the path of every call.
//!
//! What MCP clients give a server they start is a pipe (Python's `subprocess`, Go, Rust) or a
//! Unix socket (Node's `child_process`, through libuv's socket pairs). Those, like a downstream
//! child's pipes, can be put in non-blocking mode and polled with epoll, so reads and writes
//! happen on the worker that waits for them. Anything else (a regular file redirected to
//! stdin, a terminal, `/dev/null`, a TCP socket) keeps tokio's blocking reads and writes.
//!
//! Non-blocking is a property of the open file, which whoever else holds it shares:
//! - stderr, when it is the same file as stdin or stdout (`2>&1` into a pipe, one socket for all
//!   three). stderr is written with blocking writes (the log lines, `eprintln!`), which would
//!   fail or lose text on a full pipe; so such a stdin or stdout keeps tokio's.
//! - other processes (a shell pipeline: `{ mcpgraph serve g.yaml; echo done; } | consumer`). So
//!   the mode found is put back when both ends are dropped: when the transport closes, at a
//!   normal end of serving (stdin closed, SIGTERM, SIGINT). A process killed keeps it.

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// One end of stdio: polled by the reactor as a pipe or a Unix socket, or tokio's own.
pub struct End<P, B> {
    stream: Stream<P, B>,
    /// Puts back the blocking mode when the last end holding it is dropped.
    _restore: Option<Arc<Restore>>,
}

enum Stream<P, B> {
    Pipe(P),
    Socket(UnixStream),
    Blocking(B),
}

pub type Stdin = End<pipe::Receiver, tokio::io::Stdin>;
pub type Stdout = End<pipe::Sender, tokio::io::Stdout>;

/// stdin and stdout, for a server's line transport. Call on the runtime (the reactor registers
/// the descriptors).
pub fn open() -> (Stdin, Stdout) {
    let stderr = identity(io::stderr().as_fd());
    let input = pollable(io::stdin().as_fd(), pipe::Receiver::from_owned_fd, stderr);
    let output = pollable(io::stdout().as_fd(), pipe::Sender::from_owned_fd, stderr);
    (
        input.unwrap_or_else(|| End::blocking(tokio::io::stdin())),
        output.unwrap_or_else(|| End::blocking(tokio::io::stdout())),
    )
}

/// The file `fd` is open on (device and inode): a pipe's or a socket's is the same for every
/// descriptor of it.
fn identity(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    let metadata = File::from(fd.try_clone_to_owned().ok()?).metadata().ok()?;
    Some((metadata.dev(), metadata.ino()))
}

impl<P, B> End<P, B> {
    fn blocking(stream: B) -> Self {
        End {
            stream: Stream::Blocking(stream),
            _restore: None,
        }
    }
}

/// `fd` in non-blocking mode, registered with the reactor, when it is a pipe or a Unix socket
/// and not the file stderr is open on (`stderr`, its [`identity`]).
fn pollable<P, B>(
    fd: BorrowedFd<'_>,
    pipe: fn(OwnedFd) -> io::Result<P>,
    stderr: Option<(u64, u64)>,
) -> Option<End<P, B>> {
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).ok()?);
    let file = File::from(fd.try_clone_to_owned().ok()?);
    let metadata = file.metadata().ok()?;
    let kind = metadata.file_type();
    if !kind.is_fifo() && !kind.is_socket() || stderr == Some((metadata.dev(), metadata.ino())) {
        return None;
    }
    // Made before the mode is set: a conversion that fails after setting it puts it back as
    // this is dropped.
    let restore = if flags.contains(OFlag::O_NONBLOCK) {
        None
    } else {
        Some(Arc::new(Restore(fd.try_clone_to_owned().ok()?)))
    };
    let stream = if kind.is_fifo() {
        // tokio checks the access mode, then sets the mode.
        Stream::Pipe(pipe(file.into()).ok()?)
    } else {
        let socket = std::os::unix::net::UnixStream::from(OwnedFd::from(file));
        // A Unix socket has a Unix address; a TCP one (inetd) fails here and stays blocking.
        socket.local_addr().ok()?;
        socket.set_nonblocking(true).ok()?;
        Stream::Socket(UnixStream::from_std(socket).ok()?)
    };
    Some(End {
        stream,
        _restore: restore,
    })
}

/// A descriptor whose open file was blocking: made blocking again when dropped.
struct Restore(OwnedFd);

impl Drop for Restore {
    fn drop(&mut self) {
        if let Ok(flags) = fcntl(&self.0, FcntlArg::F_GETFL) {
            let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
            let _ = fcntl(&self.0, FcntlArg::F_SETFL(flags));
        }
    }
}

impl<P: AsyncRead + Unpin, B: AsyncRead + Unpin> AsyncRead for End<P, B> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Stream::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_read(cx, buf),
        }
    }
}

impl<P: AsyncWrite + Unpin, B: AsyncWrite + Unpin> AsyncWrite for End<P, B> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().stream {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            Stream::Socket(socket) => Pin::new(socket).poll_write(cx, buf),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Stream::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().stream {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Stream::Socket(socket) => Pin::new(socket).poll_shutdown(cx),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_shutdown(cx),
        }
    }
}
