//! `TcpListener` and `TcpStream` with std's API, parking user threads
//! (see the module docs of `net`).

use super::{rw_impls, Io, READ, WRITE};
use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// A TCP socket server (`std::net::TcpListener`'s API).
#[derive(Debug)]
pub struct TcpListener {
    io: Io<std::net::TcpListener>,
}

/// A TCP stream between a local and a remote socket (`std::net::TcpStream`'s
/// API). `Read` and `Write` are implemented for it and for `&TcpStream`.
#[derive(Debug)]
pub struct TcpStream {
    io: Io<std::net::TcpStream>,
}

rw_impls!(TcpStream);

impl TcpListener {
    /// Binds a listener to `addr` (the first address that binds).
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        Ok(TcpListener { io: Io::new(std::net::TcpListener::bind(addr)?)? })
    }

    /// Accepts a connection; a user thread parks until one comes.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, a) = self.io.op(READ, None, |l| l.accept())?;
        Ok((TcpStream { io: Io::new(s)? }, a))
    }

    /// An iterator over incoming connections (`accept` in a loop, never `None`).
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.local_addr()
    }

    /// Another handle to the same socket (`dup`).
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(TcpListener { io: Io::new(self.io.get()?.try_clone()?)? })
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get()?.set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get()?.ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get()?.take_error()
    }

    /// The std listener, in blocking mode.
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        self.io.into_inner().map(|(l, _, _)| l)
    }
}

impl From<std::net::TcpListener> for TcpListener {
    fn from(l: std::net::TcpListener) -> TcpListener {
        TcpListener { io: Io::wrap(l) }
    }
}

impl std::os::fd::AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.io.as_raw_fd()
    }
}

/// The iterator of [`TcpListener::incoming`].
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A `sockaddr` for `addr`.
fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and aligned for it.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// How long a connect without a timeout of its own keeps retrying a `connect(2)` that says
/// `EAGAIN`: what Linux gives an unanswered SYN by default (`tcp_syn_retries` = 6: 1 + 2 +
/// 4 + ... + 64 = 127 s), so no longer than std's blocking connect could wait.
const EAGAIN_PATIENCE: Duration = Duration::from_secs(127);
/// The first pause before such a retry; each pause doubles, up to [`RETRY_PAUSE_MAX`].
const RETRY_PAUSE: Duration = Duration::from_millis(1);
/// The longest pause between retries.
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(100);

/// One `connect(2)` of socket `fd` to `addr`; the OS error when it fails.
fn connect_fd(fd: libc::c_int, addr: &SocketAddr) -> io::Result<()> {
    let (ss, len) = sockaddr(addr);
    // SAFETY: `ss` holds a valid address of `len` bytes.
    let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A non-blocking `connect` to `addr`: a user thread parks until it is done.
fn connect_parking(addr: &SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
    connect_with(addr, timeout, connect_fd)
}

/// [`connect_parking`] with the `connect(2)` call given (tests make it fail).
///
/// A non-blocking `connect(2)` answers `EINPROGRESS` and the thread parks until the
/// handshake ends, as a blocking connect sleeps in the kernel. Under load it can answer
/// `EAGAIN` instead (Linux: a transient shortage, "insufficient entries in the routing
/// cache" for TCP; a full backlog for UNIX sockets), where a blocking connect is not failed
/// by the same shortage. That is no answer about the peer, so the connect is retried on a
/// fresh socket after a pause that parks the user thread (1 ms, doubling to 100 ms), until
/// the timeout (then `TimedOut`, as for a handshake that does not end in time) or, without
/// one, for [`EAGAIN_PATIENCE`] (then the `EAGAIN`). tokio's and Go's connects return the
/// error instead; std's blocking connect is the API this type copies.
fn connect_with(
    addr: &SocketAddr,
    timeout: Option<Duration>,
    call: fn(libc::c_int, &SocketAddr) -> io::Result<()>,
) -> io::Result<TcpStream> {
    let family = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    let deadline = Instant::now() + timeout.unwrap_or(EAGAIN_PATIENCE);
    let mut pause = RETRY_PAUSE;
    let (owned, r) = loop {
        // SAFETY: socket(2) with constant arguments.
        let fd = unsafe {
            libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0)
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just made and own.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        match call(fd, addr) {
            Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => {
                drop(owned);
                if Instant::now() + pause >= deadline {
                    return Err(match timeout {
                        Some(_) => timed_out(),
                        None => e,
                    });
                }
                crate::sleep(pause);
                pause = (pause * 2).min(RETRY_PAUSE_MAX);
            }
            r => break (owned, r),
        }
    };
    let io = Io::new(std::net::TcpStream::from(owned))?;
    if let Err(e) = r {
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
        // What is left of the timeout after any retries.
        let left = timeout.map(|_| deadline.saturating_duration_since(Instant::now()));
        if left.is_some_and(|d| d.is_zero()) {
            return Err(timed_out());
        }
        // Done when the socket has a peer, or an error (`SO_ERROR`).
        io.op(WRITE, left, |s| match s.peer_addr() {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => match s.take_error()? {
                Some(e) => Err(e),
                None => Err(io::Error::from_raw_os_error(libc::EAGAIN)),
            },
            Err(e) => Err(e),
        })
        .map_err(|e| if e.kind() == io::ErrorKind::WouldBlock { timed_out() } else { e })?;
    }
    Ok(TcpStream { io })
}

/// A connect that did not end within its timeout.
fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection timed out")
}

