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
//! stdin, a terminal, `/dev/null`) keeps tokio's blocking reads and writes.
//!
//! Non-blocking is a property of the open file, which whoever else holds it shares (a shell's
//! pipeline: `{ mcpgraph serve g.yaml; echo done; } | consumer`). So [`Stdio`] puts back the mode
//! it found when it is dropped, at the end of serving.

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// What puts back the modes of stdin and stdout when dropped. Create it on the runtime (the
/// reactor registers the descriptors); drop it after the transport.
pub struct Stdio {
    /// Descriptors whose open file was blocking before.
    restore: Vec<OwnedFd>,
}

/// One end of stdio: polled by the reactor as a pipe or a Unix socket, or tokio's own.
pub enum Stream<P, B> {
    Pipe(P),
    Socket(UnixStream),
    Blocking(B),
}

pub type Stdin = Stream<pipe::Receiver, tokio::io::Stdin>;
pub type Stdout = Stream<pipe::Sender, tokio::io::Stdout>;

impl Stdio {
    /// stdin and stdout, for a server's line transport.
    pub fn open() -> (Stdio, Stdin, Stdout) {
        let mut stdio = Stdio {
            restore: Vec::new(),
        };
        let input = stdio.pollable(io::stdin().as_fd(), pipe::Receiver::from_owned_fd);
        let output = stdio.pollable(io::stdout().as_fd(), pipe::Sender::from_owned_fd);
        (
            stdio,
            input.unwrap_or_else(|| Stream::Blocking(tokio::io::stdin())),
            output.unwrap_or_else(|| Stream::Blocking(tokio::io::stdout())),
        )
    }

    /// `fd` in non-blocking mode, registered with the reactor, when it is a pipe or a Unix
    /// socket.
    fn pollable<P, B>(
        &mut self,
        fd: BorrowedFd<'_>,
        pipe: fn(OwnedFd) -> io::Result<P>,
    ) -> Option<Stream<P, B>> {
        let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).ok()?);
        let file = File::from(fd.try_clone_to_owned().ok()?);
        let kind = file.metadata().ok()?.file_type();
        let stream = if kind.is_fifo() {
            // tokio checks the access mode before it sets the mode.
            Stream::Pipe(pipe(file.into()).ok()?)
        } else if kind.is_socket() {
            let socket = std::os::unix::net::UnixStream::from(OwnedFd::from(file));
            // A Unix socket has a Unix address; a TCP one (inetd) fails here and stays blocking.
            socket.local_addr().ok()?;
            socket.set_nonblocking(true).ok()?;
            Stream::Socket(UnixStream::from_std(socket).ok()?)
        } else {
            return None;
        };
        if !flags.contains(OFlag::O_NONBLOCK)
            && let Ok(fd) = fd.try_clone_to_owned()
        {
            self.restore.push(fd);
        }
        Some(stream)
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        for fd in &self.restore {
            if let Ok(flags) = fcntl(fd, FcntlArg::F_GETFL) {
                let flags = OFlag::from_bits_truncate(flags) - OFlag::O_NONBLOCK;
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
        }
    }
}

impl<P: AsyncRead + Unpin, B: AsyncRead + Unpin> AsyncRead for Stream<P, B> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Stream::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_read(cx, buf),
        }
    }
}

impl<P: AsyncWrite + Unpin, B: AsyncWrite + Unpin> AsyncWrite for Stream<P, B> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            Stream::Socket(socket) => Pin::new(socket).poll_write(cx, buf),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Stream::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Stream::Socket(socket) => Pin::new(socket).poll_shutdown(cx),
            Stream::Blocking(blocking) => Pin::new(blocking).poll_shutdown(cx),
        }
    }
}
