//! Sockets and pipes whose blocking calls park the calling user thread
//! instead of holding its kernel thread: `std::net`'s API (and
//! `std::os::unix::net`'s, and a [`pipe`]), so a thread-per-connection
//! program moves to the runtime's poller by changing an import.
//!
//! ```
//! use schedlab_rt::net::{TcpListener, TcpStream};
//! use std::io::{Read, Write};
//!
//! let rt = schedlab_rt::Runtime::builder().processors(1).build()?;
//! rt.block_on(|| {
//!     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let server = schedlab_rt::spawn(move || {
//!         let (mut s, _) = listener.accept().unwrap();
//!         let mut b = [0; 1];
//!         s.read_exact(&mut b).unwrap();
//!         s.write_all(&b).unwrap();
//!     });
//!     let mut c = TcpStream::connect(addr).unwrap();
//!     c.write_all(b"x").unwrap();
//!     let mut b = [0; 1];
//!     c.read_exact(&mut b).unwrap();
//!     assert_eq!(&b, b"x");
//!     server.join().unwrap();
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **In a user thread** a call that would block registers the descriptor
//! with the process's poller (once; epoll, edge-triggered) and parks the
//! thread until the descriptor is ready (`poll.rs` has the protocol): the
//! processor runs other threads, and a thousand idle connections hold no
//! kernel thread. Timeouts (`set_read_timeout`, `set_write_timeout`) bound
//! the park; at the timeout the call fails with `WouldBlock`, as std's does
//! on Linux. **On an OS thread** the same calls behave as std's blocking
//! calls (a `poll(2)` in place of the blocking system call).
//!
//! The descriptors are in non-blocking mode for their whole life ([`From`]
//! a std type sets it; `into_std` clears it and hands the timeouts over to
//! the socket options). `set_nonblocking` is not offered.
//!
//! **Plain `std::net` in a user thread** works too, at the cost of a
//! kernel-thread hand-off whenever a call blocks: the monitor sees the
//! kernel thread stopped and gives its processor to a spare kernel thread
//! (`blocking`), and the caller takes a processor back when the call
//! returns, so every thread waiting on a socket holds a kernel thread, as
//! with OS threads (issue 29 measured 0.35–0.8× of plain OS threads for a
//! one-byte echo server). The Rust build does not intercept those calls:
//! std makes them through libc's `read`, `recv`, `accept4`, ... and the
//! only ways to turn them into parks are to interpose those symbols for the
//! whole process (what `libschedlab_pthread.so` does for C programs, with
//! [`crate::io::wait`]) or to rewrite them in the binary; interposing libc
//! from a Rust library would change every `read` of the process, the
//! runtime's and other libraries' included, and could not tell a socket a
//! program set non-blocking itself from one it expects to block.
//!
//! **A runtime dropped** while user threads wait here: those threads never
//! run again (`Runtime`'s drop leaks parked threads), so the descriptors
//! they wait on are closed by the drop, and the objects are marked so that
//! nothing closes the number twice; a call on such an object from
//! elsewhere fails with `EBADF`. Other sockets a leaked thread holds without
//! waiting on them leak with its stack.

mod tcp;
mod udp;
mod unix;

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixIncoming, UnixListener, UnixStream};

use crate::poll::{self, Woke};
use std::io::{self, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) use poll::{READ, WRITE};

/// Sets or clears `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns; no pointers.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let new = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
        if new != flags && libc::fcntl(fd, libc::F_SETFL, new) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A descriptor-owning std object in non-blocking mode, with the state the
/// parking calls need.
pub(crate) struct Io<T: AsRawFd> {
    inner: ManuallyDrop<T>,
    /// Set when a dropped runtime closed the descriptor (`poll.rs`,
    /// `cancel_runtime`): calls fail, and the drop closes nothing.
    closed: AtomicBool,
    /// Timeouts in ns, 0 for none.
    read_timeout: AtomicU64,
    write_timeout: AtomicU64,
}

fn to_ns(d: Option<Duration>) -> io::Result<u64> {
    match d {
        None => Ok(0),
        Some(d) if d.is_zero() => {
            Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot set a 0 duration timeout"))
        }
        Some(d) => Ok(d.as_nanos().clamp(1, u64::MAX as u128) as u64),
    }
}

fn from_ns(ns: u64) -> Option<Duration> {
    (ns != 0).then(|| Duration::from_nanos(ns))
}

