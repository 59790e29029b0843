//! `UnixStream` and `UnixListener` with `std::os::unix::net`'s API, parking
//! user threads (see `net`).

use super::{rw_impls, Io, READ};
use std::io;
use std::net::Shutdown;
use std::os::unix::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// A Unix stream socket (`std::os::unix::net::UnixStream`'s API). `Read`
/// and `Write` are implemented for it and for `&UnixStream`.
#[derive(Debug)]
pub struct UnixStream {
    io: Io<std::os::unix::net::UnixStream>,
}

/// A Unix socket server (`std::os::unix::net::UnixListener`'s API).
#[derive(Debug)]
pub struct UnixListener {
    io: Io<std::os::unix::net::UnixListener>,
}

rw_impls!(UnixStream);

impl UnixStream {
    /// Connects to the socket at `path` (a local connect completes at once,
    /// or fails).
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        Ok(UnixStream { io: Io::new(std::os::unix::net::UnixStream::connect(path)?)? })
    }

    /// An unnamed pair of connected sockets.
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = std::os::unix::net::UnixStream::pair()?;
        Ok((UnixStream { io: Io::new(a)? }, UnixStream { io: Io::new(b)? }))
    }

    /// Another handle to the same socket (`dup`), with no timeouts.
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        Ok(UnixStream { io: Io::new(self.io.get()?.try_clone()?)? })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.local_addr()
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.peer_addr()
    }

    /// Shuts down the read, write, or both halves.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get()?.shutdown(how)
    }

    /// Bounds each read: after `d` it fails with `WouldBlock`.
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_read_timeout(d)
    }

    /// Bounds each write.
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_write_timeout(d)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.read_timeout())
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.io.write_timeout())
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get()?.take_error()
    }

    /// The std socket, in blocking mode, with this socket's timeouts.
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        let (s, r, w) = self.io.into_inner()?;
        s.set_read_timeout(r)?;
        s.set_write_timeout(w)?;
        Ok(s)
    }
}

impl From<std::os::unix::net::UnixStream> for UnixStream {
    /// Takes over a std socket; its timeouts are read over.
    fn from(s: std::os::unix::net::UnixStream) -> UnixStream {
        let r = s.read_timeout().ok().flatten();
        let w = s.write_timeout().ok().flatten();
        let io = Io::wrap(s);
        let _ = io.set_read_timeout(r);
        let _ = io.set_write_timeout(w);
        UnixStream { io }
    }
}

impl UnixListener {
    /// Binds a listener to `path`.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        Ok(UnixListener { io: Io::new(std::os::unix::net::UnixListener::bind(path)?)? })
    }

    /// Accepts a connection; a user thread parks until one comes.
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (s, a) = self.io.op(READ, None, |l| l.accept())?;
        Ok((UnixStream { io: Io::new(s)? }, a))
    }

    /// An iterator over incoming connections.
    pub fn incoming(&self) -> UnixIncoming<'_> {
        UnixIncoming { listener: self }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.local_addr()
    }

    /// Another handle to the same socket (`dup`).
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        Ok(UnixListener { io: Io::new(self.io.get()?.try_clone()?)? })
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get()?.take_error()
    }

    /// The std listener, in blocking mode.
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        self.io.into_inner().map(|(l, _, _)| l)
    }
}

impl From<std::os::unix::net::UnixListener> for UnixListener {
    fn from(l: std::os::unix::net::UnixListener) -> UnixListener {
        UnixListener { io: Io::wrap(l) }
    }
}

impl std::os::fd::AsRawFd for UnixListener {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.io.as_raw_fd()
    }
}

/// The iterator of [`UnixListener::incoming`].
#[derive(Debug)]
pub struct UnixIncoming<'a> {
    listener: &'a UnixListener,
}

impl Iterator for UnixIncoming<'_> {
    type Item = io::Result<UnixStream>;
    fn next(&mut self) -> Option<io::Result<UnixStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}