fn on_user_thread() -> bool {
    crate::processor::current_task_ptr().is_some()
}

impl TcpStream {
    /// Connects to `addr` (each address in turn until one connects); a user
    /// thread parks while the connection is made.
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        if !on_user_thread() {
            return Ok(TcpStream { io: Io::new(std::net::TcpStream::connect(addr)?)? });
        }
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match connect_parking(&a, None) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")
        }))
    }

    /// Connects to `addr` within `timeout`.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if !on_user_thread() {
            return Ok(TcpStream {
                io: Io::new(std::net::TcpStream::connect_timeout(addr, timeout)?)?,
            });
        }
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        connect_parking(addr, Some(timeout))
    }

    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.get()?.local_addr()
    }

    /// Shuts down the read, write, or both halves.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.io.get()?.shutdown(how)
    }

    /// Another handle to the same socket (`dup`), with no timeouts.
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(TcpStream { io: Io::new(self.io.get()?.try_clone()?)? })
    }

    /// Bounds each read: after `d` it fails with `WouldBlock` (as std's on
    /// Linux). `Some(Duration::ZERO)` is refused, as by std.
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_read_timeout(d)
    }

    /// Bounds each write, as [`TcpStream::set_read_timeout`].
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

    /// Reads without removing the data from the queue.
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read_op(|s| s.peek(buf))
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.io.get()?.set_nodelay(on)
    }

    /// `TCP_NODELAY`.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.io.get()?.nodelay()
    }

    /// Sets `IP_TTL`.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.io.get()?.set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.io.get()?.ttl()
    }

    /// Takes the socket's pending error (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.io.get()?.take_error()
    }

    /// The std stream, in blocking mode, with this stream's timeouts.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        let (s, r, w) = self.io.into_inner()?;
        s.set_read_timeout(r)?;
        s.set_write_timeout(w)?;
        Ok(s)
    }
}

impl From<std::net::TcpStream> for TcpStream {
    /// Takes over a std stream; its socket timeouts are read over.
    fn from(s: std::net::TcpStream) -> TcpStream {
        let r = s.read_timeout().ok().flatten();
        let w = s.write_timeout().ok().flatten();
        let io = Io::wrap(s);
        let _ = io.set_read_timeout(r);
        let _ = io.set_write_timeout(w);
        TcpStream { io }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Runs `f` on a user thread of a one-processor runtime.
    fn on_runtime(f: impl FnOnce() + Send + 'static) {
        let rt = crate::Runtime::builder().processors(1).build().unwrap();
        rt.block_on(f).unwrap();
    }

    #[test]
    fn a_connect_refused_with_eagain_is_retried_until_it_goes_through() {
        // The connect(2) of the first three attempts says EAGAIN, as Linux's can under load.
        static EAGAINS_LEFT: AtomicUsize = AtomicUsize::new(3);
        fn flaky(fd: libc::c_int, addr: &SocketAddr) -> io::Result<()> {
            if EAGAINS_LEFT
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            connect_fd(fd, addr)
        }
        on_runtime(|| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let s = connect_with(&addr, None, flaky).unwrap();
            let (_server, peer) = listener.accept().unwrap();
            assert_eq!(s.local_addr().unwrap(), peer);
            assert_eq!(EAGAINS_LEFT.load(Ordering::SeqCst), 0, "every EAGAIN was retried");
        });
    }

    #[test]
    fn eagain_until_the_timeout_is_a_timeout() {
        fn always(_: libc::c_int, _: &SocketAddr) -> io::Result<()> {
            Err(io::Error::from_raw_os_error(libc::EAGAIN))
        }
        on_runtime(|| {
            let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
            let e = connect_with(&addr, Some(Duration::from_millis(20)), always).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        });
    }
}