impl<T: AsRawFd> Io<T> {
    /// Takes `inner`, putting its descriptor in non-blocking mode.
    pub(crate) fn new(inner: T) -> io::Result<Io<T>> {
        set_nonblocking(inner.as_raw_fd(), true)?;
        Ok(Io {
            inner: ManuallyDrop::new(inner),
            closed: AtomicBool::new(false),
            read_timeout: AtomicU64::new(0),
            write_timeout: AtomicU64::new(0),
        })
    }

    /// [`Io::new`] for `From` impls: `fcntl` on an open descriptor does not fail.
    pub(crate) fn wrap(inner: T) -> Io<T> {
        Io::new(inner).expect("setting O_NONBLOCK on an open descriptor")
    }

    /// The std object, for calls that do not block.
    pub(crate) fn get(&self) -> io::Result<&T> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        Ok(&self.inner)
    }

    /// Gives the std object back in blocking mode, with the timeouts.
    pub(crate) fn into_inner(self) -> io::Result<(T, Option<Duration>, Option<Duration>)> {
        let mut this = ManuallyDrop::new(self);
        if *this.closed.get_mut() {
            return Err(closed());
        }
        let fd = this.inner.as_raw_fd();
        poll::forget_fd(fd);
        set_nonblocking(fd, false)?;
        let (r, w) =
            (from_ns(*this.read_timeout.get_mut()), from_ns(*this.write_timeout.get_mut()));
        // SAFETY: `this` is never used or dropped again.
        Ok((unsafe { ManuallyDrop::take(&mut this.inner) }, r, w))
    }

    pub(crate) fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.read_timeout.store(to_ns(d)?, Ordering::Relaxed);
        Ok(())
    }
    pub(crate) fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.write_timeout.store(to_ns(d)?, Ordering::Relaxed);
        Ok(())
    }
    pub(crate) fn read_timeout(&self) -> Option<Duration> {
        from_ns(self.read_timeout.load(Ordering::Relaxed))
    }
    pub(crate) fn write_timeout(&self) -> Option<Duration> {
        from_ns(self.write_timeout.load(Ordering::Relaxed))
    }

    /// A read-side call, retried after waits until it does not block.
    #[inline]
    pub(crate) fn read_op<R>(&self, f: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.op(READ, self.read_timeout(), f)
    }

    /// A write-side call.
    #[inline]
    pub(crate) fn write_op<R>(&self, f: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.op(WRITE, self.write_timeout(), f)
    }

    /// Makes `f` until it does not fail with `WouldBlock`, waiting for
    /// `interest` in between: parked on a user thread, in `poll(2)` on an
    /// OS thread. `WouldBlock` after `timeout`, as std's socket timeouts.
    pub(crate) fn op<R>(
        &self,
        interest: u8,
        timeout: Option<Duration>,
        mut f: impl FnMut(&T) -> io::Result<R>,
    ) -> io::Result<R> {
        let inner = self.get()?;
        let fd = inner.as_raw_fd();
        // Without a poller (it could not be made: no descriptors left), a
        // user thread waits as an OS thread does, in `poll(2)`.
        let poller = poll::poller().ok();
        let mut deadline: Option<Instant> = None;
        loop {
            // Waiting step 1 (`poll.rs`): the edge counters before the call.
            let seen = poller.and_then(|p| p.seen(fd));
            match f(inner) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                r => return r,
            }
            if deadline.is_none() {
                deadline = timeout.map(|d| Instant::now() + d);
            }
            let parking = match (poller, seen) {
                (Some(p), Some(_)) => crate::processor::current_task_ref().map(|t| (p, t)),
                _ => None,
            };
            match parking {
                Some((poller, task)) => {
                    match poller.wait(
                        fd,
                        interest,
                        seen,
                        deadline,
                        Some(&self.closed),
                        None,
                        &task,
                    )? {
                        Woke::Ready(_) | Woke::Stopped => {}
                        Woke::TimedOut => return Err(would_block()),
                    }
                }
                None => {
                    let left = match deadline {
                        Some(d) => match d.checked_duration_since(Instant::now()) {
                            Some(left) if !left.is_zero() => Some(left),
                            _ => return Err(would_block()),
                        },
                        None => None,
                    };
                    if poll::poll_one(fd, interest, left)? == 0 && deadline.is_some() {
                        return Err(would_block());
                    }
                }
            }
            if self.closed.load(Ordering::Acquire) {
                return Err(closed());
            }
        }
    }
}

impl<T: AsRawFd> Drop for Io<T> {
    fn drop(&mut self) {
        if *self.closed.get_mut() {
            // A dropped runtime closed the number, which may be reused.
            return;
        }
        poll::forget_fd(self.inner.as_raw_fd());
        // SAFETY: dropped once, here.
        unsafe { ManuallyDrop::drop(&mut self.inner) };
    }
}

