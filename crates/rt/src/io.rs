//! Waiting for a descriptor at the cost of a park: the poller's API for code
//! that makes its own system calls (the pthread library's `read`, `write`,
//! `accept`, `connect`, ...). Rust programs use [`crate::net`] instead.
//!
//! The contract is the one of Go's `pollDesc.wait` and of an `EAGAIN` loop:
//! put the descriptor in non-blocking mode, make the call, and when it fails
//! with `EAGAIN`/`EWOULDBLOCK` (or `EINPROGRESS` for `connect`), call
//! [`wait`] and make the call again:
//!
//! ```no_run
//! use schedlab_rt::io::{wait, Interest};
//! # fn read_some(fd: i32, buf: &mut [u8]) -> std::io::Result<usize> {
//! loop {
//!     // SAFETY: `buf` is valid for writes of its length.
//!     let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
//!     if n >= 0 {
//!         return Ok(n as usize);
//!     }
//!     let e = std::io::Error::last_os_error();
//!     if e.kind() != std::io::ErrorKind::WouldBlock {
//!         return Err(e);
//!     }
//!     wait(fd, Interest::READ, None)?;
//! }
//! # }
//! ```
//!
//! [`wait`] cannot know whether readiness came between the call's `EAGAIN`
//! and the wait, so it asks the kernel once more (a `poll(2)`) after
//! listing the thread. A caller that takes a [`snapshot`] *before* each
//! call and waits with [`wait_since`] saves that system call: the
//! snapshot's readiness counters say whether an edge came since (the
//! protocol's step 1, `poll.rs`), as `schedlab_rt::net` does:
//!
//! ```no_run
//! use schedlab_rt::io::{snapshot, wait_since, Interest};
//! # fn read_some(fd: i32, buf: &mut [u8]) -> std::io::Result<usize> {
//! loop {
//!     let before = snapshot(fd);
//!     // SAFETY: `buf` is valid for writes of its length.
//!     let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
//!     if n >= 0 {
//!         return Ok(n as usize);
//!     }
//!     let e = std::io::Error::last_os_error();
//!     if e.kind() != std::io::ErrorKind::WouldBlock {
//!         return Err(e);
//!     }
//!     wait_since(before, Interest::READ, None)?;
//! }
//! # }
//! ```
//!
//! The first [`wait`] on a descriptor registers it with the process's poller
//! (epoll, edge-triggered); [`forget`] must be called before the descriptor
//! is closed (C programs reuse numbers: a registration left behind would
//! never report the new descriptor's readiness). The protocol that keeps a
//! wake-up from being lost is in `poll.rs`.

use std::io;
use std::ops::BitOr;
use std::os::fd::RawFd;
use std::time::Instant;

/// What a [`wait`] waits for: [`Interest::READ`], [`Interest::WRITE`], or
/// both (`Interest::READ | Interest::WRITE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interest(u8);

impl Interest {
    /// The descriptor can be read (or accepted on, or has hung up or failed).
    pub const READ: Interest = Interest(crate::poll::READ);
    /// The descriptor can be written (or a `connect` finished, or it failed).
    pub const WRITE: Interest = Interest(crate::poll::WRITE);

    pub(crate) fn bits(self) -> u8 {
        self.0
    }
}

impl BitOr for Interest {
    type Output = Interest;
    fn bitor(self, o: Interest) -> Interest {
        Interest(self.0 | o.0)
    }
}

/// What a [`wait`] saw: the directions that may now make progress. A hint:
/// the call may still return `EAGAIN` (another thread took the data), and
/// the caller then waits again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness(u8);

impl Readiness {
    /// Reading may make progress.
    pub fn is_readable(self) -> bool {
        self.0 & crate::poll::READ != 0
    }
    /// Writing may make progress.
    pub fn is_writable(self) -> bool {
        self.0 & crate::poll::WRITE != 0
    }
}