impl<T: AsRawFd> AsRawFd for Io<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl<T: AsRawFd + std::fmt::Debug> std::fmt::Debug for Io<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

/// `EAGAIN`, what std's socket calls return at their timeout on Linux.
fn would_block() -> io::Error {
    io::Error::from_raw_os_error(libc::EAGAIN)
}

fn closed() -> io::Error {
    io::Error::from_raw_os_error(libc::EBADF)
}

/// Implements `Read` and `Write` for a type and for a reference to it, and
/// the descriptor traits, through its `io: Io<_>` field.
macro_rules! rw_impls {
    ($t:ty) => {
        impl std::io::Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                (&*self).read(buf)
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                (&*self).read_vectored(bufs)
            }
        }
        impl std::io::Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.io.read_op(|mut s| s.read(buf))
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                self.io.read_op(|mut s| s.read_vectored(bufs))
            }
        }
        impl std::io::Write for $t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                (&*self).write(buf)
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                (&*self).write_vectored(bufs)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl std::io::Write for &$t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.io.write_op(|mut s| s.write(buf))
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                self.io.write_op(|mut s| s.write_vectored(bufs))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.io)
            }
        }
        impl std::os::fd::AsFd for $t {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                // SAFETY: the descriptor is open as long as `self` is.
                unsafe {
                    std::os::fd::BorrowedFd::borrow_raw(std::os::fd::AsRawFd::as_raw_fd(&self.io))
                }
            }
        }
    };
}
pub(crate) use rw_impls;

/// The reading end of a [`pipe`].
#[derive(Debug)]
pub struct PipeReader {
    io: Io<std::io::PipeReader>,
}

/// The writing end of a [`pipe`].
#[derive(Debug)]
pub struct PipeWriter {
    io: Io<std::io::PipeWriter>,
}

/// A pipe whose reads and writes park the calling user thread while they
/// cannot go on (`std::io::pipe`'s API).
pub fn pipe() -> io::Result<(PipeReader, PipeWriter)> {
    let (r, w) = std::io::pipe()?;
    Ok((PipeReader { io: Io::new(r)? }, PipeWriter { io: Io::new(w)? }))
}

impl PipeReader {
    /// Bounds each read: after `d` it fails with `WouldBlock`.
    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_read_timeout(d)
    }

    /// Another handle to the same pipe end (`dup`).
    pub fn try_clone(&self) -> io::Result<PipeReader> {
        Ok(PipeReader { io: Io::new(self.io.get()?.try_clone()?)? })
    }
    /// The std pipe end, in blocking mode.
    pub fn into_std(self) -> io::Result<std::io::PipeReader> {
        self.io.into_inner().map(|(p, _, _)| p)
    }
}

impl PipeWriter {
    /// Bounds each write: after `d` it fails with `WouldBlock`.
    pub fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.io.set_write_timeout(d)
    }

    /// Another handle to the same pipe end (`dup`).
    pub fn try_clone(&self) -> io::Result<PipeWriter> {
        Ok(PipeWriter { io: Io::new(self.io.get()?.try_clone()?)? })
    }
    /// The std pipe end, in blocking mode.
    pub fn into_std(self) -> io::Result<std::io::PipeWriter> {
        self.io.into_inner().map(|(p, _, _)| p)
    }
}

impl From<std::io::PipeReader> for PipeReader {
    fn from(p: std::io::PipeReader) -> PipeReader {
        PipeReader { io: Io::wrap(p) }
    }
}

impl From<std::io::PipeWriter> for PipeWriter {
    fn from(p: std::io::PipeWriter) -> PipeWriter {
        PipeWriter { io: Io::wrap(p) }
    }
}

impl Read for PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        (&*self).read(buf)
    }
}
impl Read for &PipeReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io.read_op(|mut p| p.read(buf))
    }
}
impl Write for PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
impl Write for &PipeWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.io.write_op(|mut p| p.write(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
impl AsRawFd for PipeReader {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}
impl AsRawFd for PipeWriter {
    fn as_raw_fd(&self) -> RawFd {
        self.io.as_raw_fd()
    }
}
impl AsFd for PipeReader {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: open as long as `self` is.
        unsafe { BorrowedFd::borrow_raw(self.io.as_raw_fd()) }
    }
}
impl AsFd for PipeWriter {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: open as long as `self` is.
        unsafe { BorrowedFd::borrow_raw(self.io.as_raw_fd()) }
    }
}