/// Parks the calling user thread until `fd` is ready for `interest` (its
/// last call returned `EAGAIN`), `deadline` passes, or the descriptor is
/// [`forget`]-ed; the processor runs other threads meanwhile, and no kernel
/// thread is held.
///
/// May return early (readiness another waiter used up, a stray `unpark`
/// after which the descriptor turned out ready): always retry the call.
///
/// # Errors
///
/// - `TimedOut` at `deadline`.
/// - `Unsupported` at once, parking nothing, when the caller is not a user
///   thread (an OS thread should make the blocking call itself, or use
///   `poll(2)`).
/// - The registration's error: `EPERM` for a descriptor epoll cannot watch
///   (a regular file: its calls never return `EAGAIN` anyway), `EBADF` for
///   a closed one or one numbered past the table (2^20).
pub fn wait(fd: RawFd, interest: Interest, deadline: Option<Instant>) -> io::Result<Readiness> {
    let Some(task) = crate::processor::current_task_ref() else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("schedlab_rt::io::wait on descriptor {fd} outside a user thread"),
        ));
    };
    match crate::poll::poller()?.wait(fd, interest.bits(), None, deadline, None, None, &task)? {
        crate::poll::Woke::Ready(d) => Ok(Readiness(d)),
        crate::poll::Woke::TimedOut => Err(timed_out(fd)),
        crate::poll::Woke::Stopped => unreachable!("a wait without `stop` stopped"),
    }
}

/// A descriptor's readiness counters at a moment before a call, for
/// [`wait_since`]. Taking one makes no system call (a load of the poller's
/// table), and none at all before the process's first wait.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot {
    fd: RawFd,
    seen: Option<[u32; 2]>,
}

/// The readiness counters of `fd` now: take it before the call that may
/// return `EAGAIN`, then [`wait_since`] it.
#[inline]
pub fn snapshot(fd: RawFd) -> Snapshot {
    Snapshot { fd, seen: crate::poll::seen_if_made(fd) }
}

/// [`wait`], for a caller that took `before` ([`snapshot`]) before the call
/// that returned `EAGAIN`: returns at once if the descriptor turned ready
/// since, and otherwise parks with no further system call (`wait` makes a
/// `poll(2)` to learn what came between the call and the wait). Same
/// errors as [`wait`]; a snapshot taken before the process's first wait, or
/// of a descriptor numbered past the table, waits as [`wait`] does.
pub fn wait_since(
    before: Snapshot,
    interest: Interest,
    deadline: Option<Instant>,
) -> io::Result<Readiness> {
    wait_since_unless(before, interest, deadline, None)
}

/// [`wait_since`] that a third party can end: `stop` is asked once the
/// thread is listed and after every wake-up, and `true` ends the wait with
/// an `Interrupted` error (readiness that came first wins: `Ok`). Whoever
/// makes `stop` true must then unpark the thread ([`crate::Thread::unpark`]).
/// For a library whose blocking calls are cancellation points (a POSIX
/// thread's `pthread_cancel`) or end when a signal handler ran.
pub fn wait_since_unless(
    before: Snapshot,
    interest: Interest,
    deadline: Option<Instant>,
    stop: Option<&dyn Fn() -> bool>,
) -> io::Result<Readiness> {
    let fd = before.fd;
    let Some(task) = crate::processor::current_task_ref() else {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("schedlab_rt::io::wait_since on descriptor {fd} outside a user thread"),
        ));
    };
    let poller = crate::poll::poller()?;
    match poller.wait(fd, interest.bits(), before.seen, deadline, None, stop, &task)? {
        crate::poll::Woke::Ready(d) => Ok(Readiness(d)),
        crate::poll::Woke::TimedOut => Err(timed_out(fd)),
        crate::poll::Woke::Stopped => Err(io::Error::new(
            io::ErrorKind::Interrupted,
            format!("descriptor {fd}: the wait was stopped"),
        )),
    }
}

/// Forgets `fd`'s registration: call it before closing the descriptor.
/// Threads waiting on it wake (and their retried call sees the descriptor
/// closed); a later descriptor with the same number registers afresh.
/// Cheap when `fd` was never waited on. Callable from any thread.
pub fn forget(fd: RawFd) {
    crate::poll::forget_fd(fd);
}

pub(crate) fn timed_out(fd: RawFd) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, format!("descriptor {fd}: the wait timed out"))
}
